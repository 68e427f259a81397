//! Why keyed state could not be read, written, snapshotted or restored.

use std::fmt;
use std::path::Path;

use super::KeyGroupRange;
use crate::common::error::TaskError;

/// Why keyed state could not be read, written, snapshotted or restored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// A file operation failed.
    #[error("{context} {path}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The storage or local path.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file a snapshot references lies outside the snapshot (a crafted or damaged `_metadata`).
    #[error("checkpoint metadata in {dir} is refused: {reason}")]
    OutsideSnapshot {
        /// The directory holding `_metadata`.
        dir: String,
        /// Which path, and where it had to lie.
        reason: String,
    },
    /// A file a snapshot references does not exist.
    #[error("state file {path} referenced by the checkpoint does not exist")]
    MissingFile {
        /// Its storage path.
        path: String,
    },
    /// A file a snapshot references has a different size than recorded (truncated).
    #[error("state file {path} has {actual} bytes, the checkpoint recorded {expected}")]
    SizeMismatch {
        /// Its storage path.
        path: String,
        /// The recorded size.
        expected: u64,
        /// The size found.
        actual: u64,
    },
    /// A state file's contents are not what was written (checksum, format).
    #[error("corrupted state file {path}: {reason}")]
    Corrupted {
        /// Its storage or local path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// RocksDB failed.
    #[error("rocksdb at {path}: {source}")]
    RocksDb {
        /// The instance's local directory.
        path: String,
        /// RocksDB's error.
        source: rocksdb::Error,
    },
    /// A key or value could not be serialized or did not validate when read back.
    #[error("state '{state}': {reason}")]
    Codec {
        /// The state's name (or `key` for the current key).
        state: String,
        /// rkyv's error.
        reason: String,
    },
    /// State was accessed before
    /// [`KeyedStateStore::set_current_key`](super::KeyedStateStore::set_current_key).
    #[error("no current key: set_current_key must be called before keyed state is used")]
    NoCurrentKey,
    /// The current key's key group belongs to another subtask: the key was not partitioned
    /// with the same max parallelism.
    #[error(
        "key group {key_group} of the current key is outside this subtask's key groups {range}"
    )]
    KeyGroupOutOfRange {
        /// The key's key group.
        key_group: u32,
        /// This subtask's key groups.
        range: KeyGroupRange,
    },
    /// The same state name was used for two kinds of state.
    #[error("state '{name}' is a {existing} state, it cannot be used as a {requested} state")]
    KindMismatch {
        /// The state's name.
        name: String,
        /// Its kind.
        existing: &'static str,
        /// The kind asked for.
        requested: &'static str,
    },
    /// A snapshot was written by a backend this build does not know.
    #[error("the checkpoint's keyed state uses backend '{backend}', which is not supported")]
    UnknownBackend {
        /// The handle's backend name.
        backend: String,
    },
    /// Invalid settings or arguments.
    #[error("{0}")]
    Config(String),
}

impl StateError {
    pub(super) fn io(
        context: &'static str,
        path: impl fmt::Display,
        source: std::io::Error,
    ) -> Self {
        StateError::Io {
            context,
            path: path.to_string(),
            source,
        }
    }

    pub(super) fn rocks(path: &Path, source: rocksdb::Error) -> Self {
        StateError::RocksDb {
            path: path.display().to_string(),
            source,
        }
    }
}

impl From<StateError> for TaskError {
    fn from(e: StateError) -> Self {
        TaskError::State(e.to_string())
    }
}
