//! Coordinator tests: simulated time (plain `u64` ms) and a temporary directory as storage.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::checkpoint::OperatorStateSlice;
use crate::checkpoint::io as file_work;
use crate::checkpoint::metadata::{load_metadata, validate};
use crate::state::{
    KeyedStateHandle, LocalFileStorage, OperatorStateHandle, StateFile, StateStorage,
};

/// Local storage whose `_metadata` writes can be made to fail.
#[derive(Default)]
struct FlakyStorage {
    inner: LocalFileStorage,
    fail_metadata: AtomicBool,
}

impl StateStorage for FlakyStorage {
    fn write(&self, path: &str, data: &[u8]) -> io::Result<()> {
        if self.fail_metadata.load(Ordering::SeqCst) && path.ends_with(METADATA_FILE) {
            return Err(io::Error::other("disk full"));
        }
        self.inner.write(path, data)
    }
    fn upload(&self, from: &Path, path: &str) -> io::Result<u64> {
        self.inner.upload(from, path)
    }
    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn download(&self, path: &str, to: &Path) -> io::Result<()> {
        self.inner.download(path, to)
    }
    fn status(&self, path: &str) -> io::Result<Option<crate::state::FileInfo>> {
        self.inner.status(path)
    }
    fn create_private_dir(&self, path: &str) -> io::Result<()> {
        self.inner.create_private_dir(path)
    }
    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn delete_file(&self, path: &str) -> io::Result<()> {
        self.inner.delete_file(path)
    }
    fn delete_dir(&self, path: &str) -> io::Result<()> {
        self.inner.delete_dir(path)
    }
    fn open_read(&self, path: &str, offset: u64) -> io::Result<Box<dyn std::io::Read + Send>> {
        self.inner.open_read(path, offset)
    }
    fn create_file(&self, path: &str) -> io::Result<Box<dyn crate::state::OutputFile>> {
        self.inner.create_file(path)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn create_dir(&self, path: &str) -> io::Result<()> {
        self.inner.create_dir(path)
    }
}

const JOB: &str = "0123456789abcdef0123456789abcdef";

fn t(vertex: u32, subtask: u32) -> TaskKey {
    TaskKey { vertex, subtask }
}

/// The stable id the tests give the operator of node `node`.
fn id(node: u32) -> crate::common::ids::OperatorId {
    crate::common::ids::OperatorId(0xc0de_0000 + u128::from(node))
}

/// How the metadata names the operator of node `node`.
fn key(node: u32) -> OperatorKey {
    OperatorKey::Id(id(node))
}

fn chained(node: u32) -> super::super::topology::TopologyOperator {
    super::super::topology::TopologyOperator {
        node,
        identity: crate::common::ids::OperatorIdentity {
            id: id(node),
            uid: (node == 1).then(|| "source".to_string()),
        },
    }
}

/// Two source subtasks (operator 1, uid "source") feeding one subtask of a chain of operators
/// 2 and 3.
fn topology() -> Vec<VertexTopology> {
    vec![
        VertexTopology {
            parallelism: 2,
            max_parallelism: 128,
            inputs: vec![],
            operators: vec![chained(1)],
        },
        VertexTopology {
            parallelism: 1,
            max_parallelism: 128,
            inputs: vec![0],
            operators: vec![chained(2), chained(3)],
        },
    ]
}

const ALL: [TaskKey; 3] = [
    TaskKey {
        vertex: 0,
        subtask: 0,
    },
    TaskKey {
        vertex: 0,
        subtask: 1,
    },
    TaskKey {
        vertex: 1,
        subtask: 0,
    },
];

struct Env {
    _tmp: tempfile::TempDir,
    base: String,
    storage: Arc<FlakyStorage>,
}

impl Env {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().to_string_lossy().into_owned();
        Env {
            _tmp: tmp,
            base,
            storage: Arc::new(FlakyStorage::default()),
        }
    }

    fn settings(&self) -> CheckpointSettings {
        CheckpointSettings {
            interval: Some(Duration::from_millis(100)),
            timeout: Duration::from_millis(1000),
            dir: Some(join(&self.base, "checkpoints")),
            ..CheckpointSettings::default()
        }
    }

    fn root(&self) -> String {
        join(&self.base, &format!("checkpoints/{JOB}"))
    }

    fn coordinator(&self, settings: CheckpointSettings) -> Coord {
        Coord {
            inner: CheckpointCoordinator::new(JOB.to_string(), settings, topology()),
            storage: self.storage.clone(),
        }
    }

    fn exists(&self, path: &str) -> bool {
        Path::new(path).exists()
    }

    /// Writes the files a backend would, returning the handle describing them.
    fn keyed(
        &self,
        location: &SnapshotLocation,
        private: &str,
        shared: &[&str],
    ) -> KeyedStateHandle {
        let mut files = Vec::new();
        let data = b"sst-bytes";
        self.storage
            .write(&join(&location.dir, private), data)
            .expect("write private");
        files.push(StateFile {
            path: private.to_string(),
            size: data.len() as u64,
            shared: false,
        });
        for name in shared {
            let shared_dir = location.shared_dir.clone().expect("a checkpoint");
            let path = join(&shared_dir, name);
            if !self.exists(&path) {
                self.storage.write(&path, data).expect("write shared");
            }
            files.push(StateFile {
                path: SnapshotLocation::shared_reference(name),
                size: data.len() as u64,
                shared: true,
            });
        }
        let full = files.iter().map(|f| f.size).sum();
        KeyedStateHandle {
            backend: "rocksdb".into(),
            key_groups: (0, 127),
            files,
            checkpointed_size: data.len() as u64,
            full_size: full,
        }
    }
}

/// The coordinator with its file work carried out at once and in order, as the JobManager's
/// lanes do, and the results fed back.
struct Coord {
    inner: CheckpointCoordinator,
    storage: Arc<FlakyStorage>,
}

impl std::ops::Deref for Coord {
    type Target = CheckpointCoordinator;
    fn deref(&self) -> &CheckpointCoordinator {
        &self.inner
    }
}

impl std::ops::DerefMut for Coord {
    fn deref_mut(&mut self) -> &mut CheckpointCoordinator {
        &mut self.inner
    }
}

impl Coord {
    /// Does the file work among `actions`; returns the others (and those its results gave).
    fn io(&mut self, now: u64, actions: Vec<CheckpointAction>) -> Vec<CheckpointAction> {
        let mut out = Vec::new();
        for action in actions {
            match action {
                CheckpointAction::Storage(StorageWork::WriteMetadata {
                    checkpoint_id,
                    path,
                    bytes,
                }) => {
                    let result = file_work::write_metadata(self.storage.as_ref(), &path, &bytes);
                    let next = self.inner.metadata_written(now, checkpoint_id, result);
                    out.extend(self.io(now, next));
                }
                CheckpointAction::Storage(StorageWork::Discard { dirs, files }) => {
                    file_work::discard(self.storage.as_ref(), &dirs, &files)
                }
                CheckpointAction::Storage(StorageWork::MarkInProgress { dir }) => {
                    file_work::mark_in_progress(self.storage.as_ref(), &dir).expect("marker")
                }
                other => out.push(other),
            }
        }
        out
    }

    fn acknowledge(
        &mut self,
        now: u64,
        task: TaskKey,
        id: u64,
        state: SubtaskState,
    ) -> Vec<CheckpointAction> {
        let actions = self.inner.acknowledge(now, task, id, state);
        self.io(now, actions)
    }

    fn decline(
        &mut self,
        now: u64,
        task: TaskKey,
        id: u64,
        reason: String,
        counts: bool,
    ) -> Vec<CheckpointAction> {
        let actions = self.inner.decline(now, task, id, reason, counts);
        self.io(now, actions)
    }

    fn task_state(&mut self, now: u64, task: TaskKey, phase: TaskPhase) -> Vec<CheckpointAction> {
        let actions = self.inner.task_state(now, task, phase);
        self.io(now, actions)
    }

    fn tick(&mut self, now: u64) -> Vec<CheckpointAction> {
        let actions = self.inner.tick(now);
        self.io(now, actions)
    }

    fn job_reset(&mut self, now: u64) -> Vec<CheckpointAction> {
        let actions = self.inner.job_reset(now);
        self.io(now, actions)
    }

    fn job_terminated(&mut self, now: u64, status: Terminal) -> Vec<CheckpointAction> {
        let actions = self.inner.job_terminated(now, status);
        self.io(now, actions)
    }

    fn trigger_savepoint(
        &mut self,
        now: u64,
        target: Option<String>,
        request_id: String,
    ) -> Result<Vec<CheckpointAction>, String> {
        let actions = self.inner.trigger_savepoint(now, target, request_id)?;
        Ok(self.io(now, actions))
    }

    fn recover_retained(&mut self) -> Result<Vec<u64>, RestoreError> {
        let Some(root) = self.inner.checkpoint_root().map(str::to_string) else {
            return Ok(Vec::new());
        };
        let found = file_work::read_retained(self.storage.as_ref(), &root)?;
        let (ids, actions) = self.inner.adopt_retained(found);
        let now = self.inner.last_now;
        let rest = self.io(now, actions);
        assert!(rest.is_empty(), "{rest:?}");
        Ok(ids)
    }

    fn restore_plan(&mut self) -> Result<Option<RestorePlan>, RestoreError> {
        let candidates = self.inner.restore_candidates();
        let verdicts = file_work::check_candidates(self.storage.as_ref(), &candidates);
        self.inner.restore_plan(verdicts)
    }
}

fn run_all(c: &mut Coord, now: u64) {
    for task in ALL {
        assert!(c.task_state(now, task, TaskPhase::Running).is_empty());
    }
}

fn state(op: u32, element: &[u8], keyed: Option<KeyedStateHandle>) -> SubtaskState {
    SubtaskState {
        operators: BTreeMap::from([(
            op,
            OperatorSubtaskState {
                distribution: Default::default(),
                operator_state: OperatorStateHandle::Inline(vec![element.to_vec()]),
                keyed,
            },
        )]),
    }
}

/// The trigger's (id, location, tasks).
fn trigger_of(actions: &[CheckpointAction]) -> (u64, SnapshotLocation, Vec<TaskKey>) {
    let found = actions.iter().find_map(|a| match a {
        CheckpointAction::Trigger {
            checkpoint_id,
            location,
            tasks,
            ..
        } => Some((*checkpoint_id, location.clone(), tasks.clone())),
        _ => None,
    });
    found.unwrap_or_else(|| panic!("no trigger in {actions:?}"))
}

fn has_fail_job(actions: &[CheckpointAction]) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, CheckpointAction::FailJob { reason } if reason == TOLERABLE_EXCEEDED))
}

/// Acknowledges checkpoint `id` from every task with plain operator state.
fn ack_all(c: &mut Coord, now: u64, id: u64) -> Vec<CheckpointAction> {
    let mut actions = Vec::new();
    for task in ALL {
        let op = if task.vertex == 0 { 1 } else { 2 };
        actions.extend(c.acknowledge(now, task, id, state(op, &[task.subtask as u8], None)));
    }
    actions
}

#[test]
fn periodic_trigger_waits_for_interval_min_pause_and_max_concurrent() {
    let env = Env::new();
    let mut c = env.coordinator(CheckpointSettings {
        min_pause: Duration::from_millis(50),
        ..env.settings()
    });
    run_all(&mut c, 0);
    assert!(c.tick(0).is_empty(), "the first tick starts the clock");
    assert!(c.tick(99).is_empty());
    let (id, location, tasks) = trigger_of(&c.tick(100));
    assert_eq!(id, 1);
    assert_eq!(tasks, vec![t(0, 0), t(0, 1)], "only the sources");
    assert_eq!(location.dir, join(&env.root(), "chk-1"));
    assert_eq!(location.shared_dir, Some(join(&env.root(), "shared")));
    assert_eq!(location.kind, SnapshotKind::Checkpoint);
    assert!(c.tick(200).is_empty(), "one pending at most");
    let done = ack_all(&mut c, 230, 1);
    assert_eq!(
        done,
        vec![CheckpointAction::NotifyComplete {
            checkpoint_id: 1,
            tasks: ALL.to_vec()
        }]
    );
    assert!(c.tick(250).is_empty(), "min pause after completion at 230");
    assert_eq!(trigger_of(&c.tick(280)).0, 2);

    let mut c = env.coordinator(CheckpointSettings {
        max_concurrent: 2,
        ..env.settings()
    });
    run_all(&mut c, 0);
    c.tick(0);
    assert_eq!(trigger_of(&c.tick(100)).0, 1);
    assert!(c.tick(150).is_empty(), "interval since the last trigger");
    assert_eq!(trigger_of(&c.tick(200)).0, 2);
    assert!(c.tick(300).is_empty(), "two pending");
    assert_eq!(c.pending_ids(), vec![1, 2]);
}

/// A pending savepoint holds periodic checkpoints back (their barriers would overtake the
/// savepoint's at some task, which aborts the older one); a pending periodic checkpoint does
/// not hold a savepoint back.
#[test]
fn a_pending_savepoint_holds_periodic_checkpoints_back() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (savepoint, ..) = trigger_of(
        &c.trigger_savepoint(50, Some(join(&env.base, "savepoints")), "r".into())
            .expect("triggered"),
    );
    assert!(c.tick(100).is_empty(), "due, but the savepoint is pending");
    assert!(c.tick(200).is_empty());
    assert_eq!(c.pending_ids(), vec![savepoint]);
    ack_all(&mut c, 220, savepoint);
    let (periodic, ..) = trigger_of(&c.tick(230));
    assert!(periodic > savepoint);
    // The other way round: a savepoint joins a pending periodic checkpoint at once.
    let (other, ..) = trigger_of(
        &c.trigger_savepoint(240, Some(join(&env.base, "savepoints")), "r2".into())
            .expect("triggered"),
    );
    assert_eq!(c.pending_ids(), vec![periodic, other]);
}

#[test]
fn trigger_is_skipped_not_failed_while_tasks_are_not_running() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    c.task_state(0, t(0, 0), TaskPhase::Running);
    c.task_state(0, t(0, 1), TaskPhase::Running);
    c.tick(0);
    assert!(c.tick(100).is_empty(), "v1/0 is still deploying");
    assert_eq!(c.stats().counts.failed, 0);
    assert_eq!(c.stats().counts.total, 0);
    c.task_state(120, t(1, 0), TaskPhase::Running);
    assert_eq!(trigger_of(&c.tick(130)).0, 1, "triggered once all run");
    assert!(
        c.trigger_savepoint(130, Some(env.base.clone()), "r".into())
            .is_ok()
    );

    let mut done = env.coordinator(env.settings());
    for task in ALL {
        done.task_state(0, task, TaskPhase::Finished);
    }
    done.tick(0);
    assert!(done.tick(500).is_empty(), "nothing left to checkpoint");
}

#[test]
fn targets_are_sources_then_tasks_whose_inputs_all_finished() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.task_state(10, t(0, 0), TaskPhase::Finished);
    c.tick(0);
    let (_, _, tasks) = trigger_of(&c.tick(100));
    assert_eq!(tasks, vec![t(0, 1)], "v1/0 still has a running input");
    assert!(
        c.acknowledge(110, t(0, 0), 1, SubtaskState::default())
            .is_empty(),
        "finished tasks are not expected"
    );
    ack_all(&mut c, 120, 1);
    assert_eq!(c.latest_completed().map(|cc| cc.id), Some(1));

    c.task_state(130, t(0, 1), TaskPhase::Finished);
    let (id, _, tasks) = trigger_of(&c.tick(300));
    assert_eq!(tasks, vec![t(1, 0)], "all its inputs finished");
    let actions = c.acknowledge(310, t(1, 0), id, state(2, b"x", None));
    assert_eq!(
        actions,
        vec![CheckpointAction::NotifyComplete {
            checkpoint_id: id,
            tasks: vec![t(1, 0)]
        }]
    );
}

#[test]
fn tasks_left_without_a_barrier_by_producers_finishing_are_triggered_once() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, location, tasks) = trigger_of(&c.tick(100));
    assert_eq!(tasks, vec![t(0, 0), t(0, 1)]);
    // Both sources end before reading the trigger: no barrier reaches v1/0, whose channels end.
    assert!(c.task_state(110, t(0, 0), TaskPhase::Finished).is_empty());
    let actions = c.task_state(120, t(0, 1), TaskPhase::Finished);
    let (again, at, tasks) = trigger_of(&actions);
    assert_eq!((again, at, tasks), (id, location, vec![t(1, 0)]));
    assert!(
        c.task_state(125, t(0, 1), TaskPhase::Finished).is_empty(),
        "triggered once"
    );
    let actions = c.acknowledge(130, t(1, 0), id, state(2, b"all", None));
    assert!(matches!(
        &actions[..],
        [CheckpointAction::NotifyComplete { checkpoint_id, .. }] if *checkpoint_id == id
    ));

    // A consumer that acknowledged already, or that was triggered itself, is left alone.
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, _, _) = trigger_of(&c.tick(100));
    c.acknowledge(105, t(0, 0), id, state(1, b"a", None));
    c.acknowledge(106, t(0, 1), id, state(1, b"b", None));
    c.acknowledge(107, t(1, 0), id, state(2, b"c", None));
    assert_eq!(c.latest_completed().map(|cc| cc.id), Some(id));
    c.task_state(110, t(0, 0), TaskPhase::Finished);
    let (next, _, tasks) = trigger_of(&c.tick(200));
    assert_eq!(tasks, vec![t(0, 1)]);
    c.acknowledge(310, t(1, 0), next, state(2, b"d", None));
    let actions = c.task_state(320, t(0, 1), TaskPhase::Finished);
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, CheckpointAction::Trigger { .. })),
        "{actions:?}"
    );
}

#[test]
fn completion_writes_versioned_metadata_and_notifies() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, location, _) = trigger_of(&c.tick(100));
    let keyed = env.keyed(&location, "v1-0.state", &["a.sst"]);
    assert!(
        c.acknowledge(110, t(0, 0), id, state(1, b"off=1", None))
            .is_empty()
    );
    assert!(
        c.acknowledge(120, t(0, 1), id, state(1, b"off=2", None))
            .is_empty()
    );
    assert_eq!(c.stats().counts.in_progress, 1);
    assert_eq!(c.stats().history[0].num_acknowledged_subtasks, 2);
    let actions = c.acknowledge(150, t(1, 0), id, state(2, b"", Some(keyed.clone())));
    assert!(matches!(
        &actions[..],
        [CheckpointAction::NotifyComplete {
            checkpoint_id: 1,
            ..
        }]
    ));

    let m = load_metadata(env.storage.as_ref(), &location.dir).expect("metadata");
    assert_eq!((m.version, m.checkpoint_id, m.timestamp), (3, 1, 100));
    assert_eq!(m.job_id, JOB);
    assert!(!m.is_savepoint);
    assert_eq!(m.operators[&key(1)].parallelism, 2);
    assert_eq!(m.operators[&key(1)].max_parallelism, 128);
    // Recorded under the stable id, with the uid; node indices do not reach the metadata.
    assert_eq!(m.operators[&key(1)].uid.as_deref(), Some("source"));
    assert_eq!(m.operators[&key(2)].uid, None);
    assert_eq!(
        m.operators[&key(1)].subtasks[&1].operator_state,
        OperatorStateHandle::Inline(vec![b"off=2".to_vec()])
    );
    assert_eq!(m.operators[&key(2)].subtasks[&0].keyed, Some(keyed));
    validate(env.storage.as_ref(), &location.dir, &m).expect("files there");

    let latest = c.latest_completed().expect("completed");
    assert_eq!((latest.id, latest.is_savepoint), (1, false));
    assert_eq!(latest.metadata_dir, location.dir);
    let stats = c.stats();
    assert_eq!(stats.counts.completed, 1);
    assert_eq!(stats.history[0].status, CheckpointStatus::Completed);
    assert_eq!(stats.history[0].end_to_end_duration, 50);
    assert_eq!(
        stats.history[0].external_path.as_deref(),
        Some(location.dir.as_str())
    );
    assert_eq!(stats.summary.end_to_end_duration.max, 50);
}

#[test]
fn a_task_finishing_before_its_ack_counts_as_an_empty_ack() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, location, _) = trigger_of(&c.tick(100));
    c.acknowledge(110, t(0, 0), id, state(1, b"a", None));
    c.acknowledge(120, t(1, 0), id, state(2, b"b", None));
    let actions = c.task_state(130, t(0, 1), TaskPhase::Finished);
    assert_eq!(
        actions,
        vec![CheckpointAction::NotifyComplete {
            checkpoint_id: id,
            tasks: vec![t(0, 0), t(1, 0)]
        }],
        "the finished task is not notified"
    );
    assert!(
        c.acknowledge(140, t(0, 1), id, state(1, b"late", None))
            .is_empty()
    );
    let m = load_metadata(env.storage.as_ref(), &location.dir).expect("metadata");
    assert_eq!(
        m.operators[&key(1)].subtasks[&1],
        OperatorSubtaskState::default(),
        "present but empty"
    );
}

#[test]
fn timeouts_fail_the_job_beyond_the_tolerable_count_and_completion_resets_it() {
    let env = Env::new();
    let mut c = env.coordinator(CheckpointSettings {
        tolerable_failures: 1,
        ..env.settings()
    });
    run_all(&mut c, 0);
    c.tick(0);
    let (id, location, _) = trigger_of(&c.tick(100));
    c.acknowledge(150, t(0, 0), id, state(1, b"a", None));
    assert!(
        c.tick(1099).is_empty(),
        "not expired yet, one pending at most"
    );
    // Expires checkpoint 1; the next one is due at once.
    let actions = c.tick(1100);
    assert!(actions.contains(&CheckpointAction::NotifyAborted {
        checkpoint_id: 1,
        tasks: ALL.to_vec()
    }));
    assert!(!has_fail_job(&actions), "one failure is tolerated");
    assert!(!env.exists(&location.dir));
    let stats = c.stats();
    assert_eq!(stats.counts.failed, 1);
    let failed = stats.latest.failed.expect("failed");
    assert_eq!(failed.failure_message.as_deref(), Some(EXPIRED));
    assert_eq!(failed.failure_timestamp, Some(1100));
    assert_eq!(failed.num_acknowledged_subtasks, 1);

    // Completion resets the count: fail, complete, fail is tolerated.
    let (id, _, _) = trigger_of(&actions);
    assert_eq!(id, 2);
    ack_all(&mut c, 1210, id);
    let (id, _, _) = trigger_of(&c.tick(1310));
    let actions = c.tick(2310);
    assert!(actions.contains(&CheckpointAction::NotifyAborted {
        checkpoint_id: id,
        tasks: ALL.to_vec()
    }));
    assert!(!has_fail_job(&actions));
    // A second consecutive failure exceeds the threshold.
    trigger_of(&actions);
    assert!(has_fail_job(&c.tick(3310)));
}

#[test]
fn declines_fail_the_checkpoint_and_count_only_when_asked() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, _, _) = trigger_of(&c.tick(100));
    let actions = c.decline(110, t(0, 1), id, "not ready".into(), false);
    assert_eq!(
        actions,
        vec![CheckpointAction::NotifyAborted {
            checkpoint_id: id,
            tasks: ALL.to_vec()
        }]
    );
    let message = c.stats().latest.failed.and_then(|f| f.failure_message);
    assert_eq!(
        message.as_deref(),
        Some("Task v0/1 declined checkpoint 1: not ready")
    );
    assert!(
        c.acknowledge(120, t(0, 0), id, SubtaskState::default())
            .is_empty(),
        "late ack ignored"
    );
    assert!(
        c.decline(120, t(0, 0), id, "again".into(), true).is_empty(),
        "late decline ignored"
    );

    let (id, _, _) = trigger_of(&c.tick(200));
    let actions = c.decline(210, t(1, 0), id, "io error".into(), true);
    assert!(has_fail_job(&actions), "tolerable failures default to 0");
}

#[test]
fn a_metadata_write_failure_fails_the_checkpoint() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, _, _) = trigger_of(&c.tick(100));
    env.storage.fail_metadata.store(true, Ordering::SeqCst);
    let actions = ack_all(&mut c, 110, id);
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, CheckpointAction::NotifyAborted { .. }))
    );
    assert!(has_fail_job(&actions));
    assert!(c.latest_completed().is_none());
    let message = c
        .stats()
        .latest
        .failed
        .and_then(|f| f.failure_message)
        .unwrap_or_default();
    assert!(
        message.contains("_metadata") && message.contains("disk full"),
        "{message}"
    );
}

#[test]
fn retention_keeps_num_retained_and_deletes_only_unreferenced_shared_files() {
    let env = Env::new();
    let mut c = env.coordinator(CheckpointSettings {
        num_retained: 2,
        ..env.settings()
    });
    run_all(&mut c, 0);
    c.tick(0);
    let shared = |name: &str| join(&env.root(), &format!("shared/{name}"));
    let mut dirs = Vec::new();
    let files: [&[&str]; 4] = [&["a", "b"], &["b", "c"], &["c", "d"], &["d"]];
    for (i, names) in files.iter().enumerate() {
        let now = 100 * (i as u64 + 1);
        let (id, location, _) = trigger_of(&c.tick(now));
        let keyed = env.keyed(&location, "private", names);
        c.acknowledge(now + 1, t(0, 0), id, state(1, b"", None));
        c.acknowledge(now + 1, t(0, 1), id, state(1, b"", None));
        let done = c.acknowledge(now + 2, t(1, 0), id, state(2, b"", Some(keyed)));
        assert!(matches!(
            &done[..],
            [CheckpointAction::NotifyComplete { .. }]
        ));
        dirs.push(location.dir);
        if i == 2 {
            assert_eq!(c.retained().map(|cc| cc.id).collect::<Vec<_>>(), vec![2, 3]);
            assert!(!env.exists(&dirs[0]), "chk-1 discarded");
            assert!(!env.exists(&shared("a")), "only chk-1 used a");
            assert!(env.exists(&shared("b")), "chk-2 still uses b");
        }
    }
    assert_eq!(c.retained().map(|cc| cc.id).collect::<Vec<_>>(), vec![3, 4]);
    assert!(!env.exists(&dirs[1]));
    assert!(!env.exists(&shared("b")));
    assert!(env.exists(&shared("c")), "chk-3 still uses c");
    assert!(env.exists(&shared("d")));
    assert!(env.exists(&join(&dirs[3], METADATA_FILE)));
}

#[test]
fn an_aborted_checkpoint_deletes_its_files_but_not_shared_files_retained_ones_use() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, location, _) = trigger_of(&c.tick(100));
    let keyed = env.keyed(&location, "private", &["old"]);
    c.acknowledge(101, t(0, 0), id, state(1, b"", None));
    c.acknowledge(101, t(0, 1), id, state(1, b"", None));
    c.acknowledge(102, t(1, 0), id, state(2, b"", Some(keyed)));

    let (id, location, _) = trigger_of(&c.tick(200));
    let keyed = env.keyed(&location, "private", &["old", "new"]);
    c.acknowledge(201, t(1, 0), id, state(2, b"", Some(keyed)));
    assert!(env.exists(&location.dir));
    c.decline(202, t(0, 0), id, "failed".into(), false);
    assert!(!env.exists(&location.dir), "its directory is gone");
    assert!(
        !env.exists(&join(&env.root(), "shared/new")),
        "only it used new"
    );
    assert!(
        env.exists(&join(&env.root(), "shared/old")),
        "chk-1 uses old"
    );
}

/// Operator state above the memory threshold lives in a file of its checkpoint: the stats count
/// the file's bytes, a restore hands out (file, range) slices without reading the file, and the
/// file goes with its checkpoint when that is subsumed or aborted, never while referenced.
#[test]
fn operator_state_files_count_in_stats_and_go_with_their_checkpoint() {
    use crate::state::operator_state;
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let storage = env.storage.clone();
    // A source subtask's snapshot: 3 elements of 10 bytes, over a threshold of 16 bytes.
    let file_state = |location: &SnapshotLocation, subtask: u32| {
        let elements: Vec<Vec<u8>> = (0..3).map(|e| vec![subtask as u8 * 10 + e; 10]).collect();
        let name = format!(
            "op1-sub{subtask}-att0-chk{}-operator",
            location.checkpoint_id
        );
        let handle =
            operator_state::snapshot(elements, 16, location, storage.as_ref(), &name).unwrap();
        let file = handle.file().expect("over the threshold: a file").clone();
        let state = SubtaskState {
            operators: BTreeMap::from([(
                1,
                OperatorSubtaskState {
                    distribution: Default::default(),
                    operator_state: handle,
                    keyed: None,
                },
            )]),
        };
        (state, join(&location.dir, &file.path), file.size)
    };

    let (id1, loc1, _) = trigger_of(&c.tick(100));
    let (s0, file1, size) = file_state(&loc1, 0);
    c.acknowledge(101, t(0, 0), id1, s0);
    c.acknowledge(101, t(0, 1), id1, state(1, b"abcd", None));
    c.acknowledge(102, t(1, 0), id1, state(2, b"", None));
    let entry = c.checkpoint(id1).expect("recorded");
    assert_eq!(entry.checkpointed_size, size + 4, "the file's bytes count");
    assert_eq!(entry.state_size, size + 4);
    let ack = entry.subtasks[0].ack.as_ref().expect("acknowledged");
    assert_eq!((ack.checkpointed_size, ack.state_size), (size, size));
    let m = load_metadata(env.storage.as_ref(), &loc1.dir).expect("metadata");
    assert_eq!(
        m.operators[&key(1)].subtasks[&0]
            .operator_state
            .file()
            .map(|f| f.size),
        Some(size)
    );

    // Checkpoint 2, then 3 aborted: chk-1's file goes when chk-2 subsumes it, chk-3's with it.
    let (id2, loc2, _) = trigger_of(&c.tick(200));
    let (s0, file2, _) = file_state(&loc2, 0);
    let (s1, file2b, _) = file_state(&loc2, 1);
    c.acknowledge(201, t(0, 0), id2, s0);
    c.acknowledge(201, t(0, 1), id2, s1);
    assert!(env.exists(&file1), "chk-1 is still the latest completed");
    c.acknowledge(202, t(1, 0), id2, state(2, b"", None));
    assert!(!env.exists(&file1), "discarded with chk-1");
    assert!(env.exists(&file2) && env.exists(&file2b));
    let (id3, loc3, _) = trigger_of(&c.tick(300));
    let (s0, file3, _) = file_state(&loc3, 0);
    c.acknowledge(301, t(0, 0), id3, s0);
    c.decline(302, t(0, 1), id3, "failed".into(), false);
    assert!(!env.exists(&file3), "discarded with the aborted chk-3");
    assert!(env.exists(&file2), "chk-2 still references it");

    // A restore at the same parallelism hands each subtask its own file, unread.
    let plan = c.restore_plan().expect("ok").expect("a plan");
    assert_eq!(plan.checkpoint_id, id2);
    let slices = &plan.tasks[&t(0, 1)].operators[&1].operator_state;
    let [OperatorStateSlice::File { file, first, count }] = &slices[..] else {
        panic!("a file slice: {slices:?}");
    };
    let elements = operator_state::read(
        env.storage.as_ref(),
        &plan.metadata_dir,
        file,
        *first,
        *count,
    )
    .expect("read");
    assert_eq!(elements, (10..13).map(|e| vec![e; 10]).collect::<Vec<_>>());
}

#[test]
fn savepoints_are_named_self_contained_and_not_retained() {
    let env = Env::new();
    // Periodic checkpoints off and no checkpoint directory: savepoints still work.
    let mut c = env.coordinator(CheckpointSettings::default());
    run_all(&mut c, 0);
    assert_eq!(
        c.trigger_savepoint(0, None, "r0".into()),
        Err(NO_SAVEPOINT_DIR.to_string())
    );
    let target = join(&env.base, "savepoints");
    let actions = c
        .trigger_savepoint(10, Some(target.clone()), "r1".into())
        .expect("triggered");
    let (id, location, tasks) = trigger_of(&actions);
    assert_eq!(tasks, vec![t(0, 0), t(0, 1)]);
    assert_eq!(location.kind, SnapshotKind::Savepoint);
    assert_eq!(location.shared_dir, None);
    let name = location
        .dir
        .strip_prefix(&format!("{target}/savepoint-012345-"))
        .unwrap_or_else(|| panic!("{} is not a savepoint path", location.dir));
    assert_eq!(name.len(), 12);
    assert!(
        name.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );

    let keyed = env.keyed(&location, "own.sst", &[]);
    c.acknowledge(20, t(0, 0), id, state(1, b"a", None));
    c.acknowledge(20, t(0, 1), id, state(1, b"b", None));
    let actions = c.acknowledge(30, t(1, 0), id, state(2, b"", Some(keyed)));
    assert!(actions.contains(&CheckpointAction::SavepointDone {
        request_id: "r1".into(),
        result: Ok(location.dir.clone())
    }));
    let m = load_metadata(env.storage.as_ref(), &location.dir).expect("metadata");
    assert!(m.is_savepoint);
    validate(env.storage.as_ref(), &location.dir, &m).expect("self-contained");
    assert_eq!(c.retained().count(), 0, "savepoints are not retained");
    assert_eq!(c.savepoint_paths(), std::slice::from_ref(&location.dir));
    assert_eq!(c.latest_completed().map(|cc| cc.is_savepoint), Some(true));
    let stats = c.stats();
    assert_eq!(stats.latest.savepoint.map(|s| s.id), Some(id));
    assert!(stats.latest.completed.is_none());

    // A savepoint that references the shared directory fails.
    let target = join(&env.base, "savepoints");
    let (id, location, _) = trigger_of(
        &c.trigger_savepoint(50, Some(target), "r3".into())
            .expect("triggered"),
    );
    let bad = KeyedStateHandle {
        backend: "rocksdb".into(),
        key_groups: (0, 127),
        files: vec![StateFile {
            path: "../shared/s".into(),
            size: 1,
            shared: true,
        }],
        checkpointed_size: 1,
        full_size: 1,
    };
    c.acknowledge(51, t(0, 0), id, state(1, b"", None));
    c.acknowledge(51, t(0, 1), id, state(1, b"", None));
    let actions = c.acknowledge(52, t(1, 0), id, state(2, b"", Some(bad)));
    let failed = actions.iter().find_map(|a| match a {
        CheckpointAction::SavepointDone {
            request_id,
            result: Err(e),
        } if request_id == "r3" => Some(e.clone()),
        _ => None,
    });
    assert!(
        failed.is_some_and(|e| e.contains("not self-contained")),
        "{actions:?}"
    );
    assert!(!has_fail_job(&actions), "savepoint failures do not count");
    assert!(!env.exists(&location.dir));

    c.task_state(60, t(1, 0), TaskPhase::Other);
    assert!(
        c.trigger_savepoint(60, Some(env.base.clone()), "r4".into())
            .is_err()
    );
}

#[test]
fn job_reset_aborts_everything_pending_without_counting() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (cid, location, _) = trigger_of(&c.tick(100));
    let (sid, _, _) = trigger_of(
        &c.trigger_savepoint(110, Some(env.base.clone()), "sp".into())
            .expect("triggered"),
    );
    c.acknowledge(120, t(0, 0), cid, state(1, b"", None));
    let actions = c.job_reset(130);
    assert!(actions.contains(&CheckpointAction::NotifyAborted {
        checkpoint_id: cid,
        tasks: ALL.to_vec()
    }));
    assert!(actions.contains(&CheckpointAction::NotifyAborted {
        checkpoint_id: sid,
        tasks: ALL.to_vec()
    }));
    assert!(actions.contains(&CheckpointAction::SavepointDone {
        request_id: "sp".into(),
        result: Err(ABORTED_RESTART.to_string())
    }));
    assert!(!has_fail_job(&actions));
    assert!(c.pending_ids().is_empty());
    assert!(!env.exists(&location.dir));
    assert!(c.tick(1000).is_empty(), "tasks are being redeployed");
    run_all(&mut c, 1100);
    let (id, _, _) = trigger_of(&c.tick(1100));
    assert_eq!(id, 3, "ids are never reused");
}

/// Completes checkpoints with one keyed handle each; returns their locations.
fn complete_checkpoints(env: &Env, c: &mut Coord, n: u64) -> Vec<SnapshotLocation> {
    run_all(c, 0);
    c.tick(0);
    (1..=n)
        .map(|i| {
            let (id, location, _) = trigger_of(&c.tick(100 * i));
            let keyed = env.keyed(&location, "private", &[&format!("s{i}")]);
            c.acknowledge(100 * i + 1, t(0, 0), id, state(1, b"0", None));
            c.acknowledge(100 * i + 1, t(0, 1), id, state(1, b"1", None));
            c.acknowledge(100 * i + 2, t(1, 0), id, state(2, b"", Some(keyed)));
            location
        })
        .collect()
}

#[test]
fn restore_plan_falls_back_to_the_previous_checkpoint_and_names_bad_files() {
    let env = Env::new();
    let mut c = env.coordinator(CheckpointSettings {
        num_retained: 2,
        ..env.settings()
    });
    assert_eq!(c.restore_plan().expect("nothing yet"), None);
    let locations = complete_checkpoints(&env, &mut c, 2);
    let plan = c.restore_plan().expect("ok").expect("a plan");
    assert_eq!(plan.checkpoint_id, 2);
    assert_eq!(plan.tasks.len(), 3);
    assert_eq!(
        plan.tasks[&t(0, 1)].operators[&1].operator_state,
        vec![OperatorStateSlice::Inline(vec![b"1".to_vec()])]
    );
    assert_eq!(plan.tasks[&t(1, 0)].metadata_dir, locations[1].dir);

    // The newest lost a shared file: the previous one is restored.
    let missing = join(&env.root(), "shared/s2");
    env.storage.delete_file(&missing).expect("delete");
    let plan = c.restore_plan().expect("ok").expect("a plan");
    assert_eq!(plan.checkpoint_id, 1);
    assert_eq!(c.stats().counts.restored, 2);
    assert_eq!(c.stats().latest.restored.map(|r| r.id), Some(1));

    // Now the remaining one is truncated: the error names the file.
    let truncated = join(&locations[0].dir, "private");
    env.storage.write(&truncated, b"x").expect("truncate");
    let err = c.restore_plan().expect_err("nothing valid");
    assert!(matches!(err, RestoreError::FileSize { .. }), "{err}");
    assert!(err.to_string().contains(&truncated), "{err}");
}

#[test]
fn restore_plan_errs_when_no_retained_checkpoint_is_valid() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    complete_checkpoints(&env, &mut c, 1);
    let missing = join(&env.root(), "shared/s1");
    env.storage.delete_file(&missing).expect("delete");
    let err = c.restore_plan().expect_err("must not start empty");
    assert!(matches!(err, RestoreError::FileMissing { .. }), "{err}");
    assert!(err.to_string().contains(&missing), "{err}");
}

/// A savepoint (id 1) taken by an earlier run of the job, with every task acknowledged.
fn savepoint_of_an_earlier_run(env: &Env) -> SnapshotLocation {
    let mut old = env.coordinator(CheckpointSettings::default());
    run_all(&mut old, 0);
    let target = join(&env.base, "sp");
    let (id, location, _) = trigger_of(
        &old.trigger_savepoint(0, Some(target), "r".into())
            .expect("ok"),
    );
    assert_eq!(id, 1);
    ack_all(&mut old, 5, id);
    location
}

#[test]
fn an_initial_savepoint_is_restored_until_a_checkpoint_completes() {
    let env = Env::new();
    let location = savepoint_of_an_earlier_run(&env);
    let mut metadata =
        load_metadata(env.storage.as_ref(), &join(&location.dir, METADATA_FILE)).expect("load");
    // As if the old run had taken 40 checkpoints before the savepoint.
    metadata.checkpoint_id = 41;

    let mut c = env.coordinator(env.settings());
    c.set_initial_restore(location.dir.clone(), metadata);
    let plan = c.restore_plan().expect("ok").expect("plan");
    assert!(plan.is_savepoint);
    assert_eq!(plan.checkpoint_id, 41);
    assert_eq!(
        plan.tasks[&t(0, 0)].operators[&1].operator_state,
        vec![OperatorStateSlice::Inline(vec![vec![0u8]])]
    );
    run_all(&mut c, 0);
    c.tick(0);
    let (id, _, _) = trigger_of(&c.tick(100));
    assert_eq!(id, 42, "ids continue above the savepoint's");
    ack_all(&mut c, 110, id);
    let plan = c.restore_plan().expect("ok").expect("plan");
    assert_eq!((plan.checkpoint_id, plan.is_savepoint), (42, false));
}

/// An initial savepoint with state of an operator the job lacks: every (re)start refuses it,
/// unless the job allows non-restored state; then the rest restores.
#[test]
fn state_the_job_lacks_is_refused_at_every_restart_unless_allowed() {
    let env = Env::new();
    let location = savepoint_of_an_earlier_run(&env);
    let mut metadata =
        load_metadata(env.storage.as_ref(), &join(&location.dir, METADATA_FILE)).expect("load");
    // The old program's source had another uid: the new one has no operator of that id.
    let state = metadata
        .operators
        .remove(&key(1))
        .expect("the source's state");
    let gone = OperatorKey::Id(crate::common::ids::OperatorId::from_uid("old-source"));
    metadata.operators.insert(
        gone,
        OperatorMetadata {
            uid: Some("old-source".into()),
            ..state
        },
    );
    let mut strict = env.coordinator(env.settings());
    strict.set_initial_restore(location.dir.clone(), metadata.clone());
    let err = strict.restore_plan().expect_err("refused");
    assert!(
        matches!(&err, RestoreError::OperatorNotMapped { operator, .. } if *operator == gone),
        "{err}"
    );
    assert!(err.to_string().contains("(uid \"old-source\")"), "{err}");

    let mut lenient = env.coordinator(CheckpointSettings {
        allow_non_restored_state: true,
        ..env.settings()
    });
    lenient.set_initial_restore(location.dir.clone(), metadata);
    for _ in 0..2 {
        let plan = lenient.restore_plan().expect("ok").expect("plan");
        assert!(
            plan.tasks[&t(0, 0)].operators.is_empty(),
            "the source starts empty"
        );
        assert!(plan.tasks[&t(1, 0)].operators.contains_key(&2));
    }
}

#[test]
fn a_restored_job_keeps_the_key_hash_its_state_was_written_with() {
    let env = Env::new();
    let location = savepoint_of_an_earlier_run(&env);
    let file = join(&location.dir, METADATA_FILE);
    // A fresh job's savepoint names the current function.
    let written = load_metadata(env.storage.as_ref(), &file).expect("load");
    assert_eq!(written.key_hash, KeyHash::CURRENT);
    // Metadata written before the hash was recorded has no such field: FNV-1a.
    let mut json: serde_json::Value =
        serde_json::from_slice(&env.storage.read(&file).expect("read")).expect("json");
    assert!(
        json.as_object_mut()
            .expect("object")
            .remove("key_hash")
            .is_some()
    );
    env.storage
        .write(&file, &serde_json::to_vec(&json).expect("json"))
        .expect("write");
    let legacy = load_metadata(env.storage.as_ref(), &file).expect("load");
    assert_eq!(legacy.key_hash, KeyHash::Fnv1a);

    let mut c = env.coordinator(env.settings());
    assert_eq!(c.key_hash(), KeyHash::CURRENT, "a fresh job");
    c.set_initial_restore(location.dir.clone(), legacy);
    c.restore_plan().expect("ok").expect("plan");
    assert_eq!(
        c.key_hash(),
        KeyHash::Fnv1a,
        "deployments hash as the savepoint did"
    );
    // The job's own checkpoints record it, so later restores keep it too.
    run_all(&mut c, 0);
    c.tick(0);
    let (id, location, _) = trigger_of(&c.tick(100));
    ack_all(&mut c, 110, id);
    let next = load_metadata(env.storage.as_ref(), &location.dir).expect("load");
    assert_eq!(next.key_hash, KeyHash::Fnv1a);
}

#[test]
fn job_termination_deletes_checkpoints_per_retention() {
    let cases = [
        (Retention::DeleteOnCancellation, Terminal::Finished, false),
        (Retention::DeleteOnCancellation, Terminal::Canceled, false),
        (Retention::DeleteOnCancellation, Terminal::Failed, true),
        (Retention::RetainOnCancellation, Terminal::Finished, false),
        (Retention::RetainOnCancellation, Terminal::Canceled, true),
        (Retention::RetainOnCancellation, Terminal::Failed, true),
    ];
    for (retention, status, kept) in cases {
        let env = Env::new();
        let mut c = env.coordinator(CheckpointSettings {
            retention,
            ..env.settings()
        });
        let locations = complete_checkpoints(&env, &mut c, 1);
        let (pending, _, _) = trigger_of(&c.tick(1000));
        let actions = c.job_terminated(1001, status);
        assert!(actions.iter().any(|a| matches!(a, CheckpointAction::NotifyAborted { checkpoint_id, .. } if *checkpoint_id == pending)));
        assert!(!has_fail_job(&actions));
        assert_eq!(
            env.exists(&join(&locations[0].dir, METADATA_FILE)),
            kept,
            "{retention:?} {status:?}"
        );
        assert_eq!(env.exists(&env.root()), kept, "{retention:?} {status:?}");
    }
}

#[test]
fn stats_and_config_use_flinks_field_names() {
    let env = Env::new();
    let mut c = env.coordinator(CheckpointSettings {
        retention: Retention::RetainOnCancellation,
        tolerable_failures: 3,
        ..env.settings()
    });
    complete_checkpoints(&env, &mut c, 2);
    let (id, _, _) = trigger_of(&c.tick(1000));
    c.decline(1010, t(0, 0), id, "x".into(), true);
    c.tick(1100);
    let stats = serde_json::to_value(c.stats()).expect("json");
    assert_eq!(stats["counts"]["total"], 4);
    assert_eq!(stats["counts"]["completed"], 2);
    assert_eq!(stats["counts"]["failed"], 1);
    assert_eq!(stats["counts"]["in_progress"], 1);
    assert_eq!(stats["counts"]["restored"], 0);
    for key in ["checkpointed_size", "state_size", "end_to_end_duration"] {
        for f in ["min", "max", "avg"] {
            assert!(stats["summary"][key][f].is_u64(), "{key}.{f}");
        }
    }
    assert_eq!(stats["summary"]["end_to_end_duration"]["max"], 2);
    let history = stats["history"].as_array().expect("array");
    let ids: Vec<u64> = history.iter().filter_map(|h| h["id"].as_u64()).collect();
    assert_eq!(ids, vec![4, 3, 2, 1], "most recent first");
    assert_eq!(history[0]["status"], "IN_PROGRESS");
    assert_eq!(history[1]["status"], "FAILED");
    assert_eq!(
        history[1]["failure_message"],
        "Task v0/0 declined checkpoint 3: x"
    );
    assert_eq!(history[2]["status"], "COMPLETED");
    assert!(
        history[2]["external_path"]
            .as_str()
            .is_some_and(|p| p.ends_with("chk-2"))
    );
    for key in [
        "is_savepoint",
        "trigger_timestamp",
        "latest_ack_timestamp",
        "checkpointed_size",
        "state_size",
        "end_to_end_duration",
        "num_subtasks",
        "num_acknowledged_subtasks",
    ] {
        assert!(!history[2][key].is_null(), "{key}");
    }
    assert_eq!(history[2]["num_subtasks"], 3);
    assert_eq!(stats["latest"]["completed"]["id"], 2);
    assert_eq!(stats["latest"]["failed"]["id"], 3);
    assert!(stats["latest"]["savepoint"].is_null());

    let config = serde_json::to_value(c.config_view()).expect("json");
    assert_eq!(config["mode"], "exactly_once");
    assert_eq!(config["interval"], 100);
    assert_eq!(config["timeout"], 1000);
    assert_eq!(config["min_pause"], 0);
    assert_eq!(config["max_concurrent"], 1);
    assert_eq!(config["externalization"]["enabled"], true);
    assert_eq!(config["externalization"]["delete_on_cancellation"], false);
    assert_eq!(config["tolerable_failed_checkpoints"], 3);
    assert_eq!(config["checkpoint_storage"], "FileSystemCheckpointStorage");

    let off = env.coordinator(CheckpointSettings::default());
    let config = serde_json::to_value(off.config_view()).expect("json");
    assert_eq!(config["interval"], i64::MAX);
    assert_eq!(config["externalization"]["enabled"], false);
}

#[test]
fn history_is_bounded() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    complete_checkpoints(&env, &mut c, 15);
    let stats = c.stats();
    assert_eq!(stats.history.len(), HISTORY_SIZE);
    assert_eq!(stats.history[0].id, 15);
    assert_eq!(stats.counts.completed, 15);
}

#[test]
fn a_new_coordinator_recovers_the_retained_checkpoints_of_its_job() {
    let env = Env::new();
    let settings = CheckpointSettings {
        num_retained: 2,
        ..env.settings()
    };
    let mut old = env.coordinator(settings.clone());
    let locations = complete_checkpoints(&env, &mut old, 3);
    // A checkpoint that never completed: files but no _metadata.
    let partial = join(&env.root(), "chk-5");
    env.storage
        .write(&join(&partial, "private"), b"x")
        .expect("write");

    let mut c = env.coordinator(CheckpointSettings {
        num_retained: 1,
        ..settings
    });
    assert_eq!(c.recover_retained().expect("recovered"), vec![3]);
    assert!(
        !env.exists(&locations[1].dir),
        "beyond num_retained: discarded"
    );
    assert!(!env.exists(&join(&env.root(), "shared/s2")));
    assert!(env.exists(&join(&env.root(), "shared/s3")));
    let plan = c.restore_plan().expect("ok").expect("plan");
    assert_eq!(plan.checkpoint_id, 3);
    run_all(&mut c, 0);
    c.tick(0);
    assert_eq!(trigger_of(&c.tick(100)).0, 6, "ids continue above chk-5");

    let mut none = env.coordinator(CheckpointSettings::default());
    assert!(none.recover_retained().expect("no dir").is_empty());
}

#[test]
fn in_progress_entries_report_no_ack_time_before_the_first_ack() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, _, _) = trigger_of(&c.tick(100));
    let entry = &c.stats().history[0];
    assert_eq!(
        (entry.latest_ack_timestamp, entry.end_to_end_duration),
        (0, 0)
    );
    c.acknowledge(130, t(0, 0), id, state(1, b"", None));
    let entry = &c.stats().history[0];
    assert_eq!(
        (entry.latest_ack_timestamp, entry.end_to_end_duration),
        (130, 30)
    );
    assert_eq!(entry.status, CheckpointStatus::InProgress);
}

#[derive(Clone, Debug)]
enum Op {
    Tick(u64),
    Ack {
        which: usize,
        task: usize,
        shared: Vec<u8>,
    },
    Decline {
        which: usize,
    },
    Savepoint,
    Reset,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (0u64..300).prop_map(Op::Tick),
        6 => (0usize..4, 0usize..3, proptest::collection::vec(0u8..6, 0..4))
            .prop_map(|(which, task, shared)| Op::Ack { which, task, shared }),
        1 => (0usize..4).prop_map(|which| Op::Decline { which }),
        1 => Just(Op::Savepoint),
        1 => Just(Op::Reset),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// Whatever the interleaving of triggers, acks, declines, expiries, savepoints and
    /// failovers: at most `num_retained` checkpoints are kept, at most `max_concurrent` periodic
    /// ones are pending, and every file a retained checkpoint references still exists with its
    /// size (reference counting never deletes a file in use).
    #[test]
    fn retained_checkpoints_stay_restorable_under_any_interleaving(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        let env = Env::new();
        let mut c = env.coordinator(CheckpointSettings {
            num_retained: 2,
            max_concurrent: 2,
            tolerable_failures: 1000,
            timeout: Duration::from_millis(500),
            ..env.settings()
        });
        let mut locations: BTreeMap<u64, SnapshotLocation> = BTreeMap::new();
        let mut now = 0;
        run_all(&mut c, now);
        c.tick(now);
        for op in ops {
            let mut actions = Vec::new();
            match op {
                Op::Tick(advance) => {
                    now += advance;
                    actions = c.tick(now);
                }
                Op::Ack { which, task, shared } => {
                    // One task at a time, so pending checkpoints hold partial acks whose shared
                    // files must survive the discard of older checkpoints.
                    let ids = c.pending_ids();
                    if let Some(&id) = ids.get(which % ids.len().max(1)) {
                        let location = locations[&id].clone();
                        let task = ALL[task];
                        let ack = if task.vertex == 0 {
                            state(1, &[task.subtask as u8], None)
                        } else {
                            let names: Vec<String> =
                                shared.iter().map(|n| format!("f{n}")).collect();
                            let names: Vec<&str> = if location.shared_dir.is_some() {
                                names.iter().map(String::as_str).collect()
                            } else {
                                Vec::new()
                            };
                            state(2, b"", Some(env.keyed(&location, "private", &names)))
                        };
                        actions = c.acknowledge(now, task, id, ack);
                    }
                }
                Op::Decline { which } => {
                    let ids = c.pending_ids();
                    if let Some(&id) = ids.get(which % ids.len().max(1)) {
                        actions = c.decline(now, t(0, 0), id, "no".into(), true);
                    }
                }
                Op::Savepoint => {
                    if let Ok(a) = c.trigger_savepoint(now, Some(join(&env.base, "sp")), "r".into()) {
                        actions = a;
                    }
                }
                Op::Reset => {
                    actions = c.job_reset(now);
                    run_all(&mut c, now);
                }
            }
            for a in &actions {
                if let CheckpointAction::Trigger { checkpoint_id, location, .. } = a {
                    locations.insert(*checkpoint_id, location.clone());
                }
            }
            let retained: Vec<&CompletedCheckpoint> = c.retained().collect();
            proptest::prop_assert!(retained.len() <= 2);
            for cc in retained {
                let valid = validate(env.storage.as_ref(), &cc.metadata_dir, &cc.metadata);
                proptest::prop_assert!(valid.is_ok(), "chk-{}: {:?}", cc.id, valid);
            }
            let periodic = c
                .pending_ids()
                .iter()
                .filter(|id| locations[id].kind == SnapshotKind::Checkpoint)
                .count();
            proptest::prop_assert!(periodic <= 2);
        }
    }
}

#[test]
fn each_checkpoint_keeps_its_subtasks_acknowledgements() {
    let env = Env::new();
    let mut c = env.coordinator(env.settings());
    run_all(&mut c, 0);
    c.tick(0);
    let (id, _, _) = trigger_of(&c.tick(100));
    c.acknowledge(110, t(0, 1), id, state(1, b"abcd", None));
    let pending = c.checkpoint(id).expect("pending checkpoints are known");
    assert_eq!(pending.status, CheckpointStatus::InProgress);
    assert_eq!(pending.subtasks.len(), 3, "every expected subtask");
    let of = |e: &CheckpointEntry, task: TaskKey| {
        e.subtasks
            .iter()
            .find(|s| (s.vertex, s.subtask) == (task.vertex, task.subtask))
            .unwrap_or_else(|| panic!("{task} missing"))
            .ack
    };
    assert_eq!(of(&pending, t(0, 0)), None, "not acknowledged yet");
    let ack = of(&pending, t(0, 1)).expect("acknowledged");
    assert_eq!((ack.timestamp, ack.state_size), (110, 4));

    c.acknowledge(120, t(0, 0), id, state(1, b"ab", None));
    c.acknowledge(150, t(1, 0), id, state(2, b"", None));
    let done = c
        .checkpoint(id)
        .expect("completed checkpoints stay in the history");
    assert_eq!(done.status, CheckpointStatus::Completed);
    assert!(done.subtasks.iter().all(|s| s.ack.is_some()));
    assert_eq!(of(&done, t(0, 0)).unwrap().timestamp, 120);
    assert_eq!(of(&done, t(1, 0)).unwrap().timestamp, 150);
    assert_eq!(c.checkpoint(id + 1), None, "never triggered");
}
