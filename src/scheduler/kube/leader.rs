//! Leader election over a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics: the holder renews every `retry_period`; a candidate takes over only
//! after it has observed the same lease record unchanged for `lease_duration` (a
//! local clock, so clock skew between replicas does not matter); a leader that
//! cannot renew within `renew_deadline` steps down; on shutdown the lease is
//! released so a standby takes over at once.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::fence::Fence;
use muster_core::config::LeaderElection;

/// Runs the election until `shutdown` fires. `leading` is set true while this
/// replica holds the lease.
pub struct LeaderElector {
    api: Api<Lease>,
    identity: String,
    config: LeaderElection,
    /// The last record seen and when it was first seen unchanged.
    observed: Option<(LeaseSpec, Instant)>,
    /// Opened by each successful renewal, closed on stepping down.
    fence: Arc<Fence>,
}

impl LeaderElector {
    pub fn new(
        client: kube::Client,
        identity: String,
        config: LeaderElection,
        fence: Arc<Fence>,
    ) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.resource_namespace),
            identity,
            config,
            observed: None,
            fence,
        }
    }

    /// The election loop. Returns after releasing the lease on shutdown.
    pub async fn run(mut self, leading: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let mut last_renew = Instant::now();
        loop {
            let is_leader = *leading.borrow();
            // The fence counts from when the renewal was sent: the record
            // the others see is at least that fresh.
            let sent_at = std::time::Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    last_renew = Instant::now();
                    self.fence.renewed(sent_at);
                    if !is_leader {
                        info!(identity = %self.identity, lease = %self.config.resource_name, "became leader");
                        leading.send_replace(true);
                    }
                }
                Ok(false) => {
                    if is_leader {
                        warn!(identity = %self.identity, "lease taken by another holder; stepping down");
                        self.fence.revoke();
                        leading.send_replace(false);
                    }
                }
                Err(e) => {
                    warn!(error = %e, "leader election: cannot reach the lease");
                    if is_leader && last_renew.elapsed() > self.config.renew_deadline {
                        warn!(identity = %self.identity, "failed to renew the lease within renewDeadline; stepping down");
                        self.fence.revoke();
                        leading.send_replace(false);
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.retry_period) => {}
                _ = shutdown.changed() => break,
            }
        }
        if *leading.borrow() {
            leading.send_replace(false);
            self.fence.revoke();
            if let Err(e) = self.release().await {
                warn!(error = %e, "could not release the lease on shutdown");
            } else {
                info!(identity = %self.identity, "released the lease");
            }
        }
    }

    /// One round: create, renew or take over the lease. `Ok(true)` when we hold it.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let name = self.config.resource_name.clone();
        let now = now_micro();
        let Some(mut lease) = self.api.get_opt(&name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(self.config.resource_namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.record(now.clone(), now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observe(&spec);
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        let ours = holder == self.identity;
        if !ours && !holder.is_empty() && !self.observed_expired(&spec) {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let acquire_time = if ours {
            spec.acquire_time.clone().unwrap_or_else(|| now.clone())
        } else {
            now.clone()
        };
        lease.spec = Some(self.record(acquire_time, now, transitions));
        // `replace` carries the resourceVersion we read: a concurrent writer makes
        // this fail with 409 instead of both replicas believing they lead.
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(&updated.spec.unwrap_or_default());
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn release(&mut self) -> Result<(), kube::Error> {
        let name = self.config.resource_name.clone();
        let Some(mut lease) = self.api.get_opt(&name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now_micro());
        lease.spec = Some(spec);
        self.api
            .replace(&name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }

    fn record(
        &self,
        acquire_time: MicroTime,
        renew_time: MicroTime,
        transitions: i32,
    ) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            acquire_time: Some(acquire_time),
            renew_time: Some(renew_time),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    fn observe(&mut self, spec: &LeaseSpec) {
        if self.observed.as_ref().is_none_or(|(seen, _)| seen != spec) {
            self.observed = Some((spec.clone(), Instant::now()));
        }
    }

    /// The holder has not renewed for a whole lease duration, by our own clock.
    fn observed_expired(&self, spec: &LeaseSpec) -> bool {
        let duration = spec
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(self.config.lease_duration);
        self.observed
            .as_ref()
            .is_some_and(|(_, since)| since.elapsed() >= duration)
    }
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}
