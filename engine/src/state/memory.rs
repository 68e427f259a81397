//! The memory of the RocksDB backend, bounded per slot as Flink bounds it with managed memory.
//!
//! A TaskManager gives each slot one [`RocksMemory`] of the size its configuration derives
//! (`state.backend.rocksdb.memory.fixed-per-slot`, or the slot's share of
//! `taskmanager.memory.managed.*`); every RocksDB instance of a subtask in that slot shares it:
//!
//! - the **block cache** (one LRU cache of data blocks; index and filter blocks stay in the
//!   table readers, about 1.3 bytes per key, outside the budget),
//! - the **memtables** (one write buffer manager caps their sum),
//! - sluice's **write-back cache** of value state (`write_buffer.rs`): one byte count for the
//!   slot, which each instance updates when it flushes and which makes an instance drop its
//!   clean entries when the slot is over its share.
//!
//! `write-buffer-ratio` of the budget is for writes (a quarter of it memtables, the rest the
//! write-back cache), the rest is block cache. Without a budget (`memory.managed: false` and no
//! fixed size) each instance sizes itself, as RocksDB does without a shared cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rocksdb::{Cache, WriteBufferManager};

/// Dirty bytes of value-state writes an instance keeps before writing them to RocksDB.
const MAX_DIRTY_BYTES: usize = 16 << 20;
/// The largest memtable of one instance (RocksDB keeps up to two per instance).
const MAX_MEMTABLE_BYTES: usize = 64 << 20;
/// The smallest memtable: below this RocksDB flushes tiny files all the time.
const MIN_MEMTABLE_BYTES: usize = 1 << 20;
/// The largest write-back cache: its arena addresses entries with 32-bit offsets. Budgets
/// beyond this give the rest to the block cache.
const MAX_VALUE_CACHE_BYTES: usize = 2 << 30;
/// Each part of an instance's memory when there is no budget.
const UNMANAGED_PART_BYTES: usize = 64 << 20;

/// How a budget divides between RocksDB's parts and the write-back cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemorySplit {
    /// The block cache's capacity.
    pub(crate) block_cache: usize,
    /// What all memtables together may take.
    pub(crate) memtables: usize,
    /// What the write-back caches of all instances together may take.
    pub(crate) value_cache: usize,
}

impl MemorySplit {
    /// Splits `total` bytes: `write_ratio` of it for writes (a quarter of that for memtables,
    /// the rest, up to 2 GiB, for the write-back cache), the remainder for the block cache.
    pub(crate) fn of(total: u64, write_ratio: f64) -> Self {
        let total = usize::try_from(total).unwrap_or(usize::MAX);
        let writes = (total as f64 * write_ratio.clamp(0.0, 1.0)) as usize;
        let memtables = writes / 4;
        let value_cache = (writes - memtables).min(MAX_VALUE_CACHE_BYTES);
        MemorySplit {
            block_cache: total - memtables - value_cache,
            memtables,
            value_cache,
        }
    }

    /// The size of one memtable of an instance: half the memtable budget (an instance has an
    /// active and a flushing one), within RocksDB's sensible range.
    pub(crate) fn memtable_size(&self) -> usize {
        (self.memtables / 2).clamp(MIN_MEMTABLE_BYTES, MAX_MEMTABLE_BYTES)
    }

    /// Dirty bytes after which an instance writes its buffered writes to RocksDB: at most half
    /// the write-back cache, so that the clean copies of flushed writes keep room.
    pub(crate) fn dirty_limit(&self) -> usize {
        (self.value_cache / 2).clamp(1, MAX_DIRTY_BYTES)
    }
}

/// The memory shared by the RocksDB instances of one slot (or owned by one instance, without a
/// budget).
pub struct RocksMemory {
    split: MemorySplit,
    cache: Cache,
    write_buffers: Option<WriteBufferManager>,
    /// Bytes the write-back caches of the instances hold, as each last reported.
    value_cache_used: AtomicUsize,
}

impl std::fmt::Debug for RocksMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksMemory")
            .field("split", &self.split)
            .field("value_cache_used", &self.value_cache_used)
            .finish()
    }
}

impl RocksMemory {
    /// A budget of `total` bytes for all instances that share it.
    pub fn budget(total: u64, write_buffer_ratio: f64) -> Arc<Self> {
        let split = MemorySplit::of(total, write_buffer_ratio);
        Arc::new(RocksMemory {
            split,
            cache: Cache::new_lru_cache(split.block_cache),
            write_buffers: Some(WriteBufferManager::new_write_buffer_manager(
                split.memtables.max(MIN_MEMTABLE_BYTES),
                false,
            )),
            value_cache_used: AtomicUsize::new(0),
        })
    }

    /// The memory of one instance without a budget: fixed sizes per instance.
    pub(crate) fn unmanaged() -> Arc<Self> {
        let split = MemorySplit {
            block_cache: UNMANAGED_PART_BYTES,
            memtables: 2 * UNMANAGED_PART_BYTES,
            value_cache: UNMANAGED_PART_BYTES,
        };
        Arc::new(RocksMemory {
            split,
            cache: Cache::new_lru_cache(split.block_cache),
            write_buffers: None,
            value_cache_used: AtomicUsize::new(0),
        })
    }

    /// The division of the memory.
    pub(crate) fn split(&self) -> &MemorySplit {
        &self.split
    }

    pub(crate) fn cache(&self) -> &Cache {
        &self.cache
    }

    pub(crate) fn write_buffer_manager(&self) -> Option<&WriteBufferManager> {
        self.write_buffers.as_ref()
    }

    /// Bytes the instances' write-back caches hold, as last reported.
    pub fn value_cache_usage(&self) -> usize {
        self.value_cache_used.load(Ordering::Relaxed)
    }
}

/// One instance's share of the write-back cache: what it reported to its [`RocksMemory`],
/// given back when dropped.
#[derive(Debug)]
pub(crate) struct ValueCacheLease {
    memory: Arc<RocksMemory>,
    held: usize,
}

impl ValueCacheLease {
    pub(crate) fn new(memory: Arc<RocksMemory>) -> Self {
        ValueCacheLease { memory, held: 0 }
    }

    /// Records that the instance's cache now holds `bytes`; true when the instances of the slot
    /// together hold more than the write-back cache's share, and this one should drop its
    /// clean entries.
    pub(crate) fn report(&mut self, bytes: usize) -> bool {
        let used = &self.memory.value_cache_used;
        let total = if bytes >= self.held {
            used.fetch_add(bytes - self.held, Ordering::Relaxed) + (bytes - self.held)
        } else {
            used.fetch_sub(self.held - bytes, Ordering::Relaxed) - (self.held - bytes)
        };
        self.held = bytes;
        total >= self.memory.split.value_cache
    }
}

impl Drop for ValueCacheLease {
    fn drop(&mut self) {
        self.report(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_slot_budget_splits_into_cache_memtables_and_value_cache() {
        // 0.4 × 1728 MiB of managed memory, one slot, write-buffer-ratio 0.5.
        let total = (0.4 * (1728u64 << 20) as f64) as u64;
        let s = MemorySplit::of(total, 0.5);
        assert_eq!(
            s.block_cache + s.memtables + s.value_cache,
            total as usize,
            "nothing lost or added"
        );
        assert_eq!(s.block_cache, total as usize - total as usize / 2);
        assert_eq!(s.memtables, (total as usize / 2) / 4);
        assert!(s.value_cache > 250 << 20, "{s:?}");
        assert_eq!(s.memtable_size(), s.memtables / 2);
        assert_eq!(s.dirty_limit(), MAX_DIRTY_BYTES);
    }

    #[test]
    fn small_budgets_keep_usable_parts() {
        let s = MemorySplit::of(8 << 20, 0.5);
        assert_eq!(s.memtables, 1 << 20);
        assert_eq!(s.memtable_size(), MIN_MEMTABLE_BYTES);
        assert_eq!(s.dirty_limit(), (3 << 20) / 2);
        let huge = MemorySplit::of(64 << 30, 0.5);
        assert_eq!(
            huge.value_cache, MAX_VALUE_CACHE_BYTES,
            "32-bit arena offsets"
        );
        assert_eq!(
            huge.block_cache + huge.memtables + huge.value_cache,
            64 << 30
        );
        let tiny = MemorySplit::of(0, 0.5);
        assert_eq!(
            tiny.dirty_limit(),
            1,
            "a zero budget still flushes every write"
        );
    }

    #[test]
    fn leases_share_the_value_cache_and_give_it_back() {
        let memory = RocksMemory::budget(40 << 20, 0.5); // value cache 15 MiB
        let value_cache = memory.split().value_cache;
        let mut a = ValueCacheLease::new(memory.clone());
        let mut b = ValueCacheLease::new(memory.clone());
        assert!(!a.report(value_cache / 2));
        assert!(!a.report(value_cache / 3), "shrinking is counted too");
        assert!(
            b.report(value_cache - value_cache / 3),
            "together at the limit"
        );
        assert_eq!(memory.value_cache_usage(), value_cache);
        drop(b);
        assert_eq!(memory.value_cache_usage(), value_cache / 3);
        assert!(!a.report(0));
        drop(a);
        assert_eq!(memory.value_cache_usage(), 0);
    }
}
