//! Events on the owner: the upstream reasons, and the seam behind which the
//! event recorder sits.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

/// Event reason recorded on the owner when a child was created.
pub const SUCCESSFUL_CREATE_REASON: &str = "SuccessfulCreate";
/// Event reason recorded on the owner when creating a child failed.
pub const FAILED_CREATE_REASON: &str = "FailedCreate";
/// Event reason recorded on the owner when a child was deleted.
pub const SUCCESSFUL_DELETE_REASON: &str = "SuccessfulDelete";
/// Event reason recorded on the owner when deleting a child failed.
pub const FAILED_DELETE_REASON: &str = "FailedDelete";

/// Why an event was not recorded (only ever logged).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SinkError {
    /// kube-runtime's recorder failed to write it.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// ctrlkit's recorder could not queue it.
    #[error(transparent)]
    Queue(#[from] ctrlkit_events::PublishError),
}

/// Where a child control's events go.
///
/// Kept crate-private on purpose: by default it is ctrlkit's
/// [`ctrlkit_events::Recorder`] (client-go's aggregation, counting and spam
/// filter; core/v1 events; never waits), or kube-runtime's [`Recorder`]
/// for controls built with `with_recorder`.
pub(crate) trait EventSink: Send + Sync {
    fn publish<'a>(
        &'a self,
        event: &'a Event,
        regarding: &'a ObjectReference,
    ) -> BoxFuture<'a, Result<(), SinkError>>;
}

impl EventSink for Recorder {
    fn publish<'a>(
        &'a self,
        event: &'a Event,
        regarding: &'a ObjectReference,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move { Ok(Recorder::publish(self, event, regarding).await?) })
    }
}

impl EventSink for ctrlkit_events::Recorder {
    fn publish<'a>(
        &'a self,
        event: &'a Event,
        regarding: &'a ObjectReference,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        // Queues and returns: nothing to wait for.
        let queued = ctrlkit_events::Recorder::publish(self, event, regarding);
        Box::pin(std::future::ready(queued.map_err(SinkError::from)))
    }
}

/// One event to record on an owner.
pub(crate) struct OwnerEvent<'a> {
    pub(crate) type_: EventType,
    pub(crate) reason: &'a str,
    pub(crate) action: &'a str,
    pub(crate) note: String,
    pub(crate) related: Option<ObjectReference>,
}

/// Publishes `event` on `owner` through `sink`, if any. A failure is only
/// logged: an event never fails the operation it reports.
pub(crate) async fn record(
    sink: Option<&Arc<dyn EventSink>>,
    owner: &ObjectReference,
    event: OwnerEvent<'_>,
) {
    let Some(sink) = sink else {
        return;
    };
    let reason = event.reason;
    let event = Event {
        type_: event.type_,
        reason: reason.to_owned(),
        note: Some(truncate_note(event.note)),
        action: event.action.to_owned(),
        secondary: event.related,
    };
    match sink.publish(&event, owner).await {
        Ok(()) => {}
        // The recorder logs its own drops (throttled): not once more here.
        Err(SinkError::Queue(ctrlkit_events::PublishError::QueueFull { .. })) => {}
        Err(error) => tracing::warn!(
            %error,
            reason,
            owner = owner.name.as_deref().unwrap_or(""),
            namespace = owner.namespace.as_deref().unwrap_or(""),
            "failed to record event"
        ),
    }
}

/// The events API rejects notes over 1 kB; a long API error message must
/// not cost us the event, so it is cut (at a character boundary).
pub(crate) fn truncate_note(mut note: String) -> String {
    const MAX_NOTE_BYTES: usize = 1024;
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES - '…'.len_utf8();
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push('…');
    }
    note
}

#[cfg(test)]
mod tests {
    use super::truncate_note;

    #[test]
    fn notes_are_cut_to_one_kilobyte_on_a_char_boundary() {
        assert_eq!(truncate_note("short".into()), "short");
        let exact = "a".repeat(1024);
        assert_eq!(truncate_note(exact.clone()), exact);
        for long in [
            "é".repeat(700),
            "x".repeat(5000),
            format!("a{}", "日".repeat(400)),
        ] {
            let cut = truncate_note(long.clone());
            assert!(cut.len() <= 1024, "{}", cut.len());
            assert!(cut.ends_with('…'));
            assert!(long.starts_with(cut.trim_end_matches('…')));
        }
    }
}
