//! Labels a child control adds to every child it creates.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// Adds labels to each child a [`KubeChildControl`](crate::KubeChildControl)
/// creates, from the controller reference it is created with — e.g. a
/// sharded controller's slot label (`ctrlkit_runtime::shard::SLOT_LABEL`),
/// so each member can list and watch only its own slots' children.
///
/// Any `Fn(&OwnerReference, &mut BTreeMap<String, String>)` is a labeller:
///
/// ```
/// use std::collections::BTreeMap;
/// use ctrlkit_childcontrol::ChildLabeller;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
///
/// let labeller = |owner: &OwnerReference, labels: &mut BTreeMap<String, String>| {
///     labels.insert("example.com/owner".into(), owner.name.clone());
/// };
/// let owner = OwnerReference { name: "web".into(), ..OwnerReference::default() };
/// let mut labels = BTreeMap::new();
/// labeller.label(&owner, &mut labels);
/// assert_eq!(labels["example.com/owner"], "web");
/// ```
pub trait ChildLabeller: Send + Sync {
    /// Adds to `labels` (the child's labels from its template) what a
    /// child created for the controller `controller_ref` carries.
    fn label(&self, controller_ref: &OwnerReference, labels: &mut BTreeMap<String, String>);
}

impl<F> ChildLabeller for F
where
    F: Fn(&OwnerReference, &mut BTreeMap<String, String>) + Send + Sync,
{
    fn label(&self, controller_ref: &OwnerReference, labels: &mut BTreeMap<String, String>) {
        self(controller_ref, labels);
    }
}
