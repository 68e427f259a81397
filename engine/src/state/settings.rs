//! Which backend keeps a keyed operator's state, and with which settings.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use super::{RocksMemory, StateError};
use crate::common::keys::KeyHash;

/// Which backend keeps the keyed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BackendKind {
    /// In memory; full snapshots.
    #[default]
    HashMap,
    /// RocksDB on local disk; full or incremental snapshots.
    RocksDb,
}

impl BackendKind {
    /// The name used in configuration and in
    /// [`KeyedStateHandle::backend`](super::KeyedStateHandle::backend).
    pub fn name(&self) -> &'static str {
        match self {
            BackendKind::HashMap => "hashmap",
            BackendKind::RocksDb => "rocksdb",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = StateError;

    fn from_str(s: &str) -> Result<Self, StateError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hashmap" => Ok(BackendKind::HashMap),
            "rocksdb" => Ok(BackendKind::RocksDb),
            _ => Err(StateError::Config(format!(
                "unknown state backend '{s}': choose 'hashmap' or 'rocksdb'"
            ))),
        }
    }
}

/// How one keyed operator of one subtask keeps its state.
#[derive(Clone, Debug)]
pub struct BackendSettings {
    /// The backend.
    pub kind: BackendKind,
    /// A directory private to this operator, subtask and attempt. RocksDB keeps its instance
    /// there, restores use it for temporary files; the store deletes it when dropped.
    pub local_dir: PathBuf,
    /// RocksDB: upload only new SST files in checkpoints (savepoints are always full).
    pub incremental: bool,
    /// RocksDB: the memory of the slot the subtask runs in, shared with the slot's other
    /// instances; `None` sizes the instance on its own (no memory budget).
    pub rocks_memory: Option<std::sync::Arc<RocksMemory>>,
    /// How keys are hashed into key groups: the job's, as its partitioners hash them.
    pub key_hash: KeyHash,
}
