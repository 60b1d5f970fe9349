//! Runs the same scenario against ctrlkit's ReplicaSet controller and the
//! naive kube-runtime one on ctrlkit-testcluster, with delayed watch
//! delivery. Prints one JSON line per run on stdout and a table on stderr.
//! See benches/README.md and docs/comparison.md.
//!
//! ```text
//! cargo run --release -p ctrlkit-benches --bin compare -- [--replica-sets 20] [--steps 3,10,4,8] [--delay-ms 100..1000] [--seed 1] [--runs 1] [--only ctrlkit,naive-cache,naive-shared,naive-list]
//! ```

use std::process::ExitCode;
use std::time::Duration;

use ctrlkit_benches::naive::{RunReport, Scenario, Subject, run, table};
use ctrlkit_benches::sched::stamp_machine_load;
use ctrlkit_testcluster::faults::Latency;

const USAGE: &str = "usage: compare [options]
  --replica-sets N   ReplicaSets in the scenario (default 20)
  --steps A,B,...    spec.replicas per step; the first creates them (default 3,10,4,8)
  --delay-ms MIN..MAX | N
                     watch events reach the controllers this late (default 100..1000)
  --seed S           seed of the first run (default 1); run i uses S+i
  --runs R           runs per controller (default 1)
  --only LIST        controllers: ctrlkit,naive-cache,naive-shared,naive-list (default: all)
  --settle-ms N      a step converged once nothing changed for this long (default 2500)
  --deadline-s N     give up on a step after this long (default 60)";

struct Args {
    scenario: Scenario,
    runs: u64,
    subjects: Vec<Subject>,
}

fn parse_delay(text: &str) -> Result<Latency, String> {
    let ms = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| format!("bad delay {s:?}: {e}"))
    };
    match text.split_once("..") {
        Some((min, max)) => {
            let (min, max) = (ms(min)?, ms(max)?);
            if max < min {
                return Err(format!("delay range {text} is empty"));
            }
            Ok(Latency::Uniform { min, max })
        }
        None => Ok(Latency::Fixed(ms(text)?)),
    }
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        scenario: Scenario::standard(),
        runs: 1,
        subjects: Subject::ALL.to_vec(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, text: String| {
            text.parse::<u64>()
                .map_err(|e| format!("{name}: {text:?} is not a number: {e}"))
        };
        match arg.as_str() {
            "--replica-sets" => {
                let n = number("--replica-sets", value("--replica-sets")?)?;
                args.scenario.replica_sets = usize::try_from(n).map_err(|e| e.to_string())?;
            }
            "--steps" => {
                args.scenario.steps = value("--steps")?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<i32>()
                            .ok()
                            .filter(|n| *n >= 0)
                            .ok_or(format!("--steps: {s:?} is not a replica count"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--delay-ms" => args.scenario.watch_delay = parse_delay(&value("--delay-ms")?)?,
            "--seed" => args.scenario.seed = number("--seed", value("--seed")?)?,
            "--runs" => args.runs = number("--runs", value("--runs")?)?.max(1),
            "--settle-ms" => {
                let n = number("--settle-ms", value("--settle-ms")?)?;
                args.scenario.settle = Duration::from_millis(n);
            }
            "--deadline-s" => {
                let n = number("--deadline-s", value("--deadline-s")?)?;
                args.scenario.step_deadline = Duration::from_secs(n);
            }
            "--only" => {
                args.subjects = value("--only")?
                    .split(',')
                    .map(|s| Subject::from_name(s.trim()).ok_or(format!("unknown controller {s}")))
                    .collect::<Result<_, _>>()?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.scenario.steps.is_empty() || args.scenario.replica_sets == 0 {
        return Err("the scenario needs at least one ReplicaSet and one step".into());
    }
    Ok(args)
}

fn json_line(report: &RunReport) -> String {
    let mut line = report.to_json();
    stamp_machine_load(&mut line);
    line.to_string()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("compare: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("compare: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut reports = Vec::new();
    for i in 0..args.runs {
        let mut scenario = args.scenario.clone();
        scenario.seed += i;
        for &subject in &args.subjects {
            eprintln!(
                "compare: {subject}, seed {}: {} ReplicaSets through {:?}, watch delay {}",
                scenario.seed,
                scenario.replica_sets,
                scenario.steps,
                scenario.delay_label()
            );
            match runtime.block_on(run(&scenario, subject)) {
                Ok(report) => {
                    println!("{}", json_line(&report));
                    reports.push(report);
                }
                Err(e) => {
                    eprintln!("compare: {subject} failed: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    eprint!("\n{}", table(&reports));
    ExitCode::SUCCESS
}
