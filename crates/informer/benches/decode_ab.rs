//! kube's decoding against the informer's, interleaved round by round so
//! that a loaded machine slows both alike: the median of the per-round
//! ratios (informer / kube) is the figure to read. Criterion's `decode`
//! bench measures one after the other and drifts with the load.
//!
//! `cargo bench -p ctrlkit-informer --bench decode_ab`
#![allow(missing_docs, clippy::unwrap_used)]
use ctrlkit_informer::{decode_list, decode_watch_line};
use k8s_openapi::api::core::v1::Pod;
use kube::core::{ObjectList, WatchEvent};
use std::hint::black_box;
use std::time::Instant;
mod fixtures;
use fixtures::{list_body, pod, watch_line};

fn main() {
    let line = watch_line(&pod(1));
    let body = list_body((0..100).map(pod).collect());
    let mut ev = (Vec::new(), Vec::new());
    let mut li = (Vec::new(), Vec::new());
    for _ in 0..30 {
        let t = Instant::now();
        for _ in 0..300 {
            black_box(serde_json::from_str::<WatchEvent<Pod>>(black_box(&line)).unwrap());
        }
        ev.0.push(t.elapsed().as_secs_f64() / 300.0);
        let t = Instant::now();
        for _ in 0..300 {
            black_box(decode_watch_line::<Pod>(black_box(&line)).unwrap());
        }
        ev.1.push(t.elapsed().as_secs_f64() / 300.0);
        let t = Instant::now();
        for _ in 0..5 {
            black_box(serde_json::from_str::<ObjectList<Pod>>(black_box(&body)).unwrap());
        }
        li.0.push(t.elapsed().as_secs_f64() / 5.0);
        let t = Instant::now();
        for _ in 0..5 {
            black_box(decode_list::<Pod>(black_box(&body)).unwrap());
        }
        li.1.push(t.elapsed().as_secs_f64() / 5.0);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let ratios = |a: &Vec<f64>, b: &Vec<f64>| {
        let mut r: Vec<f64> = a.iter().zip(b).map(|(x, y)| y / x).collect();
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        r[r.len() / 2]
    };
    let (er, lr) = (ratios(&ev.0, &ev.1), ratios(&li.0, &li.1));
    println!(
        "watch event: kube {:.2} us, informer {:.2} us, median round ratio {:.3}",
        med(&mut ev.0) * 1e6,
        med(&mut ev.1) * 1e6,
        er
    );
    println!(
        "list 100 pods: kube {:.3} ms, informer {:.3} ms, median round ratio {:.3}",
        med(&mut li.0) * 1e3,
        med(&mut li.1) * 1e3,
        lr
    );
}
