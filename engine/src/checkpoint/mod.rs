//! Checkpoints: what a subtask's snapshot looks like, where its files live, and (in the
//! submodules) the JobMaster's coordinator and the metadata format.
//!
//! The types here are the contract between the TaskManager side (state backends write files and
//! describe them in handles) and the JobManager side (the coordinator collects handles into a
//! checkpoint's metadata and decides which files may be deleted).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod assign;
pub mod coordinator;
pub mod io;
pub mod metadata;
pub mod stats;
pub mod storage;

pub use assign::{assign, key_group_range};
pub use coordinator::{
    CheckpointAction, CheckpointCoordinator, CheckpointSettings, CompletedCheckpoint,
    RestoreCandidate, RestorePlan, RestoreVerdicts, Retention, TaskKey, TaskPhase, Terminal,
    VertexTopology, job_root,
};
pub use metadata::{
    CheckpointMetadata, OperatorMetadata, RestoreError, load_metadata, metadata_location, validate,
};
pub use stats::{CheckpointConfigInfo, CheckpointingStatistics};
pub use storage::{LocalFileStorage, StateStorage};

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

/// What one operator of one subtask contributes to a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorSubtaskState {
    /// Operator (non-keyed) state: a list of opaque elements, redistributed round-robin when the
    /// parallelism changes (Flink's split redistribution).
    pub operator_state: Vec<Vec<u8>>,
    /// Keyed state, for operators after a `key_by`.
    pub keyed: Option<KeyedStateHandle>,
}

/// What one subtask acknowledges for a checkpoint: the state of each operator of its chain,
/// keyed by the operator's id (its node index in the stream graph).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskState {
    /// Per operator id.
    #[serde(with = "id_map")]
    pub operators: BTreeMap<u32, OperatorSubtaskState>,
}

/// What a restored subtask gets for one operator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorRestore {
    /// This subtask's share of the operator state's elements.
    pub operator_state: Vec<Vec<u8>>,
    /// Every keyed handle whose key groups intersect this subtask's range.
    pub keyed: Vec<KeyedStateHandle>,
}

/// The state a deployed subtask starts from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRestore {
    /// The checkpoint (or savepoint) restored.
    pub checkpoint_id: u64,
    /// Storage path of the directory holding the checkpoint's `_metadata`; handles' paths are
    /// relative to it.
    pub metadata_dir: String,
    /// Per operator id. An operator missing here starts empty.
    #[serde(with = "id_map")]
    pub operators: BTreeMap<u32, OperatorRestore>,
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

/// Maps keyed by operator id, written as a list of `[id, value]` pairs: the control messages
/// are internally tagged enums, and serde cannot read integer map keys back through those.
mod id_map {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<T: Serialize, S: Serializer>(
        map: &BTreeMap<u32, T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub(super) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<u32, T>, D::Error> {
        Ok(Vec::<(u32, T)>::deserialize(d)?.into_iter().collect())
    }
}
