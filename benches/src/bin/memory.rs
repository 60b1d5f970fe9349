//! Memory per queued item: queues many distinct keys at once and reports
//! the peak resident memory gained over the empty process, one JSON line
//! per case. See benches/README.md.
//!
//! ```text
//! cargo run --release -p ctrlkit-benches --bin memory -- [--items 1000000] [--keys u64,string] [--ops add,add_after] [--metrics off,on] [--runs 3]
//! ```
//!
//! Every run is a fresh process (this binary started again with `--child`),
//! because a process's peak resident memory never goes down.

use std::process::{Command, ExitCode};

use ctrlkit_benches::memory::{AddKind, KeyKind, MemoryCase, measure_queue, string_key};
use ctrlkit_benches::sched::stamp_machine_load;
use ctrlkit_benches::stats::median;
use serde_json::{Value, json};

const USAGE: &str = "usage: memory [--items N] [--keys u64,string] [--ops add,add_after] [--metrics off,on] [--runs N]
  --items   distinct keys queued at once (default 1000000)
  --keys    key types: u64, string (namespace/name-like, 19 bytes) (default u64,string)
  --ops     add (queued) or add_after (waiting for a one-hour delay) (default add)
  --metrics off (no name, no metrics) or on (named queue, atomic metrics) (default off,on)
  --runs    fresh processes per case; figures are medians (default 3)";

/// client-go v0.36.3's workqueue with 1,000,000 keys queued at once, as
/// quoted in issue 17 (65.6-68.7 MB peak RSS, 62 B per item).
const CLIENT_GO_BYTES_PER_ITEM: f64 = 62.0;

struct Args {
    items: u64,
    keys: Vec<KeyKind>,
    ops: Vec<AddKind>,
    metrics: Vec<bool>,
    runs: usize,
    child: bool,
}

fn list<T>(value: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let items = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse)
        .collect::<Result<Vec<_>, _>>()?;
    if items.is_empty() {
        return Err("empty list".into());
    }
    Ok(items)
}

fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected on or off, got {s:?}")),
    }
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        items: 1_000_000,
        keys: vec![KeyKind::U64, KeyKind::String],
        ops: vec![AddKind::Add],
        metrics: vec![false, true],
        runs: 3,
        child: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--items" => {
                args.items = value("--items")?
                    .parse()
                    .map_err(|e| format!("--items: {e}"))?;
                if args.items == 0 {
                    return Err("--items must be at least 1".into());
                }
            }
            "--keys" => {
                args.keys =
                    list(&value("--keys")?, str::parse).map_err(|e| format!("--keys: {e}"))?
            }
            "--ops" => {
                args.ops = list(&value("--ops")?, str::parse).map_err(|e| format!("--ops: {e}"))?
            }
            "--metrics" => {
                args.metrics =
                    list(&value("--metrics")?, on_off).map_err(|e| format!("--metrics: {e}"))?;
            }
            "--runs" => {
                args.runs = value("--runs")?
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
                if args.runs == 0 {
                    return Err("--runs must be at least 1".into());
                }
            }
            "--child" => args.child = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.child && (args.keys.len(), args.ops.len(), args.metrics.len()) != (1, 1, 1) {
        return Err("--child measures one case: one key type, one op, one metrics setting".into());
    }
    Ok(args)
}

/// Measures one case in this process and prints its raw figures.
fn child(case: MemoryCase) -> Result<(), String> {
    // The delay store's timer task (add_after) and the metrics refresher
    // need a runtime; it exists before the baseline is read.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build the tokio runtime: {e}"))?;
    let _guard = runtime.enter();
    let result = match case.key {
        KeyKind::U64 => measure_queue(case, |i| i),
        KeyKind::String => measure_queue(case, string_key),
    }
    .ok_or("/proc/self/status is not readable (Linux only)")?;
    println!(
        "{}",
        json!({
            "before_peak": result.before.peak,
            "before_current": result.before.current,
            "after_peak": result.after.peak,
            "after_current": result.after.current,
            "queued": result.queued,
            "wall_ns": result.wall.as_nanos() as f64,
            "cpu_ns": result.cpu.map(|c| c.as_nanos() as f64),
        })
    );
    Ok(())
}

/// Runs one case in a fresh process and returns its raw figures.
fn run_child(case: MemoryCase) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let output = Command::new(exe)
        .args(["--child", "--items", &case.items.to_string()])
        .args([
            "--keys",
            &case.key.to_string(),
            "--ops",
            &case.op.to_string(),
        ])
        .args(["--metrics", if case.metrics { "on" } else { "off" }])
        .output()
        .map_err(|e| format!("cannot start the measuring process: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "measuring process failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("unreadable child output: {e}"))
}

fn case_line(case: MemoryCase, runs: &[Value]) -> Value {
    let field = |run: &Value, name: &str| run[name].as_f64().unwrap_or(f64::NAN);
    let per_item = |run: &Value, before: &str, after: &str| {
        (field(run, after) - field(run, before)) / case.items as f64
    };
    let med = |f: &dyn Fn(&Value) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let peak_per_item: Vec<f64> = runs
        .iter()
        .map(|r| per_item(r, "before_peak", "after_peak"))
        .collect();
    let peak = median(&peak_per_item);
    let mut line = json!({
        "id": "MEM",
        "what": "distinct keys queued at once, no worker; resident memory gained over the empty process",
        "params": { "items": case.items, "key": case.key.to_string(), "op": case.op.to_string(),
                    "metrics": case.metrics, "runs": runs.len() },
        "peak_rss_mb": med(&|r| field(r, "after_peak") / 1e6),
        "baseline_peak_rss_mb": med(&|r| field(r, "before_peak") / 1e6),
        "peak_bytes_per_item": peak,
        "settled_bytes_per_item": med(&|r| per_item(r, "before_current", "after_current")),
        "ns_per_add": med(&|r| field(r, "wall_ns") / case.items as f64),
        "cpu_ns_per_add": med(&|r| field(r, "cpu_ns") / case.items as f64),
        "queued": med(&|r| field(r, "queued")),
        "per_run_peak_bytes_per_item": peak_per_item,
    });
    if (case.key, case.op, case.metrics) == (KeyKind::U64, AddKind::Add, false)
        && let Some(fields) = line.as_object_mut()
    {
        fields.insert(
            "target".into(),
            json!(format!(
                "peak <= {CLIENT_GO_BYTES_PER_ITEM} B per item (client-go v0.36.3, issue 17)"
            )),
        );
        fields.insert(
            "meets_target".into(),
            json!(peak <= CLIENT_GO_BYTES_PER_ITEM),
        );
    }
    line
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
    let mut cases = Vec::new();
    for &key in &args.keys {
        for &op in &args.ops {
            for &metrics in &args.metrics {
                cases.push(MemoryCase {
                    items: args.items,
                    key,
                    op,
                    metrics,
                });
            }
        }
    }
    if args.child {
        for case in cases {
            if let Err(msg) = child(case) {
                eprintln!("error: {msg}");
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    for case in cases {
        let runs: Result<Vec<Value>, String> = (0..args.runs).map(|_| run_child(case)).collect();
        match runs {
            Ok(runs) => {
                let mut line = case_line(case, &runs);
                stamp_machine_load(&mut line);
                println!("{line}");
            }
            Err(msg) => {
                eprintln!("error: {msg}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
