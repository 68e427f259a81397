//! The JobManager process's I/O shell: accepts TaskManager control connections, feeds their
//! events to the Dispatcher core, sends the core's messages, drives time, and serves REST.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

use super::dispatcher::{
    CancelError, Dispatcher, DispatcherSettings, JobSettings, Outbox, SavepointError, SubmitError,
};
use super::resourcemanager::TaskManagerInfo;
use crate::common::ids::{JobId, ResourceId};
use crate::config::Config;
use crate::ha::JobRecord;
use crate::rpc::messages::{JmToTm, PROTOCOL_VERSION, ProgramSpec, TmToJm};
use crate::rpc::transport::{self, RpcError};
use crate::security::ClusterSecret;

/// Milliseconds since the Unix epoch: the time the cores are fed.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the REST API and the RPC endpoint share.
pub struct JobManagerShared {
    /// The effective configuration.
    pub config: Config,
    dispatcher: Mutex<Dispatcher>,
    settings: DispatcherSettings,
    connections: Mutex<HashMap<ResourceId, (u64, mpsc::UnboundedSender<JmToTm>)>>,
    next_connection: std::sync::atomic::AtomicU64,
    /// Where TaskManagers connect.
    pub rpc_address: SocketAddr,
    /// ZooKeeper HA, when configured.
    pub ha: Option<HaRuntime>,
}

/// A JobManager's part in ZooKeeper HA.
pub struct HaRuntime {
    /// The ZooKeeper services.
    pub services: zk_ha::ZooKeeperHaServices,
    /// The current term's fence while this JobManager leads.
    fence: Mutex<Option<zk_ha::LeaderFence>>,
    /// The leader's REST address as last published (for a standby's redirects).
    leader_rest: Mutex<Option<String>>,
    /// Jobs whose end is recorded in the job result store.
    recorded: Mutex<HashSet<JobId>>,
}

impl HaRuntime {
    fn fence(&self) -> Option<zk_ha::LeaderFence> {
        self.fence.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl JobManagerShared {
    /// Whether this JobManager may act: always without HA, only while it leads with HA.
    pub fn is_leader(&self) -> bool {
        self.ha.as_ref().is_none_or(|ha| ha.fence().is_some())
    }

    /// The current term's leader session id (HA only).
    pub fn leader_session(&self) -> Option<String> {
        self.ha
            .as_ref()
            .and_then(|ha| ha.fence())
            .map(|f| f.session_id().to_string())
    }

    /// The leader's REST address as published in ZooKeeper (HA standbys).
    pub fn leader_rest(&self) -> Option<String> {
        self.ha.as_ref().and_then(|ha| {
            ha.leader_rest
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        })
    }

    /// Leadership ended: forget every job (the next leader recovers them from the HA stores)
    /// and drop every TaskManager connection, so nothing this JobManager decided any more
    /// reaches a TaskManager.
    fn step_down(&self) {
        if let Some(ha) = &self.ha {
            *ha.fence.lock().unwrap_or_else(|e| e.into_inner()) = None;
            ha.recorded
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
        }
        *self.dispatcher() = Dispatcher::new(self.settings.clone());
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Keeps a submitted job in the job graph store (HA), so a new leader runs it again.
    pub async fn persist_job(&self, record: &JobRecord) -> Result<(), String> {
        let Some(ha) = &self.ha else {
            return Ok(());
        };
        let fence = ha
            .fence()
            .ok_or("this JobManager is no longer the leader")?;
        let bytes = serde_json::to_vec(record).map_err(|e| e.to_string())?;
        ha.services
            .job_graph_store()
            .put(&fence, &record.job_id.to_string(), &bytes)
            .await
            .map_err(|e| format!("cannot store the job in the HA job graph store: {e}"))
    }

    /// Records the end of every globally terminated job in the job result store and removes
    /// its submission from the job graph store (the result first: a crash in between leaves
    /// both, and the result wins).
    async fn record_terminated_jobs(&self) {
        let Some(ha) = &self.ha else {
            return;
        };
        let Some(fence) = ha.fence() else {
            return;
        };
        let ended: Vec<(JobId, &'static str)> = {
            let recorded = ha.recorded.lock().unwrap_or_else(|e| e.into_inner());
            self.dispatcher()
                .jobs
                .values()
                .filter(|jm| jm.status.is_globally_terminal() && !recorded.contains(&jm.job_id))
                .map(|jm| (jm.job_id, jm.status.name()))
                .collect()
        };
        for (job, status) in ended {
            let key = job.to_string();
            let result = serde_json::json!({ "jobId": key, "state": status }).to_string();
            let stored = async {
                ha.services
                    .job_result_store()
                    .put(&fence, &key, result.as_bytes())
                    .await?;
                ha.services.job_graph_store().remove(&fence, &key).await
            }
            .await;
            match stored {
                Ok(()) => {
                    ha.recorded
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(job);
                }
                Err(e) => {
                    warn!(job_id = %job, error = %e, "cannot record the job's end in the HA stores")
                }
            }
        }
    }

    /// A new term: submits again every job of the job graph store without a recorded result,
    /// under its id, restored from its latest retained checkpoint.
    async fn recover_jobs(&self) {
        let Some(ha) = &self.ha else {
            return;
        };
        let ids = match ha.services.job_graph_store().job_ids().await {
            Ok(ids) => ids,
            Err(e) => {
                warn!(error = %e, "cannot list the HA job graph store");
                return;
            }
        };
        for id in ids {
            if ha
                .services
                .job_result_store()
                .contains(&id)
                .await
                .unwrap_or(false)
            {
                continue;
            }
            let record = match ha.services.job_graph_store().get(&id).await {
                Ok(Some(bytes)) => serde_json::from_slice::<JobRecord>(&bytes),
                Ok(None) => continue,
                Err(e) => {
                    warn!(job_id = %id, error = %e, "cannot read a job from the HA job graph store");
                    continue;
                }
            };
            match record {
                Ok(r) => match self.submit_as(
                    r.job_id,
                    r.program,
                    Some(r.parallelism),
                    &r.overrides,
                    r.savepoint,
                    true,
                ) {
                    Ok(job) => info!(job_id = %job, "recovered a job from the HA job graph store"),
                    Err(e) => warn!(job_id = %id, error = %e, "cannot recover a job"),
                },
                Err(e) => {
                    warn!(job_id = %id, error = %e, "unreadable job record in the HA job graph store")
                }
            }
        }
    }

    /// The Dispatcher, for reading (REST) or changing it; call [`deliver`](Self::deliver) with
    /// whatever a change returns.
    pub fn dispatcher(&self) -> MutexGuard<'_, Dispatcher> {
        self.dispatcher.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends messages to TaskManagers. A TaskManager without a connection has been reported lost
    /// already, so its messages are dropped.
    pub fn deliver(&self, outbox: Outbox) {
        let connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        for (resource_id, msg) in outbox {
            match connections.get(&resource_id) {
                Some((_, tx)) => {
                    let _ = tx.send(msg);
                }
                None => warn!(%resource_id, "dropping a message for an unknown TaskManager"),
            }
        }
    }

    /// Submits a job; returns its id. `overrides` are job-scoped configuration keys
    /// (checkpointing, state backend, restart strategy) that apply to this job only;
    /// `savepoint` is a savepoint or retained checkpoint to start from.
    pub fn submit(
        &self,
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
        self.submit_as(
            JobId::random(),
            program,
            parallelism,
            overrides,
            savepoint,
            false,
        )
    }

    /// Submits a job under an id the caller chose and keeps it in the HA job graph store, as a
    /// REST submission does: a YARN application's one job, whose id a later AM attempt must
    /// recognise. A job that could not be stored is cancelled, since the next leader would not
    /// know it.
    pub async fn submit_recoverable(&self, record: &JobRecord) -> Result<JobId, String> {
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
            .map_err(|e| e.to_string())?;
        if let Err(e) = self.persist_job(record).await {
            let _ = self.cancel(id);
            return Err(e);
        }
        Ok(id)
    }

    /// Submits a job under a given id; `recover` takes over the checkpoints an earlier leader
    /// left for it.
    fn submit_as(
        &self,
        job_id: JobId,
        program: ProgramSpec,
        parallelism: Option<u32>,
        overrides: &[(String, String)],
        savepoint: Option<String>,
        recover: bool,
    ) -> Result<JobId, SubmitError> {
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
        job.restore_from = savepoint;
        job.recover = recover;
        let outbox = self
            .dispatcher()
            .submit(job_id, program, parallelism, job, now_ms())?;
        info!(%job_id, "job submitted");
        self.deliver(outbox);
        Ok(job_id)
    }

    /// Triggers a savepoint (and a stop after it with `stop`); returns the request id.
    pub fn trigger_savepoint(
        &self,
        job: JobId,
        target: Option<String>,
        stop: bool,
    ) -> Result<String, SavepointError> {
        let (request_id, outbox) =
            self.dispatcher()
                .trigger_savepoint(job, target, stop, now_ms())?;
        info!(job_id = %job, %request_id, stop, "savepoint triggered");
        self.deliver(outbox);
        Ok(request_id)
    }

    /// Cancels a job.
    pub fn cancel(&self, job: JobId) -> Result<(), CancelError> {
        let outbox = self.dispatcher().cancel(job, now_ms())?;
        info!(job_id = %job, "job cancellation requested");
        self.deliver(outbox);
        Ok(())
    }
}

/// How a JobManager that does not lead the current term refuses a TaskManager (HA).
pub const NOT_LEADER: &str = "not the leader of the current term";

/// Keys a job may set for itself at submission (`sluice run -D key=value`).
pub const JOB_SCOPED_PREFIXES: &[&str] = &[
    "execution.checkpointing.",
    "state.backend.",
    "restart-strategy.",
];

/// A running JobManager.
pub struct JobManager {
    /// Shared state.
    pub shared: Arc<JobManagerShared>,
    /// Where the REST API listens.
    pub rest_address: SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for JobManager {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Why a JobManager could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A port could not be bound.
    #[error("cannot listen on {what} {addr}: {source}")]
    Bind {
        /// Which endpoint.
        what: &'static str,
        /// Where.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// TLS setup failed.
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// The configuration asks for something this version cannot do.
    #[error("{0}")]
    Unsupported(String),
}

async fn bind(what: &'static str, host: &str, port: u16) -> Result<TcpListener, StartError> {
    let addr = format!("{host}:{port}");
    TcpListener::bind(&addr)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })
}

impl JobManager {
    /// Binds the RPC and REST endpoints and starts serving.
    pub async fn start(config: Config, secret: ClusterSecret) -> Result<JobManager, StartError> {
        if config.scheduler == crate::config::SchedulerKind::Adaptive {
            // Scaling a running job up means redistributing its keyed state, which needs the
            // checkpointed, key-group-partitioned state backends; until they exist, refuse
            // rather than run a job that would lose its state on the first rescale.
            return Err(StartError::Unsupported(
                "jobmanager.scheduler: adaptive needs rescalable checkpointed state, which this version does not have yet; use 'default'".into(),
            ));
        }
        let rpc = bind(
            "the RPC port",
            &config.jobmanager.bind_host,
            config.jobmanager.rpc_port,
        )
        .await?;
        let rest = bind("the REST port", &config.rest.bind_address, config.rest.port).await?;
        let rpc_address = rpc.local_addr().map_err(|source| StartError::Bind {
            what: "the RPC port",
            addr: String::new(),
            source,
        })?;
        let rest_address = rest.local_addr().map_err(|source| StartError::Bind {
            what: "the REST port",
            addr: String::new(),
            source,
        })?;
        let ha = crate::ha::services(&config)
            .map_err(|e| StartError::Unsupported(format!("high availability: {e}")))?
            .map(|services| HaRuntime {
                services,
                fence: Mutex::new(None),
                leader_rest: Mutex::new(None),
                recorded: Mutex::new(HashSet::new()),
            });
        let settings = DispatcherSettings {
            slot_request_timeout_ms: config.slot_request_timeout.as_millis() as u64,
            heartbeat_timeout_ms: config.heartbeat.detection_timeout().as_millis() as u64,
            jobstore_max_capacity: config.jobstore.max_capacity,
            jobstore_expiration_ms: config.jobstore.expiration_time.as_millis() as u64,
            // No checkpointing yet, so an unset strategy means none, as in Flink.
            restart: super::restart::RestartPolicy::from_config(&config.restart, false),
        };
        let shared = Arc::new(JobManagerShared {
            config,
            dispatcher: Mutex::new(Dispatcher::new(settings.clone())),
            settings,
            connections: Mutex::new(HashMap::new()),
            next_connection: Default::default(),
            rpc_address,
            ha,
        });
        let acceptor = transport::acceptor()?;
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(accept_loop(
            rpc,
            acceptor,
            secret,
            shared.clone(),
        )));
        tasks.push(tokio::spawn(ticker(shared.clone())));
        let router = crate::rest::router(shared.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(rest, router).await {
                warn!(error = %e, "REST server stopped");
            }
        }));
        if shared.ha.is_some() {
            let host = |configured: &str, bound: SocketAddr| {
                let h = if configured.is_empty() || configured == "0.0.0.0" {
                    bound.ip().to_string()
                } else {
                    configured.to_string()
                };
                format!("{h}:{}", bound.port())
            };
            let rpc = host(&shared.config.jobmanager.rpc_address, rpc_address);
            let rest = format!("http://{}", host(&shared.config.rest.address, rest_address));
            tasks.push(tokio::spawn(leadership(shared.clone(), rpc, rest)));
            tasks.push(tokio::spawn(watch_leader(shared.clone())));
        }
        info!(%rpc_address, %rest_address, ha = shared.ha.is_some(), "JobManager started");
        Ok(JobManager {
            shared,
            rest_address,
            tasks,
        })
    }
}

async fn ticker(shared: Arc<JobManagerShared>) {
    let mut interval = tokio::time::interval(Duration::from_millis(100));
    loop {
        interval.tick().await;
        if !shared.is_leader() {
            continue;
        }
        let outbox = shared.dispatcher().tick(now_ms());
        shared.deliver(outbox);
        shared.record_terminated_jobs().await;
    }
}

/// Contends for leadership (HA): on a grant, publishes this JobManager's addresses and
/// recovers the jobs of the HA stores; on a revocation, drops every job and connection and
/// contends again.
async fn leadership(shared: Arc<JobManagerShared>, rpc: String, rest: String) {
    let Some(ha) = &shared.ha else {
        return;
    };
    let mut election = ha.services.start_election();
    while let Some(event) = election.next_event().await {
        match event {
            zk_ha::LeadershipEvent::Granted(fence) => {
                let info = zk_ha::LeaderInfo::new(fence.session_id())
                    .with_address("rpc", rpc.clone())
                    .with_address("rest", rest.clone());
                if let Err(e) = election.publish(&fence, crate::ha::COMPONENT, &info).await {
                    warn!(error = %e, "cannot publish this JobManager's addresses; not acting as leader");
                    continue;
                }
                info!(session = %fence.session_id(), %rpc, %rest, "granted leadership");
                *ha.fence.lock().unwrap_or_else(|e| e.into_inner()) = Some(fence);
                shared.recover_jobs().await;
            }
            zk_ha::LeadershipEvent::Revoked { session_id, reason } => {
                warn!(session = %session_id, ?reason, "leadership revoked: stopping every job and dropping every TaskManager");
                shared.step_down();
            }
        }
    }
}

/// Follows the published leader so a standby can point REST clients at it.
async fn watch_leader(shared: Arc<JobManagerShared>) {
    let Some(ha) = &shared.ha else {
        return;
    };
    let Ok(retrieval) = ha.services.leader_retrieval(crate::ha::COMPONENT) else {
        return;
    };
    let mut rx = retrieval.subscribe();
    loop {
        let rest = rx
            .borrow()
            .as_ref()
            .and_then(|l| l.address("rest").map(str::to_string));
        *ha.leader_rest.lock().unwrap_or_else(|e| e.into_inner()) = rest;
        if rx.changed().await.is_err() {
            return;
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    secret: ClusterSecret,
    shared: Arc<JobManagerShared>,
) {
    loop {
        match listener.accept().await {
            Ok((tcp, peer)) => {
                let (acceptor, secret, shared) = (acceptor.clone(), secret.clone(), shared.clone());
                tokio::spawn(async move {
                    if let Err(e) = serve_taskmanager(tcp, peer, acceptor, secret, shared).await {
                        warn!(%peer, error = %e, "control connection closed");
                    }
                });
            }
            Err(e) => {
                warn!(error = %e, "accepting a control connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Tells a TaskManager why its registration is refused (it logs the reason and stops trying
/// where retrying cannot help), logs it here too, and ends the connection with it.
async fn refuse<W: tokio::io::AsyncWrite + Unpin>(
    writer: &mut W,
    peer: SocketAddr,
    reason: String,
) -> Result<(), RpcError> {
    warn!(%peer, "{reason}");
    transport::send(
        writer,
        &JmToTm::Refused {
            reason: reason.clone(),
        },
    )
    .await?;
    Err(RpcError::Malformed(reason))
}

async fn serve_taskmanager(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    secret: ClusterSecret,
    shared: Arc<JobManagerShared>,
) -> Result<(), RpcError> {
    let stream = transport::accept(tcp, &acceptor, &secret).await?;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let first: TmToJm = tokio::time::timeout(Duration::from_secs(10), transport::recv(&mut reader))
        .await
        .map_err(|_| RpcError::Timeout)??;
    let TmToJm::Register {
        protocol_version,
        resource_id,
        host,
        data_port,
        slots,
        hardware,
        network_memory,
        managed_memory,
        running: _,
        leader_session,
    } = first
    else {
        return Err(RpcError::Malformed(
            "the first message must be Register".into(),
        ));
    };
    if protocol_version != PROTOCOL_VERSION {
        let reason = format!(
            "TaskManager {resource_id} speaks control protocol version {protocol_version}, this JobManager speaks {PROTOCOL_VERSION}: run the same sluice version everywhere"
        );
        return refuse(&mut writer, peer, reason).await;
    }
    let term = shared.leader_session();
    if shared.ha.is_some() && (term.is_none() || leader_session != term) {
        let reason = format!(
            "{NOT_LEADER}: TaskManager {resource_id} asked for leader session {}, this JobManager's is {}",
            leader_session.as_deref().unwrap_or("none"),
            term.as_deref().unwrap_or("none (a standby)")
        );
        return refuse(&mut writer, peer, reason).await;
    }
    if slots == 0 {
        let reason = "a TaskManager must offer at least one slot".to_string();
        return refuse(&mut writer, peer, reason).await;
    }
    let data_address = SocketAddr::new(peer.ip(), data_port);
    let data_address = match tokio::net::lookup_host((host.as_str(), data_port))
        .await
        .ok()
        .and_then(|mut a| a.next())
    {
        Some(addr) => addr,
        None => data_address,
    };
    let hb = &shared.config.heartbeat;
    transport::send(
        &mut writer,
        &JmToTm::Registered {
            heartbeat_interval_ms: hb.interval.as_millis() as u64,
            heartbeat_timeout_ms: hb.detection_timeout().as_millis() as u64,
        },
    )
    .await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Heartbeats are answered on this connection; a weak handle, so that dropping the
    // connection from `connections` (a lost TaskManager, a revoked leader) still ends it.
    let acks = tx.downgrade();
    let connection = shared
        .next_connection
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    shared
        .connections
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(resource_id.clone(), (connection, tx));
    let now = now_ms();
    let info = TaskManagerInfo {
        resource_id: resource_id.clone(),
        host,
        data_address,
        rpc_address: peer,
        hardware,
        network_memory,
        managed_memory,
        registered_at: now,
        last_heartbeat: now,
        slots: vec![None; slots as usize],
    };
    let outbox = shared.dispatcher().register_taskmanager(info, now);
    shared.deliver(outbox);
    info!(%resource_id, %peer, slots, "TaskManager registered");

    let write_loop = async {
        while let Some(msg) = rx.recv().await {
            transport::send(&mut writer, &msg).await?;
        }
        Ok::<(), RpcError>(())
    };
    let read_loop = async {
        loop {
            let msg: TmToJm = transport::recv(&mut reader).await?;
            if shared.ha.is_some() && shared.leader_session() != term {
                // The term this connection was made in is over: nothing it says may change
                // the new term's jobs.
                warn!(%resource_id, "refusing a message sent in an earlier leader term; closing the connection");
                return Err(RpcError::Malformed(format!(
                    "{NOT_LEADER}: the term changed"
                )));
            }
            let now = now_ms();
            match msg {
                TmToJm::Heartbeat { metrics } => {
                    shared.dispatcher().heartbeat(&resource_id, metrics, now);
                    // The TaskManager counts unanswered heartbeats
                    // (heartbeat.rpc-failure-threshold) and gives up on a silent JobManager.
                    if let Some(tx) = acks.upgrade() {
                        let _ = tx.send(JmToTm::HeartbeatAck);
                    }
                }
                TmToJm::TaskState {
                    execution,
                    state,
                    error,
                    metrics,
                } => {
                    shared.dispatcher().heartbeat(&resource_id, Vec::new(), now);
                    let outbox = shared
                        .dispatcher()
                        .task_state(execution, state, error, metrics, now);
                    shared.deliver(outbox);
                }
                TmToJm::AcknowledgeCheckpoint {
                    execution,
                    checkpoint_id,
                    state,
                } => {
                    let outbox = shared.dispatcher().acknowledge_checkpoint(
                        execution,
                        checkpoint_id,
                        state,
                        now,
                    );
                    shared.deliver(outbox);
                }
                TmToJm::DeclineCheckpoint {
                    execution,
                    checkpoint_id,
                    reason,
                } => {
                    let outbox = shared.dispatcher().decline_checkpoint(
                        execution,
                        checkpoint_id,
                        reason,
                        now,
                    );
                    shared.deliver(outbox);
                }
                TmToJm::Register { .. } => {
                    return Err(RpcError::Malformed("Register sent twice".into()));
                }
            }
        }
    };
    let result = tokio::select! {
        r = write_loop => r,
        r = read_loop => r,
    };
    // The connection is gone: so is the TaskManager, unless it already registered again on a
    // newer connection (then that registration has failed over its old executions).
    let still_ours = {
        let mut connections = shared.connections.lock().unwrap_or_else(|e| e.into_inner());
        let ours = connections
            .get(&resource_id)
            .is_some_and(|(c, _)| *c == connection);
        if ours {
            connections.remove(&resource_id);
        }
        ours
    };
    if still_ours {
        let reason = match &result {
            Err(e) => format!("its control connection broke ({e})"),
            Ok(()) => "its control connection closed".to_string(),
        };
        warn!(%resource_id, "TaskManager lost: {reason}");
        let outbox = shared
            .dispatcher()
            .taskmanager_lost(&resource_id, &reason, now_ms());
        shared.deliver(outbox);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taskmanager_of_another_protocol_version_is_refused_with_the_reason() {
        let mut config = Config::default();
        for (k, v) in [
            ("rest.port", "0"),
            ("jobmanager.rpc.port", "0"),
            ("jobmanager.bind-host", "127.0.0.1"),
            ("rest.bind-address", "127.0.0.1"),
        ] {
            config.set(k, v).unwrap();
        }
        let secret = ClusterSecret::new("protocol-version-test-secret");
        let jm = JobManager::start(config, secret.clone()).await.unwrap();
        let mut stream = transport::connect(jm.shared.rpc_address, &secret)
            .await
            .unwrap();
        let register = TmToJm::Register {
            protocol_version: PROTOCOL_VERSION + 1,
            resource_id: "from-the-future".into(),
            host: "127.0.0.1".into(),
            data_port: 1,
            slots: 1,
            hardware: Default::default(),
            network_memory: 0,
            managed_memory: 0,
            running: vec![],
            leader_session: None,
        };
        transport::send(&mut stream, &register).await.unwrap();
        match transport::recv::<_, JmToTm>(&mut stream).await.unwrap() {
            JmToTm::Refused { reason } => {
                assert!(
                    reason.contains(&format!("version {}", PROTOCOL_VERSION + 1)),
                    "{reason}"
                );
                assert!(reason.contains("same sluice version"), "{reason}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(jm.shared.dispatcher().rm.total_slots(), 0);
    }
}
