//! The backend behind a store: the entries in memory or in RocksDB.

use super::heap::HeapBackend;
use super::rocks::RocksBackend;

/// The backend behind a store.
pub(super) enum Backend {
    Heap(HeapBackend),
    // Boxed: the handle and options are large, the heap backend is a few words.
    Rocks(Box<RocksBackend>),
}
