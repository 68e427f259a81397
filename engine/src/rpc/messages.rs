//! The control-plane messages between TaskManagers and the JobManager. Records never travel
//! here: only registration, heartbeats, deployment, cancellation and state reports.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::checkpoint::{SubtaskState, TaskRestore};
use crate::common::ids::{ExecutionId, JobId, ResourceId};
use crate::config::RuntimeMode;
use crate::logdir::{LogFile, LogTail};
use crate::state::SnapshotLocation;

/// A deployment names its input channels in the data plane's terms.
pub use crate::network::channel::{
    ChannelDeployment, InputDeployment, PartitionLocation, ProducerGroup,
};

/// Bumped whenever a message changes incompatibly; checked when a TaskManager registers.
pub const PROTOCOL_VERSION: u32 = 4;

/// Flink's execution states.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionState {
    /// Part of the execution graph, not yet scheduled.
    Created,
    /// Waiting for a slot.
    Scheduled,
    /// Sent to a TaskManager.
    Deploying,
    /// Its thread runs.
    Running,
    /// Ended after its input ended.
    Finished,
    /// Being cancelled.
    Canceling,
    /// Cancelled.
    Canceled,
    /// Failed.
    Failed,
    /// Being reconciled after a JobManager failover.
    Reconciling,
    /// Restoring state.
    Initializing,
}

impl ExecutionState {
    /// Every state, in Flink's order (for REST `tasks` counts).
    pub const ALL: [ExecutionState; 10] = [
        ExecutionState::Created,
        ExecutionState::Scheduled,
        ExecutionState::Deploying,
        ExecutionState::Running,
        ExecutionState::Finished,
        ExecutionState::Canceling,
        ExecutionState::Canceled,
        ExecutionState::Failed,
        ExecutionState::Reconciling,
        ExecutionState::Initializing,
    ];

    /// Whether the execution can change no more.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ExecutionState::Finished | ExecutionState::Canceled | ExecutionState::Failed
        )
    }

    /// Flink's upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            ExecutionState::Created => "CREATED",
            ExecutionState::Scheduled => "SCHEDULED",
            ExecutionState::Deploying => "DEPLOYING",
            ExecutionState::Running => "RUNNING",
            ExecutionState::Finished => "FINISHED",
            ExecutionState::Canceling => "CANCELING",
            ExecutionState::Canceled => "CANCELED",
            ExecutionState::Failed => "FAILED",
            ExecutionState::Reconciling => "RECONCILING",
            ExecutionState::Initializing => "INITIALIZING",
        }
    }
}

/// Which job program runs, with which arguments, and from which code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramSpec {
    /// The program's name in its registry.
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The job artifact holding the program (its content hash, see
    /// `crate::rpc::artifact`), or `None` for a program compiled into the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    /// `execution.runtime-mode` as the job was submitted with it: how the job executes unless
    /// its program chooses.
    #[serde(default, skip_serializing_if = "is_streaming")]
    pub runtime_mode: RuntimeMode,
}

fn is_streaming(mode: &RuntimeMode) -> bool {
    *mode == RuntimeMode::Streaming
}

impl ProgramSpec {
    /// A program of the process's own registry.
    pub fn new(name: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            name: name.into(),
            args,
            artifact: None,
            runtime_mode: RuntimeMode::Streaming,
        }
    }
}

/// Everything a TaskManager needs to run one subtask.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskDeployment {
    /// Which execution this is.
    pub execution: ExecutionId,
    /// The slot it goes to.
    pub slot: u32,
    /// The job's name.
    pub job_name: String,
    /// The job vertex's name (the `task_name` of the task's metrics).
    #[serde(default)]
    pub vertex_name: String,
    /// The program to rebuild the operators from.
    pub program: ProgramSpec,
    /// The parallelism operators get when they set none.
    pub default_parallelism: u32,
    /// The job graph's fingerprint; the TaskManager refuses the task if its rebuild differs.
    pub fingerprint: String,
    /// Per vertex input (in the vertex's input order), the producers it reads: a group the
    /// JobManager sent before ([`JmToTm::Producers`]).
    pub inputs: Vec<InputDeployment>,
    /// Per vertex output (in the vertex's output order), the consumer parallelism and key groups.
    pub outputs: Vec<OutputDeployment>,
    /// How the subtask keeps, checkpoints and restores state.
    pub state: TaskStateConfig,
    /// How often timestamp assigners emit watermarks, in ms (0: never periodically).
    #[serde(default)]
    pub auto_watermark_interval_ms: u64,
    /// Each vertex's parallelism when the adaptive scheduler runs the job at other than the
    /// program's (`None`: as built): the TaskManager rescales its rebuilt graph the same way.
    #[serde(default)]
    pub vertex_parallelism: Option<Vec<u32>>,
}

/// The state and checkpoint settings of a deployed subtask.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskStateConfig {
    /// `state.backend.type`: `hashmap` or `rocksdb`.
    pub backend: String,
    /// RocksDB checkpoints upload only new files (`execution.checkpointing.incremental`).
    pub incremental: bool,
    /// Whether the job is checkpointed.
    pub checkpointing: bool,
    /// Aligned barriers (exactly once) or not (at least once).
    pub exactly_once: bool,
    /// The checkpoint the subtask starts from, if any.
    pub restore: Option<TaskRestore>,
    /// How the job hashes keys into key groups: the function its restored state was written
    /// with, else the current one.
    pub key_hash: crate::common::keys::KeyHash,
    /// `state.storage.fs.memory-threshold`: an operator's operator state of more bytes is
    /// written to a file of the checkpoint instead of travelling inline.
    #[serde(default = "default_memory_threshold")]
    pub memory_threshold: u64,
}

fn default_memory_threshold() -> u64 {
    crate::config::Config::default().state.memory_threshold
}

impl Default for TaskStateConfig {
    fn default() -> Self {
        TaskStateConfig {
            backend: String::new(),
            incremental: false,
            checkpointing: false,
            exactly_once: false,
            restore: None,
            key_hash: crate::common::keys::KeyHash::default(),
            memory_threshold: default_memory_threshold(),
        }
    }
}

/// A result partition the subtask produces.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutputDeployment {
    /// Number of subpartitions (1 for a forward edge, else the consumer's parallelism).
    pub subpartitions: u32,
    /// The consumer's number of key groups (for hash partitioning).
    pub consumer_max_parallelism: u32,
}

/// Per-task I/O counters reported with heartbeats.
pub use crate::metrics::TaskMetrics;

/// Hardware facts a TaskManager reports (REST `hardware`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hardware {
    /// CPU cores.
    pub cpu_cores: u32,
    /// Physical memory in bytes.
    pub physical_memory: u64,
    /// The `taskmanager.memory.process.size` the TaskManager runs with, in bytes (REST
    /// `totalProcessMemory`, as Flink reports its TaskManagers' process size); 0 from a
    /// TaskManager too old to say.
    #[serde(default)]
    pub process_memory: u64,
}

/// The largest raw frame of an artifact sent after [`JmToTm::Artifact`].
pub const ARTIFACT_CHUNK: usize = 1 << 20;

/// The most bytes of a log file a TaskManager sends in one [`LogAnswer::Text`]: the end of a
/// longer file. JSON may escape each byte into six, and the answer must fit a control frame
/// ([`crate::rpc::transport::MAX_FRAME`]).
pub const LOG_TAIL_BYTES: u64 = 8 << 20;

/// Which of its logs the JobManager asks a TaskManager for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum LogQuery {
    /// The list of its log files.
    List,
    /// The end of one listed log file, by name.
    File {
        /// The file's name (never a path).
        name: String,
    },
    /// The end of the log it writes now.
    Current,
    /// The end of the file its stdout writes to.
    Stdout,
}

/// A TaskManager's answer to a [`LogQuery`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum LogAnswer {
    /// Its log files, the current one first.
    List {
        /// The files.
        logs: Vec<LogFile>,
    },
    /// The end of the file asked for (at most [`LOG_TAIL_BYTES`]).
    Text(LogTail),
    /// The name has a path separator or `..`.
    BadName {
        /// Why, for the REST answer.
        reason: String,
    },
    /// No such file (or no log file at all: the TaskManager logs to a terminal).
    NotFound {
        /// Why, for the REST answer.
        reason: String,
    },
    /// The file exists but cannot be read.
    Failed {
        /// Why, for the REST answer.
        reason: String,
    },
}

/// TaskManager → JobManager.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum TmToJm {
    /// First message on a connection.
    Register {
        /// Must equal [`PROTOCOL_VERSION`].
        protocol_version: u32,
        /// The TaskManager's id.
        resource_id: ResourceId,
        /// Host name others reach it by.
        host: String,
        /// QUIC data port.
        data_port: u16,
        /// Slots it offers.
        slots: u32,
        /// Its hardware.
        hardware: Hardware,
        /// Network memory in bytes.
        network_memory: u64,
        /// Managed memory in bytes (for RocksDB).
        #[serde(default)]
        managed_memory: u64,
        /// Executions it still runs (after a JobManager change).
        running: Vec<ExecutionId>,
        /// With HA: the leader session id of the JobManager it means to register with; a
        /// JobManager whose term differs refuses it.
        #[serde(default)]
        leader_session: Option<String>,
        /// The port of its Prometheus reporter (`metrics.reporter.prom.port`), if it runs one.
        #[serde(default)]
        metrics_port: Option<u16>,
        /// Set by a job's worker process registering with its TaskManager: the job it runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_of: Option<JobId>,
    },
    /// First and only request on a connection of its own: send the job artifact with this
    /// content key ([`crate::rpc::artifact::content_key`]). Answered by
    /// [`JmToTm::Artifact`] and the bytes as raw frames, or by [`JmToTm::Refused`].
    FetchArtifact {
        /// The artifact's content key.
        key: String,
    },
    /// Periodic liveness signal with task metrics.
    Heartbeat {
        /// Metrics of running and recently ended tasks.
        metrics: Vec<(ExecutionId, TaskMetrics)>,
        /// The TaskManager process's metrics (`Status.Process.*`).
        #[serde(default)]
        process: Option<crate::metrics::ProcessMetrics>,
    },
    /// A subtask took its snapshot for a checkpoint.
    AcknowledgeCheckpoint {
        /// Which execution.
        execution: ExecutionId,
        /// The checkpoint.
        checkpoint_id: u64,
        /// Its operators' state.
        state: SubtaskState,
    },
    /// A subtask could not take its snapshot.
    DeclineCheckpoint {
        /// Which execution.
        execution: ExecutionId,
        /// The checkpoint.
        checkpoint_id: u64,
        /// Why.
        reason: String,
    },
    /// An execution changed state.
    TaskState {
        /// Which execution.
        execution: ExecutionId,
        /// Its new state.
        state: ExecutionState,
        /// For FAILED: why.
        error: Option<String>,
        /// Final metrics.
        metrics: TaskMetrics,
    },
    /// Answer to [`JmToTm::LogRequest`].
    LogAnswer {
        /// The request's number.
        request: u64,
        /// The list or text asked for, or why not.
        answer: LogAnswer,
    },
}

/// JobManager → TaskManager.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum JmToTm {
    /// Registration accepted.
    Registered {
        /// The JobManager's heartbeat interval in milliseconds.
        heartbeat_interval_ms: u64,
        /// After this many milliseconds without a message from the JobManager the TaskManager
        /// gives up on it.
        heartbeat_timeout_ms: u64,
    },
    /// Registration refused; the connection closes after this.
    Refused {
        /// Why, for the TaskManager's log.
        reason: String,
    },
    /// The producers that deployments after this one read from; replaces an older group of the
    /// same result.
    Producers(Arc<ProducerGroup>),
    /// Run a subtask.
    Deploy(Box<TaskDeployment>),
    /// Cancel a subtask.
    Cancel {
        /// Which execution.
        execution: ExecutionId,
    },
    /// Start a checkpoint at this subtask (a source, or a task whose producers all finished).
    TriggerCheckpoint {
        /// Which execution.
        execution: ExecutionId,
        /// When it was triggered (ms since the epoch).
        timestamp: u64,
        /// Where the snapshot goes, with the checkpoint's id.
        location: SnapshotLocation,
        /// A source first sends the watermark to the end of time (a stop with drain).
        #[serde(default)]
        drain: bool,
    },
    /// A checkpoint completed: commit what it covers.
    NotifyCheckpointComplete {
        /// Which execution.
        execution: ExecutionId,
        /// The checkpoint.
        checkpoint_id: u64,
    },
    /// A checkpoint was given up.
    NotifyCheckpointAborted {
        /// Which execution.
        execution: ExecutionId,
        /// The checkpoint.
        checkpoint_id: u64,
    },
    /// A job's executions on this TaskManager are over: free its partitions.
    ReleaseJob {
        /// The job.
        job: JobId,
    },
    /// Answer to a heartbeat.
    HeartbeatAck,
    /// Send one of your log files or their list (the REST API's `/taskmanagers/:id/log*`);
    /// answered by [`TmToJm::LogAnswer`] with the same `request`.
    LogRequest {
        /// Numbers the request, unique per JobManager.
        request: u64,
        /// What is asked for.
        query: LogQuery,
    },
    /// Answer to [`TmToJm::FetchArtifact`]: the artifact's size; its bytes follow as raw
    /// frames of at most [`ARTIFACT_CHUNK`] bytes.
    Artifact {
        /// Its size in bytes.
        size: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_requests_and_answers_survive_the_wire() {
        let queries = [
            LogQuery::List,
            LogQuery::File {
                name: "tm.log.1".into(),
            },
            LogQuery::Current,
            LogQuery::Stdout,
        ];
        for (request, query) in queries.into_iter().enumerate() {
            let sent = JmToTm::LogRequest {
                request: request as u64,
                query: query.clone(),
            };
            let wire = serde_json::to_vec(&sent).unwrap();
            match serde_json::from_slice::<JmToTm>(&wire).unwrap() {
                JmToTm::LogRequest {
                    request: r,
                    query: q,
                } => {
                    assert_eq!((r, q), (request as u64, query));
                }
                other => panic!("{other:?}"),
            }
        }
        let answers = [
            LogAnswer::List {
                logs: vec![LogFile {
                    name: "tm.log".into(),
                    size: 12,
                    mtime: 1_700_000_000_000,
                }],
            },
            LogAnswer::Text(LogTail {
                text: "a line\n\"quoted\" \u{1b}[1m\n".into(),
                skipped: 7,
            }),
            LogAnswer::BadName {
                reason: "..".into(),
            },
            LogAnswer::NotFound { reason: "x".into() },
            LogAnswer::Failed { reason: "y".into() },
        ];
        for answer in answers {
            let sent = TmToJm::LogAnswer {
                request: 9,
                answer: answer.clone(),
            };
            let wire = serde_json::to_vec(&sent).unwrap();
            match serde_json::from_slice::<TmToJm>(&wire).unwrap() {
                TmToJm::LogAnswer { request, answer: a } => {
                    assert_eq!((request, a), (9, answer));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn the_largest_log_tail_fits_a_control_frame_even_when_every_byte_is_escaped() {
        // A control character is the longest escape JSON has: `\u0001`, six bytes.
        let text = "\u{1}".repeat(LOG_TAIL_BYTES as usize);
        let answer = TmToJm::LogAnswer {
            request: u64::MAX,
            answer: LogAnswer::Text(LogTail {
                text,
                skipped: u64::MAX,
            }),
        };
        let wire = serde_json::to_vec(&answer).unwrap();
        assert!(wire.len() > 6 * LOG_TAIL_BYTES as usize);
        assert!(
            wire.len() < crate::rpc::transport::MAX_FRAME,
            "{} bytes",
            wire.len()
        );
    }
}
