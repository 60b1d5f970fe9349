//! The item store: every item the queue knows, stored once in a slab of
//! cells, found by hash through a compact index.
//!
//! The ready structures and the pending delays refer to items by cell
//! number, so handing out an item or firing a delay touches its cell
//! directly instead of hashing it again. The index holds only
//! `(cell, 32-bit hash)` pairs: it stays small enough for the CPU caches
//! even with a million items queued, and growing it never reads the items.

use std::hash::{BuildHasher, Hash};

use hashbrown::hash_table::Entry as TableEntry;
use hashbrown::{DefaultHashBuilder, HashTable};

use crate::entry::Entry;

/// The state kept with each stored item.
pub(crate) trait CellState: Copy {
    /// The state of a fresh or freed cell.
    fn empty() -> Self;
    /// Whether nothing refers to the item any more, so
    /// [`Items::update`] removes it.
    fn is_empty(&self) -> bool;
}

impl CellState for Entry {
    fn empty() -> Self {
        Entry::empty()
    }

    fn is_empty(&self) -> bool {
        self.flags == 0
    }
}

/// Number of a cell in the slab.
pub(crate) type Slot = u32;

const NO_CELL: Slot = Slot::MAX;

#[derive(Debug)]
struct Cell<T, S> {
    /// `None` while the cell is free.
    item: Option<T>,
    hash: u32,
    entry: S,
    /// Next free cell, while the cell is free.
    next_free: Slot,
}

/// log2 of the number of cells per chunk.
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A vector of cells in fixed-size chunks. Growing it never moves the cells
/// already stored, so a store of hundreds of thousands of items grows
/// without copying them all (and touching twice their memory) under the
/// queue's lock, which would stall every other operation for milliseconds.
#[derive(Debug)]
struct Chunks<C> {
    chunks: Vec<Vec<C>>,
    len: usize,
}

impl<C> Default for Chunks<C> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<C> Chunks<C> {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, index: usize) -> Option<&C> {
        self.chunks
            .get(index >> CHUNK_BITS)?
            .get(index & (CHUNK - 1))
    }

    fn get_mut(&mut self, index: usize) -> Option<&mut C> {
        self.chunks
            .get_mut(index >> CHUNK_BITS)?
            .get_mut(index & (CHUNK - 1))
    }

    /// Appends `cell` and returns its index.
    fn push(&mut self, cell: C) -> usize {
        let index = self.len;
        let chunk = index >> CHUNK_BITS;
        if chunk == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        self.chunks[chunk].push(cell);
        self.len += 1;
        index
    }

    /// Removes every cell, keeping the first chunk's buffer for reuse.
    fn clear(&mut self) {
        self.chunks.truncate(1);
        if let Some(first) = self.chunks.first_mut() {
            first.clear();
        }
        self.len = 0;
    }
}

/// Items and their state (`S`).
#[derive(Debug)]
pub(crate) struct Items<T, S = Entry> {
    cells: Chunks<Cell<T, S>>,
    free: Slot,
    index: HashTable<(Slot, u32)>,
    hasher: DefaultHashBuilder,
    /// Removals since the store was last reset (see [`Items::remove`]).
    removals: usize,
}

impl<T, S> Default for Items<T, S> {
    fn default() -> Self {
        Self {
            cells: Chunks::default(),
            free: NO_CELL,
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            removals: 0,
        }
    }
}

/// Spreads a 32-bit hash over 64 bits: the table takes bucket bits from the
/// bottom and tag bits from the top.
fn widen(hash: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(hash)
}

impl<T, S: CellState> Items<T, S> {
    /// Number of items stored.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// State of the item in `slot`, if the cell exists. A free cell has an
    /// empty state, so stale references to it never validate.
    #[cfg(test)]
    pub(crate) fn entry(&self, slot: Slot) -> Option<&S> {
        self.cells.get(slot as usize).map(|cell| &cell.entry)
    }

    /// Mutable state of the item in `slot`.
    pub(crate) fn entry_mut(&mut self, slot: Slot) -> Option<&mut S> {
        self.cells
            .get_mut(slot as usize)
            .map(|cell| &mut cell.entry)
    }

    /// The item in `slot`.
    pub(crate) fn item(&self, slot: Slot) -> Option<&T> {
        self.cells.get(slot as usize)?.item.as_ref()
    }

    /// Removes the item in `slot`.
    #[cfg(test)]
    pub(crate) fn remove(&mut self, slot: Slot) {
        drop(self.take(slot));
    }

    /// Removes the item in `slot` and returns it.
    pub(crate) fn take(&mut self, slot: Slot) -> Option<T> {
        let cell = self.cells.get_mut(slot as usize)?;
        let item = cell.item.take()?;
        let hash = cell.hash;
        if let Ok(found) = self.index.find_entry(widen(hash), |&(s, _)| s == slot) {
            found.remove();
        }
        self.free_cell(slot);
        Some(item)
    }

    /// Removes every item (keeping the allocations).
    pub(crate) fn clear(&mut self) {
        self.index.clear();
        self.cells.clear();
        self.free = NO_CELL;
        self.removals = 0;
    }

    /// Frees `slot`, already removed from the index.
    ///
    /// Removals leave tombstones in the index, and looking up an absent item
    /// (every fresh `add`) probes past them; so when the store becomes empty
    /// after at least half its size in removals, it is reset, which also
    /// releases the cells of a past burst for reuse from the start.
    fn free_cell(&mut self, slot: Slot) {
        if let Some(cell) = self.cells.get_mut(slot as usize) {
            cell.item = None;
            cell.entry = S::empty();
            cell.next_free = self.free;
            self.free = slot;
        }
        self.removals += 1;
        if self.index.is_empty() && self.removals > self.cells.len() / 2 {
            self.clear();
        }
    }
}

impl<T: Hash + Eq, S: CellState> Items<T, S> {
    fn hash(&self, item: &T) -> u32 {
        let full = self.hasher.hash_one(item);
        (full as u32) ^ ((full >> 32) as u32)
    }

    /// The cell holding `item`.
    #[cfg(test)]
    pub(crate) fn find(&self, item: &T) -> Option<Slot> {
        let hash = self.hash(item);
        let cells = &self.cells;
        self.index
            .find(widen(hash), |&(slot, h)| {
                h == hash && cells.get(slot as usize).and_then(|c| c.item.as_ref()) == Some(item)
            })
            .map(|&(slot, _)| slot)
    }

    /// Finds `item` and lets `update` change its state, with one hash
    /// lookup; removes the item if no flag is left afterwards. Returns what
    /// `update` returned, or `None` if the item is not stored.
    pub(crate) fn update<R>(
        &mut self,
        item: &T,
        update: impl FnOnce(Slot, &mut S) -> R,
    ) -> Option<R> {
        let hash = self.hash(item);
        let cells = &mut self.cells;
        let found = self
            .index
            .find_entry(widen(hash), |&(slot, h)| {
                h == hash && cells.get(slot as usize).and_then(|c| c.item.as_ref()) == Some(item)
            })
            .ok()?;
        let slot = found.get().0;
        let entry = &mut cells.get_mut(slot as usize)?.entry;
        let result = update(slot, entry);
        if entry.is_empty() {
            found.remove();
            self.free_cell(slot);
        }
        Some(result)
    }

    /// The cell holding `item`, storing it in a new cell (with an empty
    /// state) if it is not known. Returns whether it was stored now.
    pub(crate) fn insert(&mut self, item: T) -> (Slot, bool) {
        let hash = self.hash(&item);
        let cells = &self.cells;
        let found = self.index.entry(
            widen(hash),
            |&(slot, h)| {
                h == hash && cells.get(slot as usize).and_then(|c| c.item.as_ref()) == Some(&item)
            },
            |&(_, h)| widen(h),
        );
        let vacant = match found {
            TableEntry::Occupied(occupied) => return (occupied.get().0, false),
            TableEntry::Vacant(vacant) => vacant,
        };
        let cell = Cell {
            item: Some(item),
            hash,
            entry: S::empty(),
            next_free: NO_CELL,
        };
        let slot = if self.free == NO_CELL {
            self.cells.push(cell) as Slot
        } else {
            let slot = self.free;
            if let Some(reused) = self.cells.get_mut(slot as usize) {
                self.free = reused.next_free;
                *reused = cell;
            }
            slot
        };
        vacant.insert((slot, hash));
        (slot, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_and_reuse() {
        let mut items = Items::<String>::default();
        let (a, fresh) = items.insert("a".to_string());
        assert!(fresh);
        let (b, _) = items.insert("b".to_string());
        assert_eq!(items.insert("a".to_string()), (a, false));
        assert_eq!(items.find(&"b".to_string()), Some(b));
        assert_eq!(items.len(), 2);
        items.remove(a);
        assert_eq!(items.find(&"a".to_string()), None);
        assert_eq!(items.item(a), None);
        let (c, _) = items.insert("c".to_string());
        assert_eq!(c, a, "freed cell reused");
        assert_eq!(items.item(c).map(String::as_str), Some("c"));
        items.remove(b);
        items.remove(c);
        assert_eq!(items.len(), 0);
        assert!(items.entry(c).is_none(), "store was reset");
    }

    #[test]
    fn many_items_survive_growth() {
        let mut items = Items::<u64>::default();
        let slots: Vec<_> = (0..10_000u64).map(|i| items.insert(i).0).collect();
        for (i, slot) in slots.iter().enumerate() {
            assert_eq!(items.find(&(i as u64)), Some(*slot));
        }
        for slot in slots.iter().step_by(2) {
            items.remove(*slot);
        }
        assert_eq!(items.len(), 5_000);
        assert_eq!(items.find(&1), Some(slots[1]));
        assert_eq!(items.find(&2), None);
    }
}
