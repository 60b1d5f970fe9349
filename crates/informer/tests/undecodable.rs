//! Objects that do not decode, fed by hand: what the cache keeps and what
//! the handlers are told.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use ctrlkit_informer::{Informer, MaybeDecoded};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;

/// A pod whose `terminationGracePeriodSeconds` is not a number.
fn bad_pod(name: &str, uid: &str, rv: &str) -> MaybeDecoded<Pod> {
    let json = format!(
        r#"{{"metadata":{{"namespace":"ns","name":"{name}","uid":"{uid}","resourceVersion":"{rv}"}},"spec":{{"containers":[],"terminationGracePeriodSeconds":"thirty"}}}}"#
    );
    let decoded = MaybeDecoded::<Pod>::from_json(&json);
    assert!(matches!(decoded, MaybeDecoded::Undecodable(_)));
    decoded
}

#[test]
fn an_undecodable_object_with_another_uid_means_the_cached_one_is_gone() {
    let rec = Recorder::new();
    let informer = Informer::<Pod>::manual().handler(rec.clone()).build();
    informer.apply_event(Event::Apply(pod("ns", "a", "ua", "1")));
    rec.take();

    // Same name, new UID, undecodable: the old incarnation was deleted and
    // re-created while unseen; the new one cannot be cached.
    informer.apply_maybe_decoded(Event::Apply(bad_pod("a", "ub", "2")));
    assert_eq!(rec.take(), [delete("a", "1", true)]);
    assert!(informer.store().is_empty());
    assert_eq!(informer.stats().decode_errors, 1);

    // Same UID: the cached version stays.
    informer.apply_event(Event::Apply(pod("ns", "b", "uc", "3")));
    informer.apply_maybe_decoded(Event::Apply(bad_pod("b", "uc", "4")));
    assert_eq!(rec.take(), [add("b", "3", false)]);
    assert_eq!(
        informer
            .store()
            .get("ns", "b")
            .unwrap()
            .metadata
            .resource_version
            .as_deref(),
        Some("3")
    );
    // The cache does not reflect version 4.
    assert_eq!(
        informer.store().has_observed_resource_version("4"),
        Ok(false)
    );
}

#[test]
fn an_object_without_a_readable_name_is_only_reported() {
    let informer = Informer::<Pod>::manual().build();
    informer.apply_event(Event::Init);
    informer.apply_event(Event::InitApply(pod("ns", "a", "ua", "1")));
    informer.apply_event(Event::InitDone);
    let nameless = MaybeDecoded::<Pod>::from_json(r#"{"metadata":{"name":7}}"#);
    informer.apply_maybe_decoded(Event::Apply(nameless.clone()));
    informer.apply_maybe_decoded(Event::Delete(nameless));
    assert_eq!(informer.store().len(), 1);
    assert_eq!(informer.stats().decode_errors, 2);
}
