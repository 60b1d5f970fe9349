//! Seeded, reproducible fault injection for the test cluster.
//!
//! A [`FaultInjector`] sits in front of every API request the server handles.
//! For each request that is not marked internal (the kubelet simulation's
//! requests carry the `x-ctrlkit-internal` header and are never faulted) it
//! decides, with a seeded random number generator, whether to
//!
//! - answer with an error instead of handling the request ([`ErrorKind`]:
//!   500, 429 with `Retry-After`, 409 Conflict, 504 Timeout, each with a
//!   Kubernetes `Status` body),
//! - add latency before handling it ([`Latency`]),
//!
//! and for every watch it may
//!
//! - cut the stream after a number of events or a time ([`WatchCut`]),
//! - delay each frame by a fixed or random amount, preserving order
//!   ([`FaultConfig::watch_delay`]), which makes watch-fed caches stale,
//! - answer with `410 Gone` once, when armed at runtime with
//!   [`FaultInjector::force_gone_next_watch`].
//!
//! Every injected fault is appended to a log ([`FaultInjector::log`]).
//!
//! # Reproducibility
//!
//! All random decisions come from one `StdRng` seeded with the cluster seed,
//! behind a mutex, and are drawn per request in arrival order. So the same
//! seed and the same sequence of requests give the same faults. A client that
//! sends its requests one after another (awaiting each) therefore sees exactly
//! reproducible faults. Concurrent requests arrive in an order that depends on
//! scheduling, and so does the exact fault sequence; the fault *rates* stay the
//! same. Note that kube's default client retries 429, 503 and 504 responses by
//! itself; every retry is a new request and draws again.
//!
//! The random stream is the one of `rand`'s `StdRng`, which is stable for a
//! given `rand` version but not promised across `rand` major versions.
//!
//! # Example
//!
//! ```
//! use ctrlkit_testcluster::{TestCluster, TestClusterConfig, faults::*};
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::Api;
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Every `get` fails with 500; the seed fixes which requests fail when
//! // the rate is below 1.
//! let faults = FaultConfig::default()
//!     .with_error(ErrorRule::verb("get", 1.0, ErrorKind::InternalError));
//! let tc = TestCluster::start(TestClusterConfig::default().with_seed(7).with_faults(faults))
//!     .await?;
//! let pods: Api<Pod> = Api::default_namespaced(tc.client());
//! let err = pods.get("anything").await.unwrap_err();
//! assert!(matches!(err, kube::Error::Api(s) if s.code == 500));
//!
//! let log = tc.faults().log();
//! assert_eq!(log[0].kind, FaultKind::Error(ErrorKind::InternalError));
//! assert_eq!((log[0].verb.as_str(), log[0].resource.as_str()), ("get", "pods"));
//!
//! // Arm a one-shot 410 Gone for the next pod watch; switch faults off.
//! tc.faults().force_gone_next_watch(Some("pods"));
//! tc.faults().set_config(FaultConfig::none());
//! tc.shutdown().await;
//! # Ok(())
//! # }
//! ```

use std::{collections::VecDeque, fmt, sync::Arc, time::Duration};

use bytes::Bytes;
use futures::{StreamExt, stream::BoxStream};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Header that marks a request as internal to the test cluster (sent by the
/// kubelet simulation's client). Faults never apply to such requests.
pub const INTERNAL_HEADER: &str = "x-ctrlkit-internal";

/// What the server knows about a request when it asks the injector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestInfo<'a> {
    /// kube-apiserver verb: `get`, `list`, `watch`, `create`, `update`,
    /// `patch`, `delete`, `deletecollection`.
    pub verb: &'a str,
    /// Plural resource name, e.g. `pods`, `replicasets`, `leases`.
    pub resource: &'a str,
    /// Subresource, e.g. `status`, `scale`, `binding`.
    pub subresource: Option<&'a str>,
    /// Namespace of the request, if namespaced.
    pub namespace: Option<&'a str>,
    /// Object name, if the request names one.
    pub name: Option<&'a str>,
    /// True when the request carries [`INTERNAL_HEADER`]; faults never apply.
    pub internal: bool,
}

/// An error response the injector can answer with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// `500 Internal Server Error`, reason `InternalError`.
    InternalError,
    /// `429 Too Many Requests`, reason `TooManyRequests`, with a
    /// `Retry-After` header (whole seconds) and `details.retryAfterSeconds`.
    TooManyRequests {
        /// Value of the `Retry-After` header, in seconds.
        retry_after_secs: u32,
    },
    /// `409 Conflict`, reason `Conflict`, as for a stale resourceVersion.
    Conflict,
    /// `504 Gateway Timeout`, reason `Timeout`, returned at once, as the
    /// apiserver does when a request exceeds its server-side deadline. (A
    /// client-side timeout is modelled with [`Latency`] longer than the
    /// client's timeout instead.)
    Timeout,
}

impl ErrorKind {
    /// HTTP status code of this error.
    pub fn code(&self) -> u16 {
        match self {
            ErrorKind::InternalError => 500,
            ErrorKind::TooManyRequests { .. } => 429,
            ErrorKind::Conflict => 409,
            ErrorKind::Timeout => 504,
        }
    }

    /// `Status.reason` of this error.
    pub fn reason(&self) -> &'static str {
        match self {
            ErrorKind::InternalError => "InternalError",
            ErrorKind::TooManyRequests { .. } => "TooManyRequests",
            ErrorKind::Conflict => "Conflict",
            ErrorKind::Timeout => "Timeout",
        }
    }

    /// The error for an HTTP status code: 500, 429 (Retry-After 1 s), 409 or
    /// 504. Other codes give `None`.
    pub fn from_code(code: u16) -> Option<ErrorKind> {
        match code {
            500 => Some(ErrorKind::InternalError),
            429 => Some(ErrorKind::TooManyRequests {
                retry_after_secs: 1,
            }),
            409 => Some(ErrorKind::Conflict),
            504 => Some(ErrorKind::Timeout),
            _ => None,
        }
    }
}

/// Answer matching requests with an error, with some probability.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorRule {
    /// Verb to match (`None` = every verb).
    pub verb: Option<String>,
    /// Resource to match (`None` = every resource). `pods` matches every
    /// pods request including subresources; `pods/status` matches only the
    /// status subresource.
    pub resource: Option<String>,
    /// Object name to match (`None` = any). Only requests that name an
    /// object in their path match a name: get, update, patch, delete, not
    /// create or list.
    pub name: Option<String>,
    /// Probability in `[0, 1]` that a matching request fails.
    pub rate: f64,
    /// The error to answer with.
    pub kind: ErrorKind,
}

impl ErrorRule {
    /// A rule failing requests of `verb` (any resource) at `rate` with `kind`.
    pub fn verb(verb: &str, rate: f64, kind: ErrorKind) -> ErrorRule {
        ErrorRule {
            verb: Some(verb.to_owned()),
            resource: None,
            name: None,
            rate,
            kind,
        }
    }

    /// A rule failing every request at `rate` with `kind`.
    pub fn any(rate: f64, kind: ErrorKind) -> ErrorRule {
        ErrorRule {
            verb: None,
            resource: None,
            name: None,
            rate,
            kind,
        }
    }

    /// Restrict this rule to one resource (`pods`, or `pods/status`).
    pub fn for_resource(mut self, resource: &str) -> ErrorRule {
        self.resource = Some(resource.to_owned());
        self
    }

    /// Restrict this rule to requests naming the object `name` (see
    /// [`ErrorRule::name`]): one member's Lease renewals, say.
    pub fn for_name(mut self, name: &str) -> ErrorRule {
        self.name = Some(name.to_owned());
        self
    }

    fn matches(&self, req: &RequestInfo<'_>) -> bool {
        let verb_ok = self.verb.as_deref().is_none_or(|v| v == req.verb);
        let name_ok = self.name.is_none() || self.name.as_deref() == req.name;
        verb_ok && name_ok && resource_matches(self.resource.as_deref(), req)
    }
}

fn resource_matches(pattern: Option<&str>, req: &RequestInfo<'_>) -> bool {
    match pattern {
        None => true,
        Some(p) => match p.split_once('/') {
            Some((res, sub)) => res == req.resource && req.subresource == Some(sub),
            None => p == req.resource,
        },
    }
}

/// An added delay: fixed, or drawn uniformly from a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Latency {
    /// Always this delay.
    Fixed(Duration),
    /// A delay drawn uniformly from `min..=max` (seeded).
    Uniform {
        /// Smallest delay.
        min: Duration,
        /// Largest delay.
        max: Duration,
    },
}

impl Latency {
    fn draw(&self, rng: &mut StdRng) -> Duration {
        match *self {
            Latency::Fixed(d) => d,
            Latency::Uniform { min, max } => {
                let (lo, hi) = (min.as_nanos() as u64, max.as_nanos() as u64);
                if hi <= lo {
                    min
                } else {
                    Duration::from_nanos(rng.random_range(lo..=hi))
                }
            }
        }
    }
}

/// When to cut watch streams. The stream simply ends (as when a connection
/// drops or the apiserver's watch timeout fires); clients must re-watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchCut {
    /// End the stream after this many events (bookmarks are not counted).
    pub after_events: Option<usize>,
    /// End the stream this long after it started.
    pub after: Option<Duration>,
}

/// Which faults to inject. `Default` injects nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Error rules, checked in order; the first rule that matches a request
    /// and fires decides its error. One random number is drawn per matching
    /// rule.
    pub errors: Vec<ErrorRule>,
    /// Latency added before every (non-internal) request is handled,
    /// including the start of watches.
    pub latency: Option<Latency>,
    /// Optionally restrict [`latency`](Self::latency) to one verb.
    pub latency_verb: Option<String>,
    /// Cut watch streams.
    pub watch_cut: Option<WatchCut>,
    /// Delay each watch frame by this much after the server produced it.
    /// Order is preserved: a frame is never delivered before an earlier one.
    pub watch_delay: Option<Latency>,
}

impl FaultConfig {
    /// No faults (same as `Default`).
    pub fn none() -> FaultConfig {
        FaultConfig::default()
    }

    /// Add an error rule.
    pub fn with_error(mut self, rule: ErrorRule) -> FaultConfig {
        self.errors.push(rule);
        self
    }

    /// Add latency to every request.
    pub fn with_latency(mut self, latency: Latency) -> FaultConfig {
        self.latency = Some(latency);
        self
    }

    /// Cut watches after `n` events.
    pub fn with_watch_cut_after_events(mut self, n: usize) -> FaultConfig {
        self.watch_cut
            .get_or_insert_with(WatchCut::default)
            .after_events = Some(n);
        self
    }

    /// Cut watches after `d`.
    pub fn with_watch_cut_after(mut self, d: Duration) -> FaultConfig {
        self.watch_cut.get_or_insert_with(WatchCut::default).after = Some(d);
        self
    }

    /// Delay every watch frame.
    pub fn with_watch_delay(mut self, delay: Latency) -> FaultConfig {
        self.watch_delay = Some(delay);
        self
    }

    /// True when this configuration injects nothing.
    pub fn is_empty(&self) -> bool {
        self.errors.iter().all(|r| r.rate <= 0.0)
            && self.latency.is_none()
            && self.watch_cut.is_none()
            && self.watch_delay.is_none()
    }
}

/// The kind of an injected fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The request was answered with this error instead of being handled.
    Error(ErrorKind),
    /// The request was delayed by this much before being handled.
    Latency(Duration),
    /// The watch was answered with 410 Gone (armed with
    /// [`FaultInjector::force_gone_next_watch`]).
    ForcedGone,
    /// The watch stream was ended after this many events.
    WatchCutAfterEvents(usize),
    /// The watch stream was ended after this long.
    WatchCutAfter(Duration),
    /// The watch's frames are delayed (logged once per watch).
    WatchDelayed(Latency),
}

/// One entry of the fault log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectedFault {
    /// Position in the log, from 0.
    pub seq: u64,
    /// Arrival number of the (non-internal) request the fault hit, from 0.
    pub request: u64,
    /// Verb of the request.
    pub verb: String,
    /// Resource of the request.
    pub resource: String,
    /// Subresource of the request.
    pub subresource: Option<String>,
    /// Namespace of the request.
    pub namespace: Option<String>,
    /// Name in the request.
    pub name: Option<String>,
    /// What was injected.
    pub kind: FaultKind,
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} req {} {} {}",
            self.seq, self.request, self.verb, self.resource
        )?;
        if let Some(sub) = &self.subresource {
            write!(f, "/{sub}")?;
        }
        write!(f, ": {:?}", self.kind)
    }
}

struct State {
    config: FaultConfig,
    rng: StdRng,
    next_request: u64,
    armed_gone: VecDeque<Option<String>>,
    log: Vec<InjectedFault>,
}

impl State {
    fn record(&mut self, request: u64, req: &RequestInfo<'_>, kind: FaultKind) {
        let seq = self.log.len() as u64;
        self.log.push(InjectedFault {
            seq,
            request,
            verb: req.verb.to_owned(),
            resource: req.resource.to_owned(),
            subresource: req.subresource.map(str::to_owned),
            namespace: req.namespace.map(str::to_owned),
            name: req.name.map(str::to_owned),
            kind,
        });
    }
}

/// Decides and applies faults; shared by every request handler.
///
/// `Send + Sync`; cheap to share behind the cluster. Runtime control:
/// [`set_config`](Self::set_config), [`force_gone_next_watch`](Self::force_gone_next_watch),
/// [`clear`](Self::clear).
pub struct FaultInjector {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("FaultInjector")
            .field("config", &st.config)
            .field("armed_gone", &st.armed_gone)
            .field("logged", &st.log.len())
            .finish()
    }
}

/// What [`FaultInjector::decide`] chose for one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Delay to add before answering.
    pub latency: Option<Duration>,
    /// Error to answer with (after the latency), instead of handling.
    pub error: Option<ErrorKind>,
}

impl FaultInjector {
    /// A new injector with `config`, its random decisions seeded with `seed`.
    pub fn new(config: FaultConfig, seed: u64) -> FaultInjector {
        FaultInjector {
            state: Arc::new(Mutex::new(State {
                config,
                rng: StdRng::seed_from_u64(seed),
                next_request: 0,
                armed_gone: VecDeque::new(),
                log: Vec::new(),
            })),
        }
    }

    /// Replace the configuration. Takes effect for the next request (and
    /// the next watch; running watches keep their cut/delay settings). The
    /// random stream and the log continue.
    pub fn set_config(&self, config: FaultConfig) {
        self.state.lock().config = config;
    }

    /// The current configuration.
    pub fn config(&self) -> FaultConfig {
        self.state.lock().config.clone()
    }

    /// Arm a one-shot `410 Gone`: the next watch (of `resource`, or of any
    /// resource when `None`) that is not internal is answered with 410 Gone,
    /// which makes a reflector relist. Arming twice answers two watches.
    pub fn force_gone_next_watch(&self, resource: Option<&str>) {
        self.state
            .lock()
            .armed_gone
            .push_back(resource.map(str::to_owned));
    }

    /// Remove every configured fault and every armed 410. The log is kept
    /// (see [`clear_log`](Self::clear_log)).
    pub fn clear(&self) {
        let mut st = self.state.lock();
        st.config = FaultConfig::default();
        st.armed_gone.clear();
    }

    /// Empty the fault log.
    pub fn clear_log(&self) {
        self.state.lock().log.clear();
    }

    /// Every injected fault so far, in the order they were injected.
    pub fn log(&self) -> Vec<InjectedFault> {
        self.state.lock().log.clone()
    }

    /// Decide (and log) the faults for one request without applying them.
    /// Internal requests get no faults and draw no random numbers. Exposed
    /// for servers that apply the decision themselves;
    /// [`before_request`](Self::before_request) calls it.
    pub fn decide(&self, req: &RequestInfo<'_>) -> Decision {
        if req.internal {
            return Decision::default();
        }
        let mut st = self.state.lock();
        let request = st.next_request;
        st.next_request += 1;
        let st = &mut *st;
        let mut decision = Decision::default();
        let latency_applies = st
            .config
            .latency_verb
            .as_deref()
            .is_none_or(|v| v == req.verb);
        if let Some(lat) = st.config.latency.filter(|_| latency_applies) {
            let d = lat.draw(&mut st.rng);
            if !d.is_zero() {
                decision.latency = Some(d);
            }
        }
        for rule in &st.config.errors {
            if !rule.matches(req) || rule.rate <= 0.0 {
                continue;
            }
            let x: f64 = st.rng.random();
            if x < rule.rate {
                decision.error = Some(rule.kind.clone());
                break;
            }
        }
        if let Some(d) = decision.latency {
            st.record(request, req, FaultKind::Latency(d));
        }
        if let Some(e) = &decision.error {
            st.record(request, req, FaultKind::Error(e.clone()));
        }
        decision
    }

    /// Called for every API request before it is handled: waits for any
    /// added latency and returns the error response to send instead of
    /// handling the request, if one was chosen.
    pub async fn before_request(
        &self,
        req: &RequestInfo<'_>,
    ) -> Option<http::Response<axum::body::Body>> {
        let decision = self.decide(req);
        if let Some(d) = decision.latency {
            tokio::time::sleep(d).await;
        }
        decision.error.map(|e| error_response(&e, req))
    }

    /// Called when a watch starts: true means answer it with 410 Gone. Takes
    /// the first armed entry that matches the resource (one-shot). Internal
    /// watches never match.
    pub fn take_forced_gone(&self, req: &RequestInfo<'_>) -> bool {
        if req.internal {
            return false;
        }
        let mut st = self.state.lock();
        let pos = st
            .armed_gone
            .iter()
            .position(|r| r.as_deref().is_none_or(|r| r == req.resource));
        match pos {
            Some(i) => {
                st.armed_gone.remove(i);
                let request = st.next_request.saturating_sub(1);
                st.record(request, req, FaultKind::ForcedGone);
                true
            }
            None => false,
        }
    }

    /// Called for every watch: wraps its stream of serialized frames (one
    /// complete JSON watch event line each) to cut or delay it as
    /// configured. Internal watches and a configuration without watch
    /// faults pass the stream through unchanged.
    pub fn wrap_watch(
        &self,
        req: &RequestInfo<'_>,
        frames: BoxStream<'static, Bytes>,
    ) -> BoxStream<'static, Bytes> {
        if req.internal {
            return frames;
        }
        let (cut, delay, delay_seed, request) = {
            let mut st = self.state.lock();
            let cut = st.config.watch_cut;
            let delay = st.config.watch_delay;
            // Per-watch RNG for random frame delays, drawn from the main
            // stream so it is reproducible in arrival order.
            let seed = match delay {
                Some(Latency::Uniform { .. }) => st.rng.random::<u64>(),
                _ => 0,
            };
            (cut, delay, seed, st.next_request.saturating_sub(1))
        };
        let mut frames = frames;
        if let Some(delay) = delay {
            self.state
                .lock()
                .record(request, req, FaultKind::WatchDelayed(delay));
            frames = delay_frames(frames, delay, delay_seed);
        }
        if let Some(cut) = cut.filter(|c| c.after_events.is_some() || c.after.is_some()) {
            let owned = OwnedInfo::from(req);
            frames = cut_frames(frames, cut, Arc::clone(&self.state), request, owned);
        }
        frames
    }
}

/// Owned copy of a [`RequestInfo`] for logging from inside streams.
#[derive(Clone, Debug)]
struct OwnedInfo {
    verb: String,
    resource: String,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
}

impl From<&RequestInfo<'_>> for OwnedInfo {
    fn from(r: &RequestInfo<'_>) -> Self {
        OwnedInfo {
            verb: r.verb.to_owned(),
            resource: r.resource.to_owned(),
            subresource: r.subresource.map(str::to_owned),
            namespace: r.namespace.map(str::to_owned),
            name: r.name.map(str::to_owned),
        }
    }
}

impl OwnedInfo {
    fn as_info(&self) -> RequestInfo<'_> {
        RequestInfo {
            verb: &self.verb,
            resource: &self.resource,
            subresource: self.subresource.as_deref(),
            namespace: self.namespace.as_deref(),
            name: self.name.as_deref(),
            internal: false,
        }
    }
}

fn is_bookmark(frame: &[u8]) -> bool {
    // Frames are compact JSON written by the server; a substring test is
    // enough to tell bookmarks apart without parsing every frame.
    let needle = b"\"BOOKMARK\"";
    frame.windows(needle.len()).any(|w| w == needle)
}

fn cut_frames(
    frames: BoxStream<'static, Bytes>,
    cut: WatchCut,
    state: Arc<Mutex<State>>,
    request: u64,
    info: OwnedInfo,
) -> BoxStream<'static, Bytes> {
    let deadline = cut.after.map(|d| tokio::time::Instant::now() + d);
    let record = move |kind: FaultKind| state.lock().record(request, &info.as_info(), kind);
    futures::stream::unfold((frames, 0usize), move |(mut frames, seen)| {
        let record = record.clone();
        async move {
            if let Some(n) = cut.after_events
                && seen >= n
            {
                record(FaultKind::WatchCutAfterEvents(n));
                return None;
            }
            let next = match deadline {
                None => frames.next().await,
                Some(deadline) => match tokio::time::timeout_at(deadline, frames.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        record(FaultKind::WatchCutAfter(cut.after.unwrap_or_default()));
                        return None;
                    }
                },
            };
            let frame = next?;
            let seen = if is_bookmark(&frame) { seen } else { seen + 1 };
            Some((frame, (frames, seen)))
        }
    })
    .boxed()
}

fn delay_frames(
    frames: BoxStream<'static, Bytes>,
    delay: Latency,
    seed: u64,
) -> BoxStream<'static, Bytes> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Bytes)>();
    // Reader: stamps each frame with its due time as it is produced, so a
    // burst of frames is delayed once, not cumulatively.
    tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut frames = frames;
        let mut last_due = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = tx.closed() => break,
                frame = frames.next() => {
                    let Some(frame) = frame else { break };
                    let due = (tokio::time::Instant::now() + delay.draw(&mut rng)).max(last_due);
                    last_due = due;
                    if tx.send((due, frame)).is_err() {
                        break;
                    }
                }
            }
        }
    });
    futures::stream::unfold(rx, |mut rx| async move {
        let (due, frame) = rx.recv().await?;
        tokio::time::sleep_until(due).await;
        Some((frame, rx))
    })
    .boxed()
}

/// Build the error response for an injected error: a Kubernetes `Status`
/// body, plus `Retry-After` for 429.
pub fn error_response(kind: &ErrorKind, req: &RequestInfo<'_>) -> http::Response<axum::body::Body> {
    let what = match req.name {
        Some(n) => format!("{} \"{}\"", req.resource, n),
        None => req.resource.to_owned(),
    };
    let message = match kind {
        ErrorKind::InternalError => format!("injected fault: internal error while handling {what}"),
        ErrorKind::TooManyRequests { .. } => {
            "injected fault: too many requests, please try again later".to_owned()
        }
        ErrorKind::Conflict => format!(
            "injected fault: operation cannot be fulfilled on {what}: the object has been modified; please apply your changes to the latest version and try again"
        ),
        ErrorKind::Timeout => format!(
            "injected fault: the server was unable to return a response in the time allotted for {what}"
        ),
    };
    let mut body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": kind.reason(),
        "code": kind.code(),
    });
    let mut details = serde_json::Map::new();
    if let Some(n) = req.name {
        details.insert("name".into(), n.into());
    }
    details.insert("kind".into(), req.resource.into());
    if let ErrorKind::TooManyRequests { retry_after_secs } = kind {
        details.insert("retryAfterSeconds".into(), (*retry_after_secs).into());
    }
    body["details"] = serde_json::Value::Object(details);
    let mut builder = http::Response::builder()
        .status(kind.code())
        .header(http::header::CONTENT_TYPE, "application/json");
    if let ErrorKind::TooManyRequests { retry_after_secs } = kind {
        builder = builder.header(http::header::RETRY_AFTER, retry_after_secs.to_string());
    }
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    builder
        .body(axum::body::Body::from(bytes))
        .unwrap_or_else(|_| http::Response::new(axum::body::Body::empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(verb: &'a str, resource: &'a str) -> RequestInfo<'a> {
        RequestInfo {
            verb,
            resource,
            subresource: None,
            namespace: Some("default"),
            name: None,
            internal: false,
        }
    }

    fn errors_for(inj: &FaultInjector, n: usize) -> Vec<Option<ErrorKind>> {
        (0..n)
            .map(|_| inj.decide(&req("get", "pods")).error)
            .collect()
    }

    #[test]
    fn no_config_injects_nothing() {
        let inj = FaultInjector::new(FaultConfig::default(), 1);
        for _ in 0..100 {
            assert_eq!(inj.decide(&req("create", "pods")), Decision::default());
        }
        assert!(inj.log().is_empty());
    }

    #[test]
    fn rate_one_always_fails_and_rate_zero_never() {
        let cfg = FaultConfig::default()
            .with_error(ErrorRule::verb("create", 1.0, ErrorKind::Conflict))
            .with_error(ErrorRule::verb("get", 0.0, ErrorKind::InternalError));
        let inj = FaultInjector::new(cfg, 7);
        for _ in 0..50 {
            assert_eq!(
                inj.decide(&req("create", "pods")).error,
                Some(ErrorKind::Conflict)
            );
            assert_eq!(inj.decide(&req("get", "pods")).error, None);
        }
        let log = inj.log();
        assert_eq!(log.len(), 50);
        assert!(log.iter().enumerate().all(|(i, f)| f.seq == i as u64
            && f.verb == "create"
            && f.kind == FaultKind::Error(ErrorKind::Conflict)));
        // Requests are numbered in arrival order, faulted or not.
        assert_eq!(log[1].request, 2);
    }

    #[test]
    fn same_seed_same_faults_different_seed_different_faults() {
        let cfg = FaultConfig::default().with_error(ErrorRule::any(0.5, ErrorKind::InternalError));
        let a = errors_for(&FaultInjector::new(cfg.clone(), 42), 64);
        let b = errors_for(&FaultInjector::new(cfg.clone(), 42), 64);
        let c = errors_for(&FaultInjector::new(cfg, 43), 64);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn internal_requests_are_never_faulted_and_draw_nothing() {
        let cfg = FaultConfig::default()
            .with_error(ErrorRule::any(0.5, ErrorKind::InternalError))
            .with_latency(Latency::Fixed(Duration::from_millis(5)));
        let plain = FaultInjector::new(cfg.clone(), 9);
        let mixed = FaultInjector::new(cfg, 9);
        let internal = RequestInfo {
            internal: true,
            ..req("get", "pods")
        };
        let mut a = Vec::new();
        let mut b = Vec::new();
        for _ in 0..32 {
            a.push(plain.decide(&req("get", "pods")));
            assert_eq!(mixed.decide(&internal), Decision::default());
            b.push(mixed.decide(&req("get", "pods")));
        }
        assert_eq!(a, b);
        assert!(mixed.log().iter().all(|f| f.request < 32));
        assert!(!mixed.take_forced_gone(&internal));
    }

    #[test]
    fn rate_is_respected_statistically() {
        let cfg = FaultConfig::default().with_error(ErrorRule::any(0.3, ErrorKind::Timeout));
        let inj = FaultInjector::new(cfg, 1234);
        let failed = errors_for(&inj, 10_000).iter().flatten().count();
        // Fixed seed, so this is deterministic; the band is wide anyway.
        assert!((2_700..3_300).contains(&failed), "{failed}");
    }

    #[test]
    fn rules_match_verb_resource_and_subresource() {
        let cfg = FaultConfig::default().with_error(
            ErrorRule::verb("patch", 1.0, ErrorKind::InternalError).for_resource("pods/status"),
        );
        let inj = FaultInjector::new(cfg, 0);
        assert_eq!(inj.decide(&req("patch", "pods")).error, None);
        let status = RequestInfo {
            subresource: Some("status"),
            ..req("patch", "pods")
        };
        assert!(inj.decide(&status).error.is_some());
        let other = RequestInfo {
            subresource: Some("status"),
            ..req("patch", "replicasets")
        };
        assert_eq!(inj.decide(&other).error, None);

        let cfg = FaultConfig::default()
            .with_error(ErrorRule::any(1.0, ErrorKind::Conflict).for_resource("pods"));
        let inj = FaultInjector::new(cfg, 0);
        assert!(inj.decide(&status).error.is_some());
        assert_eq!(inj.decide(&req("get", "leases")).error, None);
    }

    #[test]
    fn first_firing_rule_wins() {
        let cfg = FaultConfig::default()
            .with_error(ErrorRule::any(1.0, ErrorKind::Timeout))
            .with_error(ErrorRule::any(1.0, ErrorKind::Conflict));
        let inj = FaultInjector::new(cfg, 0);
        assert_eq!(
            inj.decide(&req("get", "pods")).error,
            Some(ErrorKind::Timeout)
        );
        assert_eq!(inj.log().len(), 1);
    }

    #[test]
    fn uniform_latency_stays_in_range_and_is_logged() {
        let (min, max) = (Duration::from_millis(10), Duration::from_millis(20));
        let cfg = FaultConfig::default().with_latency(Latency::Uniform { min, max });
        let inj = FaultInjector::new(cfg, 5);
        let ds: Vec<Duration> = (0..200)
            .map(|_| inj.decide(&req("list", "pods")).latency.unwrap())
            .collect();
        assert!(ds.iter().all(|d| (min..=max).contains(d)));
        assert!(ds.iter().any(|d| *d != ds[0]), "range is actually used");
        assert_eq!(inj.log().len(), 200);
    }

    #[test]
    fn latency_can_be_limited_to_a_verb() {
        let mut cfg = FaultConfig::default().with_latency(Latency::Fixed(Duration::from_secs(1)));
        cfg.latency_verb = Some("list".into());
        let inj = FaultInjector::new(cfg, 5);
        assert_eq!(inj.decide(&req("get", "pods")).latency, None);
        assert_eq!(
            inj.decide(&req("list", "pods")).latency,
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn forced_gone_is_one_shot_and_per_resource() {
        let inj = FaultInjector::new(FaultConfig::default(), 0);
        assert!(!inj.take_forced_gone(&req("watch", "pods")));
        inj.force_gone_next_watch(Some("replicasets"));
        assert!(!inj.take_forced_gone(&req("watch", "pods")));
        assert!(inj.take_forced_gone(&req("watch", "replicasets")));
        assert!(!inj.take_forced_gone(&req("watch", "replicasets")));
        inj.force_gone_next_watch(None);
        assert!(inj.take_forced_gone(&req("watch", "leases")));
        assert!(!inj.take_forced_gone(&req("watch", "leases")));
        let kinds: Vec<FaultKind> = inj.log().into_iter().map(|f| f.kind).collect();
        assert_eq!(kinds, vec![FaultKind::ForcedGone, FaultKind::ForcedGone]);
        inj.force_gone_next_watch(None);
        inj.clear();
        assert!(!inj.take_forced_gone(&req("watch", "pods")));
    }

    #[test]
    fn set_config_and_clear_change_decisions() {
        let inj = FaultInjector::new(FaultConfig::default(), 0);
        assert_eq!(inj.decide(&req("get", "pods")).error, None);
        inj.set_config(FaultConfig::default().with_error(ErrorRule::any(1.0, ErrorKind::Conflict)));
        assert!(inj.decide(&req("get", "pods")).error.is_some());
        inj.clear();
        assert_eq!(inj.decide(&req("get", "pods")).error, None);
        assert_eq!(inj.log().len(), 1, "clear keeps the log");
        inj.clear_log();
        assert!(inj.log().is_empty());
    }

    #[tokio::test]
    async fn error_responses_are_status_bodies() {
        for (kind, code, reason) in [
            (ErrorKind::InternalError, 500, "InternalError"),
            (
                ErrorKind::TooManyRequests {
                    retry_after_secs: 3,
                },
                429,
                "TooManyRequests",
            ),
            (ErrorKind::Conflict, 409, "Conflict"),
            (ErrorKind::Timeout, 504, "Timeout"),
        ] {
            let r = RequestInfo {
                name: Some("web-1"),
                ..req("get", "pods")
            };
            let resp = error_response(&kind, &r);
            assert_eq!(resp.status().as_u16(), code);
            let retry_after = resp.headers().get(http::header::RETRY_AFTER).cloned();
            assert_eq!(retry_after.is_some(), code == 429);
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["kind"], "Status");
            assert_eq!(v["status"], "Failure");
            assert_eq!(v["code"], code);
            assert_eq!(v["reason"], reason);
            assert_eq!(v["details"]["name"], "web-1");
            if code == 429 {
                assert_eq!(retry_after.unwrap(), "3");
                assert_eq!(v["details"]["retryAfterSeconds"], 3);
            }
            assert_eq!(ErrorKind::from_code(code).map(|k| k.code()), Some(code));
        }
        assert_eq!(ErrorKind::from_code(418), None);
    }

    fn frame(kind: &str, n: usize) -> Bytes {
        Bytes::from(format!(
            "{{\"type\":\"{kind}\",\"object\":{{\"n\":{n}}}}}\n"
        ))
    }

    #[tokio::test]
    async fn watch_cut_after_events_ignores_bookmarks() {
        let cfg = FaultConfig::default().with_watch_cut_after_events(2);
        let inj = FaultInjector::new(cfg, 0);
        let frames = vec![
            frame("ADDED", 1),
            frame("BOOKMARK", 2),
            frame("MODIFIED", 3),
            frame("MODIFIED", 4),
        ];
        // A stream that never ends by itself: the cut must end it.
        let input = futures::stream::iter(frames.clone())
            .chain(futures::stream::pending())
            .boxed();
        let out: Vec<Bytes> = inj.wrap_watch(&req("watch", "pods"), input).collect().await;
        assert_eq!(out, frames[..3].to_vec());
        let log = inj.log();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].kind, FaultKind::WatchCutAfterEvents(2));
    }

    #[tokio::test(start_paused = true)]
    async fn watch_cut_after_time() {
        let cfg = FaultConfig::default().with_watch_cut_after(Duration::from_secs(5));
        let inj = FaultInjector::new(cfg, 0);
        let input = futures::stream::iter(vec![frame("ADDED", 1)])
            .chain(futures::stream::pending())
            .boxed();
        let start = tokio::time::Instant::now();
        let out: Vec<Bytes> = inj.wrap_watch(&req("watch", "pods"), input).collect().await;
        assert_eq!(out.len(), 1);
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(
            inj.log()[0].kind,
            FaultKind::WatchCutAfter(Duration::from_secs(5))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn watch_delay_delays_each_frame_once_and_keeps_order() {
        let (min, max) = (Duration::from_millis(100), Duration::from_millis(900));
        let cfg = FaultConfig::default().with_watch_delay(Latency::Uniform { min, max });
        let inj = FaultInjector::new(cfg, 3);
        let frames: Vec<Bytes> = (0..20).map(|i| frame("ADDED", i)).collect();
        let start = tokio::time::Instant::now();
        let mut out = inj.wrap_watch(
            &req("watch", "pods"),
            futures::stream::iter(frames.clone()).boxed(),
        );
        let first = out.next().await.unwrap();
        assert!(start.elapsed() >= min);
        let mut got = vec![first];
        while let Some(f) = out.next().await {
            got.push(f);
        }
        assert_eq!(got, frames, "order preserved");
        // All frames arrived at once, so delays do not add up.
        assert!(start.elapsed() <= max, "{:?}", start.elapsed());
        assert!(matches!(inj.log()[0].kind, FaultKind::WatchDelayed(_)));
    }

    #[tokio::test]
    async fn internal_watches_pass_through() {
        let cfg = FaultConfig::default().with_watch_cut_after_events(1);
        let inj = FaultInjector::new(cfg, 0);
        let frames: Vec<Bytes> = (0..3).map(|i| frame("ADDED", i)).collect();
        let internal = RequestInfo {
            internal: true,
            ..req("watch", "pods")
        };
        let out: Vec<Bytes> = inj
            .wrap_watch(&internal, futures::stream::iter(frames.clone()).boxed())
            .collect()
            .await;
        assert_eq!(out, frames);
        assert!(inj.log().is_empty());
    }
}
