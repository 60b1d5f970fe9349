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

/// Where a child control's events go.
///
/// Kept crate-private on purpose: today it is kube-runtime's [`Recorder`];
/// a later change can put an aggregating or rate-limited recorder behind
/// it without touching the child controls.
pub(crate) trait EventSink: Send + Sync {
    fn publish<'a>(
        &'a self,
        event: &'a Event,
        regarding: &'a ObjectReference,
    ) -> BoxFuture<'a, Result<(), kube::Error>>;
}

impl EventSink for Recorder {
    fn publish<'a>(
        &'a self,
        event: &'a Event,
        regarding: &'a ObjectReference,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        Box::pin(Recorder::publish(self, event, regarding))
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
    if let Err(error) = sink.publish(&event, owner).await {
        tracing::warn!(
            %error,
            reason,
            owner = owner.name.as_deref().unwrap_or(""),
            namespace = owner.namespace.as_deref().unwrap_or(""),
            "failed to record event"
        );
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
