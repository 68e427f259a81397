//! Checkpoints: what a subtask's snapshot looks like, and (in the submodules) the JobMaster's
//! coordinator and the metadata format.
//!
//! The types here are the contract between the TaskManager side (operators acknowledge their
//! state, state backends describe their files in handles: [`crate::state::KeyedStateHandle`])
//! and the JobManager side (the coordinator collects handles into a checkpoint's metadata and
//! decides which files may be deleted). Where files live and how they are written is the state
//! layer's ([`crate::state::storage`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::{KeyedStateHandle, OperatorStateFile, OperatorStateHandle};

pub mod assign;
pub mod coordinator;
pub mod io;
pub mod metadata;
pub mod stats;
pub mod topology;

pub use assign::{Assignment, SkippedOperator, assign, key_group_range};
pub use coordinator::{
    CheckpointAction, CheckpointCoordinator, CheckpointSettings, CompletedCheckpoint,
    RestoreCandidate, RestorePlan, RestoreVerdicts, Retention, StorageWork, TaskPhase, Terminal,
    job_root,
};
pub use metadata::{
    CheckpointMetadata, OperatorKey, OperatorMetadata, RestoreError, load_metadata,
    metadata_location, validate,
};
pub use stats::{CheckpointConfigInfo, CheckpointingStatistics};
pub use topology::{TaskKey, TopologyOperator, VertexTopology};

/// How a task words its decline of a checkpoint whose barrier a newer one overtook while it
/// aligned (a savepoint's barrier overtaking a periodic checkpoint's, say). Such a decline is
/// not the task's failure and does not count toward the tolerable checkpoint failures (Flink's
/// "declined, subsumed").
pub fn overtaken_reason(checkpoint_id: u64) -> String {
    format!("checkpoint {checkpoint_id} {OVERTAKEN}")
}

/// The part of [`overtaken_reason`] that tells such a decline apart.
pub const OVERTAKEN: &str = "was overtaken by a newer barrier";

/// What becomes of a job when it takes a savepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterSavepoint {
    /// It runs on.
    Run,
    /// It stops once the savepoint completes (`sluice stop`; a savepoint with `cancel-job`).
    /// Event-time windows and timers not yet fired stay in the savepoint.
    Stop,
    /// Its sources first send the watermark to the end of time, so that every event-time
    /// window and timer fires and its results are part of the savepoint; then it stops
    /// (`sluice stop --drain`, Flink's drain). For a job that ends for good: resumed from the
    /// savepoint, it has no open windows left.
    Drain,
}

/// How an operator's operator state is dealt to the subtasks of a restore (Flink's
/// `OperatorStateHandle.Mode`). Recorded with each subtask's state in the snapshot, so that a
/// restore deals it as the operator declared when it took it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateDistribution {
    /// Flink's `getListState`: at the same parallelism every subtask gets what it wrote; at
    /// another the elements of all subtasks, in subtask order, are cut into contiguous ranges.
    /// What every snapshot written before the mode was recorded holds.
    #[default]
    Split,
    /// Flink's `getUnionListState`: every subtask gets every element of every subtask (in
    /// subtask order) and keeps what it needs, e.g. a Kafka source the partitions it owns.
    Union,
}

impl StateDistribution {
    /// Whether it is the default, [`StateDistribution::Split`] (not written to `_metadata`, so
    /// metadata of operators with split state reads as before).
    pub fn is_split(&self) -> bool {
        *self == StateDistribution::Split
    }
}

/// What one operator of one subtask contributes to a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorSubtaskState {
    /// Operator (non-keyed) state: a list of opaque elements, inline or in a file of the
    /// checkpoint (above `state.storage.fs.memory-threshold`), dealt to the subtasks of a
    /// restore as `distribution` says.
    pub operator_state: OperatorStateHandle,
    /// How `operator_state` is dealt on restore; absent in `_metadata` for split state (and in
    /// every snapshot taken before union state existed).
    #[serde(default, skip_serializing_if = "StateDistribution::is_split")]
    pub distribution: StateDistribution,
    /// Keyed state, for operators after a `key_by`.
    pub keyed: Option<KeyedStateHandle>,
}

/// What one subtask acknowledges for a checkpoint: the state of each operator of its chain,
/// keyed by the operator's node index in the job's stream graph (the coordinator records it
/// under the operator's stable id in the metadata).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskState {
    /// Per operator id.
    #[serde(with = "id_map")]
    pub operators: BTreeMap<u32, OperatorSubtaskState>,
}

impl SubtaskState {
    /// Bytes of the subtask's whole state in this snapshot: its operators' full state size,
    /// files shared with earlier checkpoints included (Flink's "full size").
    pub fn full_size(&self) -> u64 {
        state_sizes(self.operators.values()).1
    }
}

/// (bytes written, bytes of state) of some operator states: keyed handles' sizes plus the
/// operator state's, its elements' bytes when they travel inside `_metadata`, its file's size
/// when it was written to a file (always written anew: it counts in both).
pub(crate) fn state_sizes<'a>(
    states: impl Iterator<Item = &'a OperatorSubtaskState>,
) -> (u64, u64) {
    states.fold((0, 0), |(written, full), st| {
        let inline = st.operator_state.size();
        let (kw, kf) = st
            .keyed
            .as_ref()
            .map_or((0, 0), |k| (k.checkpointed_size, k.full_size));
        (written + inline + kw, full + inline + kf)
    })
}

/// What a restored subtask gets for one operator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorRestore {
    /// This subtask's share of the operator state's elements, in order: slices of the
    /// snapshot's handles. The subtask reads the files itself; the JobManager never does.
    pub operator_state: Vec<OperatorStateSlice>,
    /// How the share was dealt: with [`StateDistribution::Union`] it is every element of every
    /// subtask of the snapshot, and the operator keeps what is its own.
    #[serde(default)]
    pub distribution: StateDistribution,
    /// Every keyed handle whose key groups intersect this subtask's range.
    pub keyed: Vec<KeyedStateHandle>,
}

/// A part of one snapshotted operator state handle that a restored subtask gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperatorStateSlice {
    /// Inline elements (from a handle that was inline).
    Inline(Vec<Vec<u8>>),
    /// Elements `first..first + count` of a file, relative to the restore's `metadata_dir`.
    File {
        /// The file.
        file: OperatorStateFile,
        /// The index of the first element taken.
        first: u64,
        /// How many elements are taken.
        count: u64,
    },
}

impl OperatorStateSlice {
    /// How many elements it holds.
    pub fn element_count(&self) -> u64 {
        match self {
            OperatorStateSlice::Inline(elements) => elements.len() as u64,
            OperatorStateSlice::File { count, .. } => *count,
        }
    }
}

/// The state a deployed subtask starts from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRestore {
    /// The checkpoint (or savepoint) restored.
    pub checkpoint_id: u64,
    /// Storage path of the directory holding the checkpoint's `_metadata`; handles' paths are
    /// relative to it.
    pub metadata_dir: String,
    /// Per operator, by its node index in the restored job's stream graph. An operator missing
    /// here starts empty.
    #[serde(with = "id_map")]
    pub operators: BTreeMap<u32, OperatorRestore>,
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
