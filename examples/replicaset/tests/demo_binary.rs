//! The README's first command, `ctrlkit-demo`, must work: every step
//! converges and the process exits 0.
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn demo_converges_every_step_and_exits_zero() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctrlkit-demo"))
        .args(["--step-timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Hang guard only: the demo takes seconds; its own steps time out first.
    let deadline = Instant::now() + Duration::from_secs(12 * 60 + 60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ctrlkit-demo hung");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    println!("{stdout}");
    assert!(status.success(), "exit status {status}:\n{stdout}");
    let steps: Vec<&str> = stdout.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(steps.len(), 12, "{stdout}");
    assert!(steps.iter().all(|l| l.contains(" ... ok (")), "{stdout}");
    assert!(stdout.contains("all 12 steps converged"), "{stdout}");
}
