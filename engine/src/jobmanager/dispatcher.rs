//! The Dispatcher's core: accepts jobs, starts one JobMaster per job, routes TaskManager events
//! to the JobMasters and the ResourceManager, and keeps an archive of finished jobs. Pure: the
//! JobManager's I/O shell feeds it events and the time (ms since the epoch) and sends the
//! messages it returns.

use std::collections::BTreeMap;

use super::jobmaster::{Action, JobMaster};
use super::resourcemanager::{ResourceManager, TaskManagerInfo};
use super::restart::RestartPolicy;
use crate::api::StreamExecutionEnvironment;
use crate::checkpoint::{CheckpointCoordinator, CheckpointSettings, SubtaskState};
use crate::common::ids::{ExecutionId, JobId, ResourceId};
use crate::config::{CheckpointingMode, Config};
use crate::examples;
use crate::rpc::messages::{ExecutionState, JmToTm, ProgramSpec, TaskMetrics, TaskStateConfig};
use crate::state::LocalFileStorage;
use std::sync::Arc;

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
    /// The restart strategy of new jobs.
    pub restart: RestartPolicy,
}

/// A job's own settings: restart strategy, checkpointing and state, from the cluster's
/// configuration with the job's overrides applied.
#[derive(Clone, Debug)]
pub struct JobSettings {
    /// The restart strategy.
    pub restart: RestartPolicy,
    /// The checkpoint coordinator's settings.
    pub checkpoints: CheckpointSettings,
    /// What subtasks are told about state (the restore part is filled per subtask).
    pub state: TaskStateConfig,
    /// A savepoint or retained checkpoint to start from (`run -s PATH`).
    pub restore_from: Option<String>,
    /// The job is recovered by a new leader (HA): take over the checkpoints its earlier
    /// JobMaster left.
    pub recover: bool,
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
            },
            restore_from: None,
            recover: false,
        })
    }
}

/// Why a submission was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// No bundled program has that name.
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
}

/// A message for one TaskManager.
pub type Outbox = Vec<(ResourceId, JmToTm)>;

/// The JobManager's state.
#[derive(Debug)]
pub struct Dispatcher {
    /// Slot bookkeeping.
    pub rm: ResourceManager,
    /// Running and archived jobs.
    pub jobs: BTreeMap<JobId, JobMaster>,
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

    /// Builds the job graph of a program and starts its JobMaster.
    pub fn submit(
        &mut self,
        job_id: JobId,
        program: ProgramSpec,
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
        let code = examples::find(&program.name)
            .ok_or_else(|| SubmitError::UnknownProgram(program.name.clone()))?;
        let env = StreamExecutionEnvironment::new();
        let name =
            code.build(&env, &program.args)
                .map_err(|message| SubmitError::BadArguments {
                    program: program.name.clone(),
                    message,
                })?;
        let graph = env
            .into_graph()
            .job_graph(&name, parallelism)
            .map_err(|e| SubmitError::BadGraph(e.to_string()))?;
        let coordinator = CheckpointCoordinator::new(
            job_id.to_string(),
            job.checkpoints,
            JobMaster::topology(&graph),
            Arc::new(LocalFileStorage),
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
        jm.state = job.state;
        if let Some(path) = &job.restore_from {
            jm.restore_from(path)
                .map_err(|e| SubmitError::BadRestore(e.to_string()))?;
        }
        if job.recover {
            match jm.checkpoints.0.recover_retained() {
                Ok(ids) => {
                    tracing::info!(%job_id, checkpoints = ?ids, "took over the job's retained checkpoints")
                }
                Err(e) => {
                    tracing::warn!(%job_id, error = %e, "cannot take over the job's checkpoints")
                }
            }
        }
        let actions = jm.start(now);
        self.jobs.insert(job_id, jm);
        Ok(self.run(actions, now))
    }

    /// A TaskManager registered (or re-registered after a restart).
    pub fn register_taskmanager(&mut self, info: TaskManagerInfo, now: u64) -> Outbox {
        let id = info.resource_id.clone();
        let lost = self.rm.register(info);
        let mut actions = Vec::new();
        for job in lost {
            if let Some(jm) = self.jobs.get_mut(&job) {
                actions.extend(jm.taskmanager_lost(&id, "it registered again (restarted)", now));
            }
        }
        self.run(actions, now)
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
            if !jm.status.is_globally_terminal() {
                actions.extend(jm.taskmanager_lost(id, reason, now));
            }
        }
        self.run(actions, now)
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

    /// Triggers a savepoint of a running job (and stops it afterwards with `stop`); returns
    /// the request id to poll.
    pub fn trigger_savepoint(
        &mut self,
        job: JobId,
        target: Option<String>,
        stop: bool,
        now: u64,
    ) -> Result<(String, Outbox), SavepointError> {
        let jm = self
            .jobs
            .get_mut(&job)
            .ok_or(SavepointError::NotFound(job))?;
        let (request_id, actions) = jm
            .trigger_savepoint(target, stop, now)
            .map_err(SavepointError::Refused)?;
        Ok((request_id, self.run(actions, now)))
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
        if jm.status.is_globally_terminal() {
            return Err(CancelError::Ended(job, jm.status.name()));
        }
        self.rm.cancel_request(job);
        let actions = jm.cancel(now);
        Ok(self.run(actions, now))
    }

    /// Time passes: slot requests expire, silent TaskManagers are declared lost, waiting jobs get
    /// slots that became free, old finished jobs leave the archive.
    pub fn tick(&mut self, now: u64) -> Outbox {
        let mut out = Vec::new();
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

    fn allocate(&mut self, now: u64) -> Outbox {
        let mut actions = Vec::new();
        for (job, slots) in self.rm.allocate() {
            match self.jobs.get_mut(&job) {
                Some(jm) => actions.extend(jm.slots_allocated(slots, now)),
                None => self.rm.release(job),
            }
        }
        self.run(actions, now)
    }

    fn expire_archive(&mut self, now: u64) {
        let expiration = self.settings.jobstore_expiration_ms;
        self.jobs.retain(|_, jm| {
            jm.end_time
                .is_none_or(|end| now.saturating_sub(end) < expiration)
        });
        let mut ended: Vec<(u64, JobId)> = self
            .jobs
            .values()
            .filter_map(|jm| jm.end_time.map(|t| (t, jm.job_id)))
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
        let mut out = Vec::new();
        let mut needs_allocation = false;
        for action in actions {
            match action {
                Action::RequestSlots { job, slots } => {
                    self.rm.request(job, slots, now);
                    needs_allocation = true;
                }
                Action::Deploy {
                    resource_id,
                    deployment,
                } => out.push((resource_id, JmToTm::Deploy(deployment))),
                Action::Cancel {
                    resource_id,
                    execution,
                } => out.push((resource_id, JmToTm::Cancel { execution })),
                Action::TriggerCheckpoint {
                    resource_id,
                    execution,
                    timestamp,
                    location,
                } => out.push((
                    resource_id,
                    JmToTm::TriggerCheckpoint {
                        execution,
                        timestamp,
                        location,
                    },
                )),
                Action::NotifyCheckpoint {
                    resource_id,
                    execution,
                    checkpoint_id,
                    complete,
                } => out.push((
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
                )),
                Action::Reset { job, resource_ids } => {
                    self.rm.release(job);
                    out.extend(
                        resource_ids
                            .into_iter()
                            .map(|id| (id, JmToTm::ReleaseJob { job })),
                    );
                }
                Action::Terminated { job, resource_ids } => {
                    self.rm.release(job);
                    needs_allocation = true;
                    out.extend(
                        resource_ids
                            .into_iter()
                            .map(|id| (id, JmToTm::ReleaseJob { job })),
                    );
                }
            }
        }
        if needs_allocation {
            out.extend(self.allocate(now));
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
            restart: RestartPolicy::None,
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
        ProgramSpec {
            name: name.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn too_little_parallelism_waits_then_fails_and_never_runs_smaller() {
        let mut d = Dispatcher::new(settings());
        d.register_taskmanager(tm("a", 2, 0), 0);
        let out = d
            .submit(JobId(1), spec("stream-sum", &[]), 3, job(), 0)
            .unwrap();
        assert!(out.is_empty(), "nothing may be deployed with 2 of 3 slots");
        d.heartbeat("a", vec![], 600);
        assert!(d.tick(999).is_empty());
        d.tick(1000);
        let jm = &d.jobs[&JobId(1)];
        assert_eq!(jm.status, JobStatus::Failed);
        assert_eq!(jm.exceptions[0].exception, NO_RESOURCE);
        assert_eq!(d.rm.free_slots(), 2);
    }

    #[test]
    fn two_jobs_share_taskmanagers_and_cancel_frees_slots() {
        let mut d = Dispatcher::new(settings());
        d.register_taskmanager(tm("a", 2, 0), 0);
        d.register_taskmanager(tm("b", 2, 0), 0);
        let out1 = d
            .submit(JobId(1), spec("stream-sum", &[]), 2, job(), 0)
            .unwrap();
        let out2 = d
            .submit(JobId(2), spec("stream-sum", &[]), 2, job(), 0)
            .unwrap();
        assert!(!out1.is_empty() && !out2.is_empty());
        assert_eq!(d.rm.free_slots(), 0);
        let out = d.cancel(JobId(1), 1).unwrap();
        assert!(out.iter().all(|(_, m)| matches!(m, JmToTm::Cancel { .. })));
        for (_, m) in out {
            if let JmToTm::Cancel { execution } = m {
                d.task_state(
                    execution,
                    ExecutionState::Canceled,
                    None,
                    TaskMetrics::default(),
                    2,
                );
            }
        }
        assert_eq!(d.jobs[&JobId(1)].status, JobStatus::Canceled);
        assert_eq!(d.rm.free_slots(), 2);
        assert_eq!(
            d.cancel(JobId(1), 3).unwrap_err(),
            CancelError::Ended(JobId(1), "CANCELED")
        );
    }

    #[test]
    fn bad_submissions_are_refused_with_reasons() {
        let mut d = Dispatcher::new(settings());
        assert!(matches!(
            d.submit(JobId(1), spec("nope", &[]), 1, job(), 0),
            Err(SubmitError::UnknownProgram(_))
        ));
        let err = d
            .submit(JobId(1), spec("stream-sum", &["--rate", "x"]), 1, job(), 0)
            .unwrap_err();
        assert!(err.to_string().contains("--rate"), "{err}");
        assert_eq!(
            d.submit(JobId(1), spec("wordcount", &[]), 0, job(), 0)
                .unwrap_err(),
            SubmitError::BadParallelism
        );
    }

    #[test]
    fn a_silent_taskmanager_fails_its_jobs() {
        let mut d = Dispatcher::new(settings());
        d.register_taskmanager(tm("a", 1, 0), 0);
        d.submit(JobId(1), spec("stream-sum", &[]), 1, job(), 0)
            .unwrap();
        d.tick(501);
        assert_eq!(d.jobs[&JobId(1)].status, JobStatus::Failed);
        assert!(
            d.jobs[&JobId(1)].exceptions[0]
                .exception
                .contains("no heartbeat")
        );
        assert_eq!(d.rm.total_slots(), 0);
    }
}
