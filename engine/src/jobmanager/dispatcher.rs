//! The Dispatcher's core: accepts jobs, starts one JobMaster per job, routes TaskManager events
//! to the JobMasters and the ResourceManager, and keeps an archive of finished jobs.
//!
//! Pure: the JobManager's I/O shell (`service.rs`) feeds it events and the time (ms since the
//! epoch), sends the messages it returns, carries out the file work it returns
//! ([`Outbox::storage`]) and reports the results back as events, and calls
//! [`tick`](Dispatcher::tick) at the deadline [`poll_timeout`](Dispatcher::poll_timeout)
//! names. It never reads a file, a clock or a random number: job graphs, savepoints, ids and
//! request ids come in built, read and drawn.

use std::collections::BTreeMap;

use super::adaptive::{AdaptiveSettings, Bounds};
use super::jobmaster::{Action, JobMaster, RequirementsError};
use super::resourcemanager::{ResourceManager, TaskManagerInfo};
use super::restart::RestartPolicy;
use crate::checkpoint::StorageWork;
use crate::checkpoint::io::RetainedEntries;
use crate::checkpoint::{
    CheckpointCoordinator, CheckpointMetadata, CheckpointSettings, RestoreVerdicts, SubtaskState,
};
use crate::common::ids::{ExecutionId, JobId, ResourceId};
use crate::config::{CheckpointingMode, Config};
use crate::graph::{BuildError, JobGraph};
use crate::rpc::messages::{ExecutionState, JmToTm, ProgramSpec, TaskMetrics, TaskStateConfig};

/// Limits the Dispatcher enforces, from the configuration.
#[derive(Clone, Debug)]
pub struct DispatcherSettings {
    /// `slot.request.timeout` in ms.
    pub slot_request_timeout_ms: u64,
    /// `heartbeat.timeout` in ms.
    pub heartbeat_timeout_ms: u64,
    /// `jobstore.max-capacity`.
    pub jobstore_max_capacity: usize,
    /// `jobstore.expiration-time` in ms.
    pub jobstore_expiration_ms: u64,
    /// `jobmanager.max-pending-jobs`: most jobs waiting for slots at once.
    pub max_pending_jobs: usize,
    /// `web.submit.max-args-size`: most bytes of one job's program arguments.
    pub max_args_size: u64,
    /// The adaptive scheduler's settings when it runs new jobs (`jobmanager.scheduler:
    /// adaptive`); `None`: the default scheduler.
    pub adaptive: Option<AdaptiveSettings>,
}

impl DispatcherSettings {
    /// The settings `config` gives the Dispatcher.
    pub fn from_config(config: &Config) -> DispatcherSettings {
        DispatcherSettings {
            slot_request_timeout_ms: config.slot_request_timeout.as_millis() as u64,
            heartbeat_timeout_ms: config.heartbeat.detection_timeout().as_millis() as u64,
            jobstore_max_capacity: config.jobstore.max_capacity,
            jobstore_expiration_ms: config.jobstore.expiration_time.as_millis() as u64,
            max_pending_jobs: config.jobmanager.max_pending_jobs,
            max_args_size: config.rest.max_args_size,
            adaptive: adaptive_settings(config),
        }
    }
}

/// The adaptive scheduler's settings, when `jobmanager.scheduler: adaptive` or
/// `scheduler-mode: reactive` asks for it.
fn adaptive_settings(config: &Config) -> Option<AdaptiveSettings> {
    let a = &config.adaptive;
    let reactive = a.mode == Some(crate::config::SchedulerMode::Reactive);
    if config.scheduler != crate::config::SchedulerKind::Adaptive && !reactive {
        return None;
    }
    let ms = |d: std::time::Duration| d.as_millis().min(u64::MAX as u128) as u64;
    Some(AdaptiveSettings {
        resource_wait_timeout_ms: a.resource_wait_timeout.filter(|_| !reactive).map(ms),
        stabilization_timeout_ms: ms(a.stabilization_timeout),
        min_parallelism_increase: a.min_parallelism_increase,
        scaling_interval_min_ms: ms(a.scaling_interval_min),
        scaling_interval_max_ms: a.scaling_interval_max.map(ms),
        reactive,
    })
}

/// Refuses the paths a submission chose that the cluster's own configuration did not: the
/// files and directories the job's built-in sources and sinks use, the savepoint it starts
/// from, and checkpoint or savepoint directories it overrides (`job` is the cluster's `cluster`
/// configuration with the job's overrides). Each must pass [`crate::config::check_client_path`]
/// against `security.io.allowed-dirs`; the error names the path and who named it.
pub fn check_job_paths(
    graph: &JobGraph,
    savepoint: Option<&str>,
    job: &Config,
    cluster: &Config,
) -> Result<(), SubmitError> {
    let allowed = &cluster.security.io_allowed_dirs;
    let check_storage = |path: &str, what: &str| {
        crate::config::check_client_storage_path(path, what, allowed).map_err(SubmitError::BadPath)
    };
    // Built-in sources and sinks read and write local paths and hdfs:// URIs alike.
    for file in &graph.files {
        let what = format!("the path of the {}", file.operator);
        match file.path.to_str() {
            Some(path) => check_storage(path, &what)?,
            None => crate::config::check_client_path(&file.path, &what, allowed)
                .map_err(SubmitError::BadPath)?,
        }
    }
    if let Some(raw) = savepoint {
        let path = crate::config::storage_path(raw).map_err(SubmitError::BadRestore)?;
        check_storage(&path, "the savepoint path")?;
    }
    let (mine, theirs) = (&job.checkpointing, &cluster.checkpointing);
    if let Some(dir) = &mine.dir
        && mine.dir != theirs.dir
    {
        check_storage(dir, "execution.checkpointing.dir")?;
    }
    if let Some(dir) = &mine.savepoint_dir
        && mine.savepoint_dir != theirs.savepoint_dir
    {
        check_storage(dir, "execution.checkpointing.savepoint-dir")?;
    }
    Ok(())
}

/// Refuses program arguments larger than `limit` bytes together. The Dispatcher keeps a job's
/// arguments for as long as it keeps the job (`jobstore.*`), so they are bounded before the
/// job's graph is built.
pub fn check_program_args(program: &ProgramSpec, limit: u64) -> Result<(), SubmitError> {
    let bytes: u64 = program.args.iter().map(|a| a.len() as u64).sum();
    if bytes > limit {
        return Err(SubmitError::ArgumentsTooLarge { bytes, limit });
    }
    Ok(())
}

/// A job's own settings: restart strategy, checkpointing and state, from the cluster's
/// configuration with the job's overrides applied.
#[derive(Debug)]
pub struct JobSettings {
    /// The restart strategy.
    pub restart: RestartPolicy,
    /// The checkpoint coordinator's settings.
    pub checkpoints: CheckpointSettings,
    /// What subtasks are told about state (the restore part is filled per subtask).
    pub state: TaskStateConfig,
    /// `pipeline.auto-watermark-interval`.
    pub auto_watermark_interval: std::time::Duration,
    /// A savepoint or retained checkpoint to start from (`run -s PATH`): its directory and
    /// metadata, as read by [`crate::checkpoint::io::load_restore`].
    pub restore_from: Option<(String, CheckpointMetadata)>,
    /// The job is recovered by a new leader (HA): the checkpoints its earlier JobMaster left, as
    /// read by [`crate::checkpoint::io::read_retained`], to take over.
    pub recover: Option<RetainedEntries>,
}

impl JobSettings {
    /// The settings `config` gives a job; refused when checkpoints would have nowhere to go.
    pub fn from_config(config: &Config) -> Result<JobSettings, SubmitError> {
        let c = &config.checkpointing;
        if c.interval.is_some() && c.dir.is_none() {
            return Err(SubmitError::BadConfig(
                "execution.checkpointing.interval is set but execution.checkpointing.dir is not: checkpoints need a directory every JobManager and TaskManager can reach".into(),
            ));
        }
        Ok(JobSettings {
            restart: RestartPolicy::from_config(&config.restart, c.interval.is_some()),
            checkpoints: CheckpointSettings::from(c),
            state: TaskStateConfig {
                backend: config.state.backend.name().into(),
                incremental: c.incremental,
                checkpointing: c.interval.is_some(),
                exactly_once: c.mode == CheckpointingMode::ExactlyOnce,
                restore: None,
                key_hash: crate::common::keys::KeyHash::CURRENT,
                memory_threshold: config.state.memory_threshold,
            },
            auto_watermark_interval: config.auto_watermark_interval,
            restore_from: None,
            recover: None,
        })
    }
}

/// Why a submission was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// No known program has that name.
    #[error("unknown job '{0}'; `sluice examples` lists the bundled jobs")]
    UnknownProgram(String),
    /// The program refused its arguments.
    #[error("invalid arguments for {program}: {message}")]
    BadArguments {
        /// The program.
        program: String,
        /// What it said.
        message: String,
    },
    /// The dataflow cannot run (e.g. a forward edge between different parallelisms).
    #[error("invalid job graph: {0}")]
    BadGraph(String),
    /// The job artifact is unknown or its program could not build a job graph.
    #[error("{0}")]
    Artifact(String),
    /// The parallelism is 0.
    #[error("parallelism must be at least 1")]
    BadParallelism,
    /// A job with that id exists.
    #[error("a job with id {0} already exists")]
    Duplicate(JobId),
    /// The job's configuration cannot work.
    #[error("invalid job configuration: {0}")]
    BadConfig(String),
    /// The savepoint or checkpoint to start from cannot be used.
    #[error("cannot restore from the given savepoint: {0}")]
    BadRestore(String),
    /// A path the submission chose is not one clients may use (see [`check_job_paths`]).
    #[error("refused path: {0}")]
    BadPath(String),
    /// The program arguments are larger than `web.submit.max-args-size`.
    #[error(
        "the program arguments take {bytes} bytes, more than web.submit.max-args-size allows ({limit} bytes)"
    )]
    ArgumentsTooLarge {
        /// Their size, summed over the arguments.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// `jobmanager.max-pending-jobs` jobs already wait for slots.
    #[error(
        "{pending} jobs already wait for slots, the limit of jobmanager.max-pending-jobs ({limit}); submit again when one has started or ended"
    )]
    TooManyPendingJobs {
        /// Jobs waiting now.
        pending: usize,
        /// The limit.
        limit: usize,
    },
}

impl SubmitError {
    /// Whether the same submission may succeed later without change (the cluster was busy).
    pub fn is_retryable(&self) -> bool {
        matches!(self, SubmitError::TooManyPendingJobs { .. })
    }
}

impl From<BuildError> for SubmitError {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::UnknownProgram(name) => SubmitError::UnknownProgram(name),
            BuildError::BadArguments { program, message } => {
                SubmitError::BadArguments { program, message }
            }
            BuildError::BadGraph(e) => SubmitError::BadGraph(e.to_string()),
        }
    }
}

/// Why a cancellation was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CancelError {
    /// No such job.
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The job has ended already.
    #[error("job {0} has already ended ({1})")]
    Ended(JobId, &'static str),
}

/// Why a savepoint request was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SavepointError {
    /// No such job.
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The job cannot take one now (not running, no directory, ...).
    #[error("{0}")]
    Refused(String),
    /// The target directory the client chose is not one clients may use.
    #[error("invalid target directory: {0}")]
    BadTarget(String),
}

/// What the Dispatcher asks of its I/O shell after an event.
#[derive(Debug, Default)]
#[must_use = "the messages must be sent and the file work done"]
pub struct Outbox {
    /// Messages, each for one TaskManager.
    pub messages: Vec<(ResourceId, JmToTm)>,
    /// File work, each for one job's checkpoints: carried out in this order per job.
    pub storage: Vec<(JobId, StorageWork)>,
}

impl Outbox {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.storage.is_empty()
    }

    /// Appends another outbox's work after this one's.
    pub fn extend(&mut self, other: Outbox) {
        self.messages.extend(other.messages);
        self.storage.extend(other.storage);
    }

    fn send(&mut self, to: ResourceId, message: JmToTm) {
        self.messages.push((to, message));
    }
}

/// The JobManager's state.
#[derive(Debug)]
pub struct Dispatcher {
    rm: ResourceManager,
    jobs: BTreeMap<JobId, JobMaster>,
    settings: DispatcherSettings,
}

impl Dispatcher {
    /// An empty JobManager.
    pub fn new(settings: DispatcherSettings) -> Self {
        Dispatcher {
            rm: ResourceManager::default(),
            jobs: BTreeMap::new(),
            settings,
        }
    }

    /// The ResourceManager: TaskManagers and slots, for reading.
    pub fn resources(&self) -> &ResourceManager {
        &self.rm
    }

    /// Running and archived jobs, by id.
    pub fn jobs(&self) -> impl Iterator<Item = &JobMaster> {
        self.jobs.values()
    }

    /// Jobs submitted whose tasks have not reached a TaskManager yet.
    pub fn pending_jobs(&self) -> usize {
        self.jobs.values().filter(|j| j.is_pending()).count()
    }

    /// One job, running or archived.
    pub fn job(&self, id: JobId) -> Option<&JobMaster> {
        self.jobs.get(&id)
    }

    /// Starts the JobMaster of a job whose graph the caller built from `program` (see
    /// [`crate::graph::build_job_graph`]) at `parallelism`.
    pub fn submit(
        &mut self,
        job_id: JobId,
        program: ProgramSpec,
        graph: JobGraph,
        parallelism: u32,
        job: JobSettings,
        now: u64,
    ) -> Result<Outbox, SubmitError> {
        if parallelism == 0 {
            return Err(SubmitError::BadParallelism);
        }
        if self.jobs.contains_key(&job_id) {
            return Err(SubmitError::Duplicate(job_id));
        }
        check_program_args(&program, self.settings.max_args_size)?;
        let pending = self.pending_jobs();
        if pending >= self.settings.max_pending_jobs {
            return Err(SubmitError::TooManyPendingJobs {
                pending,
                limit: self.settings.max_pending_jobs,
            });
        }
        let mut job = job;
        if graph.batch {
            // Batch execution recovers from its finished stages' output, not from checkpoints.
            job.checkpoints.interval = None;
            job.state.checkpointing = false;
        }
        let coordinator = CheckpointCoordinator::new(
            job_id.to_string(),
            job.checkpoints,
            JobMaster::topology(&graph),
        );
        let mut jm = JobMaster::new(
            job_id,
            program,
            parallelism,
            graph,
            job.restart,
            coordinator,
            now,
        );
        if let Some(adaptive) = &self.settings.adaptive {
            jm.set_adaptive(adaptive.clone(), now);
        }
        jm.set_state_config(job.state);
        jm.set_auto_watermark_interval(job.auto_watermark_interval);
        if let Some((dir, metadata)) = job.restore_from {
            jm.restore_from(dir, metadata)
                .map_err(|e| SubmitError::BadRestore(e.to_string()))?;
        }
        let mut actions = Vec::new();
        if let Some(found) = job.recover {
            let (ids, discards) = jm.adopt_checkpoints(found, now);
            tracing::info!(%job_id, checkpoints = ?ids, "took over the job's retained checkpoints");
            actions.extend(discards);
        }
        actions.extend(jm.start(now));
        self.jobs.insert(job_id, jm);
        Ok(self.run(actions, now))
    }

    /// A TaskManager registered (or re-registered after a restart); its slots go to waiting
    /// jobs at once.
    pub fn register_taskmanager(&mut self, info: TaskManagerInfo, now: u64) -> Outbox {
        let id = info.resource_id.clone();
        let lost = self.rm.register(info);
        let mut actions = Vec::new();
        for job in lost {
            if let Some(jm) = self.jobs.get_mut(&job) {
                actions.extend(jm.taskmanager_lost(&id, "it registered again (restarted)", now));
            }
        }
        let mut out = self.run(actions, now);
        out.extend(self.allocate(now));
        out
    }

    /// A TaskManager's connection broke or its heartbeats stopped.
    pub fn taskmanager_lost(&mut self, id: &str, reason: &str, now: u64) -> Outbox {
        let jobs = self.rm.unregister(id);
        let mut actions = Vec::new();
        for job in jobs {
            if let Some(jm) = self.jobs.get_mut(&job) {
                actions.extend(jm.taskmanager_lost(id, reason, now));
            }
        }
        // Executions still deploying there hold no slot yet in the job's view; fail them too.
        for jm in self.jobs.values_mut() {
            if !jm.status().is_globally_terminal() {
                actions.extend(jm.taskmanager_lost(id, reason, now));
            }
        }
        let mut out = self.run(actions, now);
        // Fewer slots: jobs of the adaptive scheduler learn it.
        out.extend(self.allocate(now));
        out
    }

    /// New per-vertex bounds of parallelism for a job of the adaptive scheduler (REST `PUT
    /// /jobs/:id/resource-requirements`), by vertex id.
    pub fn set_requirements(
        &mut self,
        job: JobId,
        bounds: &BTreeMap<String, Bounds>,
        now: u64,
    ) -> Result<Outbox, RequirementsError> {
        let Some(jm) = self.jobs.get_mut(&job) else {
            return Err(RequirementsError::UnknownJob(job));
        };
        let ordered = jm
            .submitted_graph()
            .vertices
            .iter()
            .map(|v| bounds.get(&v.id).copied())
            .collect::<Option<Vec<Bounds>>>()
            .filter(|b| b.len() == bounds.len())
            .ok_or(RequirementsError::Vertices)?;
        let actions = jm.set_requirements(ordered, now)?;
        let mut out = self.run(actions, now);
        out.extend(self.allocate(now));
        Ok(out)
    }

    /// A TaskManager reported an execution state.
    pub fn task_state(
        &mut self,
        id: ExecutionId,
        state: ExecutionState,
        error: Option<String>,
        metrics: TaskMetrics,
        now: u64,
    ) -> Outbox {
        let actions = match self.jobs.get_mut(&id.job) {
            Some(jm) => jm.task_state(id, state, error, metrics, now),
            None => Vec::new(),
        };
        self.run(actions, now)
    }

    /// A subtask acknowledged a checkpoint.
    pub fn acknowledge_checkpoint(
        &mut self,
        id: ExecutionId,
        checkpoint_id: u64,
        state: SubtaskState,
        now: u64,
    ) -> Outbox {
        let actions = match self.jobs.get_mut(&id.job) {
            Some(jm) => jm.acknowledge_checkpoint(id, checkpoint_id, state, now),
            None => Vec::new(),
        };
        self.run(actions, now)
    }

    /// A subtask declined a checkpoint.
    pub fn decline_checkpoint(
        &mut self,
        id: ExecutionId,
        checkpoint_id: u64,
        reason: String,
        now: u64,
    ) -> Outbox {
        let actions = match self.jobs.get_mut(&id.job) {
            Some(jm) => jm.decline_checkpoint(id, checkpoint_id, reason, now),
            None => Vec::new(),
        };
        self.run(actions, now)
    }

    /// Triggers a savepoint of a running job (and stops it afterwards, draining it first, as
    /// `after` says) under `request_id`, the caller's random id that REST polls.
    pub fn trigger_savepoint(
        &mut self,
        job: JobId,
        request_id: String,
        target: Option<String>,
        after: crate::checkpoint::AfterSavepoint,
        now: u64,
    ) -> Result<Outbox, SavepointError> {
        let jm = self
            .jobs
            .get_mut(&job)
            .ok_or(SavepointError::NotFound(job))?;
        let actions = jm
            .trigger_savepoint(request_id, target, after, now)
            .map_err(SavepointError::Refused)?;
        Ok(self.run(actions, now))
    }

    /// A job's checkpoint `_metadata` was written, or could not be.
    pub fn metadata_written(
        &mut self,
        job: JobId,
        checkpoint_id: u64,
        result: Result<(), String>,
        now: u64,
    ) -> Outbox {
        let actions = match self.jobs.get_mut(&job) {
            Some(jm) => jm.metadata_written(checkpoint_id, result, now),
            None => Vec::new(),
        };
        self.run(actions, now)
    }

    /// A job's restore candidates were checked.
    pub fn restore_checked(
        &mut self,
        job: JobId,
        ticket: u64,
        verdicts: RestoreVerdicts,
        now: u64,
    ) -> Outbox {
        let actions = match self.jobs.get_mut(&job) {
            Some(jm) => jm.restore_checked(ticket, verdicts, now),
            None => Vec::new(),
        };
        self.run(actions, now)
    }

    /// Metrics from a heartbeat.
    pub fn heartbeat(&mut self, from: &str, metrics: Vec<(ExecutionId, TaskMetrics)>, now: u64) {
        self.rm.heartbeat(from, now);
        for (id, m) in metrics {
            if let Some(jm) = self.jobs.get_mut(&id.job) {
                jm.update_metrics(id, m);
            }
        }
    }

    /// Cancels a job.
    pub fn cancel(&mut self, job: JobId, now: u64) -> Result<Outbox, CancelError> {
        let jm = self.jobs.get_mut(&job).ok_or(CancelError::NotFound(job))?;
        if jm.status().is_globally_terminal() {
            return Err(CancelError::Ended(job, jm.status().name()));
        }
        self.rm.cancel_request(job);
        let actions = jm.cancel(now);
        Ok(self.run(actions, now))
    }

    /// When [`tick`](Self::tick) next has something to do (ms since the epoch; a time past
    /// means at once, `None` not before another event): a TaskManager's heartbeat timeout, a
    /// slot request's timeout, a JobMaster's deadline, an archived job's expiry. Calling `tick`
    /// earlier does nothing.
    pub fn poll_timeout(&self) -> Option<u64> {
        let rm = self.rm.poll_timeout(
            self.settings.heartbeat_timeout_ms,
            self.settings.slot_request_timeout_ms,
        );
        let jobs = self.jobs.values().filter_map(JobMaster::poll_timeout).min();
        let expiration = self.settings.jobstore_expiration_ms;
        let archive = self
            .jobs
            .values()
            .filter_map(|jm| jm.end_time().map(|end| end.saturating_add(expiration)))
            .min();
        [rm, jobs, archive].into_iter().flatten().min()
    }

    /// Time passes: slot requests expire, silent TaskManagers are declared lost, waiting jobs get
    /// slots that became free, old finished jobs leave the archive.
    pub fn tick(&mut self, now: u64) -> Outbox {
        let mut out = Outbox::default();
        for id in self
            .rm
            .silent_since(now, self.settings.heartbeat_timeout_ms)
        {
            let reason = format!("no heartbeat for {} ms", self.settings.heartbeat_timeout_ms);
            out.extend(self.taskmanager_lost(&id, &reason, now));
        }
        let mut actions = Vec::new();
        for job in self.rm.expire(now, self.settings.slot_request_timeout_ms) {
            if let Some(jm) = self.jobs.get_mut(&job) {
                actions.extend(jm.slot_request_timed_out(now));
            }
        }
        for jm in self.jobs.values_mut() {
            actions.extend(jm.tick(now));
        }
        out.extend(self.run(actions, now));
        out.extend(self.allocate(now));
        self.expire_archive(now);
        out
    }

    /// Grants the requests the free slots satisfy, then tells the adaptive scheduler's jobs
    /// how many slots they could have now.
    fn allocate(&mut self, now: u64) -> Outbox {
        let mut actions = Vec::new();
        for (job, slots) in self.rm.allocate() {
            match self.jobs.get_mut(&job) {
                Some(jm) => actions.extend(jm.slots_allocated(slots, now)),
                None => self.rm.release(job),
            }
        }
        let free = self.rm.free_slots();
        for jm in self.jobs.values_mut() {
            if jm.adaptive().is_some() && !jm.status().is_globally_terminal() {
                let available = free + self.rm.held_by(jm.job_id());
                actions.extend(jm.slots_available(available, now));
            }
        }
        self.run(actions, now)
    }

    fn expire_archive(&mut self, now: u64) {
        let expiration = self.settings.jobstore_expiration_ms;
        self.jobs.retain(|_, jm| {
            jm.end_time()
                .is_none_or(|end| now.saturating_sub(end) < expiration)
        });
        let mut ended: Vec<(u64, JobId)> = self
            .jobs
            .values()
            .filter_map(|jm| jm.end_time().map(|t| (t, jm.job_id())))
            .collect();
        if ended.len() > self.settings.jobstore_max_capacity {
            ended.sort();
            let excess = ended.len() - self.settings.jobstore_max_capacity;
            for (_, id) in ended.into_iter().take(excess) {
                self.jobs.remove(&id);
            }
        }
    }

    /// Carries out JobMaster actions that stay inside the JobManager and returns the messages.
    fn run(&mut self, actions: Vec<Action>, now: u64) -> Outbox {
        let mut out = Outbox::default();
        let mut needs_allocation = false;
        let mut terminated = false;
        for action in actions {
            match action {
                Action::RequestSlots {
                    job,
                    slots,
                    at_least,
                } => {
                    self.rm.request_between(job, at_least, slots, now);
                    needs_allocation = true;
                }
                Action::DeclareSlots { job, slots } => {
                    self.rm.declare(job, slots);
                    // The job learns how many slots it could have when they are allocated.
                    needs_allocation = true;
                }
                Action::ShipProducers { resource_id, group } => {
                    out.send(resource_id, JmToTm::Producers(group))
                }
                Action::Deploy {
                    resource_id,
                    deployment,
                } => out.send(resource_id, JmToTm::Deploy(deployment)),
                Action::Cancel {
                    resource_id,
                    execution,
                } => out.send(resource_id, JmToTm::Cancel { execution }),
                Action::TriggerCheckpoint {
                    resource_id,
                    execution,
                    timestamp,
                    location,
                    drain,
                } => out.send(
                    resource_id,
                    JmToTm::TriggerCheckpoint {
                        execution,
                        timestamp,
                        location,
                        drain,
                    },
                ),
                Action::NotifyCheckpoint {
                    resource_id,
                    execution,
                    checkpoint_id,
                    complete,
                } => out.send(
                    resource_id,
                    if complete {
                        JmToTm::NotifyCheckpointComplete {
                            execution,
                            checkpoint_id,
                        }
                    } else {
                        JmToTm::NotifyCheckpointAborted {
                            execution,
                            checkpoint_id,
                        }
                    },
                ),
                Action::Reset { job, resource_ids } => {
                    self.rm.release(job);
                    needs_allocation = true;
                    for id in resource_ids {
                        out.send(id, JmToTm::ReleaseJob { job });
                    }
                }
                Action::Storage { job, work } => out.storage.push((job, work)),
                Action::Terminated { job, resource_ids } => {
                    self.rm.forget(job);
                    needs_allocation = true;
                    terminated = true;
                    for id in resource_ids {
                        out.send(id, JmToTm::ReleaseJob { job });
                    }
                }
            }
        }
        if needs_allocation {
            out.extend(self.allocate(now));
        }
        if terminated {
            // The archive's capacity applies as soon as a job ends.
            self.expire_archive(now);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobmanager::jobmaster::{JobStatus, NO_RESOURCE};
    use crate::rpc::messages::Hardware;

    fn job() -> JobSettings {
        JobSettings::from_config(&Config::default()).unwrap()
    }

    fn settings() -> DispatcherSettings {
        DispatcherSettings {
            slot_request_timeout_ms: 1000,
            heartbeat_timeout_ms: 500,
            jobstore_max_capacity: 2,
            jobstore_expiration_ms: 10_000,
            max_pending_jobs: 2,
            max_args_size: 64,
            adaptive: None,
        }
    }

    fn tm(id: &str, slots: usize, now: u64) -> TaskManagerInfo {
        TaskManagerInfo {
            resource_id: id.into(),
            host: "localhost".into(),
            data_address: "127.0.0.1:1".parse().unwrap(),
            rpc_address: "127.0.0.1:2".parse().unwrap(),
            hardware: Hardware::default(),
            network_memory: 0,
            managed_memory: 0,
            registered_at: now,
            last_heartbeat: now,
            slots: vec![None; slots],
        }
    }

    fn spec(name: &str, args: &[&str]) -> ProgramSpec {
        ProgramSpec::new(name, args.iter().map(|s| s.to_string()).collect())
    }

    /// Builds the program's graph, as the service does before it submits.
    fn submit(
        d: &mut Dispatcher,
        id: JobId,
        program: ProgramSpec,
        parallelism: u32,
        now: u64,
    ) -> Result<Outbox, SubmitError> {
        let graph = crate::graph::build_job_graph(
            &crate::examples::bundled(),
            &program,
            parallelism.max(1),
        )?;
        d.submit(id, program, graph, parallelism, job(), now)
    }

    #[test]
    fn too_little_parallelism_waits_then_fails_and_never_runs_smaller() {
        let mut d = Dispatcher::new(settings());
        let _ = d.register_taskmanager(tm("a", 2, 0), 0);
        let out = submit(&mut d, JobId(1), spec("stream-sum", &[]), 3, 0).unwrap();
        assert!(out.is_empty(), "nothing may be deployed with 2 of 3 slots");
        d.heartbeat("a", vec![], 600);
        assert!(d.tick(999).is_empty());
        let _ = d.tick(1000);
        let jm = &d.job(JobId(1)).unwrap();
        assert_eq!(jm.status(), JobStatus::Failed);
        assert_eq!(jm.exceptions()[0].exception, NO_RESOURCE);
        assert_eq!(d.resources().free_slots(), 2);
    }

    #[test]
    fn two_jobs_share_taskmanagers_and_cancel_frees_slots() {
        let mut d = Dispatcher::new(settings());
        let _ = d.register_taskmanager(tm("a", 2, 0), 0);
        let _ = d.register_taskmanager(tm("b", 2, 0), 0);
        let out1 = submit(&mut d, JobId(1), spec("stream-sum", &[]), 2, 0).unwrap();
        let out2 = submit(&mut d, JobId(2), spec("stream-sum", &[]), 2, 0).unwrap();
        assert!(!out1.is_empty() && !out2.is_empty());
        assert_eq!(d.resources().free_slots(), 0);
        let out = d.cancel(JobId(1), 1).unwrap();
        assert!(
            out.messages
                .iter()
                .all(|(_, m)| matches!(m, JmToTm::Cancel { .. }))
        );
        for (_, m) in out.messages {
            if let JmToTm::Cancel { execution } = m {
                let _ = d.task_state(
                    execution,
                    ExecutionState::Canceled,
                    None,
                    TaskMetrics::default(),
                    2,
                );
            }
        }
        assert_eq!(d.job(JobId(1)).unwrap().status(), JobStatus::Canceled);
        assert_eq!(d.resources().free_slots(), 2);
        assert_eq!(
            d.cancel(JobId(1), 3).unwrap_err(),
            CancelError::Ended(JobId(1), "CANCELED")
        );
    }

    /// Every deployment in `out`, as (TaskManager, execution), and each reported RUNNING.
    fn run_deployed(d: &mut Dispatcher, out: Outbox, now: u64) -> Vec<(ResourceId, ExecutionId)> {
        let deployed: Vec<(ResourceId, ExecutionId)> = out
            .messages
            .into_iter()
            .filter_map(|(tm, m)| match m {
                JmToTm::Deploy(d) => Some((tm, d.execution)),
                _ => None,
            })
            .collect();
        for (_, e) in &deployed {
            let _ = d.task_state(
                *e,
                ExecutionState::Running,
                None,
                TaskMetrics::default(),
                now,
            );
        }
        deployed
    }

    /// Acknowledges every cancellation in `out`.
    fn cancel_all(d: &mut Dispatcher, out: Outbox, now: u64) -> Outbox {
        let mut next = Outbox::default();
        for (_, m) in out.messages {
            if let JmToTm::Cancel { execution } = m {
                next.extend(d.task_state(
                    execution,
                    ExecutionState::Canceled,
                    None,
                    TaskMetrics::default(),
                    now,
                ));
            }
        }
        next
    }

    #[test]
    fn the_adaptive_scheduler_runs_with_the_slots_there_are_and_grows_with_new_ones() {
        let mut s = settings();
        s.adaptive = Some(AdaptiveSettings {
            resource_wait_timeout_ms: Some(60_000),
            stabilization_timeout_ms: 100,
            min_parallelism_increase: 1,
            scaling_interval_min_ms: 1_000,
            scaling_interval_max_ms: None,
            reactive: false,
        });
        s.slot_request_timeout_ms = 100_000;
        s.heartbeat_timeout_ms = 1_000_000;
        let mut d = Dispatcher::new(s);
        let _ = d.register_taskmanager(tm("a", 2, 0), 0);
        let job = JobId(1);
        let program = spec("stream-sum", &[]);
        let graph =
            crate::graph::build_job_graph(&crate::examples::bundled(), &program, 4).unwrap();
        let mut settings = self::job();
        settings.restart = RestartPolicy::FixedDelay {
            attempts: 3,
            delay_ms: 50,
        };
        let out = d.submit(job, program, graph, 4, settings, 0).unwrap();
        assert!(
            out.messages.is_empty(),
            "2 of 4 slots: it waits for them to stay"
        );
        assert_eq!(
            d.resources().pending_slots(),
            4,
            "it wants 4 (2 of them free)"
        );
        let jm = d.job(job).unwrap();
        assert_eq!(jm.status(), JobStatus::Created);
        assert_eq!(jm.adaptive().unwrap().0, "WaitingForResources");
        assert_eq!(d.poll_timeout(), Some(100));
        let out = d.tick(100);
        let first = run_deployed(&mut d, out, 100);
        let jm = d.job(job).unwrap();
        assert_eq!(jm.adaptive().unwrap().0, "Executing");
        assert_eq!(jm.status(), JobStatus::Running);
        assert!(jm.graph().vertices.iter().all(|v| v.parallelism == 2));
        assert_eq!(first.len() as u32, jm.graph().total_subtasks());

        // A second TaskManager: the job rescales to 4 once the scaling interval has passed.
        let out = d.register_taskmanager(tm("b", 2, 200), 200);
        assert!(out.messages.is_empty(), "too soon after the start");
        assert_eq!(d.poll_timeout(), Some(1_100));
        let out = d.tick(1_100);
        assert!(!out.messages.is_empty());
        assert_eq!(d.job(job).unwrap().status(), JobStatus::Restarting);
        let mut out = cancel_all(&mut d, out, 1_200);
        assert_eq!(
            d.poll_timeout(),
            Some(1_100),
            "every task stopped: restart now"
        );
        out.extend(d.tick(1_200));
        let second = run_deployed(&mut d, out, 1_200);
        let jm = d.job(job).unwrap();
        assert_eq!(jm.status(), JobStatus::Running);
        assert!(jm.graph().vertices.iter().all(|v| v.parallelism == 4));
        assert_eq!(second.len() as u32, jm.graph().total_subtasks());
        assert!(second.iter().all(|(_, e)| e.attempt == 1), "a new attempt");
        assert_eq!(jm.restarts(), 0, "a rescale is not a failure");
        assert_eq!(d.resources().free_slots(), 0);

        // Losing a TaskManager fails its tasks; the job restarts on the 2 slots left.
        let out = d.taskmanager_lost("b", "gone", 2_000);
        let out = cancel_all(&mut d, out, 2_000);
        assert!(out.messages.is_empty());
        let mut deployed = Vec::new();
        let mut now = 2_000;
        while deployed.is_empty() && now < 20_000 {
            now = d.poll_timeout().unwrap().max(now + 1);
            let out = d.tick(now);
            deployed = run_deployed(&mut d, out, now);
        }
        let jm = d.job(job).unwrap();
        assert_eq!(jm.status(), JobStatus::Running);
        assert!(jm.graph().vertices.iter().all(|v| v.parallelism == 2));
        assert!(deployed.iter().all(|(tm, _)| tm == "a"));

        // Narrower requirements rescale it at once; bad ones are refused with a reason.
        let ids: Vec<String> = jm.graph().vertices.iter().map(|v| v.id.clone()).collect();
        let mut bounds: BTreeMap<String, Bounds> = ids
            .iter()
            .map(|id| (id.clone(), Bounds { lower: 1, upper: 1 }))
            .collect();
        let out = d.set_requirements(job, &bounds, now + 1).unwrap();
        let mut out = cancel_all(&mut d, out, now + 2);
        out.extend(d.tick(now + 2));
        run_deployed(&mut d, out, now + 2);
        let jm = d.job(job).unwrap();
        assert!(jm.graph().vertices.iter().all(|v| v.parallelism == 1));
        bounds.insert(ids[0].clone(), Bounds { lower: 3, upper: 2 });
        let err = d.set_requirements(job, &bounds, now + 3).unwrap_err();
        assert!(err.to_string().contains("3..2"), "{err}");
        bounds.remove(&ids[0]);
        assert_eq!(
            d.set_requirements(job, &bounds, now + 3).unwrap_err(),
            RequirementsError::Vertices
        );
    }

    #[test]
    fn the_adaptive_scheduler_gives_up_without_the_slots_it_needs() {
        let mut s = settings();
        s.adaptive = Some(AdaptiveSettings {
            resource_wait_timeout_ms: Some(5_000),
            ..AdaptiveSettings::default()
        });
        s.heartbeat_timeout_ms = 1_000_000;
        let mut d = Dispatcher::new(s);
        let job = JobId(1);
        let _ = submit(&mut d, job, spec("stream-sum", &[]), 2, 0).unwrap();
        assert_eq!(d.poll_timeout(), Some(5_000));
        let _ = d.tick(5_000);
        let jm = d.job(job).unwrap();
        assert_eq!(jm.status(), JobStatus::Failed);
        assert_eq!(jm.exceptions()[0].exception, NO_RESOURCE);
        assert_eq!(d.resources().pending_slots(), 0, "its declaration is gone");
    }

    #[test]
    fn bad_submissions_are_refused_with_reasons() {
        let mut d = Dispatcher::new(settings());
        assert!(matches!(
            submit(&mut d, JobId(1), spec("nope", &[]), 1, 0),
            Err(SubmitError::UnknownProgram(_))
        ));
        let err = submit(&mut d, JobId(1), spec("stream-sum", &["--rate", "x"]), 1, 0).unwrap_err();
        assert!(err.to_string().contains("--rate"), "{err}");
        assert_eq!(
            submit(&mut d, JobId(1), spec("wordcount", &[]), 0, 0).unwrap_err(),
            SubmitError::BadParallelism
        );
    }

    #[test]
    fn jobs_waiting_for_slots_are_capped_and_the_cap_frees_up() {
        let mut d = Dispatcher::new(settings());
        // No TaskManager: every job waits for slots.
        for id in 1..=2 {
            let _ = submit(&mut d, JobId(id), spec("stream-sum", &[]), 1, 0).unwrap();
        }
        assert_eq!(d.pending_jobs(), 2);
        let err = submit(&mut d, JobId(3), spec("stream-sum", &[]), 1, 0).unwrap_err();
        assert_eq!(
            err,
            SubmitError::TooManyPendingJobs {
                pending: 2,
                limit: 2
            }
        );
        assert!(err.is_retryable());
        let text = err.to_string();
        assert!(
            text.contains("jobmanager.max-pending-jobs") && text.contains("(2)"),
            "{text}"
        );
        assert!(d.job(JobId(3)).is_none(), "a refused job leaves no trace");
        // Once one of them runs, another may wait.
        let _ = d.register_taskmanager(tm("a", 1, 1), 1);
        assert_eq!(d.pending_jobs(), 1);
        let _ = submit(&mut d, JobId(3), spec("stream-sum", &[]), 1, 2).unwrap();
        // The cancelled waiting job makes room as well; the running one is untouched.
        let _ = d.cancel(JobId(3), 3).unwrap();
        let _ = submit(&mut d, JobId(4), spec("stream-sum", &[]), 1, 4).unwrap();
        assert_eq!(d.job(JobId(1)).unwrap().status(), JobStatus::Running);
    }

    #[test]
    fn program_arguments_are_bounded_in_bytes() {
        let mut d = Dispatcher::new(settings());
        // 64 bytes in settings(): "--rate" (6) + 58 digits fit, 59 do not.
        let fits = "1".repeat(58);
        let program = spec("stream-sum", &["--rate", &fits]);
        assert_eq!(check_program_args(&program, 64), Ok(()));
        let too_long = "1".repeat(59);
        // The graph of a short call, so that only the size can refuse the long one.
        let graph =
            crate::graph::build_job_graph(&crate::examples::bundled(), &spec("stream-sum", &[]), 1)
                .unwrap();
        let long = spec("stream-sum", &["--rate", &too_long]);
        let err = d.submit(JobId(1), long, graph, 1, job(), 0).unwrap_err();
        assert_eq!(
            err,
            SubmitError::ArgumentsTooLarge {
                bytes: 65,
                limit: 64
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("web.submit.max-args-size") && text.contains("64"),
            "{text}"
        );
        assert!(d.job(JobId(1)).is_none());
    }

    #[test]
    fn a_silent_taskmanager_fails_its_jobs() {
        let mut d = Dispatcher::new(settings());
        let _ = d.register_taskmanager(tm("a", 1, 0), 0);
        let _ = submit(&mut d, JobId(1), spec("stream-sum", &[]), 1, 0).unwrap();
        let _ = d.tick(501);
        assert_eq!(d.job(JobId(1)).unwrap().status(), JobStatus::Failed);
        assert!(
            d.job(JobId(1)).unwrap().exceptions()[0]
                .exception
                .contains("no heartbeat")
        );
        assert_eq!(d.resources().total_slots(), 0);
    }

    /// Drives a checkpointed job with simulated time: whenever `now` is before the deadline
    /// `poll_timeout` names, a tick changes nothing; at the deadlines, periodic checkpoints
    /// complete and a silent TaskManager is declared lost exactly when its heartbeat timeout
    /// ends. So the JobManager may sleep until the deadline instead of ticking.
    #[test]
    fn ticks_before_the_deadline_do_nothing_and_deadlines_drive_checkpoints_and_timeouts() {
        let mut d = Dispatcher::new(settings());
        let _ = d.register_taskmanager(tm("a", 2, 0), 0);
        let mut config = Config::default();
        config
            .set("execution.checkpointing.interval", "100 ms")
            .unwrap();
        config
            .set("execution.checkpointing.dir", "/nowhere")
            .unwrap();
        config.set("restart-strategy.type", "none").unwrap();
        let program = spec("stream-sum", &[]);
        let graph =
            crate::graph::build_job_graph(&crate::examples::bundled(), &program, 2).unwrap();
        let job_settings = JobSettings::from_config(&config).unwrap();
        let out = d
            .submit(JobId(1), program, graph, 2, job_settings, 0)
            .unwrap();
        let executions: Vec<ExecutionId> = out
            .messages
            .iter()
            .filter_map(|(_, m)| match m {
                JmToTm::Deploy(dep) => Some(dep.execution),
                _ => None,
            })
            .collect();
        assert_eq!(executions.len(), 4, "two vertices of two subtasks");
        for &e in &executions {
            let _ = d.task_state(e, ExecutionState::Running, None, TaskMetrics::default(), 1);
        }
        let mut last_heartbeat = 1;
        let mut now = 1;
        while now < 3_000 {
            now += 7;
            if now < 2_000 && now - last_heartbeat >= 50 {
                d.heartbeat("a", Vec::new(), now);
                last_heartbeat = now;
            }
            let deadline = d.poll_timeout();
            if deadline.is_none_or(|at| now < at) {
                assert!(
                    d.tick(now).is_empty(),
                    "a tick at {now} before {deadline:?} acted"
                );
                assert_eq!(
                    d.poll_timeout(),
                    deadline,
                    "a tick at {now} moved the deadline"
                );
                continue;
            }
            let mut work = d.tick(now);
            // Carry the work out at once, as the service does: acknowledge triggered
            // checkpoints for every subtask, write their metadata.
            while !work.is_empty() {
                let mut next = Outbox::default();
                for (_, message) in std::mem::take(&mut work.messages) {
                    if let JmToTm::TriggerCheckpoint { location, .. } = message {
                        for &e in &executions {
                            next.extend(d.acknowledge_checkpoint(
                                e,
                                location.checkpoint_id,
                                SubtaskState::default(),
                                now,
                            ));
                        }
                    }
                }
                for (job, w) in std::mem::take(&mut work.storage) {
                    if let StorageWork::WriteMetadata { checkpoint_id, .. } = w {
                        next.extend(d.metadata_written(job, checkpoint_id, Ok(()), now));
                    }
                }
                work = next;
            }
            if d.resources().taskmanager("a").is_none() {
                // Silent since `last_heartbeat`: lost on the first tick past the timeout.
                assert_eq!(deadline, Some(last_heartbeat + 500 + 1));
                break;
            }
        }
        assert!(
            d.resources().taskmanager("a").is_none(),
            "the silent TaskManager was lost"
        );
        let jm = d.job(JobId(1)).unwrap();
        let completed = jm.checkpoints().stats().counts.completed;
        assert!(
            (20..=25).contains(&completed),
            "about one checkpoint per 100 ms until the loss at 2.5 s, got {completed}"
        );
        assert_eq!(
            jm.status(),
            JobStatus::Failed,
            "no restart strategy: the loss fails it"
        );
    }
}
