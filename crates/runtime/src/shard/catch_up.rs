//! Rule 6 of the handover (`docs/sharding.md`): before a member syncs a
//! slot it gained, every cache of every sharded controller must show what
//! the previous holder wrote, so it does not create those children again.
//!
//! When the slot starts, the member reads each cache's resource
//! consistently (a quorum list, with the informer's own selectors, so a
//! server-side sharded owner informer lists only its shard). That read
//! comes after the newest Lease version the member had seen, which is at
//! or after the previous holder's acknowledgement, so it shows every child
//! the previous holder created or deleted. The slot starts once each cache
//! [reflects](ctrlkit_informer::Store::reflects) its read: at once in a
//! quiet cluster (the cache already holds every listed object), after the
//! missing events otherwise. While the reads are in flight, or if they
//! failed, the older check applies: the cache's own resourceVersion
//! reached that Lease version (true under load, never in a quiet cluster);
//! past [`ShardConfig::catch_up_timeout`](super::ShardConfig::catch_up_timeout)
//! the slot starts anyway (the member fails open, with a warning).

use std::sync::Arc;

use ctrlkit_informer::{CompareError, ConsistentRead};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::slots::SlotSet;
use crate::controller::Synced;

/// The caches a gained slot waits for.
pub(crate) type Caches = Vec<Arc<dyn Synced>>;

/// What the consistent reads of a catch-up came to.
enum Reads {
    Pending,
    /// One read per cache (`None`: no API behind that cache).
    Done(Vec<Option<ConsistentRead>>),
    Failed,
}

/// Gained slots waiting for the caches.
pub(crate) struct CatchUp {
    pub(crate) slots: SlotSet,
    /// The newest Lease version seen when the protocol let them start.
    pub(crate) target: Option<String>,
    pub(crate) deadline: Instant,
    /// Whether the member warned that a cache still relists past the
    /// deadline.
    pub(crate) warned: bool,
    /// The member's claims when the reads were made: what a narrowed
    /// cache holds once its relist for them is done.
    claims: SlotSet,
    caches: Caches,
    reads: Arc<Mutex<Reads>>,
    task: Option<JoinHandle<()>>,
}

impl Drop for CatchUp {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl CatchUp {
    /// Starts the consistent reads of `caches` for `slots`, made once the
    /// caches were narrowed to the member's `claims`; `wake` is called
    /// once they are done, so the member checks again at once.
    pub(crate) fn start(
        slots: SlotSet,
        target: Option<String>,
        deadline: Instant,
        claims: SlotSet,
        caches: Caches,
        wake: impl FnOnce() + Send + 'static,
    ) -> Self {
        let mut catch_up = Self {
            slots,
            target,
            deadline,
            warned: false,
            claims,
            caches,
            reads: Arc::new(Mutex::new(Reads::Pending)),
            task: None,
        };
        catch_up.read(wake);
        catch_up
    }

    /// Reads again, for the member's new `claims`, if the reads were made
    /// for others: a cache narrowed to the claims (a server-side selector
    /// or child filter) never reflects a read of a different shard, which
    /// would hold the slots back until the timeout. Deadline and target
    /// stay.
    pub(crate) fn reread_for(&mut self, claims: SlotSet, wake: impl FnOnce() + Send + 'static) {
        if self.claims == claims {
            return;
        }
        self.claims = claims;
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.reads = Arc::new(Mutex::new(Reads::Pending));
        self.read(wake);
    }

    fn read(&mut self, wake: impl FnOnce() + Send + 'static) {
        if self.target.is_none() || self.caches.is_empty() {
            return;
        }
        let (caches, reads) = (self.caches.clone(), Arc::clone(&self.reads));
        self.task = Some(tokio::spawn(async move {
            let mut done = Vec::with_capacity(caches.len());
            for cache in &caches {
                match cache.consistent_read().await {
                    Ok(read) => done.push(read),
                    Err(error) => {
                        tracing::warn!(
                            error = &error as &dyn std::error::Error,
                            "cannot read a cache's resource consistently for a handover: waiting for the cache's resourceVersion instead"
                        );
                        *reads.lock() = Reads::Failed;
                        wake();
                        return;
                    }
                }
            }
            *reads.lock() = Reads::Done(done);
            wake();
        }));
    }

    /// Whether a cache is still relisting for the member's new claims
    /// (server-side selector or child filter): it may lack the gained
    /// slots' objects entirely, so the slots must not start, not even past
    /// the catch-up timeout.
    pub(crate) fn relisting(&self) -> bool {
        self.caches.iter().any(|c| c.is_relisting())
    }

    /// Whether every cache shows what the slots need; an error when
    /// resourceVersions cannot be ordered (the caller fails open).
    pub(crate) fn ready(&self) -> Result<bool, CompareError> {
        let Some(target) = self.target.as_deref() else {
            return Ok(true);
        };
        if let Reads::Done(reads) = &*self.reads.lock() {
            for (cache, read) in self.caches.iter().zip(reads) {
                let ok = match read {
                    Some(read) => cache.reflects(read)?,
                    None => cache.has_observed_resource_version(target)?,
                };
                if !ok {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        for cache in &self.caches {
            if !cache.has_observed_resource_version(target)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use ctrlkit_informer::{Informer, InformerError};
    use futures::future::BoxFuture;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::watcher::Event;

    use super::*;

    /// A cache whose consistent read is scripted.
    struct Scripted {
        informer: Informer<Pod>,
        read: Mutex<Option<ConsistentRead>>,
    }

    impl Synced for Scripted {
        fn has_synced(&self) -> bool {
            true
        }
        fn wait(&self) -> BoxFuture<'static, Result<(), InformerError>> {
            Box::pin(async { Ok(()) })
        }
        fn has_observed_resource_version(&self, rv: &str) -> Result<bool, CompareError> {
            self.informer.store().has_observed_resource_version(rv)
        }
        fn consistent_read(
            &self,
        ) -> BoxFuture<'static, Result<Option<ConsistentRead>, kube::Error>> {
            let read = self.read.lock().clone();
            Box::pin(async move { Ok(read) })
        }
        fn reflects(&self, read: &ConsistentRead) -> Result<bool, CompareError> {
            self.informer.store().reflects(read)
        }
        fn is_relisting(&self) -> bool {
            self.informer.store().is_relisting()
        }
    }

    fn pod(name: &str, rv: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("ns".into());
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(format!("uid-{name}"));
        p.metadata.resource_version = Some(rv.into());
        p
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_read_the_cache_must_reach_the_lease_version() {
        let informer = listing(&[pod("a", "5")]);
        let cache = Arc::new(Scripted {
            informer: informer.clone(),
            read: Mutex::new(None),
        });
        let woken = Arc::new(AtomicBool::new(false));
        let w = Arc::clone(&woken);
        let c = CatchUp::start(
            "1".parse().unwrap(),
            Some("10".into()),
            Instant::now(),
            SlotSet::empty(),
            vec![cache as Arc<dyn Synced>],
            move || w.store(true, Ordering::SeqCst),
        );
        tokio::task::yield_now().await;
        assert!(woken.load(Ordering::SeqCst), "the reads finished");
        assert_eq!(c.ready(), Ok(false), "no read: the cache is at 5, not 10");
        informer.apply_event(Event::Apply(pod("a", "10")));
        assert_eq!(c.ready(), Ok(true));
    }

    /// The quiet cluster: nothing changed since the Lease write, so the
    /// cache's version stays below it for ever; the read shows the cache
    /// already holds everything, so the slot starts at once. A read that
    /// lists a child the cache has not seen yet waits for exactly that.
    #[tokio::test(start_paused = true)]
    async fn a_quiet_cache_that_holds_what_the_read_shows_is_ready_at_once() {
        let informer = listing(&[pod("a", "5")]);
        let source = listing(&[pod("a", "5")]);
        let quiet = read_of(&source, "12");
        let cache = Arc::new(Scripted {
            informer: informer.clone(),
            read: Mutex::new(Some(quiet)),
        });
        let c = CatchUp::start(
            "1".parse().unwrap(),
            Some("10".into()),
            Instant::now(),
            SlotSet::empty(),
            vec![Arc::clone(&cache) as Arc<dyn Synced>],
            || {},
        );
        assert_eq!(c.ready(), Ok(false), "read in flight; cache at 5 < 10");
        tokio::task::yield_now().await;
        assert_eq!(c.ready(), Ok(true), "the cache holds what the read shows");

        // The previous holder created pod b (rv 11) before acknowledging:
        // the read shows it, the cache has not seen it yet.
        source.apply_event(Event::Apply(pod("b", "11")));
        *cache.read.lock() = Some(read_of(&source, "12"));
        let c = CatchUp::start(
            "1".parse().unwrap(),
            Some("10".into()),
            Instant::now(),
            SlotSet::empty(),
            vec![cache as Arc<dyn Synced>],
            || {},
        );
        tokio::task::yield_now().await;
        assert_eq!(c.ready(), Ok(false), "b not in the cache yet");
        informer.apply_event(Event::Apply(pod("b", "11")));
        assert_eq!(c.ready(), Ok(true));
    }

    /// A read made before the member's claims changed lists another shard
    /// than the narrowed cache holds, so the cache never reflects it (the
    /// slots would wait out the timeout); made again for the new claims,
    /// it is reflected at once.
    #[tokio::test(start_paused = true)]
    async fn a_read_made_for_other_claims_is_made_again_for_the_new_ones() {
        let cached = listing(&[pod("a", "5")]);
        let wider = listing(&[pod("a", "5"), pod("b", "6")]);
        let cache = Arc::new(Scripted {
            informer: cached.clone(),
            read: Mutex::new(Some(read_of(&wider, "12"))),
        });
        let claims: SlotSet = "0-9".parse().unwrap();
        let mut c = CatchUp::start(
            "1".parse().unwrap(),
            Some("10".into()),
            Instant::now(),
            claims,
            vec![Arc::clone(&cache) as Arc<dyn Synced>],
            || {},
        );
        tokio::task::yield_now().await;
        assert_eq!(
            c.ready(),
            Ok(false),
            "the read shows b, outside the cache's shard"
        );

        // The server now lists the narrowed shard.
        *cache.read.lock() = Some(read_of(&cached, "12"));
        c.reread_for(claims, || {});
        tokio::task::yield_now().await;
        assert_eq!(c.ready(), Ok(false), "the same claims: no new read");
        c.reread_for("0-4".parse().unwrap(), || {});
        tokio::task::yield_now().await;
        assert_eq!(c.ready(), Ok(true), "read again for the new claims");
    }

    /// A manual informer that has listed `pods`.
    fn listing(pods: &[Pod]) -> Informer<Pod> {
        let informer = Informer::<Pod>::manual().build();
        informer.apply_event(Event::Init);
        for p in pods {
            informer.apply_event(Event::InitApply(p.clone()));
        }
        informer.apply_event(Event::InitDone);
        informer
    }

    /// What a consistent list of `source`'s objects at `rv` returns.
    fn read_of(source: &Informer<Pod>, rv: &str) -> ConsistentRead {
        ConsistentRead::from_objects(rv, source.store().list().iter().map(|p| p.as_ref()))
    }
}
