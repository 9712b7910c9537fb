//! `kubectl muster explain TARGET`: asks the leading scheduler
//! (`GET /explain`) and prints its answer; when the scheduler cannot be
//! asked, answers from the API objects instead (`fallback`), saying so.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use kube::Client;

use super::Exit;
use super::connect::{self, ClusterArgs, SchedulerArgs};
use super::fallback;
use muster_core::engine::ExplainTarget;
use muster_core::explain::{Explanation, Phase, text};

/// A standby or a busy loop answers 503: asked again this many times
/// (through a Service, the next try may reach the leader).
const TRIES: usize = 5;
const BETWEEN_TRIES: Duration = Duration::from_millis(300);

#[derive(Args, Debug, Clone)]
pub struct ExplainArgs {
    /// What to explain: pod/NAME (or NAME), podgroup/NAME, workload/NAME,
    /// compositepodgroup/NAME, podgroup.scheduling.x-k8s.io/NAME,
    /// podgroup.scheduling.volcano.sh/NAME, or a top owner (job/NAME,
    /// jobset/NAME, lws/NAME, ...). kubectl's `TYPE NAME` form works too.
    pub target: String,
    /// The name, when TARGET is a type alone (`explain podgroup NAME`).
    pub name: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub scheduler: SchedulerArgs,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

/// The `TYPE/NAME` asked about, from kubectl's forms: `TYPE/NAME`,
/// `TYPE NAME`, or a bare pod `NAME`.
pub fn resource_of(target: &str, name: Option<&str>) -> Result<String, String> {
    match (target.contains('/'), name) {
        (true, None) => Ok(target.to_string()),
        (false, None) => Ok(format!("pod/{target}")),
        (false, Some(name)) if !name.is_empty() && !name.contains('/') => {
            Ok(format!("{target}/{name}"))
        }
        (_, Some(name)) => Err(format!(
            "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (got {target:?} and {name:?})"
        )),
    }
}

/// Runs `explain`; the exit code says whether every answer is bound.
pub async fn run(args: ExplainArgs) -> Result<Exit> {
    let user = connect::user_config(&args.cluster).await?;
    let namespace = connect::namespace(&args.cluster, &user);
    let resource = resource_of(&args.target, args.name.as_deref()).map_err(anyhow::Error::msg)?;
    let target = ExplainTarget::parse(&namespace, &resource).map_err(anyhow::Error::msg)?;
    let api = Client::try_from(user.clone()).context("a client for the cluster")?;
    let answers = match ask_scheduler(&args.scheduler, &user, &api, &namespace, &resource).await {
        Ok(answers) => answers,
        Err(why) => {
            let note = format!(
                "the scheduler could not be asked ({why:#}); this answer is read from the API objects' conditions and events"
            );
            fallback::explain(&api, &target, &resource, &namespace, note)
                .await
                .with_context(|| {
                    format!("the scheduler could not be asked ({why:#}), nor the API objects read")
                })?
        }
    };
    print(&answers, args.output)?;
    let bound = answers.iter().all(|a| a.phase == Phase::Bound);
    Ok(if bound { Exit::Yes } else { Exit::No })
}

/// Writes the answers: text, or JSON (one object, or a `List` of them).
pub fn print(answers: &[Explanation], output: Output) -> Result<()> {
    match output {
        Output::Text => {
            for (i, a) in answers.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                print!("{}", text::render(a));
            }
        }
        Output::Json => {
            let doc = match answers {
                [one] => serde_json::to_value(one)?,
                many => serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many}),
            };
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
    }
    Ok(())
}

/// `GET /explain` on the scheduler, retried while it answers 503.
async fn ask_scheduler(
    args: &SchedulerArgs,
    user: &kube::Config,
    api: &Client,
    namespace: &str,
    resource: &str,
) -> Result<Vec<Explanation>> {
    let url = connect::scheduler_url(args, api).await?;
    let client = connect::scheduler_client(args, user, &url)?;
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("namespace", namespace)
        .append_pair("target", resource)
        .finish();
    let path = format!("/explain?{query}");
    let mut last = None;
    for attempt in 0..TRIES {
        if attempt > 0 {
            tokio::time::sleep(BETWEEN_TRIES).await;
        }
        let request = http::Request::get(&path)
            .body(Vec::new())
            .context("the explain request")?;
        match client.request::<Vec<Explanation>>(request).await {
            Ok(answers) => return Ok(answers),
            Err(kube::Error::Api(e)) if e.code == 503 => {
                last = Some(format!("{url}: {}", e.message))
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("asking {url}"))),
        }
    }
    anyhow::bail!("{}", last.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::resource_of;

    #[test]
    fn every_kubectl_form_names_the_same_resource() {
        assert_eq!(
            resource_of("podgroup/hi", None).as_deref(),
            Ok("podgroup/hi")
        );
        assert_eq!(
            resource_of("podgroup", Some("hi")).as_deref(),
            Ok("podgroup/hi")
        );
        assert_eq!(resource_of("hi-0", None).as_deref(), Ok("pod/hi-0"));
        assert!(resource_of("podgroup/hi", Some("lo")).is_err());
        assert!(resource_of("podgroup", Some("a/b")).is_err());
    }
}
