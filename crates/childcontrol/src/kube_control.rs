//! [`ChildControl`] backed by the Kubernetes API, recording events on the
//! owner.

use std::fmt;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use ctrlkit_informer::ObjectScope;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::response::reason;
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{api_error_message, is_namespace_terminating_status, status_is};
use crate::events::{
    EventSink, FAILED_CREATE_REASON, FAILED_DELETE_REASON, OwnerEvent, SUCCESSFUL_CREATE_REASON,
    SUCCESSFUL_DELETE_REASON, record,
};
use crate::template::child_from_template;
use crate::{
    ChildControl, ChildControlError, ChildLabeller, Operation, ServerMetadata, WriteAttempt,
    WriteGate,
};

/// The field manager of server-side apply patches when none was named.
pub const DEFAULT_FIELD_MANAGER: &str = "ctrlkit";

/// What a kind of child needs to be created, deleted and patched through
/// the API: implemented by every object kind of k8s-openapi and every
/// `#[derive(CustomResource)]` type (namespaced or cluster-scoped).
pub trait ChildResource:
    Resource<DynamicType = (), Scope: ObjectScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<C> ChildResource for C where
    C: Resource<DynamicType = (), Scope: ObjectScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// The [`ChildControl`] to use against a real (or simulated) API server,
/// for children of kind `C`.
///
/// - `create` builds the child with [`child_from_template`], checks the
///   [write gate](Self::with_write_gate), `POST`s it and records
///   `Normal SuccessfulCreate "Created <kind>: <name>"` on the owner (the
///   kind in lower case, e.g. `Created pod: web-x7k2p`), or
///   `Warning FailedCreate "Error creating: <message>"` if the API refuses
///   it, where the message is the API server's own (`Status.message`, e.g.
///   the quota text), never a Rust dump. A refusal because the namespace is
///   being deleted becomes [`ChildControlError::NamespaceTerminating`] and
///   records no event (the owner is about to go away; see
///   [`is_namespace_terminating_status`] for how it is recognised). A
///   template that cannot make a valid child fails with
///   [`ChildControlError::InvalidTemplate`] before any request or event.
/// - `delete` `DELETE`s the child, sending the preconditions if given, and
///   records `Normal SuccessfulDelete "Deleted <kind>: <name>"` or
///   `Warning FailedDelete "Error deleting: <message>"`. A child that is
///   already gone (404) is success and records nothing.
/// - `patch` sends the patch (merge, strategic merge, JSON patch, or a
///   server-side apply under the [field manager](Self::with_field_manager))
///   and records nothing.
///
/// Events go through a [`ctrlkit_events::Recorder`] (core/v1 events, as
/// the kube-controller-manager writes them), in the owner's namespace,
/// with the child as the event's related object on success and on failed
/// deletes; their action is `Create<Kind>` / `Delete<Kind>`. The recorder
/// has client-go's semantics: a repeat of an identical event bumps its
/// count, more than ten events of one reason with differing messages on
/// one owner within ten minutes are combined into one
/// `(combined from similar events): ...` event, and a spam filter limits
/// each owner to a burst of 25 events, then one per five minutes. Events
/// are queued for a background task, never waited for; a failure to queue
/// or write one is logged with `tracing` and never fails the operation.
/// [`with_event_recorder`](Self::with_event_recorder) shares one recorder
/// between controls (and lets a caller [`flush`](ctrlkit_events::Recorder::flush)
/// it); [`with_recorder`](Self::with_recorder) keeps kube-runtime's
/// [`Recorder`] (`events.k8s.io/v1`, published before the method returns).
///
/// Cluster-scoped kinds are supported too: their `namespace` argument is
/// ignored.
///
/// The client needs `create`, `delete` and `patch` on the child's resource
/// and `create` and `patch` on `events` in the core API group (`""`;
/// `events.k8s.io` with [`with_recorder`](Self::with_recorder)).
pub struct KubeChildControl<C> {
    client: Client,
    events: Option<Arc<dyn EventSink>>,
    gate: Option<Arc<dyn WriteGate>>,
    labeller: Option<Arc<dyn ChildLabeller>>,
    field_manager: String,
    /// The kind as it appears in event notes: `pod`, `configmap`.
    noun: String,
    create_action: String,
    delete_action: String,
    /// [`with_created_metadata_only`](KubeChildControl::with_created_metadata_only).
    created_metadata_only: bool,
    _child: PhantomData<fn() -> C>,
}

impl<C> Clone for KubeChildControl<C> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            events: self.events.clone(),
            gate: self.gate.clone(),
            labeller: self.labeller.clone(),
            field_manager: self.field_manager.clone(),
            noun: self.noun.clone(),
            create_action: self.create_action.clone(),
            delete_action: self.delete_action.clone(),
            created_metadata_only: self.created_metadata_only,
            _child: PhantomData,
        }
    }
}

impl<C> fmt::Debug for KubeChildControl<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeChildControl")
            .field("kind", &self.noun)
            .field("records_events", &self.events.is_some())
            .field("write_gate", &self.gate.is_some())
            .field("labeller", &self.labeller.is_some())
            .field("field_manager", &self.field_manager)
            .field("created_metadata_only", &self.created_metadata_only)
            .finish_non_exhaustive()
    }
}

impl<C: ChildResource> KubeChildControl<C> {
    /// A child control that records events as `reporter` (usually the
    /// controller's name, e.g. `"app-controller"`), which is also the field
    /// manager of its server-side apply patches.
    pub fn new(client: Client, reporter: impl Into<Reporter>) -> Self {
        let reporter = reporter.into();
        let field_manager = reporter.controller.clone();
        let recorder = ctrlkit_events::Recorder::new(client.clone(), reporter);
        Self::build(client, Some(Arc::new(recorder)), field_manager)
    }

    /// A child control that records events through an existing ctrlkit
    /// `recorder` (which may use a different client, and may be shared
    /// with other controls so that they correlate events together); the
    /// field manager is the recorder's reporter.
    pub fn with_event_recorder(client: Client, recorder: ctrlkit_events::Recorder) -> Self {
        let field_manager = recorder.reporter().controller.clone();
        Self::build(client, Some(Arc::new(recorder)), field_manager)
    }

    /// A child control that records events through an existing kube-runtime
    /// `recorder` (which may use a different client), in the
    /// `events.k8s.io/v1` API, published before each method returns.
    pub fn with_recorder(client: Client, recorder: Recorder) -> Self {
        Self::build(
            client,
            Some(Arc::new(recorder)),
            DEFAULT_FIELD_MANAGER.to_owned(),
        )
    }

    /// A child control that records no events.
    pub fn without_events(client: Client) -> Self {
        Self::build(client, None, DEFAULT_FIELD_MANAGER.to_owned())
    }

    fn build(client: Client, events: Option<Arc<dyn EventSink>>, field_manager: String) -> Self {
        let kind = C::kind(&());
        Self {
            client,
            events,
            gate: None,
            labeller: None,
            field_manager,
            noun: kind.to_lowercase(),
            create_action: format!("Create{kind}"),
            delete_action: format!("Delete{kind}"),
            created_metadata_only: false,
            _child: PhantomData,
        }
    }

    /// Checks every write with `gate` before sending it (see
    /// [`WriteGate`]); replaces any gate set before.
    #[must_use]
    pub fn with_write_gate(mut self, gate: Arc<dyn WriteGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Adds `labeller`'s labels to every child created from now on (see
    /// [`ChildLabeller`]); replaces any labeller set before.
    #[must_use]
    pub fn with_child_labeller(mut self, labeller: Arc<dyn ChildLabeller>) -> Self {
        self.labeller = Some(labeller);
        self
    }

    /// Names the field manager of server-side apply patches
    /// ([`DEFAULT_FIELD_MANAGER`] unless built with [`new`](Self::new)).
    #[must_use]
    pub fn with_field_manager(mut self, field_manager: impl Into<String>) -> Self {
        self.field_manager = field_manager.into();
        self
    }

    /// Reads only the metadata the server assigns (name, namespace, uid,
    /// resourceVersion, generation, creationTimestamp) from each create's
    /// response, skipping the rest of the body unread, and returns the
    /// child as sent with that metadata. Cheaper for a controller that
    /// creates many children and only tracks their identity (expectations,
    /// read-own-writes, events); what the server fills in beyond that
    /// metadata (defaults, status) is then absent from the returned child.
    /// Off by default: the whole created object is decoded.
    #[must_use]
    pub fn with_created_metadata_only(mut self) -> Self {
        self.created_metadata_only = true;
        self
    }

    /// The client requests go through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn api(&self, namespace: &str) -> Api<C> {
        <C::Scope as ObjectScope>::api(self.client.clone(), Some(namespace))
    }

    /// Creates `child`: the stored object, or with
    /// [`with_created_metadata_only`](Self::with_created_metadata_only)
    /// `child` with the metadata the server assigned.
    async fn post(&self, namespace: &str, child: C) -> Result<C, kube::Error> {
        let api = self.api(namespace);
        if !self.created_metadata_only {
            return api.create(&PostParams::default(), &child).await;
        }
        let body = serde_json::to_vec(&child).map_err(kube::Error::SerdeError)?;
        let mut request = kube::core::Request::new(api.resource_url())
            .create(&PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("create");
        let assigned = ServerMetadata::request(&self.client, request).await?;
        let mut child = child;
        assigned.apply_to(child.meta_mut());
        Ok(child)
    }

    /// The namespace a child of this kind lives in: `namespace` for a
    /// namespaced kind, none for a cluster-scoped one.
    fn child_namespace<'a>(&self, namespace: &'a str) -> &'a str {
        if <C::Scope as ObjectScope>::NAMESPACED {
            namespace
        } else {
            ""
        }
    }

    fn check_gate(
        &self,
        operation: Operation,
        namespace: &str,
        name: Option<&str>,
    ) -> Result<(), ChildControlError> {
        if let Some(gate) = &self.gate {
            gate.check(&WriteAttempt {
                operation,
                kind: &C::kind(&()),
                namespace,
                name,
            })?;
        }
        Ok(())
    }

    fn reference(&self, namespace: &str, name: &str, uid: Option<&str>) -> ObjectReference {
        ObjectReference {
            api_version: Some(C::api_version(&()).into_owned()),
            kind: Some(C::kind(&()).into_owned()),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            name: Some(name.to_owned()),
            uid: uid.map(str::to_owned),
            ..ObjectReference::default()
        }
    }

    /// [`create`](ChildControl::create) from a template the caller gives
    /// away, saving the copy `create` makes: for callers that build the
    /// child themselves (`KubePodControl` builds pods from a pod template
    /// this way).
    ///
    /// # Errors
    /// As [`ChildControl::create`].
    ///
    /// # Cancel safety
    /// As for the trait's methods: dropping the future after the request
    /// went out does not undo the create.
    pub async fn create_owned(
        &self,
        namespace: &str,
        template: C,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<C, ChildControlError> {
        let namespace = self.child_namespace(namespace);
        let mut child = child_from_template(template, namespace, controller_ref)?;
        if let Some(labeller) = &self.labeller {
            labeller.label(
                controller_ref,
                child.meta_mut().labels.get_or_insert_default(),
            );
        }
        self.check_gate(Operation::Create, namespace, child.meta().name.as_deref())?;
        let owner_name = owner.name.as_deref().unwrap_or(&controller_ref.name);
        match self.post(namespace, child).await {
            Ok(created) => {
                let name = created.meta().name.as_deref().unwrap_or_default();
                tracing::debug!(namespace, child = name, kind = %self.noun, owner = owner_name, "created child");
                let related = self.reference(namespace, name, created.meta().uid.as_deref());
                let note = format!("Created {}: {name}", self.noun);
                let event = OwnerEvent {
                    type_: EventType::Normal,
                    reason: SUCCESSFUL_CREATE_REASON,
                    action: &self.create_action,
                    note,
                    related: Some(related),
                };
                record(self.events.as_ref(), owner, event).await;
                Ok(created)
            }
            Err(kube::Error::Api(status)) if is_namespace_terminating_status(&status) => {
                tracing::debug!(
                    namespace,
                    kind = %self.noun,
                    owner = owner_name,
                    "namespace is terminating, child not created"
                );
                Err(ChildControlError::NamespaceTerminating {
                    namespace: namespace.to_owned(),
                })
            }
            Err(error) => {
                let event = OwnerEvent {
                    type_: EventType::Warning,
                    reason: FAILED_CREATE_REASON,
                    action: &self.create_action,
                    note: format!("Error creating: {}", api_error_message(&error)),
                    related: None,
                };
                record(self.events.as_ref(), owner, event).await;
                Err(ChildControlError::Api(error))
            }
        }
    }

    /// [`patch`](ChildControl::patch) with any serializable patch body,
    /// saving a conversion to `serde_json::Value`.
    ///
    /// # Errors
    /// As [`ChildControl::patch`].
    ///
    /// # Cancel safety
    /// As for the trait's methods: dropping the future after the request
    /// went out does not undo the patch.
    pub async fn patch_with<P: Serialize + Debug>(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<P>,
    ) -> Result<C, ChildControlError> {
        let namespace = self.child_namespace(namespace);
        self.check_gate(Operation::Patch, namespace, Some(name))?;
        let params = match patch {
            Patch::Apply(_) => PatchParams::apply(&self.field_manager),
            _ => PatchParams::default(),
        };
        Ok(self.api(namespace).patch(name, &params, patch).await?)
    }
}

#[async_trait]
impl<C: ChildResource> ChildControl<C> for KubeChildControl<C> {
    async fn create(
        &self,
        namespace: &str,
        template: &C,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<C, ChildControlError> {
        self.create_owned(namespace, template.clone(), owner, controller_ref)
            .await
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), ChildControlError> {
        let namespace = self.child_namespace(namespace);
        self.check_gate(Operation::Delete, namespace, Some(name))?;
        let params = DeleteParams {
            preconditions: preconditions.map(|p| kube::api::Preconditions {
                resource_version: p.resource_version.clone(),
                uid: p.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        tracing::debug!(namespace, child = name, kind = %self.noun, "deleting child");
        let related = self.reference(
            namespace,
            name,
            preconditions.and_then(|p| p.uid.as_deref()),
        );
        match self.api(namespace).delete(name, &params).await {
            Ok(_) => {
                let event = OwnerEvent {
                    type_: EventType::Normal,
                    reason: SUCCESSFUL_DELETE_REASON,
                    action: &self.delete_action,
                    note: format!("Deleted {}: {name}", self.noun),
                    related: Some(related),
                };
                record(self.events.as_ref(), owner, event).await;
                Ok(())
            }
            Err(kube::Error::Api(status)) if status_is(&status, reason::NOT_FOUND, 404) => {
                tracing::debug!(namespace, child = name, kind = %self.noun, "child has already been deleted");
                Ok(())
            }
            Err(error) => {
                let event = OwnerEvent {
                    type_: EventType::Warning,
                    reason: FAILED_DELETE_REASON,
                    action: &self.delete_action,
                    note: format!("Error deleting: {}", api_error_message(&error)),
                    related: Some(related),
                };
                record(self.events.as_ref(), owner, event).await;
                Err(ChildControlError::Api(error))
            }
        }
    }

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<serde_json::Value>,
    ) -> Result<C, ChildControlError> {
        self.patch_with(namespace, name, patch).await
    }
}
