//! The RocksDB backend's write-back buffer for value state: the latest write of each key, in
//! one byte arena with a hash index over it, flushed to RocksDB in key order.
//!
//! A keyed aggregation reads and writes its key for every record. Without the buffer each record
//! costs a RocksDB `get` and `put`; with it, a key written recently costs a hash lookup, and the
//! writes reach RocksDB as one batch **in key order**, which RocksDB's skiplist memtable inserts
//! almost sequentially (it reuses the previous insert's search path). A flush leaves the entries
//! in place as clean copies of what RocksDB holds, so the keys a job keeps updating stay cached
//! across checkpoints (each of which flushes). Keys and values live in one growing arena rather
//! than in two allocations per entry, so filling and clearing the buffer does not churn the
//! allocator, and a cleared buffer keeps its memory.

use std::hash::{BuildHasher, BuildHasherDefault};

use hashbrown::HashTable;

use super::archives::FastHasher;

/// One key's latest write: where its key and value are in the arena. 24 bytes: the index's
/// share of an entry is about as large as a small key and value, so it decides how many keys a
/// budget of memory holds.
#[derive(Clone, Copy)]
struct Entry {
    hash: u64,
    key: u32,
    /// The key's length, and [`DIRTY`] when the key was written since the last flush (else the
    /// entry is a clean copy of what RocksDB holds).
    key_len: u32,
    value: u32,
    /// [`DELETED`]: the key was deleted.
    value_len: u32,
}

/// `Entry::key_len`'s flag of a write not yet flushed.
const DIRTY: u32 = 1 << 31;
/// `Entry::value_len` of a delete.
const DELETED: u32 = u32::MAX;

impl Entry {
    fn key_range(&self) -> std::ops::Range<usize> {
        let start = self.key as usize;
        start..start + (self.key_len & !DIRTY) as usize
    }

    fn value_range(&self) -> Option<std::ops::Range<usize>> {
        let start = self.value as usize;
        (self.value_len != DELETED).then(|| start..start + self.value_len as usize)
    }

    fn is_dirty(&self) -> bool {
        self.key_len & DIRTY != 0
    }

    /// Bytes of the entry in the arena and the index.
    fn bytes(&self) -> usize {
        self.key_range().len() + self.value_range().map_or(0, |r| r.len()) + SLOT
    }
}

#[derive(Default)]
pub(crate) struct WriteBuffer {
    index: HashTable<Entry>,
    arena: Vec<u8>,
    hasher: BuildHasherDefault<FastHasher>,
    /// Reused by `flush_sorted`: each dirty entry with its key's first 16 bytes.
    order: Vec<(u128, Entry)>,
    /// Bytes of the dirty entries (keys, values, index slots).
    dirty_bytes: usize,
}

/// What an entry costs in the index besides its bytes in the arena.
const SLOT: usize = size_of::<Entry>() + 1;

impl WriteBuffer {
    /// Bytes of the writes not yet flushed.
    pub(crate) fn dirty_bytes(&self) -> usize {
        self.dirty_bytes
    }

    /// Memory the buffer takes: the arena and the index's slots.
    pub(crate) fn bytes(&self) -> usize {
        self.arena.len() + self.index.len() * SLOT
    }

    /// Forgets every entry (keeping the memory). Only for a flushed buffer: a dirty entry
    /// would be lost.
    pub(crate) fn clear(&mut self) {
        debug_assert_eq!(self.dirty_bytes, 0, "clearing unflushed writes");
        self.index.clear();
        self.arena.clear();
        self.dirty_bytes = 0;
    }

    fn key_of(&self, e: &Entry) -> &[u8] {
        &self.arena[e.key_range()]
    }

    /// Whether a write of `key` and `value` fits the arena's 32-bit offsets (4 GiB, what
    /// RocksDB allows for a key and value too); if not, flush and clear the buffer first.
    pub(crate) fn fits(&self, key: &[u8], value: Option<&[u8]>) -> bool {
        let len = key.len() + value.map_or(0, <[u8]>::len);
        key.len() < DIRTY as usize
            && value.is_none_or(|v| v.len() < DELETED as usize)
            && self.arena.len() + len < u32::MAX as usize
    }

    /// The buffered write of `key`: `None` if there is none, `Some(None)` for a delete.
    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        let hash = self.hasher.hash_one(key);
        let e = self.index.find(hash, |e| {
            e.hash == hash && &self.arena[e.key_range()] == key
        })?;
        Some(e.value_range().map(|r| &self.arena[r]))
    }

    /// Records the latest write of `key` (`None`: a delete). The caller checks
    /// [`fits`](Self::fits) first.
    #[inline]
    pub(crate) fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(self.fits(key, value));
        let hash = self.hasher.hash_one(key);
        let arena = &mut self.arena;
        let found = self
            .index
            .find_mut(hash, |e| e.hash == hash && &arena[e.key_range()] == key);
        match found {
            Some(e) => {
                if !e.is_dirty() {
                    e.key_len |= DIRTY;
                    self.dirty_bytes += e.bytes();
                }
                match value {
                    // The new value fits where the old one was: overwrite it.
                    Some(v) if e.value_range().is_some_and(|r| v.len() <= r.len()) => {
                        let start = e.value as usize;
                        arena[start..start + v.len()].copy_from_slice(v);
                        e.value_len = v.len() as u32;
                    }
                    // A longer value goes to the end of the arena; the old one stays there,
                    // counted in `bytes`, until the buffer is cleared.
                    Some(v) => {
                        e.value = arena.len() as u32;
                        e.value_len = v.len() as u32;
                        arena.extend_from_slice(v);
                        self.dirty_bytes += v.len();
                    }
                    None => e.value_len = DELETED,
                }
            }
            None => {
                let start = arena.len();
                arena.extend_from_slice(key);
                arena.extend_from_slice(value.unwrap_or_default());
                let entry = Entry {
                    hash,
                    key: start as u32,
                    key_len: key.len() as u32 | DIRTY,
                    value: (start + key.len()) as u32,
                    value_len: value.map_or(DELETED, |v| v.len() as u32),
                };
                self.dirty_bytes += arena.len() - start + SLOT;
                self.index.insert_unique(hash, entry, |e| e.hash);
            }
        }
    }

    /// Hands every write since the last flush to `f` in ascending key order; the entries stay
    /// as clean copies of what RocksDB then holds.
    pub(crate) fn flush_sorted(&mut self, mut f: impl FnMut(&[u8], Option<&[u8]>)) {
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        // One pass takes the dirty entries and marks them clean. Sorting compares the keys'
        // first bytes held in `order` itself, and reads the arena only for keys that share
        // them: far fewer cache misses than comparing in the arena.
        let arena = &self.arena;
        for e in self.index.iter_mut().filter(|e| e.is_dirty()) {
            e.key_len &= !DIRTY;
            let key = &arena[e.key_range()];
            let mut head = [0u8; 16];
            let n = key.len().min(16);
            head[..n].copy_from_slice(&key[..n]);
            order.push((u128::from_be_bytes(head), *e));
        }
        order.sort_unstable_by(|(ha, a), (hb, b)| {
            ha.cmp(hb).then_with(|| self.key_of(a).cmp(self.key_of(b)))
        });
        for (_, e) in &order {
            f(self.key_of(e), e.value_range().map(|r| &self.arena[r]));
        }
        self.order = order;
        self.dirty_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn flushed(b: &mut WriteBuffer) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        b.flush_sorted(|k, v| out.push((k.to_vec(), v.map(<[u8]>::to_vec))));
        out
    }

    #[test]
    fn the_latest_write_wins_and_deletes_are_kept() {
        let mut b = WriteBuffer::default();
        b.put(b"k1", Some(b"long value"));
        b.put(b"k1", Some(b"short"));
        b.put(b"k2", Some(b"x"));
        b.put(b"k2", Some(b"grown past its slot"));
        b.put(b"k3", Some(b"gone"));
        b.put(b"k3", None);
        assert_eq!(b.get(b"k1"), Some(Some(&b"short"[..])));
        assert_eq!(b.get(b"k2"), Some(Some(&b"grown past its slot"[..])));
        assert_eq!(b.get(b"k3"), Some(None));
        assert_eq!(b.get(b"k4"), None);
        assert_eq!(
            flushed(&mut b),
            vec![
                (b"k1".to_vec(), Some(b"short".to_vec())),
                (b"k2".to_vec(), Some(b"grown past its slot".to_vec())),
                (b"k3".to_vec(), None),
            ]
        );
        assert_eq!(b.dirty_bytes(), 0);
        // Flushed entries stay readable, and a second flush has nothing to write.
        assert_eq!(b.get(b"k1"), Some(Some(&b"short"[..])));
        assert_eq!(b.get(b"k3"), Some(None));
        assert_eq!(flushed(&mut b), vec![]);
        // A clean entry written again is flushed again, alone.
        b.put(b"k2", Some(b"y"));
        assert!(b.dirty_bytes() > 0);
        assert_eq!(flushed(&mut b), vec![(b"k2".to_vec(), Some(b"y".to_vec()))]);
        assert!(b.bytes() > 0);
        b.clear();
        assert_eq!(b.bytes(), 0);
        assert_eq!(b.get(b"k1"), None);
    }

    proptest! {
        /// Any sequence of writes and flushes hands RocksDB exactly the keys written since the
        /// previous flush, each with its last value, in key order; and every key reads as its
        /// last write, flushed or not, like a map that applies the same writes.
        #[test]
        fn flushes_like_a_sorted_map(
            ops in prop::collection::vec(
                prop::option::of((
                    prop::collection::vec(0u8..4, 0..4),
                    prop::option::of(prop::collection::vec(any::<u8>(), 0..12)),
                )),
                0..200,
            )
        ) {
            let mut b = WriteBuffer::default();
            let (mut model, mut since_flush) = (BTreeMap::new(), BTreeMap::new());
            for op in &ops {
                match op {
                    Some((k, v)) => {
                        b.put(k, v.as_deref());
                        model.insert(k.clone(), v.clone());
                        since_flush.insert(k.clone(), v.clone());
                    }
                    // `None`: a flush.
                    None => {
                        let expected: Vec<_> = std::mem::take(&mut since_flush).into_iter().collect();
                        prop_assert_eq!(flushed(&mut b), expected);
                        prop_assert_eq!(b.dirty_bytes(), 0);
                    }
                }
                for (k, v) in &model {
                    prop_assert_eq!(b.get(k), Some(v.as_deref()));
                }
            }
            let expected: Vec<_> = since_flush.into_iter().collect();
            prop_assert_eq!(flushed(&mut b), expected);
        }
    }
}
