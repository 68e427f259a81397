//! What a snapshot's files are and where they go: the handles state backends describe their
//! files in, and the location a checkpoint barrier announces.

use serde::{Deserialize, Serialize};

/// One file of a snapshot.
///
/// `path` is relative to the directory holding the checkpoint's `_metadata` file; files shared
/// between incremental checkpoints live in the job's `shared/` directory and are referenced as
/// `../shared/<name>`. A savepoint never references `..`: it is self-contained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    /// Path relative to the metadata's directory.
    pub path: String,
    /// Its size in bytes, checked before a restore uses it.
    pub size: u64,
    /// Whether later checkpoints may reference it too (incremental RocksDB SST files).
    pub shared: bool,
}

impl StateFile {
    /// Its storage path, for the metadata in `metadata_dir`: refused when it would lie outside
    /// the snapshot (see [`super::storage::resolve_inside`]).
    pub fn resolve(&self, metadata_dir: &str) -> Result<String, super::StateError> {
        super::storage::resolve_inside(metadata_dir, &self.path, true).map_err(|reason| {
            super::StateError::OutsideSnapshot {
                dir: metadata_dir.to_string(),
                reason,
            }
        })
    }
}

/// The keyed state of one operator in one subtask: which key groups, which backend, which files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyedStateHandle {
    /// `hashmap` or `rocksdb`: the backend whose format the files are in.
    pub backend: String,
    /// The key groups covered, `[first, last]` inclusive.
    pub key_groups: (u32, u32),
    /// The files, all of which must exist for a restore.
    pub files: Vec<StateFile>,
    /// Bytes written for this checkpoint (for an incremental checkpoint, only the new files).
    pub checkpointed_size: u64,
    /// Bytes of all files the handle references.
    pub full_size: u64,
}

/// One operator's operator state in one subtask, as a checkpoint holds it: the elements
/// themselves while they are small (they travel in the acknowledgement and in `_metadata`), or a
/// file in the checkpoint's directory once they exceed `state.storage.fs.memory-threshold`
/// (Flink's inline "memory" handles vs. file handles).
///
/// Serialized untagged: the inline form is the plain list of elements that metadata version 1
/// held, so old `_metadata` reads as [`OperatorStateHandle::Inline`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OperatorStateHandle {
    /// The elements, inline.
    Inline(Vec<Vec<u8>>),
    /// The elements in a file.
    File {
        /// The file.
        file: OperatorStateFile,
    },
}

impl Default for OperatorStateHandle {
    fn default() -> Self {
        OperatorStateHandle::Inline(Vec::new())
    }
}

impl OperatorStateHandle {
    /// How many elements it holds (known without reading a file).
    pub fn element_count(&self) -> u64 {
        match self {
            OperatorStateHandle::Inline(elements) => elements.len() as u64,
            OperatorStateHandle::File { file } => file.elements,
        }
    }

    /// Bytes it adds to a checkpoint: the elements' bytes inline, the file's size otherwise.
    pub fn size(&self) -> u64 {
        match self {
            OperatorStateHandle::Inline(elements) => elements.iter().map(|e| e.len() as u64).sum(),
            OperatorStateHandle::File { file } => file.size,
        }
    }

    /// The file, if the elements are in one.
    pub fn file(&self) -> Option<&OperatorStateFile> {
        match self {
            OperatorStateHandle::Inline(_) => None,
            OperatorStateHandle::File { file } => Some(file),
        }
    }
}

/// A file of operator state elements (written by [`super::operator_state::write`]).
///
/// `path` is relative to the directory holding the checkpoint's `_metadata` and never leaves it:
/// operator state is written whole at every checkpoint, never shared between checkpoints, so a
/// savepoint that holds such files stays self-contained and can be moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorStateFile {
    /// Path relative to the metadata's directory.
    pub path: String,
    /// Its size in bytes, checked before a restore uses it.
    pub size: u64,
    /// How many elements it holds: the JobManager splits them among restoring subtasks by
    /// index, without reading the file.
    pub elements: u64,
}

/// A checkpoint or a savepoint, as the barrier announces it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SnapshotKind {
    /// A periodic checkpoint: may share files with other checkpoints.
    Checkpoint,
    /// A savepoint: self-contained in its own directory.
    Savepoint,
}

/// Where a subtask writes its snapshot files for one checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotLocation {
    /// The checkpoint's id.
    pub checkpoint_id: u64,
    /// Checkpoint or savepoint.
    pub kind: SnapshotKind,
    /// Storage path of the directory that will hold `_metadata` (`<dir>/<job>/chk-<id>` or the
    /// savepoint directory). Private files go here.
    pub dir: String,
    /// Storage path of the job's `shared/` directory for incremental files; `None` for a
    /// savepoint, whose files all go to `dir`.
    pub shared_dir: Option<String>,
}

impl SnapshotLocation {
    /// The path, relative to `dir`, under which a file stored in the shared directory is
    /// referenced from the metadata.
    pub fn shared_reference(name: &str) -> String {
        format!("../shared/{name}")
    }
}
