//! A Kubernetes event recorder for any controller, with client-go's
//! `tools/record` semantics, so `kubectl describe` shows what it shows for
//! the kube-controller-manager's controllers.
//!
//! [`Recorder::publish`] queues an event about an object and returns at
//! once; a background task decides what to write, as client-go's
//! `EventCorrelator` does, and writes core/v1 `Event`s:
//!
//! - **Counting**: an event identical to one written before (same source,
//!   object, type, reason and message) patches that one — `count + 1`, the
//!   new `lastTimestamp` — instead of creating another.
//! - **Aggregation**: after 10 events alike but for their message within
//!   10 minutes of each other, similar events become one aggregate event,
//!   `(combined from similar events): <latest message>`, counted as above.
//! - **Spam filter**: one source may write 25 events about one object in
//!   a burst, then one every 5 minutes; the rest are not written.
//!
//! Each of these keeps its state in a bounded LRU cache (4096 entries, as
//! client-go) looked up by key, so the work per event is a constant number
//! of cache operations however many events were recorded before
//! ([`RecorderStats::cache_entries_touched`] counts them). kube-runtime's
//! `Recorder`, by contrast, walks its whole cache on every `publish`.
//!
//! Writes about different objects overlap (16 at once by default,
//! [`RecorderConfig::max_in_flight`]; client-go writes one at a time), so a
//! burst of events — one per pod a controller creates — keeps pace with an
//! API server that answers quickly; the events about one object are
//! written one after another, so a repeat's patch never overtakes its
//! create. The queue is bounded (1000 events, as client-go): when the API
//! server cannot keep up, further events are dropped and counted
//! ([`RecorderStats::dropped`]) rather than blocking the controller. A write
//! that fails in transport is tried again (up to 12 times, 10 s apart); an
//! answer from the API server is final. [`Recorder::flush`] waits for what
//! is queued; [`Recorder::shutdown`] writes it (one try each) and stops.
//! Tuning lives in [`RecorderConfig`].
//!
//! Time comes from tokio's clock (anchored to the wall clock when the
//! recorder is made), so tests on paused time drive the windows and the
//! spam filter with `tokio::time::advance`.
//!
//! [`undecodable_warning`] adapts a recorder into an informer handler that
//! records a `Warning DecodeFailed` event on every object the informer
//! cannot decode.
//!
//! The client needs `create` and `patch` on `events` in the core API group
//! (`""`).
//!
//! # Example
//!
//! ```no_run
//! use ctrlkit_events::Recorder;
//! use k8s_openapi::api::apps::v1::ReplicaSet;
//! use kube::Resource;
//! use kube::runtime::events::{Event, EventType};
//!
//! # async fn example(client: kube::Client, rs: ReplicaSet) {
//! let recorder = Recorder::new(client, "replicaset-controller");
//! let event = Event {
//!     type_: EventType::Normal,
//!     reason: "SuccessfulCreate".into(),
//!     note: Some("Created pod: web-x7k2p".into()),
//!     action: "CreatePod".into(),
//!     secondary: None,
//! };
//! // Never waits; an error means the event was dropped.
//! if let Err(error) = recorder.publish(&event, &rs.object_ref(&())) {
//!     tracing::debug!(%error, "event dropped");
//! }
//! // On the way out: write what is queued.
//! recorder.shutdown().await;
//! # }
//! ```

mod correlator;
mod error;
mod lru;
mod recorder;
mod undecodable;
mod writer;

pub use correlator::AGGREGATE_MESSAGE_PREFIX;
pub use error::{ConfigError, PublishError, WriteError};
pub use recorder::{Recorder, RecorderConfig, RecorderStats};
pub use undecodable::{DECODE_FAILED_REASON, UndecodableWarning, undecodable_warning};

// Re-exported so callers need not name kube-runtime's module.
pub use kube::runtime::events::{Event, EventType, Reporter};
