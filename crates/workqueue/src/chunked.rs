//! A vector that grows in fixed-size chunks and never moves what it holds.
//!
//! A `Vec` doubles its buffer when it is full: it copies every element
//! under the queue's lock (stalling every other operation for milliseconds
//! once hundreds of thousands of items are stored) and, for that moment,
//! holds the old and the new buffer at once — one and a half times the
//! memory, which is what the process's peak resident memory sees. Growing
//! by one chunk at a time does neither, and wastes at most one partly used
//! chunk.
//!
//! The first chunk is the exception: it starts at [`FIRST_CHUNK`] elements
//! and doubles up to [`CHUNK`], like a `Vec`. Most queues never hold more
//! than a few hundred items, and a full first chunk for each of a queue's
//! stores allocated about half a MiB per queue whether it held ten items
//! or four thousand. Copying at most one chunk is cheap.

/// log2 of the number of elements per chunk.
const CHUNK_BITS: u32 = 12;
/// Elements per chunk: 4,096, so a chunk of 32-byte cells is 128 KiB,
/// large enough that the outer vector of chunks stays tiny.
pub(crate) const CHUNK: usize = 1 << CHUNK_BITS;
/// The first chunk's starting capacity; it doubles up to [`CHUNK`].
const FIRST_CHUNK: usize = 64;

/// A vector of `C` in chunks of [`CHUNK`] elements.
#[derive(Debug)]
pub(crate) struct ChunkedVec<C> {
    chunks: Vec<Vec<C>>,
    len: usize,
}

impl<C> Default for ChunkedVec<C> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<C> ChunkedVec<C> {
    /// Number of elements.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The element at `index`.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&C> {
        self.chunks
            .get(index >> CHUNK_BITS)?
            .get(index & (CHUNK - 1))
    }

    /// The element at `index`, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut C> {
        self.chunks
            .get_mut(index >> CHUNK_BITS)?
            .get_mut(index & (CHUNK - 1))
    }

    /// Appends `element` and returns its index.
    #[inline]
    pub(crate) fn push(&mut self, element: C) -> usize {
        let index = self.len;
        let chunk = index >> CHUNK_BITS;
        if chunk == self.chunks.len() {
            let capacity = if chunk == 0 { FIRST_CHUNK } else { CHUNK };
            self.chunks.push(Vec::with_capacity(capacity));
        }
        let elements = &mut self.chunks[chunk];
        if elements.len() == elements.capacity() {
            // Only the first chunk fills before CHUNK elements: double it,
            // never past CHUNK, so indexes stay `chunk * CHUNK + offset`.
            elements.reserve_exact(elements.len().min(CHUNK - elements.len()));
        }
        elements.push(element);
        self.len += 1;
        index
    }

    /// Removes every element, keeping the first chunk's buffer for reuse
    /// (the others are freed).
    pub(crate) fn clear(&mut self) {
        self.chunks.truncate(1);
        if let Some(first) = self.chunks.first_mut() {
            first.clear();
        }
        self.len = 0;
    }
}

impl<C: Clone> ChunkedVec<C> {
    /// The element at `index`, mutably, first appending copies of `fill`
    /// up to `index` if the vector is shorter.
    pub(crate) fn get_or_fill(&mut self, index: usize, fill: C) -> &mut C {
        while self.len <= index {
            self.push(fill.clone());
        }
        let chunk = &mut self.chunks[index >> CHUNK_BITS];
        &mut chunk[index & (CHUNK - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_keep_their_index_across_chunks() {
        let mut v = ChunkedVec::default();
        for i in 0..(3 * CHUNK + 5) {
            assert_eq!(v.push(i), i);
        }
        assert_eq!(v.len(), 3 * CHUNK + 5);
        assert_eq!(v.get(CHUNK), Some(&CHUNK));
        assert_eq!(v.get(3 * CHUNK + 5), None);
        *v.get_mut(7).unwrap() = 70;
        assert_eq!(v.get(7), Some(&70));
        v.clear();
        assert_eq!((v.len(), v.get(0)), (0, None));
        assert_eq!(v.chunks[0].capacity(), CHUNK, "clear keeps the first chunk");
        assert_eq!(*v.get_or_fill(CHUNK + 1, 9), 9);
        assert_eq!(v.len(), CHUNK + 2);
    }

    #[test]
    fn the_first_chunk_grows_with_its_elements_up_to_a_full_chunk() {
        let mut v = ChunkedVec::default();
        for i in 0..100u64 {
            v.push(i);
        }
        assert_eq!(v.chunks[0].capacity(), 2 * FIRST_CHUNK);
        for i in 100..(CHUNK as u64 + 1) {
            v.push(i);
        }
        assert_eq!(v.chunks.len(), 2);
        assert_eq!(v.chunks[0].capacity(), CHUNK);
        assert_eq!(v.chunks[1].capacity(), CHUNK);
        assert_eq!(v.get(CHUNK - 1), Some(&(CHUNK as u64 - 1)));
        assert_eq!(v.get(CHUNK), Some(&(CHUNK as u64)));
    }
}
