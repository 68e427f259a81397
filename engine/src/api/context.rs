//! What a running operator knows about itself, and how a subtask fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::record::RecordError;

/// Why a subtask stopped before finishing. The JobMaster decides from the variant whether a
/// restart can help.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// The subtask was cancelled on request; not a failure.
    #[error("the task was cancelled")]
    Cancelled,
    /// The job's own code panicked or returned an error.
    #[error("{0}")]
    User(String),
    /// Reading or writing a file failed.
    #[error("{context}: {source}")]
    Io {
        /// What the task was doing, with the path.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A record could not be written or read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// An exchange with another subtask broke: a peer vanished or sent garbage.
    #[error("network: {0}")]
    Network(String),
    /// The task could not be set up (a job graph mismatch, a missing partition, ...).
    #[error("task setup failed: {0}")]
    Setup(String),
    /// Keyed state could not be read, written, snapshotted or restored.
    #[error("state: {0}")]
    State(String),
}

impl TaskError {
    /// Whether the failure is likely a consequence of a failure elsewhere (a broken exchange),
    /// rather than a cause of its own.
    pub fn is_secondary(&self) -> bool {
        matches!(self, TaskError::Network(_))
    }

    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TaskError::Io {
            context: context.into(),
            source,
        }
    }
}

/// A subtask's view of itself: which parallel instance it is, and whether it should stop.
#[derive(Clone, Debug)]
pub struct RuntimeContext {
    pub(crate) task_name: String,
    pub(crate) subtask_index: u32,
    pub(crate) parallelism: u32,
    pub(crate) max_parallelism: u32,
    pub(crate) attempt: u32,
    pub(crate) batch: bool,
    pub(crate) cancelled: Arc<AtomicBool>,
    /// The operator being built (its node index in the stream graph), set per chained operator.
    pub(crate) operator_id: u32,
    /// How this subtask's state is created and restored.
    pub(crate) state: Arc<super::StateInit>,
}

impl RuntimeContext {
    /// The operator chain's name as shown in the web UI.
    pub fn task_name(&self) -> &str {
        &self.task_name
    }
    /// This subtask's index, `0..parallelism`.
    pub fn subtask_index(&self) -> u32 {
        self.subtask_index
    }
    /// How many parallel subtasks this operator has.
    pub fn parallelism(&self) -> u32 {
        self.parallelism
    }
    /// The number of key groups keyed state is split into.
    pub fn max_parallelism(&self) -> u32 {
        self.max_parallelism
    }
    /// Which deployment of this subtask this is (0 for the first).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
    /// Whether the job runs in batch mode (keyed aggregations emit only final results).
    pub fn is_batch(&self) -> bool {
        self.batch
    }
    /// True once the subtask was asked to stop; long-running user code should check it.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// A context for running operators outside a cluster (tests).
    pub fn standalone(subtask_index: u32, parallelism: u32) -> Self {
        RuntimeContext {
            task_name: "standalone".into(),
            subtask_index,
            parallelism,
            max_parallelism: crate::graph::default_max_parallelism(parallelism),
            attempt: 0,
            batch: false,
            cancelled: Arc::new(AtomicBool::new(false)),
            operator_id: 0,
            state: Arc::new(super::StateInit::in_memory()),
        }
    }

    /// The restored operator state of the operator being built: `None` when the subtask starts
    /// fresh, `Some` (possibly empty: the operator had finished) when it is restored.
    pub(crate) fn restored_operator_state(&self) -> Option<Vec<Vec<u8>>> {
        let restore = self.state.restore.as_ref()?;
        Some(
            restore
                .operators
                .get(&self.operator_id)
                .map(|o| o.operator_state.clone())
                .unwrap_or_default(),
        )
    }

    /// Opens the keyed state of the operator being built, restored if the subtask is.
    pub(crate) fn keyed_state_store(&self) -> Result<crate::state::KeyedStateStore, TaskError> {
        let init = &self.state;
        let settings = crate::state::BackendSettings {
            kind: init.backend,
            local_dir: init.local_dir.join(format!("op{}", self.operator_id)),
            incremental: init.incremental,
            rocks_memory: init.rocks_memory.clone(),
            key_hash: init.key_hash,
        };
        let range = crate::state::KeyGroupRange::for_subtask(
            self.max_parallelism,
            self.parallelism,
            self.subtask_index,
        );
        let (handles, metadata_dir) = match &init.restore {
            Some(r) => (
                r.operators
                    .get(&self.operator_id)
                    .map(|o| o.keyed.clone())
                    .unwrap_or_default(),
                r.metadata_dir.clone(),
            ),
            None => (Vec::new(), String::new()),
        };
        Ok(crate::state::KeyedStateStore::open(
            &settings,
            self.max_parallelism,
            range,
            &handles,
            init.storage.as_ref(),
            &metadata_dir,
        )?)
    }
}
