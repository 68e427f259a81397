//! What a running operator knows about itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::error::TaskError;

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
            max_parallelism: crate::common::keys::default_max_parallelism(parallelism),
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
