//! [`PodControl`] backed by the Kubernetes API, recording events on the owner.

use std::fmt;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client};

use crate::error::is_namespace_terminating_status;
use crate::template::pod_from_template;
use crate::{PodControl, PodControlError};

/// Event reason recorded on the owner when a pod was created.
pub const SUCCESSFUL_CREATE_POD_REASON: &str = "SuccessfulCreate";
/// Event reason recorded on the owner when creating a pod failed.
pub const FAILED_CREATE_POD_REASON: &str = "FailedCreate";
/// Event reason recorded on the owner when a pod was deleted.
pub const SUCCESSFUL_DELETE_POD_REASON: &str = "SuccessfulDelete";
/// Event reason recorded on the owner when deleting a pod failed.
pub const FAILED_DELETE_POD_REASON: &str = "FailedDelete";

/// Event action of the create events.
const CREATE_ACTION: &str = "CreatePod";
/// Event action of the delete events.
const DELETE_ACTION: &str = "DeletePod";

/// The [`PodControl`] to use against a real (or simulated) API server.
///
/// - `create_pods` builds the pod with [`pod_from_template`], `POST`s it and
///   records `Normal SuccessfulCreate "Created pod: <name>"` on the owner, or
///   `Warning FailedCreate "Error creating: <error>"` if the API refuses it.
///   A refusal because the namespace is being deleted becomes
///   [`PodControlError::NamespaceTerminating`] and records no event (the
///   owner is about to go away; see [`is_namespace_terminating_status`] for
///   how it is recognised). A template that cannot make a valid pod fails
///   with [`PodControlError::InvalidTemplate`] before any request or event.
/// - `delete_pod` `DELETE`s the pod, sending the preconditions if given, and
///   records `Normal SuccessfulDelete "Deleted pod: <name>"` or
///   `Warning FailedDelete "Error deleting: <error>"`. A pod that is already
///   gone (404) is success and records nothing.
/// - `patch_pod` sends a strategic merge patch
///   (`application/strategic-merge-patch+json`) and records nothing.
///
/// Events go through kube-runtime's [`Recorder`] (the `events.k8s.io/v1`
/// API), in the owner's namespace, with the pod as the event's related
/// object on success and on failed deletes. They are published before the
/// method returns; a failure to publish one is logged with `tracing` at warn
/// level and never fails the pod operation. Note that the recorder folds
/// repeats of the same reason on the same owner and related object into one
/// event series, keeping the first message.
///
/// The client needs `create`, `delete` and `patch` on `pods` and `create` and
/// `patch` on `events.k8s.io` `events`.
#[derive(Clone)]
pub struct KubePodControl {
    client: Client,
    recorder: Option<Recorder>,
}

impl fmt::Debug for KubePodControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubePodControl")
            .field("records_events", &self.recorder.is_some())
            .finish_non_exhaustive()
    }
}

impl KubePodControl {
    /// A pod control that records events as `reporter` (usually the
    /// controller's name, e.g. `"replicaset-controller"`).
    pub fn new(client: Client, reporter: impl Into<Reporter>) -> Self {
        let recorder = Recorder::new(client.clone(), reporter.into());
        Self::with_recorder(client, recorder)
    }

    /// A pod control that records events through an existing `recorder`
    /// (which may use a different client).
    pub fn with_recorder(client: Client, recorder: Recorder) -> Self {
        Self {
            client,
            recorder: Some(recorder),
        }
    }

    /// A pod control that records no events.
    pub fn without_events(client: Client) -> Self {
        Self {
            client,
            recorder: None,
        }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Publishes an event on `owner`; failures are only logged.
    async fn record(
        &self,
        owner: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncate_note(note)),
            action: action.to_owned(),
            secondary: related,
        };
        if let Err(error) = recorder.publish(&event, owner).await {
            tracing::warn!(
                %error,
                reason,
                owner = owner.name.as_deref().unwrap_or(""),
                namespace = owner.namespace.as_deref().unwrap_or(""),
                "failed to record event"
            );
        }
    }
}

/// What to show of an API error in an event: the API server's message when
/// there is one (as upstream prints a `StatusError`), else the error itself.
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// The events API rejects notes over 1 kB; a long API error message must
/// not cost us the event, so it is cut (at a character boundary).
fn truncate_note(mut note: String) -> String {
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

fn pod_reference(namespace: &str, name: &str, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        uid: uid.map(str::to_owned),
        ..ObjectReference::default()
    }
}

#[async_trait]
impl PodControl for KubePodControl {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<Pod, PodControlError> {
        let owner_name = owner.name.as_deref().unwrap_or(&controller_ref.name);
        let pod = pod_from_template(template, owner_name, controller_ref)?;
        match self
            .pods(namespace)
            .create(&PostParams::default(), &pod)
            .await
        {
            Ok(created) => {
                let name = created.metadata.name.clone().unwrap_or_default();
                tracing::debug!(namespace, pod = %name, owner = owner_name, "created pod");
                let related = pod_reference(namespace, &name, created.metadata.uid.as_deref());
                self.record(
                    owner,
                    EventType::Normal,
                    SUCCESSFUL_CREATE_POD_REASON,
                    CREATE_ACTION,
                    format!("Created pod: {name}"),
                    Some(related),
                )
                .await;
                Ok(created)
            }
            Err(kube::Error::Api(status)) if is_namespace_terminating_status(&status) => {
                tracing::debug!(
                    namespace,
                    owner = owner_name,
                    "namespace is terminating, pod not created"
                );
                Err(PodControlError::NamespaceTerminating {
                    namespace: namespace.to_owned(),
                })
            }
            Err(error) => {
                self.record(
                    owner,
                    EventType::Warning,
                    FAILED_CREATE_POD_REASON,
                    CREATE_ACTION,
                    format!("Error creating: {}", describe(&error)),
                    None,
                )
                .await;
                Err(PodControlError::Api(error))
            }
        }
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        let params = DeleteParams {
            preconditions: preconditions.map(|p| kube::api::Preconditions {
                resource_version: p.resource_version.clone(),
                uid: p.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        tracing::debug!(namespace, pod = name, "deleting pod");
        let related = pod_reference(
            namespace,
            name,
            preconditions.and_then(|p| p.uid.as_deref()),
        );
        match self.pods(namespace).delete(name, &params).await {
            Ok(_) => {
                self.record(
                    owner,
                    EventType::Normal,
                    SUCCESSFUL_DELETE_POD_REASON,
                    DELETE_ACTION,
                    format!("Deleted pod: {name}"),
                    Some(related),
                )
                .await;
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                tracing::debug!(namespace, pod = name, "pod has already been deleted");
                Ok(())
            }
            Err(error) => {
                self.record(
                    owner,
                    EventType::Warning,
                    FAILED_DELETE_POD_REASON,
                    DELETE_ACTION,
                    format!("Error deleting: {}", describe(&error)),
                    Some(related),
                )
                .await;
                Err(PodControlError::Api(error))
            }
        }
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Pod, PodControlError> {
        let patched = self
            .pods(namespace)
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?;
        Ok(patched)
    }
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
