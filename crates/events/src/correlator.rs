//! client-go's `EventCorrelator` (tools/record/events_cache.go): what to do
//! with each event before it is written.
//!
//! 1. **Aggregation**: events alike but for their message (same source,
//!    object, type, reason and reporter) are grouped; once
//!    [`aggregate_max_events`](crate::RecorderConfig::aggregate_max_events)
//!    distinct messages were seen with no gap longer than
//!    [`aggregate_window`](crate::RecorderConfig::aggregate_window), the
//!    event is replaced by one aggregate event,
//!    `(combined from similar events): <message>`.
//! 2. **Counting**: an event identical to one already written (same
//!    source, object, type, reason and message) is not created again: the
//!    existing one is patched with `count + 1`, the new `lastTimestamp` and
//!    message.
//! 3. **Spam filter**: a token bucket per source and object (burst
//!    [`spam_burst`](crate::RecorderConfig::spam_burst), one token back
//!    every [`spam_refill`](crate::RecorderConfig::spam_refill)); an event
//!    finding it empty is not written.
//!
//! Each step keeps its state in its own bounded LRU cache, keyed by the
//! event's fields, so correlating an event costs a constant number of
//! cache operations however many events came before.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::json;

use crate::lru::Lru;

/// The message prefix of an aggregate event, as client-go's
/// `EventAggregatorByReasonMessageFunc`.
pub const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";

/// The tuning of the correlator (see [`crate::RecorderConfig`]).
#[derive(Debug, Clone)]
pub(crate) struct CorrelatorConfig {
    pub(crate) cache_size: usize,
    pub(crate) aggregate_max_events: usize,
    pub(crate) aggregate_window: Duration,
    pub(crate) spam_burst: u32,
    pub(crate) spam_refill: Duration,
}

/// What to write for one event.
#[derive(Debug)]
pub(crate) enum Correlated {
    /// Create this event.
    Create(Box<Event>),
    /// Patch the existing event (named in `event`) with `patch`, a strategic
    /// merge patch of `count`, `lastTimestamp` and `message`; create
    /// `event` if it is gone.
    Patch {
        event: Box<Event>,
        patch: serde_json::Value,
    },
    /// Write nothing: the spam filter refused it.
    Skip,
}

/// Events alike but for their message, seen lately.
struct AggregateRecord {
    /// The distinct messages seen (at most `aggregate_max_events`).
    messages: Vec<String>,
    last_seen: Timestamp,
}

/// What the API server has of an event written before.
struct Observation {
    count: i32,
    first_timestamp: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

/// client-go's token bucket (`flowcontrol.NewTokenBucketRateLimiter`):
/// starts full, refills continuously.
struct TokenBucket {
    tokens: f64,
    last: Timestamp,
}

/// Filters, aggregates and counts events; see the module documentation.
pub(crate) struct Correlator {
    config: CorrelatorConfig,
    aggregates: Lru<String, AggregateRecord>,
    observations: Lru<String, Observation>,
    spam: Lru<String, TokenBucket>,
}

/// Joins fields into a cache key. The separator cannot occur in names,
/// kinds or reasons, so distinct field tuples make distinct keys.
fn key<'a>(fields: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let mut out = String::with_capacity(160);
    for field in fields {
        out.push_str(field.unwrap_or(""));
        out.push('\u{1f}');
    }
    out
}

fn source_fields(event: &Event) -> [Option<&str>; 2] {
    let source = event.source.as_ref();
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
    ]
}

/// client-go's `getEventKey`: an event identical to another.
fn event_key(event: &Event) -> String {
    let o = &event.involved_object;
    key(source_fields(event).into_iter().chain([
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.field_path.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
        event.type_.as_deref(),
        event.reason.as_deref(),
        event.message.as_deref(),
    ]))
}

/// client-go's `EventAggregatorByReasonFunc`: events alike but for their
/// message.
fn aggregate_key(event: &Event) -> String {
    let o = &event.involved_object;
    key(source_fields(event).into_iter().chain([
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
        event.type_.as_deref(),
        event.reason.as_deref(),
        event.reporting_component.as_deref(),
        event.reporting_instance.as_deref(),
    ]))
}

/// client-go's `getSpamKey`: one source about one object.
fn spam_key(event: &Event) -> String {
    let o = &event.involved_object;
    key(source_fields(event).into_iter().chain([
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
    ]))
}

/// `later - earlier`, zero if the clock went backwards.
fn elapsed(earlier: Timestamp, later: Timestamp) -> Duration {
    Duration::try_from(later.duration_since(earlier)).unwrap_or(Duration::ZERO)
}

impl Correlator {
    pub(crate) fn new(config: CorrelatorConfig) -> Self {
        Self {
            aggregates: Lru::new(config.cache_size),
            observations: Lru::new(config.cache_size),
            spam: Lru::new(config.cache_size),
            config,
        }
    }

    /// Cache entries looked up, inserted or evicted so far, over all three
    /// caches: the work correlating has cost.
    pub(crate) fn entries_touched(&self) -> u64 {
        self.aggregates.touched() + self.observations.touched() + self.spam.touched()
    }

    /// Entries held, over all three caches.
    pub(crate) fn entries(&self) -> usize {
        self.aggregates.len() + self.observations.len() + self.spam.len()
    }

    /// Decides what to write for `event` (built as a new event: count 1,
    /// first and last timestamp `now`), as client-go's `EventCorrelate`.
    /// `name` makes the name of an aggregate event.
    pub(crate) fn correlate(
        &mut self,
        event: Event,
        now: Timestamp,
        name: impl FnOnce(&str) -> String,
    ) -> Correlated {
        let (mut event, key) = self.aggregate(event, now, name);
        let patch = self.observe(&mut event, key);
        if !self.allow(&event, now) {
            return Correlated::Skip;
        }
        match patch {
            Some(patch) => Correlated::Patch {
                event: Box::new(event),
                patch,
            },
            None => Correlated::Create(Box::new(event)),
        }
    }

    /// Records what the API server answered, so the next identical event
    /// patches this one.
    pub(crate) fn update_state(&mut self, written: &Event) {
        self.observations.insert(
            event_key(written),
            Observation {
                count: written.count.unwrap_or(1),
                first_timestamp: written.first_timestamp.clone(),
                name: written.metadata.name.clone(),
                resource_version: written.metadata.resource_version.clone(),
            },
        );
    }

    /// The aggregation step: the event to go on with and its counting key.
    fn aggregate(
        &mut self,
        event: Event,
        now: Timestamp,
        name: impl FnOnce(&str) -> String,
    ) -> (Event, String) {
        let max_events = self.config.aggregate_max_events.max(1);
        let window = self.config.aggregate_window;
        let aggregate_key = aggregate_key(&event);
        let (inserted, record) = self
            .aggregates
            .entry(aggregate_key.clone(), || AggregateRecord {
                messages: Vec::new(),
                last_seen: now,
            });
        if !inserted && elapsed(record.last_seen, now) > window {
            record.messages.clear();
        }
        let message = event.message.as_deref().unwrap_or("");
        // At most `max_events` entries: a constant bound on this scan.
        if !record.messages.iter().any(|m| m == message) {
            record.messages.push(message.to_owned());
        }
        record.last_seen = now;
        if record.messages.len() < max_events {
            let key = event_key(&event);
            return (event, key);
        }
        // Do not grow the set beyond the threshold.
        record.messages.pop();

        let object_name = event.involved_object.name.as_deref().unwrap_or("");
        let stamp = Some(Time(now));
        let aggregate = Event {
            metadata: ObjectMeta {
                name: Some(name(object_name)),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: stamp.clone(),
            last_timestamp: stamp,
            message: Some(format!("{AGGREGATE_MESSAGE_PREFIX}{message}")),
            type_: event.type_.clone(),
            reason: event.reason.clone(),
            source: event.source.clone(),
            // client-go leaves these out of the aggregate; keeping them
            // lets `kubectl events` still say which controller reported.
            reporting_component: event.reporting_component.clone(),
            reporting_instance: event.reporting_instance.clone(),
            involved_object: event.involved_object,
            ..Event::default()
        };
        (aggregate, aggregate_key)
    }

    /// The counting step: turns a repeat into a patch of the event written
    /// before, and remembers this one.
    fn observe(&mut self, event: &mut Event, key: String) -> Option<serde_json::Value> {
        let (inserted, seen) = self.observations.entry(key, || Observation {
            count: 0,
            first_timestamp: None,
            name: None,
            resource_version: None,
        });
        let patch = if !inserted && seen.count > 0 {
            event.metadata.name = seen.name.clone();
            event.metadata.resource_version = seen.resource_version.clone();
            event.first_timestamp = seen.first_timestamp.clone();
            event.count = Some(seen.count.saturating_add(1));
            Some(json!({
                "count": event.count,
                "lastTimestamp": event.last_timestamp,
                "message": event.message,
            }))
        } else {
            None
        };
        seen.count = event.count.unwrap_or(1);
        seen.first_timestamp = event.first_timestamp.clone();
        seen.name = event.metadata.name.clone();
        seen.resource_version = event.metadata.resource_version.clone();
        patch
    }

    /// The spam filter: whether the source may write about the object now.
    fn allow(&mut self, event: &Event, now: Timestamp) -> bool {
        let burst = f64::from(self.config.spam_burst.max(1));
        let refill = self.config.spam_refill;
        let (_, bucket) = self.spam.entry(spam_key(event), || TokenBucket {
            tokens: burst,
            last: now,
        });
        if !refill.is_zero() {
            let earned = elapsed(bucket.last, now).as_secs_f64() / refill.as_secs_f64();
            bucket.tokens = (bucket.tokens + earned).min(burst);
        } else {
            bucket.tokens = burst;
        }
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

    fn config() -> CorrelatorConfig {
        CorrelatorConfig {
            cache_size: 4096,
            aggregate_max_events: 10,
            aggregate_window: Duration::from_secs(600),
            spam_burst: 25,
            spam_refill: Duration::from_secs(300),
        }
    }

    fn event(object: &str, reason: &str, message: &str, now: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{}", now.as_nanosecond())),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                kind: Some("ReplicaSet".into()),
                namespace: Some("ns".into()),
                name: Some(object.into()),
                uid: Some(format!("uid-{object}")),
                ..ObjectReference::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            source: Some(EventSource {
                component: Some("replicaset-controller".into()),
                host: None,
            }),
            ..Event::default()
        }
    }

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn name(object: &str) -> String {
        format!("{object}.aggregate")
    }

    /// Correlates and, like the recorder after a successful write, feeds
    /// the written event back.
    fn write(c: &mut Correlator, e: Event, now: Timestamp) -> Correlated {
        let out = c.correlate(e, now, name);
        match &out {
            Correlated::Create(e) | Correlated::Patch { event: e, .. } => c.update_state(e),
            Correlated::Skip => {}
        }
        out
    }

    #[test]
    fn an_identical_event_patches_count_and_last_timestamp() {
        let mut c = Correlator::new(config());
        let first = write(&mut c, event("web", "Scaled", "up to 3", t(0)), t(0));
        let Correlated::Create(created) = first else {
            panic!("{first:?}")
        };
        let again = write(&mut c, event("web", "Scaled", "up to 3", t(5)), t(5));
        let Correlated::Patch {
            event: patched,
            patch,
        } = again
        else {
            panic!("{again:?}")
        };
        assert_eq!(patched.metadata.name, created.metadata.name);
        assert_eq!(patched.count, Some(2));
        assert_eq!(patched.first_timestamp, Some(Time(t(0))));
        assert_eq!(
            patch,
            json!({"count": 2, "lastTimestamp": Time(t(5)), "message": "up to 3"})
        );
        let third = write(&mut c, event("web", "Scaled", "up to 3", t(9)), t(9));
        assert!(matches!(third, Correlated::Patch { event, .. } if event.count == Some(3)));
    }

    #[test]
    fn the_tenth_distinct_message_within_the_window_becomes_an_aggregate() {
        let mut c = Correlator::new(config());
        for i in 0..9 {
            let out = write(
                &mut c,
                event("web", "Created", &format!("pod {i}"), t(i)),
                t(i),
            );
            assert!(matches!(out, Correlated::Create(_)), "{i}: {out:?}");
        }
        let out = write(&mut c, event("web", "Created", "pod 9", t(9)), t(9));
        let Correlated::Create(aggregate) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            aggregate.message.as_deref(),
            Some("(combined from similar events): pod 9")
        );
        assert_eq!(aggregate.metadata.name.as_deref(), Some("web.aggregate"));
        assert_eq!(aggregate.reason.as_deref(), Some("Created"));
        // Later similar events count on the aggregate, whatever the message.
        let out = write(&mut c, event("web", "Created", "pod 10", t(10)), t(10));
        let Correlated::Patch {
            event: patched,
            patch,
        } = out
        else {
            panic!("{out:?}")
        };
        assert_eq!(patched.metadata.name.as_deref(), Some("web.aggregate"));
        assert_eq!(patched.count, Some(2));
        assert_eq!(
            patch["message"], "(combined from similar events): pod 10",
            "{patch}"
        );
        // Another reason or object is not part of the group.
        let other = write(&mut c, event("web", "Deleted", "pod 0", t(11)), t(11));
        assert!(matches!(other, Correlated::Create(e) if e.message.as_deref() == Some("pod 0")));
    }

    #[test]
    fn a_quiet_window_starts_the_group_again() {
        let mut c = Correlator::new(config());
        for i in 0..9 {
            write(
                &mut c,
                event("web", "Created", &format!("pod {i}"), t(i)),
                t(i),
            );
        }
        // More than ten minutes after the last similar event.
        let later = t(8 + 601);
        let out = write(&mut c, event("web", "Created", "pod 9", later), later);
        assert!(
            matches!(&out, Correlated::Create(e) if e.message.as_deref() == Some("pod 9")),
            "{out:?}"
        );
    }

    #[test]
    fn the_spam_filter_allows_a_burst_of_25_then_one_per_five_minutes() {
        let mut c = Correlator::new(config());
        let mut written = 0;
        for i in 0..40 {
            let out = write(&mut c, event("web", &format!("R{i}"), "m", t(0)), t(0));
            if !matches!(out, Correlated::Skip) {
                written += 1;
            }
        }
        assert_eq!(written, 25);
        // Another object has its own bucket.
        assert!(!matches!(
            write(&mut c, event("db", "R", "m", t(0)), t(0)),
            Correlated::Skip
        ));
        // A token comes back after five minutes, not before.
        assert!(matches!(
            write(&mut c, event("web", "Late", "m", t(299)), t(299)),
            Correlated::Skip
        ));
        assert!(!matches!(
            write(&mut c, event("web", "Later", "m", t(301)), t(301)),
            Correlated::Skip
        ));
        assert!(matches!(
            write(&mut c, event("web", "Again", "m", t(302)), t(302)),
            Correlated::Skip
        ));
    }
}
