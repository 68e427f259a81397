//! A standalone sluice cluster of real processes: one JobManager and two TaskManagers of one
//! slot each, all on loopback, configured in a temporary directory, killed on drop.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::procs::Child;

/// The shared secret of the bench's clusters (they bind to 127.0.0.1 only).
const SECRET: &str = "sluice-bench-cluster-secret";

/// A running cluster.
pub struct Cluster {
    // Dropped in declaration order: TaskManagers first, then the JobManager, then the directory.
    taskmanagers: Vec<Child>,
    jobmanager: Child,
    dir: tempfile::TempDir,
    /// The JobManager's RPC port (the control plane).
    pub rpc_port: u16,
    rest_port: u16,
    http: reqwest::Client,
    // The async client's runtime. The blocking client would enable a reqwest feature the
    // engine does not use, and building the engine with different features would make
    // `cargo build --bin sluice` and `cargo run -p sluice-bench` rebuild it in turn.
    runtime: tokio::runtime::Runtime,
}

/// A job's state and details as `GET /jobs/:id` reports them.
pub struct JobDetails(pub Value);

impl JobDetails {
    /// The job state.
    pub fn state(&self) -> &str {
        self.0["state"].as_str().unwrap_or("?")
    }

    /// From RUNNING to FINISHED by the JobManager's clock.
    pub fn running_to_finished(&self) -> Result<Duration> {
        let ts = &self.0["timestamps"];
        let (running, finished) = (ts["RUNNING"].as_u64(), ts["FINISHED"].as_u64());
        match (running, finished) {
            (Some(r), Some(f)) if r > 0 && f >= r => Ok(Duration::from_millis(f - r)),
            _ => bail!("job timestamps lack RUNNING/FINISHED: {ts}"),
        }
    }

    /// A metric summed over the vertices whose name contains `vertex`.
    pub fn metric(&self, vertex: &str, metric: &str) -> u64 {
        self.0["vertices"]
            .as_array()
            .map(|vs| {
                vs.iter()
                    .filter(|v| v["name"].as_str().is_some_and(|n| n.contains(vertex)))
                    .filter_map(|v| v["metrics"][metric].as_u64())
                    .sum()
            })
            .unwrap_or(0)
    }
}

fn free_tcp_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("find a free port")?
        .port())
}

impl Cluster {
    /// Starts the JobManager and `taskmanagers` TaskManagers with `extra` configuration lines.
    pub fn start(bin: &Path, taskmanagers: usize, extra: &str) -> Result<Cluster> {
        Self::start_with_slots(bin, taskmanagers, 1, extra)
    }

    /// [`Cluster::start`] with `slots` slots per TaskManager.
    pub fn start_with_slots(
        bin: &Path,
        taskmanagers: usize,
        slots: u32,
        extra: &str,
    ) -> Result<Cluster> {
        let dir = tempfile::Builder::new()
            .prefix("sluice-bench-")
            .tempdir()
            .context("temp dir")?;
        let (rest_port, rpc_port) = (free_tcp_port()?, free_tcp_port()?);
        let config = format!(
            "rest.port: {rest_port}\nrest.address: 127.0.0.1\nrest.bind-address: 127.0.0.1\n\
             jobmanager.rpc.address: 127.0.0.1\njobmanager.rpc.port: {rpc_port}\n\
             jobmanager.bind-host: 127.0.0.1\ntaskmanager.host: 127.0.0.1\n\
             taskmanager.bind-host: 127.0.0.1\ntaskmanager.numberOfTaskSlots: {slots}\n\
             security.cluster.secret: {SECRET}\n{extra}\n"
        );
        std::fs::write(dir.path().join("config.yaml"), config).context("write config.yaml")?;
        let path = dir.path().to_path_buf();
        let command = move |role: &str| {
            let mut c = Command::new(bin);
            c.arg("--config-dir")
                .arg(&path)
                .arg(role)
                .current_dir(&path)
                .env("RUST_LOG", "warn");
            c
        };
        let jobmanager = Child::spawn_logged(
            "jobmanager",
            command("jobmanager"),
            &dir.path().join("jobmanager.log"),
        )?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("tokio runtime")?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            // Below the JobManager's close of idle keep-alive connections (10 s): a request
            // never goes out on a connection the server is closing.
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .context("HTTP client")?;
        let mut cluster = Cluster {
            taskmanagers: Vec::new(),
            jobmanager,
            dir,
            rpc_port,
            rest_port,
            http,
            runtime,
        };
        cluster.wait_for("the JobManager's REST API", |c| c.get("/overview").is_ok())?;
        for i in 0..taskmanagers {
            let log = cluster.dir.path().join(format!("taskmanager-{i}.log"));
            let tm = Child::spawn_logged("taskmanager", command("taskmanager"), &log)?;
            cluster.taskmanagers.push(tm);
        }
        cluster.wait_for("the TaskManagers to register", |c| {
            c.get("/overview").is_ok_and(|o| {
                o["slots-total"].as_u64() == Some(taskmanagers as u64 * slots as u64)
            })
        })?;
        Ok(cluster)
    }

    fn wait_for(&mut self, what: &str, mut ready: impl FnMut(&Cluster) -> bool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready(self) {
            let dead = self.jobmanager.check_alive().err().or_else(|| {
                self.taskmanagers
                    .iter_mut()
                    .find_map(|tm| tm.check_alive().err())
            });
            if let Some(e) = dead {
                return Err(self.explain(e));
            }
            if Instant::now() > deadline {
                return Err(self.explain(anyhow::anyhow!("timed out waiting for {what}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Adds the tail of every process log to an error.
    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        let mut logs = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path()) {
            let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
            paths.sort();
            for p in paths
                .iter()
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
            {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                logs.push_str(&format!("\n--- {} (last lines)\n", p.display()));
                for l in tail.iter().rev() {
                    logs.push_str(l);
                    logs.push('\n');
                }
            }
        }
        e.context(format!("cluster logs:{logs}"))
    }

    /// The TaskManagers' process ids.
    pub fn taskmanager_pids(&self) -> Vec<u32> {
        self.taskmanagers.iter().map(Child::pid).collect()
    }

    /// The JobManager's REST port.
    pub fn rest_port(&self) -> u16 {
        self.rest_port
    }

    /// The JobManager's process id.
    pub fn jobmanager_pid(&self) -> u32 {
        self.jobmanager.pid()
    }

    /// GETs a REST path.
    pub fn get(&self, path: &str) -> Result<Value> {
        let url = format!("http://127.0.0.1:{}{path}", self.rest_port);
        let (status, body) = self.runtime.block_on(async {
            let resp = self
                .http
                .get(&url)
                .send()
                .await
                .with_context(|| url.clone())?;
            let status = resp.status();
            let body: Value = resp
                .json()
                .await
                .with_context(|| format!("JSON from {url}"))?;
            anyhow::Ok((status, body))
        })?;
        if !status.is_success() {
            bail!("{url}: {status} {body}");
        }
        Ok(body)
    }

    /// The network memory each TaskManager reports (`memoryConfiguration.networkMemory`).
    pub fn network_memory(&self) -> Result<u64> {
        let tms = self.get("/taskmanagers")?;
        tms["taskmanagers"][0]["memoryConfiguration"]["networkMemory"]
            .as_u64()
            .context("networkMemory in /taskmanagers")
    }

    /// Submits a bundled job; its id.
    pub fn submit(&self, job: &str, args: &[String], parallelism: u32) -> Result<String> {
        let url = format!("http://127.0.0.1:{}/sluice/jobs", self.rest_port);
        let (status, body) = self.runtime.block_on(async {
            let resp = self
                .http
                .post(&url)
                .json(&json!({"job": job, "args": args, "parallelism": parallelism}))
                .send()
                .await
                .context("submit")?;
            let status = resp.status();
            let body: Value = resp.json().await.context("submission answer")?;
            anyhow::Ok((status, body))
        })?;
        if !status.is_success() {
            bail!("submitting {job} {args:?}: {status} {body}");
        }
        body["jobid"]
            .as_str()
            .map(str::to_string)
            .context("jobid in the submission answer")
    }

    /// The job's details.
    pub fn job(&self, id: &str) -> Result<JobDetails> {
        Ok(JobDetails(self.get(&format!("/jobs/{id}"))?))
    }

    /// Polls every 100 ms until the job ends; fails on timeout or if it did not finish.
    pub fn wait_finished(&mut self, id: &str, timeout: Duration) -> Result<JobDetails> {
        let deadline = Instant::now() + timeout;
        loop {
            let job = self.job(id)?;
            match job.state() {
                "FINISHED" => return Ok(job),
                "FAILED" | "CANCELED" => {
                    let ex = self
                        .get(&format!("/jobs/{id}/exceptions"))
                        .unwrap_or_default();
                    let e = anyhow::anyhow!("job {id} {}: {}", job.state(), ex["root-exception"]);
                    return Err(self.explain(e));
                }
                _ => {}
            }
            if Instant::now() > deadline {
                let e = anyhow::anyhow!("job {id} still {} after {timeout:?}", job.state());
                return Err(self.explain(e));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Cancels a job and waits until it is no longer running.
    pub fn cancel(&self, id: &str) -> Result<()> {
        let url = format!("http://127.0.0.1:{}/jobs/{id}?mode=cancel", self.rest_port);
        let status = self
            .runtime
            .block_on(async { self.http.patch(&url).send().await })
            .context("cancel")?
            .status();
        // 409: the job ended before the cancellation arrived.
        if !status.is_success() && status.as_u16() != 409 {
            bail!("cancel {id}: {status}");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(self.job(id)?.state(), "CANCELED" | "FINISHED" | "FAILED") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("job {id} did not stop within 30 s of its cancellation")
    }
}
