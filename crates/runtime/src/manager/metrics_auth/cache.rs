//! A small map whose entries expire, for the answers of token and access
//! reviews.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Entries expire `ttl` after insertion (on tokio's clock, so paused-time
/// tests drive it). At most `capacity` entries: a full cache first drops
/// the expired ones, then everything, so a flood of distinct keys (random
/// tokens) costs reviews, not memory.
#[derive(Debug)]
pub(super) struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    capacity: usize,
}

impl<K: Hash + Eq, V: Clone> TtlCache<K, V> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// The unexpired value for `key`.
    pub(super) fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(key) {
            Some((value, expires)) if Instant::now() < *expires => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    pub(super) fn insert(&self, key: K, value: V, ttl: Duration) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, expires)| now < *expires);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(key, (value, now + ttl));
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_expire_after_their_ttl() {
        let cache = TtlCache::new(8);
        cache.insert("a", 1, Duration::from_secs(30));
        cache.insert("b", 2, Duration::from_secs(300));
        tokio::time::advance(Duration::from_secs(29)).await;
        assert_eq!(cache.get(&"a"), Some(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cache.get(&"a"), None);
        assert_eq!(cache.get(&"b"), Some(2));
        assert_eq!(cache.len(), 1, "an expired entry is dropped when read");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_drops_expired_entries_first_then_everything() {
        let cache = TtlCache::new(2);
        cache.insert(1, "short", Duration::from_secs(1));
        cache.insert(2, "long", Duration::from_secs(60));
        tokio::time::advance(Duration::from_secs(2)).await;
        cache.insert(3, "new", Duration::from_secs(60));
        assert_eq!((cache.get(&2), cache.get(&3)), (Some("long"), Some("new")));
        // Full of live entries: start over rather than grow.
        cache.insert(4, "newest", Duration::from_secs(60));
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&4), Some("newest"));
        // Replacing a key never evicts.
        cache.insert(5, "five", Duration::from_secs(60));
        cache.insert(5, "five again", Duration::from_secs(60));
        assert_eq!(cache.len(), 2);
    }
}
