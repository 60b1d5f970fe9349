//! Storage of items by value: every item stored once in a slab of cells
//! numbered from zero, found by hash through a compact index.
//!
//! The priority lanes and the due-time buckets refer to items by cell
//! number, so handing out an item or firing a delay touches its cell
//! directly instead of hashing it again. The index holds only cell numbers
//! (4 bytes and a control byte per bucket). Each item's 32-bit hash is kept
//! apart from the cells, in a dense array by cell number (which also links
//! the free cells): growing the index looks the hashes up there, 4 bytes
//! per item, without hashing an item again and without touching the cells,
//! whose reads would be scattered over tens of megabytes once a large
//! backlog outgrows the CPU caches.
//!
//! What one item costs (`u64` keys, a million stored): a 32-byte cell (item
//! 16 — `Option<u64>` — and state 12, padded), 4 bytes of hash and about 5
//! to 10 bytes of index (buckets are a power of two, at most 7/8 full). The
//! cells and hashes grow in chunks (see [`crate::chunked`]); the index
//! doubles, holding old and new buckets at once while it grows.

use std::hash::{BuildHasher, Hash};

use hashbrown::hash_table::Entry as TableEntry;
use hashbrown::{DefaultHashBuilder, HashTable};

use crate::chunked::{CHUNK, ChunkedVec};

/// The state kept with each stored item.
pub(crate) trait CellState: Copy {
    /// The state of a fresh or freed cell.
    fn empty() -> Self;
    /// Whether nothing refers to the item any more, so
    /// [`ItemStore::update`] removes it.
    fn is_empty(&self) -> bool;
}

/// Number of a cell in the slab.
pub(crate) type Slot = u32;

/// The end of the free list.
const NO_CELL: Slot = Slot::MAX;

#[derive(Debug)]
struct Cell<T, S> {
    /// `None` while the cell is free.
    item: Option<T>,
    state: S,
}

/// Items and their state (`S`).
#[derive(Debug)]
pub(crate) struct ItemStore<T, S> {
    cells: ChunkedVec<Cell<T, S>>,
    /// By cell number: the item's 32-bit hash, or the next free cell while
    /// the cell is free.
    hashes: ChunkedVec<u32>,
    /// First free cell (`NO_CELL` if none).
    free: Slot,
    index: HashTable<Slot>,
    hasher: DefaultHashBuilder,
    /// Items stored.
    len: usize,
    /// Removals since the store was last reset (see [`ItemStore::take`]).
    removals: usize,
}

impl<T, S> Default for ItemStore<T, S> {
    fn default() -> Self {
        Self {
            cells: ChunkedVec::default(),
            hashes: ChunkedVec::default(),
            free: NO_CELL,
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            len: 0,
            removals: 0,
        }
    }
}

/// Spreads a 32-bit hash over 64 bits: the table takes bucket bits from the
/// bottom and its 7 tag bits from the top.
#[inline]
fn widen(hash: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(hash)
}

/// The 64-bit hash the index uses for the item in `slot`.
fn stored_hash(hashes: &ChunkedVec<u32>, slot: Slot) -> u64 {
    hashes.get(slot as usize).map_or(0, |&hash| widen(hash))
}

impl<T, S: CellState> ItemStore<T, S> {
    /// Number of items stored.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// State of the item in `slot`, if the cell exists. A free cell has an
    /// empty state, so stale references to it never validate.
    #[inline]
    pub(crate) fn state(&self, slot: Slot) -> Option<&S> {
        self.cells.get(slot as usize).map(|cell| &cell.state)
    }

    /// Mutable state of the item in `slot`.
    #[inline]
    pub(crate) fn state_mut(&mut self, slot: Slot) -> Option<&mut S> {
        self.cells
            .get_mut(slot as usize)
            .map(|cell| &mut cell.state)
    }

    /// The item in `slot`.
    #[inline]
    pub(crate) fn item(&self, slot: Slot) -> Option<&T> {
        self.cells.get(slot as usize)?.item.as_ref()
    }

    /// Removes the item in `slot` and returns it.
    pub(crate) fn take(&mut self, slot: Slot) -> Option<T> {
        // A free cell holds no item (and its hash is a free-list link).
        self.item(slot)?;
        let hash = *self.hashes.get(slot as usize)?;
        if let Ok(found) = self.index.find_entry(widen(hash), |&s| s == slot) {
            found.remove();
        }
        self.free_cell(slot)
    }

    /// Removes every item (keeping the allocations).
    pub(crate) fn clear(&mut self) {
        self.index.clear();
        self.cells.clear();
        self.hashes.clear();
        self.free = NO_CELL;
        self.len = 0;
        self.removals = 0;
    }

    /// Frees `slot`, already removed from the index, and returns its item.
    ///
    /// When the store becomes empty after a burst that outgrew one chunk
    /// of cells (and after at least half its size in removals), it is
    /// reset: the memory of all chunks but the first is released, and the
    /// cells are reused from the start. A store within one chunk is never
    /// reset, which would release nothing: its free cells are reused
    /// through the free list, and the index's tombstones are cleared when
    /// it is rebuilt.
    fn free_cell(&mut self, slot: Slot) -> Option<T> {
        let free = self.free;
        let cell = self.cells.get_mut(slot as usize)?;
        let item = cell.item.take();
        cell.state = S::empty();
        if let Some(link) = self.hashes.get_mut(slot as usize) {
            *link = free;
        }
        self.free = slot;
        self.len -= 1;
        self.removals += 1;
        if self.len == 0 && self.cells.len() > CHUNK && self.removals > self.cells.len() / 2 {
            self.clear();
        }
        item
    }
}

impl<T: Hash + Eq, S: CellState> ItemStore<T, S> {
    #[inline]
    fn hash(&self, item: &T) -> u32 {
        let full = self.hasher.hash_one(item);
        (full as u32) ^ ((full >> 32) as u32)
    }

    /// The cell holding `item`.
    pub(crate) fn find(&self, item: &T) -> Option<Slot> {
        let cells = &self.cells;
        self.index
            .find(widen(self.hash(item)), |&slot| holds(cells, slot, item))
            .copied()
    }

    /// Finds `item` and lets `update` change its state, with one hash
    /// lookup; removes the item if its state is empty afterwards. Returns
    /// what `update` returned, or `None` if the item is not stored.
    pub(crate) fn update<R>(
        &mut self,
        item: &T,
        update: impl FnOnce(Slot, &mut S) -> R,
    ) -> Option<R> {
        let hash = self.hash(item);
        let cells = &mut self.cells;
        let found = self
            .index
            .find_entry(widen(hash), |&slot| holds(cells, slot, item))
            .ok()?;
        let slot = *found.get();
        let state = &mut cells.get_mut(slot as usize)?.state;
        let result = update(slot, state);
        if state.is_empty() {
            found.remove();
            drop(self.free_cell(slot));
        }
        Some(result)
    }

    /// The cell holding `item`, storing it in a new cell (with an empty
    /// state) if it is not known. Returns whether it was stored now.
    pub(crate) fn insert(&mut self, item: T) -> (Slot, bool) {
        let hash = self.hash(&item);
        let (cells, hashes) = (&self.cells, &self.hashes);
        let found = self.index.entry(
            widen(hash),
            |&slot| holds(cells, slot, &item),
            |&slot| stored_hash(hashes, slot),
        );
        let vacant = match found {
            TableEntry::Occupied(occupied) => return (*occupied.get(), false),
            TableEntry::Vacant(vacant) => vacant,
        };
        let cell = Cell {
            item: Some(item),
            state: S::empty(),
        };
        let reused = match self.free {
            NO_CELL => None,
            free => self
                .cells
                .get_mut(free as usize)
                .zip(self.hashes.get_mut(free as usize)),
        };
        let slot = match reused {
            Some((reused, link)) => {
                let slot = self.free;
                self.free = *link;
                *link = hash;
                *reused = cell;
                slot
            }
            None => {
                self.hashes.push(hash);
                self.cells.push(cell) as Slot
            }
        };
        vacant.insert(slot);
        self.len += 1;
        (slot, true)
    }
}

/// Whether cell `slot` holds `item`. Called only for the few cells whose
/// hash shares the 7 tag bits the index keeps with `item`'s.
#[inline]
fn holds<T: Eq, S>(cells: &ChunkedVec<Cell<T, S>>, slot: Slot, item: &T) -> bool {
    cells
        .get(slot as usize)
        .is_some_and(|cell| cell.item.as_ref() == Some(item))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Used(bool);

    impl CellState for Used {
        fn empty() -> Self {
            Used(false)
        }

        fn is_empty(&self) -> bool {
            !self.0
        }
    }

    #[test]
    fn a_cell_of_a_u64_key_is_32_bytes() {
        // The figure the memory per queued item is built on (see the
        // module documentation).
        use crate::item_state::ItemState;
        assert_eq!(std::mem::size_of::<Cell<u64, ItemState>>(), 32);
        assert_eq!(std::mem::size_of::<Cell<String, ItemState>>(), 40);
    }

    #[test]
    fn insert_find_take_and_reuse() {
        let mut items = ItemStore::<String, Used>::default();
        let (a, fresh) = items.insert("a".to_string());
        assert!(fresh);
        let (b, _) = items.insert("b".to_string());
        assert_eq!(items.insert("a".to_string()), (a, false));
        assert_eq!(items.find(&"b".to_string()), Some(b));
        assert_eq!(items.len(), 2);
        assert_eq!(items.take(a).as_deref(), Some("a"));
        assert_eq!(items.take(a), None, "already taken");
        assert_eq!(items.find(&"a".to_string()), None);
        assert_eq!(items.item(a), None);
        let (c, _) = items.insert("c".to_string());
        assert_eq!(c, a, "freed cell reused");
        assert_eq!(items.item(c).map(String::as_str), Some("c"));
        items.take(b);
        items.take(c);
        assert_eq!(items.len(), 0);
        assert_eq!(
            items.insert("d".to_string()).0,
            c,
            "small store: cells reused"
        );
    }

    #[test]
    fn emptied_after_a_burst_the_store_releases_its_cells() {
        let mut items = ItemStore::<u64, Used>::default();
        let slots: Vec<_> = (0..3 * CHUNK as u64).map(|i| items.insert(i).0).collect();
        for slot in slots {
            items.take(slot);
        }
        assert_eq!(items.cells.len(), 0, "reset");
        assert_eq!(items.insert(7).0, 0, "cells reused from the start");
    }

    #[test]
    fn update_removes_an_item_whose_state_became_empty() {
        let mut items = ItemStore::<u64, Used>::default();
        let (slot, _) = items.insert(7);
        assert_eq!(
            items.update(&7, |s, state| (s, *state)),
            Some((slot, Used(false)))
        );
        assert_eq!(items.len(), 0, "left empty by update: removed");
        let (slot, _) = items.insert(7);
        items.insert(8);
        items.update(&7, |_, state| state.0 = true);
        assert_eq!(items.find(&7), Some(slot), "kept while its state is set");
        assert_eq!(items.update(&9, |_, _| ()), None, "not stored");
    }

    #[test]
    fn churn_does_not_grow_the_index() {
        // One item stays, so the store is never reset; a hundred thousand
        // others come and go, leaving tombstones the index must clear.
        let mut items = ItemStore::<u64, Used>::default();
        let (kept, _) = items.insert(u64::MAX);
        for i in 0..100_000u64 {
            let (slot, _) = items.insert(i);
            assert_eq!(items.take(slot), Some(i));
        }
        assert_eq!(items.find(&u64::MAX), Some(kept));
        assert_eq!(items.len(), 1);
        assert!(items.index.capacity() < 64, "{}", items.index.capacity());
    }

    #[test]
    fn many_items_survive_growth_and_freeing() {
        let mut items = ItemStore::<u64, Used>::default();
        let slots: Vec<_> = (0..10_000u64).map(|i| items.insert(i).0).collect();
        for (i, slot) in slots.iter().enumerate() {
            assert_eq!(items.find(&(i as u64)), Some(*slot));
        }
        for slot in slots.iter().step_by(2) {
            items.take(*slot);
        }
        assert_eq!(items.len(), 5_000);
        assert_eq!(items.find(&1), Some(slots[1]));
        assert_eq!(items.find(&2), None);
        // Growth of the index after frees: the free list and the stored
        // hashes must not mix up.
        for i in 10_000..30_000u64 {
            items.insert(i);
        }
        for i in (1..30_000u64).filter(|i| i >= &10_000 || i % 2 == 1) {
            let slot = items.find(&i).unwrap();
            assert_eq!(items.item(slot), Some(&i));
        }
        assert_eq!(items.len(), 25_000);
    }
}
