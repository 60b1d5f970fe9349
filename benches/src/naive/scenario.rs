//! The scenario both controllers run: what the driver does to the cluster
//! and how the cluster behaves.

use std::fmt;
use std::time::Duration;

use ctrlkit_testcluster::faults::Latency;

/// Which controller a run drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    /// ctrlkit's `ReplicaSetController` (examples/replicaset).
    Ctrlkit,
    /// The naive kube-runtime controller reading pods from a reflector store.
    NaiveCache,
    /// The naive controller with one pod watch feeding both its store and
    /// its triggers.
    NaiveShared,
    /// The naive kube-runtime controller listing pods live in every reconcile.
    NaiveList,
}

impl Subject {
    /// Every subject, in report order.
    pub const ALL: [Subject; 4] = [
        Subject::Ctrlkit,
        Subject::NaiveCache,
        Subject::NaiveShared,
        Subject::NaiveList,
    ];

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Subject::Ctrlkit => "ctrlkit",
            Subject::NaiveCache => "naive-cache",
            Subject::NaiveShared => "naive-shared",
            Subject::NaiveList => "naive-list",
        }
    }

    /// Parses a name given by [`Subject::name`].
    pub fn from_name(name: &str) -> Option<Subject> {
        Subject::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The scenario: `replica_sets` ReplicaSets go through the replica counts
/// of `steps` (the first step creates them), each step applied to all of
/// them at once, the next step only after the cluster converged (or the
/// step's deadline passed).
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// How many ReplicaSets (named `rs-0`, `rs-1`, ...).
    pub replica_sets: usize,
    /// `spec.replicas` of every ReplicaSet at each step; must not be empty.
    pub steps: Vec<i32>,
    /// How late every watch event reaches the controllers.
    pub watch_delay: Latency,
    /// Simulated nodes and pod slots per node (the kubelet binds, starts
    /// and readies pods, and finishes graceful deletions).
    pub nodes: usize,
    /// Pod slots per node.
    pub pods_per_node: usize,
    /// Seed of the cluster's fault injector (the watch delays).
    pub seed: u64,
    /// How often the driver looks at the cluster.
    pub poll: Duration,
    /// A step has converged once the cluster showed the wanted state and
    /// no pod was created or deleted for this long (longer than the
    /// largest watch delay, so late reactions are caught).
    pub settle: Duration,
    /// Give up on a step after this long (reported as not converged).
    pub step_deadline: Duration,
}

impl Scenario {
    /// The scenario of docs/comparison.md: 20 ReplicaSets created with 3
    /// replicas, scaled to 10, down to 4, up to 8; watch events 100 ms to
    /// 1 s late.
    pub fn standard() -> Scenario {
        Scenario {
            replica_sets: 20,
            steps: vec![3, 10, 4, 8],
            watch_delay: Latency::Uniform {
                min: Duration::from_millis(100),
                max: Duration::from_millis(1000),
            },
            nodes: 4,
            pods_per_node: 500,
            seed: 1,
            poll: Duration::from_millis(100),
            settle: Duration::from_millis(2500),
            step_deadline: Duration::from_secs(60),
        }
    }

    /// Pod creations the steps need at least: every increase of
    /// `spec.replicas`, for every ReplicaSet.
    pub fn needed_creates(&self) -> u64 {
        self.needed(|from, to| to - from)
    }

    /// Pod deletions the steps need at least: every decrease.
    pub fn needed_deletes(&self) -> u64 {
        self.needed(|from, to| from - to)
    }

    fn needed(&self, change: impl Fn(i64, i64) -> i64) -> u64 {
        let mut previous = 0i64;
        let mut per_owner = 0u64;
        for &to in &self.steps {
            let to = i64::from(to.max(0));
            per_owner += u64::try_from(change(previous, to).max(0)).unwrap_or(0);
            previous = to;
        }
        per_owner * self.replica_sets as u64
    }

    /// The delay as `min..max ms` (or `N ms` when fixed).
    pub fn delay_label(&self) -> String {
        match self.watch_delay {
            Latency::Fixed(d) => format!("{} ms", d.as_millis()),
            Latency::Uniform { min, max } => {
                format!("{}..{} ms", min.as_millis(), max.as_millis())
            }
        }
    }
}
