//! A Warning event on each object an informer cannot decode.

use std::fmt;
use std::marker::PhantomData;

use ctrlkit_informer::{EventHandler, UndecodableObject};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType};

use crate::Recorder;

/// The reason of the Warning event recorded on an object that cannot be
/// decoded.
pub const DECODE_FAILED_REASON: &str = "DecodeFailed";

/// An informer [`EventHandler`] that records a Warning event
/// ([`DECODE_FAILED_REASON`]) on every object the informer reports
/// undecodable, naming the decoding error; it ignores everything else.
/// Build it with [`undecodable_warning`].
///
/// The object's kind and API version are `K`'s; its name, namespace, UID
/// and resourceVersion are what the informer could read of its metadata.
/// An object whose name could not be read gets no event (there is nothing
/// to attach it to). The informer reports the object again on every relist
/// while it stays undecodable; the recorder counts those repeats on one
/// event instead of creating new ones.
pub struct UndecodableWarning<K> {
    recorder: Recorder,
    _kind: PhantomData<fn() -> K>,
}

/// The handler that records a Warning event on each object an informer of
/// `K` cannot decode; register it with the informer
/// (`informer.add_event_handler(undecodable_warning::<K>(recorder))`).
pub fn undecodable_warning<K>(recorder: Recorder) -> UndecodableWarning<K>
where
    K: Resource<DynamicType = ()>,
{
    UndecodableWarning {
        recorder,
        _kind: PhantomData,
    }
}

impl<K> Clone for UndecodableWarning<K> {
    fn clone(&self) -> Self {
        Self {
            recorder: self.recorder.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K: Resource<DynamicType = ()>> fmt::Debug for UndecodableWarning<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UndecodableWarning")
            .field("kind", &K::kind(&()))
            .finish_non_exhaustive()
    }
}

impl<K: Resource<DynamicType = ()>> UndecodableWarning<K> {
    /// Records the Warning event on `obj`, if it has a name.
    pub fn warn(&self, obj: &UndecodableObject) {
        let meta = obj.metadata();
        let Some(name) = meta.name.clone().filter(|n| !n.is_empty()) else {
            tracing::debug!(
                error = %obj.error(),
                "undecodable object without a readable name: no event"
            );
            return;
        };
        let kind = K::kind(&());
        let regarding = ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(kind.to_string()),
            name: Some(name),
            namespace: meta.namespace.clone().filter(|ns| !ns.is_empty()),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            field_path: None,
        };
        let event = Event {
            type_: EventType::Warning,
            reason: DECODE_FAILED_REASON.to_owned(),
            note: Some(format!(
                "cannot decode this {kind}, so the controller ignores it until it can: {}",
                obj.error()
            )),
            action: "Decode".to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &regarding) {
            tracing::debug!(%error, "DecodeFailed event not queued");
        }
    }
}

impl<K: Resource<DynamicType = ()>> EventHandler<K> for UndecodableWarning<K> {
    fn on_undecodable(&self, obj: &UndecodableObject) {
        self.warn(obj);
    }
}
