//! The workload driver: runs the W1-W4 workloads and the floors, and prints
//! one JSON line per result. See benches/README.md.
//!
//! ```text
//! cargo run --release -p ctrlkit-benches --bin workload -- [--only W1,W3] [--runs 3] [--scale 1.0]
//! ```

use std::process::ExitCode;
use std::time::Duration;

use ctrlkit_benches::floor::{CycleFloor, cycle_floor, handoff_floor, timer_floor};
use ctrlkit_benches::sched::{SchedTotals, measure, stamp_machine_load};
use ctrlkit_benches::stats::{Distribution, median};
use ctrlkit_benches::workloads::{
    DuePattern, PRODUCER_YIELD_EVERY, Pacing, delayed, keyed_throughput, latency,
};
use serde_json::{Value, json};

const USAGE: &str = "usage: workload [--only W1,W2,W3,W4] [--runs N] [--scale F]
  --only   comma-separated workloads to run (default: all); floors always run
  --runs   runs per workload; figures are medians (default 3)
  --scale  multiply item and round counts, e.g. 0.01 for a smoke test (default 1)
  --pacing backlog:N (default backlog:1024): the W1/W2 producer yields while
           more than N items are queued; yield:N: it yields every N adds
  --due    uniform (default): W3's delays are uniform in 0..200 ms;
           burst: every W3 item falls due at the same instant";

const ALL: [&str; 4] = ["W1", "W2", "W3", "W4"];
const W3_SEED: u64 = 0x5eed;

struct Args {
    only: Vec<String>,
    runs: usize,
    scale: f64,
    pacing: Pacing,
    due: DuePattern,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        only: ALL.iter().map(|s| s.to_string()).collect(),
        runs: 3,
        scale: 1.0,
        pacing: Pacing::default(),
        due: DuePattern::default(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--only" => {
                let list = value("--only")?;
                args.only = list
                    .split(',')
                    .map(|s| s.trim().to_ascii_uppercase())
                    .filter(|s| !s.is_empty())
                    .collect();
                if let Some(bad) = args.only.iter().find(|w| !ALL.contains(&w.as_str())) {
                    return Err(format!("unknown workload {bad}"));
                }
            }
            "--runs" => {
                args.runs = value("--runs")?
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
                if args.runs == 0 {
                    return Err("--runs must be at least 1".into());
                }
            }
            "--scale" => {
                args.scale = value("--scale")?
                    .parse()
                    .map_err(|e| format!("--scale: {e}"))?;
                if !(args.scale > 0.0 && args.scale.is_finite()) {
                    return Err("--scale must be a positive number".into());
                }
            }
            "--pacing" => {
                args.pacing = value("--pacing")?
                    .parse()
                    .map_err(|e| format!("--pacing: {e}"))?;
            }
            "--due" => {
                args.due = value("--due")?.parse().map_err(|e| format!("--due: {e}"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

/// One run's floors; every workload figure of the run is divided by them.
struct Floors {
    cycle: CycleFloor,
    /// CPU time per F1 cycle, where the scheduler statistics are readable.
    cycle_cpu_ns: Option<f64>,
    handoff: Distribution,
}

/// CPU nanoseconds per unit of work of each run, where known.
fn cpu_ns_per(sched: &[Option<SchedTotals>], units: u64) -> Vec<Option<f64>> {
    sched
        .iter()
        .map(|s| s.map(|s| s.on_cpu.as_nanos() as f64 / units.max(1) as f64))
        .collect()
}

/// Median of the known values; `None` if none is known.
fn med_known(values: &[Option<f64>]) -> Option<f64> {
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    (!known.is_empty()).then(|| median(&known))
}

fn us(ns: f64) -> f64 {
    ns / 1e3
}

/// Median over runs of `f(run)`.
fn med<R>(runs: &[R], f: impl Fn(&R) -> f64) -> f64 {
    median(&runs.iter().map(f).collect::<Vec<_>>())
}

/// Runs `f` `runs` times; returns the results and each run's scheduler
/// totals.
fn repeat<R>(runs: usize, mut f: impl FnMut() -> R) -> (Vec<R>, Vec<Option<SchedTotals>>) {
    (0..runs).map(|_| measure(&mut f)).unzip()
}

/// Adds the median CPU time and run-queue wait of the runs to `line`.
fn with_sched(mut line: Value, sched: &[Option<SchedTotals>]) -> Value {
    let cpu: Vec<f64> = sched
        .iter()
        .flatten()
        .map(|s| s.on_cpu.as_secs_f64())
        .collect();
    let wait: Vec<f64> = sched
        .iter()
        .flatten()
        .map(|s| s.runqueue_wait.as_secs_f64())
        .collect();
    if let Some(fields) = line.as_object_mut()
        && !cpu.is_empty()
    {
        fields.insert("cpu_s".into(), json!(median(&cpu)));
        fields.insert("runqueue_wait_s".into(), json!(median(&wait)));
    }
    line
}

/// Prints one result line, stamped with the machine's load at that moment.
fn emit(mut line: Value) {
    stamp_machine_load(&mut line);
    println!("{line}");
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("error: {msg}");
            }
            eprintln!("{USAGE}");
            return if msg.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let scaled = |n: u64| ((n as f64 * args.scale).round() as u64).max(1);
    let wants = |w: &str| args.only.iter().any(|o| o == w);
    let runs = args.runs;

    // Floors, measured in every run.
    let floor_cycles = scaled(1_000_000);
    let floor_rounds = scaled(100_000);
    let floors: Vec<Floors> = (0..runs)
        .map(|_| {
            let (cycle, sched) = measure(|| cycle_floor(floor_cycles));
            Floors {
                cycle,
                cycle_cpu_ns: sched.map(|s| s.on_cpu.as_nanos() as f64 / floor_cycles as f64),
                handoff: runtime.block_on(handoff_floor(floor_rounds, 4)),
            }
        })
        .collect();
    emit(json!({
        "id": "F1",
        "what": "single-thread add->get->done on Mutex<VecDeque> + HashSet",
        "params": { "cycles": floor_cycles, "runs": runs },
        "ns_per_cycle": med(&floors, |f| f.cycle.ns_per_cycle()),
        "cpu_ns_per_cycle": med_known(&floors.iter().map(|f| f.cycle_cpu_ns).collect::<Vec<_>>()),
        "m_per_sec": med(&floors, |f| f.cycle.per_sec() / 1e6),
        "per_run_m_per_sec": floors.iter().map(|f| f.cycle.per_sec() / 1e6).collect::<Vec<_>>(),
    }));
    emit(json!({
        "id": "F2",
        "what": "tokio task-to-task hand-off through Notify (same ping-pong as W4)",
        "params": { "rounds": floor_rounds, "receivers": 4, "threads": threads, "runs": runs },
        "p50_us": med(&floors, |f| us(f.handoff.p50_ns as f64)),
        "p99_us": med(&floors, |f| us(f.handoff.p99_ns as f64)),
        "max_us": med(&floors, |f| us(f.handoff.max_ns as f64)),
    }));

    // W1: throughput with distinct keys.
    if wants("W1") {
        let items = scaled(1_000_000);
        for (workers, target_abs, target_ratio) in [(1, 3.6e6, 0.17), (4, 5.5e6, 0.25)] {
            let (results, sched) = repeat(runs, || {
                runtime.block_on(keyed_throughput(items, items, workers, args.pacing))
            });
            let rate = med(&results, |r| r.items_per_sec());
            let ratio = median(
                &results
                    .iter()
                    .zip(&floors)
                    .map(|(r, f)| r.items_per_sec() / f.cycle.per_sec())
                    .collect::<Vec<_>>(),
            );
            emit(with_sched(
                json!({
                    "id": "W1",
                    "what": "one producer adds distinct u64 keys while workers get+done",
                    "params": { "items": items, "workers": workers, "threads": threads,
                                "pacing": args.pacing.to_string(), "runs": runs },
                    "m_items_per_sec": rate / 1e6,
                    "wall_s": med(&results, |r| r.wall.as_secs_f64()),
                    "max_backlog": med(&results, |r| r.max_backlog as f64),
                    "floor": "F1",
                    "ratio_to_floor": ratio,
                "cpu_ns_per_item": med_known(&cpu_ns_per(&sched, items)),
                "cpu_rate_ratio_to_floor": med_known(
                    &cpu_ns_per(&sched, items).iter().zip(&floors)
                        .map(|(w, f)| Some(f.cycle_cpu_ns? / (*w)?))
                        .collect::<Vec<_>>(),
                ),
                    "per_run_m_items_per_sec": results.iter().map(|r| r.items_per_sec() / 1e6).collect::<Vec<_>>(),
                    "target": format!(">= {} M/s or >= {:.0}% of F1", target_abs / 1e6, target_ratio * 100.0),
                    "meets_target": rate >= target_abs || ratio >= target_ratio,
                }),
                &sched,
            ));
        }
    }

    // W2: dedup storm.
    if wants("W2") {
        let adds = scaled(2_000_000);
        let keys = 1_000.min(adds);
        let (results, sched) = repeat(runs, || {
            runtime.block_on(keyed_throughput(adds, keys, 4, args.pacing))
        });
        let wall = med(&results, |r| r.wall.as_secs_f64());
        let add_ns = |r: &ctrlkit_benches::workloads::Throughput| {
            r.producer_wall.as_nanos() as f64 / r.adds as f64
        };
        emit(with_sched(
            json!({
                "id": "W2",
                "what": "dedup storm: adds over few distinct keys while 4 workers get+done",
                "params": { "adds": adds, "distinct_keys": keys, "workers": 4, "threads": threads,
                            "pacing": args.pacing.to_string(), "runs": runs },
                "m_adds_per_sec": med(&results, |r| r.adds_per_sec() / 1e6),
            "cpu_ns_per_add": med_known(&cpu_ns_per(&sched, adds)),
                "items_processed": med(&results, |r| r.processed as f64),
                "wall_s": wall,
                "max_backlog": med(&results, |r| r.max_backlog as f64),
                "floor": "F1",
                "ns_per_add_over_floor_cycle": median(
                    &results.iter().zip(&floors)
                        .map(|(r, f)| add_ns(r) / f.cycle.ns_per_cycle())
                        .collect::<Vec<_>>(),
                ),
                "per_run_wall_s": results.iter().map(|r| r.wall.as_secs_f64()).collect::<Vec<_>>(),
                "target": "wall <= 0.07 s",
                "meets_target": wall <= 0.07,
            }),
            &sched,
        ));
    }

    // W3: delayed adds.
    if wants("W3") {
        let items = scaled(200_000);
        let max_delay = Duration::from_millis(200);
        // Floor F3 first, run for run: tokio's timer with the same delays.
        let (timer, timer_sched) = repeat(runs, || {
            runtime.block_on(timer_floor(items, max_delay, W3_SEED, args.due))
        });
        emit(with_sched(
            json!({
                "id": "F3",
                "what": "W3's delays served by bare tasks sleeping until their due time (tokio timer + scheduling latency)",
                "params": { "items": items, "max_delay_ms": 200, "threads": threads,
                            "seed": W3_SEED, "due": args.due.to_string(), "runs": runs },
                "lateness_p50_ms": med(&timer, |d| d.p50_ns as f64 / 1e6),
                "lateness_p99_ms": med(&timer, |d| d.p99_ns as f64 / 1e6),
                "lateness_max_ms": med(&timer, |d| d.max_ns as f64 / 1e6),
            }),
            &timer_sched,
        ));
        let (results, sched) = repeat(runs, || {
            runtime.block_on(delayed(items, max_delay, 2, W3_SEED, args.due))
        });
        let late_ratio = |pick: fn(&Distribution) -> i64| {
            median(
                &results
                    .iter()
                    .zip(&timer)
                    .map(|(r, f)| pick(&r.lateness) as f64 / pick(f).max(1) as f64)
                    .collect::<Vec<_>>(),
            )
        };
        let p99_ms = med(&results, |r| r.lateness.p99_ns as f64 / 1e6);
        let max_ms = med(&results, |r| r.lateness.max_ns as f64 / 1e6);
        emit(with_sched(
            json!({
                "id": "W3",
                "what": "distinct keys added with add_after, due uniformly in 0..200 ms (or all at 200 ms: due=burst); lateness = get - due",
                "params": { "items": items, "max_delay_ms": 200, "workers": 2, "threads": threads,
                            "producer_yield_every": PRODUCER_YIELD_EVERY,
                            "seed": W3_SEED, "due": args.due.to_string(), "runs": runs },
                "wall_s": med(&results, |r| r.wall.as_secs_f64()),
                "wall_over_max_delay": med(&results, |r| r.wall.as_secs_f64() / max_delay.as_secs_f64()),
                "items_processed": med(&results, |r| r.processed as f64),
                "lateness_p50_ms": med(&results, |r| r.lateness.p50_ns as f64 / 1e6),
                "lateness_p99_ms": p99_ms,
                "lateness_max_ms": max_ms,
                "cpu_ns_per_item": med_known(&cpu_ns_per(&sched, items)),
                "floor": "F3",
                "p99_ratio_to_floor": late_ratio(|d| d.p99_ns),
                "max_ratio_to_floor": late_ratio(|d| d.max_ns),
                "per_run_lateness_max_ms": results.iter().map(|r| r.lateness.max_ns as f64 / 1e6).collect::<Vec<_>>(),
                "target": "lateness p99 <= 2 ms, max <= 10 ms",
                "meets_target": p99_ms <= 2.0 && max_ms <= 10.0,
            }),
            &sched,
        ));
    }

    // W4: add-to-get latency with idle workers.
    if wants("W4") {
        let rounds = scaled(100_000);
        let (results, sched) = repeat(runs, || runtime.block_on(latency(rounds, 4)));
        let p50 = med(&results, |d| us(d.p50_ns as f64));
        let p99 = med(&results, |d| us(d.p99_ns as f64));
        let ratio = |pick: fn(&Distribution) -> i64| {
            median(
                &results
                    .iter()
                    .zip(&floors)
                    .map(|(d, f)| pick(d) as f64 / pick(&f.handoff).max(1) as f64)
                    .collect::<Vec<_>>(),
            )
        };
        emit(with_sched(
            json!({
                "id": "W4",
                "what": "4 idle workers; add one key, wait until done, repeat; add-to-get latency",
                "params": { "rounds": rounds, "workers": 4, "threads": threads, "runs": runs },
                "p50_us": p50,
                "p99_us": p99,
                "max_us": med(&results, |d| us(d.max_ns as f64)),
            "cpu_ns_per_round": med_known(&cpu_ns_per(&sched, rounds)),
                "floor": "F2",
                "p50_ratio_to_floor": ratio(|d| d.p50_ns),
                "p99_ratio_to_floor": ratio(|d| d.p99_ns),
                "target": "p50 <= 0.5 us, p99 <= 1.0 us",
                "meets_target": p50 <= 0.5 && p99 <= 1.0,
            }),
            &sched,
        ));
    }
    ExitCode::SUCCESS
}
