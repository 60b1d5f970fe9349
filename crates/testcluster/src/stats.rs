//! Request statistics: how many API requests the cluster answered, by
//! verb, resource and status code.
//!
//! Counting is one relaxed atomic increment per request (plus one for the
//! exact status code) into fixed arrays indexed by (subresource, verb,
//! internal, status class), one array per resource type made on its first
//! request, so it costs nothing measurable next to handling the request
//! and needs no lock.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::resources::ResourceId;

/// Verbs as counted. `other` is an unsupported method on a resource path.
const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "other",
];

/// Subresources as counted; index 0 is the main resource, the last slot
/// collects unknown subresource names (which are answered 404).
const SUBRESOURCES: &[Option<&str>] = &[
    None,
    Some("status"),
    Some("scale"),
    Some("binding"),
    Some("other"),
];

/// Status classes 1xx..5xx.
const CLASSES: usize = 5;
/// Exact codes tracked: 100..=599.
const CODES: usize = 500;
/// Resource types counted apart; requests to types with higher ids (a
/// test registering over a thousand custom resources) share the last one.
const MAX_RESOURCES: usize = 1024;
/// Counters per resource type.
const PER_RESOURCE: usize = SUBRESOURCES.len() * VERBS.len() * 2 * CLASSES;

/// Where a request is counted: its verb, resource and subresource.
/// Filled in by the router as it learns them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    /// The resource type's id and plural name; `None` for non-resource
    /// paths (discovery, /version, 404s).
    resource: Option<(ResourceId, &'static str)>,
    sub: usize,
    verb: usize,
    pub(crate) internal: bool,
}

impl Slot {
    /// A request to a path that is not a resource (discovery, health, 404).
    pub(crate) fn non_resource(internal: bool) -> Slot {
        Slot {
            resource: None,
            sub: 0,
            verb: 0,
            internal,
        }
    }

    /// Count the request as `verb` on a non-resource path.
    pub(crate) fn set_verb(&mut self, verb: &str) {
        self.verb = VERBS
            .iter()
            .position(|v| *v == verb)
            .unwrap_or(VERBS.len() - 1);
    }

    /// Count the request as `verb` on the resource `id` (named `plural`) / `sub`.
    pub(crate) fn set(
        &mut self,
        id: ResourceId,
        plural: &'static str,
        sub: Option<&str>,
        verb: &str,
    ) {
        self.resource = Some((id.min(MAX_RESOURCES - 1), plural));
        self.sub = match sub {
            None => 0,
            Some(s) => SUBRESOURCES
                .iter()
                .position(|x| *x == Some(s))
                .unwrap_or(SUBRESOURCES.len() - 1),
        };
        self.set_verb(verb);
    }
}

/// One resource type's counters.
struct Block {
    plural: &'static str,
    /// (sub, verb, internal, class) -> count.
    counts: Box<[AtomicU64]>,
}

/// The live counters of one cluster.
pub(crate) struct Counters {
    /// Per resource id, then one for non-resource paths.
    blocks: Box<[OnceLock<Block>]>,
    /// (internal, code - 100) -> count.
    by_code: Box<[AtomicU64]>,
}

impl fmt::Debug for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counters").finish_non_exhaustive()
    }
}

fn zeroed(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn slot_index(sub: usize, verb: usize, internal: bool, class: usize) -> usize {
    ((sub * VERBS.len() + verb) * 2 + usize::from(internal)) * CLASSES + class
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters {
            blocks: (0..=MAX_RESOURCES).map(|_| OnceLock::new()).collect(),
            by_code: zeroed(2 * CODES),
        }
    }

    /// Count one answered request.
    pub(crate) fn record(&self, slot: Slot, code: u16) {
        let code = code.clamp(100, 599);
        let class = usize::from(code / 100 - 1);
        let (block, plural) = slot.resource.unwrap_or((MAX_RESOURCES, ""));
        let counts = &self.blocks[block]
            .get_or_init(|| Block {
                plural,
                counts: zeroed(PER_RESOURCE),
            })
            .counts;
        if let Some(c) = counts.get(slot_index(slot.sub, slot.verb, slot.internal, class)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let j = usize::from(slot.internal) * CODES + usize::from(code - 100);
        if let Some(c) = self.by_code.get(j) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Set every counter to zero. Requests answered concurrently may or
    /// may not be counted.
    pub(crate) fn reset(&self) {
        let blocks = self.blocks.iter().filter_map(OnceLock::get);
        for c in blocks
            .flat_map(|b| b.counts.iter())
            .chain(self.by_code.iter())
        {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// A snapshot of every non-zero counter.
    pub(crate) fn snapshot(&self) -> RequestStats {
        let mut stats = RequestStats::default();
        for block in self.blocks.iter().filter_map(OnceLock::get) {
            for (sub, subresource) in SUBRESOURCES.iter().enumerate() {
                for (verb, verb_name) in VERBS.iter().enumerate() {
                    for internal in [false, true] {
                        let mut counts = StatusCounts::default();
                        for class in 0..CLASSES {
                            let i = slot_index(sub, verb, internal, class);
                            let n = block.counts.get(i).map_or(0, |c| c.load(Ordering::Relaxed));
                            counts.add_class(class, n);
                        }
                        if counts.total() > 0 {
                            let key = RequestKey {
                                verb: verb_name,
                                resource: block.plural,
                                subresource: *subresource,
                                internal,
                            };
                            // Two types may share a plural (core and
                            // events.k8s.io events): their counts add up.
                            *stats.entries.entry(key).or_default() += counts;
                        }
                    }
                }
            }
        }
        for (j, c) in self.by_code.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            if n > 0 {
                let internal = j >= CODES;
                // j % CODES < 500, so the code fits in u16.
                let code = 100 + u16::try_from(j % CODES).unwrap_or(0);
                stats.codes.insert((internal, code), n);
            }
        }
        stats
    }
}

/// Which requests a count is about.
///
/// Internal requests are those of the cluster's own components (the
/// kubelet simulation); everything sent through
/// [`TestCluster::client`](crate::TestCluster::client), kubectl or any
/// other client is external.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// The Kubernetes verb: `get`, `list`, `watch`, `create`, `update`
    /// (PUT), `patch`, `delete`, `deletecollection`, or `other` for a
    /// method the resource does not support. Requests to non-resource
    /// paths (discovery, `/version`, unknown paths) count as `get` (or
    /// `other` for methods other than GET).
    pub verb: &'static str,
    /// The resource's plural name (`pods`, `replicasets`, ...); empty for
    /// non-resource paths.
    pub resource: &'static str,
    /// `status`, `scale`, `binding`, or `other` for an unknown
    /// subresource; `None` for the resource itself.
    pub subresource: Option<&'static str>,
    /// Whether the request came from the cluster's own components.
    pub internal: bool,
}

impl RequestKey {
    /// `resource` or `resource/subresource`, e.g. `pods/status`.
    pub fn resource_path(&self) -> String {
        match self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.to_string(),
        }
    }

    fn matches(&self, verb: &str, resource_path: &str) -> bool {
        let (resource, sub) = match resource_path.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (resource_path, None),
        };
        self.verb == verb && self.resource == resource && self.subresource == sub
    }
}

/// Request counts by HTTP status class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// 2xx answers.
    pub success: u64,
    /// 4xx answers (including injected 409 and 429 faults).
    pub client_error: u64,
    /// 5xx answers (including injected faults).
    pub server_error: u64,
    /// 1xx and 3xx answers (the server sends none today).
    pub other: u64,
}

impl StatusCounts {
    fn add_class(&mut self, class: usize, n: u64) {
        match class {
            1 => self.success += n,
            3 => self.client_error += n,
            4 => self.server_error += n,
            _ => self.other += n,
        }
    }

    /// Every request counted.
    pub fn total(&self) -> u64 {
        self.success + self.client_error + self.server_error + self.other
    }

    /// 4xx and 5xx answers.
    pub fn failed(&self) -> u64 {
        self.client_error + self.server_error
    }

    fn saturating_sub(self, other: StatusCounts) -> StatusCounts {
        StatusCounts {
            success: self.success.saturating_sub(other.success),
            client_error: self.client_error.saturating_sub(other.client_error),
            server_error: self.server_error.saturating_sub(other.server_error),
            other: self.other.saturating_sub(other.other),
        }
    }
}

impl std::ops::AddAssign for StatusCounts {
    fn add_assign(&mut self, rhs: StatusCounts) {
        self.success += rhs.success;
        self.client_error += rhs.client_error;
        self.server_error += rhs.server_error;
        self.other += rhs.other;
    }
}

/// A snapshot of the requests a [`TestCluster`](crate::TestCluster) has
/// answered, from [`TestCluster::requests`](crate::TestCluster::requests).
///
/// Every request is counted once, when its response (for a watch: the
/// start of its stream) is produced, under its verb, resource and
/// subresource and its status code. Requests whose client went away
/// before the answer was ready are not counted. Injected faults count as
/// the error they answered with. Internal requests (the kubelet
/// simulation's) are counted apart: the accessors whose name starts with
/// `internal_` read them, the others ignore them.
///
/// Take a snapshot before and after the work you measure and use
/// [`since`](Self::since) (or `-`) for the requests in between.
///
/// ```
/// # use ctrlkit_testcluster::RequestStats;
/// let stats = RequestStats::default();
/// assert_eq!(stats.total().total(), 0);
/// assert_eq!(stats.count("create", "pods").success, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestStats {
    entries: BTreeMap<RequestKey, StatusCounts>,
    /// (internal, code) -> count.
    codes: BTreeMap<(bool, u16), u64>,
}

impl RequestStats {
    /// Every non-zero count, internal and external, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&RequestKey, &StatusCounts)> {
        self.entries.iter()
    }

    /// External requests with `verb` on `resource` (`pods`, or
    /// `pods/status` for a subresource).
    pub fn count(&self, verb: &str, resource: &str) -> StatusCounts {
        self.sum(|k| !k.internal && k.matches(verb, resource))
    }

    /// Internal requests with `verb` on `resource` (see [`count`](Self::count)).
    pub fn internal_count(&self, verb: &str, resource: &str) -> StatusCounts {
        self.sum(|k| k.internal && k.matches(verb, resource))
    }

    /// Every external request.
    pub fn total(&self) -> StatusCounts {
        self.sum(|k| !k.internal)
    }

    /// Every internal request.
    pub fn internal_total(&self) -> StatusCounts {
        self.sum(|k| k.internal)
    }

    /// External requests per verb, over all resources.
    pub fn by_verb(&self) -> BTreeMap<&'static str, StatusCounts> {
        let mut out: BTreeMap<&'static str, StatusCounts> = BTreeMap::new();
        for (k, c) in self.entries.iter().filter(|(k, _)| !k.internal) {
            *out.entry(k.verb).or_default() += *c;
        }
        out
    }

    /// External requests answered with exactly `code`.
    pub fn code(&self, code: u16) -> u64 {
        self.codes.get(&(false, code)).copied().unwrap_or(0)
    }

    /// Internal requests answered with exactly `code`.
    pub fn internal_code(&self, code: u16) -> u64 {
        self.codes.get(&(true, code)).copied().unwrap_or(0)
    }

    /// External requests by exact status code (only codes that occurred).
    pub fn codes(&self) -> BTreeMap<u16, u64> {
        self.codes
            .iter()
            .filter(|((internal, _), _)| !internal)
            .map(|((_, code), n)| (*code, *n))
            .collect()
    }

    /// The requests counted in `self` but not yet in `earlier` (an older
    /// snapshot of the same cluster). Counts never go negative: after a
    /// [`reset_requests`](crate::TestCluster::reset_requests) in between,
    /// the difference is clamped at zero.
    pub fn since(&self, earlier: &RequestStats) -> RequestStats {
        let entries = self
            .entries
            .iter()
            .map(|(k, c)| {
                let before = earlier.entries.get(k).copied().unwrap_or_default();
                (*k, c.saturating_sub(before))
            })
            .filter(|(_, c)| c.total() > 0)
            .collect();
        let codes = self
            .codes
            .iter()
            .map(|(k, n)| {
                (
                    *k,
                    n.saturating_sub(earlier.codes.get(k).copied().unwrap_or(0)),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        RequestStats { entries, codes }
    }

    fn sum(&self, want: impl Fn(&RequestKey) -> bool) -> StatusCounts {
        let mut out = StatusCounts::default();
        for (_, c) in self.entries.iter().filter(|(k, _)| want(k)) {
            out += *c;
        }
        out
    }
}

impl std::ops::Sub<&RequestStats> for &RequestStats {
    type Output = RequestStats;

    /// Same as [`RequestStats::since`].
    fn sub(self, earlier: &RequestStats) -> RequestStats {
        self.since(earlier)
    }
}

/// One line per verb and resource: `create pods: 3 (2xx 3, 4xx 0, 5xx 0)`,
/// internal requests marked `[internal]`.
impl fmt::Display for RequestStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, c) in &self.entries {
            let resource = if k.resource.is_empty() {
                "(non-resource)".to_string()
            } else {
                k.resource_path()
            };
            writeln!(
                f,
                "{} {resource}{}: {} (2xx {}, 4xx {}, 5xx {})",
                k.verb,
                if k.internal { " [internal]" } else { "" },
                c.total(),
                c.success,
                c.client_error,
                c.server_error
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_slot_and_code_and_diffs() {
        let counters = Counters::new();
        let mut slot = Slot::non_resource(false);
        slot.set(1, "pods", None, "create");
        counters.record(slot, 201);
        counters.record(slot, 409);
        let before = counters.snapshot();
        counters.record(slot, 201);
        let mut status = Slot::non_resource(true);
        status.set(1, "pods", Some("status"), "update");
        counters.record(status, 200);
        counters.record(Slot::non_resource(false), 404);
        let after = counters.snapshot();

        let create = after.count("create", "pods");
        assert_eq!((create.success, create.client_error), (2, 1));
        assert_eq!(after.internal_count("update", "pods/status").success, 1);
        assert_eq!(after.count("update", "pods/status").total(), 0);
        assert_eq!(after.code(409), 1);
        assert_eq!(after.internal_code(200), 1);
        assert_eq!(after.total().total(), 4);
        assert_eq!(after.total().failed(), 2);
        assert_eq!(after.count("get", "").client_error, 1);

        let diff = after.since(&before);
        assert_eq!(diff.count("create", "pods").success, 1);
        assert_eq!(diff.count("create", "pods").client_error, 0);
        assert_eq!(diff.code(201), 1);
        assert_eq!(diff, &after - &before);
        assert!(
            after
                .to_string()
                .contains("create pods: 3 (2xx 2, 4xx 1, 5xx 0)")
        );

        counters.reset();
        assert_eq!(counters.snapshot(), RequestStats::default());
    }

    #[test]
    fn unknown_names_fall_into_other_slots() {
        let counters = Counters::new();
        let mut slot = Slot::non_resource(false);
        slot.set(1, "pods", Some("exec"), "connect");
        counters.record(slot, 404);
        let stats = counters.snapshot();
        assert_eq!(stats.count("other", "pods/other").client_error, 1);
    }
}
