//! The `memory` binary at a small scale: it measures in a fresh process,
//! accounts for every key, and the queue stays within client-go's memory
//! per queued item (62 B for `u64` keys, issue 17). Resident memory is
//! counted in pages, not timed, so the bound does not depend on the
//! machine's load.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use serde_json::Value;

fn measure(args: &[&str]) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_memory"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn u64_keys_cost_no_more_than_client_go_per_queued_item() {
    if std::fs::metadata("/proc/self/status").is_err() {
        eprintln!("skipped: resident memory is read from /proc (Linux only)");
        return;
    }
    let items = 250_000;
    let lines = measure(&[
        "--items",
        &items.to_string(),
        "--keys",
        "u64",
        "--metrics",
        "off,on",
        "--runs",
        "1",
    ]);
    assert_eq!(lines.len(), 2, "one line per case: {lines:?}");
    for line in &lines {
        assert_eq!(line["queued"].as_f64(), Some(items as f64), "{line}");
        let per_item = line["peak_bytes_per_item"].as_f64().unwrap();
        // A cell (32 B), an index bucket and a lane entry cannot take less.
        assert!(per_item > 32.0, "{line}");
        // Metrics add 8 B per item (the add time).
        let bound = if line["params"]["metrics"] == true {
            70.0
        } else {
            62.0
        };
        assert!(per_item <= bound, "{per_item} B per item > {bound}: {line}");
    }
}

#[test]
fn delayed_keys_are_measured_too() {
    if std::fs::metadata("/proc/self/status").is_err() {
        return;
    }
    let lines = measure(&[
        "--items",
        "20000",
        "--keys",
        "string",
        "--ops",
        "add_after",
        "--metrics",
        "off",
        "--runs",
        "1",
    ]);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["params"]["op"], "add_after");
    assert_eq!(
        lines[0]["queued"].as_f64(),
        Some(0.0),
        "keys wait, none queued"
    );
    assert!(lines[0]["peak_bytes_per_item"].as_f64().unwrap() > 0.0);
}
