//! The JobManager's I/O shell around its cores: it feeds the Dispatcher events and the time,
//! sends the messages the Dispatcher returns, carries out its file work and reports the results
//! back, and wakes it at the deadline it names.
//!
//! The Dispatcher sits behind a mutex that is only ever held while the core computes: nothing
//! under it waits on a file, a socket or ZooKeeper. File work (a checkpoint's `_metadata`,
//! discarding checkpoints, checking a checkpoint's files before a restore) runs on blocking
//! threads, in order per job ("lanes"), so a slow file system delays only its own job's
//! checkpoints; building a job graph (user code) and reading a savepoint happen before the
//! lock is taken. The TaskManager protocol is in `endpoint.rs`, ZooKeeper HA in `leadership.rs`,
//! start-up in `process.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{Notify, mpsc};
use tracing::{info, warn};

use super::artifacts::ArtifactStore;
use super::dispatcher::{
    CancelError, Dispatcher, DispatcherSettings, JobSettings, Outbox, SavepointError, SubmitError,
    check_job_paths, check_program_args,
};
use super::ha_state::HaRuntime;
use super::log_requests::{LogRequests, TaskManagerLogError};
use crate::api::ProgramRegistry;
use crate::checkpoint::StorageWork;
use crate::checkpoint::{io, job_root};
use crate::common::ids::{JobId, ResourceId};
use crate::common::log_text::clip;
use crate::config::Config;
use crate::ha::JobRecord;
use crate::metrics::{CpuLoad, MetricStore, ProcessMetrics};
use crate::rpc::messages::{JmToTm, LogAnswer, LogQuery, ProgramSpec};
use crate::state::StateStorage;

/// Milliseconds since the Unix epoch: the time the cores are fed.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How long the REST API waits for a TaskManager to send a log: a log request is a read of at
/// most `LOG_TAIL_BYTES` of a local file, so a TaskManager that takes longer is overloaded or
/// cut off, and the client is better told so than left hanging.
pub const LOG_ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a job's idle file-work lane lingers before it ends (a new one starts on demand).
const LANE_IDLE: Duration = Duration::from_secs(30);

/// What the REST API, the RPC endpoint and the HA tasks share.
pub struct JobManagerShared {
    config: Config,
    programs: Arc<ProgramRegistry>,
    artifacts: Arc<ArtifactStore>,
    storage: Arc<dyn StateStorage>,
    dispatcher: Mutex<Dispatcher>,
    settings: DispatcherSettings,
    /// The control connection of each registered TaskManager: its number and its sender.
    pub(super) connections: Mutex<HashMap<ResourceId, (u64, mpsc::UnboundedSender<JmToTm>)>>,
    pub(super) next_connection: AtomicU64,
    /// Each job's file-work lane.
    lanes: Mutex<HashMap<JobId, mpsc::UnboundedSender<(u64, StorageWork)>>>,
    /// Bumped when leadership ends: file work and results of an earlier term are dropped.
    term: AtomicU64,
    /// Set when the JobManager stops: connections that end then are not TaskManagers lost.
    stopped: AtomicBool,
    /// Wakes the driver: the cores' deadline may have moved.
    wake: Notify,
    /// Wakes the HA recorder: a job may have ended.
    pub(super) job_changed: Notify,
    rpc_address: SocketAddr,
    pub(super) ha: Option<HaRuntime>,
    /// What the TaskManagers reported with their heartbeats (Flink's metric store).
    metrics: Mutex<MetricStore>,
    /// The JobManager process's CPU load between readings.
    cpu_load: Mutex<CpuLoad>,
    /// The log requests sent to TaskManagers that wait for their answer.
    pub(super) log_requests: LogRequests,
}

/// A read-only view of the JobManager's state, for REST, YARN and the CLI's embedded cluster.
/// It holds the Dispatcher's lock: keep it for one answer, never across an `.await`.
pub struct DispatcherView<'a>(MutexGuard<'a, Dispatcher>);

impl std::ops::Deref for DispatcherView<'_> {
    type Target = Dispatcher;

    fn deref(&self) -> &Dispatcher {
        &self.0
    }
}

impl JobManagerShared {
    /// The JobManager is stopping (its process ends or its embedded cluster is dropped).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Whether [`stop`](Self::stop) was called.
    pub(super) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    pub(super) fn new(
        config: Config,
        programs: Arc<ProgramRegistry>,
        artifacts: Arc<ArtifactStore>,
        storage: Arc<dyn StateStorage>,
        rpc_address: SocketAddr,
        ha: Option<HaRuntime>,
    ) -> Self {
        let settings = DispatcherSettings::from_config(&config);
        JobManagerShared {
            config,
            programs,
            artifacts,
            storage,
            dispatcher: Mutex::new(Dispatcher::new(settings.clone())),
            settings,
            connections: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(0),
            lanes: Mutex::new(HashMap::new()),
            term: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            wake: Notify::new(),
            job_changed: Notify::new(),
            rpc_address,
            ha,
            metrics: Mutex::new(MetricStore::default()),
            cpu_load: Mutex::new(CpuLoad::default()),
            log_requests: LogRequests::default(),
        }
    }

    /// The metric store: the task and TaskManager metrics the heartbeats brought. Hold it for
    /// one answer, never across an `.await`.
    pub fn metrics(&self) -> MutexGuard<'_, MetricStore> {
        self.metrics.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This process's metrics (`Status.Process.*`) now.
    pub fn process_metrics(&self) -> ProcessMetrics {
        let mut cpu = self.cpu_load.lock().unwrap_or_else(|e| e.into_inner());
        crate::metrics::read_process(now_ms(), &mut cpu)
    }

    /// The effective configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The programs this JobManager can run.
    pub fn programs(&self) -> &ProgramRegistry {
        &self.programs
    }

    /// The job artifacts uploaded to this JobManager.
    pub fn artifacts(&self) -> &Arc<ArtifactStore> {
        &self.artifacts
    }

    /// Where TaskManagers connect.
    pub fn rpc_address(&self) -> SocketAddr {
        self.rpc_address
    }

    /// Whether ZooKeeper HA is configured.
    pub fn has_ha(&self) -> bool {
        self.ha.is_some()
    }

    /// Reads the JobManager's state.
    pub fn view(&self) -> DispatcherView<'_> {
        DispatcherView(self.dispatcher())
    }

    pub(super) fn dispatcher(&self) -> MutexGuard<'_, Dispatcher> {
        self.dispatcher.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Leadership ended: forget every job (the next leader recovers them from the HA stores),
    /// drop every TaskManager connection and stop this term's file work, so nothing this
    /// JobManager decided any more reaches a TaskManager or a checkpoint directory.
    pub(super) fn step_down(&self) {
        self.term.fetch_add(1, Ordering::SeqCst);
        self.lanes.lock().unwrap_or_else(|e| e.into_inner()).clear();
        *self.dispatcher() = Dispatcher::new(self.settings.clone());
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.wake.notify_one();
    }

    /// Asks TaskManager `id` over its control connection for one of its logs (or their list)
    /// and waits at most [`LOG_ANSWER_TIMEOUT`] for its answer.
    pub async fn taskmanager_log(
        &self,
        id: &str,
        query: LogQuery,
    ) -> Result<LogAnswer, TaskManagerLogError> {
        let pending = self.log_requests.open(id);
        let sent = self
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .is_some_and(|(_, tx)| {
                tx.send(JmToTm::LogRequest {
                    request: pending.request,
                    query,
                })
                .is_ok()
            });
        if !sent {
            return Err(TaskManagerLogError::UnknownTaskManager(id.to_string()));
        }
        // `pending` is dropped on every return, which forgets the request.
        let mut pending = pending;
        match tokio::time::timeout(LOG_ANSWER_TIMEOUT, &mut pending.answer).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(TaskManagerLogError::ConnectionLost(id.to_string())),
            Err(_) => Err(TaskManagerLogError::Timeout(
                id.to_string(),
                LOG_ANSWER_TIMEOUT,
            )),
        }
    }

    /// Carries out what the Dispatcher asked for: sends messages to TaskManagers (a TaskManager
    /// without a connection has been reported lost already, so its messages are dropped),
    /// queues file work on the jobs' lanes, and wakes the driver and the HA recorder.
    pub fn deliver(self: &Arc<Self>, outbox: Outbox) {
        if !outbox.messages.is_empty() {
            let connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
            for (resource_id, msg) in outbox.messages {
                match connections.get(&resource_id) {
                    Some((_, tx)) => {
                        let _ = tx.send(msg);
                    }
                    None => warn!(%resource_id, "dropping a message for an unknown TaskManager"),
                }
            }
        }
        if !outbox.storage.is_empty() {
            let term = self.term.load(Ordering::SeqCst);
            let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
            for (job, work) in outbox.storage {
                let lane = lanes.entry(job).or_insert_with(|| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(lane(self.clone(), job, rx));
                    tx
                });
                let _ = lane.send((term, work));
            }
        }
        self.wake.notify_one();
        self.job_changed.notify_one();
    }

    /// Feeds the result of file work back to the Dispatcher, unless leadership changed since
    /// the work was asked for.
    fn file_work_done(self: &Arc<Self>, term: u64, job: JobId, done: FileWorkDone) {
        if self.term.load(Ordering::SeqCst) != term {
            return;
        }
        let now = now_ms();
        let outbox = match done {
            FileWorkDone::Written {
                checkpoint_id,
                result,
            } => self
                .dispatcher()
                .metadata_written(job, checkpoint_id, result, now),
            FileWorkDone::Checked { ticket, verdicts } => self
                .dispatcher()
                .restore_checked(job, ticket, verdicts, now),
        };
        self.deliver(outbox);
    }

    /// Submits a job; returns its id. `overrides` are job-scoped configuration keys
    /// (checkpointing, state backend, restart strategy) that apply to this job only;
    /// `savepoint` is a savepoint or retained checkpoint to start from.
    pub async fn submit(
        self: &Arc<Self>,
        program: ProgramSpec,
        parallelism: Option<u32>,
        overrides: &[(String, String)],
        savepoint: Option<String>,
    ) -> Result<JobId, SubmitError> {
        if !self.is_leader() {
            return Err(SubmitError::BadConfig(
                "this JobManager is not the leader".into(),
            ));
        }
        let job = JobId::random();
        self.submit_as(job, program, parallelism, overrides, savepoint, false)
            .await
    }

    /// Submits a job under an id the caller chose and keeps it in the HA job graph store, as a
    /// REST submission does: a YARN application's one job, whose id a later AM attempt must
    /// recognise. A job that could not be stored is cancelled, since the next leader would not
    /// know it.
    pub async fn submit_recoverable(self: &Arc<Self>, record: &JobRecord) -> Result<JobId, String> {
        if !self.is_leader() {
            return Err("this JobManager is not the leader".into());
        }
        let id = self
            .submit_as(
                record.job_id,
                record.program.clone(),
                Some(record.parallelism),
                &record.overrides,
                record.savepoint.clone(),
                false,
            )
            .await
            .map_err(|e| e.to_string())?;
        if let Err(e) = self.persist_job(record).await {
            let _ = self.cancel(id);
            return Err(e);
        }
        Ok(id)
    }

    /// Submits a job under a given id; `recover` takes over the checkpoints an earlier leader
    /// left for it. The job graph is built (user code) and the savepoint and checkpoints are
    /// read before the Dispatcher's lock is taken, on blocking threads.
    pub(super) async fn submit_as(
        self: &Arc<Self>,
        job_id: JobId,
        mut program: ProgramSpec,
        parallelism: Option<u32>,
        overrides: &[(String, String)],
        savepoint: Option<String>,
        recover: bool,
    ) -> Result<JobId, SubmitError> {
        // Before anything is built from them; the Dispatcher checks again under its lock.
        check_program_args(&program, self.config.rest.max_args_size)?;
        let parallelism = parallelism.unwrap_or(self.config.parallelism_default);
        let mut config = self.config.clone();
        for (key, value) in overrides {
            if !JOB_SCOPED_PREFIXES.iter().any(|p| key.starts_with(p)) {
                return Err(SubmitError::BadConfig(format!(
                    "{key} cannot be set per job; job-scoped keys start with {}",
                    JOB_SCOPED_PREFIXES.join(", ")
                )));
            }
            config
                .set(key, value)
                .map_err(|e| SubmitError::BadConfig(e.to_string()))?;
        }
        let mut job = JobSettings::from_config(&config)?;
        // The TaskManagers rebuild the graph in the same mode: the spec carries it.
        program.runtime_mode = config.runtime_mode;
        if parallelism == 0 {
            return Err(SubmitError::BadParallelism);
        }
        let (programs, spec) = (self.programs.clone(), program.clone());
        let artifacts = self.artifacts.clone();
        let graph = tokio::task::spawn_blocking(move || match &spec.artifact {
            // The artifact builds its graph in a child process of its own.
            Some(id) => artifacts
                .plan(id, &spec.name, &spec.args, parallelism)
                .map(|graph| graph.resolve_mode(spec.runtime_mode))
                .map_err(|e| SubmitError::Artifact(e.to_string())),
            None => crate::graph::build_job_graph(&programs, &spec, parallelism)
                .map_err(SubmitError::from),
        })
        .await
        .unwrap_or_else(|panic| {
            Err(SubmitError::BadArguments {
                program: program.name.clone(),
                message: format!(
                    "the program panicked while building its dataflow: {}",
                    panic_text(panic)
                ),
            })
        })?;
        // Paths a recovered job uses were checked when it was first submitted.
        if !recover {
            check_job_paths(&graph, savepoint.as_deref(), &config, &self.config)?;
            let dirs = [
                ("execution.checkpointing.dir", &job.checkpoints.dir),
                (
                    "execution.checkpointing.savepoint-dir",
                    &job.checkpoints.savepoint_dir,
                ),
            ];
            for (key, dir) in dirs {
                if let Some(dir) = dir {
                    self.storage
                        .check_path(dir)
                        .map_err(|e| SubmitError::BadConfig(format!("{key}: {e}")))?;
                }
            }
        }
        if let Some(path) = savepoint {
            let storage = self.storage.clone();
            let given = path.clone();
            let loaded = blocking(move || io::load_restore(storage.as_ref(), &path))
                .await
                .map_err(SubmitError::BadRestore)?;
            job.restore_from = Some(loaded.map_err(|e| {
                if e.reveals_foreign_files() {
                    warn!(%job_id, path = %given, error = %e, "refused a restore path");
                    SubmitError::BadRestore(format!(
                        "{given} is not a valid savepoint or retained checkpoint"
                    ))
                } else {
                    SubmitError::BadRestore(e.to_string())
                }
            })?);
        }
        if recover && let Some(dir) = &job.checkpoints.dir {
            let root = job_root(dir, &job_id.to_string());
            let storage = self.storage.clone();
            let found = blocking(move || io::read_retained(storage.as_ref(), &root))
                .await
                .and_then(|r| r.map_err(|e| e.to_string()));
            job.recover = Some(found.unwrap_or_else(|e| {
                warn!(%job_id, error = %e, "cannot take over the job's checkpoints");
                Vec::new()
            }));
        }
        let outbox =
            self.dispatcher()
                .submit(job_id, program, graph, parallelism, job, now_ms())?;
        info!(%job_id, "job submitted");
        self.deliver(outbox);
        Ok(job_id)
    }

    /// Triggers a savepoint (and a stop after it, or a drain and a stop, as `after` says);
    /// returns the request id.
    pub fn trigger_savepoint(
        self: &Arc<Self>,
        job: JobId,
        target: Option<String>,
        after: crate::checkpoint::AfterSavepoint,
    ) -> Result<String, SavepointError> {
        // A target is a path, a file: or an hdfs: URI, parsed as every configured storage path
        // is, and one clients may name (the configured default is the operator's own choice).
        let target = target
            .map(|t| {
                let path = crate::config::storage_path(&t).map_err(SavepointError::BadTarget)?;
                crate::config::check_client_storage_path(
                    &path,
                    "the target directory",
                    &self.config.security.io_allowed_dirs,
                )
                .map_err(SavepointError::BadTarget)?;
                Ok(path)
            })
            .transpose()?;
        let request_id = format!("{:032x}", rand::random::<u128>());
        let outbox = self.dispatcher().trigger_savepoint(
            job,
            request_id.clone(),
            target,
            after,
            now_ms(),
        )?;
        info!(job_id = %job, %request_id, ?after, "savepoint triggered");
        self.deliver(outbox);
        Ok(request_id)
    }

    /// A TaskManager is gone (its YARN container ended): its executions fail over.
    pub fn taskmanager_lost(self: &Arc<Self>, resource_id: &str, reason: &str) {
        let outbox = self
            .dispatcher()
            .taskmanager_lost(resource_id, reason, now_ms());
        self.deliver(outbox);
    }

    /// New per-vertex bounds of parallelism for a job of the adaptive scheduler, by vertex id.
    pub fn set_requirements(
        self: &Arc<Self>,
        job: JobId,
        bounds: &std::collections::BTreeMap<String, crate::jobmanager::adaptive::Bounds>,
    ) -> Result<(), crate::jobmanager::jobmaster::RequirementsError> {
        let outbox = self.dispatcher().set_requirements(job, bounds, now_ms())?;
        info!(job_id = %job, ?bounds, "resource requirements changed");
        self.deliver(outbox);
        Ok(())
    }

    /// Cancels a job.
    pub fn cancel(self: &Arc<Self>, job: JobId) -> Result<(), CancelError> {
        let outbox = self.dispatcher().cancel(job, now_ms())?;
        info!(job_id = %job, "job cancellation requested");
        self.deliver(outbox);
        Ok(())
    }
}

/// The job-scoped key that Flink's `--allowNonRestoredState` (`sluice run -n`, the REST
/// submissions' `allowNonRestoredState`) sets.
pub const ALLOW_NON_RESTORED_STATE_KEY: &str = "execution.savepoint.ignore-unclaimed-state";

/// Keys a job may set for itself at submission (`sluice run -D key=value`).
pub const JOB_SCOPED_PREFIXES: &[&str] = &[
    "execution.checkpointing.",
    "execution.savepoint.",
    "state.backend.",
    "state.storage.",
    "restart-strategy.",
    "pipeline.auto-watermark-interval",
    "execution.runtime-mode",
];

/// The result of file work that the Dispatcher waits for.
enum FileWorkDone {
    Written {
        checkpoint_id: u64,
        result: Result<(), String>,
    },
    Checked {
        ticket: u64,
        verdicts: crate::checkpoint::RestoreVerdicts,
    },
}

/// Does one piece of file work (on a blocking thread).
fn perform(storage: &dyn StateStorage, work: StorageWork) -> Option<FileWorkDone> {
    match work {
        StorageWork::WriteMetadata {
            checkpoint_id,
            path,
            bytes,
        } => Some(FileWorkDone::Written {
            checkpoint_id,
            result: io::write_metadata(storage, &path, &bytes),
        }),
        StorageWork::Discard { dirs, files } => {
            io::discard(storage, &dirs, &files);
            None
        }
        StorageWork::MarkInProgress { dir } => {
            if let Err(e) = io::mark_in_progress(storage, &dir) {
                warn!(dir = %clip(&dir), "cannot mark the savepoint directory: {e}");
            }
            None
        }
        StorageWork::CheckRestore { ticket, candidates } => Some(FileWorkDone::Checked {
            ticket,
            verdicts: io::check_candidates(storage, &candidates),
        }),
    }
}

/// One job's file work, in order. Ends after a while without work (the next work starts a new
/// lane; the map's lock makes the hand-over safe) or when leadership ends.
async fn lane(
    shared: Arc<JobManagerShared>,
    job: JobId,
    mut rx: mpsc::UnboundedReceiver<(u64, StorageWork)>,
) {
    loop {
        let (term, work) = match tokio::time::timeout(LANE_IDLE, rx.recv()).await {
            Ok(Some(next)) => next,
            Ok(None) => return,
            Err(_) => {
                let mut lanes = shared.lanes.lock().unwrap_or_else(|e| e.into_inner());
                if rx.is_empty() {
                    lanes.remove(&job);
                    return;
                }
                continue;
            }
        };
        if shared.term.load(Ordering::SeqCst) != term {
            continue;
        }
        let storage = shared.storage.clone();
        match blocking(move || perform(storage.as_ref(), work)).await {
            Ok(Some(done)) => shared.file_work_done(term, job, done),
            Ok(None) => {}
            Err(e) => warn!(job_id = %job, "checkpoint file work failed: {}", clip(&e)),
        }
    }
}

/// Runs blocking work on tokio's blocking threads; a panic becomes an error naming it.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("the work panicked: {}", panic_text(e)))
}

fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into()),
        Err(e) => e.to_string(),
    }
}

/// Drives time: sleeps until the Dispatcher's next deadline (or until an event may have moved
/// it), then ticks. Nothing here waits on anything but the clock and the lock.
pub(super) async fn driver(shared: Arc<JobManagerShared>) {
    loop {
        let deadline = if shared.is_leader() {
            shared.dispatcher().poll_timeout()
        } else {
            None
        };
        let now = now_ms();
        match deadline {
            Some(at) if at <= now => {
                let (outbox, next) = {
                    let mut dispatcher = shared.dispatcher();
                    let outbox = dispatcher.tick(now);
                    (outbox, dispatcher.poll_timeout())
                };
                if !outbox.is_empty() {
                    shared.deliver(outbox);
                }
                if next.is_some_and(|at| at <= now) {
                    // Due again within the same millisecond: let the clock move on.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            Some(at) => {
                let sleep = tokio::time::sleep(Duration::from_millis(at - now));
                tokio::select! {
                    _ = sleep => {}
                    _ = shared.wake.notified() => {}
                }
            }
            None => shared.wake.notified().await,
        }
    }
}
