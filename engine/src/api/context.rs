//! What a running operator knows about itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use crate::checkpoint::{OperatorStateSlice, StateDistribution};
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
    /// When the subtask's operators want to be called in processing time.
    pub(crate) timers: ProcessingTimeService,
    /// How often timestamp assigners emit watermarks (`pipeline.auto-watermark-interval`;
    /// zero: never periodically).
    pub(crate) auto_watermark_interval: Duration,
    /// The subtask's counters, reported with its metrics (operators count what only they see,
    /// such as `numLateRecordsDropped`).
    pub(crate) counters: Arc<crate::network::buffer::IoCounters>,
}

/// The processing-time deadlines of one subtask's operators: an operator asks to be called at
/// some time (ms since the epoch); the task calls its chain's `processing_time` once the
/// earliest request is due, and each operator asks again for its next one then. Cloned into
/// every operator of the chain; only the task's own thread uses it.
///
/// It is also where operators read processing time ([`now`](Self::now)): the wall clock, or in
/// tests a manual clock that only moves when the test sets it.
#[derive(Clone, Debug)]
pub(crate) struct ProcessingTimeService {
    next: Arc<AtomicI64>,
    /// A manual clock (ms since the epoch) in place of the wall clock.
    manual: Option<Arc<AtomicI64>>,
    /// How far the manual clock moves at each reading (tests of code that must read the
    /// clock once).
    tick: i64,
}

impl Default for ProcessingTimeService {
    fn default() -> Self {
        ProcessingTimeService {
            next: Arc::new(AtomicI64::new(i64::MAX)),
            manual: None,
            tick: 0,
        }
    }
}

impl ProcessingTimeService {
    /// A service whose clock reads `clock` rather than the wall clock (simulated time).
    #[cfg(test)]
    pub(crate) fn with_manual_clock(clock: Arc<AtomicI64>) -> Self {
        ProcessingTimeService {
            manual: Some(clock),
            ..Default::default()
        }
    }

    /// A manual clock that moves `tick` ms after each reading.
    #[cfg(test)]
    pub(crate) fn with_ticking_clock(clock: Arc<AtomicI64>, tick: i64) -> Self {
        ProcessingTimeService {
            tick,
            ..Self::with_manual_clock(clock)
        }
    }

    /// Processing time now, ms since the epoch.
    pub(crate) fn now(&self) -> i64 {
        match &self.manual {
            Some(clock) => clock.fetch_add(self.tick, Ordering::Relaxed),
            None => now_ms(),
        }
    }

    /// Asks for a call at `at` (or at once, if that has passed).
    pub(crate) fn request(&self, at: i64) {
        self.next.fetch_min(at, Ordering::Relaxed);
    }

    /// The earliest requested time, if any.
    pub(crate) fn next_deadline(&self) -> Option<i64> {
        let next = self.next.load(Ordering::Relaxed);
        (next != i64::MAX).then_some(next)
    }

    /// Whether a request is due at `now`; if so it is cleared (the operators called now ask
    /// for their next ones).
    pub(crate) fn take_due(&self, now: i64) -> bool {
        if self.next.load(Ordering::Relaxed) <= now {
            self.next.store(i64::MAX, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

/// The wall clock in ms since the epoch: processing time.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis().min(i64::MAX as u128) as i64)
        .unwrap_or(0)
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

    /// How often periodic watermarks are made (`pipeline.auto-watermark-interval`; zero: none).
    pub fn auto_watermark_interval(&self) -> Duration {
        self.auto_watermark_interval
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
            timers: ProcessingTimeService::default(),
            auto_watermark_interval: Duration::from_millis(200),
            counters: Default::default(),
        }
    }

    /// The restored operator state of the operator being built: `None` when the subtask starts
    /// fresh, `Some` (possibly empty: the operator had finished) when it is restored. Slices in
    /// files are read here, on the TaskManager; a missing or damaged file fails the restore
    /// with an error naming it.
    pub(crate) fn restored_operator_state(&self) -> Result<Option<Vec<Vec<u8>>>, TaskError> {
        let Some(restore) = self.state.restore.as_ref() else {
            return Ok(None);
        };
        let mut elements = Vec::new();
        let slices = restore
            .operators
            .get(&self.operator_id)
            .map_or(&[][..], |o| &o.operator_state[..]);
        for slice in slices {
            match slice {
                OperatorStateSlice::Inline(inline) => elements.extend(inline.iter().cloned()),
                OperatorStateSlice::File { file, first, count } => {
                    elements.extend(crate::state::operator_state::read(
                        self.state.storage.as_ref(),
                        &restore.metadata_dir,
                        file,
                        *first,
                        *count,
                    )?);
                }
            }
        }
        Ok(Some(elements))
    }

    /// How the restored operator state of the operator being built was dealt: `None` when the
    /// subtask starts fresh, split for an operator the restore has no state for.
    pub(crate) fn restored_operator_distribution(&self) -> Option<StateDistribution> {
        let restore = self.state.restore.as_ref()?;
        Some(
            restore
                .operators
                .get(&self.operator_id)
                .map_or(StateDistribution::Split, |o| o.distribution),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{OperatorRestore, TaskRestore};
    use crate::state::{SnapshotKind, SnapshotLocation, StateStorage, operator_state};

    fn restored(dir: &str, slices: Vec<OperatorStateSlice>) -> RuntimeContext {
        let mut ctx = RuntimeContext::standalone(0, 1);
        ctx.operator_id = 5;
        ctx.state = Arc::new(super::super::StateInit {
            restore: Some(TaskRestore {
                checkpoint_id: 2,
                metadata_dir: dir.to_string(),
                operators: [(
                    5,
                    OperatorRestore {
                        distribution: Default::default(),
                        operator_state: slices,
                        keyed: Vec::new(),
                    },
                )]
                .into(),
            }),
            ..super::super::StateInit::in_memory()
        });
        ctx
    }

    /// The TaskManager reads its slices of operator state files itself, in order with inline
    /// ones; a missing file fails the restore naming it.
    #[test]
    fn restored_operator_state_reads_file_slices_and_names_a_missing_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("chk-2").display().to_string();
        let location = SnapshotLocation {
            checkpoint_id: 2,
            kind: SnapshotKind::Savepoint,
            dir: dir.clone(),
            shared_dir: None,
        };
        let storage = crate::state::LocalFileStorage;
        let elements: Vec<Vec<u8>> = (0..4u8).map(|e| vec![e; 8]).collect();
        let handle = operator_state::snapshot(elements, 1, &location, &storage, "op5-x").unwrap();
        let file = handle.file().unwrap().clone();
        let slices = vec![
            OperatorStateSlice::File {
                file: file.clone(),
                first: 1,
                count: 2,
            },
            OperatorStateSlice::Inline(vec![b"inline".to_vec()]),
        ];
        let ctx = restored(&dir, slices.clone());
        assert_eq!(
            ctx.restored_operator_state().unwrap(),
            Some(vec![vec![1; 8], vec![2; 8], b"inline".to_vec()])
        );
        assert_eq!(
            RuntimeContext::standalone(0, 1)
                .restored_operator_state()
                .unwrap(),
            None
        );

        storage.delete_file(&format!("{dir}/op5-x")).unwrap();
        let err = restored(&dir, slices)
            .restored_operator_state()
            .unwrap_err();
        assert!(err.to_string().contains(&format!("{dir}/op5-x")), "{err}");
    }
}
