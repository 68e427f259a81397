//! How operators take part in checkpoints: the snapshot context handed down an operator chain
//! with each barrier, the control messages a running task receives, and the state a subtask is
//! restored with.

use std::path::PathBuf;
use std::sync::Arc;

use crate::checkpoint::{StateDistribution, SubtaskState, TaskRestore};
use crate::common::error::TaskError;
use crate::network::buffer::CheckpointBarrier;
use crate::state::StateStorage;

/// Messages from the JobMaster to a running task about checkpoints.
#[derive(Debug)]
pub(crate) enum TaskControl {
    /// Take a snapshot now (sources, and tasks whose producers have all finished).
    Trigger(Arc<CheckpointBarrier>),
    /// The checkpoint completed: commit what it covers.
    Complete(u64),
    /// The checkpoint was given up.
    Aborted(u64),
}

/// Where a subtask's snapshot files go and when operator state goes to one.
#[derive(Clone, Copy)]
pub(crate) struct SnapshotStorage<'a> {
    /// The checkpoint storage.
    pub(crate) storage: &'a dyn StateStorage,
    /// Names this subtask attempt's files apart from the others' in a checkpoint directory.
    pub(crate) file_prefix: &'a str,
    /// `state.storage.fs.memory-threshold`: operator state of more bytes goes to a file.
    pub(crate) memory_threshold: u64,
}

/// Collects one subtask's snapshot while a barrier travels down its operator chain.
pub(crate) struct SnapshotContext<'a> {
    barrier: &'a Arc<CheckpointBarrier>,
    storage: &'a dyn StateStorage,
    file_prefix: &'a str,
    memory_threshold: u64,
    state: SubtaskState,
}

impl<'a> SnapshotContext<'a> {
    pub(crate) fn new(barrier: &'a Arc<CheckpointBarrier>, to: SnapshotStorage<'a>) -> Self {
        SnapshotContext {
            barrier,
            storage: to.storage,
            file_prefix: to.file_prefix,
            memory_threshold: to.memory_threshold,
            state: SubtaskState::default(),
        }
    }

    /// The barrier being processed.
    pub(crate) fn barrier(&self) -> &Arc<CheckpointBarrier> {
        self.barrier
    }

    /// The checkpoint's id.
    pub(crate) fn checkpoint_id(&self) -> u64 {
        self.barrier.id()
    }

    /// Records operator `op`'s operator state: inline, or written to a file of the checkpoint
    /// when it exceeds `state.storage.fs.memory-threshold`; `distribution` says how a restore
    /// deals it (recorded with it).
    pub(crate) fn set_operator_state(
        &mut self,
        op: u32,
        elements: Vec<Vec<u8>>,
        distribution: StateDistribution,
    ) -> Result<(), TaskError> {
        let name = format!(
            "op{op}-{}-chk{}-operator",
            self.file_prefix,
            self.barrier.id()
        );
        let handle = crate::state::operator_state::snapshot(
            elements,
            self.memory_threshold,
            &self.barrier.location,
            self.storage,
            &name,
        )?;
        let state = self.state.operators.entry(op).or_default();
        state.operator_state = handle;
        state.distribution = distribution;
        Ok(())
    }

    /// Writes operator `op`'s keyed state to the checkpoint storage.
    pub(crate) fn snapshot_keyed(
        &mut self,
        op: u32,
        store: &crate::state::KeyedStateStore,
    ) -> Result<(), TaskError> {
        let prefix = format!("op{op}-{}", self.file_prefix);
        let handle = store.snapshot(&self.barrier.location, self.storage, &prefix)?;
        self.state.operators.entry(op).or_default().keyed = Some(handle);
        Ok(())
    }

    /// What the subtask acknowledges.
    pub(crate) fn into_state(self) -> SubtaskState {
        self.state
    }
}

/// Everything a subtask needs to create and restore its state.
pub(crate) struct StateInit {
    /// `state.backend.type`.
    pub(crate) backend: crate::state::BackendKind,
    /// Whether RocksDB checkpoints upload only new files.
    pub(crate) incremental: bool,
    /// The memory the RocksDB instances of the subtask's slot share (`None`: no budget).
    pub(crate) rocks_memory: Option<Arc<crate::state::RocksMemory>>,
    /// The slot's share of managed memory (`taskmanager.memory.managed.*` over the slots): what
    /// a batch aggregation's table may fill before it spills sorted runs to `local_dir`.
    pub(crate) managed_memory: u64,
    /// This subtask attempt's private working directory (RocksDB instances live below it).
    pub(crate) local_dir: PathBuf,
    /// The checkpoint storage.
    pub(crate) storage: Arc<dyn StateStorage>,
    /// What to restore from, if the subtask is restored.
    pub(crate) restore: Option<TaskRestore>,
    /// Whether the job is checkpointed (sinks then commit on checkpoints, not at the end).
    pub(crate) checkpointing: bool,
    /// How the job hashes keys into key groups (its partitioners and keyed state alike).
    pub(crate) key_hash: crate::common::keys::KeyHash,
}

impl std::fmt::Debug for StateInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateInit")
            .field("backend", &self.backend)
            .field("local_dir", &self.local_dir)
            .field("restore", &self.restore.as_ref().map(|r| r.checkpoint_id))
            .finish()
    }
}

impl StateInit {
    /// State that lives in memory and is never restored (tests, jobs without checkpoints).
    pub(crate) fn in_memory() -> Self {
        StateInit {
            backend: crate::state::BackendKind::HashMap,
            incremental: false,
            rocks_memory: None,
            managed_memory: 128 << 20,
            local_dir: standalone_dir(),
            storage: Arc::new(crate::state::LocalFileStorage),
            restore: None,
            checkpointing: false,
            key_hash: crate::common::keys::KeyHash::CURRENT,
        }
    }
}

/// A local state directory of its own for each context made outside a cluster: tests run in
/// parallel threads, and two stores in one directory would delete each other's files.
fn standalone_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("sluice-standalone-{}-{n}", std::process::id()))
}
