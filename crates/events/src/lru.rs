//! A bounded map that forgets its least recently used entry, as client-go's
//! `lru.Cache` behind the event correlator: every operation is O(1) (one
//! hash lookup and a few list links), whatever the number of entries.
//!
//! The entries live in one `Vec` linked into a recency list by index; the
//! hash table holds only indexes, so each key is stored once. A full cache
//! reuses its least recently used slot for the new entry.

#[cfg(test)]
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

const NIL: u32 = u32::MAX;

struct Node<K, V> {
    hash: u64,
    key: K,
    value: V,
    /// Towards the most recently used end.
    prev: u32,
    /// Towards the least recently used end.
    next: u32,
}

/// A map of at most `capacity` entries; inserting into a full one evicts
/// the entry used longest ago. Reads through [`get_mut`](Self::get_mut)
/// and [`entry`](Self::entry) count as uses.
pub(crate) struct Lru<K, V> {
    table: HashTable<u32>,
    nodes: Vec<Node<K, V>>,
    head: u32,
    tail: u32,
    capacity: usize,
    hasher: foldhash::fast::RandomState,
    /// Entries looked up, inserted or evicted since creation: the work
    /// done, which must not depend on how many entries the cache holds.
    touched: u64,
}

impl<K: Hash + Eq, V> Lru<K, V> {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, (NIL - 1) as usize);
        Self {
            table: HashTable::new(),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            capacity,
            hasher: foldhash::fast::RandomState::default(),
            touched: 0,
        }
    }

    /// How many entries the cache holds.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Entries looked up, inserted or evicted so far.
    pub(crate) fn touched(&self) -> u64 {
        self.touched
    }

    /// The value under `key`, marked as the most recently used.
    #[cfg(test)]
    pub(crate) fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.touched += 1;
        let hash = self.hasher.hash_one(key);
        let nodes = &self.nodes;
        let index = *self
            .table
            .find(hash, |&i| nodes[i as usize].key.borrow() == key)?;
        self.promote(index);
        Some(&mut self.nodes[index as usize].value)
    }

    /// Stores `value` under `key` as the most recently used entry, evicting
    /// the least recently used one if the cache is full.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        match self.locate(key) {
            Ok(index) => self.nodes[index as usize].value = value,
            Err((hash, key)) => {
                self.place(hash, key, value);
            }
        }
    }

    /// The value under `key` (marked as the most recently used), inserting
    /// `make()` first if there is none; the flag says whether it was
    /// inserted. Makes room by evicting the least recently used entry.
    pub(crate) fn entry(&mut self, key: K, make: impl FnOnce() -> V) -> (bool, &mut V) {
        let (inserted, index) = match self.locate(key) {
            Ok(index) => (false, index),
            Err((hash, key)) => (true, self.place(hash, key, make())),
        };
        (inserted, &mut self.nodes[index as usize].value)
    }

    /// The index of `key`'s entry, promoted; or its hash and the key back.
    fn locate(&mut self, key: K) -> Result<u32, (u64, K)> {
        self.touched += 1;
        let hash = self.hasher.hash_one(&key);
        let nodes = &self.nodes;
        match self.table.find(hash, |&i| nodes[i as usize].key == key) {
            Some(&index) => {
                self.promote(index);
                Ok(index)
            }
            None => Err((hash, key)),
        }
    }

    /// Stores a new entry as the most recently used, in a fresh slot or in
    /// the least recently used one's.
    fn place(&mut self, hash: u64, key: K, value: V) -> u32 {
        let index = if self.nodes.len() < self.capacity {
            let index = self.nodes.len() as u32;
            self.nodes.push(Node {
                hash,
                key,
                value,
                prev: NIL,
                next: NIL,
            });
            index
        } else {
            self.touched += 1;
            let index = self.tail;
            let old_hash = self.nodes[index as usize].hash;
            if let Ok(entry) = self.table.find_entry(old_hash, |&i| i == index) {
                entry.remove();
            }
            self.unlink(index);
            let node = &mut self.nodes[index as usize];
            node.hash = hash;
            node.key = key;
            node.value = value;
            index
        };
        let nodes = &self.nodes;
        self.table
            .insert_unique(hash, index, |&i| nodes[i as usize].hash);
        self.push_front(index);
        index
    }

    fn promote(&mut self, index: u32) {
        if self.head != index {
            self.unlink(index);
            self.push_front(index);
        }
    }

    fn unlink(&mut self, index: u32) {
        let (prev, next) = {
            let node = &self.nodes[index as usize];
            (node.prev, node.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn push_front(&mut self, index: u32) {
        let old_head = self.head;
        {
            let node = &mut self.nodes[index as usize];
            node.prev = NIL;
            node.next = old_head;
        }
        match old_head {
            NIL => self.tail = index,
            h => self.nodes[h as usize].prev = index,
        }
        self.head = index;
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn evicts_the_least_recently_used_entry() {
        let mut lru = Lru::new(3);
        lru.insert("a".to_owned(), 1);
        lru.insert("b".to_owned(), 2);
        lru.insert("c".to_owned(), 3);
        // Using "a" makes "b" the oldest.
        assert_eq!(lru.get_mut("a").copied(), Some(1));
        lru.insert("d".to_owned(), 4);
        assert_eq!(lru.len(), 3);
        assert_eq!(lru.get_mut("b"), None);
        assert_eq!(lru.get_mut("a").copied(), Some(1));
        assert_eq!(lru.get_mut("c").copied(), Some(3));
        assert_eq!(lru.get_mut("d").copied(), Some(4));
        // Updating keeps one entry per key.
        lru.insert("c".to_owned(), 30);
        assert_eq!(lru.len(), 3);
        assert_eq!(lru.get_mut("c").copied(), Some(30));
    }

    #[test]
    fn entry_inserts_once_and_reports_it() {
        let mut lru: Lru<String, u32> = Lru::new(2);
        let (inserted, v) = lru.entry("k".to_owned(), || 7);
        assert!(inserted);
        *v += 1;
        let (inserted, v) = lru.entry("k".to_owned(), || 0);
        assert!(!inserted);
        assert_eq!(*v, 8);
    }

    #[test]
    fn stays_bounded_and_consistent_under_churn() {
        let mut lru = Lru::new(64);
        for i in 0..10_000u32 {
            lru.insert(i, i * 2);
            // Keep a few hot keys alive by reading them.
            for hot in 0..4 {
                if let Some(v) = lru.get_mut(&hot) {
                    assert_eq!(*v, hot * 2);
                }
            }
        }
        assert_eq!(lru.len(), 64);
        for hot in 0..4 {
            assert_eq!(lru.get_mut(&hot).copied(), Some(hot * 2), "hot key {hot}");
        }
        for recent in 10_000 - 60..10_000 {
            assert_eq!(lru.get_mut(&recent).copied(), Some(recent * 2));
        }
        assert_eq!(lru.get_mut(&100), None);
    }

    #[test]
    fn a_zero_capacity_still_holds_one_entry() {
        let mut lru = Lru::new(0);
        lru.insert(1, "one");
        lru.insert(2, "two");
        assert_eq!(lru.len(), 1);
        assert_eq!(lru.get_mut(&2).copied(), Some("two"));
    }
}
