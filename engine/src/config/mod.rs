//! The engine's one configuration tree: `conf/config.yaml` with Flink's keys, plus `-D` overrides.
//!
//! Every option is a row in a registry ([`known_options`]) giving its key, type, default and doc;
//! parsing, validation, [`Config::entries`], [`Config::to_overrides`] and the shipped
//! `conf/config.yaml` all derive from it, and a unit test keeps the file in step with it.
//!
//! Loading order: defaults, then the file (nested maps flatten to dotted keys, as in Flink),
//! then `-D key=value` overrides, then cross-option rules. Unknown keys and malformed values are
//! errors that name the key and where it was written; nothing is silently ignored.
//!
//! Adding an option takes a field here (and its placeholder in `Config::unfilled`), a row in
//! `options.rs`, and its default with the same doc line in `conf/config.yaml`; the tests fail
//! until all of them agree.

mod error;
mod options;
mod paths;
mod units;
mod yaml;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::ConfigError;
pub use options::{MAX_MEMORY_SIZE, MAX_PARALLELISM, MAX_TASK_SLOTS, OptionDef, known_options};
pub use paths::{
    HDFS_SCHEME, HdfsUri, check_client_path, check_client_storage_path, local_path, storage_path,
};
pub use units::{
    PortRange, format_duration, format_memory_size, parse_duration, parse_memory_size,
};

/// The file name looked up in the conf dir.
pub const CONFIG_FILE_NAME: &str = "config.yaml";

/// Where `-D` overrides come from, as named in errors.
const OVERRIDE_ORIGIN: &str = "-D";
/// Where [`Config::set`] values come from, as named in errors.
const SET_ORIGIN: &str = "command line";
/// Where values nobody set come from, as named in conflict errors.
const DEFAULT_ORIGIN: &str = "defaults";

/// The effective configuration of a sluice process. Defaults are those of [`known_options`].
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// JobManager endpoint options (`jobmanager.*`).
    pub jobmanager: JobManagerOptions,
    /// REST API and web UI options (`rest.*`).
    pub rest: RestOptions,
    /// TaskManager identity and endpoint options (`taskmanager.*`).
    pub taskmanager: TaskManagerOptions,
    /// Network buffer and memory options (`taskmanager.memory.*`, `taskmanager.network.*`).
    pub network: NetworkOptions,
    /// `parallelism.default` (default 1, at least 1): parallelism of jobs that set none.
    pub parallelism_default: u32,
    /// `pipeline.max-parallelism` (default -1 = `None`, derived per operator as Flink does;
    /// otherwise 1..=32768): the number of key groups keyed state can be rescaled over.
    pub max_parallelism: Option<u32>,
    /// `pipeline.auto-watermark-interval` (default 200 ms; 0: off): how often timestamp
    /// assigners emit watermarks.
    pub auto_watermark_interval: Duration,
    /// `execution.runtime-mode` (default STREAMING): how jobs execute unless their program
    /// chooses.
    pub runtime_mode: RuntimeMode,
    /// Heartbeat options (`heartbeat.*`).
    pub heartbeat: HeartbeatOptions,
    /// `slot.request.timeout` (default 5 min): how long a job waits for a slot.
    pub slot_request_timeout: Duration,
    /// `jobmanager.scheduler` (default `default`): which scheduler runs new jobs.
    pub scheduler: SchedulerKind,
    /// The adaptive scheduler's options (`jobmanager.adaptive-scheduler.*`, `scheduler-mode`).
    pub adaptive: AdaptiveSchedulerOptions,
    /// Restart strategy options (`restart-strategy.*`).
    pub restart: RestartOptions,
    /// Finished-job store options (`jobstore.*`).
    pub jobstore: JobStoreOptions,
    /// The daemons' log file (`log.file.*`).
    pub log: LogOptions,
    /// Metric reporters (`metrics.reporter.*`).
    pub metrics: MetricsOptions,
    /// Security options (`security.*`).
    pub security: SecurityOptions,
    /// Checkpointing options (`execution.checkpointing.*`).
    pub checkpointing: CheckpointingOptions,
    /// State backend options (`state.backend.*`).
    pub state: StateOptions,
    /// High availability (`high-availability.*`).
    pub ha: HaOptions,
    /// Running on YARN (`yarn.*`, and the sizes of the containers sluice asks YARN for).
    pub yarn: YarnOptions,
    /// Running on Kubernetes (`kubernetes.*`, and the start-worker failure rate).
    pub kubernetes: KubernetesOptions,
}

/// How the JobManager's REST Service is exposed (`kubernetes.rest-service.exposed.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceExposedType {
    /// `ClusterIP`: reachable inside the cluster only (the JobManager pod's address).
    ClusterIp,
    /// `NodePort`: on a port of every node.
    NodePort,
    /// `LoadBalancer`: through the cloud's load balancer.
    LoadBalancer,
}

impl ServiceExposedType {
    /// The Service `type` in the Kubernetes API.
    pub fn api_name(self) -> &'static str {
        match self {
            ServiceExposedType::ClusterIp => "ClusterIP",
            ServiceExposedType::NodePort => "NodePort",
            ServiceExposedType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// Flink's `kubernetes.*` keys.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesOptions {
    /// `kubernetes.cluster-id` (default unset: `kubernetes-session` makes one up): names the
    /// JobManager's Deployment, its Service and every pod of the cluster.
    pub cluster_id: Option<String>,
    /// `kubernetes.config.file` (default unset: $KUBECONFIG, else ~/.kube/config, else the
    /// pod's in-cluster service account).
    pub config_file: Option<PathBuf>,
    /// `kubernetes.container.image` (default `sluice:latest`): the image of every pod.
    pub image: String,
    /// `kubernetes.jobmanager.service-account` (default `default`): the JobManager pod's
    /// service account, which must be allowed to create, watch and delete pods.
    pub jobmanager_service_account: String,
    /// `kubernetes.namespace` (default `default`).
    pub namespace: String,
    /// `kubernetes.rest-service.exposed.type` (default ClusterIP).
    pub rest_service_exposed_type: ServiceExposedType,
    /// `kubernetes.taskmanager.cpu` (default 1.0): the CPU each TaskManager pod requests.
    pub taskmanager_cpu: f64,
    /// `resourcemanager.start-worker.max-failure-rate` (default 10.0): TaskManager pods that
    /// may fail (crash, fail to start) within one minute before the JobManager gives up.
    pub max_failure_rate: f64,
}

/// Flink's `high-availability.*` keys.
#[derive(Debug, Clone, PartialEq)]
pub struct HaOptions {
    /// `high-availability.type` (default NONE): `zookeeper` elects a leader among JobManagers.
    pub zookeeper: bool,
    /// `high-availability.zookeeper.quorum`: `host:port,host:port,...`.
    pub quorum: Option<String>,
    /// `high-availability.storageDir`: where job graphs, results and job
    /// artifacts are kept (shared by all JobManagers): a path or an `hdfs:` URI.
    pub storage_dir: Option<String>,
    /// `high-availability.cluster-id` (default `default`).
    pub cluster_id: String,
    /// `high-availability.zookeeper.path.root` (default `/sluice`).
    pub root: String,
    /// `high-availability.zookeeper.client.session-timeout` (default 6 s).
    pub session_timeout: Duration,
    /// `high-availability.zookeeper.client.connection-timeout` (default 6 s).
    pub connection_timeout: Duration,
}

/// Options of sluice on YARN: what the client submits and what the ApplicationMaster's
/// resource driver asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct YarnOptions {
    /// `jobmanager.memory.process.size` (default 512mb): memory of the JobManager's container
    /// (the ApplicationMaster).
    pub jobmanager_memory: u64,
    /// `resourcemanager.taskmanager-timeout` (default 30 s): a TaskManager container whose
    /// slots have all been free this long is given back to YARN.
    pub taskmanager_timeout: Duration,
    /// `yarn.application-attempts` (default 1): ApplicationMaster attempts YARN makes.
    pub application_attempts: u32,
    /// `yarn.application.name` (default `sluice session`): the application's name in YARN.
    pub application_name: String,
    /// `yarn.application.queue` (default `default`): the YARN queue to submit to.
    pub queue: String,
    /// `yarn.containers.vcores` (default 1): virtual cores of each TaskManager container.
    pub vcores: u32,
    /// `yarn.maximum-failed-containers` (default 10): TaskManager containers that may end
    /// unasked before the application fails.
    pub maximum_failed_containers: u32,
    /// `yarn.resourcemanager.scheduler.address` (default unset: from yarn-site.xml, else the
    /// web address's host with port 8030).
    pub scheduler_address: Option<String>,
    /// `yarn.resourcemanager.webapp.address` (default unset: from yarn-site.xml).
    pub webapp_address: Option<String>,
    /// `yarn.staging-directory` (default unset: the user's HDFS home `/user/<user>` when
    /// `fs.defaultFS` is HDFS, else `$TMPDIR/sluice-yarn-<user>`): the client uploads the files
    /// every container gets to `<this>/.sluice/<application id>/`.
    pub staging_directory: Option<String>,
    /// `yarn.provided.lib.dirs` (default none): storage directories, one of which may already
    /// hold the `sluice` binary; it is then shipped from there instead of uploaded again.
    pub provided_lib_dirs: Vec<String>,
}

/// Which keyed-state backend jobs use (`state.backend.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateBackendKind {
    /// `hashmap`: state in memory, written out whole at each checkpoint.
    HashMap,
    /// `rocksdb`: state in a RocksDB instance per subtask on local disk; incremental checkpoints.
    RocksDb,
}

impl StateBackendKind {
    /// The name in `state.backend.type`.
    pub fn name(self) -> &'static str {
        match self {
            StateBackendKind::HashMap => "hashmap",
            StateBackendKind::RocksDb => "rocksdb",
        }
    }
}

/// How a job executes (`execution.runtime-mode`, Flink's `RuntimeExecutionMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RuntimeMode {
    /// Unbounded processing: every exchange streams, keyed aggregations emit each update,
    /// checkpoints recover failures.
    #[default]
    Streaming,
    /// Bounded processing: stage by stage over blocking exchanges written to disk, keyed
    /// aggregations emit only final results, failed parts rerun from finished stages' output.
    Batch,
    /// Batch if every source of the job is bounded, else streaming.
    Automatic,
}

impl RuntimeMode {
    /// Whether a job whose sources are all bounded (`all_bounded`) runs in batch mode.
    pub fn is_batch(self, all_bounded: bool) -> bool {
        match self {
            RuntimeMode::Streaming => false,
            RuntimeMode::Batch => true,
            RuntimeMode::Automatic => all_bounded,
        }
    }
}

/// Checkpointing modes (`execution.checkpointing.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointingMode {
    /// Barriers are aligned: every record is in the state exactly once.
    ExactlyOnce,
    /// Barriers are not aligned: after a restore some records may be processed twice.
    AtLeastOnce,
}

/// What happens to a job's checkpoints when it ends
/// (`execution.checkpointing.externalized-checkpoint-retention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointRetention {
    /// `NO_EXTERNALIZED_CHECKPOINTS` / `DELETE_ON_CANCELLATION`: deleted when the job finishes
    /// or is cancelled, kept when it fails.
    DeleteOnCancellation,
    /// `RETAIN_ON_CANCELLATION`: kept when the job is cancelled or fails.
    RetainOnCancellation,
}

/// Flink's `execution.checkpointing.*` keys.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointingOptions {
    /// `execution.checkpointing.interval` (default unset: no periodic checkpoints).
    pub interval: Option<Duration>,
    /// `execution.checkpointing.timeout` (default 10 min).
    pub timeout: Duration,
    /// `execution.checkpointing.min-pause` (default 0).
    pub min_pause: Duration,
    /// `execution.checkpointing.max-concurrent-checkpoints` (default 1).
    pub max_concurrent: u32,
    /// `execution.checkpointing.tolerable-failed-checkpoints` (default 0).
    pub tolerable_failures: u32,
    /// `execution.checkpointing.num-retained` (default 1).
    pub num_retained: u32,
    /// `execution.checkpointing.mode` (default EXACTLY_ONCE).
    pub mode: CheckpointingMode,
    /// `execution.checkpointing.dir` (default unset): where checkpoints are written, a storage
    /// path (a local path or an `hdfs://` URI, see [`storage_path`]).
    pub dir: Option<String>,
    /// `execution.checkpointing.savepoint-dir` (default unset): default savepoint target, a
    /// storage path.
    pub savepoint_dir: Option<String>,
    /// `execution.checkpointing.incremental` (default false).
    pub incremental: bool,
    /// `execution.savepoint.ignore-unclaimed-state` (default false; Flink's
    /// `--allowNonRestoredState`): a restore skips the state of operators the program no
    /// longer has instead of refusing.
    pub ignore_unclaimed_state: bool,
    /// `execution.checkpointing.externalized-checkpoint-retention`.
    pub retention: CheckpointRetention,
}

/// Flink's `state.backend.*` keys.
#[derive(Debug, Clone, PartialEq)]
pub struct StateOptions {
    /// `state.backend.type` (default hashmap).
    pub backend: StateBackendKind,
    /// `state.backend.rocksdb.localdir` (default unset: the system's temporary directory).
    pub rocksdb_localdir: Option<PathBuf>,
    /// `state.backend.rocksdb.memory.managed` (default true): the RocksDB instances of a slot
    /// share the slot's managed memory.
    pub rocksdb_memory_managed: bool,
    /// `state.backend.rocksdb.memory.fixed-per-slot` (default unset): a fixed memory size shared
    /// by the RocksDB instances of a slot, instead of managed memory.
    pub rocksdb_fixed_per_slot: Option<u64>,
    /// `state.backend.rocksdb.memory.write-buffer-ratio` (default 0.5, in (0, 1)): share of a
    /// slot's RocksDB memory for write buffers.
    pub rocksdb_write_buffer_ratio: f64,
    /// `state.storage.fs.memory-threshold` (default 20kb, at most 1mb): an operator's operator
    /// state in one subtask of more bytes is written to a file of the checkpoint instead of
    /// travelling inline in the acknowledgement and `_metadata`.
    pub memory_threshold: u64,
}

/// The name prefix of TaskManagers' local state directories, followed by `<pid>-<resource id>`.
pub const LOCAL_STATE_PREFIX: &str = "sluice-state-";

impl StateOptions {
    /// Where TaskManagers put their local state directories: `state.backend.rocksdb.localdir`,
    /// else the system's temporary directory.
    pub fn local_base(&self) -> PathBuf {
        self.rocksdb_localdir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
    }

    /// The local state directory (RocksDB instances of its subtasks) of the TaskManager
    /// `resource_id` running as process `pid`: `sluice-state-<pid>-<id>` in
    /// [`local_base`](Self::local_base). The pid in the name lets a later TaskManager tell a
    /// directory whose owner died from one in use.
    pub fn local_dir(&self, resource_id: &str, pid: u32) -> PathBuf {
        let safe: String = resource_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.local_base()
            .join(format!("{LOCAL_STATE_PREFIX}{pid}-{safe}"))
    }

    /// Bytes the RocksDB instances of one slot share, as Flink sizes them: `fixed-per-slot` if
    /// set, else the slot's share of managed memory when `memory.managed` is on; `None` means
    /// unbounded (each instance sized on its own).
    pub fn rocksdb_memory_per_slot(&self, memory: &NetworkOptions, slots: u32) -> Option<u64> {
        match self.rocksdb_fixed_per_slot {
            Some(fixed) => Some(fixed),
            None if self.rocksdb_memory_managed => {
                Some(memory.managed_memory() / u64::from(slots.max(1)))
            }
            None => None,
        }
    }
}

/// JobManager RPC endpoint options.
#[derive(Debug, Clone, PartialEq)]
pub struct JobManagerOptions {
    /// `jobmanager.rpc.address` (default `localhost`): address others use to reach the JobManager.
    pub rpc_address: String,
    /// `jobmanager.rpc.port` (default 6123): port of the JobManager's RPC endpoint.
    pub rpc_port: u16,
    /// `jobmanager.bind-host` (default `localhost`): local address the RPC endpoint binds to.
    pub bind_host: String,
    /// `jobmanager.rpc.max-connections` (default 1024): control connections the RPC port holds
    /// at once; more are closed as soon as they are accepted, so strangers cannot use up the
    /// process's file descriptors.
    pub rpc_max_connections: u32,
    /// `jobmanager.max-pending-jobs` (default 100): most jobs waiting for slots at once.
    pub max_pending_jobs: usize,
}

/// REST API and web UI options.
#[derive(Debug, Clone, PartialEq)]
pub struct RestOptions {
    /// `rest.address` (default `localhost`): address clients use to reach the REST API.
    pub address: String,
    /// `rest.port` (default 8081): port of the REST API and web UI.
    pub port: u16,
    /// `rest.bind-address` (default `localhost`): local address the REST server binds to.
    pub bind_address: String,
    /// `rest.server.header-read-timeout` (default 10 s): how long a client may take to send a
    /// request's line and headers, counted from the connection's start or the end of its
    /// previous answer (so it is also how long an idle keep-alive connection stays open).
    pub header_read_timeout: Duration,
    /// `rest.server.idle-timeout` (default 1 min): a connection on which no byte moves in either
    /// direction for this long is closed (a stalled request body, a client that stops reading).
    pub idle_timeout: Duration,
    /// `rest.server.max-connections` (default 1024): connections the REST port holds at once;
    /// more are answered 503 and closed.
    pub max_connections: u32,
    /// `web.submit.enable` (default true): whether REST clients may submit jobs.
    pub submit_enabled: bool,
    /// `web.cancel.enable` (default true): whether REST clients may cancel and stop jobs and
    /// take savepoints.
    pub cancel_enabled: bool,
    /// `web.submit.max-args-size` (default 64 KiB): most bytes of one submission's program
    /// arguments, together.
    pub max_args_size: u64,
    /// `rest.server.max-content-length` (default 100 MiB): the largest request body.
    pub max_content_length: u64,
    /// `web.upload.dir` (default: a directory of the JobManager's own in the system's temporary
    /// directory): where uploaded job artifacts are kept.
    pub upload_dir: Option<PathBuf>,
}

/// TaskManager identity and endpoint options.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskManagerOptions {
    /// `taskmanager.numberOfTaskSlots` (default 1, 1 to [`MAX_TASK_SLOTS`]): slots this TaskManager
    /// offers.
    pub number_of_task_slots: u32,
    /// `taskmanager.host` (default `localhost`): address others use to reach this TaskManager.
    pub host: String,
    /// `taskmanager.bind-host` (default `localhost`): local address the endpoints bind to.
    pub bind_host: String,
    /// `taskmanager.data.port` (default 0 = any free port): port of the data exchange endpoint.
    pub data_port: u16,
    /// `taskmanager.resource-id` (default unset = generated): stable identity of this TaskManager.
    pub resource_id: Option<String>,
    /// `taskmanager.threads.scheduling-policy` (default `batch`): how the OS schedules task and
    /// data-plane threads (see [`crate::threads`]).
    pub scheduling_policy: crate::threads::SchedulingPolicy,
    /// `blob.service.cleanup.interval` (default 1 h): how long a fetched job artifact that no
    /// job on this TaskManager runs stays in its cache.
    pub artifact_cleanup_interval: Duration,
    /// `taskmanager.registration.timeout` (default 5 min): how long a TaskManager may go
    /// without being registered at a JobManager, at start or after losing it, before it exits.
    pub registration_timeout: Duration,
}

/// Network buffer and memory options of a TaskManager.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkOptions {
    /// `taskmanager.memory.segment-size` (default 32kb, a power of two ≥ 4kb): one buffer's size.
    pub segment_size: u64,
    /// `taskmanager.memory.process.size` (default 1728mb): total memory of the process.
    pub process_size: u64,
    /// `taskmanager.memory.network.fraction` (default 0.1, in (0, 1)): share for network buffers.
    pub network_fraction: f64,
    /// `taskmanager.memory.network.min` (default 64mb): lower bound of network memory.
    pub network_min: u64,
    /// `taskmanager.memory.network.max` (default 1gb, ≥ min): upper bound of network memory.
    pub network_max: u64,
    /// `taskmanager.memory.managed.fraction` (default 0.4, in [0, 1)): share of the process
    /// memory managed for state backends, when `managed.size` is unset.
    pub managed_fraction: f64,
    /// `taskmanager.memory.managed.size` (default unset): managed memory as a fixed size.
    pub managed_size: Option<u64>,
    /// `taskmanager.network.memory.buffers-per-channel` (default 2): exclusive buffers per channel.
    pub buffers_per_channel: u32,
    /// `taskmanager.network.memory.floating-buffers-per-gate` (default 8): shared buffers per gate
    /// (lent to its remote channels) and per result partition.
    pub floating_buffers_per_gate: u32,
    /// `taskmanager.network.memory.max-buffers-per-channel` (default 10, ≥ 1): most buffers one
    /// subpartition may queue.
    pub max_buffers_per_channel: u32,
    /// `execution.buffer-timeout` (default 100 ms): longest wait before a partial buffer is flushed.
    pub buffer_timeout: Duration,
    /// `taskmanager.network.blocking-shuffle.compression.enabled` (default true): blocking
    /// partitions of batch jobs are LZ4-compressed.
    pub blocking_compression: bool,
    /// `taskmanager.network.sort-shuffle.min-buffers` (default 512, ≥ 1): segments of output a
    /// blocking partition gathers in memory before it writes a region of its file.
    pub sort_shuffle_buffers: u32,
    /// `taskmanager.network.quic.max-mtu` (default `auto`): largest UDP payload the data plane's
    /// QUIC connections grow to by MTU discovery. `auto` takes it per peer from the MTU the
    /// kernel reports for the route to it (loopback's 64 KiB between TaskManagers of one host,
    /// 9000 on jumbo frames, Ethernet's 1500 otherwise); a number is one bound for every peer.
    pub quic_max_mtu: MtuLimit,
    /// `taskmanager.network.quic.num-threads` (default -1: one per task slot): threads of the
    /// data plane's own async runtime (QUIC I/O, encryption, serving and reading channels).
    pub quic_num_threads: i32,
}

/// The bound on the data plane's datagram size (`taskmanager.network.quic.max-mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtuLimit {
    /// Per peer, from the route's MTU.
    Auto,
    /// The largest UDP payload for every peer, in bytes (1200 to 65000).
    Max(u16),
}

impl NetworkOptions {
    /// Bytes reserved for network buffers: `fraction × process size`, clamped to `[min, max]`
    /// as Flink does. Never panics, even if `min > max` was set by hand after validation.
    pub fn network_memory(&self) -> u64 {
        // f64 → u64 saturates, and the product is at most process_size since fraction < 1.
        let relative = (self.network_fraction * self.process_size as f64) as u64;
        relative.max(self.network_min).min(self.network_max)
    }

    /// Bytes of managed memory (for RocksDB): `managed.size` if set, else `managed.fraction ×
    /// process size`. sluice has no JVM, so the fraction is of the whole process where Flink
    /// takes it of the "total Flink memory" (the process less JVM metaspace and overhead).
    pub fn managed_memory(&self) -> u64 {
        self.managed_size
            .unwrap_or((self.managed_fraction * self.process_size as f64) as u64)
    }
}

/// Heartbeats between the JobManager and TaskManagers.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatOptions {
    /// `heartbeat.interval` (default 10 s, shorter than the timeout): time between heartbeats.
    pub interval: Duration,
    /// `heartbeat.timeout` (default 50 s): silence after which a peer is declared dead.
    pub timeout: Duration,
    /// `heartbeat.rpc-failure-threshold` (default 2; -1 disables): consecutive heartbeats a
    /// peer may fail to answer before it counts as unreachable, before `heartbeat.timeout`.
    pub rpc_failure_threshold: i32,
}

impl HeartbeatOptions {
    /// How long a peer may stay silent before it is given up: `heartbeat.timeout`, or less when
    /// `heartbeat.rpc-failure-threshold` heartbeats in a row went unanswered (one interval of
    /// slack on top, so a heartbeat that is merely late does not count).
    pub fn detection_timeout(&self) -> Duration {
        if self.rpc_failure_threshold <= 0 {
            return self.timeout;
        }
        let missed = self.interval * (self.rpc_failure_threshold as u32 + 1);
        missed.min(self.timeout)
    }
}

/// Flink's restart strategies (`restart-strategy.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartStrategyKind {
    /// `none` (also `off`, `disable`): a failure fails the job.
    None,
    /// `fixed-delay`: a fixed number of restarts with a fixed delay.
    FixedDelay,
    /// `failure-rate`: restarts while failures per interval stay under a limit.
    FailureRate,
    /// `exponential-delay`: restarts with a growing backoff.
    ExponentialDelay,
}

/// How a job restarts after a failure (Flink's `restart-strategy.*` keys).
#[derive(Debug, Clone, PartialEq)]
pub struct RestartOptions {
    /// `restart-strategy.type` (default unset: `none` without checkpointing).
    pub kind: Option<RestartStrategyKind>,
    /// `restart-strategy.fixed-delay.attempts` (default 1).
    pub fixed_delay_attempts: u32,
    /// `restart-strategy.fixed-delay.delay` (default 1 s).
    pub fixed_delay_delay: Duration,
    /// `restart-strategy.failure-rate.max-failures-per-interval` (default 1).
    pub failure_rate_max_failures: u32,
    /// `restart-strategy.failure-rate.failure-rate-interval` (default 1 min).
    pub failure_rate_interval: Duration,
    /// `restart-strategy.failure-rate.delay` (default 1 s).
    pub failure_rate_delay: Duration,
    /// `restart-strategy.exponential-delay.initial-backoff` (default 1 s).
    pub exponential_initial_backoff: Duration,
    /// `restart-strategy.exponential-delay.max-backoff` (default 1 min).
    pub exponential_max_backoff: Duration,
    /// `restart-strategy.exponential-delay.backoff-multiplier` (default 1.5).
    pub exponential_multiplier: f64,
    /// `restart-strategy.exponential-delay.reset-backoff-threshold` (default 1 h).
    pub exponential_reset_threshold: Duration,
    /// `restart-strategy.exponential-delay.jitter-factor` (default 0.1).
    pub exponential_jitter: f64,
    /// `restart-strategy.exponential-delay.attempts-before-reset-backoff` (default unlimited).
    pub exponential_attempts_before_reset: u32,
}

/// Which scheduler the JobManager uses for new jobs (`jobmanager.scheduler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerKind {
    /// `default`: fixed parallelism, fails if the slots cannot be had within the slot timeout.
    Default,
    /// `adaptive`: declares the resources it wants and runs with what is available.
    Adaptive,
}

/// `scheduler-mode` (default unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerMode {
    /// `reactive`: the adaptive scheduler, every job using every slot (its vertices up to their
    /// maximum parallelism), waiting for slots without a timeout.
    Reactive,
}

/// The adaptive scheduler's options.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveSchedulerOptions {
    /// `jobmanager.adaptive-scheduler.resource-wait-timeout` (default 5 min; negative: forever):
    /// how long a job waits for the slots it wants before it runs with fewer, or fails without
    /// the slots it needs.
    pub resource_wait_timeout: Option<Duration>,
    /// `jobmanager.adaptive-scheduler.resource-stabilization-timeout` (default 10 s): how long
    /// the slots a job could have must stay unchanged before it starts with fewer than it wants.
    pub stabilization_timeout: Duration,
    /// `jobmanager.adaptive-scheduler.min-parallelism-increase` (default 1): the smallest raise
    /// of a vertex's parallelism worth a rescale.
    pub min_parallelism_increase: u32,
    /// `jobmanager.adaptive-scheduler.scaling-interval.min` (default 30 s): the least time
    /// between a job's (re)start and its next scale-up.
    pub scaling_interval_min: Duration,
    /// `jobmanager.adaptive-scheduler.scaling-interval.max` (default unset): after this long, a
    /// raise below the minimum increase rescales anyway.
    pub scaling_interval_max: Option<Duration>,
    /// `scheduler-mode` (default unset): `reactive`.
    pub mode: Option<SchedulerMode>,
}

/// The store of finished jobs served by the REST API.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStoreOptions {
    /// `jobstore.max-capacity` (default 1000): how many finished jobs are kept.
    pub max_capacity: usize,
    /// `jobstore.expiration-time` (default 1 h): how long a finished job is kept.
    pub expiration_time: Duration,
}

/// Flink's Prometheus reporter (`metrics.reporter.prom.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsOptions {
    /// `metrics.reporter.prom.factory.class` (default unset): set to Flink's
    /// `org.apache.flink.metrics.prometheus.PrometheusReporterFactory`, every JobManager and
    /// TaskManager serves its metrics to Prometheus.
    pub prometheus: bool,
    /// `metrics.reporter.prom.port` (default 9249): the port, or a range such as `9250-9260` of
    /// which each process takes the first free port.
    pub prometheus_port: PortRange,
}

/// The daemons' log file.
#[derive(Debug, Clone, PartialEq)]
pub struct LogOptions {
    /// `log.file.max-size` (default 100 MiB): size at which the log file is rolled over.
    pub file_max_size: u64,
    /// `log.file.max-count` (default 10): rolled-over log files kept.
    pub file_max_count: u32,
}

/// Cluster authentication options.
///
/// The secret is looked up in order: `security.cluster.secret`, the file named by
/// `security.cluster.secret-file`, the environment variable `SLUICE_CLUSTER_SECRET`, and
/// `<conf dir>/.cluster-secret` (generated by the standalone scripts). This struct holds only
/// the first two; the process start-up code walks the rest of the chain.
#[derive(Clone, PartialEq)]
pub struct SecurityOptions {
    /// `security.cluster.secret` (default unset): the shared secret itself.
    pub cluster_secret: Option<String>,
    /// `security.cluster.secret-file` (default unset): a file holding the secret.
    pub cluster_secret_file: Option<PathBuf>,
    /// `security.handshake.timeout` (default 10 s): how long a peer may take for the TLS
    /// handshake and the proof of the secret before its connection is closed.
    pub handshake_timeout: Duration,
    /// `security.handshake.max-concurrent` (default 64): connections per port (the JobManager's
    /// RPC port, a TaskManager's data port) that may be in their handshake at once; later ones
    /// wait their turn.
    pub handshake_max_concurrent: u32,
    /// `security.io.allowed-dirs` (default empty: any absolute path): the directories inside
    /// which clients may name savepoint targets, restore paths and job inputs and outputs.
    pub io_allowed_dirs: Vec<PathBuf>,
    /// TLS of the REST API and of its clients (`security.ssl.rest.*`).
    pub rest_ssl: RestSslOptions,
}

/// TLS of the REST API (`security.ssl.rest.*` and `security.ssl.verify-hostname`). The same keys
/// configure the server (the JobManager) and its clients (the CLI, the YARN client): files are
/// PEM, not Flink's Java keystores. `crate::security::rest_tls` reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct RestSslOptions {
    /// `security.ssl.rest.enabled` (default false): the REST API is served over HTTPS and
    /// clients connect with `https://`.
    pub enabled: bool,
    /// `security.ssl.rest.authentication-enabled` (default false): mutual TLS; the server
    /// requires a client certificate signed by a CA of the truststore, and clients present
    /// `cert` and `key`.
    pub authentication: bool,
    /// `security.ssl.rest.cert` (default unset): PEM certificate chain, own certificate first.
    pub cert: Option<PathBuf>,
    /// `security.ssl.rest.key` (default unset): PEM private key of `cert`.
    pub key: Option<PathBuf>,
    /// `security.ssl.rest.truststore` (default unset): PEM CA certificates the peer's
    /// certificate must chain to; unset on a client: the public web CAs.
    pub truststore: Option<PathBuf>,
    /// `security.ssl.verify-hostname` (default true): a client checks that the server's
    /// certificate names the host it connects to.
    pub verify_hostname: bool,
}

impl RestSslOptions {
    /// The URL scheme of the REST API: `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.enabled { "https" } else { "http" }
    }
}

impl std::fmt::Debug for SecurityOptions {
    /// Masks the secret so it cannot leak into logs through `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecurityOptions")
            .field(
                "cluster_secret",
                &self.cluster_secret.as_ref().map(|_| MASK),
            )
            .field("cluster_secret_file", &self.cluster_secret_file)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("handshake_max_concurrent", &self.handshake_max_concurrent)
            .field("io_allowed_dirs", &self.io_allowed_dirs)
            .field("rest_ssl", &self.rest_ssl)
            .finish()
    }
}

/// What sensitive values are rendered as, as in Flink's REST API.
const MASK: &str = "******";

impl Default for Config {
    /// Every option at the default given in the registry.
    fn default() -> Self {
        let mut config = Config::unfilled();
        for def in known_options() {
            // The registry's own defaults are checked by a unit test; a failure here is a bug.
            if let Err(e) = def.apply(&mut config, def.default, DEFAULT_ORIGIN) {
                panic!("built-in default is invalid: {e}");
            }
        }
        config
    }
}

impl Config {
    /// A placeholder that `Default` overwrites field by field from the registry.
    fn unfilled() -> Self {
        Config {
            jobmanager: JobManagerOptions {
                rpc_address: String::new(),
                rpc_port: 0,
                bind_host: String::new(),
                rpc_max_connections: 0,
                max_pending_jobs: 0,
            },
            rest: RestOptions {
                address: String::new(),
                port: 0,
                bind_address: String::new(),
                header_read_timeout: Duration::ZERO,
                idle_timeout: Duration::ZERO,
                max_connections: 0,
                max_args_size: 0,
                max_content_length: 0,
                upload_dir: None,
                submit_enabled: false,
                cancel_enabled: false,
            },
            taskmanager: TaskManagerOptions {
                number_of_task_slots: 0,
                host: String::new(),
                bind_host: String::new(),
                data_port: 0,
                resource_id: None,
                scheduling_policy: crate::threads::SchedulingPolicy::Normal,
                artifact_cleanup_interval: Duration::ZERO,
                registration_timeout: Duration::ZERO,
            },
            network: NetworkOptions {
                segment_size: 0,
                process_size: 0,
                network_fraction: 0.0,
                network_min: 0,
                network_max: 0,
                managed_fraction: 0.0,
                managed_size: None,
                buffers_per_channel: 0,
                floating_buffers_per_gate: 0,
                max_buffers_per_channel: 0,
                blocking_compression: false,
                sort_shuffle_buffers: 0,
                buffer_timeout: Duration::ZERO,
                quic_max_mtu: MtuLimit::Auto,
                quic_num_threads: 0,
            },
            parallelism_default: 0,
            max_parallelism: None,
            auto_watermark_interval: Duration::ZERO,
            runtime_mode: RuntimeMode::Streaming,
            heartbeat: HeartbeatOptions {
                interval: Duration::ZERO,
                timeout: Duration::ZERO,
                rpc_failure_threshold: 0,
            },
            slot_request_timeout: Duration::ZERO,
            scheduler: SchedulerKind::Default,
            adaptive: AdaptiveSchedulerOptions {
                resource_wait_timeout: None,
                stabilization_timeout: Duration::ZERO,
                min_parallelism_increase: 0,
                scaling_interval_min: Duration::ZERO,
                scaling_interval_max: None,
                mode: None,
            },
            restart: RestartOptions {
                kind: None,
                fixed_delay_attempts: 0,
                fixed_delay_delay: Duration::ZERO,
                failure_rate_max_failures: 0,
                failure_rate_interval: Duration::ZERO,
                failure_rate_delay: Duration::ZERO,
                exponential_initial_backoff: Duration::ZERO,
                exponential_max_backoff: Duration::ZERO,
                exponential_multiplier: 0.0,
                exponential_reset_threshold: Duration::ZERO,
                exponential_jitter: 0.0,
                exponential_attempts_before_reset: 0,
            },
            jobstore: JobStoreOptions {
                max_capacity: 0,
                expiration_time: Duration::ZERO,
            },
            log: LogOptions {
                file_max_size: 0,
                file_max_count: 0,
            },
            metrics: MetricsOptions {
                prometheus: false,
                prometheus_port: PortRange { first: 0, last: 0 },
            },
            security: SecurityOptions {
                cluster_secret: None,
                cluster_secret_file: None,
                handshake_timeout: Duration::ZERO,
                handshake_max_concurrent: 0,
                io_allowed_dirs: Vec::new(),
                rest_ssl: RestSslOptions {
                    enabled: false,
                    authentication: false,
                    cert: None,
                    key: None,
                    truststore: None,
                    verify_hostname: false,
                },
            },
            checkpointing: CheckpointingOptions {
                interval: None,
                timeout: Duration::ZERO,
                min_pause: Duration::ZERO,
                max_concurrent: 0,
                tolerable_failures: 0,
                num_retained: 0,
                mode: CheckpointingMode::ExactlyOnce,
                dir: None,
                savepoint_dir: None,
                incremental: false,
                ignore_unclaimed_state: false,
                retention: CheckpointRetention::DeleteOnCancellation,
            },
            state: StateOptions {
                backend: StateBackendKind::HashMap,
                rocksdb_localdir: None,
                rocksdb_memory_managed: false,
                rocksdb_fixed_per_slot: None,
                rocksdb_write_buffer_ratio: 0.0,
                memory_threshold: 0,
            },
            ha: HaOptions {
                zookeeper: false,
                quorum: None,
                storage_dir: None,
                cluster_id: String::new(),
                root: String::new(),
                session_timeout: Duration::ZERO,
                connection_timeout: Duration::ZERO,
            },
            yarn: YarnOptions {
                jobmanager_memory: 0,
                taskmanager_timeout: Duration::ZERO,
                application_attempts: 0,
                application_name: String::new(),
                queue: String::new(),
                vcores: 0,
                maximum_failed_containers: 0,
                scheduler_address: None,
                webapp_address: None,
                staging_directory: None,
                provided_lib_dirs: Vec::new(),
            },
            kubernetes: KubernetesOptions {
                cluster_id: None,
                config_file: None,
                image: String::new(),
                jobmanager_service_account: String::new(),
                namespace: String::new(),
                rest_service_exposed_type: ServiceExposedType::ClusterIp,
                taskmanager_cpu: 0.0,
                max_failure_rate: 0.0,
            },
        }
    }

    /// Loads `<conf_dir>/config.yaml` and applies `-D` overrides (raw `key=value` strings).
    ///
    /// Without a conf dir every option keeps its default. A conf dir without `config.yaml` is an
    /// error naming the path, since the operator evidently meant to configure something.
    pub fn load(conf_dir: Option<&Path>, overrides: &[String]) -> Result<Config, ConfigError> {
        let Some(dir) = conf_dir else {
            return Loader::new().finish(overrides);
        };
        let path = dir.join(CONFIG_FILE_NAME);
        let yaml = std::fs::read_to_string(&path).map_err(|error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                ConfigError::MissingFile { path: path.clone() }
            } else {
                ConfigError::Unreadable {
                    path: path.clone(),
                    error,
                }
            }
        })?;
        let config = Config::from_yaml_str(&yaml, &path.display().to_string(), overrides)?;
        tracing::debug!(path = %path.display(), "loaded configuration");
        Ok(config)
    }

    /// Parses a `config.yaml` text and applies `-D` overrides; `source` names the file in errors.
    pub fn from_yaml_str(
        yaml: &str,
        source: &str,
        overrides: &[String],
    ) -> Result<Config, ConfigError> {
        let mut loader = Loader::new();
        for (key, value) in yaml::flatten(yaml, source)? {
            loader.apply(&key, &value, source)?;
        }
        loader.finish(overrides)
    }

    /// Every option with its effective value, sorted by key and rendered as in the file
    /// (`"10 s"`, `"32kb"`; unset optional values as `""`). Secrets are masked as `******`.
    pub fn entries(&self) -> Vec<(String, String)> {
        // The registry is sorted by key (checked by a test).
        known_options()
            .iter()
            .map(|def| {
                let value = def.render(self);
                let value = if def.sensitive && !value.is_empty() {
                    MASK.to_owned()
                } else {
                    value
                };
                (def.key.to_owned(), value)
            })
            .collect()
    }

    /// Sets one option from text, parsed exactly like a `-D` value (used by CLI flags like `-p`).
    ///
    /// The change is checked against the cross-option rules too; on error `self` is unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let def = lookup(key, SET_ORIGIN)?;
        let mut next = self.clone();
        def.apply(&mut next, value, SET_ORIGIN)?;
        next.check_rules(|_| SET_ORIGIN.to_owned())?;
        *self = next;
        Ok(())
    }

    /// `key=value` for every option that differs from its default, so a parent process can hand
    /// its effective configuration to a child with `-D`.
    ///
    /// Sensitive options (the cluster secret) are left out: command lines are visible to every
    /// local user. Pass the secret to a child through `SLUICE_CLUSTER_SECRET` or a secret file.
    pub fn to_overrides(&self) -> Vec<String> {
        let defaults = Config::default();
        known_options()
            .iter()
            .filter(|def| !def.sensitive)
            .filter_map(|def| {
                let value = def.render(self);
                (value != def.render(&defaults)).then(|| format!("{}={value}", def.key))
            })
            .collect()
    }

    /// Checks the rules between options (e.g. heartbeat interval < timeout). [`Config::load`],
    /// [`Config::from_yaml_str`] and [`Config::set`] already do; call this after editing fields.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_rules(|_| "configuration".to_owned())
    }

    fn check_rules(&self, origin_of: impl Fn(&str) -> String) -> Result<(), ConfigError> {
        for rule in options::RULES {
            if let Err(reason) = (rule.check)(self) {
                let (first, second) = (origin_of(rule.key), origin_of(rule.other_key));
                let origin = if first == second {
                    first
                } else {
                    format!("{first} and {second}")
                };
                return Err(ConfigError::Conflict {
                    key: rule.key.to_owned(),
                    other_key: rule.other_key.to_owned(),
                    reason,
                    origin,
                });
            }
        }
        Ok(())
    }
}

/// Finds an option, or fails with an unknown-key error carrying a suggestion.
fn lookup(key: &str, origin: &str) -> Result<&'static OptionDef, ConfigError> {
    options::find(key).ok_or_else(|| ConfigError::UnknownKey {
        key: key.to_owned(),
        origin: origin.to_owned(),
        suggestion: options::suggest(key).map(str::to_owned),
    })
}

/// Applies values in order while remembering where each came from, for conflict errors.
struct Loader {
    config: Config,
    origins: HashMap<&'static str, String>,
}

impl Loader {
    fn new() -> Self {
        Loader {
            config: Config::default(),
            origins: HashMap::new(),
        }
    }

    fn apply(&mut self, key: &str, value: &str, origin: &str) -> Result<(), ConfigError> {
        let def = lookup(key, origin)?;
        def.apply(&mut self.config, value, origin)?;
        self.origins.insert(def.key, origin.to_owned());
        Ok(())
    }

    /// Applies `-D` overrides (later ones win) and checks the cross-option rules.
    fn finish(mut self, overrides: &[String]) -> Result<Config, ConfigError> {
        for arg in overrides {
            let (key, value) = arg
                .split_once('=')
                .ok_or_else(|| ConfigError::MalformedOverride { arg: arg.clone() })?;
            self.apply(key.trim(), value, OVERRIDE_ORIGIN)?;
        }
        let origins = &self.origins;
        self.config.check_rules(|key| {
            origins
                .get(key)
                .cloned()
                .unwrap_or_else(|| DEFAULT_ORIGIN.to_owned())
        })?;
        Ok(self.config)
    }
}

#[cfg(test)]
mod tests;
