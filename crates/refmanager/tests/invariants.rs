//! Properties of a claim pass over arbitrary pod populations.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use ctrlkit_podcontrol::{FakePodControl, PodControlError};
use ctrlkit_refmanager::{PodControllerRefManager, RecheckOwner, is_controlled_by};
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct PodSpec {
    owner: u8, // 0 = orphan, 1 = us, 2 = someone else, 3 = non-controller owner
    matching: bool,
    deleting: bool,
    other_ns: bool,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (0u8..4, any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(owner, matching, deleting, other_ns)| PodSpec {
            owner,
            matching,
            deleting,
            other_ns,
        },
    )
}

fn build(i: usize, s: &PodSpec) -> Pod {
    let tier = if s.matching { "production" } else { "testing" };
    let owner = match s.owner {
        1 => Some(OWNER_UID),
        2 | 3 => Some("other"),
        _ => None,
    };
    let mut p = pod(&format!("pod{i}"), tier, owner);
    if s.owner == 3 {
        p.metadata.owner_references.as_mut().unwrap()[0].controller = None;
    }
    if s.deleting {
        p = deleting(p);
    }
    if s.other_ns {
        p = in_namespace(p, "elsewhere");
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn claim_pass_invariants(
        specs in proptest::collection::vec(pod_spec(), 0..12),
        owner_deleting in any::<bool>(),
        failures in 0u64..3,
    ) {
        let pods: Vec<Pod> = specs.iter().enumerate().map(|(i, s)| build(i, s)).collect();
        let fake = FakePodControl::new();
        fake.fail_next(failures, || PodControlError::api_status(500, "InternalError", "x"));
        let reads = Arc::new(AtomicUsize::new(0));
        let counter = reads.clone();
        let check = RecheckOwner::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, std::io::Error>(Some(owner())) }
        });
        let mut owner = owner();
        if owner_deleting {
            owner = owner.with_deletion_timestamp(now());
        }
        let manager = PodControllerRefManager::new(Arc::new(fake.clone()), owner, production(), check);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let out = rt.block_on(manager.claim_pods(&pods, &[]));

        let patches = fake.patch_calls();
        let patched: Vec<&str> = patches.iter().map(|p| p.name.as_str()).collect();
        let by_name = |name: &str| pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)).unwrap();

        // Each pod is written at most once, and never one another controller controls.
        prop_assert_eq!(patched.iter().collect::<HashSet<_>>().len(), patched.len());
        for name in &patched {
            let p = by_name(name);
            let foreign = p.metadata.owner_references.iter().flatten()
                .any(|r| r.controller == Some(true) && r.uid != OWNER_UID);
            prop_assert!(!foreign, "patched {} of another controller", name);
        }
        // A deleting owner writes nothing.
        if owner_deleting {
            prop_assert!(patched.is_empty());
        }
        // The owner is re-read at most once, and only if an adoption was attempted.
        let adoptions = patches.iter()
            .filter(|p| p.patch["metadata"]["ownerReferences"][0].get("controller").is_some())
            .count();
        prop_assert!(reads.load(Ordering::SeqCst) <= 1);
        prop_assert_eq!(reads.load(Ordering::SeqCst) == 1, adoptions > 0);

        // Claimed: a subsequence of the input, each either already ours and
        // matching, or successfully adopted (so it was patched).
        let claimed: Vec<&str> = out.claimed.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect();
        let input: Vec<&str> = pods.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect();
        let mut it = input.iter();
        prop_assert!(claimed.iter().all(|c| it.any(|i| i == c)), "order not kept");
        for name in &claimed {
            let p = by_name(name);
            let matching = p.metadata.labels.as_ref().unwrap()["type"] == "production";
            prop_assert!(matching);
            prop_assert!(is_controlled_by(&p.metadata, OWNER_UID) || patched.contains(name));
        }
        // Every owned matching pod is kept, deleting owner or not.
        for p in &pods {
            let name = p.metadata.name.as_deref().unwrap();
            let matching = p.metadata.labels.as_ref().unwrap()["type"] == "production";
            if is_controlled_by(&p.metadata, OWNER_UID) && matching {
                prop_assert!(claimed.contains(&name));
            }
        }
        // Exactly the injected failures surface as errors.
        prop_assert_eq!(out.errors.len() as u64, failures.min(patches.len() as u64));
    }
}
