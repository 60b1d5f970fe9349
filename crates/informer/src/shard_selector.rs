//! Server-side sharded list and watch (KEP-5866, Kubernetes 1.36 alpha,
//! feature gate `ShardedListAndWatch`): an informer may send a
//! `shardSelector` with its lists and watches, e.g.
//! `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`,
//! and the API server sends only the objects whose field hashes into the
//! ranges.
//!
//! Support is detected as the KEP says clients do: a server that applied
//! the selector echoes it in the list's `metadata.shardInfo.selector`; one
//! that does not know the parameter ignores it and sends everything, with
//! no `shardInfo`. Once a list shows the selector was ignored, the informer
//! stops restarting for new selectors (its cache holds everything anyway;
//! the caller filters on its side).
//!
//! A new selector restarts the list and watch: the relist replaces the
//! cache (objects outside the new selector leave it as deletes with
//! tombstones, new ones arrive as adds). Until that list is complete the
//! store does not count as reflecting any resourceVersion, so a caller
//! waiting for the cache to catch up does not mistake the old shard's
//! cache for the new one's.
//!
//! A [`ClientFilter`] narrows a cache the same way where the server cannot
//! (KEP-5866 hashes only `metadata.uid` and `metadata.namespace`, so a
//! sharded controller's children, placed by their controller's UID, are
//! filtered on the client): the informer still lists and watches every
//! object, but keeps only those the filter keeps. A new filter restarts
//! the list and watch exactly as a new selector does, so the objects it
//! newly keeps are in the cache once the relist completes, and until then
//! the store reflects nothing.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::watch;

/// Which objects an informer's cache keeps, decided on the client from each
/// object's metadata (see
/// [`Informer::set_client_filter`](crate::Informer::set_client_filter)).
///
/// Two filters with the same `id` (and label selector) are the same filter: setting one again
/// changes nothing (several controllers sharing an informer may each ask
/// for it without relisting twice).
#[derive(Clone)]
pub struct ClientFilter {
    id: String,
    keep: Arc<dyn Fn(&ObjectMeta) -> bool + Send + Sync>,
    labels: Option<Arc<str>>,
}

impl ClientFilter {
    /// A filter named `id` keeping the objects `keep` returns true for.
    pub fn new(
        id: impl Into<String>,
        keep: impl Fn(&ObjectMeta) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            id: id.into(),
            keep: Arc::new(keep),
            labels: None,
        }
    }

    /// Also sends `selector`, a label selector such as
    /// `ctrlkit.io/shard-slot notin (3,4)`, with every list and watch of
    /// the informer (and its consistent reads), joined with the informer's
    /// own label selector: the server then sends only the objects it
    /// selects, and the filter still decides what of those the cache
    /// keeps. Use it when the selector selects at least every object the
    /// filter keeps: an object the selector leaves out is never seen,
    /// whatever the filter would say.
    #[must_use]
    pub fn with_label_selector(mut self, selector: impl Into<String>) -> Self {
        let selector = selector.into();
        self.labels = (!selector.is_empty()).then(|| selector.into());
        self
    }

    /// The label selector sent to the server with this filter, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.labels.as_deref()
    }

    /// The filter's name: what tells two filters apart.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the cache keeps an object with metadata `meta`.
    pub fn keeps(&self, meta: &ObjectMeta) -> bool {
        (self.keep)(meta)
    }
}

impl fmt::Debug for ClientFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientFilter")
            .field("id", &self.id)
            .field("label_selector", &self.labels)
            .finish()
    }
}

impl PartialEq for ClientFilter {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.labels == other.labels
    }
}

/// What narrows an informer's cache: the selector sent to the server and
/// the filter applied on the client.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Narrowing {
    pub(crate) selector: Option<String>,
    pub(crate) filter: Option<ClientFilter>,
}

impl Narrowing {
    /// Whether the cache keeps an object with metadata `meta`.
    pub(crate) fn keeps(&self, meta: &ObjectMeta) -> bool {
        self.filter.as_ref().is_none_or(|f| f.keeps(meta))
    }

    /// The label selector to list and watch with: the informer's own
    /// (`base`) joined with the client filter's, if it has one.
    pub(crate) fn label_selector(&self, base: Option<&str>) -> Option<String> {
        let extra = self.filter.as_ref().and_then(ClientFilter::label_selector);
        match (base.filter(|b| !b.is_empty()), extra) {
            (Some(base), Some(extra)) => Some(format!("{base},{extra}")),
            (base, extra) => base.or(extra).map(str::to_owned),
        }
    }
}

/// Whether the API server applied a shard selector the informer sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardSelectorSupport {
    /// No list with a selector has completed yet.
    Unknown,
    /// The server echoed the selector (`metadata.shardInfo.selector`).
    Honoured,
    /// The server ignored the selector and sent every object.
    Ignored,
}

/// The informer's wanted selector and what the server made of it.
#[derive(Debug)]
pub(crate) struct ShardFilter {
    /// The selector and client filter with their generation; the
    /// list/watch restarts when either changes.
    selector: watch::Sender<(u64, Narrowing)>,
    /// The generation of the newest complete list.
    listed: AtomicU64,
    support: AtomicU8,
}

impl Default for ShardFilter {
    fn default() -> Self {
        Self {
            selector: watch::channel((0, Narrowing::default())).0,
            listed: AtomicU64::new(0),
            support: AtomicU8::new(0),
        }
    }
}

impl ShardFilter {
    /// Wants `selector` from now on; `false` if nothing changes (the same
    /// selector, or a server known to ignore selectors).
    pub(crate) fn set(&self, selector: Option<String>) -> bool {
        if self.support() == ShardSelectorSupport::Ignored {
            return false;
        }
        self.selector.send_if_modified(|(generation, current)| {
            if current.selector == selector {
                return false;
            }
            current.selector = selector;
            *generation += 1;
            true
        })
    }

    /// Keeps only what `filter` keeps from now on; `false` if it is the
    /// filter already set. Unlike a selector, a filter works with any
    /// server, so it is set whatever the server did with selectors.
    pub(crate) fn set_filter(&self, filter: Option<ClientFilter>) -> bool {
        self.selector.send_if_modified(|(generation, current)| {
            if current.filter == filter {
                return false;
            }
            current.filter = filter;
            *generation += 1;
            true
        })
    }

    pub(crate) fn current(&self) -> (u64, Narrowing) {
        self.selector.borrow().clone()
    }

    /// Whether the cache keeps an object with metadata `meta` under the
    /// current filter.
    pub(crate) fn keeps(&self, meta: &ObjectMeta) -> bool {
        self.selector.borrow().1.keeps(meta)
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<(u64, Narrowing)> {
        self.selector.subscribe()
    }

    /// A list made with generation `generation`'s selector is complete.
    pub(crate) fn listed(&self, generation: u64) {
        self.listed.fetch_max(generation, Ordering::AcqRel);
    }

    /// Whether the newest complete list used the wanted selector.
    pub(crate) fn is_current(&self) -> bool {
        self.listed.load(Ordering::Acquire) >= self.selector.borrow().0
    }

    /// Records what a list made with `sent` came back with.
    pub(crate) fn observe(&self, sent: &str, echoed: Option<&str>) {
        let support = if echoed == Some(sent) {
            ShardSelectorSupport::Honoured
        } else {
            ShardSelectorSupport::Ignored
        };
        let previous = self.support.swap(encode(support), Ordering::AcqRel);
        if support == ShardSelectorSupport::Ignored && previous != encode(support) {
            tracing::warn!(
                selector = sent,
                "the API server ignored the shardSelector (no matching metadata.shardInfo in its list): the cache holds every object, filtered on the client only"
            );
        }
    }

    pub(crate) fn support(&self) -> ShardSelectorSupport {
        match self.support.load(Ordering::Acquire) {
            1 => ShardSelectorSupport::Honoured,
            2 => ShardSelectorSupport::Ignored,
            _ => ShardSelectorSupport::Unknown,
        }
    }
}

fn encode(support: ShardSelectorSupport) -> u8 {
    match support {
        ShardSelectorSupport::Unknown => 0,
        ShardSelectorSupport::Honoured => 1,
        ShardSelectorSupport::Ignored => 2,
    }
}
