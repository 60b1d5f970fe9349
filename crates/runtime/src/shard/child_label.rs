//! The slot label on a sharded controller's children, so that each member
//! can ask the API server for its own slots' children only.
//!
//! KEP-5866's `shardSelector` hashes `metadata.uid` or `metadata.namespace`,
//! not a child's controller reference, so a server cannot place children
//! by their owner. A child created through a labelled child control
//! ([`slot_labeller`]) carries [`SLOT_LABEL`] with its owner's slot, and a
//! member's child informers list and watch with
//! `ctrlkit.io/shard-slot notin (<the slots it does not claim>)`
//! ([`SlotSet::child_label_selector`]): a `notin` requirement also selects
//! objects without the label, so the orphans and children created before
//! sharding (or by an unlabelled control) still reach every member, and the
//! client filter keeps deciding what the cache holds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use ctrlkit_childcontrol::ChildLabeller;
use ctrlkit_informer::SharedInformerFactory;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::slots::{SlotSet, slot_of_uid};

/// The label a sharded controller's children carry: the slot (`0`–`1023`,
/// decimal) of their controller owner's UID, the slot they are synced with.
pub const SLOT_LABEL: &str = "ctrlkit.io/shard-slot";

/// The [`SLOT_LABEL`] value of a child of the owner with UID `owner_uid`.
pub fn slot_label_value(owner_uid: &str) -> String {
    slot_label(slot_of_uid(owner_uid))
}

/// The [`SLOT_LABEL`] value naming `slot`: plain decimal.
pub(crate) fn slot_label(slot: usize) -> String {
    slot.to_string()
}

/// Whether `label` is [`slot_label`]`(slot)`, without formatting it (the
/// hot path checks every child event). Only the plain decimal names the
/// slot: the server compares the strings, so `007` is not `7`.
pub(crate) fn names_slot(label: &str, slot: usize) -> bool {
    let canonical = label == "0"
        || label
            .bytes()
            .next()
            .is_some_and(|b| (b'1'..=b'9').contains(&b));
    canonical && label.parse() == Ok(slot)
}

/// A labeller for
/// [`KubeChildControl::with_child_labeller`](ctrlkit_childcontrol::KubeChildControl::with_child_labeller)
/// that writes [`SLOT_LABEL`] on every child, from its controller
/// reference's UID. A [`Manager`](crate::Manager) started with
/// `--shard-ring` puts it on its [child controls](crate::Manager::child_control).
pub fn slot_labeller() -> Arc<dyn ChildLabeller> {
    Arc::new(
        |owner: &OwnerReference, labels: &mut BTreeMap<String, String>| {
            labels.insert(SLOT_LABEL.to_owned(), slot_label_value(&owner.uid));
        },
    )
}

/// What the child controls of controllers built on `factory` label their
/// children with: [`slot_labeller`] when the factory carries a
/// [`ShardMember`](super::ShardMember) (a `--shard-ring` manager's factory,
/// or one given a member by hand), `None` otherwise. Put it on child
/// controls built by hand (`KubeChildControl::with_child_labeller`,
/// `KubePodControl::with_child_labeller`) so their children reach the
/// member holding their owner.
pub fn slot_labeller_for(factory: &SharedInformerFactory) -> Option<Arc<dyn ChildLabeller>> {
    crate::manager::shard_member_of(factory).map(|_| slot_labeller())
}

impl SlotSet {
    /// The label selector of the children a member claiming these slots
    /// lists and watches: `ctrlkit.io/shard-slot notin (…)` with every
    /// slot not in the set, which selects the children labelled with one
    /// of its slots and every child without the label. Empty for the full
    /// set (every child is selected: send no selector).
    pub fn child_label_selector(&self) -> String {
        let others = SlotSet::full().minus(self);
        if others.is_empty() {
            return String::new();
        }
        let mut selector = String::with_capacity(SLOT_LABEL.len() + 10 + others.len() * 4);
        selector.push_str(SLOT_LABEL);
        selector.push_str(" notin (");
        for (i, slot) in others.iter().enumerate() {
            if i > 0 {
                selector.push(',');
            }
            // `slot_label(slot)`, written in place.
            let _ = write!(selector, "{slot}");
        }
        selector.push(')');
        selector
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_plain_decimal_names_a_slot() {
        assert!(names_slot("0", 0) && names_slot("7", 7) && names_slot("1023", 1023));
        assert!(!names_slot("007", 7) && !names_slot("+7", 7) && !names_slot("", 0));
        assert!(!names_slot("8", 7) && !names_slot("x", 7));
    }

    #[test]
    fn the_label_is_the_owners_slot() {
        let uid = "9b2c1f3e-0000-4000-8000-000000000001";
        let owner = OwnerReference {
            uid: uid.to_owned(),
            ..OwnerReference::default()
        };
        let mut labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
        slot_labeller().label(&owner, &mut labels);
        assert_eq!(labels[SLOT_LABEL], slot_of_uid(uid).to_string());
        assert_eq!(labels["app"], "web", "the template's labels stay");
    }

    #[tokio::test]
    async fn only_a_sharded_factory_labels_children() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let factory = SharedInformerFactory::new(kube::Client::try_from(config).unwrap());
        assert!(slot_labeller_for(&factory).is_none());
        let member =
            crate::shard::ShardMember::new(crate::shard::ShardConfig::new("ns", "ring", "a"));
        factory.insert_extension(member.unwrap());
        let uid = "9b2c1f3e-0000-4000-8000-000000000002";
        let owner = OwnerReference {
            uid: uid.to_owned(),
            ..OwnerReference::default()
        };
        let mut labels = BTreeMap::new();
        slot_labeller_for(&factory)
            .unwrap()
            .label(&owner, &mut labels);
        assert_eq!(labels[SLOT_LABEL], slot_label_value(uid));
    }

    #[test]
    fn the_selector_leaves_out_the_other_slots() {
        let mut claims = SlotSet::full();
        assert_eq!(claims.child_label_selector(), "");
        claims.remove(3);
        claims.remove(700);
        assert_eq!(
            claims.child_label_selector(),
            "ctrlkit.io/shard-slot notin (3,700)"
        );
        let none = SlotSet::empty().child_label_selector();
        assert!(none.starts_with("ctrlkit.io/shard-slot notin (0,1,2,"));
        assert!(none.ends_with(",1023)"));
    }
}
