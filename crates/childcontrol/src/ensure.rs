//! Writing a child from the object the owner wants: create it with the
//! controller reference if it is missing, patch it if it drifted.

use async_trait::async_trait;
use ctrlkit_informer::is_controlled_by;
use kube::Resource;
use kube::api::Patch;
use serde_json::{Map, Value};

use crate::{ChildControl, ChildControlError, ChildResource, controller_ref_for};

/// What [`ChildControlExt::ensure`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Ensured<C> {
    /// The child did not exist and was created, as the API server stored it.
    Created(C),
    /// The child existed and differed; it was patched, as now stored.
    Updated(C),
    /// The child already had every field the desired object sets.
    Unchanged,
}

/// Writes on children that start from the owner object rather than from an
/// owner reference the caller builds. Implemented for every
/// [`ChildControl`], so an `Arc<dyn ChildControl<C>>` (a
/// [`KubeChildControl`](crate::KubeChildControl) or a
/// [`FakeChildControl`](crate::FakeChildControl)) has these methods.
#[async_trait]
pub trait ChildControlExt<C: ChildResource>: ChildControl<C> {
    /// Creates `child` controlled by `owner`, in the owner's namespace
    /// (none for a cluster-scoped owner), with `SuccessfulCreate` /
    /// `FailedCreate` events on the owner: [`create`](ChildControl::create)
    /// with the reference and controller reference taken from `owner`.
    ///
    /// # Errors
    /// [`ChildControlError::InvalidTemplate`] if `owner` has no name or
    /// UID (it was not read from the API server); otherwise as
    /// [`create`](ChildControl::create).
    async fn create_for<K>(&self, owner: &K, child: &C) -> Result<C, ChildControlError>
    where
        K: Resource<DynamicType = ()> + Sync,
    {
        let controller_ref = controller_ref_for(owner).ok_or_else(|| {
            ChildControlError::InvalidTemplate(format!(
                "the owner {} {:?} has no UID: it was not read from the API server",
                K::kind(&()),
                owner.meta().name.as_deref().unwrap_or_default()
            ))
        })?;
        let namespace = owner.meta().namespace.as_deref().unwrap_or_default();
        self.create(namespace, child, &owner.object_ref(&()), &controller_ref)
            .await
    }

    /// Makes the child named by `desired` look as `desired` says: given
    /// `existing` (the child as cached, e.g. `store.get(ns, name)`),
    /// creates it with [`create_for`](Self::create_for) when it is `None`,
    /// does nothing when every field `desired` sets (its spec, data, …
    /// and its labels and annotations; not its other metadata nor its
    /// status) already has that value, and otherwise sends those fields as
    /// a JSON merge patch with the existing child's UID as precondition.
    ///
    /// Fields other writers or the API server's defaults add are left
    /// alone; a field dropped from `desired` is not removed from the child
    /// (set it to its empty value instead).
    ///
    /// # Errors
    /// [`ChildControlError::InvalidTemplate`] if `desired` has no name;
    /// [`ChildControlError::NotControlled`] if `existing` is not controlled
    /// by `owner` (it is left alone); otherwise as
    /// [`create_for`](Self::create_for) or [`patch`](ChildControl::patch).
    async fn ensure<K>(
        &self,
        owner: &K,
        desired: &C,
        existing: Option<&C>,
    ) -> Result<Ensured<C>, ChildControlError>
    where
        K: Resource<DynamicType = ()> + Sync,
    {
        let Some(name) = desired.meta().name.clone() else {
            return Err(ChildControlError::InvalidTemplate(
                "ensure needs the child's name".into(),
            ));
        };
        let Some(existing) = existing else {
            return self.create_for(owner, desired).await.map(Ensured::Created);
        };
        let owner_uid = owner.meta().uid.as_deref().unwrap_or_default();
        if !is_controlled_by(existing.meta(), owner_uid) {
            return Err(ChildControlError::NotControlled {
                kind: C::kind(&()).into_owned(),
                name,
            });
        }
        let wanted = owned_fields(desired)?;
        let current = to_value(existing)?;
        if contains(&current, &wanted) {
            return Ok(Ensured::Unchanged);
        }
        let mut patch = wanted;
        if let (Some(fields), Some(uid)) = (patch.as_object_mut(), &existing.meta().uid) {
            let metadata = fields
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(metadata) = metadata.as_object_mut() {
                metadata.insert("uid".into(), Value::String(uid.clone()));
            }
        }
        let namespace = existing.meta().namespace.as_deref().unwrap_or_default();
        self.patch(namespace, &name, &Patch::Merge(patch))
            .await
            .map(Ensured::Updated)
    }
}

impl<C: ChildResource, T: ChildControl<C> + ?Sized> ChildControlExt<C> for T {}

fn to_value<C: ChildResource>(object: &C) -> Result<Value, ChildControlError> {
    serde_json::to_value(object).map_err(|e| ChildControlError::InvalidPatch(e.to_string()))
}

/// The fields of `desired` the caller owns: everything but `apiVersion`,
/// `kind`, `status` and metadata other than labels and annotations.
fn owned_fields<C: ChildResource>(desired: &C) -> Result<Value, ChildControlError> {
    let mut value = to_value(desired)?;
    if let Some(fields) = value.as_object_mut() {
        let metadata = fields.remove("metadata");
        for server_side in ["apiVersion", "kind", "status"] {
            fields.remove(server_side);
        }
        let kept: Map<String, Value> = metadata
            .and_then(|m| match m {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .into_iter()
            .flatten()
            .filter(|(k, _)| k == "labels" || k == "annotations")
            .collect();
        if !kept.is_empty() {
            fields.insert("metadata".into(), Value::Object(kept));
        }
    }
    Ok(value)
}

/// Whether `current` has every field of `wanted` with its value (objects
/// compared key by key, everything else whole).
fn contains(current: &Value, wanted: &Value) -> bool {
    match (current, wanted) {
        (Value::Object(current), Value::Object(wanted)) => wanted
            .iter()
            .all(|(k, v)| contains(current.get(k).unwrap_or(&Value::Null), v)),
        _ => current == wanted,
    }
}
