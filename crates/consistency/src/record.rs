//! The writes remembered for one owner.

use std::cmp::Ordering;

use ctrlkit_informer::compare_resource_versions;
use tokio::time::Instant;

/// The newest unobserved write of one resource for one owner.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// Index of the resource's cache in the store.
    pub(crate) cache: usize,
    /// The highest resourceVersion written.
    pub(crate) version: String,
    /// When the oldest write not yet observed was made; later writes keep
    /// it, so the maximum wait bounds the whole backlog, not the last write.
    pub(crate) since: Instant,
}

/// Everything remembered for one owner: at most one entry per resource.
#[derive(Debug, Default)]
pub(crate) struct OwnerRecord {
    pending: Vec<Pending>,
}

impl OwnerRecord {
    /// Remembers a write of `version`, keeping the highest version per
    /// resource. A version that cannot be ordered against the remembered one
    /// replaces it: it is the later write.
    pub(crate) fn wrote(&mut self, cache: usize, version: &str, now: Instant) {
        match self.pending.iter_mut().find(|p| p.cache == cache) {
            None => self.pending.push(Pending {
                cache,
                version: version.to_owned(),
                since: now,
            }),
            Some(pending) => {
                let newer = !matches!(
                    compare_resource_versions(version, &pending.version),
                    Ok(Ordering::Less | Ordering::Equal)
                );
                if newer {
                    pending.version = version.to_owned();
                }
            }
        }
    }

    pub(crate) fn pending(&self) -> &[Pending] {
        &self.pending
    }

    /// Forgets the entry of `cache` if it still holds `version` (a write
    /// recorded meanwhile must not be dropped with it).
    pub(crate) fn settle(&mut self, cache: usize, version: &str) {
        self.pending
            .retain(|p| !(p.cache == cache && p.version == version));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_highest_version_per_resource_and_the_first_time() {
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_secs(1);
        let mut r = OwnerRecord::default();
        r.wrote(0, "10", t0);
        r.wrote(0, "9", t1);
        r.wrote(1, "3", t1);
        r.wrote(0, "12", t1);
        let p = r.pending();
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[0].cache, p[0].version.as_str(), p[0].since),
            (0, "12", t0)
        );
        assert_eq!((p[1].cache, p[1].version.as_str()), (1, "3"));
        r.wrote(1, "opaque", t1);
        assert_eq!(r.pending()[1].version, "opaque");
    }

    #[test]
    fn settling_an_outdated_version_keeps_the_newer_write() {
        let now = Instant::now();
        let mut r = OwnerRecord::default();
        r.wrote(0, "10", now);
        r.wrote(0, "11", now);
        r.settle(0, "10");
        assert_eq!(r.pending()[0].version, "11");
        r.settle(0, "11");
        assert!(r.is_empty());
    }
}
