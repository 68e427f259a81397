//! Job worker processes: the subtasks of a job whose code came in an artifact run in a process
//! started from that artifact, one per job on this TaskManager, so that a job that aborts,
//! crashes or runs out of memory fails alone (its restart strategy decides what next) while
//! this TaskManager, its slots and other jobs' subtasks go on.
//!
//! A worker is a TaskManager of its own in all but its boss: it registers with this process as
//! a TaskManager registers with a JobManager (the same messages over the same authenticated
//! connection, on loopback), runs its subtasks as threads with its own data port, and reports
//! task states, checkpoint acknowledgements and metrics, which this process passes on to the
//! JobManager as its own. It carries this TaskManager's resource id, so its subtasks exchange
//! records among themselves in memory as subtasks of one TaskManager do. Consumers elsewhere
//! ask this TaskManager's data port for the job's partitions and are redirected to the
//! worker's (`PartitionRegistry::set_moved`).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::metrics::{TaskLabels, TaskManagerMetrics};
use crate::common::ids::{ExecutionId, JobId};
use crate::config::Config;
use crate::network::channel::ProducerGroups;
use crate::network::registry::PartitionRegistry;
use crate::rpc::artifact;
use crate::rpc::messages::{
    ARTIFACT_CHUNK, ExecutionState, JmToTm, PROTOCOL_VERSION, TaskDeployment, TaskMetrics, TmToJm,
};
use crate::rpc::transport::{self, RpcError};
use crate::security::ClusterSecret;

/// A worker without subtasks for this long is stopped (a restarting job redeploys sooner).
const IDLE_LINGER: Duration = Duration::from_secs(10);
/// How long a worker may take from its start to its registration.
const REGISTRATION_DEADLINE: Duration = Duration::from_secs(30);
/// Lines of a worker's last output kept for the error that reports its end.
const TAIL_LINES: usize = 8;
/// How often the workers' memory is read. YARN's NodeManager checks a container's processes
/// every 3 s by default; this is well inside that.
const MEMORY_WATCH: Duration = Duration::from_millis(250);

/// The messages a worker is to get: queued until it registers, then sent.
enum Outbox {
    Pending(Vec<JmToTm>),
    Open(mpsc::UnboundedSender<JmToTm>),
}

struct Worker {
    /// The artifact it runs.
    key: String,
    /// Tells its connection from an earlier worker's of the same job.
    generation: u64,
    outbox: Outbox,
    /// Its executions that have not reported a final state.
    executions: HashSet<ExecutionId>,
    /// Their counters as of its last heartbeat.
    metrics: Vec<(ExecutionId, TaskMetrics)>,
    pid: Option<u32>,
    /// Since when it has had no execution.
    idle_since: Option<Instant>,
    /// Why this process stopped it, if it did: reported instead of the bare signal.
    stopped_for: Option<String>,
}

impl Worker {
    fn send(&mut self, msg: JmToTm) {
        match &mut self.outbox {
            Outbox::Pending(queue) => queue.push(msg),
            Outbox::Open(tx) => {
                let _ = tx.send(msg);
            }
        }
    }
}

/// This TaskManager's job workers.
pub(crate) struct Workers {
    resource_id: String,
    config: Config,
    secret: ClusterSecret,
    registry: Arc<PartitionRegistry>,
    /// Where fetched artifacts are kept.
    cache: PathBuf,
    /// Where workers connect to.
    control: SocketAddr,
    jobs: Mutex<HashMap<JobId, Worker>>,
    next_generation: std::sync::atomic::AtomicU64,
    /// The JobManager connection's sender and address, while there is one.
    upstream: Mutex<Option<(mpsc::UnboundedSender<TmToJm>, String)>>,
    /// When each cached artifact was last run (or first seen in the cache).
    last_used: Mutex<HashMap<String, Instant>>,
    /// This TaskManager's metrics: the workers' subtasks are among its tasks there.
    metrics: Arc<TaskManagerMetrics>,
}

/// The cached artifacts to remove: of the `cached` keys, those no worker runs (`in_use`) and
/// last used (or first seen, noted in `last_used` now) `interval` or longer before `now`.
fn stale_artifacts(
    cached: &[String],
    in_use: &HashSet<String>,
    last_used: &mut HashMap<String, Instant>,
    now: Instant,
    interval: Duration,
) -> Vec<String> {
    last_used.retain(|key, _| cached.contains(key));
    let mut stale = Vec::new();
    for key in cached {
        let used = *last_used.entry(key.clone()).or_insert(now);
        if in_use.contains(key) {
            last_used.insert(key.clone(), now);
        } else if now.duration_since(used) >= interval {
            last_used.remove(key);
            stale.push(key.clone());
        }
    }
    stale
}

/// The worker to stop when this TaskManager (`own` resident bytes) and its workers (`workers`,
/// resident bytes each) together hold more than `budget` (`taskmanager.memory.process.size`,
/// what YARN and Kubernetes size the container by): the largest, whose growth it most likely
/// is. A TaskManager over its budget by itself has no worker to stop, and none is.
fn over_budget(own: u64, workers: &[u64], budget: u64) -> Option<usize> {
    let total = workers.iter().fold(own, |sum, w| sum.saturating_add(*w));
    if total <= budget {
        return None;
    }
    (0..workers.len()).max_by_key(|&i| workers[i])
}

/// Resident bytes of process `pid` (`"self"` for this one); 0 if it cannot be read (gone).
fn resident_bytes(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|status| crate::metrics::parse_status(&status).0)
        .unwrap_or(0)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Workers {
    /// Opens the loopback port workers register on.
    pub(crate) async fn start(
        resource_id: String,
        config: Config,
        secret: ClusterSecret,
        registry: Arc<PartitionRegistry>,
        local_dir: &Path,
        metrics: Arc<TaskManagerMetrics>,
    ) -> std::io::Result<Arc<Workers>> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let workers = Arc::new(Workers {
            resource_id,
            config,
            secret,
            registry,
            cache: local_dir.join("artifacts"),
            control: listener.local_addr()?,
            jobs: Mutex::default(),
            next_generation: Default::default(),
            upstream: Mutex::default(),
            last_used: Mutex::default(),
            metrics,
        });
        let acceptor = transport::acceptor().map_err(std::io::Error::other)?;
        let weak = Arc::downgrade(&workers);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let Some(workers) = weak.upgrade() else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let timeout = workers.config.security.handshake_timeout;
                    let served = match transport::accept(
                        stream,
                        &acceptor,
                        &workers.secret,
                        timeout,
                    )
                    .await
                    {
                        Ok(stream) => workers.serve(stream).await,
                        Err(e) => Err(e),
                    };
                    if let Err(e) = served {
                        // The worker's end, if it matters, is reported with its exit status.
                        tracing::debug!(error = %e, "a worker's control connection ended");
                    }
                });
            }
        });
        let weak = Arc::downgrade(&workers);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(MEMORY_WATCH);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticker.tick().await;
                let Some(workers) = weak.upgrade() else {
                    return;
                };
                workers.watch_memory();
            }
        });
        Ok(workers)
    }

    /// Stops the largest worker when this TaskManager and its workers together hold more
    /// memory than `taskmanager.memory.process.size`: the job's code is what grows, and
    /// stopping its worker fails that job alone, where the container's limit (YARN's memory
    /// check, a Kubernetes pod's) or the kernel's OOM killer would take the TaskManager too.
    fn watch_memory(&self) {
        let running: Vec<(JobId, u32)> = lock(&self.jobs)
            .iter()
            .filter_map(|(job, w)| Some((*job, w.pid?)))
            .collect();
        if running.is_empty() {
            return;
        }
        let own = resident_bytes("self");
        let sizes: Vec<u64> = running
            .iter()
            .map(|(_, pid)| resident_bytes(&pid.to_string()))
            .collect();
        let budget = self.config.network.process_size;
        let Some(i) = over_budget(own, &sizes, budget) else {
            return;
        };
        let (job, pid) = running[i];
        let mib = |bytes: u64| bytes >> 20;
        let others: u64 = sizes.iter().sum::<u64>() - sizes[i];
        let why = format!(
            "stopped for its memory: it held {} MiB, which with the TaskManager's {} MiB and \
             its other workers' {} MiB is more than taskmanager.memory.process.size ({} MiB)",
            mib(sizes[i]),
            mib(own),
            mib(others),
            mib(budget)
        );
        let mut jobs = lock(&self.jobs);
        let Some(w) = jobs.get_mut(&job).filter(|w| w.pid == Some(pid)) else {
            return;
        };
        if w.stopped_for.is_none() {
            warn!(%job, pid, "the job's worker is {why}");
            w.stopped_for = Some(why);
            // SAFETY: as in `stop_all`.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }

    /// The JobManager connection workers' reports go to (`None` while there is none).
    pub(crate) fn set_upstream(&self, upstream: Option<(mpsc::UnboundedSender<TmToJm>, String)>) {
        *lock(&self.upstream) = upstream;
    }

    fn report(&self, msg: TmToJm) {
        if let Some((tx, _)) = &*lock(&self.upstream) {
            let _ = tx.send(msg);
        }
    }

    fn fail(&self, execution: ExecutionId, error: String) {
        self.metrics.task_ended(&execution);
        self.report(TmToJm::TaskState {
            execution,
            state: ExecutionState::Failed,
            error: Some(error),
            metrics: TaskMetrics::default(),
        });
    }

    /// Runs a subtask of an artifact's job in the job's worker, starting the worker first if
    /// it has none: the producer groups the deployment reads go with it.
    pub(crate) fn deploy(
        self: &Arc<Self>,
        deployment: Box<TaskDeployment>,
        key: String,
        groups: &ProducerGroups,
    ) {
        let execution = deployment.execution;
        let job = execution.job;
        self.metrics.task_deployed(
            execution,
            TaskLabels {
                job_name: deployment.job_name.clone(),
                task_name: deployment.vertex_name.clone(),
            },
        );
        let mut jobs = lock(&self.jobs);
        if jobs.get(&job).is_some_and(|w| w.key != key) {
            // A new build of the job under the same id (not done by the JobManager today):
            // the old worker must go first.
            drop(jobs);
            return self.fail(
                execution,
                format!(
                    "job {job} still runs another artifact on {}",
                    self.resource_id
                ),
            );
        }
        let worker = jobs.entry(job).or_insert_with(|| {
            let generation = self
                .next_generation
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let workers = self.clone();
            let start_key = key.clone();
            tokio::spawn(async move {
                workers.run_worker(job, generation, start_key).await;
            });
            Worker {
                key: key.clone(),
                generation,
                outbox: Outbox::Pending(Vec::new()),
                executions: HashSet::new(),
                metrics: Vec::new(),
                pid: None,
                idle_since: None,
                stopped_for: None,
            }
        });
        for input in &deployment.inputs {
            if let Some(group) = groups.group(job, input.group) {
                worker.send(JmToTm::Producers(group));
            }
        }
        worker.executions.insert(execution);
        worker.idle_since = None;
        worker.send(JmToTm::Deploy(deployment));
    }

    /// Passes a message about `execution` to the worker running it; gives the message back if
    /// no worker does.
    pub(crate) fn route(&self, execution: ExecutionId, msg: JmToTm) -> Option<JmToTm> {
        let mut jobs = lock(&self.jobs);
        match jobs.get_mut(&execution.job) {
            Some(w) if w.executions.contains(&execution) => {
                w.send(msg);
                None
            }
            _ => Some(msg),
        }
    }

    /// Passes a job's release to its worker, if it has one.
    pub(crate) fn release_job(&self, job: JobId) {
        if let Some(w) = lock(&self.jobs).get_mut(&job) {
            w.send(JmToTm::ReleaseJob { job });
        }
    }

    /// The counters of the workers' running subtasks, as of each worker's last heartbeat.
    pub(crate) fn metrics(&self) -> Vec<(ExecutionId, TaskMetrics)> {
        lock(&self.jobs)
            .values()
            .flat_map(|w| w.metrics.iter().cloned())
            .collect()
    }

    /// The executions workers run.
    pub(crate) fn executions(&self) -> Vec<ExecutionId> {
        lock(&self.jobs)
            .values()
            .flat_map(|w| w.executions.iter().copied())
            .collect()
    }

    /// Stops every worker at once (the JobManager is gone or this TaskManager stops): their
    /// subtasks end with them.
    pub(crate) fn stop_all(&self) {
        for w in lock(&self.jobs).values() {
            if let Some(pid) = w.pid {
                // SAFETY: kill(2) on a child this process started and has not reaped.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }

    /// Stops workers that have had no subtask for [`IDLE_LINGER`].
    pub(crate) fn stop_idle(&self, now: Instant) {
        let mut jobs = lock(&self.jobs);
        for w in jobs.values_mut() {
            if !w.executions.is_empty() {
                continue;
            }
            let since = *w.idle_since.get_or_insert(now);
            if now.duration_since(since) >= IDLE_LINGER
                && let Some(pid) = w.pid
            {
                // SAFETY: as in `stop_all`.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
        }
    }

    /// Removes cached artifacts that no worker has run for `blob.service.cleanup.interval`.
    pub(crate) async fn sweep_cache(&self, now: Instant) {
        let mut cached = Vec::new();
        if let Ok(mut dir) = tokio::fs::read_dir(&self.cache).await {
            while let Ok(Some(entry)) = dir.next_entry().await {
                let name = entry.file_name().to_string_lossy().into_owned();
                if artifact::is_content_key(&name) {
                    cached.push(name);
                }
            }
        }
        let in_use: HashSet<String> = lock(&self.jobs).values().map(|w| w.key.clone()).collect();
        let interval = self.config.taskmanager.artifact_cleanup_interval;
        let stale = stale_artifacts(&cached, &in_use, &mut lock(&self.last_used), now, interval);
        for key in stale {
            if tokio::fs::remove_file(self.cache.join(&key)).await.is_ok() {
                info!(artifact = %key, "removed a cached job artifact no job has run for blob.service.cleanup.interval");
            }
        }
    }

    /// Fetches the artifact if needed, starts the worker, and when it ends fails whatever it
    /// still ran.
    async fn run_worker(self: Arc<Self>, job: JobId, generation: u64, key: String) {
        let tail: Arc<Mutex<std::collections::VecDeque<String>>> = Arc::default();
        let path = match self.fetch(&key).await {
            Ok(path) => path,
            Err(e) => {
                return self.ended(
                    job,
                    generation,
                    format!("cannot fetch job artifact {key}: {e}"),
                );
            }
        };
        let mut command = tokio::process::Command::new(&path);
        command
            .arg(artifact::WORKER)
            .arg(job.to_string())
            .env(artifact::WORKER_PARENT_ENV, self.control.to_string())
            .env_remove("SLUICE_CONF_DIR")
            .env_remove(crate::security::SECRET_ENV)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for entry in self.worker_overrides() {
            command.arg("-D").arg(entry);
        }
        // The worker ends with this process, however this process ends; and when the host runs
        // out of memory, the kernel's OOM killer takes the worker before the TaskManager.
        // SAFETY: between fork and exec the child makes only async-signal-safe calls (prctl,
        // open, write, close) on a constant path and buffer.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, b"1000".as_ptr().cast(), 4);
                    libc::close(fd);
                }
                Ok(())
            });
        }
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                return self.ended(
                    job,
                    generation,
                    format!("cannot start the job's worker from artifact {key}: {e}"),
                );
            }
        };
        let pid = child.id();
        // The cluster's secret goes on the worker's standard input, readable by it alone.
        if let Some(mut stdin) = child.stdin.take() {
            let secret = self.secret.to_hex();
            tokio::spawn(async move {
                let _ = stdin.write_all(secret.as_bytes()).await;
                let _ = stdin.shutdown().await;
            });
        }
        if let Some(w) = lock(&self.jobs)
            .get_mut(&job)
            .filter(|w| w.generation == generation)
        {
            w.pid = pid;
        }
        info!(%job, pid = pid.unwrap_or(0), artifact = %key, "started the job's worker");
        for (stream, name) in [
            (
                child
                    .stdout
                    .take()
                    .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
                "stdout",
            ),
            (
                child
                    .stderr
                    .take()
                    .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
                "stderr",
            ),
        ] {
            let Some(stream) = stream else { continue };
            let tail = tail.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    info!(target: "sluice::worker", %job, stream = name, "{line}");
                    let mut tail = lock(&tail);
                    if tail.len() == TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
        let registered = {
            let workers = self.clone();
            async move {
                tokio::time::sleep(REGISTRATION_DEADLINE).await;
                let pending = lock(&workers.jobs).get(&job).is_some_and(|w| {
                    w.generation == generation && matches!(w.outbox, Outbox::Pending(_))
                });
                if pending {
                    warn!(%job, "the job's worker did not register in time; stopping it");
                    if let Some(pid) = pid {
                        // SAFETY: as in `stop_all`.
                        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                    }
                }
            }
        };
        let watchdog = tokio::spawn(registered);
        let status = child.wait().await;
        watchdog.abort();
        // Let the output readers catch the last lines.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let stopped_for = lock(&self.jobs)
            .get(&job)
            .filter(|w| w.generation == generation)
            .and_then(|w| w.stopped_for.clone());
        let how = match (stopped_for, status) {
            (Some(why), _) => why,
            (None, Ok(status)) => crate::pids::describe_exit(status),
            (None, Err(e)) => format!("cannot be waited for: {e}"),
        };
        let last = lock(&tail).iter().cloned().collect::<Vec<_>>().join("\n");
        let mut reason = format!(
            "the job's worker process (pid {}) on TaskManager {} ended: {how}",
            pid.unwrap_or(0),
            self.resource_id
        );
        if !last.is_empty() {
            reason.push_str("; its last output:\n");
            reason.push_str(&last);
        }
        if let Some(pid) = pid {
            let dir = self.config.state.local_dir(&self.resource_id, pid);
            let _ = tokio::fs::remove_dir_all(dir).await;
        }
        self.ended(job, generation, reason);
    }

    /// The worker of `job` (of this generation) is gone: its subtasks fail with `reason`.
    fn ended(&self, job: JobId, generation: u64, reason: String) {
        let worker = {
            let mut jobs = lock(&self.jobs);
            match jobs.get(&job) {
                Some(w) if w.generation == generation => jobs.remove(&job),
                _ => None,
            }
        };
        let Some(worker) = worker else { return };
        lock(&self.last_used).insert(worker.key.clone(), Instant::now());
        self.registry.set_moved(job, None);
        if !worker.executions.is_empty() {
            warn!(%job, "{reason}");
        } else {
            info!(%job, "the job's worker stopped");
        }
        for execution in worker.executions {
            self.fail(execution, reason.clone());
        }
    }

    /// The configuration a worker runs with: this TaskManager's, with the worker's own ports.
    fn worker_overrides(&self) -> Vec<String> {
        let mut config = self.config.clone();
        config.taskmanager.data_port = 0;
        config.taskmanager.resource_id = Some(self.resource_id.clone());
        config.metrics.prometheus = false;
        config.to_overrides()
    }

    /// The artifact's file in this TaskManager's cache, fetched from the JobManager first if
    /// it is not there.
    async fn fetch(&self, key: &str) -> Result<PathBuf, String> {
        if !artifact::is_content_key(key) {
            return Err("not a content key".into());
        }
        let path = self.cache.join(key);
        if tokio::fs::metadata(&path).await.is_ok() {
            return Ok(path);
        }
        let jobmanager = lock(&self.upstream)
            .as_ref()
            .map(|(_, addr)| addr.clone())
            .ok_or("no JobManager connection")?;
        let addr = tokio::net::lookup_host(&jobmanager)
            .await
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| format!("{jobmanager} resolves to no address"))?;
        let stream = transport::connect(addr, &self.secret)
            .await
            .map_err(|e| e.to_string())?;
        let (mut reader, mut writer) = tokio::io::split(stream);
        transport::send(&mut writer, &TmToJm::FetchArtifact { key: key.into() })
            .await
            .map_err(|e| e.to_string())?;
        let size = match transport::recv(&mut reader)
            .await
            .map_err(|e: RpcError| e.to_string())?
        {
            JmToTm::Artifact { size } => size,
            JmToTm::Refused { reason } => return Err(reason),
            other => return Err(format!("unexpected answer {other:?}")),
        };
        tokio::fs::create_dir_all(&self.cache)
            .await
            .map_err(|e| e.to_string())?;
        let tmp = self.cache.join(format!("{key}.part"));
        let mut file = tokio::fs::File::create(&tmp)
            .await
            .map_err(|e| e.to_string())?;
        let mut hasher = artifact::ContentHasher::default();
        let mut got = 0u64;
        while got < size {
            let chunk = transport::read_frame(&mut reader)
                .await
                .map_err(|e| e.to_string())?;
            if chunk.is_empty() || chunk.len() > ARTIFACT_CHUNK {
                return Err(format!("a chunk of {} bytes", chunk.len()));
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(|e| e.to_string())?;
            got += chunk.len() as u64;
        }
        file.flush().await.map_err(|e| e.to_string())?;
        drop(file);
        if hasher.finish() != key {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err("the received bytes do not match the artifact's content key".into());
        }
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))
            .await
            .map_err(|e| e.to_string())?;
        tokio::fs::rename(&tmp, &path)
            .await
            .map_err(|e| e.to_string())?;
        info!(artifact = %key, bytes = size, "fetched a job artifact");
        Ok(path)
    }

    /// One worker's control connection: its registration, then its reports until it ends.
    async fn serve(
        self: Arc<Self>,
        stream: transport::Stream<tokio::net::TcpStream>,
    ) -> Result<(), RpcError> {
        let (mut reader, mut writer) = tokio::io::split(stream);
        let first: TmToJm =
            tokio::time::timeout(Duration::from_secs(10), transport::recv(&mut reader))
                .await
                .map_err(|_| RpcError::Timeout)??;
        let TmToJm::Register {
            protocol_version,
            data_port,
            worker_of: Some(job),
            ..
        } = first
        else {
            return Err(RpcError::Malformed(
                "a worker's first message must be its Register".into(),
            ));
        };
        if protocol_version != PROTOCOL_VERSION {
            let reason = format!(
                "the job's worker speaks control protocol version {protocol_version}, this TaskManager {PROTOCOL_VERSION}: rebuild the job against this sluice"
            );
            let _ = transport::send(
                &mut writer,
                &JmToTm::Refused {
                    reason: reason.clone(),
                },
            )
            .await;
            return Err(RpcError::Malformed(reason));
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let generation = {
            let mut jobs = lock(&self.jobs);
            let Some(w) = jobs
                .get_mut(&job)
                .filter(|w| matches!(w.outbox, Outbox::Pending(_)))
            else {
                return Err(RpcError::Malformed(format!(
                    "no worker of job {job} is starting"
                )));
            };
            if let Outbox::Pending(queue) =
                std::mem::replace(&mut w.outbox, Outbox::Open(tx.clone()))
            {
                for msg in queue {
                    let _ = tx.send(msg);
                }
            }
            w.generation
        };
        self.registry.set_moved(job, Some(data_port));
        let hb = &self.config.heartbeat;
        transport::send(
            &mut writer,
            &JmToTm::Registered {
                heartbeat_interval_ms: hb.interval.as_millis() as u64,
                heartbeat_timeout_ms: hb.detection_timeout().as_millis() as u64,
            },
        )
        .await?;
        info!(%job, data_port, "the job's worker registered");
        let write_loop = async {
            while let Some(msg) = rx.recv().await {
                transport::send(&mut writer, &msg).await?;
            }
            Ok::<(), RpcError>(())
        };
        let read_loop = async {
            loop {
                let msg: TmToJm = transport::recv(&mut reader).await?;
                let mut jobs = lock(&self.jobs);
                let Some(w) = jobs.get_mut(&job).filter(|w| w.generation == generation) else {
                    return Ok(());
                };
                match msg {
                    TmToJm::Heartbeat { metrics, .. } => {
                        w.metrics = metrics;
                        w.send(JmToTm::HeartbeatAck);
                    }
                    TmToJm::TaskState {
                        execution,
                        state,
                        error,
                        metrics,
                    } => {
                        if state.is_terminal() {
                            w.executions.remove(&execution);
                            w.metrics.retain(|(e, _)| *e != execution);
                            self.metrics.task_ended(&execution);
                        }
                        drop(jobs);
                        self.report(TmToJm::TaskState {
                            execution,
                            state,
                            error,
                            metrics,
                        });
                    }
                    msg @ (TmToJm::AcknowledgeCheckpoint { .. }
                    | TmToJm::DeclineCheckpoint { .. }) => {
                        drop(jobs);
                        self.report(msg);
                    }
                    TmToJm::Register { .. }
                    | TmToJm::FetchArtifact { .. }
                    | TmToJm::LogAnswer { .. } => {
                        return Err(RpcError::Malformed(
                            "a worker registered twice, asked for an artifact or answered a log request it was not sent".into(),
                        ));
                    }
                }
            }
        };
        tokio::select! {
            r = write_loop => r,
            r = read_loop => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_worker_goes_when_the_processes_hold_more_than_the_budget() {
        // Within the budget, or exactly at it: nothing is stopped.
        assert_eq!(over_budget(100, &[300, 500], 900), None);
        assert_eq!(over_budget(100, &[300, 500], 1000), None);
        // Over it: the largest worker, wherever it is in the list.
        assert_eq!(over_budget(100, &[300, 700], 1000), Some(1));
        assert_eq!(over_budget(100, &[800, 150], 1000), Some(0));
        // A TaskManager over its budget by itself, with no worker: none to stop.
        assert_eq!(over_budget(2000, &[], 1000), None);
        // Sizes that would overflow do not wrap into "within the budget".
        assert_eq!(over_budget(u64::MAX, &[1], 1000), Some(0));
    }

    #[test]
    fn cached_artifacts_go_after_the_interval_without_a_worker() {
        let (a, b, c) = ("a".repeat(64), "b".repeat(64), "c".repeat(64));
        let cached = vec![a.clone(), b.clone(), c.clone()];
        let hour = Duration::from_secs(3600);
        let t0 = Instant::now();
        let mut used = HashMap::from([(b.clone(), t0)]);
        let running = HashSet::from([a.clone()]);
        // First seen now, or just used: nothing is stale yet.
        assert!(stale_artifacts(&cached, &running, &mut used, t0, hour).is_empty());
        // An hour on: b and c have not run since; a runs.
        let later = t0 + hour;
        assert_eq!(
            stale_artifacts(&cached, &running, &mut used, later, hour),
            [b.clone(), c.clone()]
        );
        // a's worker ended a minute ago: it stays until its own hour has passed.
        let kept = vec![a.clone()];
        used.insert(a.clone(), later + Duration::from_secs(60));
        let soon = later + Duration::from_secs(120);
        assert!(stale_artifacts(&kept, &HashSet::new(), &mut used, soon, hour).is_empty());
        let gone = later + Duration::from_secs(60) + hour;
        assert_eq!(
            stale_artifacts(&kept, &HashSet::new(), &mut used, gone, hour),
            std::slice::from_ref(&a)
        );
        assert!(used.is_empty());
    }
}
