//! The JobMaster of one job: expands the job graph into parallel executions, asks for slots,
//! deploys every subtask straight to its TaskManager, tracks execution states and drives the
//! job's state machine. A pure core: events and the time (ms since the epoch) go in, actions
//! come out; the JobManager's I/O shell carries the actions out.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use super::adaptive::{Adaptive, AdaptiveSettings, Bounds, Decision, Phase, Requirements};
use super::resourcemanager::SlotRef;
use super::restart::{RestartPolicy, RestartTracker};
use crate::api::ShipStrategy;
use crate::checkpoint::io::RetainedEntries;
use crate::checkpoint::{
    AfterSavepoint, CheckpointAction, CheckpointCoordinator, CheckpointMetadata, RestoreError,
    RestoreVerdicts, StorageWork, SubtaskState, TaskKey, TaskPhase, TaskRestore, Terminal,
    TopologyOperator, VertexTopology,
};
use crate::common::ids::{ExecutionId, JobId, ResourceId};
use crate::graph::JobGraph;
use crate::rpc::messages::{
    ExecutionState, InputDeployment, OutputDeployment, PartitionLocation, ProducerGroup,
    ProgramSpec, TaskDeployment, TaskMetrics, TaskStateConfig,
};
use crate::state::SnapshotLocation;

/// Flink's job states.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    /// Accepted, the JobMaster is being set up.
    Initializing,
    /// The execution graph exists, nothing is scheduled yet.
    Created,
    /// Scheduled or running.
    Running,
    /// A task failed; the others are being cancelled.
    Failing,
    /// Ended with a failure.
    Failed,
    /// Being cancelled.
    Cancelling,
    /// Cancelled.
    Canceled,
    /// All tasks finished.
    Finished,
    /// Waiting to be restarted.
    Restarting,
    /// Stopped without ending (JobManager lost leadership).
    Suspended,
    /// Being reconciled after a failover.
    Reconciling,
}

impl JobStatus {
    /// Flink's upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            JobStatus::Initializing => "INITIALIZING",
            JobStatus::Created => "CREATED",
            JobStatus::Running => "RUNNING",
            JobStatus::Failing => "FAILING",
            JobStatus::Failed => "FAILED",
            JobStatus::Cancelling => "CANCELLING",
            JobStatus::Canceled => "CANCELED",
            JobStatus::Finished => "FINISHED",
            JobStatus::Restarting => "RESTARTING",
            JobStatus::Suspended => "SUSPENDED",
            JobStatus::Reconciling => "RECONCILING",
        }
    }

    /// Whether the job can change no more.
    pub fn is_globally_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Failed | JobStatus::Canceled | JobStatus::Finished
        )
    }
}

/// One attempt of one subtask.
#[derive(Clone, Debug, Serialize)]
pub struct Execution {
    /// Its state.
    pub state: ExecutionState,
    /// Its attempt number.
    pub attempt: u32,
    /// Where it runs.
    pub slot: Option<SlotRef>,
    /// When it entered each state (ms since the epoch).
    pub timestamps: BTreeMap<ExecutionState, u64>,
    /// Its I/O counters.
    pub metrics: TaskMetrics,
    /// Why it failed.
    pub failure: Option<String>,
}

/// A failure recorded for `GET /jobs/:id/exceptions`.
#[derive(Clone, Debug, Serialize)]
pub struct ExceptionEntry {
    /// When (ms since the epoch).
    pub timestamp: u64,
    /// The failure's text.
    pub exception: String,
    /// The failed task, if one.
    pub task_name: Option<String>,
    /// The TaskManager it ran on.
    pub location: Option<String>,
    /// Failures of other tasks that happened while this one was being handled
    /// (`"<task>: <failure>"`), Flink's `concurrentExceptions`.
    pub concurrent: Vec<String>,
}

/// What the JobManager must do for a JobMaster.
#[derive(Clone, Debug)]
pub enum Action {
    /// Ask the ResourceManager for this many slots.
    RequestSlots {
        /// The job.
        job: JobId,
        /// How many.
        slots: u32,
        /// The fewest the job can run with: a batch job takes what is free, from one slot up
        /// to `slots`; others want all `slots` at once.
        at_least: u32,
    },
    /// The adaptive scheduler's job wants this many slots (what an active resource driver
    /// should provide); it takes them itself with `RequestSlots` once it decides to run.
    DeclareSlots {
        /// The job.
        job: JobId,
        /// How many it could use.
        slots: u32,
    },
    /// Send a producer group to a TaskManager, before the deployments that read it.
    ShipProducers {
        /// Where.
        resource_id: ResourceId,
        /// The group (shared by every TaskManager it goes to).
        group: Arc<ProducerGroup>,
    },
    /// Send a deployment to a TaskManager.
    Deploy {
        /// Where.
        resource_id: ResourceId,
        /// What.
        deployment: Box<TaskDeployment>,
    },
    /// Ask a TaskManager to cancel an execution.
    Cancel {
        /// Where.
        resource_id: ResourceId,
        /// Which.
        execution: ExecutionId,
    },
    /// The job restarts: free its slots and the TaskManagers' partitions of the old attempts.
    Reset {
        /// The job.
        job: JobId,
        /// TaskManagers that hosted its executions.
        resource_ids: Vec<ResourceId>,
    },
    /// Start a checkpoint at a subtask (a source, or one whose producers all finished).
    TriggerCheckpoint {
        /// Where the subtask runs.
        resource_id: ResourceId,
        /// The subtask.
        execution: ExecutionId,
        /// Trigger time (ms since the epoch).
        timestamp: u64,
        /// Where its snapshot goes.
        location: SnapshotLocation,
        /// A source first sends the watermark to the end of time (a stop with drain).
        drain: bool,
    },
    /// Tell a subtask that a checkpoint completed (`complete`) or was given up.
    NotifyCheckpoint {
        /// Where the subtask runs.
        resource_id: ResourceId,
        /// The subtask.
        execution: ExecutionId,
        /// The checkpoint.
        checkpoint_id: u64,
        /// Completed (commit) or aborted.
        complete: bool,
    },
    /// The job reached a terminal state: free its slots and the TaskManagers' partitions.
    Terminated {
        /// The job.
        job: JobId,
        /// TaskManagers that hosted its executions.
        resource_ids: Vec<ResourceId>,
    },
    /// File work for the job's checkpoints. The JobManager carries a job's file work out in the
    /// order it was asked for, off its lock, and reports results back as events.
    Storage {
        /// The job.
        job: JobId,
        /// What to do.
        work: StorageWork,
    },
}

/// The message of a job that could not get its slots, as in Flink.
pub const NO_RESOURCE: &str = "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Could not acquire the minimum required resources.";

/// Why new resource requirements were refused (REST `PUT /jobs/:id/resource-requirements`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequirementsError {
    /// The default scheduler runs the job at a fixed parallelism.
    #[error(
        "the job runs under the default scheduler, which cannot change a running job's parallelism; set jobmanager.scheduler: adaptive"
    )]
    NotAdaptive,
    /// No such job.
    #[error("no job with id {0}")]
    UnknownJob(JobId),
    /// The job has ended or is being cancelled.
    #[error("the job is {0}: its requirements can no longer change")]
    Ended(&'static str),
    /// The requirements do not name exactly the job's vertices.
    #[error("the requirements must name every vertex of the job, and only those")]
    Vertices,
    /// Bounds outside `1 <= lower <= upper <= max parallelism`.
    #[error(
        "vertex {vertex}: bounds {lower}..{upper} are not within 1 <= lowerBound <= upperBound <= {max} (its maximum parallelism)"
    )]
    Bounds {
        /// The vertex id.
        vertex: String,
        /// The lower bound given.
        lower: u32,
        /// The upper bound given.
        upper: u32,
        /// The vertex's maximum parallelism.
        max: u32,
    },
    /// Vertices connected by a forward exchange must keep equal parallelism.
    #[error(
        "vertices {from} and {to} are connected one-to-one (forward) and must have the same bounds"
    )]
    Forward {
        /// The producing vertex.
        from: String,
        /// The consuming vertex.
        to: String,
    },
}

/// One job's master.
#[derive(Debug)]
pub struct JobMaster {
    /// The job's id.
    job_id: JobId,
    /// The job's name.
    name: String,
    /// The program and its arguments.
    program: ProgramSpec,
    /// Parallelism given at submission (`-p` or `parallelism.default`).
    default_parallelism: u32,
    /// The job graph.
    graph: JobGraph,
    fingerprint: String,
    /// The job's state.
    status: JobStatus,
    /// When the job entered each state (ms since the epoch).
    timestamps: BTreeMap<JobStatus, u64>,
    /// Submission time.
    start_time: u64,
    /// When it ended, if it did.
    end_time: Option<u64>,
    /// Per vertex, per subtask.
    executions: Vec<Vec<Execution>>,
    /// How many executions are not in a terminal state (kept by `set_execution`, so a
    /// failover of n subtasks is not n scans of n).
    unstopped: usize,
    /// Failures, oldest first.
    exceptions: Vec<ExceptionEntry>,
    /// Slots granted to this job (subtask `i` of every vertex shares slot `i`).
    slots: Vec<SlotRef>,
    /// Restart strategy state.
    restart: RestartTracker,
    /// When a pending restart may happen (ms since the epoch).
    restart_at: Option<u64>,
    /// State of the jitter's random numbers (seeded from the job id, so the core stays pure).
    rng: u64,
    /// How many producer groups were built (the next group's id).
    groups_built: u64,
    /// How subtasks keep and checkpoint state (the restore part is per subtask, below).
    state: TaskStateConfig,
    /// `pipeline.auto-watermark-interval` in milliseconds.
    auto_watermark_interval_ms: u64,
    /// What each subtask is restored from at its next deployment, by (vertex, subtask).
    restores: BTreeMap<(usize, usize), TaskRestore>,
    /// The checkpoint coordinator.
    checkpoints: Checkpoints,
    /// Savepoint requests by id (REST `triggerid`), in request order.
    savepoints: BTreeMap<String, SavepointRequest>,
    /// A stop-with-savepoint is under way: when the savepoint completes the job stops and ends
    /// FINISHED.
    stop_request: Option<String>,
    /// The (re)start waits for the check of its restore candidates with this ticket.
    awaiting_restore: Option<u64>,
    /// The last ticket handed out.
    restore_tickets: u64,
    /// The adaptive scheduler, when it runs this job (`jobmanager.scheduler: adaptive`).
    adaptive: Option<AdaptiveJob>,
    /// Batch execution, when the job graph is a batch job's.
    batch: Option<Batch>,
}

/// How a batch job is being run: stage by stage on slots that each run one subtask at a time,
/// its exchanges blocking (a consumer starts once every producer it reads finished and wrote
/// its output to disk), and a failed subtask restarted alone — its region — reading its inputs
/// again from the finished producers' files.
#[derive(Debug, Default)]
struct Batch {
    /// The subtask each of the job's slots runs now, by index into `JobMaster::slots`.
    occupant: Vec<Option<(usize, usize)>>,
    /// Subtasks failed and waiting for their restart delay: when each may run again.
    restart_at: BTreeMap<(usize, usize), u64>,
    /// Subtasks being cancelled because an input they read was lost: they run again once
    /// stopped, without counting as a failure of their own.
    rerun: HashSet<(usize, usize)>,
    /// The producers of each job edge as they last ran, by edge; built when a consumer is
    /// deployed and forgotten when a producer runs again.
    groups: HashMap<usize, Arc<ProducerGroup>>,
    /// The groups sent to each TaskManager.
    shipped: HashSet<(ResourceId, u64)>,
    /// Subtasks started again by region failover (failed or lost ones and the producers of
    /// lost output), over the job's life.
    restarted_tasks: u64,
}

/// A job under the adaptive scheduler: its decisions and the job graph as submitted, which
/// holds each vertex's parallelism at the upper bound (`graph` is the one running).
#[derive(Debug)]
struct AdaptiveJob {
    core: Adaptive,
    submitted: JobGraph,
}

/// The checkpoint coordinator of a job (wrapped for `Debug`).
struct Checkpoints(CheckpointCoordinator);

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointCoordinator")
            .field("pending", &self.0.pending_ids())
            .finish()
    }
}

/// A savepoint asked for through REST or the CLI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavepointRequest {
    /// Whether the job stops once the savepoint completes (`sluice stop`).
    pub stop: bool,
    /// Whether the sources sent the watermark to the end of time first (`stop --drain`).
    pub drain: bool,
    /// `None` while in progress; then the savepoint's path or why it failed.
    pub result: Option<Result<String, String>>,
}

impl JobMaster {
    /// A JobMaster for a job graph; nothing scheduled yet.
    pub fn new(
        job_id: JobId,
        program: ProgramSpec,
        default_parallelism: u32,
        graph: JobGraph,
        restart: RestartPolicy,
        checkpoints: CheckpointCoordinator,
        now: u64,
    ) -> Self {
        let executions = Self::executions_of(&graph, 0, now);
        let fingerprint = graph.fingerprint();
        let batch = graph.batch;
        JobMaster {
            job_id,
            name: graph.name.clone(),
            program,
            default_parallelism,
            graph,
            fingerprint,
            status: JobStatus::Created,
            timestamps: BTreeMap::from([(JobStatus::Initializing, now), (JobStatus::Created, now)]),
            start_time: now,
            end_time: None,
            unstopped: executions.iter().map(Vec::len).sum(),
            executions,
            exceptions: Vec::new(),
            slots: Vec::new(),
            restart: RestartTracker::new(restart),
            restart_at: None,
            rng: (job_id.0 as u64) | 1,
            groups_built: 0,
            auto_watermark_interval_ms: 200,
            state: TaskStateConfig {
                backend: "hashmap".into(),
                exactly_once: true,
                ..TaskStateConfig::default()
            },
            restores: BTreeMap::new(),
            checkpoints: Checkpoints(checkpoints),
            savepoints: BTreeMap::new(),
            stop_request: None,
            awaiting_restore: None,
            restore_tickets: 0,
            adaptive: None,
            batch: None,
        }
        .batch_if(batch)
    }

    fn batch_if(mut self, batch: bool) -> Self {
        if batch {
            self.batch = Some(Batch::default());
        }
        self
    }

    /// Whether the job runs in batch execution mode.
    pub fn is_batch(&self) -> bool {
        self.batch.is_some()
    }

    /// Subtasks restarted by region failover so far (batch jobs; Flink's
    /// `numberOfRestarts` counts failovers, this counts the tasks they restarted).
    pub fn restarted_tasks(&self) -> u64 {
        self.batch.as_ref().map_or(0, |b| b.restarted_tasks)
    }

    /// Runs this job under the adaptive scheduler: each vertex between parallelism 1 and its
    /// parallelism in the graph (its maximum parallelism with `scheduler-mode: reactive`).
    /// Called before [`start`](Self::start).
    pub fn set_adaptive(&mut self, settings: AdaptiveSettings, now: u64) {
        let bounds = self
            .graph
            .vertices
            .iter()
            .map(|v| Bounds {
                lower: 1,
                upper: if settings.reactive {
                    v.max_parallelism
                } else {
                    v.parallelism
                },
            })
            .collect();
        let core = Adaptive::new(settings, Requirements(bounds), now);
        self.adaptive = Some(AdaptiveJob {
            core,
            submitted: self.graph.clone(),
        });
    }

    /// The adaptive scheduler's state (Flink's names) and the job's requirements, if it runs
    /// the job.
    pub fn adaptive(&self) -> Option<(&'static str, &Requirements)> {
        self.adaptive
            .as_ref()
            .map(|a| (a.core.phase().name(), a.core.requirements()))
    }

    /// The job graph as submitted: the one running, except under the adaptive scheduler,
    /// whose running graph is this one rescaled.
    pub fn submitted_graph(&self) -> &JobGraph {
        self.adaptive.as_ref().map_or(&self.graph, |a| &a.submitted)
    }

    /// The slots this job could have now (free ones plus its own): the adaptive scheduler
    /// decides whether to start or rescale. Without it, nothing happens.
    pub fn slots_available(&mut self, available: u32, now: u64) -> Vec<Action> {
        let Some(a) = self.adaptive.as_mut() else {
            return Vec::new();
        };
        let decision = a.core.available(available, now);
        self.adaptive_decision(decision, now)
    }

    /// New per-vertex bounds of parallelism (REST `PUT /jobs/:id/resource-requirements`), in
    /// vertex order. A running job whose parallelism they change rescales at once.
    pub fn set_requirements(
        &mut self,
        bounds: Vec<Bounds>,
        now: u64,
    ) -> Result<Vec<Action>, RequirementsError> {
        let Some(a) = self.adaptive.as_ref() else {
            return Err(RequirementsError::NotAdaptive);
        };
        if self.status.is_globally_terminal() || self.status == JobStatus::Cancelling {
            return Err(RequirementsError::Ended(self.status.name()));
        }
        let graph = &a.submitted;
        if bounds.len() != graph.vertices.len() {
            return Err(RequirementsError::Vertices);
        }
        for (v, b) in graph.vertices.iter().zip(&bounds) {
            if b.lower == 0 || b.lower > b.upper || b.upper > v.max_parallelism {
                return Err(RequirementsError::Bounds {
                    vertex: v.id.clone(),
                    lower: b.lower,
                    upper: b.upper,
                    max: v.max_parallelism,
                });
            }
        }
        for e in &graph.edges {
            if e.strategy == ShipStrategy::Forward && bounds[e.source] != bounds[e.target] {
                return Err(RequirementsError::Forward {
                    from: graph.vertices[e.source].id.clone(),
                    to: graph.vertices[e.target].id.clone(),
                });
            }
        }
        let requirements = Requirements(bounds);
        let declare = Action::DeclareSlots {
            job: self.job_id,
            slots: requirements.max_slots(),
        };
        let a = self.adaptive.as_mut().expect("checked above");
        let decision = a.core.set_requirements(requirements, now);
        let mut actions = vec![declare];
        actions.extend(self.adaptive_decision(decision, now));
        Ok(actions)
    }

    /// Carries out an adaptive scheduler's decision.
    fn adaptive_decision(&mut self, decision: Option<Decision>, now: u64) -> Vec<Action> {
        match decision {
            None => Vec::new(),
            Some(Decision::Start(slots)) => self.start_adaptive(slots, now),
            Some(Decision::Rescale(slots)) => {
                tracing::info!(job_id = %self.job_id, slots, "rescaling the job to the slots available");
                let decisions = self.checkpoints.0.job_reset(now);
                let mut actions = self.checkpoint_actions(decisions, now);
                self.stop_request = None;
                self.set_status(JobStatus::Restarting, now);
                self.restart_at = Some(now);
                actions.extend(self.cancel_executions(now));
                actions.extend(self.tick(now));
                actions
            }
            Some(Decision::GiveUp) => {
                self.job_exception(NO_RESOURCE.into(), now);
                self.set_status(JobStatus::Failing, now);
                let mut actions = self.cancel_executions(now);
                actions.extend(self.terminate_if_done(now));
                actions
            }
        }
    }

    /// Runs the job on `slots` slots: each vertex at the parallelism the requirements give it
    /// there, restored from the latest checkpoint by key group.
    fn start_adaptive(&mut self, slots: u32, now: u64) -> Vec<Action> {
        let Some(a) = self.adaptive.as_mut() else {
            return Vec::new();
        };
        let parallelism = a.core.requirements().parallelism(slots);
        let graph = match a.submitted.rescaled(&parallelism) {
            Ok(graph) => graph,
            Err(e) => {
                // Requirements are checked when set; this is a defect, not the user's input.
                tracing::error!(job_id = %self.job_id, error = %e, "cannot rescale the job graph");
                return self.adaptive_decision(Some(Decision::GiveUp), now);
            }
        };
        a.core.started(slots, now);
        tracing::info!(job_id = %self.job_id, slots, ?parallelism, "the adaptive scheduler runs the job");
        let attempt = self
            .executions
            .iter()
            .flatten()
            .map(|e| e.attempt)
            .max()
            .unwrap_or(0);
        self.executions = Self::executions_of(&graph, attempt, now);
        self.unstopped = self.executions.iter().map(Vec::len).sum();
        self.fingerprint = graph.fingerprint();
        self.checkpoints.0.set_topology(Self::topology(&graph));
        self.graph = graph;
        self.begin(now)
    }

    /// One execution per subtask of `graph`, not started.
    fn executions_of(graph: &JobGraph, attempt: u32, now: u64) -> Vec<Vec<Execution>> {
        graph
            .vertices
            .iter()
            .map(|v| {
                (0..v.parallelism)
                    .map(|_| Execution {
                        state: ExecutionState::Created,
                        attempt,
                        slot: None,
                        timestamps: BTreeMap::from([(ExecutionState::Created, now)]),
                        metrics: TaskMetrics::default(),
                        failure: None,
                    })
                    .collect()
            })
            .collect()
    }

    /// The job's id.
    pub fn job_id(&self) -> JobId {
        self.job_id
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The program and its arguments.
    pub fn program(&self) -> &ProgramSpec {
        &self.program
    }

    /// The job graph.
    pub fn graph(&self) -> &JobGraph {
        &self.graph
    }

    /// The job's state.
    pub fn status(&self) -> JobStatus {
        self.status
    }

    /// When the job entered each state (ms since the epoch).
    pub fn timestamps(&self) -> &BTreeMap<JobStatus, u64> {
        &self.timestamps
    }

    /// Submission time (ms since the epoch).
    pub fn start_time(&self) -> u64 {
        self.start_time
    }

    /// When the job ended, if it did.
    pub fn end_time(&self) -> Option<u64> {
        self.end_time
    }

    /// Per vertex, per subtask: the current attempt.
    pub fn executions(&self) -> &[Vec<Execution>] {
        &self.executions
    }

    /// Whether the job was submitted but none of its tasks has reached a TaskManager yet: it
    /// waits for its restore check or for slots. A job restarting after a failure ran before and
    /// does not count.
    pub fn is_pending(&self) -> bool {
        matches!(self.status, JobStatus::Created | JobStatus::Initializing)
            || (self.status == JobStatus::Running
                && self.restart.restarts() == 0
                && self.executions.iter().flatten().all(|e| {
                    matches!(e.state, ExecutionState::Created | ExecutionState::Scheduled)
                }))
    }

    /// Failures, oldest first.
    pub fn exceptions(&self) -> &[ExceptionEntry] {
        &self.exceptions
    }

    /// Restarts so far.
    pub fn restarts(&self) -> u32 {
        self.restart.restarts()
    }

    /// The checkpoint coordinator, for reading (statistics, configuration).
    pub fn checkpoints(&self) -> &CheckpointCoordinator {
        &self.checkpoints.0
    }

    /// A savepoint request by its id.
    pub fn savepoint(&self, request_id: &str) -> Option<&SavepointRequest> {
        self.savepoints.get(request_id)
    }

    /// How subtasks keep and checkpoint state.
    pub fn state_config(&self) -> &TaskStateConfig {
        &self.state
    }

    /// Sets how often the job's timestamp assigners emit watermarks (before the job starts).
    pub fn set_auto_watermark_interval(&mut self, interval: std::time::Duration) {
        self.auto_watermark_interval_ms = interval.as_millis().min(u64::MAX as u128) as u64;
    }

    /// Sets how subtasks keep and checkpoint state (before the job starts).
    pub fn set_state_config(&mut self, state: TaskStateConfig) {
        self.state = state;
    }

    /// The checkpoint topology of a job graph: per vertex, its parallelism, key groups, inputs
    /// and the operator ids of its chain.
    pub fn topology(graph: &JobGraph) -> Vec<VertexTopology> {
        graph
            .vertices
            .iter()
            .map(|v| VertexTopology {
                parallelism: v.parallelism,
                max_parallelism: v.max_parallelism,
                inputs: v.inputs.iter().map(|&e| graph.edges[e].source).collect(),
                operators: v
                    .nodes
                    .iter()
                    .zip(&v.operators)
                    .map(|(&node, identity)| TopologyOperator {
                        node: node as u32,
                        identity: identity.clone(),
                    })
                    .collect(),
            })
            .collect()
    }

    fn task_key(v: usize, s: usize) -> TaskKey {
        TaskKey {
            vertex: v as u32,
            subtask: s as u32,
        }
    }

    /// Turns the coordinator's decisions into messages and job changes.
    fn checkpoint_actions(&mut self, decisions: Vec<CheckpointAction>, now: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        for decision in decisions {
            match decision {
                CheckpointAction::Trigger {
                    timestamp,
                    location,
                    tasks,
                    ..
                } => {
                    for t in tasks {
                        if let Some((resource_id, execution)) = self.running_at(t) {
                            actions.push(Action::TriggerCheckpoint {
                                resource_id,
                                execution,
                                timestamp,
                                location: location.clone(),
                                drain: false,
                            });
                        }
                    }
                }
                CheckpointAction::NotifyComplete {
                    checkpoint_id,
                    tasks,
                } => actions.extend(self.notify(checkpoint_id, tasks, true)),
                CheckpointAction::NotifyAborted {
                    checkpoint_id,
                    tasks,
                } => actions.extend(self.notify(checkpoint_id, tasks, false)),
                CheckpointAction::SavepointDone { request_id, result } => {
                    let mut drained = false;
                    if let Some(r) = self.savepoints.get_mut(&request_id) {
                        r.result = Some(result.clone());
                        drained = r.drain;
                    }
                    if self.stop_request.as_deref() == Some(request_id.as_str()) {
                        match result {
                            Ok(_) => actions.extend(self.cancel(now)),
                            Err(why) if drained && self.status == JobStatus::Running => {
                                // Its sources sent the end of event time: running on, every
                                // record would be late. It restarts from its last checkpoint.
                                self.job_exception(
                                    format!(
                                        "stop with drain failed, so the job restarts from its \
                                         latest checkpoint (its sources had ended event time): \
                                         {why}"
                                    ),
                                    now,
                                );
                                actions.extend(self.fail(now));
                            }
                            Err(_) => self.stop_request = None,
                        }
                    }
                }
                CheckpointAction::Storage(work) => actions.push(Action::Storage {
                    job: self.job_id,
                    work,
                }),
                CheckpointAction::FailJob { reason } => {
                    if self.status == JobStatus::Running {
                        self.exceptions.push(ExceptionEntry {
                            timestamp: now,
                            exception: reason,
                            task_name: None,
                            location: None,
                            concurrent: Vec::new(),
                        });
                        actions.extend(self.fail(now));
                    }
                }
            }
        }
        actions
    }

    fn notify(&self, checkpoint_id: u64, tasks: Vec<TaskKey>, complete: bool) -> Vec<Action> {
        tasks
            .into_iter()
            .filter_map(|t| self.running_at(t))
            .map(|(resource_id, execution)| Action::NotifyCheckpoint {
                resource_id,
                execution,
                checkpoint_id,
                complete,
            })
            .collect()
    }

    /// Where a running task runs, with its execution id.
    fn running_at(&self, t: TaskKey) -> Option<(ResourceId, ExecutionId)> {
        let (v, s) = (t.vertex as usize, t.subtask as usize);
        let e = self.executions.get(v)?.get(s)?;
        if e.state.is_terminal() {
            return None;
        }
        Some((
            e.slot.as_ref()?.resource_id.clone(),
            self.execution_id(v, s),
        ))
    }

    /// A subtask acknowledged a checkpoint.
    pub fn acknowledge_checkpoint(
        &mut self,
        id: ExecutionId,
        checkpoint_id: u64,
        state: SubtaskState,
        now: u64,
    ) -> Vec<Action> {
        let Some((v, s)) = self.find(id) else {
            return Vec::new();
        };
        let decisions =
            self.checkpoints
                .0
                .acknowledge(now, Self::task_key(v, s), checkpoint_id, state);
        self.checkpoint_actions(decisions, now)
    }

    /// A subtask could not take its snapshot.
    pub fn decline_checkpoint(
        &mut self,
        id: ExecutionId,
        checkpoint_id: u64,
        reason: String,
        now: u64,
    ) -> Vec<Action> {
        let Some((v, s)) = self.find(id) else {
            return Vec::new();
        };
        // A task that is not running (yet or any more) declines without its own fault, and so
        // does one whose barrier a newer checkpoint's overtook.
        let counts = self.executions[v][s].state == ExecutionState::Running
            && !reason.contains("is not running")
            && !reason.contains(crate::checkpoint::OVERTAKEN);
        let decisions =
            self.checkpoints
                .0
                .decline(now, Self::task_key(v, s), checkpoint_id, reason, counts);
        self.checkpoint_actions(decisions, now)
    }

    /// Asks for a savepoint into `target` (or the configured savepoint directory); `after` says
    /// whether the job runs on, stops once it completes, or drains first. `request_id` (drawn
    /// at random by the caller, 32 hex digits) is what REST polls; the savepoint's directory
    /// name takes its random part from it.
    pub fn trigger_savepoint(
        &mut self,
        request_id: String,
        target: Option<String>,
        after: AfterSavepoint,
        now: u64,
    ) -> Result<Vec<Action>, String> {
        let (stop, drain) = (after != AfterSavepoint::Run, after == AfterSavepoint::Drain);
        if self.status != JobStatus::Running {
            return Err(format!(
                "the job is {}; savepoints are taken of running jobs",
                self.status.name()
            ));
        }
        if self.batch.is_some() {
            return Err(
                "the job runs in batch execution mode, which takes no checkpoints or savepoints"
                    .into(),
            );
        }
        if stop && self.stop_request.is_some() {
            return Err("the job is already being stopped with a savepoint".into());
        }
        if self.savepoints.contains_key(&request_id) {
            return Err(format!("savepoint request {request_id} exists already"));
        }
        let decisions = self
            .checkpoints
            .0
            .trigger_savepoint(now, target, request_id.clone())?;
        self.savepoints.insert(
            request_id.clone(),
            SavepointRequest {
                stop,
                drain,
                result: None,
            },
        );
        if stop {
            self.stop_request = Some(request_id.clone());
        }
        let mut actions = self.checkpoint_actions(decisions, now);
        if drain {
            // The savepoint's triggers go to the sources (and tasks whose inputs ended) now.
            for action in &mut actions {
                if let Action::TriggerCheckpoint { drain, .. } = action {
                    *drain = true;
                }
            }
        }
        Ok(actions)
    }

    /// The `_metadata` of checkpoint `checkpoint_id` was written, or could not be.
    pub fn metadata_written(
        &mut self,
        checkpoint_id: u64,
        result: Result<(), String>,
        now: u64,
    ) -> Vec<Action> {
        let decisions = self
            .checkpoints
            .0
            .metadata_written(now, checkpoint_id, result);
        self.checkpoint_actions(decisions, now)
    }

    /// A new leader recovers the job (HA): takes over the completed checkpoints an earlier
    /// JobMaster left, as read from the job's checkpoint directory. Returns their ids.
    pub fn adopt_checkpoints(
        &mut self,
        found: RetainedEntries,
        now: u64,
    ) -> (Vec<u64>, Vec<Action>) {
        let (ids, decisions) = self.checkpoints.0.adopt_retained(found);
        (ids, self.checkpoint_actions(decisions, now))
    }

    /// Starts the job from a savepoint or retained checkpoint (`sluice run -s PATH`), read from
    /// `metadata_dir` (see [`crate::checkpoint::io::load_restore`]). Refused if its state cannot
    /// be mapped onto this job's vertices.
    pub fn restore_from(
        &mut self,
        metadata_dir: String,
        metadata: CheckpointMetadata,
    ) -> Result<(), RestoreError> {
        // Mapped once here only to refuse an unusable savepoint at submission, with its reason;
        // the deployment maps it again through the coordinator's restore plan.
        let topology = Self::topology(&self.graph);
        let allow = self.checkpoints.0.settings().allow_non_restored_state;
        crate::checkpoint::assign(&metadata, &metadata_dir, &topology, allow)?;
        self.checkpoints
            .0
            .set_initial_restore(metadata_dir, metadata);
        Ok(())
    }

    /// Chooses what the next deployment restores: the latest valid completed checkpoint (or the
    /// savepoint the job started from). Fails the job if no retained checkpoint can be read.
    fn prepare_restore(&mut self, verdicts: RestoreVerdicts) -> Result<(), String> {
        match self.checkpoints.0.restore_plan(verdicts) {
            Ok(Some(plan)) => {
                tracing::info!(
                    checkpoint = plan.checkpoint_id,
                    job_id = %self.job_id,
                    dir = %crate::common::log_text::clip(&plan.metadata_dir),
                    "restoring from a checkpoint"
                );
                self.restores = plan
                    .tasks
                    .into_iter()
                    .map(|(k, r)| ((k.vertex as usize, k.subtask as usize), r))
                    .collect();
                Ok(())
            }
            Ok(None) => {
                self.restores.clear();
                Ok(())
            }
            Err(e) => Err(format!("cannot restore the job's state: {e}")),
        }
    }

    /// Sets what every subtask is restored from at its next deployment (empty: start fresh).
    pub fn set_restores(&mut self, restores: BTreeMap<(usize, usize), TaskRestore>) {
        self.restores = restores;
    }

    fn random(&mut self) -> f64 {
        // xorshift64: enough for jitter.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    fn set_status(&mut self, status: JobStatus, now: u64) {
        self.status = status;
        self.timestamps.insert(status, now);
        if status.is_globally_terminal() {
            self.end_time = Some(now);
        }
    }

    fn set_execution(&mut self, v: usize, s: usize, state: ExecutionState, now: u64) {
        let e = &mut self.executions[v][s];
        match (e.state.is_terminal(), state.is_terminal()) {
            (false, true) => self.unstopped -= 1,
            (true, false) => self.unstopped += 1,
            _ => {}
        }
        e.state = state;
        e.timestamps.insert(state, now);
    }

    /// Starts scheduling: the job runs (Flink's RUNNING) with its tasks waiting for slots. When
    /// there is state to restore, its files are checked first
    /// ([`StorageWork::CheckRestore`]) and scheduling goes on in
    /// [`restore_checked`](Self::restore_checked).
    pub fn start(&mut self, now: u64) -> Vec<Action> {
        let Some(a) = self.adaptive.as_mut() else {
            return self.begin(now);
        };
        // The adaptive scheduler first decides on how many slots the job runs: a rescale knows,
        // a (re)start waits for slots.
        let decision = match a.core.phase() {
            Phase::Restarting {
                rescale_to: Some(slots),
            } => Some(Decision::Start(slots)),
            _ => a.core.wait(now),
        };
        let mut actions = vec![Action::DeclareSlots {
            job: self.job_id,
            slots: a.core.requirements().max_slots(),
        }];
        actions.extend(self.adaptive_decision(decision, now));
        actions
    }

    /// Starts the job at its graph's parallelism: checks what it restores, then asks for slots.
    fn begin(&mut self, now: u64) -> Vec<Action> {
        let candidates = self.checkpoints.0.restore_candidates();
        if candidates.is_empty() {
            return self.schedule(Vec::new(), now);
        }
        self.restore_tickets += 1;
        self.awaiting_restore = Some(self.restore_tickets);
        vec![Action::Storage {
            job: self.job_id,
            work: StorageWork::CheckRestore {
                ticket: self.restore_tickets,
                candidates,
            },
        }]
    }

    /// The restore candidates were checked: scheduling goes on, from the newest valid one. An
    /// answer to an older check, or one arriving after the job was cancelled, is ignored.
    pub fn restore_checked(
        &mut self,
        ticket: u64,
        verdicts: RestoreVerdicts,
        now: u64,
    ) -> Vec<Action> {
        if self.awaiting_restore != Some(ticket) {
            return Vec::new();
        }
        self.awaiting_restore = None;
        if !matches!(self.status, JobStatus::Created | JobStatus::Restarting) {
            return Vec::new();
        }
        self.schedule(verdicts, now)
    }

    fn schedule(&mut self, verdicts: RestoreVerdicts, now: u64) -> Vec<Action> {
        if let Err(reason) = self.prepare_restore(verdicts) {
            self.job_exception(reason, now);
            self.set_status(JobStatus::Failing, now);
            for v in 0..self.executions.len() {
                for s in 0..self.executions[v].len() {
                    self.set_execution(v, s, ExecutionState::Canceled, now);
                }
            }
            return self.terminate_if_done(now);
        }
        self.set_status(JobStatus::Running, now);
        for v in 0..self.executions.len() {
            for s in 0..self.executions[v].len() {
                self.set_execution(v, s, ExecutionState::Scheduled, now);
            }
        }
        let slots = self.graph.max_vertex_parallelism();
        vec![Action::RequestSlots {
            job: self.job_id,
            slots,
            at_least: if self.batch.is_some() { 1 } else { slots },
        }]
    }

    /// The slots arrived: deploy every subtask.
    pub fn slots_allocated(&mut self, slots: Vec<SlotRef>, now: u64) -> Vec<Action> {
        if self.status != JobStatus::Running {
            // Cancelled while waiting: hand the slots straight back.
            self.slots = slots;
            return self.terminate_if_done(now);
        }
        if let Some(batch) = self.batch.as_mut() {
            batch.occupant.extend(slots.iter().map(|_| None));
            self.slots.extend(slots);
            let mut actions = self.more_slots();
            actions.extend(self.deploy_ready(now));
            return actions;
        }
        self.slots = slots;
        for v in 0..self.graph.vertices.len() {
            for s in 0..self.graph.vertices[v].parallelism as usize {
                self.executions[v][s].slot = Some(self.slots[s % self.slots.len()].clone());
                self.set_execution(v, s, ExecutionState::Deploying, now);
            }
        }
        // Every result's producers once, shared by its consumers' deployments and sent once to
        // each TaskManager that runs a consumer.
        let groups: HashMap<usize, Arc<ProducerGroup>> = (0..self.graph.edges.len())
            .map(|e| (e, Arc::new(self.producer_group(e))))
            .collect();
        let mut shipped = HashSet::new();
        let mut actions = Vec::new();
        for v in 0..self.graph.vertices.len() {
            for s in 0..self.graph.vertices[v].parallelism as usize {
                let resource_id = self.location(v, s).resource_id;
                for &e in &self.graph.vertices[v].inputs {
                    if shipped.insert((resource_id.clone(), e)) {
                        actions.push(Action::ShipProducers {
                            resource_id: resource_id.clone(),
                            group: groups[&e].clone(),
                        });
                    }
                }
                let deployment = self.deployment(v, s, &groups);
                actions.push(Action::Deploy {
                    resource_id,
                    deployment: Box::new(deployment),
                });
            }
        }
        actions
    }

    /// Batch execution: a batch job runs on the slots it has and keeps asking for more, up
    /// to its widest vertex, so that slots freed by others or brought by new TaskManagers (on
    /// YARN, containers it asked for) make it faster.
    fn more_slots(&self) -> Vec<Action> {
        let wanted = self.graph.max_vertex_parallelism();
        let held = self.slots.len() as u32;
        if self.status != JobStatus::Running || held >= wanted {
            return Vec::new();
        }
        vec![Action::RequestSlots {
            job: self.job_id,
            slots: wanted - held,
            at_least: 1,
        }]
    }

    /// Batch execution: deploys each subtask whose inputs are complete (every producer vertex
    /// it reads finished) into a free slot, vertex by vertex, sources first.
    fn deploy_ready(&mut self, now: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.status != JobStatus::Running {
            return actions;
        }
        for v in 0..self.graph.vertices.len() {
            let inputs = self.graph.vertices[v].inputs.clone();
            let ready = inputs.iter().all(|&e| {
                self.executions[self.graph.edges[e].source]
                    .iter()
                    .all(|x| x.state == ExecutionState::Finished)
            });
            if !ready {
                continue;
            }
            for s in 0..self.executions[v].len() {
                let Some(batch) = self.batch.as_mut() else {
                    return actions;
                };
                if self.executions[v][s].state != ExecutionState::Scheduled
                    || batch.restart_at.contains_key(&(v, s))
                {
                    continue;
                }
                let Some(free) = batch.occupant.iter().position(Option::is_none) else {
                    return actions;
                };
                batch.occupant[free] = Some((v, s));
                let slot = self.slots[free].clone();
                self.executions[v][s].slot = Some(slot.clone());
                self.set_execution(v, s, ExecutionState::Deploying, now);
                let mut groups = HashMap::new();
                for &e in &inputs {
                    let known = self.batch.as_ref().and_then(|b| b.groups.get(&e).cloned());
                    let group = match known {
                        Some(group) => group,
                        None => Arc::new(self.producer_group(e)),
                    };
                    if let Some(batch) = self.batch.as_mut() {
                        batch.groups.insert(e, group.clone());
                        if batch.shipped.insert((slot.resource_id.clone(), group.id)) {
                            actions.push(Action::ShipProducers {
                                resource_id: slot.resource_id.clone(),
                                group: group.clone(),
                            });
                        }
                    }
                    groups.insert(e, group);
                }
                let deployment = self.deployment(v, s, &groups);
                actions.push(Action::Deploy {
                    resource_id: slot.resource_id,
                    deployment: Box::new(deployment),
                });
            }
        }
        actions
    }

    /// Batch execution: a subtask of the running job stopped. A finished one frees its slot
    /// for the next; a failed one is restarted alone (region failover) after the restart
    /// strategy's delay; one cancelled because its input was lost runs again.
    fn batch_task_state(
        &mut self,
        (v, s): (usize, usize),
        state: ExecutionState,
        error: Option<String>,
        now: u64,
    ) -> Vec<Action> {
        if !state.is_terminal() {
            return Vec::new();
        }
        let Some(batch) = self.batch.as_mut() else {
            return Vec::new();
        };
        for occupant in &mut batch.occupant {
            if *occupant == Some((v, s)) {
                *occupant = None;
            }
        }
        let rerun = batch.rerun.remove(&(v, s));
        match state {
            ExecutionState::Failed => {
                self.task_failed((v, s), error, now);
                self.region_failover(vec![(v, s)], now)
            }
            ExecutionState::Canceled if rerun => {
                self.reset_subtask(v, s, now);
                self.deploy_ready(now)
            }
            _ => {
                let mut actions = self.deploy_ready(now);
                actions.extend(self.terminate_if_done(now));
                actions
            }
        }
    }

    /// Subtask `s` of vertex `v` failed with `error`: noted on the subtask and in the job's
    /// exception history, with where it ran.
    fn task_failed(&mut self, (v, s): (usize, usize), error: Option<String>, now: u64) {
        let location = self.executions[v][s]
            .slot
            .as_ref()
            .map(|slot| slot.resource_id.clone());
        let message = error.unwrap_or_else(|| "unknown failure".into());
        self.executions[v][s].failure = Some(message.clone());
        self.record_failure(message, (v, s), location, now);
    }

    /// Batch execution: restarts `failed` subtasks alone after the restart strategy's delay,
    /// or, if the strategy allows no more restarts, fails the job.
    fn region_failover(&mut self, failed: Vec<(usize, usize)>, now: u64) -> Vec<Action> {
        let random = self.random();
        match self.restart.on_failure(now, random) {
            Some(delay) => {
                if let Some(batch) = self.batch.as_mut() {
                    for subtask in failed {
                        batch.restart_at.insert(subtask, now + delay);
                    }
                }
                self.tick(now)
            }
            None => {
                self.suppress_recovery(now);
                let mut actions = self.cancel_executions(now);
                actions.extend(self.terminate_if_done(now));
                actions
            }
        }
    }

    /// Makes subtask `s` of vertex `v` a new attempt waiting for a slot; the consumers of its
    /// output will read the new attempt's.
    fn reset_subtask(&mut self, v: usize, s: usize, now: u64) {
        let e = &mut self.executions[v][s];
        e.attempt += 1;
        e.slot = None;
        e.failure = None;
        e.metrics = TaskMetrics::default();
        e.timestamps.clear();
        self.set_execution(v, s, ExecutionState::Scheduled, now);
        if let Some(batch) = self.batch.as_mut() {
            batch.restarted_tasks += 1;
            for e in &self.graph.vertices[v].outputs {
                batch.groups.remove(e);
            }
        }
    }

    /// Batch execution: a TaskManager is gone, with its slots and the output its finished
    /// subtasks kept on disk. Its running subtasks failed (restarted as regions); finished ones
    /// whose output someone still has to read run again, and the consumers already reading
    /// that output are cancelled to read the new one.
    fn batch_taskmanager_lost(&mut self, resource_id: &str, reason: &str, now: u64) -> Vec<Action> {
        let Some(batch) = self.batch.as_mut() else {
            return Vec::new();
        };
        let held_before = self.slots.len();
        let mut kept = Vec::new();
        let mut occupants = Vec::new();
        for (slot, occupant) in self.slots.drain(..).zip(batch.occupant.drain(..)) {
            if slot.resource_id != resource_id {
                kept.push(slot);
                occupants.push(occupant);
            }
        }
        let lost_slots = kept.len() < held_before;
        self.slots = kept;
        batch.occupant = occupants;
        let on_lost = |e: &Execution| {
            e.slot
                .as_ref()
                .is_some_and(|slot| slot.resource_id == resource_id)
        };
        let mut failed = Vec::new();
        let mut again = Vec::new();
        // Consumers before producers (the vertices are in topological order), so that output
        // lost upstream of a rerun subtask is rerun too.
        for v in (0..self.executions.len()).rev() {
            let needed = self.graph.vertices[v].outputs.iter().any(|&e| {
                let target = self.graph.edges[e].target;
                self.executions[target]
                    .iter()
                    .any(|x| x.state != ExecutionState::Finished)
                    || again.iter().any(|&(t, _)| t == target)
            });
            for s in 0..self.executions[v].len() {
                let e = &self.executions[v][s];
                if !on_lost(e) {
                    continue;
                }
                if !e.state.is_terminal() {
                    failed.push((v, s));
                } else if e.state == ExecutionState::Finished && needed {
                    again.push((v, s));
                }
            }
        }
        if failed.is_empty() && again.is_empty() {
            return Vec::new();
        }
        let message = format!("TaskManager {resource_id} was lost: {reason}");
        for &(v, s) in &failed {
            self.set_execution(v, s, ExecutionState::Failed, now);
            self.executions[v][s].failure = Some(message.clone());
        }
        let mut actions = Vec::new();
        // Consumers reading lost output elsewhere stop and run again once it is rewritten.
        let lost_vertices: HashSet<usize> = again.iter().map(|&(v, _)| v).collect();
        for &v in &lost_vertices {
            for &e in &self.graph.vertices[v].outputs.clone() {
                let target = self.graph.edges[e].target;
                for s in 0..self.executions[target].len() {
                    let x = &self.executions[target][s];
                    if x.state.is_terminal() || on_lost(x) || x.slot.is_none() {
                        continue;
                    }
                    if let Some(slot) = &x.slot {
                        actions.push(Action::Cancel {
                            resource_id: slot.resource_id.clone(),
                            execution: self.execution_id(target, s),
                        });
                    }
                    self.set_execution(target, s, ExecutionState::Canceling, now);
                    if let Some(batch) = self.batch.as_mut() {
                        batch.rerun.insert((target, s));
                    }
                }
            }
        }
        for &(v, s) in &again {
            self.reset_subtask(v, s, now);
        }
        let first = failed.first().or(again.first()).copied().unwrap_or((0, 0));
        self.record_failure(message, first, Some(resource_id.to_string()), now);
        if lost_slots {
            // Ask for slots in place of those lost; the job goes on with what it holds.
            actions.extend(self.more_slots());
        }
        if failed.is_empty() {
            // Only finished output was lost: it is rewritten without counting as a failure.
            actions.extend(self.deploy_ready(now));
            return actions;
        }
        actions.extend(self.region_failover(failed, now));
        actions
    }

    fn execution_id(&self, v: usize, s: usize) -> ExecutionId {
        ExecutionId {
            job: self.job_id,
            vertex: v as u32,
            subtask: s as u32,
            attempt: self.executions[v][s].attempt,
        }
    }

    fn location(&self, v: usize, s: usize) -> PartitionLocation {
        let slot = self.executions[v][s]
            .slot
            .as_ref()
            .unwrap_or(&self.slots[s % self.slots.len()]);
        PartitionLocation {
            resource_id: slot.resource_id.clone(),
            data_address: slot.data_address,
        }
    }

    /// The producers of job edge `e`'s result, as they are deployed now, under a new id.
    fn producer_group(&mut self, e: usize) -> ProducerGroup {
        let edge = &self.graph.edges[e];
        let source = edge.source;
        let output = self.graph.vertices[source]
            .outputs
            .iter()
            .position(|&o| o == e)
            .unwrap_or(0) as u32;
        let mut locations = Vec::new();
        let mut index: HashMap<ResourceId, u32> = HashMap::new();
        let producers = (0..self.executions[source].len())
            .map(|p| {
                let location = self.location(source, p);
                let at = *index
                    .entry(location.resource_id.clone())
                    .or_insert_with(|| {
                        locations.push(location);
                        locations.len() as u32 - 1
                    });
                (self.executions[source][p].attempt, at)
            })
            .collect();
        self.groups_built += 1;
        ProducerGroup {
            id: self.groups_built,
            job: self.job_id,
            vertex: source as u32,
            output,
            locations,
            producers,
        }
    }

    /// The deployment descriptor of subtask `s` of vertex `v`, whose inputs read `groups` (by
    /// job edge).
    fn deployment(
        &self,
        v: usize,
        s: usize,
        groups: &HashMap<usize, Arc<ProducerGroup>>,
    ) -> TaskDeployment {
        let vertex = &self.graph.vertices[v];
        let inputs = vertex
            .inputs
            .iter()
            .map(|&e| match self.graph.edges[e].strategy {
                ShipStrategy::Forward => InputDeployment {
                    group: groups[&e].id,
                    producer: Some(s as u32),
                    subpartition: 0,
                },
                _ => InputDeployment {
                    group: groups[&e].id,
                    producer: None,
                    subpartition: s as u32,
                },
            })
            .collect();
        let outputs = vertex
            .outputs
            .iter()
            .map(|&e| {
                let edge = &self.graph.edges[e];
                let consumer = &self.graph.vertices[edge.target];
                OutputDeployment {
                    subpartitions: if edge.strategy.is_all_to_all() {
                        consumer.parallelism
                    } else {
                        1
                    },
                    consumer_max_parallelism: consumer.max_parallelism,
                }
            })
            .collect();
        TaskDeployment {
            execution: self.execution_id(v, s),
            slot: self.executions[v][s]
                .slot
                .as_ref()
                .map(|slot| slot.index)
                .unwrap_or(0),
            job_name: self.name.clone(),
            vertex_name: vertex.name.clone(),
            program: self.program.clone(),
            default_parallelism: self.default_parallelism,
            fingerprint: self.fingerprint.clone(),
            inputs,
            outputs,
            auto_watermark_interval_ms: self.auto_watermark_interval_ms,
            vertex_parallelism: self
                .adaptive
                .as_ref()
                .map(|_| self.graph.vertices.iter().map(|v| v.parallelism).collect()),
            state: TaskStateConfig {
                restore: self.restores.get(&(v, s)).cloned(),
                key_hash: self.checkpoints.0.key_hash(),
                ..self.state.clone()
            },
        }
    }

    fn find(&self, id: ExecutionId) -> Option<(usize, usize)> {
        let (v, s) = (id.vertex as usize, id.subtask as usize);
        let e = self.executions.get(v)?.get(s)?;
        (e.attempt == id.attempt).then_some((v, s))
    }

    /// The display name of a subtask, e.g. `Keyed Sum (2/4)`.
    pub fn task_name(&self, v: usize, s: usize) -> String {
        let vertex = &self.graph.vertices[v];
        format!("{} ({}/{})", vertex.name, s + 1, vertex.parallelism)
    }

    /// A TaskManager reported an execution's new state.
    pub fn task_state(
        &mut self,
        id: ExecutionId,
        state: ExecutionState,
        error: Option<String>,
        metrics: TaskMetrics,
        now: u64,
    ) -> Vec<Action> {
        let Some((v, s)) = self.find(id) else {
            return Vec::new();
        };
        if self.executions[v][s].state.is_terminal() {
            return Vec::new();
        }
        if metrics != TaskMetrics::default() {
            self.executions[v][s].metrics = metrics;
        }
        self.set_execution(v, s, state, now);
        let phase = match state {
            ExecutionState::Running => TaskPhase::Running,
            ExecutionState::Finished => TaskPhase::Finished,
            _ => TaskPhase::Other,
        };
        let decisions = self
            .checkpoints
            .0
            .task_state(now, Self::task_key(v, s), phase);
        let mut actions = self.checkpoint_actions(decisions, now);
        actions.extend(self.on_task_state(v, s, state, error, now));
        actions
    }

    fn on_task_state(
        &mut self,
        v: usize,
        s: usize,
        state: ExecutionState,
        error: Option<String>,
        now: u64,
    ) -> Vec<Action> {
        if self.batch.is_some() && self.status == JobStatus::Running {
            return self.batch_task_state((v, s), state, error, now);
        }
        match state {
            ExecutionState::Failed => {
                self.task_failed((v, s), error, now);
                self.fail(now)
            }
            _ => self.terminate_if_done(now),
        }
    }

    /// A TaskManager is gone: its executions of this job have failed.
    pub fn taskmanager_lost(&mut self, resource_id: &str, reason: &str, now: u64) -> Vec<Action> {
        if self.batch.is_some() && self.status == JobStatus::Running {
            return self.batch_taskmanager_lost(resource_id, reason, now);
        }
        let mut lost = Vec::new();
        for v in 0..self.executions.len() {
            for s in 0..self.executions[v].len() {
                let e = &self.executions[v][s];
                if !e.state.is_terminal()
                    && e.slot
                        .as_ref()
                        .is_some_and(|slot| slot.resource_id == resource_id)
                {
                    lost.push((v, s));
                }
            }
        }
        if lost.is_empty() {
            return Vec::new();
        }
        let message = format!("TaskManager {resource_id} was lost: {reason}");
        for &(v, s) in &lost {
            self.set_execution(v, s, ExecutionState::Failed, now);
            self.executions[v][s].failure = Some(message.clone());
        }
        self.record_failure(message, lost[0], Some(resource_id.to_string()), now);
        self.fail(now)
    }

    /// Records a task's failure: a new entry of the exception history, or, while a failover
    /// (or the job's failure) is already under way, one of that entry's concurrent failures.
    fn record_failure(
        &mut self,
        message: String,
        (v, s): (usize, usize),
        location: Option<String>,
        now: u64,
    ) {
        let task_name = self.task_name(v, s);
        match self.exceptions.last_mut() {
            Some(root) if self.status != JobStatus::Running => {
                root.concurrent.push(format!("{task_name}: {message}"));
            }
            _ => self.exceptions.push(ExceptionEntry {
                timestamp: now,
                exception: message,
                task_name: Some(task_name),
                location,
                concurrent: Vec::new(),
            }),
        }
    }

    /// The job's slots could not be had in time.
    pub fn slot_request_timed_out(&mut self, now: u64) -> Vec<Action> {
        if self.status != JobStatus::Running {
            return Vec::new();
        }
        if self.batch.is_some() && !self.slots.is_empty() {
            // A batch job runs on the slots it holds; more would only make it faster, so it
            // goes on asking.
            return self.more_slots();
        }
        self.job_exception(NO_RESOURCE.into(), now);
        self.fail(now)
    }

    /// Records a failure of the whole job (no task's) in the exception history.
    fn job_exception(&mut self, exception: String, now: u64) {
        self.exceptions.push(ExceptionEntry {
            timestamp: now,
            exception,
            task_name: None,
            location: None,
            concurrent: Vec::new(),
        });
    }

    /// A failure: restart per the strategy, or fail the job. The job's other executions are
    /// cancelled either way; a failure during a failover joins it.
    fn fail(&mut self, now: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Some(a) = self.adaptive.as_mut()
            && matches!(a.core.phase(), Phase::Restarting { .. })
        {
            // A failure during a rescale: the slots it counted on may be gone; wait for slots.
            a.core.restarting(None);
        }
        if self.status == JobStatus::Running {
            let decisions = self.checkpoints.0.job_reset(now);
            actions.extend(self.checkpoint_actions(decisions, now));
            self.stop_request = None;
            let random = self.random();
            match self.restart.on_failure(now, random) {
                Some(delay) => {
                    self.set_status(JobStatus::Restarting, now);
                    self.restart_at = Some(now + delay);
                    if let Some(a) = self.adaptive.as_mut() {
                        a.core.restarting(None);
                    }
                }
                None => self.suppress_recovery(now),
            }
        }
        actions.extend(self.cancel_executions(now));
        actions.extend(self.terminate_if_done(now));
        actions.extend(self.tick(now));
        actions
    }

    /// The restart strategy allows no more restarts: the job fails, and its last exception
    /// says why it was not recovered.
    fn suppress_recovery(&mut self, now: u64) {
        if self.restart.policy() != &RestartPolicy::None
            && let Some(last) = self.exceptions.last_mut()
        {
            last.exception = format!(
                "Recovery is suppressed by {}: {}",
                self.restart.policy().describe(),
                last.exception
            );
        }
        if let Some(batch) = self.batch.as_mut() {
            batch.restart_at.clear();
            batch.rerun.clear();
        }
        self.set_status(JobStatus::Failing, now);
    }

    /// When [`tick`](Self::tick) next has something to do (ms since the epoch; `None`: not
    /// before another event): the checkpoint coordinator's next deadline while running, the
    /// restart delay's end once the failed attempt has stopped.
    pub fn poll_timeout(&self) -> Option<u64> {
        let adaptive = self.adaptive.as_ref().and_then(|a| a.core.poll_timeout());
        let own = match self.status {
            JobStatus::Running => {
                let regions = self
                    .batch
                    .as_ref()
                    .and_then(|b| b.restart_at.values().min().copied());
                [self.checkpoints.0.poll_timeout(), regions]
                    .into_iter()
                    .flatten()
                    .min()
            }
            JobStatus::Restarting => self.restart_at.filter(|_| self.unstopped == 0),
            _ => None,
        };
        [adaptive, own].into_iter().flatten().min()
    }

    /// Time passes: a pending restart happens once its delay is over and every execution of
    /// the failed attempt has stopped.
    pub fn tick(&mut self, now: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Some(a) = self.adaptive.as_mut()
            && matches!(self.status, JobStatus::Created | JobStatus::Running)
        {
            let decision = a.core.tick(now);
            actions.extend(self.adaptive_decision(decision, now));
        }
        if self.status == JobStatus::Running
            && let Some(batch) = self.batch.as_mut()
        {
            let due: Vec<(usize, usize)> = batch
                .restart_at
                .iter()
                .filter(|&(_, &at)| at <= now)
                .map(|(&subtask, _)| subtask)
                .collect();
            for (v, s) in due {
                if let Some(batch) = self.batch.as_mut() {
                    batch.restart_at.remove(&(v, s));
                }
                self.reset_subtask(v, s, now);
            }
            actions.extend(self.deploy_ready(now));
        }
        if self.status == JobStatus::Running {
            let decisions = self.checkpoints.0.tick(now);
            actions.extend(self.checkpoint_actions(decisions, now));
            return actions;
        }
        let due = self.restart_at.is_some_and(|at| now >= at);
        if self.status != JobStatus::Restarting || !due || self.unstopped > 0 {
            return actions;
        }
        self.restart_at = None;
        let mut resource_ids: Vec<ResourceId> =
            self.slots.drain(..).map(|s| s.resource_id).collect();
        resource_ids.sort();
        resource_ids.dedup();
        if let Some(batch) = self.batch.as_mut() {
            *batch = Batch {
                restarted_tasks: batch.restarted_tasks,
                ..Batch::default()
            };
        }
        for e in self.executions.iter_mut().flatten() {
            e.attempt += 1;
            e.slot = None;
            e.failure = None;
            e.metrics = TaskMetrics::default();
            e.timestamps.clear();
        }
        actions.push(Action::Reset {
            job: self.job_id,
            resource_ids,
        });
        actions.extend(self.start(now));
        actions
    }

    /// Cancels the job (REST PATCH or `sluice cancel`).
    pub fn cancel(&mut self, now: u64) -> Vec<Action> {
        if self.status.is_globally_terminal() || self.status == JobStatus::Cancelling {
            return Vec::new();
        }
        self.set_status(JobStatus::Cancelling, now);
        self.restart_at = None;
        if let Some(batch) = self.batch.as_mut() {
            batch.restart_at.clear();
            batch.rerun.clear();
        }
        let mut actions = self.cancel_executions(now);
        actions.extend(self.terminate_if_done(now));
        actions
    }

    fn cancel_executions(&mut self, now: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        for v in 0..self.executions.len() {
            for s in 0..self.executions[v].len() {
                match self.executions[v][s].state {
                    ExecutionState::Created | ExecutionState::Scheduled => {
                        self.set_execution(v, s, ExecutionState::Canceled, now)
                    }
                    ExecutionState::Deploying
                    | ExecutionState::Running
                    | ExecutionState::Initializing => {
                        self.set_execution(v, s, ExecutionState::Canceling, now);
                        if let Some(slot) = &self.executions[v][s].slot {
                            actions.push(Action::Cancel {
                                resource_id: slot.resource_id.clone(),
                                execution: self.execution_id(v, s),
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        actions
    }

    fn terminate_if_done(&mut self, now: u64) -> Vec<Action> {
        let all = || self.executions.iter().flatten();
        let regions_pending = self.status == JobStatus::Running
            && self
                .batch
                .as_ref()
                .is_some_and(|b| !b.restart_at.is_empty() || !b.rerun.is_empty());
        if self.unstopped > 0
            || self.status.is_globally_terminal()
            || self.status == JobStatus::Restarting
            || regions_pending
        {
            return Vec::new();
        }
        let status = match self.status {
            JobStatus::Cancelling if self.stop_request.is_some() => JobStatus::Finished,
            JobStatus::Cancelling => JobStatus::Canceled,
            JobStatus::Failing => JobStatus::Failed,
            _ if all().all(|e| e.state == ExecutionState::Finished) => JobStatus::Finished,
            _ => JobStatus::Failed,
        };
        self.set_status(status, now);
        if let Some(a) = self.adaptive.as_mut() {
            a.core.done();
        }
        let terminal = match status {
            JobStatus::Finished => Terminal::Finished,
            JobStatus::Canceled => Terminal::Canceled,
            _ => Terminal::Failed,
        };
        // The tasks are gone, so the coordinator's notifications reach nobody (`running_at`
        // finds no running execution); its file work (deleting the job's checkpoints) remains.
        let decisions = self.checkpoints.0.job_terminated(now, terminal);
        let mut actions = self.checkpoint_actions(decisions, now);
        let mut resource_ids: Vec<ResourceId> =
            self.slots.iter().map(|s| s.resource_id.clone()).collect();
        resource_ids.sort();
        resource_ids.dedup();
        actions.push(Action::Terminated {
            job: self.job_id,
            resource_ids,
        });
        actions
    }

    /// Count of executions per state.
    pub fn state_counts(&self) -> BTreeMap<ExecutionState, u32> {
        let mut counts: BTreeMap<ExecutionState, u32> =
            ExecutionState::ALL.iter().map(|s| (*s, 0)).collect();
        for e in self.executions.iter().flatten() {
            *counts.entry(e.state).or_default() += 1;
        }
        counts
    }

    /// Applies metrics from a heartbeat.
    pub fn update_metrics(&mut self, id: ExecutionId, metrics: TaskMetrics) {
        if let Some((v, s)) = self.find(id) {
            self.executions[v][s].metrics = metrics;
        }
    }

    /// The state a vertex is shown in: the "highest" state among its subtasks, as Flink does.
    pub fn vertex_state(&self, v: usize) -> ExecutionState {
        let states: Vec<ExecutionState> = self.executions[v].iter().map(|e| e.state).collect();
        let any = |s| states.contains(&s);
        if states.iter().all(|s| *s == ExecutionState::Finished) {
            ExecutionState::Finished
        } else if any(ExecutionState::Failed) {
            ExecutionState::Failed
        } else if any(ExecutionState::Canceling) {
            ExecutionState::Canceling
        } else if states.iter().all(|s| *s == ExecutionState::Canceled) {
            ExecutionState::Canceled
        } else if any(ExecutionState::Running) {
            ExecutionState::Running
        } else if any(ExecutionState::Deploying) {
            ExecutionState::Deploying
        } else if any(ExecutionState::Scheduled) {
            ExecutionState::Scheduled
        } else {
            states
                .iter()
                .copied()
                .max()
                .unwrap_or(ExecutionState::Created)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::examples;
    use crate::graph::build_job_graph;
    use crate::network::channel::ProducerGroups;
    use crate::rpc::messages::ChannelDeployment;

    /// The word count, run as a stream (all its tasks at once, slot sharing).
    fn job(parallelism: u32) -> JobMaster {
        job_in(parallelism, false)
    }

    /// The word count at `parallelism`, in batch execution mode or as a stream.
    fn job_in(parallelism: u32, batch: bool) -> JobMaster {
        let program = ProgramSpec::new("wordcount", vec![]);
        let mut graph = build_job_graph(&examples::bundled(), &program, parallelism).unwrap();
        graph.batch = batch;
        let coordinator = CheckpointCoordinator::new(
            JobId(1).to_string(),
            crate::checkpoint::CheckpointSettings::default(),
            JobMaster::topology(&graph),
        );
        JobMaster::new(
            JobId(1),
            program,
            parallelism,
            graph,
            RestartPolicy::None,
            coordinator,
            0,
        )
    }

    fn slots(n: u32) -> Vec<SlotRef> {
        (0..n)
            .map(|i| SlotRef {
                resource_id: format!("tm{}", i % 2),
                data_address: "127.0.0.1:9".parse().unwrap(),
                index: i / 2,
            })
            .collect()
    }

    fn deploys(actions: &[Action]) -> Vec<&TaskDeployment> {
        actions
            .iter()
            .filter_map(|a| {
                if let Action::Deploy { deployment, .. } = a {
                    Some(&**deployment)
                } else {
                    None
                }
            })
            .collect()
    }

    /// The deployments among `actions` with their inputs expanded as each TaskManager would,
    /// from the groups sent to it before.
    fn expanded(actions: &[Action]) -> Vec<(TaskDeployment, Vec<Vec<ChannelDeployment>>)> {
        let mut groups: HashMap<ResourceId, ProducerGroups> = HashMap::new();
        let mut out = Vec::new();
        for a in actions {
            match a {
                Action::ShipProducers { resource_id, group } => groups
                    .entry(resource_id.clone())
                    .or_default()
                    .insert(group.clone()),
                Action::Deploy {
                    resource_id,
                    deployment,
                } => {
                    let inputs = groups
                        .get(resource_id)
                        .unwrap_or(&ProducerGroups::default())
                        .expand(deployment.execution.job, &deployment.inputs)
                        .unwrap();
                    out.push(((**deployment).clone(), inputs));
                }
                _ => {}
            }
        }
        out
    }

    fn report_all(
        jm: &mut JobMaster,
        deployed: &[TaskDeployment],
        state: ExecutionState,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        for d in deployed {
            out.extend(jm.task_state(d.execution, state, None, TaskMetrics::default(), 10));
        }
        out
    }

    #[test]
    fn wordcount_deploys_every_subtask_with_wired_channels_then_finishes() {
        let mut jm = job(4);
        let actions = jm.start(0);
        assert!(matches!(
            actions[..],
            [Action::RequestSlots { slots: 4, .. }]
        ));
        let actions = jm.slots_allocated(slots(4), 1);
        let deployed: Vec<TaskDeployment> = deploys(&actions).into_iter().cloned().collect();
        assert_eq!(deployed.len() as u32, jm.graph.total_subtasks());
        // The keyed vertex reads from every tokenizer subtask.
        let keyed = jm
            .graph
            .vertices
            .iter()
            .position(|v| v.name.starts_with("Keyed"))
            .unwrap();
        let (_, inputs) = expanded(&actions)
            .into_iter()
            .find(|(d, _)| d.execution.vertex as usize == keyed && d.execution.subtask == 2)
            .unwrap();
        assert_eq!(inputs[0].len(), 4);
        assert!(inputs[0].iter().all(|c| c.subpartition == 2));
        let producers: Vec<u32> = inputs[0]
            .iter()
            .map(|c| c.partition.producer.subtask)
            .collect();
        assert_eq!(producers, [0, 1, 2, 3]);
        assert_eq!(inputs[0][1].location.resource_id, "tm1");
        assert_eq!(jm.status, JobStatus::Running);
        report_all(&mut jm, &deployed, ExecutionState::Running);
        let actions = report_all(&mut jm, &deployed, ExecutionState::Finished);
        assert_eq!(jm.status, JobStatus::Finished);
        assert!(
            matches!(actions.last(), Some(Action::Terminated { resource_ids, .. }) if resource_ids.len() == 2)
        );
    }

    #[test]
    fn a_failed_task_cancels_the_rest_and_fails_the_job() {
        let mut jm = job(2);
        jm.start(0);
        let deployed: Vec<TaskDeployment> = deploys(&jm.slots_allocated(slots(2), 1))
            .into_iter()
            .cloned()
            .collect();
        report_all(&mut jm, &deployed, ExecutionState::Running);
        let actions = jm.task_state(
            deployed[0].execution,
            ExecutionState::Failed,
            Some("boom".into()),
            TaskMetrics::default(),
            5,
        );
        assert_eq!(jm.status, JobStatus::Failing);
        assert_eq!(
            actions
                .iter()
                .filter(|a| matches!(a, Action::Cancel { .. }))
                .count(),
            deployed.len() - 1
        );
        for d in &deployed[1..] {
            jm.task_state(
                d.execution,
                ExecutionState::Canceled,
                None,
                TaskMetrics::default(),
                6,
            );
        }
        assert_eq!(jm.status, JobStatus::Failed);
        assert_eq!(jm.exceptions[0].exception, "boom");
        // A stale report of an old attempt changes nothing.
        assert!(
            jm.task_state(
                deployed[0].execution,
                ExecutionState::Running,
                None,
                TaskMetrics::default(),
                7
            )
            .is_empty()
        );
    }

    #[test]
    fn deployments_name_producer_groups_sent_once_per_taskmanager_so_their_size_is_flat() {
        let round = |parallelism: u32| {
            let mut jm = job(parallelism);
            jm.start(0);
            let actions = jm.slots_allocated(slots(parallelism), 1);
            let shipped = actions
                .iter()
                .filter(|a| matches!(a, Action::ShipProducers { .. }))
                .count();
            let largest = deploys(&actions)
                .iter()
                .map(|d| serde_json::to_vec(d).unwrap().len())
                .max()
                .unwrap();
            let channels: usize = expanded(&actions)
                .iter()
                .flat_map(|(_, inputs)| inputs.iter().map(Vec::len))
                .sum();
            (shipped, largest, channels, jm.graph.edges.len())
        };
        let (shipped4, largest4, channels4, edges) = round(4);
        let (shipped64, largest64, channels64, _) = round(64);
        // Two TaskManagers: each result's group goes once to each of them.
        assert_eq!(shipped4, 2 * edges);
        assert_eq!(shipped64, 2 * edges);
        // A deployment does not grow with the producers' parallelism (only the digits of its
        // indexes do) while the channels it stands for grow with its square.
        assert!(largest64 <= largest4 + 16, "{largest4} -> {largest64}");
        assert!(
            channels64 > 200 * channels4 / 2,
            "{channels4} -> {channels64}"
        );
    }

    #[test]
    fn fixed_delay_restarts_with_new_attempts_then_gives_up() {
        let mut jm = job(2);
        jm.restart = RestartTracker::new(RestartPolicy::FixedDelay {
            attempts: 1,
            delay_ms: 100,
        });
        jm.start(0);
        let deployed: Vec<TaskDeployment> = deploys(&jm.slots_allocated(slots(2), 1))
            .into_iter()
            .cloned()
            .collect();
        report_all(&mut jm, &deployed, ExecutionState::Running);
        jm.task_state(
            deployed[0].execution,
            ExecutionState::Failed,
            Some("boom".into()),
            TaskMetrics::default(),
            50,
        );
        assert_eq!(jm.status, JobStatus::Restarting);
        for d in &deployed[1..] {
            jm.task_state(
                d.execution,
                ExecutionState::Canceled,
                None,
                TaskMetrics::default(),
                60,
            );
        }
        assert!(jm.tick(149).is_empty(), "the delay is not over");
        let actions = jm.tick(150);
        assert!(matches!(actions[0], Action::Reset { .. }));
        assert!(matches!(actions[1], Action::RequestSlots { slots: 2, .. }));
        assert_eq!(jm.status, JobStatus::Running);
        let (second, inputs): (Vec<TaskDeployment>, Vec<_>) =
            expanded(&jm.slots_allocated(slots(2), 151))
                .into_iter()
                .unzip();
        assert!(second.iter().all(|d| d.execution.attempt == 1));
        assert!(
            inputs
                .iter()
                .flatten()
                .flatten()
                .all(|c: &ChannelDeployment| c.partition.producer.attempt == 1)
        );
        // A late report of the first attempt changes nothing.
        assert!(
            jm.task_state(
                deployed[1].execution,
                ExecutionState::Failed,
                None,
                TaskMetrics::default(),
                152
            )
            .is_empty()
        );
        report_all(&mut jm, &second, ExecutionState::Running);
        jm.task_state(
            second[0].execution,
            ExecutionState::Failed,
            Some("again".into()),
            TaskMetrics::default(),
            200,
        );
        assert_eq!(jm.status, JobStatus::Failing);
        assert!(
            jm.exceptions
                .last()
                .unwrap()
                .exception
                .starts_with("Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy")
        );
        for d in &second[1..] {
            jm.task_state(
                d.execution,
                ExecutionState::Canceled,
                None,
                TaskMetrics::default(),
                210,
            );
        }
        assert_eq!(jm.status, JobStatus::Failed);
        assert_eq!(jm.exceptions.len(), 2);
    }

    #[test]
    fn waiting_for_slots_then_timing_out_fails_with_no_resource() {
        let mut jm = job(3);
        jm.start(0);
        let actions = jm.slot_request_timed_out(300_000);
        assert_eq!(jm.status, JobStatus::Failed);
        assert!(matches!(actions[..], [Action::Terminated { .. }]));
        assert!(
            jm.exceptions[0]
                .exception
                .contains("Could not acquire the minimum required resources.")
        );
        assert!(
            jm.executions
                .iter()
                .flatten()
                .all(|e| e.state == ExecutionState::Canceled)
        );
    }

    #[test]
    fn cancel_while_running_waits_for_acknowledgements() {
        let mut jm = job(2);
        jm.start(0);
        let deployed: Vec<TaskDeployment> = deploys(&jm.slots_allocated(slots(2), 1))
            .into_iter()
            .cloned()
            .collect();
        let actions = jm.cancel(3);
        assert_eq!(jm.status, JobStatus::Cancelling);
        assert_eq!(actions.len(), deployed.len());
        report_all(&mut jm, &deployed, ExecutionState::Canceled);
        assert_eq!(jm.status, JobStatus::Canceled);
        assert_eq!(jm.end_time, Some(10));
    }

    /// Reports every deployment among `actions` RUNNING and returns them.
    fn run_deployed(jm: &mut JobMaster, actions: &[Action], now: u64) -> Vec<TaskDeployment> {
        let deployed: Vec<TaskDeployment> = deploys(actions).into_iter().cloned().collect();
        report_all(jm, &deployed, ExecutionState::Running);
        let _ = now;
        deployed
    }

    /// The vertex whose name starts with `prefix`.
    fn vertex(jm: &JobMaster, prefix: &str) -> usize {
        jm.graph
            .vertices
            .iter()
            .position(|v| v.name.starts_with(prefix))
            .unwrap()
    }

    #[test]
    fn a_batch_job_of_parallelism_8_runs_stage_by_stage_on_two_slots() {
        let mut jm = job_in(8, true);
        let actions = jm.start(0);
        assert!(matches!(
            actions[..],
            [Action::RequestSlots {
                slots: 8,
                at_least: 1,
                ..
            }]
        ));
        let allocated = jm.slots_allocated(slots(2), 1);
        let mut running = run_deployed(&mut jm, &allocated, 1);
        let mut deployed = running.len();
        let mut finished_vertices: HashSet<u32> = HashSet::new();
        while !running.is_empty() {
            assert!(running.len() <= 2, "two slots run two subtasks at a time");
            let done = running.remove(0);
            // A subtask starts only once every producer vertex it reads has finished.
            let v = done.execution.vertex as usize;
            for &e in &jm.graph.vertices[v].inputs {
                assert!(finished_vertices.contains(&(jm.graph.edges[e].source as u32)));
            }
            let actions = jm.task_state(
                done.execution,
                ExecutionState::Finished,
                None,
                TaskMetrics::default(),
                2,
            );
            if jm.executions[v]
                .iter()
                .all(|e| e.state == ExecutionState::Finished)
            {
                finished_vertices.insert(v as u32);
            }
            let next = run_deployed(&mut jm, &actions, 2);
            deployed += next.len();
            running.extend(next);
        }
        assert_eq!(deployed as u32, jm.graph.total_subtasks());
        assert_eq!(jm.status, JobStatus::Finished);
        assert_eq!(jm.restarted_tasks(), 0);
    }

    #[test]
    fn a_failed_batch_task_restarts_alone_after_the_delay_and_reads_the_same_producers() {
        let mut jm = job_in(2, true);
        jm.restart = RestartTracker::new(RestartPolicy::FixedDelay {
            attempts: 2,
            delay_ms: 100,
        });
        jm.start(0);
        let keyed = vertex(&jm, "Keyed");
        let allocated = jm.slots_allocated(slots(2), 1);
        let mut running = run_deployed(&mut jm, &allocated, 1);
        // Run until the keyed vertex's subtasks are deployed.
        let mut keyed_tasks = Vec::new();
        while keyed_tasks.is_empty() {
            let done = running.remove(0);
            let actions = jm.task_state(
                done.execution,
                ExecutionState::Finished,
                None,
                TaskMetrics::default(),
                2,
            );
            for d in run_deployed(&mut jm, &actions, 2) {
                if d.execution.vertex as usize == keyed {
                    keyed_tasks.push(d.clone());
                }
                running.push(d);
            }
        }
        let failed = keyed_tasks[0].clone();
        let actions = jm.task_state(
            failed.execution,
            ExecutionState::Failed,
            Some("boom".into()),
            TaskMetrics::default(),
            10,
        );
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Cancel { .. })),
            "nothing else is cancelled: {actions:?}"
        );
        assert_eq!(jm.status, JobStatus::Running);
        assert_eq!(jm.poll_timeout(), Some(110));
        assert!(deploys(&jm.tick(50)).is_empty());
        let again = jm.tick(110);
        let redeployed = deploys(&again);
        assert_eq!(redeployed.len(), 1);
        assert_eq!(redeployed[0].execution.subtask, failed.execution.subtask);
        assert_eq!(
            redeployed[0].execution.attempt,
            failed.execution.attempt + 1
        );
        assert_eq!(
            redeployed[0].inputs.len(),
            failed.inputs.len(),
            "it reads the same finished producers"
        );
        let redeployed = redeployed[0].clone();
        running.retain(|d| d.execution != failed.execution);
        running.push(redeployed);
        report_all(&mut jm, &running, ExecutionState::Running);
        while !running.is_empty() {
            let done = running.remove(0);
            let actions = jm.task_state(
                done.execution,
                ExecutionState::Finished,
                None,
                TaskMetrics::default(),
                120,
            );
            running.extend(run_deployed(&mut jm, &actions, 120));
        }
        assert_eq!(jm.status, JobStatus::Finished);
        assert_eq!(jm.restarted_tasks(), 1);
        assert_eq!(jm.exceptions.len(), 1);
    }

    #[test]
    fn a_lost_taskmanager_reruns_its_finished_output_that_consumers_still_need() {
        let mut jm = job_in(2, true);
        jm.restart = RestartTracker::new(RestartPolicy::FixedDelay {
            attempts: 5,
            delay_ms: 0,
        });
        jm.start(0);
        let tokenizer = vertex(&jm, "Tokenizer");
        let keyed = vertex(&jm, "Keyed");
        let allocated = jm.slots_allocated(slots(2), 1);
        let mut running = run_deployed(&mut jm, &allocated, 1);
        // Finish everything before the keyed vertex, then deploy the keyed subtasks.
        while !running.iter().any(|d| d.execution.vertex as usize == keyed) {
            let done = running.remove(0);
            let actions = jm.task_state(
                done.execution,
                ExecutionState::Finished,
                None,
                TaskMetrics::default(),
                2,
            );
            running.extend(run_deployed(&mut jm, &actions, 2));
        }
        // tm1 goes: the keyed subtask on it failed, the tokenizer output on it is gone, and the
        // keyed subtask on tm0 (reading that output) is cancelled to run again.
        let on_tm1 = |jm: &JobMaster, v: usize| {
            (0..jm.executions[v].len())
                .filter(|&s| {
                    jm.executions[v][s]
                        .slot
                        .as_ref()
                        .is_some_and(|slot| slot.resource_id == "tm1")
                })
                .count()
        };
        assert_eq!(on_tm1(&jm, tokenizer), 1);
        let actions = jm.taskmanager_lost("tm1", "killed", 3);
        assert_eq!(jm.status, JobStatus::Running);
        let cancels: Vec<&Action> = actions
            .iter()
            .filter(|a| matches!(a, Action::Cancel { .. }))
            .collect();
        assert_eq!(cancels.len(), 1, "{actions:?}");
        assert!(actions.iter().any(|a| matches!(
            a,
            Action::RequestSlots {
                slots: 1,
                at_least: 1,
                ..
            }
        )));
        let rerun_tokenizer = deploys(&actions)
            .into_iter()
            .filter(|d| d.execution.vertex as usize == tokenizer)
            .count();
        assert!(rerun_tokenizer <= 1);
        let survivor = running
            .iter()
            .find(|d| {
                d.execution.vertex as usize == keyed
                    && jm.executions[keyed][d.execution.subtask as usize]
                        .slot
                        .as_ref()
                        .is_some_and(|slot| slot.resource_id == "tm0")
            })
            .unwrap()
            .clone();
        let mut running = run_deployed(&mut jm, &actions, 3);
        let actions = jm.task_state(
            survivor.execution,
            ExecutionState::Canceled,
            None,
            TaskMetrics::default(),
            4,
        );
        running.extend(run_deployed(&mut jm, &actions, 4));
        // The lost slot comes back (a new TaskManager).
        let replacement = vec![SlotRef {
            resource_id: "tm2".into(),
            data_address: "127.0.0.1:9".parse().unwrap(),
            index: 0,
        }];
        let allocated = jm.slots_allocated(replacement, 5);
        running.extend(run_deployed(&mut jm, &allocated, 5));
        while !running.is_empty() {
            let done = running.remove(0);
            let actions = jm.task_state(
                done.execution,
                ExecutionState::Finished,
                None,
                TaskMetrics::default(),
                6,
            );
            running.extend(run_deployed(&mut jm, &actions, 6));
        }
        assert_eq!(jm.status, JobStatus::Finished, "{:?}", jm.state_counts());
        // The failed keyed subtask, the rerun tokenizer subtask and the cancelled keyed one.
        assert_eq!(jm.restarted_tasks(), 3);
    }

    #[test]
    fn a_batch_job_refuses_savepoints_and_a_slot_timeout_with_slots_in_hand_is_harmless() {
        let mut jm = job_in(4, true);
        jm.start(0);
        jm.slots_allocated(slots(1), 1);
        assert!(
            jm.trigger_savepoint("a".repeat(32), None, AfterSavepoint::Run, 2)
                .unwrap_err()
                .contains("batch")
        );
        assert!(matches!(
            jm.slot_request_timed_out(300_000)[..],
            [Action::RequestSlots {
                slots: 3,
                at_least: 1,
                ..
            }]
        ));
        assert_eq!(jm.status, JobStatus::Running);
    }
}
