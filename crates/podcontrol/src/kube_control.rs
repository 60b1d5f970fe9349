//! [`PodControl`] backed by the Kubernetes API: the generic
//! [`KubeChildControl`] for pods, with a pod template in front.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use ctrlkit_childcontrol::{ChildControl, ChildLabeller, KubeChildControl, WriteGate};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::Client;
use kube::api::Patch;
use kube::runtime::events::{Recorder, Reporter};

use crate::template::pod_from_template;
use crate::{PodControl, PodControlError};

/// Event reason recorded on the owner when a pod was created.
pub const SUCCESSFUL_CREATE_POD_REASON: &str = ctrlkit_childcontrol::SUCCESSFUL_CREATE_REASON;
/// Event reason recorded on the owner when creating a pod failed.
pub const FAILED_CREATE_POD_REASON: &str = ctrlkit_childcontrol::FAILED_CREATE_REASON;
/// Event reason recorded on the owner when a pod was deleted.
pub const SUCCESSFUL_DELETE_POD_REASON: &str = ctrlkit_childcontrol::SUCCESSFUL_DELETE_REASON;
/// Event reason recorded on the owner when deleting a pod failed.
pub const FAILED_DELETE_POD_REASON: &str = ctrlkit_childcontrol::FAILED_DELETE_REASON;

/// The [`PodControl`] to use against a real (or simulated) API server.
///
/// - `create_pods` builds the pod with [`pod_from_template`] and hands it to
///   the generic [`KubeChildControl<Pod>`], which `POST`s it and records
///   `Normal SuccessfulCreate "Created pod: <name>"` on the owner, or
///   `Warning FailedCreate "Error creating: <message>"` (the API server's
///   message) if the API refuses it. A refusal because the namespace is
///   being deleted becomes [`PodControlError::NamespaceTerminating`] and
///   records no event (the owner is about to go away; see
///   [`is_namespace_terminating_status`](crate::is_namespace_terminating_status)
///   for how it is recognised). A template that cannot make a valid pod
///   fails with [`PodControlError::InvalidTemplate`] before any request or
///   event.
/// - `delete_pod` `DELETE`s the pod, sending the preconditions if given, and
///   records `Normal SuccessfulDelete "Deleted pod: <name>"` or
///   `Warning FailedDelete "Error deleting: <message>"`. A pod that is
///   already gone (404) is success and records nothing.
/// - `patch_pod` sends a strategic merge patch
///   (`application/strategic-merge-patch+json`) and records nothing.
///
/// Events go through a [`ctrlkit_events::Recorder`] (core/v1 events, as
/// the kube-controller-manager writes them, with client-go's aggregation,
/// counting and spam filter; see [`KubeChildControl`]), in the owner's
/// namespace, with the pod as the event's related object on success and
/// on failed deletes. They are queued for a background task, never waited
/// for; a failure to queue or write one is logged with `tracing` and never
/// fails the pod operation. [`with_recorder`](Self::with_recorder) keeps
/// kube-runtime's [`Recorder`] (`events.k8s.io/v1`, published before the
/// method returns).
///
/// With a [write gate](Self::with_write_gate), every write is checked
/// first and may be refused with [`PodControlError::WriteRefused`].
///
/// The client needs `create`, `delete` and `patch` on `pods` and `create` and
/// `patch` on `events` in the core API group (`""`; `events.k8s.io` with
/// [`with_recorder`](Self::with_recorder)).
#[derive(Clone)]
pub struct KubePodControl {
    pods: KubeChildControl<Pod>,
}

impl fmt::Debug for KubePodControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("KubePodControl").field(&self.pods).finish()
    }
}

/// The pod control in front of `pods`, which keeps its client, events,
/// write gate, labeller and create mode (e.g. a manager's fenced child
/// control).
impl From<KubeChildControl<Pod>> for KubePodControl {
    fn from(pods: KubeChildControl<Pod>) -> Self {
        Self { pods }
    }
}

impl KubePodControl {
    /// A pod control that records events as `reporter` (usually the
    /// controller's name, e.g. `"replicaset-controller"`).
    pub fn new(client: Client, reporter: impl Into<Reporter>) -> Self {
        Self {
            pods: KubeChildControl::new(client, reporter),
        }
    }

    /// A pod control that records events through an existing ctrlkit
    /// `recorder` (which may use a different client, and may be shared).
    pub fn with_event_recorder(client: Client, recorder: ctrlkit_events::Recorder) -> Self {
        Self {
            pods: KubeChildControl::with_event_recorder(client, recorder),
        }
    }

    /// A pod control that records events through an existing kube-runtime
    /// `recorder` (which may use a different client), in the
    /// `events.k8s.io/v1` API.
    pub fn with_recorder(client: Client, recorder: Recorder) -> Self {
        Self {
            pods: KubeChildControl::with_recorder(client, recorder),
        }
    }

    /// A pod control that records no events.
    pub fn without_events(client: Client) -> Self {
        Self {
            pods: KubeChildControl::without_events(client),
        }
    }

    /// Checks every write with `gate` before sending it (see
    /// [`WriteGate`]); replaces any gate set before.
    #[must_use]
    pub fn with_write_gate(mut self, gate: Arc<dyn WriteGate>) -> Self {
        self.pods = self.pods.with_write_gate(gate);
        self
    }

    /// Adds `labeller`'s labels to every pod created from now on (see
    /// [`ChildLabeller`]); replaces any labeller set before.
    #[must_use]
    pub fn with_child_labeller(mut self, labeller: Arc<dyn ChildLabeller>) -> Self {
        self.pods = self.pods.with_child_labeller(labeller);
        self
    }

    /// Reads only the metadata the server assigns (name, uid,
    /// resourceVersion, ...) from each create's response and returns the
    /// pod as sent with it: no defaults or status, but no full decode of
    /// the created pod and its `managedFields` either (see
    /// [`KubeChildControl::with_created_metadata_only`]). Off by default.
    #[must_use]
    pub fn with_created_metadata_only(mut self) -> Self {
        self.pods = self.pods.with_created_metadata_only();
        self
    }

    /// The generic child control behind this one.
    pub fn child_control(&self) -> &KubeChildControl<Pod> {
        &self.pods
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
        self.pods
            .create_owned(namespace, pod, owner, controller_ref)
            .await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        self.pods
            .delete(namespace, name, owner, preconditions)
            .await
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Pod, PodControlError> {
        self.pods
            .patch_with(namespace, name, &Patch::Strategic(patch))
            .await
    }
}
