//! Helpers for sluice's end-to-end tests: start real processes through the project's own
//! scripts, talk to them over REST and the CLI, and clean up.
//!
//! The tests run the `sluice` binary that `cargo build --bin sluice` produced (`scripts/test.sh`
//! builds it first), found through `SLUICE_BIN` or the cargo target directory.

pub mod dfs;
pub mod hosts;
pub mod kafka;
pub mod kube;
pub mod prometheus;
pub mod yarn;

use std::collections::BTreeMap;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The repository root. `cargo test` sets `CARGO_MANIFEST_DIR` when it runs a test, so that
/// comes first: the compile-time value is baked into this library, which a shared
/// `CARGO_TARGET_DIR` may hold as built from another checkout (whose scripts then ran, or, once
/// that checkout was gone, "No such file or directory").
pub fn repo_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// The sluice binary under test.
pub fn sluice_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("SLUICE_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let bin = target.join("debug").join("sluice");
    assert!(
        bin.is_file(),
        "no sluice binary at {}: run `cargo build --bin sluice` first (scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// The job artifact the tests submit: `integration/test-job` (`cargo build --workspace --bins`
/// builds it; scripts/test.sh does) without its debug information, as users' release builds
/// come: the dev profile's line tables alone make it larger than the 100 MiB that
/// `rest.server.max-content-length` lets a JobManager accept, as in Flink.
pub fn test_job_bin() -> PathBuf {
    static STRIPPED: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let built = sluice_bin()
        .parent()
        .map(|d| d.join("sluice-test-job"))
        .unwrap_or_default();
    assert!(
        built.is_file(),
        "no test job artifact at {}: run `cargo build -p sluice-test-job` first (scripts/test.sh does)",
        built.display()
    );
    // The same file name in a folder of its own: the name is what the JobManager lists.
    let dir = built.with_file_name("stripped-artifacts");
    std::fs::create_dir_all(&dir).expect("a folder for the stripped artifact");
    let bin = dir.join("sluice-test-job");
    let _one_at_a_time = STRIPPED.lock().unwrap_or_else(|e| e.into_inner());
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&bin).is_none() || modified(&bin) < modified(&built) {
        // Written under another name first: another test binary may be reading the old one.
        let partial = dir.join(format!("partial.{}", std::process::id()));
        let status = Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&partial)
            .arg(&built)
            .status()
            .expect("strip (binutils) runs");
        assert!(
            status.success(),
            "strip --strip-debug {} failed",
            built.display()
        );
        std::fs::rename(&partial, &bin).expect("the stripped artifact");
    }
    bin
}

/// A TCP port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

/// A UDP port that was free a moment ago.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

/// Removes the directories `<dir_prefix><pid of a test binary>[-<name>]` of earlier test
/// binaries whose server is gone: neither the binary nor the process in the directory's
/// `pid_file` runs (the servers stop with their test binary; their data stays behind).
pub fn remove_stale_dirs(dir_prefix: &str, pid_file: &str) {
    let Some(parent) = Path::new(dir_prefix).parent() else {
        return;
    };
    let prefix = Path::new(dir_prefix)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Quietly, unlike `kill -0`.
    let running = |pid: u32| Path::new(&format!("/proc/{pid}")).exists();
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = name
            .strip_prefix(&prefix)
            .and_then(|p| p.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let server = std::fs::read_to_string(entry.path().join(pid_file))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok());
        if !running(owner) && !server.is_some_and(running) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Polls `f` every 50 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A standalone cluster started with `scripts/start-cluster.sh` in its own configuration and
/// log directories; stopped (and every process it started killed) on drop.
pub struct StandaloneCluster {
    /// Holds conf/ and log/.
    pub dir: tempfile::TempDir,
    /// The REST port.
    pub rest_port: u16,
    /// The RPC port.
    pub rpc_port: u16,
    /// Every JobManager's REST port (several with HA), in start order.
    pub rest_ports: Vec<u16>,
    /// The address the REST API is reached at: loopback, or the JobManager's host's address
    /// for a cluster on many hosts ([`start_on_hosts`](Self::start_on_hosts)).
    rest_host: std::net::IpAddr,
    /// Environment variables every process of the cluster and the CLI get.
    env: Vec<(String, String)>,
    /// `http`, or `https` for a cluster with `security.ssl.rest.enabled`.
    scheme: &'static str,
    http: reqwest::blocking::Client,
}

/// The tests' own HTTP client with its usual timeouts: below the JobManager's close of idle
/// keep-alive connections (10 s), so a request never goes out on a connection the server is
/// closing. `configure` adds to it (TLS trust and identity).
pub fn http_client(
    configure: impl FnOnce(reqwest::blocking::ClientBuilder) -> reqwest::blocking::ClientBuilder,
) -> reqwest::blocking::Client {
    configure(
        reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(5)),
    )
    .build()
    .expect("http client")
}

impl StandaloneCluster {
    /// Writes a configuration (extra `key: value` lines appended) and starts a JobManager and
    /// `taskmanagers` TaskManagers of `slots` slots each.
    pub fn start(taskmanagers: usize, slots: u32, extra_config: &str) -> StandaloneCluster {
        Self::start_with_jobmanagers(1, taskmanagers, slots, extra_config)
    }

    /// As [`start`](Self::start) with `jobmanagers` lines in conf/masters (several need
    /// ZooKeeper HA in `extra_config`; the scripts then give each its own ports).
    pub fn start_with_jobmanagers(
        jobmanagers: usize,
        taskmanagers: usize,
        slots: u32,
        extra_config: &str,
    ) -> StandaloneCluster {
        Self::start_full(jobmanagers, taskmanagers, slots, extra_config, &[], None)
    }

    /// As [`start_with_jobmanagers`](Self::start_with_jobmanagers), with `env` set for every
    /// process and CLI call (e.g. `HADOOP_CONF_DIR` for HA storage on HDFS).
    pub fn start_with_jobmanagers_and_env(
        jobmanagers: usize,
        taskmanagers: usize,
        slots: u32,
        extra_config: &str,
        env: &[(&str, &str)],
    ) -> StandaloneCluster {
        Self::start_full(jobmanagers, taskmanagers, slots, extra_config, env, None)
    }

    /// As [`start`](Self::start), with `env` set for every process and CLI call (e.g.
    /// `HADOOP_CONF_DIR`).
    pub fn start_with_env(
        taskmanagers: usize,
        slots: u32,
        extra_config: &str,
        env: &[(&str, &str)],
    ) -> StandaloneCluster {
        Self::start_full(1, taskmanagers, slots, extra_config, env, None)
    }

    /// As [`start`](Self::start) for a cluster whose REST API is HTTPS
    /// (`security.ssl.rest.*` in `extra_config`): the helpers' own calls go to `https://` with
    /// `client` (which has to trust the server, and present a certificate if it asks for one).
    pub fn start_https(
        taskmanagers: usize,
        slots: u32,
        extra_config: &str,
        client: reqwest::blocking::Client,
    ) -> StandaloneCluster {
        Self::start_full(1, taskmanagers, slots, extra_config, &[], Some(client))
    }

    /// A cluster on many hosts (see [`hosts`]): the JobManager runs on `jobmanager`, one
    /// TaskManager of `slots` slots on each of `taskmanagers`, each started in its host's
    /// network namespace with a configuration that names the hosts' addresses (the
    /// JobManager's in `config.yaml`, each TaskManager's own `taskmanager.host` and
    /// `taskmanager.bind-host` as `-D` options, as a per-host configuration would). The hosts
    /// share this cluster's directories (configuration, logs, scratch).
    pub fn start_on_hosts(
        jobmanager: &hosts::Host,
        taskmanagers: &[&hosts::Host],
        slots: u32,
        extra_config: &str,
    ) -> StandaloneCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let (rest_port, rpc_port) = (free_port(), free_port());
        let conf = dir.path().join("conf");
        std::fs::create_dir_all(&conf).expect("conf dir");
        let jm = &jobmanager.address;
        let config = format!(
            "rest.port: {rest_port}\nrest.address: {jm}\nrest.bind-address: {jm}\njobmanager.rpc.address: {jm}\njobmanager.rpc.port: {rpc_port}\njobmanager.bind-host: {jm}\ntaskmanager.numberOfTaskSlots: {slots}\n{extra_config}\n"
        );
        std::fs::write(conf.join("config.yaml"), config).expect("config");
        let cluster = StandaloneCluster {
            dir,
            rest_port,
            rpc_port,
            rest_ports: vec![rest_port],
            rest_host: jm.parse().expect("the JobManager host's address"),
            env: Vec::new(),
            scheme: "http",
            http: http_client(|b| b),
        };
        let out = cluster.script_on(jobmanager, "jobmanager.sh", &["start"]);
        assert!(
            out.status.success(),
            "jobmanager.sh start on {} failed: {}",
            jobmanager.name,
            String::from_utf8_lossy(&out.stderr)
        );
        for host in taskmanagers {
            cluster.start_taskmanager_on(host);
        }
        let expected = taskmanagers.len() as u64 * slots as u64;
        wait_for(
            Duration::from_secs(30),
            "the TaskManagers to register",
            || {
                let o = cluster.get("/overview").ok()?;
                (o["slots-total"].as_u64() == Some(expected)).then_some(())
            },
        );
        cluster
    }

    /// Starts a TaskManager on `host` that advertises and binds the host's address.
    pub fn start_taskmanager_on(&self, host: &hosts::Host) {
        let a = &host.address;
        let out = self.script_on(
            host,
            "taskmanager.sh",
            &[
                "start",
                "-D",
                &format!("taskmanager.host={a}"),
                "-D",
                &format!("taskmanager.bind-host={a}"),
            ],
        );
        assert!(
            out.status.success(),
            "taskmanager.sh start on {} failed: {}",
            host.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The registered TaskManagers' resource ids by the address they advertise (from their
    /// `path`, `sluice://<address>:<port>/taskmanager/<id>`).
    pub fn taskmanagers_by_address(&self) -> BTreeMap<String, String> {
        self.get("/taskmanagers").unwrap_or(Value::Null)["taskmanagers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| {
                        let id = t["id"].as_str()?;
                        let path = t["path"].as_str()?.strip_prefix("sluice://")?;
                        let (address, _) = path.split_once('/')?.0.rsplit_once(':')?;
                        Some((address.to_string(), id.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn start_full(
        jobmanagers: usize,
        taskmanagers: usize,
        slots: u32,
        extra_config: &str,
        env: &[(&str, &str)],
        https: Option<reqwest::blocking::Client>,
    ) -> StandaloneCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let (rest_port, rpc_port) = (free_port(), free_port());
        let mut rest_ports = vec![rest_port];
        rest_ports.extend((1..jobmanagers).map(|_| free_port()));
        let conf = dir.path().join("conf");
        std::fs::create_dir_all(&conf).expect("conf dir");
        let config = format!(
            "rest.port: {rest_port}\nrest.address: 127.0.0.1\nrest.bind-address: 127.0.0.1\njobmanager.rpc.address: 127.0.0.1\njobmanager.rpc.port: {rpc_port}\njobmanager.bind-host: 127.0.0.1\ntaskmanager.host: 127.0.0.1\ntaskmanager.bind-host: 127.0.0.1\ntaskmanager.numberOfTaskSlots: {slots}\n{extra_config}\n"
        );
        std::fs::write(conf.join("config.yaml"), config).expect("config");
        let masters: String = rest_ports
            .iter()
            .map(|p| format!("localhost:{p}\n"))
            .collect();
        std::fs::write(conf.join("masters"), masters).expect("masters");
        std::fs::write(conf.join("workers"), "localhost\n".repeat(taskmanagers)).expect("workers");
        let cluster = StandaloneCluster {
            dir,
            rest_port,
            rpc_port,
            rest_ports,
            rest_host: std::net::IpAddr::from([127, 0, 0, 1]),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            scheme: if https.is_some() { "https" } else { "http" },
            http: https.unwrap_or_else(|| http_client(|b| b)),
        };
        let out = cluster.script("start-cluster.sh", &[]);
        assert!(
            out.status.success(),
            "start-cluster.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = taskmanagers as u64 * slots as u64;
        wait_for(
            Duration::from_secs(30),
            "the TaskManagers to register",
            || {
                let o = cluster.get("/overview").ok()?;
                (o["slots-total"].as_u64() == Some(expected)).then_some(())
            },
        );
        cluster
    }

    /// The cluster's scratch directory (removed with the cluster): a place for checkpoints,
    /// savepoints and job output.
    pub fn work_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// The configuration directory.
    pub fn conf_dir(&self) -> PathBuf {
        self.dir.path().join("conf")
    }

    /// The log directory.
    pub fn log_dir(&self) -> PathBuf {
        self.dir.path().join("log")
    }

    /// Runs one of the scripts with this cluster's directories.
    pub fn script(&self, name: &str, args: &[&str]) -> Output {
        self.script_command(Command::new(repo_root().join("scripts").join(name)), args)
    }

    /// Runs one of the scripts with this cluster's directories on `host` (in its network
    /// namespace): what it starts runs there.
    pub fn script_on(&self, host: &hosts::Host, name: &str, args: &[&str]) -> Output {
        self.script_command(host.command(repo_root().join("scripts").join(name)), args)
    }

    fn script_command(&self, mut command: Command, args: &[&str]) -> Output {
        command
            .args(args)
            .env("SLUICE_CONF_DIR", self.conf_dir())
            .env("SLUICE_LOG_DIR", self.log_dir())
            .env("SLUICE_BIN", sluice_bin())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run script")
    }

    /// `host:port` of the REST API.
    pub fn rest(&self) -> String {
        // The first JobManager that answers (with HA a standby redirects to the leader).
        self.rest_ports
            .iter()
            .find(|p| {
                std::net::TcpStream::connect_timeout(
                    &std::net::SocketAddr::from((self.rest_host, **p)),
                    Duration::from_millis(200),
                )
                .is_ok()
            })
            .map(|p| format!("{}:{p}", self.rest_host))
            .unwrap_or_else(|| format!("{}:{}", self.rest_host, self.rest_port))
    }

    /// Runs the CLI against this cluster's configuration.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(sluice_bin())
            .arg("--config-dir")
            .arg(self.conf_dir())
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run sluice")
    }

    /// `sluice ARGS` of a command that takes a savepoint (`savepoint`, `stop`): asserts it
    /// succeeded and returns the path it printed.
    pub fn cli_savepoint(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{} failed: {stdout}{}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("Savepoint completed. Path: "))
            .unwrap_or_else(|| panic!("no savepoint path in: {stdout}"))
            .trim()
            .to_string()
    }

    /// `sluice run -m <this cluster> -d ARGS`; returns the job id.
    pub fn submit_detached(&self, args: &[&str]) -> String {
        let rest = self.rest();
        let mut full = vec!["run", "-m", rest.as_str(), "-d"];
        full.extend_from_slice(args);
        let out = self.cli(&full);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        job_id_of(&stdout)
    }

    /// GETs a REST path and parses the JSON.
    pub fn get(&self, path: &str) -> Result<Value, String> {
        let resp = self
            .http
            .get(format!("{}://{}{path}", self.scheme, self.rest()))
            .send()
            .map_err(|e| e.to_string())?;
        resp.json().map_err(|e| e.to_string())
    }

    /// `GET /jobs/:id`, or null while it cannot be had.
    pub fn job(&self, id: &str) -> Value {
        self.get(&format!("/jobs/{id}")).unwrap_or(Value::Null)
    }

    /// `GET /jobs/:id/exceptions`, or null while it cannot be had.
    pub fn exceptions(&self, id: &str) -> Value {
        self.get(&format!("/jobs/{id}/exceptions"))
            .unwrap_or(Value::Null)
    }

    /// The job's state name (empty while unknown).
    pub fn job_state(&self, id: &str) -> String {
        self.job(id)["state"].as_str().unwrap_or("").to_string()
    }

    /// Waits until the job is in state `want`; a job that fails meanwhile (when `want` is not
    /// FAILED) fails the test with its exceptions.
    pub fn wait_state(&self, id: &str, want: &str, within: Duration) {
        wait_for(within, &format!("job {id} to be {want}"), || {
            let s = self.job_state(id);
            assert!(
                s != "FAILED" || want == "FAILED",
                "the job failed: {}",
                self.get(&format!("/jobs/{id}/exceptions"))
                    .map(|e| e.to_string())
                    .unwrap_or_default()
            );
            (s == want).then_some(())
        });
    }

    /// Submits detached with owned arguments (as [`counting_args`] makes them).
    pub fn submit_args(&self, args: &[String]) -> String {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.submit_detached(&args)
    }

    /// How many checkpoints of the job have completed.
    pub fn completed_checkpoints(&self, id: &str) -> u64 {
        self.get(&format!("/jobs/{id}/checkpoints"))
            .ok()
            .and_then(|c| c["counts"]["completed"].as_u64())
            .unwrap_or(0)
    }

    /// The resource ids of the registered TaskManagers.
    pub fn taskmanager_ids(&self) -> Vec<String> {
        self.get("/taskmanagers").unwrap_or(Value::Null)["taskmanagers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The Prometheus reporter port each registered TaskManager names in REST, in REST's order.
    pub fn reporter_ports(&self) -> Vec<u16> {
        self.get("/taskmanagers").expect("taskmanagers")["taskmanagers"]
            .as_array()
            .expect("a list of TaskManagers")
            .iter()
            .map(|tm| {
                tm["prometheusReporterPort"]
                    .as_u64()
                    .expect("a reporter port") as u16
            })
            .collect()
    }

    /// `sluice check-counting` of a `counting` output: whether it passed, and its report.
    pub fn check_counting(&self, records: u64, keys: u64, dir: &Path) -> (bool, String) {
        self.check_windowed_counting(records, keys, None, dir)
    }

    /// `check-counting` of `counting`'s output (of its per-window lines with `window`, the
    /// job's `--window-ms`), which must find every record exactly once: its report. A failure
    /// panics with the report and `context` (what replays the run, such as a seed).
    pub fn expect_exactly_once(
        &self,
        (records, keys, window): (u64, u64, Option<u64>),
        dir: &Path,
        context: &str,
    ) -> String {
        let (ok, report) = self.check_windowed_counting(records, keys, window, dir);
        assert!(
            ok && report.starts_with("OK"),
            "not exactly once ({context}):\n{report}"
        );
        report
    }

    /// `check-counting` of `counting`'s output, of its per-window lines with `window` (the
    /// job's `--window-ms`).
    pub fn check_windowed_counting(
        &self,
        records: u64,
        keys: u64,
        window: Option<u64>,
        dir: &Path,
    ) -> (bool, String) {
        let mut args = vec![
            "check-counting".to_string(),
            "--records".into(),
            records.to_string(),
            "--keys".into(),
            keys.to_string(),
        ];
        if let Some(window) = window {
            args.extend(["--window-ms".into(), window.to_string()]);
        }
        args.push(dir.display().to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.cli(&args);
        // A checker that could not read the output says why on standard error.
        let mut report = String::from_utf8_lossy(&out.stdout).into_owned();
        report.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.success(), report)
    }

    /// Sends a raw request; returns status and body.
    pub fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        match self
            .http
            .request(method, format!("{}://{}{path}", self.scheme, self.rest()))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
        {
            Ok(r) => {
                let status = r.status().as_u16();
                (status, r.text().unwrap_or_default())
            }
            Err(e) => (0, e.to_string()),
        }
    }

    /// The pids of the daemons of one kind, from the scripts' pid file.
    pub fn pids(&self, kind: &str) -> Vec<u32> {
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        let file = self.log_dir().join(format!("sluice-{user}-{kind}.pid"));
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Whether the log file written by the daemon with this pid mentions `text` (the scripts
    /// name logs by start order; the pid file lists pids in the same order).
    pub fn logs_of_pid_mention(&self, pid: u32, text: &str) -> bool {
        self.mentions_in_logs_of_pid(pid, text) > 0
    }

    /// How often the log file written by the daemon with this pid mentions `text`.
    pub fn mentions_in_logs_of_pid(&self, pid: u32, text: &str) -> usize {
        let kind = if self.pids("taskmanager").contains(&pid) {
            "taskmanager"
        } else {
            "jobmanager"
        };
        let index = self.pids(kind).iter().position(|p| *p == pid);
        let logs = self.logs(kind);
        index
            .and_then(|i| logs.get(i))
            .map_or(0, |log| log.matches(text).count())
    }

    /// Concatenated logs of one process kind.
    pub fn logs(&self, kind: &str) -> Vec<String> {
        let mut logs = Vec::new();
        if let Ok(entries) = std::fs::read_dir(self.log_dir()) {
            let mut paths: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default();
                if name.contains(&format!("-{kind}-")) && name.ends_with(".log") {
                    logs.push(std::fs::read_to_string(&p).unwrap_or_default());
                }
            }
        }
        logs
    }
}

/// Whether a job (as `GET /jobs/:id` shows it) runs with every vertex RUNNING.
pub fn all_running(job: &Value) -> bool {
    job["state"] == "RUNNING"
        && job["vertices"]
            .as_array()
            .is_some_and(|vs| !vs.is_empty() && vs.iter().all(|v| v["status"] == "RUNNING"))
}

/// The parallelism every vertex of a job (as `GET /jobs/:id` shows it) has, if they agree.
pub fn job_parallelism(job: &Value) -> Option<u64> {
    let ps: Vec<u64> = job["vertices"]
        .as_array()?
        .iter()
        .filter_map(|v| v["parallelism"].as_u64())
        .collect();
    let first = *ps.first()?;
    ps.iter().all(|&p| p == first).then_some(first)
}

/// Milliseconds since the epoch, as the REST API's timestamps count them.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Whether every vertex of the job (as `GET /jobs/:id` shows it) was deployed at or after `ms`
/// (epoch ms): the JobManager may list a lost TaskManager as gone a moment before it fails the
/// job over, so "RUNNING and the TaskManager gone" alone can be seen before the failover even
/// started.
pub fn deployed_since(j: &Value, ms: u64) -> bool {
    j["vertices"].as_array().is_some_and(|vs| {
        vs.iter()
            .all(|v| v["start-time"].as_i64().is_some_and(|t| t >= ms as i64))
    })
}

/// Sends a signal (`-9`, `-STOP`, `-CONT`, ...) to a process.
pub fn signal(sig: &str, pid: u32) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// The job id in `sluice run`'s output.
pub fn job_id_of(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("Job has been submitted with JobID "))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| panic!("no job id in: {stdout}"))
}

/// Whether a process is alive.
pub fn alive(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

impl StandaloneCluster {
    /// Stops every process of the cluster.
    fn stop(&self) {
        let _ = self.script("stop-cluster.sh", &[]);
        for kind in ["taskmanager", "jobmanager"] {
            for pid in self.pids(kind) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
}

impl Drop for StandaloneCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The clusters [`shared_cluster`] started, stopped when the test binary exits.
static SHARED: std::sync::Mutex<Vec<&'static StandaloneCluster>> =
    std::sync::Mutex::new(Vec::new());

extern "C" fn stop_shared_clusters() {
    let shared = std::mem::take(&mut *SHARED.lock().unwrap_or_else(|e| e.into_inner()));
    for cluster in shared {
        cluster.stop();
    }
}

/// A cluster the tests of one test binary share, started by `start` on first use. A static is
/// never dropped, so its processes are stopped by an exit hook instead, whether the tests pass
/// or fail.
pub fn shared_cluster(
    cell: &'static std::sync::OnceLock<StandaloneCluster>,
    start: impl FnOnce() -> StandaloneCluster,
) -> &'static StandaloneCluster {
    let mut started = false;
    let cluster = cell.get_or_init(|| {
        started = true;
        start()
    });
    if started {
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if shared.is_empty() {
            // SAFETY: registers a plain function with no arguments, as atexit(3) expects.
            unsafe { libc::atexit(stop_shared_clusters) };
        }
        shared.push(cluster);
    }
    cluster
}

// Word counts: the reference the wordcount example is checked against.

/// Counts words the plain way: runs of letters, digits and '_' , lower-cased. Deliberately not
/// the engine's tokenizer code.
pub fn reference_counts(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() || c == '_' {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            *counts.entry(std::mem::take(&mut word)).or_insert(0) += 1;
        }
    }
    counts
}

/// The final count of each word in a streaming wordcount's output, which holds every updated
/// count: the largest per word (counts only grow). Each word's updates come from one subtask.
pub fn read_final_counts(path: &Path) -> BTreeMap<String, u64> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for f in output_files(path) {
        for line in std::fs::read_to_string(&f).expect("output file").lines() {
            let (w, c) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad output line '{line}'"));
            let c = c
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("bad count in '{line}'"));
            let best = counts.entry(w.to_string()).or_default();
            *best = (*best).max(c);
        }
    }
    counts
}

fn output_files(path: &Path) -> Vec<PathBuf> {
    if path.is_dir() {
        std::fs::read_dir(path)
            .expect("output dir")
            .map(|e| e.expect("entry").path())
            .collect()
    } else {
        vec![path.to_path_buf()]
    }
}

pub fn read_counts(path: &Path) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for f in output_files(path) {
        for line in std::fs::read_to_string(&f).expect("output file").lines() {
            let (w, c) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad output line '{line}'"));
            let prev = counts.insert(
                w.to_string(),
                c.parse::<u64>()
                    .unwrap_or_else(|_| panic!("bad count in '{line}'")),
            );
            assert!(prev.is_none(), "word '{w}' written twice");
        }
    }
    counts
}

/// The last sum of each key that the test job's `sum` program wrote into `dir` as `key sum`
/// lines (its running sums only grow).
pub fn final_sums(dir: &Path) -> BTreeMap<u64, u64> {
    let mut sums = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("output dir").flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            let mut parts = line.split(' ');
            let (Some(k), Some(s)) = (parts.next(), parts.next()) else {
                continue;
            };
            let (k, s): (u64, u64) = (k.parse().unwrap(), s.parse().unwrap());
            let e = sums.entry(k).or_insert(0);
            *e = (*e).max(s);
        }
    }
    sums
}

/// A few MB of text from a fixed pseudo-random sequence.
pub fn make_text(bytes: usize) -> String {
    const WORDS: &[&str] = &[
        "Stream", "batch", "sluice", "river", "flow", "key", "Window", "state", "barrier", "slot",
        "task", "über", "naïve", "x_y", "42", "flink", "yarn", "zoo",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut text = String::with_capacity(bytes + 100);
    while text.len() < bytes {
        for i in 0..12 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            text.push_str(WORDS[(seed % WORDS.len() as u64) as usize]);
            text.push_str(if i % 5 == 4 { ", " } else { " " });
            if seed.is_multiple_of(97) {
                text.push_str(&format!("w{} ", seed % 5000));
            }
        }
        text.push_str("--end.\n");
    }
    text
}

/// The `sluice run` arguments of a `counting` job at parallelism `p` writing to `output`.
pub fn counting_args(p: u32, records: u64, keys: u64, output: &Path, rate: u64) -> Vec<String> {
    [
        "-p",
        &p.to_string(),
        "counting",
        "--records",
        &records.to_string(),
        "--keys",
        &keys.to_string(),
        "--output",
        &output.display().to_string(),
        "--rate",
        &rate.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// The seed of a replayable test run: the variable `var` (e.g. `SLUICE_CHAOS_SEED`), or one drawn
/// from the clock. The first call installs a panic hook that prints it with every failure,
/// whichever assertion fails.
pub fn run_seed(var: &'static str) -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        let seed = match std::env::var(var) {
            Ok(s) => s
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{var} must be a u64, not {s:?}")),
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1),
        };
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default_hook(info);
            eprintln!("seed {seed}: replay with {var}={seed}");
        }));
        seed
    })
}

/// xorshift64*: small, deterministic, good enough to draw a test's schedule from a seed.
pub struct Rng(u64);

impl Rng {
    /// One generator per test, so a test's schedule does not depend on which tests ran before.
    pub fn for_test(seed: u64, name: &str) -> Rng {
        let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
        for b in name.bytes() {
            s = (s ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
        Rng(s.max(1))
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..hi` (`lo` if the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo)
        }
    }

    /// A duration uniform in `lo..hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }
}
