//! What decoding costs per object: kube's decoding (what the informer did
//! before it decoded objects one at a time) against the informer's, for a
//! pod watch event and a 100-pod list page, plus the fallback an
//! undecodable object takes.
//!
//! `cargo bench -p ctrlkit-informer --bench decode`
#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ctrlkit_informer::{MaybeDecoded, decode_list, decode_watch_line};
use k8s_openapi::api::core::v1::Pod;
use kube::core::{ObjectList, WatchEvent};
use serde_json::{Value, json};

mod fixtures;
use fixtures::{list_body, pod, watch_line};

fn decode(c: &mut Criterion) {
    let line = watch_line(&pod(1));
    let mut bad_pod = pod(2);
    bad_pod["spec"]["terminationGracePeriodSeconds"] = json!("thirty");
    let bad_line = watch_line(&bad_pod);
    // Sanity: the lines decode as intended.
    assert!(matches!(
        decode_watch_line::<Pod>(&line),
        Ok(Some(WatchEvent::Modified(MaybeDecoded::Decoded(_))))
    ));
    assert!(matches!(
        decode_watch_line::<Pod>(&bad_line),
        Ok(Some(WatchEvent::Modified(MaybeDecoded::Undecodable(_))))
    ));

    let mut group = c.benchmark_group("watch_event");
    group.bench_function("kube_watch_event", |b| {
        b.iter(|| serde_json::from_str::<WatchEvent<Pod>>(black_box(&line)).unwrap())
    });
    group.bench_function("informer", |b| {
        b.iter(|| decode_watch_line::<Pod>(black_box(&line)).unwrap())
    });
    group.bench_function("informer_undecodable", |b| {
        b.iter(|| decode_watch_line::<Pod>(black_box(&bad_line)).unwrap())
    });
    group.finish();

    let body = list_body((0..100).map(pod).collect());
    let mut with_bad: Vec<Value> = (0..100).map(pod).collect();
    with_bad[50] = bad_pod;
    let bad_body = list_body(with_bad);
    let mut group = c.benchmark_group("list_100_pods");
    group.bench_function("kube_object_list", |b| {
        b.iter(|| serde_json::from_str::<ObjectList<Pod>>(black_box(&body)).unwrap())
    });
    group.bench_function("informer", |b| {
        b.iter(|| decode_list::<Pod>(black_box(&body)).unwrap())
    });
    group.bench_function("informer_one_undecodable", |b| {
        b.iter(|| decode_list::<Pod>(black_box(&bad_body)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
