//! Property: every label set a selector matches carries each of the
//! selector's equality requirements, so narrowing candidates by one of them
//! never loses a match.

use std::collections::BTreeMap;

use ctrlkit_refmanager::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use proptest::prelude::*;

const KEYS: [&str; 3] = ["app", "tier", "env"];
const VALUES: [&str; 3] = ["a", "b", "c"];

fn key() -> impl Strategy<Value = String> {
    proptest::sample::select(&KEYS[..]).prop_map(str::to_owned)
}

fn value() -> impl Strategy<Value = String> {
    proptest::sample::select(&VALUES[..]).prop_map(str::to_owned)
}

fn expression() -> impl Strategy<Value = LabelSelectorRequirement> {
    let with_values = (
        key(),
        proptest::sample::select(&["In", "NotIn"][..]),
        proptest::collection::vec(value(), 1..3),
    )
        .prop_map(|(key, op, values)| LabelSelectorRequirement {
            key,
            operator: op.to_owned(),
            values: Some(values),
        });
    let without_values = (
        key(),
        proptest::sample::select(&["Exists", "DoesNotExist"][..]),
    )
        .prop_map(|(key, op)| LabelSelectorRequirement {
            key,
            operator: op.to_owned(),
            values: None,
        });
    prop_oneof![with_values, without_values]
}

fn label_selector() -> impl Strategy<Value = LabelSelector> {
    (
        proptest::collection::btree_map(key(), value(), 0..3),
        proptest::collection::vec(expression(), 0..3),
    )
        .prop_map(|(labels, exprs)| LabelSelector {
            match_labels: Some(labels),
            match_expressions: Some(exprs),
        })
}

proptest! {
    #[test]
    fn a_match_carries_every_equality_requirement(
        selector in label_selector(),
        labels in proptest::collection::btree_map(key(), value(), 0..4),
    ) {
        let selector = Selector::from_label_selector(&selector).unwrap();
        if selector.matches(&labels) {
            for (k, v) in selector.equality_requirements() {
                prop_assert_eq!(labels.get(k).map(String::as_str), Some(v));
            }
        }
    }

    #[test]
    fn map_selectors_require_exactly_their_entries(
        map in proptest::collection::btree_map(key(), value(), 1..4),
    ) {
        let selector = Selector::from_map(&map).unwrap();
        let pairs: BTreeMap<String, String> = selector
            .equality_requirements()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        prop_assert_eq!(pairs, map);
    }
}
