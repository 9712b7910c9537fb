//! The write path's pure half. Every API write starts as an engine `Action`;
//! the daemon translates it into an [`ApiCall`] with an [`Intent`] (whose
//! waiting it reports, or settles), and the dispatcher then
//!
//! * holds a subject's transient waiting messages for a short grace and drops
//!   them when the subject settles first ([`Holds`]),
//! * queues calls per object, one in flight at a time and in order, folding a
//!   queued call into a newer one that supersedes it ([`CallQueue`], whose
//!   rules are in `merge`),
//! * hands them out per lane (bindings; everything else) to the executor
//!   (`kube::writer`), which performs them with retries ([`Backoff`]) under a
//!   client-side rate limit.
//!
//! Modelled on kube-scheduler's `backend/api_dispatcher`. No I/O and no
//! clock: time comes in as `now`.

mod call;
mod hold;
mod merge;
mod queue;
mod retry;

pub use call::{ApiCall, Dispatch, EventTarget, Intent, Lane, ObjectId, ResourceRef, Subject};
pub use hold::Holds;
pub use queue::{Added, CallQueue, EVENT_BACKLOG};
pub use retry::Backoff;
