//! Keyed state: what a keyed operator remembers per key, and how it is snapshotted into a
//! checkpoint and restored from one (possibly at a different parallelism).
//!
//! One [`KeyedStateStore`] serves one keyed operator in one subtask. The operator calls
//! [`KeyedStateStore::set_current_key`] before user code sees a record; the typed handles
//! ([`ValueState`], [`ListState`], [`MapState`], [`ReducingState`], [`AggregatingState`]) then
//! read and write the state of that key. Two backends keep the entries:
//!
//! - `hashmap`: in memory, organized by key group; every snapshot writes one file with all of
//!   this subtask's key groups in order, behind an index, so a rescaled restore reads only the
//!   groups it owns.
//! - `rocksdb`: one RocksDB instance in a directory private to the subtask; keys start with the
//!   big-endian key group, so a key-group range is a contiguous key range. Snapshots are RocksDB
//!   checkpoints (hard links), uploaded in full or, incrementally, only the SST files no
//!   confirmed checkpoint uploaded yet.
//!
//! A key's key group is `key_group(key_hash.hash(&key), max_parallelism)` with the job's
//! [`KeyHash`](crate::common::keys::KeyHash), exactly what the hash partitioner uses, so a key's
//! state lives in the subtask its records are sent to.

mod archives;
mod backend;
mod entries;
mod error;
mod format;
pub mod fs;
mod handles;
mod heap;
mod import;
mod key_groups;
mod memory;
pub mod operator_state;
mod registry;
mod rocks;
mod settings;
mod snapshot;
pub mod storage;
mod store;
#[cfg(test)]
mod tests;
mod timers;
mod values;
mod write_buffer;

pub use entries::StateEntry;
use entries::{BytesVisitor, RawEntry, StorageKind};
pub use error::StateError;
pub use fs::FileSystems;
pub use handles::{
    AggregateFunction, AggregatingState, ListState, MapState, ReducingState, ValueState,
};
pub use key_groups::{KeyGroupRange, MAX_MAX_PARALLELISM, subtask_for_key};
pub use memory::RocksMemory;
use registry::{Registry, StateId};
pub use settings::{BackendKind, BackendSettings};
pub use snapshot::{
    KeyedStateHandle, OperatorStateFile, OperatorStateHandle, SnapshotKind, SnapshotLocation,
    StateFile,
};
pub use storage::{FileInfo, LocalFileStorage, OutputFile, StateStorage};
pub use store::KeyedStateStore;
pub use timers::{TimeDomain, Timers};
