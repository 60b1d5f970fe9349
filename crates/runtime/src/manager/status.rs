//! What a running manager reports about itself: readiness (for `/readyz`),
//! leadership, and the addresses its endpoints listen on.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use tokio::sync::watch;

/// The answer `/readyz` gives, with its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Caches are synced and this process leads (or is a stand-by counted
    /// as ready).
    Ready,
    /// The informer caches (or a runnable's own) have not synced yet.
    NotSynced,
    /// An informer has had no successful list or watch response for
    /// longer than the watch health bound; the log (warn, once per episode)
    /// and `informer_seconds_since_last_response` say which.
    WatchUnhealthy,
    /// A stand-by with warm caches, and stand-bys are not counted as ready
    /// (`--ready-when-standby=false`).
    StandBy,
    /// Shutdown was requested; in-flight work is draining.
    ShuttingDown,
}

impl Readiness {
    /// Whether `/readyz` answers 200.
    pub fn is_ready(self) -> bool {
        self == Self::Ready
    }
}

impl fmt::Display for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ready => "ok",
            Self::NotSynced => "informer caches not synced yet",
            Self::WatchUnhealthy => {
                "an informer has had no successful list or watch response within the watch health bound (see the log)"
            }
            Self::StandBy => "stand-by: waiting for the leader lease",
            Self::ShuttingDown => "shutting down",
        })
    }
}

/// The addresses the manager's HTTP endpoints listen on (the actual
/// ports when port 0 was asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// Where `/metrics` is served, if enabled.
    pub metrics: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` are served, if enabled.
    pub health: Option<SocketAddr>,
}

/// A cheap, cloneable view of a [`Manager`](super::Manager) that keeps
/// working while the manager runs (take it with
/// [`Manager::status`](super::Manager::status) before calling `run`).
#[derive(Debug, Clone)]
pub struct ManagerStatus {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    factory: Arc<SharedInformerFactory>,
    leader_election: bool,
    ready_when_standby: bool,
    watch_health_bound: Option<Duration>,
    warm: AtomicBool,
    leading: AtomicBool,
    shutting_down: AtomicBool,
    endpoints: watch::Sender<EndpointsState>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EndpointsState {
    Pending,
    Bound(Endpoints),
    /// The manager stopped before binding (or failed to bind).
    Never,
}

impl ManagerStatus {
    pub(crate) fn new(
        factory: Arc<SharedInformerFactory>,
        leader_election: bool,
        ready_when_standby: bool,
        watch_health_bound: Option<Duration>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                factory,
                leader_election,
                ready_when_standby,
                watch_health_bound,
                warm: AtomicBool::new(false),
                leading: AtomicBool::new(false),
                shutting_down: AtomicBool::new(false),
                endpoints: watch::channel(EndpointsState::Pending).0,
            }),
        }
    }

    /// What `/readyz` answers now: ready once every cache has synced and
    /// this process leads, or is a stand-by and stand-bys count as ready;
    /// never while shutting down, nor while an informer has been without a
    /// successful list or watch response for longer than the watch health
    /// bound.
    pub fn readiness(&self) -> Readiness {
        let inner = &self.inner;
        if inner.shutting_down.load(Ordering::Acquire) {
            Readiness::ShuttingDown
        } else if !inner.warm.load(Ordering::Acquire) || !inner.factory.has_synced() {
            Readiness::NotSynced
        } else if let Some(bound) = inner.watch_health_bound
            && inner.factory.health(bound).is_err()
        {
            Readiness::WatchUnhealthy
        } else if inner.leader_election
            && !inner.ready_when_standby
            && !inner.leading.load(Ordering::Acquire)
        {
            Readiness::StandBy
        } else {
            Readiness::Ready
        }
    }

    /// Shorthand for `readiness().is_ready()`.
    pub fn is_ready(&self) -> bool {
        self.readiness().is_ready()
    }

    /// Whether this process currently runs its leader-elected runnables:
    /// it holds the lease, or runs without leader election and has started
    /// them.
    pub fn is_leader(&self) -> bool {
        self.inner.leading.load(Ordering::Acquire)
    }

    /// Waits until the endpoints are listening and returns their
    /// addresses; `None` if the manager stopped (or failed to bind) first.
    /// Cancel-safe.
    pub async fn endpoints(&self) -> Option<Endpoints> {
        let mut rx = self.inner.endpoints.subscribe();
        let state = rx
            .wait_for(|s| *s != EndpointsState::Pending)
            .await
            .ok()
            .map(|s| *s);
        match state {
            Some(EndpointsState::Bound(endpoints)) => Some(endpoints),
            _ => None,
        }
    }

    pub(crate) fn set_warm(&self) {
        self.inner.warm.store(true, Ordering::Release);
    }

    pub(crate) fn set_leading(&self, leading: bool) {
        self.inner.leading.store(leading, Ordering::Release);
    }

    pub(crate) fn set_shutting_down(&self) {
        self.inner.shutting_down.store(true, Ordering::Release);
    }

    pub(crate) fn set_endpoints(&self, endpoints: Endpoints) {
        self.inner
            .endpoints
            .send_replace(EndpointsState::Bound(endpoints));
    }

    /// Marks the endpoints as never coming, unless they are bound.
    pub(crate) fn endpoints_never(&self) {
        self.inner.endpoints.send_if_modified(|state| {
            let pending = *state == EndpointsState::Pending;
            if pending {
                *state = EndpointsState::Never;
            }
            pending
        });
    }
}
