//! The JobManager as the control plane: its cost must grow with subtasks, jobs and checkpoints,
//! never with records. A real JobManager runs in this process (Dispatcher, JobMasters,
//! checkpoint coordinators, the RPC endpoint, REST); the TaskManagers are stand-ins in a child
//! process (`sluice-bench stand-ins`) that speak the real control protocol over TLS: they
//! register, heartbeat, report every deployed subtask RUNNING, acknowledge every checkpoint of a
//! job for all of its subtasks, and cancel when told. So this process's CPU time and peak RSS
//! are the JobManager's.
//!
//! Two scenarios:
//! - `wide`: one job of two vertices of parallelism N connected all-to-all (the shuffle
//!   program): build, schedule and deploy it, complete a checkpoint, fail one subtask over and
//!   wait until every subtask runs again. Prints the time of each phase, the bytes of the
//!   deployment descriptors and the peak RSS.
//! - `many`: J jobs of parallelism P with 1 s checkpoints, for a while: the JobManager's CPU
//!   share and RSS.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sluice::common::ids::{ExecutionId, JobId};
use sluice::config::Config;
use sluice::jobmanager::JobManager;
use sluice::jobmanager::jobmaster::JobStatus;
use sluice::rpc::messages::{ExecutionState, JmToTm, PROTOCOL_VERSION, ProgramSpec, TmToJm};
use sluice::rpc::transport;
use sluice::security::ClusterSecret;
use tokio::sync::mpsc;

/// The environment variable that hands the stand-ins the cluster secret.
const SECRET_ENV: &str = "SLUICE_BENCH_SECRET";
/// Stand-in TaskManagers fail this subtask (vertex 0, subtask 0) once, after checkpoint 1 of
/// the first job completes, when asked to.
const FAIL_ONCE_ENV: &str = "SLUICE_BENCH_FAIL_ONCE";

/// This process's CPU time (user + system) and peak RSS.
fn self_usage() -> (Duration, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let ticks: u64 = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            let f: Vec<&str> = rest.split_whitespace().collect();
            f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
                + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        })
        .unwrap_or(0);
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm_kb = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    (Duration::from_millis(ticks * 10), hwm_kb * 1024)
}

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

async fn start_jobmanager(config_lines: &[(&str, &str)], secret: &str) -> Result<JobManager> {
    let mut config = Config::default();
    let heartbeats = [
        ("heartbeat.interval", "1 s"),
        ("heartbeat.timeout", "60 s"),
        ("heartbeat.rpc-failure-threshold", "-1"),
    ];
    for (k, v) in sluice::embedded::EmbeddedCluster::LOOPBACK
        .iter()
        .chain(&heartbeats)
        .chain(config_lines)
    {
        config.set(k, v)?;
    }
    Ok(sluice::rest::start_jobmanager(
        config,
        ClusterSecret::new(secret),
        Arc::new(sluice::examples::bundled()),
    )
    .await?)
}

/// Starts `count` stand-in TaskManagers of `slots` slots each in a child process.
fn stand_ins(
    jm: &JobManager,
    secret: &str,
    count: u32,
    slots: u32,
    fail_once: bool,
) -> Result<std::process::Child> {
    let me = std::env::current_exe()?;
    let child = std::process::Command::new(me)
        .args([
            "stand-ins",
            "--jobmanager",
            &jm.shared.rpc_address().to_string(),
            "--count",
            &count.to_string(),
            "--slots",
            &slots.to_string(),
        ])
        .env(SECRET_ENV, secret)
        .env(FAIL_ONCE_ENV, if fail_once { "1" } else { "0" })
        .spawn()
        .context("starting the stand-in TaskManagers")?;
    Ok(child)
}

async fn wait(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> Result<Duration> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(start.elapsed())
}

fn all_running(jm: &JobManager, job: JobId, attempt: u32) -> bool {
    let view = jm.shared.view();
    view.job(job).is_some_and(|j| {
        j.status() == JobStatus::Running
            && j.executions()
                .iter()
                .flatten()
                .all(|e| e.state == ExecutionState::Running && e.attempt == attempt)
    })
}

fn completed_checkpoints(jm: &JobManager, job: JobId) -> u64 {
    let view = jm.shared.view();
    view.job(job)
        .map(|j| j.checkpoints().stats().counts.completed)
        .unwrap_or(0)
}

/// One job of two vertices of parallelism `parallelism`, all-to-all.
pub async fn wide(parallelism: u32, taskmanagers: u32) -> Result<()> {
    let secret = format!("{:032x}", rand_u128());
    let scratch = tempfile::tempdir()?;
    let dir = scratch.path().join("checkpoints").display().to_string();
    let jm = start_jobmanager(
        &[
            ("execution.checkpointing.interval", "1 s"),
            ("execution.checkpointing.dir", &dir),
            ("restart-strategy.type", "fixed-delay"),
            ("restart-strategy.fixed-delay.attempts", "1"),
            ("restart-strategy.fixed-delay.delay", "0 ms"),
            ("slot.request.timeout", "600 s"),
        ],
        &secret,
    )
    .await?;
    let slots = parallelism.div_ceil(taskmanagers);
    let mut child = stand_ins(&jm, &secret, taskmanagers, slots, true)?;
    let (cpu0, _) = self_usage();
    let rss0 = rss();
    wait("the stand-ins to register", Duration::from_secs(60), || {
        jm.shared.view().resources().total_slots() >= parallelism
    })
    .await?;
    let program = ProgramSpec::new("shuffle", vec![]);
    let start = Instant::now();
    let job = jm
        .shared
        .submit(program, Some(parallelism), &[], None)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let submitted = start.elapsed();
    let deployed = wait("every subtask to run", Duration::from_secs(1800), || {
        all_running(&jm, job, 0)
    })
    .await?
        + submitted;
    let (cpu_deploy, _) = self_usage();
    let checkpointed = wait("a completed checkpoint", Duration::from_secs(600), || {
        completed_checkpoints(&jm, job) >= 1
    })
    .await?;
    let failed_over = wait("the failover", Duration::from_secs(1800), || {
        all_running(&jm, job, 1)
    })
    .await?;
    let (cpu, hwm) = self_usage();
    let subtasks = 2 * u64::from(parallelism);
    println!(
        "wide job, 2 x {parallelism} subtasks all-to-all on {taskmanagers} stand-in TaskManagers:"
    );
    println!(
        "  submit (build the graph, schedule, produce deployments): {:.2} s",
        submitted.as_secs_f64()
    );
    println!(
        "  until every subtask runs: {:.2} s ({:.1} s of JobManager CPU)",
        deployed.as_secs_f64(),
        (cpu_deploy - cpu0).as_secs_f64()
    );
    println!(
        "  a checkpoint round after that: {:.2} s",
        checkpointed.as_secs_f64()
    );
    println!(
        "  failover of one subtask until all {subtasks} run again: {:.2} s",
        failed_over.as_secs_f64()
    );
    println!(
        "  JobManager CPU in all: {:.1} s; RSS before {:.0} MiB, peak {:.0} MiB",
        (cpu - cpu0).as_secs_f64(),
        mib(rss0),
        mib(hwm)
    );
    let _ = child.kill();
    let output = child.wait_with_output();
    drop(output);
    Ok(())
}

/// `jobs` jobs of parallelism `parallelism` with 1 s checkpoints for `seconds`.
pub async fn many(jobs: u32, parallelism: u32, seconds: u64, taskmanagers: u32) -> Result<()> {
    let secret = format!("{:032x}", rand_u128());
    let scratch = tempfile::tempdir()?;
    let dir = scratch.path().join("checkpoints").display().to_string();
    let jm = start_jobmanager(
        &[
            ("execution.checkpointing.interval", "1 s"),
            ("execution.checkpointing.dir", &dir),
        ],
        &secret,
    )
    .await?;
    let slots = (jobs * parallelism).div_ceil(taskmanagers);
    let mut child = stand_ins(&jm, &secret, taskmanagers, slots, false)?;
    wait("the stand-ins to register", Duration::from_secs(60), || {
        jm.shared.view().resources().total_slots() >= jobs * parallelism
    })
    .await?;
    let mut ids = Vec::new();
    for _ in 0..jobs {
        let program = ProgramSpec::new("stream-sum", vec![]);
        ids.push(
            jm.shared
                .submit(program, Some(parallelism), &[], None)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        );
    }
    wait("every job to run", Duration::from_secs(300), || {
        ids.iter().all(|&j| all_running(&jm, j, 0))
    })
    .await?;
    // Warm-up: the first checkpoints.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before: u64 = ids.iter().map(|&j| completed_checkpoints(&jm, j)).sum();
    let (cpu0, _) = self_usage();
    let started = Instant::now();
    let mut rss_max = 0;
    while started.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        rss_max = rss_max.max(rss());
    }
    let (cpu, hwm) = self_usage();
    let wall = started.elapsed();
    let after: u64 = ids.iter().map(|&j| completed_checkpoints(&jm, j)).sum();
    println!(
        "{jobs} jobs x {parallelism} subtasks, 1 s checkpoints, {:.0} s on {taskmanagers} stand-in TaskManagers:",
        wall.as_secs_f64()
    );
    println!(
        "  checkpoints completed: {} ({:.0} per second)",
        after - before,
        (after - before) as f64 / wall.as_secs_f64()
    );
    println!(
        "  JobManager CPU: {:.1}% of one core; RSS {:.0} MiB (peak {:.0} MiB)",
        100.0 * (cpu - cpu0).as_secs_f64() / wall.as_secs_f64(),
        mib(rss_max),
        mib(hwm)
    );
    let _ = child.kill();
    let _ = child.wait();
    Ok(())
}

fn rand_u128() -> u128 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    t ^ (u128::from(std::process::id()) << 64)
}

/// What the stand-ins know of each job: which subtasks each stand-in hosts.
#[derive(Default)]
struct Hosted {
    /// Per job: (stand-in index, execution).
    executions: BTreeMap<JobId, Vec<(usize, ExecutionId)>>,
    /// Checkpoints acknowledged already, per job.
    acked: BTreeSet<(JobId, u64)>,
    failed_once: bool,
}

/// The stand-in TaskManagers (the child process of `wide` and `many`).
pub async fn run_stand_ins(jobmanager: String, count: u32, slots: u32) -> Result<()> {
    let secret = std::env::var(SECRET_ENV).context("no cluster secret given")?;
    let fail_once = std::env::var(FAIL_ONCE_ENV).is_ok_and(|v| v == "1");
    let secret = ClusterSecret::new(secret);
    let address = jobmanager.parse()?;
    let hosted = Arc::new(Mutex::new(Hosted::default()));
    let bytes = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::new();
    let mut readers = Vec::new();
    for i in 0..count as usize {
        let stream = transport::connect(address, &secret).await?;
        let (mut reader, mut writer) = tokio::io::split(stream);
        transport::send(
            &mut writer,
            &TmToJm::Register {
                protocol_version: PROTOCOL_VERSION,
                resource_id: format!("stand-in-{i}"),
                host: "127.0.0.1".into(),
                data_port: 1,
                slots,
                hardware: Default::default(),
                network_memory: 0,
                managed_memory: 0,
                running: vec![],
                leader_session: None,
                metrics_port: None,
                worker_of: None,
            },
        )
        .await?;
        match transport::recv::<_, JmToTm>(&mut reader).await? {
            JmToTm::Registered { .. } => {}
            other => bail!("stand-in {i} was refused: {other:?}"),
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<TmToJm>();
        tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                if transport::send(&mut writer, &msg).await.is_err() {
                    return;
                }
            }
        });
        let beat = tx.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if beat
                    .send(TmToJm::Heartbeat {
                        metrics: vec![],
                        process: None,
                    })
                    .is_err()
                {
                    return;
                }
            }
        });
        senders.push(tx);
        readers.push(reader);
    }
    let senders = Arc::new(senders);
    let mut tasks = Vec::new();
    for (i, mut reader) in readers.into_iter().enumerate() {
        let (senders, hosted, bytes) = (senders.clone(), hosted.clone(), bytes.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let frame = match transport::read_frame(&mut reader).await {
                    Ok(frame) => frame,
                    Err(_) => return,
                };
                bytes.fetch_add(frame.len() as u64 + 4, Ordering::Relaxed);
                let Ok(msg) = serde_json::from_slice::<JmToTm>(&frame) else {
                    return;
                };
                let reply = |m| {
                    let _ = senders[i].send(m);
                };
                match msg {
                    JmToTm::Deploy(d) => {
                        let execution = d.execution;
                        hosted
                            .lock()
                            .unwrap()
                            .executions
                            .entry(execution.job)
                            .or_default()
                            .push((i, execution));
                        reply(running(execution, ExecutionState::Running));
                    }
                    JmToTm::Cancel { execution } => {
                        reply(running(execution, ExecutionState::Canceled))
                    }
                    JmToTm::ReleaseJob { job } => {
                        hosted.lock().unwrap().executions.remove(&job);
                    }
                    JmToTm::TriggerCheckpoint {
                        execution,
                        location,
                        ..
                    } => {
                        let job = execution.job;
                        let mut h = hosted.lock().unwrap();
                        if h.acked.insert((job, location.checkpoint_id)) {
                            for &(tm, e) in h.executions.get(&job).into_iter().flatten() {
                                if e.attempt == execution.attempt {
                                    let _ = senders[tm].send(TmToJm::AcknowledgeCheckpoint {
                                        execution: e,
                                        checkpoint_id: location.checkpoint_id,
                                        state: Default::default(),
                                    });
                                }
                            }
                        }
                    }
                    JmToTm::NotifyCheckpointComplete { execution, .. } => {
                        let mut h = hosted.lock().unwrap();
                        if fail_once
                            && !h.failed_once
                            && execution.vertex == 0
                            && execution.subtask == 0
                        {
                            h.failed_once = true;
                            reply(TmToJm::TaskState {
                                execution,
                                state: ExecutionState::Failed,
                                error: Some("failed on purpose by the benchmark".into()),
                                metrics: Default::default(),
                            });
                        }
                    }
                    _ => {}
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    eprintln!(
        "stand-ins received {:.1} MiB of control messages",
        mib(bytes.load(Ordering::Relaxed))
    );
    Ok(())
}

fn running(execution: ExecutionId, state: ExecutionState) -> TmToJm {
    TmToJm::TaskState {
        execution,
        state,
        error: None,
        metrics: Default::default(),
    }
}
