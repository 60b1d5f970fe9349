//! What a run measured, as a JSON line and as a row of a table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use ctrlkit_testcluster::RequestStats;
use serde_json::{Value, json};

use super::scenario::{Scenario, Subject};

/// One step of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepReport {
    /// `spec.replicas` the step set.
    pub replicas: i32,
    /// Whether the cluster reached and kept the wanted state before the
    /// step's deadline.
    pub converged: bool,
    /// From the step's first request to the first poll of the stable
    /// state (poll resolution); the time spent when not converged.
    pub converge: Duration,
    /// Largest excess seen at a poll: active pods above
    /// `max(previous replicas, replicas)`, summed over the ReplicaSets.
    pub peak_excess: u64,
}

/// What one controller did in one run of the scenario. Request figures
/// are the controller's own: the API server's counts minus the driver's
/// requests.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The controller.
    pub subject: Subject,
    /// The scenario's seed.
    pub seed: u64,
    /// ReplicaSets in the scenario.
    pub replica_sets: usize,
    /// `spec.replicas` per step.
    pub step_replicas: Vec<i32>,
    /// The watch delay, as text.
    pub watch_delay: String,
    /// Pods created (2xx answers).
    pub creates: u64,
    /// Creations the scenario needs at least.
    pub needed_creates: u64,
    /// Pods deleted (2xx answers).
    pub deletes: u64,
    /// Deletions the scenario needs at least.
    pub needed_deletes: u64,
    /// Largest excess of active pods seen at a poll, over all steps.
    pub peak_excess: u64,
    /// The steps.
    pub steps: Vec<StepReport>,
    /// The controller's requests per `verb resource[/subresource]`.
    pub requests: BTreeMap<String, u64>,
    /// The controller's requests answered with a 4xx or 5xx, by code.
    pub failed_by_code: BTreeMap<u16, u64>,
    /// First request of the first step to the end of the last step.
    pub wall: Duration,
}

impl RunReport {
    /// Builds the report from the server's request statistics over the run
    /// and the requests the driver sent.
    pub fn new(
        scenario: &Scenario,
        subject: Subject,
        stats: &RequestStats,
        driver: &BTreeMap<(&'static str, &'static str), u64>,
        steps: Vec<StepReport>,
        wall: Duration,
    ) -> RunReport {
        let mut requests: BTreeMap<String, u64> = BTreeMap::new();
        for (key, counts) in stats.iter().filter(|(k, _)| !k.internal) {
            *requests
                .entry(format!("{} {}", key.verb, key.resource_path()))
                .or_default() += counts.total();
        }
        for ((verb, resource), n) in driver {
            if let Some(count) = requests.get_mut(&format!("{verb} {resource}")) {
                *count = count.saturating_sub(*n);
            }
        }
        requests.retain(|_, n| *n > 0);
        RunReport {
            subject,
            seed: scenario.seed,
            replica_sets: scenario.replica_sets,
            step_replicas: scenario.steps.clone(),
            watch_delay: scenario.delay_label(),
            creates: stats.count("create", "pods").success,
            needed_creates: scenario.needed_creates(),
            deletes: stats.count("delete", "pods").success,
            needed_deletes: scenario.needed_deletes(),
            peak_excess: steps.iter().map(|s| s.peak_excess).max().unwrap_or(0),
            steps,
            requests,
            // The driver's requests all succeed (it stops on a failure).
            failed_by_code: stats
                .codes()
                .into_iter()
                .filter(|(c, _)| *c >= 400)
                .collect(),
            wall,
        }
    }

    /// Pods created beyond what the scenario needed.
    pub fn over_created(&self) -> u64 {
        self.creates.saturating_sub(self.needed_creates)
    }

    /// Pods deleted beyond what the scenario needed (the over-created
    /// pods, and pods deleted by mistake and created again).
    pub fn extra_deletes(&self) -> u64 {
        self.deletes.saturating_sub(self.needed_deletes)
    }

    /// Whether every step converged.
    pub fn converged(&self) -> bool {
        self.steps.iter().all(|s| s.converged)
    }

    /// Every request of the controller.
    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }

    /// Requests per verb.
    pub fn by_verb(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (key, n) in &self.requests {
            let verb = key.split_once(' ').map_or(key.as_str(), |(v, _)| v);
            *out.entry(verb.to_owned()).or_default() += n;
        }
        out
    }

    /// Requests on events (ctrlkit records an Event per create/delete
    /// batch; the naive controller records none).
    pub fn event_requests(&self) -> u64 {
        self.requests
            .iter()
            .filter(|(k, _)| k.ends_with(" events"))
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests answered with a 4xx or 5xx.
    pub fn failed_requests(&self) -> u64 {
        self.failed_by_code.values().sum()
    }

    /// One JSON object (printed as one line).
    pub fn to_json(&self) -> Value {
        json!({
            "controller": self.subject.name(),
            "scenario": {
                "replica_sets": self.replica_sets,
                "steps": self.step_replicas,
                "watch_delay": self.watch_delay,
                "seed": self.seed,
            },
            "over_created": self.over_created(),
            "creates": self.creates,
            "needed_creates": self.needed_creates,
            "deletes": self.deletes,
            "needed_deletes": self.needed_deletes,
            "extra_deletes": self.extra_deletes(),
            "peak_excess_sampled": self.peak_excess,
            "converged": self.converged(),
            "converge_s": self.steps.iter().map(|s| round3(s.converge)).collect::<Vec<_>>(),
            "wall_s": round3(self.wall),
            "requests_total": self.total_requests(),
            "requests_by_verb": self.by_verb(),
            "requests": self.requests,
            "event_requests": self.event_requests(),
            "failed_requests": self.failed_requests(),
            "failed_by_code": self.failed_by_code,
        })
    }
}

fn round3(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// A table of the reports, one row per report.
pub fn table(reports: &[RunReport]) -> String {
    const VERBS: [&str; 7] = [
        "create", "delete", "list", "watch", "get", "patch", "update",
    ];
    let mut out = String::new();
    let _ = write!(
        out,
        "{:<12} {:>4} {:>6} {:>13} {:>13} {:>6} {:>6}",
        "controller", "seed", "over", "creates/need", "deletes/need", "peak+", "reqs"
    );
    for verb in VERBS {
        let _ = write!(out, " {verb:>6}");
    }
    let _ = writeln!(out, " {:>6} {:>6}  converge s per step", "events", "failed");
    for r in reports {
        let by_verb = r.by_verb();
        let _ = write!(
            out,
            "{:<12} {:>4} {:>6} {:>13} {:>13} {:>6} {:>6}",
            r.subject.name(),
            r.seed,
            r.over_created(),
            format!("{}/{}", r.creates, r.needed_creates),
            format!("{}/{}", r.deletes, r.needed_deletes),
            r.peak_excess,
            r.total_requests(),
        );
        for verb in VERBS {
            let _ = write!(out, " {:>6}", by_verb.get(verb).copied().unwrap_or(0));
        }
        let steps: Vec<String> = r
            .steps
            .iter()
            .map(|s| {
                let mark = if s.converged { "" } else { "!" };
                format!("{:.2}{mark}", s.converge.as_secs_f64())
            })
            .collect();
        let _ = writeln!(
            out,
            " {:>6} {:>6}  {}",
            r.event_requests(),
            r.failed_requests(),
            steps.join(" ")
        );
    }
    out
}
