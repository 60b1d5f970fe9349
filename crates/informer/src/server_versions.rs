//! What the informers watching one API server share about its
//! resourceVersions.

use std::sync::Arc;

use tokio::sync::watch;

/// Shared by the informers that watch one API server: when one of them
/// learns that the server's resourceVersions went backwards ("Too large
/// resource version": the server restarted on storage that lost its
/// history, or was restored from a backup), every informer sharing it
/// relists from scratch at once.
///
/// A resourceVersion is one clock for the whole server, not one per
/// resource. An informer that has not yet run into the error itself may
/// already be blind: once the new server's writes pass the version it
/// resumes from, its watch is accepted and never sends what was written
/// below that version. Waiting until each informer finds out on its own
/// (after its backoff) leaves it blind for that long, or for good.
///
/// [`SharedInformerFactory`](crate::SharedInformerFactory) gives one to
/// every informer it creates; an informer built alone has its own unless
/// given one with
/// [`InformerBuilder::server_versions`](crate::InformerBuilder::server_versions).
/// Cloning shares it.
#[derive(Clone, Debug)]
pub struct ServerVersions {
    /// How many times an informer found the versions gone backwards.
    resets: Arc<watch::Sender<u64>>,
}

impl Default for ServerVersions {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerVersions {
    /// A signal no informer shares yet.
    pub fn new() -> Self {
        Self {
            resets: Arc::new(watch::channel(0).0),
        }
    }

    /// How many times an informer sharing this found the server's versions
    /// gone backwards.
    pub fn resets(&self) -> u64 {
        *self.resets.borrow()
    }

    /// Tells every informer sharing this that the versions went backwards.
    pub(crate) fn reset(&self) {
        self.resets.send_modify(|n| *n += 1);
    }

    /// A receiver that sees each later [`reset`](Self::reset).
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.resets.subscribe()
    }
}
