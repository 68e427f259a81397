//! The JobMaster's checkpoint coordinator: decides when to trigger checkpoints and savepoints,
//! collects the subtasks' acknowledgements into `_metadata`, keeps the configured number of
//! completed checkpoints (deleting what the others alone referenced), counts failures against
//! the tolerable threshold and picks what a failover restores from.
//!
//! A pure core: events and `now` (ms since the epoch) go in, [`CheckpointAction`]s come out.
//! It touches no file itself. Writing `_metadata`, deleting discarded checkpoints and checking a
//! checkpoint's files before a restore are actions ([`StorageWork::WriteMetadata`],
//! [`StorageWork::Discard`]) or inputs ([`CheckpointCoordinator::restore_plan`] takes the
//! verdicts of [`super::io::check_candidates`]); the JobManager carries them out off its lock,
//! in order per job, and feeds the results back ([`CheckpointCoordinator::metadata_written`]).
//! Tests drive it with simulated time and run its I/O with [`super::io`].

use crate::common::log_text::clip;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::assign::{Assignment, assign};
use super::metadata::{
    CheckpointMetadata, METADATA_FILE, OperatorKey, OperatorMetadata, RestoreError,
};
use super::state_sizes;
use super::stats::{
    CheckpointConfigInfo, CheckpointEntry, CheckpointStatus, CheckpointingStatistics, Counts,
    Externalization, HISTORY_SIZE, Latest, RestoredEntry, SubtaskAck, SubtaskCheckpoint,
    Summarizer, Summary,
};
use super::topology::{TaskKey, VertexTopology};
use super::{OperatorSubtaskState, SubtaskState, TaskRestore};
use crate::common::keys::KeyHash;
use crate::state::storage::join;
use crate::state::{SnapshotKind, SnapshotLocation};

/// Flink's message when consecutive failures exceed `tolerable_failures`.
pub const TOLERABLE_EXCEEDED: &str = "Exceeded checkpoint tolerable failure threshold.";
/// Flink's message for a checkpoint that ran past its timeout.
pub const EXPIRED: &str = "Checkpoint expired before completing.";
/// Flink's message for checkpoints aborted by a failover.
pub const ABORTED_RESTART: &str = "Checkpoint was aborted because the job is restarting";
/// Flink's message for checkpoints aborted because the job ended.
pub const ABORTED_SHUTDOWN: &str = "CheckpointCoordinator shutdown.";
/// Flink's message for an older checkpoint still pending when a newer one completes.
pub const SUBSUMED: &str = "Checkpoint has been subsumed.";
/// The error of a savepoint request without a directory.
pub const NO_SAVEPOINT_DIR: &str = "No savepoint directory configured: pass a target directory or set execution.checkpointing.savepoint-dir";

/// What the coordinator needs to know of a task's execution state.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskPhase {
    /// Running: can take barriers.
    Running,
    /// Finished: has nothing left to checkpoint.
    Finished,
    /// Anything else (created, deploying, failed, cancelled).
    Other,
}

/// How the job ended, for the retention decision.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Terminal {
    /// All tasks finished.
    Finished,
    /// Cancelled by the user.
    Canceled,
    /// Failed without restart.
    Failed,
}

/// What happens to a job's checkpoints when it ends: the configuration's own type
/// (`execution.checkpointing.externalized-checkpoint-retention`).
pub use crate::config::CheckpointRetention as Retention;

/// The job's checkpoint configuration (Flink's `execution.checkpointing.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointSettings {
    /// Periodic interval; `None` turns periodic checkpoints off (savepoints still work).
    pub interval: Option<Duration>,
    /// A checkpoint not complete after this long fails (default 10 min).
    pub timeout: Duration,
    /// Least time between the end of one checkpoint and the trigger of the next (default 0).
    pub min_pause: Duration,
    /// Most periodic checkpoints pending at once (default 1).
    pub max_concurrent: u32,
    /// Consecutive failed checkpoints tolerated before the job fails (default 0).
    pub tolerable_failures: u32,
    /// Completed checkpoints kept (default 1).
    pub num_retained: u32,
    /// Exactly-once (aligned barriers) or at-least-once; reported, enforced by the tasks.
    pub exactly_once: bool,
    /// `execution.checkpointing.dir`: where checkpoints go; periodic checkpoints need it.
    pub dir: Option<String>,
    /// `execution.checkpointing.savepoint-dir`: the default savepoint target.
    pub savepoint_dir: Option<String>,
    /// What happens to checkpoints when the job ends.
    pub retention: Retention,
    /// `execution.savepoint.ignore-unclaimed-state` (Flink's `--allowNonRestoredState`): a
    /// restore skips the state of operators the program no longer has instead of failing.
    pub allow_non_restored_state: bool,
}

impl From<&crate::config::CheckpointingOptions> for CheckpointSettings {
    /// The coordinator's view of the `execution.checkpointing.*` keys.
    fn from(c: &crate::config::CheckpointingOptions) -> Self {
        CheckpointSettings {
            interval: c.interval,
            timeout: c.timeout,
            min_pause: c.min_pause,
            max_concurrent: c.max_concurrent,
            tolerable_failures: c.tolerable_failures,
            num_retained: c.num_retained,
            exactly_once: c.mode == crate::config::CheckpointingMode::ExactlyOnce,
            dir: c.dir.clone(),
            savepoint_dir: c.savepoint_dir.clone(),
            retention: c.retention,
            allow_non_restored_state: c.ignore_unclaimed_state,
        }
    }
}

impl Default for CheckpointSettings {
    /// The configuration registry's defaults (no periodic checkpoints, no directory).
    fn default() -> Self {
        (&crate::config::Config::default().checkpointing).into()
    }
}

/// What the JobMaster must do for the coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointAction {
    /// Send a checkpoint barrier trigger to these tasks (sources, and tasks whose inputs all
    /// finished).
    Trigger {
        /// The checkpoint's id.
        checkpoint_id: u64,
        /// Trigger time (ms since the epoch).
        timestamp: u64,
        /// Where the subtasks write.
        location: SnapshotLocation,
        /// The tasks to trigger.
        tasks: Vec<TaskKey>,
    },
    /// The checkpoint completed: tasks may commit side effects (two-phase sinks).
    NotifyComplete {
        /// The checkpoint's id.
        checkpoint_id: u64,
        /// The tasks to notify.
        tasks: Vec<TaskKey>,
    },
    /// The checkpoint failed: tasks may drop what they prepared for it.
    NotifyAborted {
        /// The checkpoint's id.
        checkpoint_id: u64,
        /// The tasks to notify.
        tasks: Vec<TaskKey>,
    },
    /// Answer a savepoint request.
    SavepointDone {
        /// The request's id.
        request_id: String,
        /// The savepoint's directory, or why it failed.
        result: Result<String, String>,
    },
    /// Fail the job (too many consecutive checkpoint failures).
    FailJob {
        /// The failure's text.
        reason: String,
    },
    /// File work: the completion of a checkpoint waits for its `_metadata` write
    /// ([`CheckpointCoordinator::metadata_written`]).
    Storage(StorageWork),
}

/// File work for a job's checkpoints, which the cores ask for and the JobManager carries out in
/// the order it was asked for, off its lock, reporting results back as events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageWork {
    /// Write a completed checkpoint's `_metadata`; the checkpoint completes only when the
    /// result is reported ([`CheckpointCoordinator::metadata_written`]).
    WriteMetadata {
        /// The checkpoint's id.
        checkpoint_id: u64,
        /// The storage path of its `_metadata`.
        path: String,
        /// The file's contents.
        bytes: Vec<u8>,
    },
    /// Mark a savepoint's directory as sluice's and in progress (see
    /// [`super::io::mark_in_progress`]), so that one abandoned by a killed JobManager can be
    /// told from anything else in the savepoint directory and removed.
    MarkInProgress {
        /// The savepoint's directory.
        dir: String,
    },
    /// Delete files nothing needs any more (a discarded or failed checkpoint, or the job's
    /// whole checkpoint directory). Issued after every write of the same files, so carried out
    /// in order it never races them; nothing to report.
    Discard {
        /// Directories to delete with everything in them.
        dirs: Vec<String>,
        /// Single files to delete (shared files no retained checkpoint references).
        files: Vec<String>,
    },
    /// Check which checkpoints a (re)start can restore (with [`super::io::check_candidates`]);
    /// the JobMaster is told the verdicts.
    CheckRestore {
        /// Names this check among the job's (only the latest one's answer counts).
        ticket: u64,
        /// The candidates, most preferred first.
        candidates: Vec<RestoreCandidate>,
    },
}

/// A completed checkpoint or savepoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletedCheckpoint {
    /// Its id.
    pub id: u64,
    /// When it was triggered (ms since the epoch).
    pub timestamp: u64,
    /// Storage path of the directory holding its `_metadata`.
    pub metadata_dir: String,
    /// Whether it is a savepoint.
    pub is_savepoint: bool,
    /// Bytes written for it.
    pub checkpointed_size: u64,
    /// Bytes of the whole state it covers.
    pub state_size: u64,
    /// Its metadata, as written (shared: restore checks read it off the JobManager's lock).
    pub metadata: Arc<CheckpointMetadata>,
}

impl CompletedCheckpoint {
    /// A completed checkpoint for metadata found at `metadata_dir`.
    pub fn from_metadata(metadata_dir: String, metadata: CheckpointMetadata) -> Self {
        let (checkpointed_size, state_size) = state_sizes(
            metadata
                .operators
                .values()
                .flat_map(|o| o.subtasks.values()),
        );
        CompletedCheckpoint {
            id: metadata.checkpoint_id,
            timestamp: metadata.timestamp,
            metadata_dir,
            is_savepoint: metadata.is_savepoint,
            checkpointed_size,
            state_size,
            metadata: Arc::new(metadata),
        }
    }
}

/// A checkpoint a restore may use, to be checked for its files (by [`super::io::check_candidates`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreCandidate {
    /// The checkpoint's id.
    pub checkpoint_id: u64,
    /// The directory holding its `_metadata`.
    pub metadata_dir: String,
    /// Its metadata.
    pub metadata: Arc<CheckpointMetadata>,
}

/// Whether each checked candidate's files are all there, by metadata directory.
pub type RestoreVerdicts = Vec<(String, Result<(), RestoreError>)>;

/// What a failover or a start from a savepoint restores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestorePlan {
    /// The checkpoint's id.
    pub checkpoint_id: u64,
    /// Its directory.
    pub metadata_dir: String,
    /// Whether it is a savepoint.
    pub is_savepoint: bool,
    /// The state of every subtask of the job.
    pub tasks: BTreeMap<TaskKey, TaskRestore>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A triggered checkpoint or savepoint waiting for acknowledgements.
#[derive(Debug)]
struct PendingCheckpoint {
    id: u64,
    timestamp: u64,
    location: SnapshotLocation,
    /// The savepoint request it answers; `None` for a periodic checkpoint.
    savepoint_request: Option<String>,
    /// Every task not finished at trigger time.
    expected: BTreeSet<TaskKey>,
    /// The tasks sent the trigger itself; the others wait for barriers from upstream.
    triggered: BTreeSet<TaskKey>,
    acks: BTreeMap<TaskKey, SubtaskState>,
    /// When each acknowledgement arrived.
    ack_times: BTreeMap<TaskKey, u64>,
    /// When the latest acknowledgement arrived, if one did.
    latest_ack: Option<u64>,
}

impl PendingCheckpoint {
    fn is_savepoint(&self) -> bool {
        self.savepoint_request.is_some()
    }

    fn is_complete(&self) -> bool {
        self.expected.iter().all(|t| self.acks.contains_key(t))
    }

    fn shared_files(&self) -> impl Iterator<Item = String> + '_ {
        self.acks
            .values()
            .flat_map(|s| s.operators.values())
            .filter_map(|o| o.keyed.as_ref())
            .flat_map(|k| k.files.iter().filter(|f| f.shared))
            .map(|f| join(&self.location.dir, &f.path))
    }

    fn entry(&self, status: CheckpointStatus) -> CheckpointEntry {
        let (checkpointed_size, state_size) =
            state_sizes(self.acks.values().flat_map(|s| s.operators.values()));
        CheckpointEntry {
            id: self.id,
            status,
            is_savepoint: self.is_savepoint(),
            checkpoint_type: if self.is_savepoint() {
                "SAVEPOINT"
            } else {
                "CHECKPOINT"
            },
            trigger_timestamp: self.timestamp,
            latest_ack_timestamp: self.latest_ack.unwrap_or(0),
            checkpointed_size,
            state_size,
            end_to_end_duration: self
                .latest_ack
                .map_or(0, |a| a.saturating_sub(self.timestamp)),
            num_subtasks: self.expected.len() as u64,
            num_acknowledged_subtasks: self.acks.len() as u64,
            external_path: None,
            failure_timestamp: None,
            failure_message: None,
            subtasks: self.subtasks(),
        }
    }

    /// Every expected subtask with its acknowledgement, if it arrived.
    fn subtasks(&self) -> Vec<SubtaskCheckpoint> {
        self.expected
            .iter()
            .map(|&task| SubtaskCheckpoint {
                vertex: task.vertex,
                subtask: task.subtask,
                ack: self.acks.get(&task).map(|state| {
                    let (checkpointed_size, state_size) = state_sizes(state.operators.values());
                    SubtaskAck {
                        timestamp: self.ack_times.get(&task).copied().unwrap_or(self.timestamp),
                        checkpointed_size,
                        state_size,
                    }
                }),
            })
            .collect()
    }
}

/// The directory of a job's checkpoints under `execution.checkpointing.dir`: `<dir>/<job_id>`.
pub fn job_root(dir: &str, job_id: &str) -> String {
    join(dir, job_id)
}

/// The checkpoint coordinator of one job.
pub struct CheckpointCoordinator {
    job_id: String,
    settings: CheckpointSettings,
    topology: Vec<VertexTopology>,
    /// `<dir>/<job_id>`; `None` without `execution.checkpointing.dir`.
    root: Option<String>,
    phases: BTreeMap<TaskKey, TaskPhase>,
    pending: BTreeMap<u64, PendingCheckpoint>,
    /// Fully acknowledged checkpoints whose `_metadata` is being written, with that metadata.
    finalizing: BTreeMap<u64, (PendingCheckpoint, CheckpointMetadata)>,
    /// Completed checkpoints (never savepoints), oldest first, at most `num_retained`.
    retained: VecDeque<CompletedCheckpoint>,
    /// The savepoint the job was started from (`run -s`), restored until a checkpoint completes.
    initial_restore: Option<CompletedCheckpoint>,
    latest_savepoint: Option<CompletedCheckpoint>,
    savepoint_paths: Vec<String>,
    next_id: u64,
    /// When periodic triggering started counting (the first tick).
    clock_start: Option<u64>,
    last_trigger: Option<u64>,
    last_end: Option<u64>,
    consecutive_failures: u32,
    /// The latest `now` seen, for events without one (the restore timestamp).
    last_now: u64,
    counts: Counts,
    history: VecDeque<CheckpointEntry>,
    checkpointed_summary: Summarizer,
    state_summary: Summarizer,
    duration_summary: Summarizer,
    latest: Latest,
    /// How the job hashes keys: the current function, or the one of the checkpoint it restored.
    key_hash: KeyHash,
}

impl fmt::Debug for CheckpointCoordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckpointCoordinator")
            .field("job_id", &self.job_id)
            .field("root", &self.root)
            .field("pending", &self.pending.keys().collect::<Vec<_>>())
            .field(
                "retained",
                &self.retained.iter().map(|c| c.id).collect::<Vec<_>>(),
            )
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
}

impl CheckpointCoordinator {
    /// A coordinator for a job whose tasks are not running yet.
    pub fn new(
        job_id: String,
        settings: CheckpointSettings,
        topology: Vec<VertexTopology>,
    ) -> Self {
        let root = settings.dir.as_deref().map(|d| job_root(d, &job_id));
        if settings.interval.is_some() && root.is_none() {
            tracing::warn!(
                job_id = %job_id,
                "periodic checkpoints are configured but execution.checkpointing.dir is not set; periodic checkpoints are off"
            );
        }
        CheckpointCoordinator {
            job_id,
            settings,
            topology,
            root,
            phases: BTreeMap::new(),
            pending: BTreeMap::new(),
            finalizing: BTreeMap::new(),
            retained: VecDeque::new(),
            initial_restore: None,
            latest_savepoint: None,
            savepoint_paths: Vec::new(),
            next_id: 1,
            clock_start: None,
            last_trigger: None,
            last_end: None,
            consecutive_failures: 0,
            last_now: 0,
            counts: Counts::default(),
            history: VecDeque::new(),
            checkpointed_summary: Summarizer::default(),
            state_summary: Summarizer::default(),
            duration_summary: Summarizer::default(),
            latest: Latest::default(),
            key_hash: KeyHash::CURRENT,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &CheckpointSettings {
        &self.settings
    }

    /// `<dir>/<job_id>`, if checkpoints have a directory.
    pub fn checkpoint_root(&self) -> Option<&str> {
        self.root.as_deref()
    }

    /// Ids of the pending checkpoints and savepoints, oldest first.
    pub fn pending_ids(&self) -> Vec<u64> {
        self.pending.keys().copied().collect()
    }

    /// Retained completed checkpoints, oldest first.
    pub fn retained(&self) -> impl Iterator<Item = &CompletedCheckpoint> {
        self.retained.iter()
    }

    /// Directories of the savepoints this coordinator completed, oldest first.
    pub fn savepoint_paths(&self) -> &[String] {
        &self.savepoint_paths
    }

    /// The newest completed checkpoint or savepoint.
    pub fn latest_completed(&self) -> Option<&CompletedCheckpoint> {
        match (self.retained.back(), self.latest_savepoint.as_ref()) {
            (Some(c), Some(s)) => Some(if s.id > c.id { s } else { c }),
            (c, s) => c.or(s),
        }
    }

    fn phase(&self, task: TaskKey) -> TaskPhase {
        self.phases.get(&task).copied().unwrap_or(TaskPhase::Other)
    }

    fn all_tasks(&self) -> impl Iterator<Item = TaskKey> + '_ {
        self.topology.iter().enumerate().flat_map(|(v, vertex)| {
            (0..vertex.parallelism).map(move |s| TaskKey {
                vertex: v as u32,
                subtask: s,
            })
        })
    }

    fn vertex_finished(&self, v: usize) -> bool {
        let parallelism = self.topology.get(v).map_or(0, |x| x.parallelism);
        (0..parallelism).all(|s| {
            self.phase(TaskKey {
                vertex: v as u32,
                subtask: s,
            }) == TaskPhase::Finished
        })
    }

    /// Why a snapshot cannot be triggered now, if it cannot: every task not finished must be
    /// running (a task being deployed would miss the barrier), and one must be.
    fn not_ready(&self) -> Option<String> {
        let mut any_unfinished = false;
        for task in self.all_tasks() {
            match self.phase(task) {
                TaskPhase::Finished => {}
                TaskPhase::Running => any_unfinished = true,
                TaskPhase::Other => {
                    return Some(format!(
                        "Not all required tasks are currently running: task {task} is not running"
                    ));
                }
            }
        }
        (!any_unfinished).then(|| "All tasks of the job have finished".to_string())
    }

    /// Tasks to send the trigger to: running sources, and running tasks whose inputs all
    /// finished (no barrier will reach them from upstream).
    fn trigger_targets(&self) -> Vec<TaskKey> {
        self.all_tasks()
            .filter(|&t| self.phase(t) == TaskPhase::Running)
            .filter(|t| {
                self.topology[t.vertex as usize]
                    .inputs
                    .iter()
                    .all(|&v| self.vertex_finished(v))
            })
            .collect()
    }

    /// A task changed state. A task that finishes while a checkpoint waits for it counts as
    /// acknowledged with empty state for each of its operators: it has nothing left to restore,
    /// and a restored source must see that it was done.
    pub fn task_state(
        &mut self,
        now: u64,
        task: TaskKey,
        phase: TaskPhase,
    ) -> Vec<CheckpointAction> {
        self.last_now = now;
        self.phases.insert(task, phase);
        if phase != TaskPhase::Finished {
            return Vec::new();
        }
        let operators = self
            .topology
            .get(task.vertex as usize)
            .map(|v| v.operators.iter().map(|op| op.node).collect::<Vec<u32>>())
            .unwrap_or_default();
        let mut done = Vec::new();
        for (&id, p) in &mut self.pending {
            if p.expected.contains(&task) && !p.acks.contains_key(&task) {
                let state = SubtaskState {
                    operators: operators
                        .iter()
                        .map(|&op| (op, OperatorSubtaskState::default()))
                        .collect(),
                };
                p.acks.insert(task, state);
                p.ack_times.insert(task, now);
                p.latest_ack = Some(now);
                if p.is_complete() {
                    done.push(id);
                }
            }
        }
        let mut actions = Vec::new();
        for id in done {
            actions.extend(self.complete(id, now));
        }
        actions.extend(self.trigger_orphans(task));
        actions
    }

    /// Triggers, for each pending checkpoint, the tasks that `finished` leaves without a
    /// barrier: running, not yet acknowledged, and all of whose inputs have finished now. A
    /// producer that ends after its trigger left but before it read it finishes without
    /// sending the barrier; its consumers saw its channels end and would wait for the barrier
    /// forever (a sink waiting for its final checkpoint holds the job's end on it). A task
    /// whose barrier is on its way anyway ignores the second one.
    fn trigger_orphans(&mut self, finished: TaskKey) -> Vec<CheckpointAction> {
        let downstream: Vec<TaskKey> = self
            .trigger_targets()
            .into_iter()
            .filter(|t| {
                self.topology[t.vertex as usize]
                    .inputs
                    .contains(&(finished.vertex as usize))
            })
            .collect();
        if downstream.is_empty() {
            return Vec::new();
        }
        let mut actions = Vec::new();
        for p in self.pending.values_mut() {
            let tasks: Vec<TaskKey> = downstream
                .iter()
                .copied()
                .filter(|t| {
                    p.expected.contains(t) && !p.acks.contains_key(t) && !p.triggered.contains(t)
                })
                .collect();
            if tasks.is_empty() {
                continue;
            }
            tracing::debug!(job_id = %self.job_id, checkpoint_id = p.id, ?tasks, "triggering tasks whose inputs finished after the checkpoint's trigger");
            p.triggered.extend(tasks.iter().copied());
            actions.push(CheckpointAction::Trigger {
                checkpoint_id: p.id,
                timestamp: p.timestamp,
                location: p.location.clone(),
                tasks,
            });
        }
        actions
    }

    fn periodic_due(&mut self, now: u64) -> Option<u64> {
        let interval = ms(self.settings.interval?);
        self.root.as_ref()?;
        let start = *self.clock_start.get_or_insert(now);
        let by_interval = self.last_trigger.unwrap_or(start).saturating_add(interval);
        let by_pause = self
            .last_end
            .map_or(0, |e| e.saturating_add(ms(self.settings.min_pause)));
        Some(by_interval.max(by_pause))
    }

    /// When [`tick`](Self::tick) next has something to do (ms since the epoch): a pending
    /// checkpoint's timeout or the next periodic trigger; a time already past means at once.
    /// `None`: nothing happens until another event. A trigger that is due but cannot happen
    /// (tasks not running, the maximum of concurrent checkpoints pending) waits for the event
    /// that changes that, not for time.
    pub fn poll_timeout(&self) -> Option<u64> {
        let timeout = ms(self.settings.timeout);
        let expiry = self
            .pending
            .values()
            .map(|p| p.timestamp.saturating_add(timeout))
            .min();
        let trigger = self.next_trigger();
        [expiry, trigger].into_iter().flatten().min()
    }

    fn next_trigger(&self) -> Option<u64> {
        let interval = ms(self.settings.interval?);
        self.root.as_ref()?;
        let Some(start) = self.clock_start else {
            // The first tick starts the interval's clock.
            return Some(self.last_now);
        };
        let by_interval = self.last_trigger.unwrap_or(start).saturating_add(interval);
        let by_pause = self
            .last_end
            .map_or(0, |e| e.saturating_add(ms(self.settings.min_pause)));
        let due = by_interval.max(by_pause);
        if due > self.last_now {
            return Some(due);
        }
        let blocked = self.pending.len() >= self.settings.max_concurrent.max(1) as usize
            || self.not_ready().is_some();
        (!blocked).then_some(due)
    }

    /// Time passes: expires pending checkpoints past the timeout, then triggers a periodic
    /// checkpoint if one is due. The first tick starts the interval's clock.
    pub fn tick(&mut self, now: u64) -> Vec<CheckpointAction> {
        self.last_now = now;
        let timeout = ms(self.settings.timeout);
        let expired: Vec<u64> = self
            .pending
            .values()
            .filter(|p| now >= p.timestamp.saturating_add(timeout))
            .map(|p| p.id)
            .collect();
        let mut actions = Vec::new();
        for id in expired {
            actions.extend(self.fail_pending(id, now, EXPIRED.to_string(), true));
        }
        let Some(due) = self.periodic_due(now) else {
            return actions;
        };
        if now < due {
            return actions;
        }
        // Savepoints count as Flink counts them: a periodic checkpoint triggered behind a
        // pending savepoint would overtake its barriers at some task, which then aborts the
        // older one, and the savepoint (a stop-with-savepoint, say) would fail. Savepoints
        // themselves are never held back.
        let pending = self.pending.len();
        if pending >= self.settings.max_concurrent.max(1) as usize {
            tracing::debug!(job_id = %self.job_id, pending, "checkpoint due but the maximum of concurrent checkpoints (savepoints included) is pending");
            return actions;
        }
        if let Some(why) = self.not_ready() {
            // Not a failure: the trigger is retried at the next tick.
            tracing::debug!(job_id = %self.job_id, "checkpoint triggering skipped: {why}");
            return actions;
        }
        let Some(root) = self.root.clone() else {
            return actions;
        };
        let id = self.next_id;
        let location = SnapshotLocation {
            checkpoint_id: id,
            kind: SnapshotKind::Checkpoint,
            dir: join(&root, &format!("chk-{id}")),
            shared_dir: Some(join(&root, "shared")),
        };
        self.last_trigger = Some(now);
        actions.push(self.start(now, location, None));
        actions
    }

    /// A savepoint is requested (`sluice savepoint`, stop-with-savepoint). Works with periodic
    /// checkpoints off. The answer comes later as [`CheckpointAction::SavepointDone`].
    pub fn trigger_savepoint(
        &mut self,
        now: u64,
        target_dir: Option<String>,
        request_id: String,
    ) -> Result<Vec<CheckpointAction>, String> {
        self.last_now = now;
        let Some(target) = target_dir.or_else(|| self.settings.savepoint_dir.clone()) else {
            return Err(NO_SAVEPOINT_DIR.to_string());
        };
        if let Some(why) = self.not_ready() {
            return Err(why);
        }
        // Flink names savepoints `savepoint-<6 chars of the job id>-<12 random hex digits>`; the
        // random part comes from the request id, which the caller drew.
        let prefix: String = self.job_id.chars().take(6).collect();
        let suffix: String = request_id
            .chars()
            .filter(char::is_ascii_hexdigit)
            .map(|c| c.to_ascii_lowercase())
            .chain(std::iter::repeat('0'))
            .take(12)
            .collect();
        let id = self.next_id;
        let location = SnapshotLocation {
            checkpoint_id: id,
            kind: SnapshotKind::Savepoint,
            dir: join(&target, &format!("savepoint-{prefix}-{suffix}")),
            shared_dir: None,
        };
        let mark = CheckpointAction::Storage(StorageWork::MarkInProgress {
            dir: location.dir.clone(),
        });
        Ok(vec![mark, self.start(now, location, Some(request_id))])
    }

    fn start(
        &mut self,
        now: u64,
        location: SnapshotLocation,
        savepoint_request: Option<String>,
    ) -> CheckpointAction {
        let id = location.checkpoint_id;
        self.next_id = id + 1;
        let expected: BTreeSet<TaskKey> = self
            .all_tasks()
            .filter(|&t| self.phase(t) != TaskPhase::Finished)
            .collect();
        let tasks = self.trigger_targets();
        tracing::info!(
            job_id = %self.job_id,
            checkpoint_id = id,
            savepoint = savepoint_request.is_some(),
            dir = %clip(&location.dir),
            "triggering checkpoint"
        );
        self.counts.total += 1;
        self.pending.insert(
            id,
            PendingCheckpoint {
                id,
                timestamp: now,
                location: location.clone(),
                savepoint_request,
                expected,
                triggered: tasks.iter().copied().collect(),
                acks: BTreeMap::new(),
                ack_times: BTreeMap::new(),
                latest_ack: None,
            },
        );
        CheckpointAction::Trigger {
            checkpoint_id: id,
            timestamp: now,
            location,
            tasks,
        }
    }

    /// A task acknowledged a checkpoint with its state. Completes the checkpoint when it was the
    /// last one expected.
    pub fn acknowledge(
        &mut self,
        now: u64,
        task: TaskKey,
        checkpoint_id: u64,
        state: SubtaskState,
    ) -> Vec<CheckpointAction> {
        self.last_now = now;
        let Some(p) = self.pending.get_mut(&checkpoint_id) else {
            tracing::debug!(job_id = %self.job_id, checkpoint_id, %task, "ignoring acknowledgement of a checkpoint that is not pending");
            return Vec::new();
        };
        if !p.expected.contains(&task) || p.acks.contains_key(&task) {
            tracing::debug!(job_id = %self.job_id, checkpoint_id, %task, "ignoring unexpected or repeated acknowledgement");
            return Vec::new();
        }
        p.acks.insert(task, state);
        p.ack_times.insert(task, now);
        p.latest_ack = Some(now);
        if p.is_complete() {
            self.complete(checkpoint_id, now)
        } else {
            Vec::new()
        }
    }

    /// A task declined a checkpoint; `counts_as_failure` says whether it counts against the
    /// tolerable failures (a task not ready yet does not).
    pub fn decline(
        &mut self,
        now: u64,
        task: TaskKey,
        checkpoint_id: u64,
        reason: String,
        counts_as_failure: bool,
    ) -> Vec<CheckpointAction> {
        self.last_now = now;
        if !self.pending.contains_key(&checkpoint_id) {
            tracing::debug!(job_id = %self.job_id, checkpoint_id, %task, "ignoring decline of a checkpoint that is not pending");
            return Vec::new();
        }
        let message = format!("Task {task} declined checkpoint {checkpoint_id}: {reason}");
        self.fail_pending(checkpoint_id, now, message, counts_as_failure)
    }

    /// The job fails over: every pending checkpoint and savepoint is aborted (not counted as a
    /// failure) and task phases are forgotten, since the tasks will be redeployed.
    pub fn job_reset(&mut self, now: u64) -> Vec<CheckpointAction> {
        self.last_now = now;
        let actions = self.abort_all(now, ABORTED_RESTART);
        self.phases.clear();
        actions
    }

    /// The job runs at another parallelism from its next deployment on (the adaptive
    /// scheduler's rescale, after [`job_reset`](Self::job_reset)): checkpoints and restores
    /// address that topology's subtasks.
    pub fn set_topology(&mut self, topology: Vec<VertexTopology>) {
        self.phases.clear();
        self.topology = topology;
    }

    /// The job ended: aborts what is pending and deletes the job's checkpoint directory if the
    /// retention says so. Savepoints live elsewhere and are never deleted.
    pub fn job_terminated(&mut self, now: u64, status: Terminal) -> Vec<CheckpointAction> {
        self.last_now = now;
        let mut actions = self.abort_all(now, ABORTED_SHUTDOWN);
        let delete = match (self.settings.retention, status) {
            (_, Terminal::Finished) => true,
            (Retention::DeleteOnCancellation, Terminal::Canceled) => true,
            (Retention::DeleteOnCancellation, Terminal::Failed) => false,
            (Retention::RetainOnCancellation, _) => false,
        };
        if delete {
            if let Some(root) = &self.root {
                tracing::info!(job_id = %self.job_id, ?status, root = %clip(root), "deleting the job's checkpoints");
                actions.push(CheckpointAction::Storage(StorageWork::Discard {
                    dirs: vec![root.clone()],
                    files: Vec::new(),
                }));
            }
            self.retained.clear();
        } else if let Some(latest) = self.retained.back() {
            tracing::info!(job_id = %self.job_id, ?status, checkpoint = %clip(&latest.metadata_dir), "keeping the job's checkpoints");
        }
        actions
    }

    /// Ends every pending checkpoint and every one whose metadata is still being written (its
    /// files are discarded after the write, in order).
    fn abort_all(&mut self, now: u64, reason: &str) -> Vec<CheckpointAction> {
        let mut ended: Vec<PendingCheckpoint> = std::mem::take(&mut self.pending)
            .into_values()
            .chain(
                std::mem::take(&mut self.finalizing)
                    .into_values()
                    .map(|(p, _)| p),
            )
            .collect();
        ended.sort_by_key(|p| p.id);
        let mut actions = Vec::new();
        for p in ended {
            actions.extend(self.fail(p, now, reason.to_string(), false));
        }
        actions
    }

    /// Storage paths of shared files something still needs: retained checkpoints, the ones being
    /// finalized and the acknowledgements of pending ones (an incremental backend may reference a
    /// file of a checkpoint that is being discarded).
    fn referenced_shared_files(&self) -> BTreeSet<String> {
        let mut refs: BTreeSet<String> = self
            .retained
            .iter()
            .flat_map(|c| c.metadata.shared_file_paths(&c.metadata_dir))
            .collect();
        refs.extend(self.pending.values().flat_map(|p| p.shared_files()));
        refs.extend(self.finalizing.values().flat_map(|(p, _)| p.shared_files()));
        refs
    }

    /// Deletes `dir` and those of `shared` nothing references any more.
    fn delete_unreferenced(
        &self,
        dir: &str,
        shared: impl Iterator<Item = String>,
    ) -> CheckpointAction {
        let refs = self.referenced_shared_files();
        let files: BTreeSet<String> = shared.filter(|f| !refs.contains(f)).collect();
        CheckpointAction::Storage(StorageWork::Discard {
            dirs: vec![dir.to_string()],
            files: files.into_iter().collect(),
        })
    }

    fn unfinished(&self, tasks: &BTreeSet<TaskKey>) -> Vec<TaskKey> {
        tasks
            .iter()
            .copied()
            .filter(|&t| self.phase(t) != TaskPhase::Finished)
            .collect()
    }

    fn record(&mut self, entry: CheckpointEntry) {
        self.history.push_front(entry);
        self.history.truncate(HISTORY_SIZE);
    }

    fn fail_pending(
        &mut self,
        id: u64,
        now: u64,
        reason: String,
        counts: bool,
    ) -> Vec<CheckpointAction> {
        match self.pending.remove(&id) {
            Some(p) => self.fail(p, now, reason, counts),
            None => Vec::new(),
        }
    }

    /// Ends a pending checkpoint without success: notifies, deletes what only it wrote, and counts
    /// the failure if it should (savepoints never count: a user's request must not fail the job).
    fn fail(
        &mut self,
        p: PendingCheckpoint,
        now: u64,
        reason: String,
        counts: bool,
    ) -> Vec<CheckpointAction> {
        tracing::warn!(job_id = %self.job_id, checkpoint_id = p.id, savepoint = p.is_savepoint(), "checkpoint failed: {}", clip(&reason));
        let discard = self.delete_unreferenced(&p.location.dir, p.shared_files());
        let mut entry = p.entry(CheckpointStatus::Failed);
        entry.failure_timestamp = Some(now);
        entry.failure_message = Some(reason.clone());
        self.counts.failed += 1;
        self.latest.failed = Some(entry.clone());
        self.record(entry);
        let mut actions = vec![
            CheckpointAction::NotifyAborted {
                checkpoint_id: p.id,
                tasks: self.unfinished(&p.expected),
            },
            discard,
        ];
        match p.savepoint_request {
            Some(request_id) => actions.push(CheckpointAction::SavepointDone {
                request_id,
                result: Err(reason),
            }),
            None => {
                self.last_end = Some(now);
                if counts {
                    self.consecutive_failures += 1;
                    if self.consecutive_failures > self.settings.tolerable_failures {
                        tracing::warn!(job_id = %self.job_id, failures = self.consecutive_failures, "{TOLERABLE_EXCEEDED}");
                        self.consecutive_failures = 0;
                        actions.push(CheckpointAction::FailJob {
                            reason: TOLERABLE_EXCEEDED.to_string(),
                        });
                    }
                }
            }
        }
        actions
    }

    fn build_metadata(&self, p: &PendingCheckpoint) -> CheckpointMetadata {
        let mut metadata =
            CheckpointMetadata::new(self.job_id.clone(), p.id, p.timestamp, p.is_savepoint());
        metadata.key_hash = self.key_hash;
        for (task, state) in &p.acks {
            let Some(vertex) = self.topology.get(task.vertex as usize) else {
                continue;
            };
            for (&node, st) in &state.operators {
                let Some(op) = vertex.operators.iter().find(|op| op.node == node) else {
                    // Subtasks report the operators of their own chain only.
                    tracing::warn!(job_id = %self.job_id, checkpoint_id = p.id, task = %task, node, "state of an operator the vertex does not have; left out of the checkpoint");
                    continue;
                };
                metadata
                    .operators
                    .entry(OperatorKey::Id(op.identity.id))
                    .or_insert_with(|| OperatorMetadata {
                        uid: op.identity.uid.clone(),
                        parallelism: vertex.parallelism,
                        max_parallelism: vertex.max_parallelism,
                        subtasks: BTreeMap::new(),
                    })
                    .subtasks
                    .insert(task.subtask, st.clone());
            }
        }
        metadata
    }

    /// Every expected task acknowledged: the metadata is built and handed out to be written;
    /// the checkpoint completes when [`metadata_written`](Self::metadata_written) reports it.
    fn complete(&mut self, id: u64, now: u64) -> Vec<CheckpointAction> {
        let Some(p) = self.pending.remove(&id) else {
            return Vec::new();
        };
        let metadata = self.build_metadata(&p);
        if p.is_savepoint() {
            // A savepoint must survive the job's directory being deleted and be movable.
            let outside = |path: &str| path.starts_with("..") || path.starts_with('/');
            let keyed = metadata
                .keyed_handles()
                .flat_map(|(_, _, k)| k.files.iter().map(|f| &f.path));
            let operator = metadata.operator_state_files().map(|(_, _, f)| &f.path);
            if let Some(path) = keyed.chain(operator).find(|p| outside(p)) {
                let reason = format!(
                    "Savepoint is not self-contained: it references {path} outside its directory"
                );
                return self.fail(p, now, reason, false);
            }
        }
        let path = join(&p.location.dir, METADATA_FILE);
        match metadata.to_bytes() {
            Ok(bytes) => {
                self.finalizing.insert(id, (p, metadata));
                vec![CheckpointAction::Storage(StorageWork::WriteMetadata {
                    checkpoint_id: id,
                    path,
                    bytes,
                })]
            }
            Err(e) => {
                let reason = format!("Failed to write checkpoint metadata {path}: {e}");
                let counts = !p.is_savepoint();
                self.fail(p, now, reason, counts)
            }
        }
    }

    /// The `_metadata` of a fully acknowledged checkpoint was written (or could not be): it
    /// completes (notify, retain, discard what retention drops) or fails. A checkpoint aborted
    /// while its metadata was being written is ignored here: its files go with the discard
    /// issued when it was aborted.
    pub fn metadata_written(
        &mut self,
        now: u64,
        checkpoint_id: u64,
        result: Result<(), String>,
    ) -> Vec<CheckpointAction> {
        self.last_now = now;
        let Some((p, metadata)) = self.finalizing.remove(&checkpoint_id) else {
            return Vec::new();
        };
        if let Err(e) = result {
            let path = join(&p.location.dir, METADATA_FILE);
            let reason = format!("Failed to write checkpoint metadata {path}: {e}");
            let counts = !p.is_savepoint();
            return self.fail(p, now, reason, counts);
        }
        let id = checkpoint_id;
        let completed = CompletedCheckpoint::from_metadata(p.location.dir.clone(), metadata);
        tracing::info!(job_id = %self.job_id, checkpoint_id = id, dir = %clip(&completed.metadata_dir), state_size = completed.state_size, duration_ms = now.saturating_sub(p.timestamp), "checkpoint completed");

        let mut entry = p.entry(CheckpointStatus::Completed);
        // As in Flink, a checkpoint's duration ends with its last acknowledgement.
        entry.latest_ack_timestamp = p.latest_ack.unwrap_or(now);
        entry.end_to_end_duration = entry.latest_ack_timestamp.saturating_sub(p.timestamp);
        entry.checkpointed_size = completed.checkpointed_size;
        entry.state_size = completed.state_size;
        entry.external_path = Some(completed.metadata_dir.clone());
        self.counts.completed += 1;
        self.checkpointed_summary.add(entry.checkpointed_size);
        self.state_summary.add(entry.state_size);
        self.duration_summary.add(entry.end_to_end_duration);

        let mut actions = vec![CheckpointAction::NotifyComplete {
            checkpoint_id: id,
            tasks: self.unfinished(&p.expected),
        }];
        match p.savepoint_request {
            Some(request_id) => {
                self.latest.savepoint = Some(entry.clone());
                self.record(entry);
                self.savepoint_paths.push(completed.metadata_dir.clone());
                actions.push(CheckpointAction::SavepointDone {
                    request_id,
                    result: Ok(completed.metadata_dir.clone()),
                });
                self.latest_savepoint = Some(completed);
            }
            None => {
                self.latest.completed = Some(entry.clone());
                self.record(entry);
                self.consecutive_failures = 0;
                self.last_end = Some(now);
                self.retained.push_back(completed);
                // Older periodic checkpoints still pending can only complete into something the
                // retention would discard at once.
                let older: Vec<u64> = self
                    .pending
                    .values()
                    .filter(|q| q.id < id && !q.is_savepoint())
                    .map(|q| q.id)
                    .collect();
                for old in older {
                    actions.extend(self.fail_pending(old, now, SUBSUMED.to_string(), false));
                }
                actions.extend(self.enforce_retention());
            }
        }
        actions
    }

    /// Drops the oldest retained checkpoints beyond `num_retained`, deleting their directories
    /// and the shared files nothing else references.
    fn enforce_retention(&mut self) -> Vec<CheckpointAction> {
        let mut actions = Vec::new();
        while self.retained.len() > self.settings.num_retained.max(1) as usize {
            if let Some(old) = self.retained.pop_front() {
                tracing::debug!(job_id = %self.job_id, checkpoint_id = old.id, "discarding checkpoint");
                let shared = old.metadata.shared_file_paths(&old.metadata_dir);
                actions.push(self.delete_unreferenced(&old.metadata_dir, shared.into_iter()));
            }
        }
        actions
    }

    /// After a JobManager failover (HA): takes over the completed checkpoints a previous
    /// coordinator of this job left in `<dir>/<job_id>` ([`checkpoint_root`](Self::checkpoint_root)),
    /// as read by [`super::io::read_retained`]: the entries of that directory, each with its
    /// `chk-<n>` metadata or why it could not be read. Keeps the newest `num_retained`
    /// (discarding older ones as retention would have), skips directories without readable
    /// `_metadata` (checkpoints that never completed; logged), and continues ids above every
    /// `chk-<n>` found so no directory is reused. Returns the ids now retained and the discards.
    pub fn adopt_retained(
        &mut self,
        found: Vec<(String, Result<CheckpointMetadata, RestoreError>)>,
    ) -> (Vec<u64>, Vec<CheckpointAction>) {
        let Some(root) = self.root.clone() else {
            return (Vec::new(), Vec::new());
        };
        for (name, metadata) in found {
            let Some(id) = name
                .strip_prefix("chk-")
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            self.next_id = self.next_id.max(id + 1);
            if self.retained.iter().any(|c| c.id == id) {
                continue;
            }
            let dir = join(&root, &name);
            match metadata {
                Ok(metadata) if metadata.checkpoint_id == id && !metadata.is_savepoint => {
                    self.retained
                        .push_back(CompletedCheckpoint::from_metadata(dir, metadata));
                }
                Ok(metadata) => {
                    tracing::warn!(job_id = %self.job_id, dir = %clip(&dir), "ignoring the directory: its metadata names checkpoint {}", metadata.checkpoint_id);
                }
                Err(e) => {
                    tracing::warn!(job_id = %self.job_id, dir = %clip(&dir), "ignoring an incomplete checkpoint: {}", clip(&e.to_string()));
                }
            }
        }
        self.retained.make_contiguous().sort_by_key(|c| c.id);
        let actions = self.enforce_retention();
        let ids: Vec<u64> = self.retained.iter().map(|c| c.id).collect();
        tracing::info!(job_id = %self.job_id, ?ids, "recovered completed checkpoints");
        (ids, actions)
    }

    /// A savepoint (or a retained checkpoint of an earlier run) the job starts from (`run -s`):
    /// restored until a checkpoint of this job completes; checkpoint ids continue above its id.
    pub fn set_initial_restore(&mut self, metadata_dir: String, metadata: CheckpointMetadata) {
        self.next_id = self.next_id.max(metadata.checkpoint_id + 1);
        self.initial_restore = Some(CompletedCheckpoint::from_metadata(metadata_dir, metadata));
    }

    /// What a (re)start may restore, most preferred first: the retained checkpoints, newest
    /// first, then the savepoint the job started from. Their files are checked off the core
    /// ([`super::io::check_candidates`]) and the verdicts given to
    /// [`restore_plan`](Self::restore_plan).
    pub fn restore_candidates(&self) -> Vec<RestoreCandidate> {
        let candidate = |c: &CompletedCheckpoint| RestoreCandidate {
            checkpoint_id: c.id,
            metadata_dir: c.metadata_dir.clone(),
            metadata: c.metadata.clone(),
        };
        self.retained
            .iter()
            .rev()
            .chain(self.initial_restore.iter())
            .map(candidate)
            .collect()
    }

    /// What a (re)start restores, given the verdicts of the checks of
    /// [`restore_candidates`](Self::restore_candidates): the newest retained checkpoint whose
    /// files are all there, else the initial savepoint, else nothing. A retained checkpoint that
    /// failed its check is logged and the one before it tried; invalid newer ones are then
    /// dropped from the retained set (their files are kept for inspection). If retained
    /// checkpoints exist but none is valid, the newest one's error is returned: starting empty
    /// would silently lose state. A candidate without a verdict counts as unchecked, not valid.
    pub fn restore_plan(
        &mut self,
        verdicts: RestoreVerdicts,
    ) -> Result<Option<RestorePlan>, RestoreError> {
        let mut verdicts: BTreeMap<String, Result<(), RestoreError>> =
            verdicts.into_iter().collect();
        let mut verdict = |c: &CompletedCheckpoint| {
            verdicts.remove(&c.metadata_dir).unwrap_or_else(|| {
                Err(RestoreError::Unchecked {
                    checkpoint_id: c.id,
                    path: c.metadata_dir.clone(),
                })
            })
        };
        let mut newest_error = None;
        let mut chosen = None;
        for (idx, c) in self.retained.iter().enumerate().rev() {
            match verdict(c) {
                Ok(()) => {
                    chosen = Some(idx);
                    break;
                }
                Err(e) => {
                    tracing::warn!(job_id = %self.job_id, checkpoint_id = c.id, "cannot restore checkpoint {}: {e}; trying the one before", c.metadata_dir);
                    if newest_error.is_none() {
                        newest_error = Some(e);
                    }
                }
            }
        }
        let candidate = match chosen {
            Some(idx) => {
                self.retained.truncate(idx + 1);
                self.retained.back()
            }
            None => {
                if let Some(e) = newest_error {
                    return Err(e);
                }
                match &self.initial_restore {
                    Some(c) => {
                        verdict(c)?;
                        Some(c)
                    }
                    None => None,
                }
            }
        };
        let Some(c) = candidate else {
            return Ok(None);
        };
        let Assignment { tasks, skipped } = assign(
            &c.metadata,
            &c.metadata_dir,
            &self.topology,
            self.settings.allow_non_restored_state,
        )?;
        for op in &skipped {
            if op.had_state {
                tracing::warn!(job_id = %self.job_id, checkpoint_id = c.id, operator = %op, dir = %clip(&c.metadata_dir), "skipping the state of an operator the program no longer has (execution.savepoint.ignore-unclaimed-state)");
            } else {
                tracing::info!(job_id = %self.job_id, checkpoint_id = c.id, operator = %op, "skipping an operator without state that the program no longer has");
            }
        }
        // The restored key groups were computed with the checkpoint's key hash: keep it.
        self.key_hash = c.metadata.key_hash;
        let plan = RestorePlan {
            checkpoint_id: c.id,
            metadata_dir: c.metadata_dir.clone(),
            is_savepoint: c.is_savepoint,
            tasks,
        };
        tracing::info!(job_id = %self.job_id, checkpoint_id = plan.checkpoint_id, dir = %clip(&plan.metadata_dir), "restoring from checkpoint");
        self.counts.restored += 1;
        self.latest.restored = Some(RestoredEntry {
            id: plan.checkpoint_id,
            restore_timestamp: self.last_now,
            is_savepoint: plan.is_savepoint,
            external_path: plan.metadata_dir.clone(),
        });
        Ok(Some(plan))
    }

    /// How the job hashes keys into key groups (deployments carry it; checkpoints record it).
    pub fn key_hash(&self) -> KeyHash {
        self.key_hash
    }

    /// `GET /jobs/:id/checkpoints`.
    pub fn stats(&self) -> CheckpointingStatistics {
        let mut history: Vec<CheckpointEntry> = self
            .pending
            .values()
            .chain(self.finalizing.values().map(|(p, _)| p))
            .map(|p| p.entry(CheckpointStatus::InProgress))
            .chain(self.history.iter().cloned())
            .collect();
        history.sort_by_key(|e| std::cmp::Reverse(e.id));
        history.truncate(HISTORY_SIZE);
        CheckpointingStatistics {
            counts: Counts {
                in_progress: (self.pending.len() + self.finalizing.len()) as u64,
                ..self.counts.clone()
            },
            summary: Summary {
                checkpointed_size: self.checkpointed_summary.view(),
                state_size: self.state_summary.view(),
                end_to_end_duration: self.duration_summary.view(),
            },
            latest: self.latest.clone(),
            history,
        }
    }

    /// One checkpoint of [`stats`](Self::stats)' history (pending ones included), with its
    /// subtasks' acknowledgements; `None` once it left the history.
    pub fn checkpoint(&self, id: u64) -> Option<CheckpointEntry> {
        let pending = self
            .pending
            .get(&id)
            .or_else(|| self.finalizing.get(&id).map(|(p, _)| p));
        match pending {
            Some(p) => Some(p.entry(CheckpointStatus::InProgress)),
            None => self.history.iter().find(|e| e.id == id).cloned(),
        }
    }

    /// `GET /jobs/:id/checkpoints/config`.
    pub fn config_view(&self) -> CheckpointConfigInfo {
        let s = &self.settings;
        CheckpointConfigInfo {
            mode: if s.exactly_once {
                "exactly_once"
            } else {
                "at_least_once"
            },
            interval: s.interval.map_or(i64::MAX as u64, ms),
            timeout: ms(s.timeout),
            min_pause: ms(s.min_pause),
            max_concurrent: s.max_concurrent,
            externalization: Externalization {
                enabled: s.retention == Retention::RetainOnCancellation,
                delete_on_cancellation: s.retention == Retention::DeleteOnCancellation,
            },
            checkpoint_storage: if s.dir.is_some() {
                "FileSystemCheckpointStorage"
            } else {
                "JobManagerCheckpointStorage"
            },
            unaligned_checkpoints: false,
            tolerable_failed_checkpoints: s.tolerable_failures,
            aligned_checkpoint_timeout: 0,
            checkpoints_after_tasks_finish: true,
            state_changelog_enabled: false,
        }
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
