//! The TaskManager process's I/O shell: the data plane endpoint, the control connection to the
//! JobManager (registration, heartbeats, deployments, cancellations), and the task threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::logs;
use super::metrics::{TaskLabels, TaskManagerMetrics};
use super::task::{self, TaskHandle, TaskServices};
use super::worker::Workers;
use crate::api::TaskControl;
use crate::common::ids::{ExecutionId, JobId};
use crate::config::Config;
use crate::logdir;
use crate::network::channel::ProducerGroups;
use crate::network::registry::PartitionRegistry;
use crate::network::transport::{DataPlane, DataPlaneSettings, TransportError};
use crate::rpc::messages::{
    ExecutionState, Hardware, JmToTm, PROTOCOL_VERSION, TaskMetrics, TmToJm,
};
use crate::rpc::transport::{self, RpcError};
use crate::security::ClusterSecret;

/// Why a TaskManager stopped for good.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskManagerError {
    /// The data port could not be opened.
    #[error(transparent)]
    DataPlane(#[from] TransportError),
    /// The JobManager refused the registration.
    #[error("the JobManager refused the registration: {0}")]
    Refused(String),
    /// This TaskManager does not have the cluster's secret.
    #[error(
        "authentication with the JobManager at {0} failed: this TaskManager's cluster secret differs from the JobManager's"
    )]
    Authentication(String),
    /// ZooKeeper HA could not be used.
    #[error("high availability: {0}")]
    Ha(String),
    /// The Prometheus reporter's port could not be opened.
    #[error("the Prometheus reporter: {0}")]
    Reporter(std::io::Error),
    /// The port for job worker processes could not be opened.
    #[error("the port for job workers: {0}")]
    Workers(std::io::Error),
    /// No JobManager took this TaskManager's registration within
    /// `taskmanager.registration.timeout`, at start or after the last one was lost.
    #[error(
        "not registered at a JobManager for {} (taskmanager.registration.timeout): this TaskManager has no cluster and exits",
        crate::config::format_duration(*.0)
    )]
    RegistrationTimeout(Duration),
}

/// Gives up a TaskManager that stays unregistered too long: the `taskmanager.registration.timeout`
/// clock, started at start and again whenever a registration ends.
struct Unregistered {
    deadline: tokio::time::Instant,
    limit: Duration,
}

impl Unregistered {
    fn since_now(limit: Duration) -> Self {
        Unregistered {
            deadline: tokio::time::Instant::now() + limit,
            limit,
        }
    }

    fn error(&self) -> TaskManagerError {
        TaskManagerError::RegistrationTimeout(self.limit)
    }

    /// Runs `session` (whose registration sets `registered`) to its end, or gives it up with
    /// `None` when the deadline comes before it registered.
    async fn session<F>(&self, session: F, registered: &AtomicBool) -> Option<F::Output>
    where
        F: std::future::Future,
    {
        tokio::pin!(session);
        tokio::select! {
            r = &mut session => return Some(r),
            _ = tokio::time::sleep_until(self.deadline) => {}
        }
        if registered.load(Ordering::Acquire) {
            Some(session.await)
        } else {
            None
        }
    }
}

type Tasks = Arc<Mutex<HashMap<ExecutionId, TaskHandle>>>;

/// A running TaskManager.
pub struct TaskManager {
    /// Its id.
    pub resource_id: String,
    data: Arc<DataPlane>,
    tasks: Tasks,
    config: Config,
    secret: ClusterSecret,
    services: Arc<TaskServices>,
    metrics: Arc<TaskManagerMetrics>,
    /// The Prometheus reporter's port and server, if `metrics.reporter.prom.*` asks for one.
    reporter: Option<(u16, tokio::task::JoinHandle<()>)>,
    /// The worker processes of jobs whose code came in an artifact (none in a worker itself).
    workers: Option<Arc<Workers>>,
    /// In a job's worker process: the job.
    worker_of: Option<JobId>,
}

/// What this machine has, and the process size this TaskManager is configured with.
fn hardware(process_memory: u64) -> Hardware {
    let cpu_cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let physical_memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0);
    Hardware {
        cpu_cores,
        physical_memory,
        process_memory,
    }
}

/// The counters of the tasks that run now.
fn running_metrics(tasks: &Tasks) -> Vec<(ExecutionId, TaskMetrics)> {
    let tasks = tasks.lock().unwrap_or_else(|e| e.into_inner());
    tasks
        .iter()
        .map(|(id, t)| (*id, task::metrics_of(&t.counters)))
        .collect()
}

/// Opens the Prometheus reporter's port (the first free one of its range) and serves scrapes.
fn start_reporter(
    config: &Config,
    metrics: Arc<TaskManagerMetrics>,
    tasks: Tasks,
    workers: Option<Arc<Workers>>,
) -> std::io::Result<(u16, tokio::task::JoinHandle<()>)> {
    let listener = crate::metrics::bind(
        &config.metrics.prometheus_port,
        &config.taskmanager.bind_host,
    )?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let port = listener.local_addr()?.port();
    // The workers' subtasks are this TaskManager's as well, with their counters as of each
    // worker's last heartbeat.
    let render: crate::metrics::Render = Arc::new(move || {
        let mut running = running_metrics(&tasks);
        if let Some(workers) = &workers {
            running.extend(workers.metrics());
        }
        metrics.render(crate::metrics::now_ms(), &running)
    });
    let limits = crate::rpc::http::HttpLimits {
        header_read_timeout: config.rest.header_read_timeout,
        idle_timeout: config.rest.idle_timeout,
        max_connections: 64,
    };
    info!(port, "Prometheus reporter listening");
    let server = tokio::spawn(crate::rpc::http::serve(
        listener,
        crate::metrics::router(render),
        limits,
        None,
    ));
    Ok((port, server))
}

/// How long [`TaskManager::shutdown`] waits for cancelled subtasks to end.
const SHUTDOWN_TASK_WAIT: Duration = Duration::from_secs(10);

impl TaskManager {
    /// Opens the data port; call [`run`](Self::run) to register and work.
    /// It runs subtasks of the jobs of `programs`.
    pub async fn start(
        config: Config,
        secret: ClusterSecret,
        programs: Arc<crate::api::ProgramRegistry>,
    ) -> Result<Arc<TaskManager>, TaskManagerError> {
        Self::open(config, secret, programs, None).await
    }

    /// Opens the data port of a job's worker process (see `super::worker`); call
    /// [`serve_parent`](Self::serve_parent) to work for the TaskManager that started it.
    pub async fn start_worker(
        config: Config,
        secret: ClusterSecret,
        programs: Arc<crate::api::ProgramRegistry>,
        job: JobId,
    ) -> Result<Arc<TaskManager>, TaskManagerError> {
        Self::open(config, secret, programs, Some(job)).await
    }

    /// Registers with the TaskManager that started this worker and runs what it sends until
    /// the connection ends (the TaskManager stopped the worker, or went away).
    pub async fn serve_parent(self: Arc<Self>, parent: &str) -> Result<(), RpcError> {
        let registered = AtomicBool::new(false);
        let result = self.clone().session(parent, None, &registered).await;
        self.cancel_all();
        result
    }

    async fn open(
        config: Config,
        secret: ClusterSecret,
        programs: Arc<crate::api::ProgramRegistry>,
        worker_of: Option<JobId>,
    ) -> Result<Arc<TaskManager>, TaskManagerError> {
        let registry = Arc::new(PartitionRegistry::default());
        let net = &config.network;
        let settings = DataPlaneSettings {
            segment_size: net.segment_size as usize,
            partition_wait: Duration::from_secs(60),
            max_mtu: config.network.quic_max_mtu,
            threads: match config.network.quic_num_threads {
                n if n > 0 => n as usize,
                _ => config.taskmanager.number_of_task_slots.max(1) as usize,
            },
            scheduling_policy: config.taskmanager.scheduling_policy,
            idle_timeout: config
                .heartbeat
                .interval
                .clamp(Duration::from_secs(2), Duration::from_secs(10)),
            handshake_timeout: config.security.handshake_timeout,
            max_handshakes: config.security.handshake_max_concurrent,
        };
        let data = DataPlane::start(
            &config.taskmanager.bind_host,
            config.taskmanager.data_port,
            secret.clone(),
            registry.clone(),
            settings.clone(),
        )
        .await?;
        let data_port = data.local_addr().map(|a| a.port()).unwrap_or(0);
        let resource_id = config.taskmanager.resource_id.clone().unwrap_or_else(|| {
            format!(
                "{}:{}-{:06x}",
                config.taskmanager.host,
                data_port,
                rand::random::<u32>() & 0xff_ffff
            )
        });
        for dir in
            super::local_state::remove_orphans(&config.state.local_base(), std::process::id())
        {
            info!(dir = %dir.display(), "removed the local state of a TaskManager that is gone");
        }
        let slots = config.taskmanager.number_of_task_slots.max(1);
        let rocks_slot_memory = config.state.rocksdb_memory_per_slot(&config.network, slots);
        let rocks_memory: Vec<_> = rocks_slot_memory
            .map(|bytes| {
                (0..slots)
                    .map(|_| {
                        crate::state::RocksMemory::budget(
                            bytes,
                            config.state.rocksdb_write_buffer_ratio,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let services = Arc::new(TaskServices {
            resource_id: resource_id.clone(),
            registry,
            remote: Some(Arc::new(data.clone())),
            segment_size: settings.segment_size,
            buffer_shares: crate::network::budget::BufferShares {
                per_channel: net.buffers_per_channel as usize,
                floating_per_gate: net.floating_buffers_per_gate as usize,
                max_per_channel: net.max_buffers_per_channel as usize,
            },
            buffer_timeout: net.buffer_timeout,
            scheduling_policy: config.taskmanager.scheduling_policy,
            budget: crate::network::budget::BufferBudget::new(
                config.network.network_memory(),
                settings.segment_size,
            ),
            partition_wait: settings.partition_wait,
            local_state_dir: config.state.local_dir(&resource_id, std::process::id()),
            spill: crate::network::spill::SpillSettings {
                dir: config
                    .state
                    .local_dir(&resource_id, std::process::id())
                    .join("shuffle"),
                region_bytes: (net.sort_shuffle_buffers as usize)
                    .saturating_mul(settings.segment_size),
                compress: net.blocking_compression,
                segment_size: settings.segment_size,
            },
            storage: Arc::new(crate::state::FileSystems::new()),
            rocks_memory: rocks_memory.clone(),
            managed_memory_per_slot: config.network.managed_memory() / u64::from(slots),
            programs,
        });
        info!(
            %resource_id,
            data_port,
            slots = config.taskmanager.number_of_task_slots,
            network_buffers = services.budget.total(),
            managed_memory = config.network.managed_memory(),
            rocksdb_memory_per_slot = rocks_slot_memory.unwrap_or(0),
            segment_size = settings.segment_size,
            "TaskManager started"
        );
        let metrics = Arc::new(TaskManagerMetrics::new(
            resource_id.clone(),
            config.taskmanager.host.clone(),
        ));
        let tasks: Tasks = Arc::default();
        let workers = match worker_of {
            Some(_) => None,
            None => Some(
                Workers::start(
                    resource_id.clone(),
                    config.clone(),
                    secret.clone(),
                    services.registry.clone(),
                    &services.local_state_dir,
                    metrics.clone(),
                )
                .await
                .map_err(TaskManagerError::Workers)?,
            ),
        };
        let reporter = if config.metrics.prometheus {
            Some(
                start_reporter(&config, metrics.clone(), tasks.clone(), workers.clone())
                    .map_err(TaskManagerError::Reporter)?,
            )
        } else {
            None
        };
        Ok(Arc::new(TaskManager {
            resource_id,
            data,
            tasks,
            config,
            secret,
            services,
            metrics,
            reporter,
            workers,
            worker_of,
        }))
    }

    /// Registers with the JobManager at `jobmanager` (`host:port`) and serves it; reconnects
    /// when the connection breaks. Returns only on a permanent error.
    pub async fn run(self: Arc<Self>, jobmanager: String) -> TaskManagerError {
        let limit = self.config.taskmanager.registration_timeout;
        let mut unregistered = Unregistered::since_now(limit);
        let mut logged = false;
        loop {
            let registered = AtomicBool::new(false);
            let session = self.clone().session(&jobmanager, None, &registered);
            let Some(result) = unregistered.session(session, &registered).await else {
                return unregistered.error();
            };
            match result {
                Err(RpcError::AuthenticationFailed) => {
                    return TaskManagerError::Authentication(jobmanager);
                }
                Err(RpcError::Malformed(reason)) if reason.starts_with("refused: ") => {
                    return TaskManagerError::Refused(
                        reason.trim_start_matches("refused: ").to_string(),
                    );
                }
                Err(e) => {
                    if !logged {
                        warn!(%jobmanager, error = %e, "no connection to the JobManager; retrying");
                        logged = true;
                    }
                }
                Ok(()) => {
                    logged = false;
                }
            }
            if registered.load(Ordering::Acquire) {
                unregistered = Unregistered::since_now(limit);
            }
            // Without a JobManager, nothing we run can report or be coordinated: stop it all and
            // free the slots (with HA a new leader redeploys from its checkpoint).
            self.cancel_all();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// With ZooKeeper HA: registers with whichever JobManager leads, and when the leader
    /// changes (or its term ends), cancels every subtask of the old term, frees the slots and
    /// registers with the new leader. Returns only on a permanent error.
    pub async fn run_ha(self: Arc<Self>, ha: zk_ha::ZooKeeperHaServices) -> TaskManagerError {
        let mut retrieval = match ha.leader_retrieval(crate::ha::COMPONENT) {
            Ok(r) => r,
            Err(e) => return TaskManagerError::Ha(e.to_string()),
        };
        let mut leaders = retrieval.subscribe();
        let limit = self.config.taskmanager.registration_timeout;
        let mut unregistered = Unregistered::since_now(limit);
        loop {
            let waited =
                tokio::time::timeout_at(unregistered.deadline, retrieval.wait_for(|l| l.is_some()));
            let Ok(leader) = waited.await else {
                return unregistered.error();
            };
            let leader = match leader {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(e) => {
                    warn!(error = %e, "cannot read the leader from ZooKeeper; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            let session = leader.session_id.to_string();
            let Some(rpc) = leader.address("rpc").map(str::to_string) else {
                warn!("the published leader has no RPC address");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            info!(jobmanager = %rpc, %session, "following the leading JobManager");
            let changed = async {
                loop {
                    if leaders.changed().await.is_err() {
                        return;
                    }
                    let now = leaders.borrow().as_ref().map(|l| l.session_id.to_string());
                    if now.as_deref() != Some(session.as_str()) {
                        return;
                    }
                }
            };
            let registered = AtomicBool::new(false);
            let followed = async {
                tokio::select! {
                    r = self.clone().session(&rpc, Some(session.clone()), &registered) => Some(r),
                    _ = changed => None,
                }
            };
            match unregistered.session(followed, &registered).await {
                None => return unregistered.error(),
                Some(Some(Err(RpcError::AuthenticationFailed))) => {
                    return TaskManagerError::Authentication(rpc);
                }
                Some(Some(Err(e))) => {
                    warn!(jobmanager = %rpc, error = %e, "the connection to the leader ended")
                }
                Some(Some(Ok(()))) => {}
                Some(None) => info!("the leader changed"),
            }
            if registered.load(Ordering::Acquire) {
                unregistered = Unregistered::since_now(limit);
            }
            // Whatever the old term deployed is cancelled before the new term's leader hears
            // from us (it redeploys from its checkpoints).
            self.cancel_all();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn cancel_all(&self) {
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        for t in tasks.values() {
            t.cancelled.store(true, Ordering::Relaxed);
        }
        if let Some(workers) = &self.workers {
            workers.stop_all();
        }
    }

    /// One control connection, from registration until it breaks.
    /// Sets `registered` once the JobManager took the registration.
    async fn session(
        self: Arc<Self>,
        jobmanager: &str,
        leader_session: Option<String>,
        registered: &AtomicBool,
    ) -> Result<(), RpcError> {
        let addr = tokio::net::lookup_host(jobmanager)
            .await?
            .next()
            .ok_or_else(|| {
                RpcError::Io(std::io::Error::other(format!(
                    "{jobmanager} resolves to no address"
                )))
            })?;
        let stream = transport::connect(addr, &self.secret).await?;
        let (mut reader, mut writer) = tokio::io::split(stream);
        let mut running: Vec<ExecutionId> = self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .copied()
            .collect();
        if let Some(workers) = &self.workers {
            running.extend(workers.executions());
        }
        let data_port = self.data.local_addr().map(|a| a.port()).unwrap_or(0);
        transport::send(
            &mut writer,
            &TmToJm::Register {
                protocol_version: PROTOCOL_VERSION,
                resource_id: self.resource_id.clone(),
                host: self.config.taskmanager.host.clone(),
                data_port,
                slots: self.config.taskmanager.number_of_task_slots,
                hardware: hardware(self.config.network.process_size),
                network_memory: self.config.network.network_memory(),
                managed_memory: self.config.network.managed_memory(),
                running,
                leader_session,
                metrics_port: self.reporter_port(),
                worker_of: self.worker_of,
            },
        )
        .await?;
        let (interval, timeout) = match transport::recv(&mut reader).await? {
            JmToTm::Registered {
                heartbeat_interval_ms,
                heartbeat_timeout_ms,
            } => (
                Duration::from_millis(heartbeat_interval_ms.max(10)),
                Duration::from_millis(heartbeat_timeout_ms.max(20)),
            ),
            JmToTm::Refused { reason } => {
                error!(%reason, "registration refused");
                return Err(RpcError::Malformed(format!("refused: {reason}")));
            }
            other => {
                return Err(RpcError::Malformed(format!(
                    "expected Registered, got {other:?}"
                )));
            }
        };
        registered.store(true, Ordering::Release);
        match self.worker_of {
            Some(job) => {
                info!(%job, taskmanager = %jobmanager, "the job's worker registered at its TaskManager")
            }
            None => info!(%jobmanager, "registered at the JobManager"),
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<TmToJm>();
        if let Some(workers) = &self.workers {
            workers.set_upstream(Some((tx.clone(), jobmanager.to_string())));
        }
        let write_loop = async {
            let mut ticker = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    msg = rx.recv() => match msg {
                        Some(msg) => transport::send(&mut writer, &msg).await?,
                        None => return Ok::<(), RpcError>(()),
                    },
                    _ = ticker.tick() => {
                        if let Some(workers) = &self.workers {
                            let now = std::time::Instant::now();
                            workers.stop_idle(now);
                            workers.sweep_cache(now).await;
                        }
                        let metrics = self.task_metrics();
                        let process = Some(self.metrics.sample(crate::metrics::now_ms(), &metrics));
                        transport::send(&mut writer, &TmToJm::Heartbeat { metrics, process }).await?;
                    }
                }
            }
        };
        let read_loop = async {
            // Producer groups are per connection: a new JobManager sends its own.
            let mut groups = ProducerGroups::default();
            loop {
                let msg: JmToTm =
                    match tokio::time::timeout(timeout, transport::recv(&mut reader)).await {
                        Ok(msg) => msg?,
                        Err(_) => {
                            // A partition or a frozen JobManager: say so, not just "retrying".
                            let why = format!("no message from the JobManager for {timeout:?}");
                            warn!(%jobmanager, "{why}: giving it up and cancelling its tasks");
                            return Err(RpcError::Io(std::io::Error::other(why)));
                        }
                    };
                self.handle(msg, &mut groups, &tx);
            }
        };
        let result = tokio::select! {
            r = write_loop => r,
            r = read_loop => r,
        };
        if let Some(workers) = &self.workers {
            workers.set_upstream(None);
        }
        result
    }

    fn task_metrics(&self) -> Vec<(ExecutionId, TaskMetrics)> {
        let mut metrics = running_metrics(&self.tasks);
        if let Some(workers) = &self.workers {
            metrics.extend(workers.metrics());
        }
        metrics
    }

    /// The port of this TaskManager's Prometheus reporter, if it runs one.
    pub fn reporter_port(&self) -> Option<u16> {
        self.reporter.as_ref().map(|(port, _)| *port)
    }

    fn handle(&self, msg: JmToTm, groups: &mut ProducerGroups, tx: &mpsc::UnboundedSender<TmToJm>) {
        match msg {
            JmToTm::Producers(group) => groups.insert(group),
            JmToTm::Deploy(deployment)
                if self
                    .worker_of
                    .is_some_and(|job| job != deployment.execution.job) =>
            {
                let _ = tx.send(TmToJm::TaskState {
                    execution: deployment.execution,
                    state: ExecutionState::Failed,
                    error: Some("a job's worker was sent another job's subtask".into()),
                    metrics: TaskMetrics::default(),
                });
            }
            JmToTm::Deploy(deployment)
                if let (Some(workers), Some(key)) =
                    (&self.workers, deployment.program.artifact.clone()) =>
            {
                workers.deploy(deployment, key, groups);
            }
            JmToTm::Deploy(deployment) => {
                let execution = deployment.execution;
                let inputs = match groups.expand(execution.job, &deployment.inputs) {
                    Ok(inputs) => inputs,
                    Err(e) => {
                        let _ = tx.send(TmToJm::TaskState {
                            execution,
                            state: ExecutionState::Failed,
                            error: Some(e),
                            metrics: TaskMetrics::default(),
                        });
                        return;
                    }
                };
                let slots = self.config.taskmanager.number_of_task_slots;
                if deployment.slot >= slots {
                    let _ = tx.send(TmToJm::TaskState {
                        execution,
                        state: ExecutionState::Failed,
                        error: Some(format!(
                            "slot {} does not exist on {} ({} slots)",
                            deployment.slot, self.resource_id, slots
                        )),
                        metrics: TaskMetrics::default(),
                    });
                    return;
                }
                let report_tx = tx.clone();
                let tasks = self.tasks.clone();
                let task_metrics = self.metrics.clone();
                let report = Box::new(move |execution, state: ExecutionState, error, metrics| {
                    if state.is_terminal() {
                        task_metrics.task_ended(&execution);
                        tasks
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&execution);
                    }
                    let _ = report_tx.send(TmToJm::TaskState {
                        execution,
                        state,
                        error,
                        metrics,
                    });
                });
                let ack_tx = tx.clone();
                let acknowledge = Box::new(move |msg: TmToJm| {
                    let _ = ack_tx.send(msg);
                });
                self.metrics.task_deployed(
                    execution,
                    TaskLabels {
                        job_name: deployment.job_name.clone(),
                        task_name: deployment.vertex_name.clone(),
                    },
                );
                match task::spawn(
                    task::Assignment {
                        deployment: *deployment,
                        inputs,
                    },
                    self.services.clone(),
                    report,
                    acknowledge,
                ) {
                    Ok(handle) => {
                        self.tasks
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(execution, handle);
                    }
                    Err(e) => {
                        self.metrics.task_ended(&execution);
                        let _ = tx.send(TmToJm::TaskState {
                            execution,
                            state: ExecutionState::Failed,
                            error: Some(format!("cannot start a task thread: {e}")),
                            metrics: TaskMetrics::default(),
                        });
                    }
                }
            }
            msg @ (JmToTm::Cancel { .. }
            | JmToTm::TriggerCheckpoint { .. }
            | JmToTm::NotifyCheckpointComplete { .. }
            | JmToTm::NotifyCheckpointAborted { .. })
                if self.routed(&msg) => {}
            JmToTm::Cancel { execution } => {
                let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
                match tasks.get(&execution) {
                    Some(t) => t.cancelled.store(true, Ordering::Relaxed),
                    None => {
                        // Already ended (its final state is on its way) or never arrived.
                        let _ = tx.send(TmToJm::TaskState {
                            execution,
                            state: ExecutionState::Canceled,
                            error: None,
                            metrics: TaskMetrics::default(),
                        });
                    }
                }
            }
            JmToTm::TriggerCheckpoint {
                execution,
                timestamp,
                location,
                drain,
            } => {
                let barrier = crate::network::buffer::CheckpointBarrier {
                    timestamp,
                    location,
                    drain,
                };
                self.control(execution, TaskControl::Trigger(Arc::new(barrier)), tx);
            }
            JmToTm::NotifyCheckpointComplete {
                execution,
                checkpoint_id,
            } => self.control(execution, TaskControl::Complete(checkpoint_id), tx),
            JmToTm::NotifyCheckpointAborted {
                execution,
                checkpoint_id,
            } => self.control(execution, TaskControl::Aborted(checkpoint_id), tx),
            JmToTm::ReleaseJob { job } => {
                groups.release_job(job);
                self.services.registry.release_job(job);
                if let Some(workers) = &self.workers {
                    workers.release_job(job);
                }
            }
            JmToTm::LogRequest { request, query } => {
                // Reading a file blocks: off the runtime's threads.
                let tx = tx.clone();
                tokio::task::spawn_blocking(move || {
                    let (log, stdout) = (logdir::stderr_file(), logdir::stdout_file());
                    let answer = logs::answer(&query, log.as_deref(), stdout.as_deref());
                    let _ = tx.send(TmToJm::LogAnswer { request, answer });
                });
            }
            JmToTm::HeartbeatAck
            | JmToTm::Registered { .. }
            | JmToTm::Refused { .. }
            | JmToTm::Artifact { .. } => {}
        }
    }

    /// Passes a message about one execution to the job worker that runs it; false if none
    /// does (the execution is this process's own, or unknown).
    fn routed(&self, msg: &JmToTm) -> bool {
        let execution = match msg {
            JmToTm::Cancel { execution }
            | JmToTm::TriggerCheckpoint { execution, .. }
            | JmToTm::NotifyCheckpointComplete { execution, .. }
            | JmToTm::NotifyCheckpointAborted { execution, .. } => *execution,
            _ => return false,
        };
        match &self.workers {
            Some(workers) => workers.route(execution, msg.clone()).is_none(),
            None => false,
        }
    }

    /// Passes a checkpoint message to a running task; a trigger for a task that is gone is
    /// declined at once, so the checkpoint fails fast instead of timing out.
    fn control(
        &self,
        execution: ExecutionId,
        message: TaskControl,
        tx: &mpsc::UnboundedSender<TmToJm>,
    ) {
        let undelivered = match self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&execution)
        {
            Some(t) => t.control.send(message).err().map(|e| e.into_inner()),
            None => Some(message),
        };
        if let Some(TaskControl::Trigger(barrier)) = undelivered {
            let _ = tx.send(TmToJm::DeclineCheckpoint {
                execution,
                checkpoint_id: barrier.id(),
                reason: format!("task {execution} is not running on {}", self.resource_id),
            });
        }
    }

    /// Stops every task, closes the data port and removes the local state directory once the
    /// cancelled subtasks have ended (at most [`SHUTDOWN_TASK_WAIT`]: a RocksDB instance still
    /// writing would refill a directory removed under it). Blocks the calling thread meanwhile.
    pub fn shutdown(&self) {
        if let Some((_, server)) = &self.reporter {
            server.abort();
        }
        self.cancel_all();
        self.data.close();
        let deadline = std::time::Instant::now() + SHUTDOWN_TASK_WAIT;
        while self.running_tasks() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        super::local_state::remove_own(&self.services.local_state_dir);
    }

    /// How many subtasks run now.
    pub fn running_tasks(&self) -> usize {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
