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

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use tokio::sync::watch;

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
    /// The selector with its generation; the list/watch restarts when it
    /// changes.
    selector: watch::Sender<(u64, Option<String>)>,
    /// The generation of the newest complete list.
    listed: AtomicU64,
    support: AtomicU8,
}

impl Default for ShardFilter {
    fn default() -> Self {
        Self {
            selector: watch::channel((0, None)).0,
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
            if *current == selector {
                return false;
            }
            *current = selector;
            *generation += 1;
            true
        })
    }

    pub(crate) fn current(&self) -> (u64, Option<String>) {
        self.selector.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<(u64, Option<String>)> {
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
