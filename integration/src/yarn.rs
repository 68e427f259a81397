//! A real YARN for the tests: a MiniYARNCluster started by `scripts/yarn-minicluster.sh`, and a
//! client environment that runs `sluice` against it and reads YARN's REST API.
//!
//! `SLUICE_SKIP_YARN=1` skips the YARN tests; `SLUICE_YARN_CLUSTER_DIR=DIR` reuses (and leaves
//! running) a cluster started with `scripts/yarn-minicluster.sh start DIR`.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::{repo_root, sluice_bin};

/// Whether the YARN tests are to be skipped (`SLUICE_SKIP_YARN=1`); says so when they are.
pub fn skipped() -> bool {
    let skip = std::env::var("SLUICE_SKIP_YARN").as_deref() == Ok("1");
    if skip {
        println!("SKIPPED: SLUICE_SKIP_YARN=1, not starting a MiniYARNCluster");
    }
    skip
}

/// A running MiniYARNCluster (1 ResourceManager, 2 NodeManagers), stopped when dropped if this
/// process started it.
pub struct MiniYarn {
    /// Its directory, holding yarn-site.xml (the clients' HADOOP_CONF_DIR).
    pub dir: PathBuf,
    owned: bool,
    _tmp: Option<tempfile::TempDir>,
    /// The ResourceManager's web (REST) address.
    pub web: String,
}

impl Drop for MiniYarn {
    fn drop(&mut self) {
        if self.owned {
            let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
        }
    }
}

fn script() -> PathBuf {
    repo_root().join("scripts/yarn-minicluster.sh")
}

impl MiniYarn {
    /// Builds the launcher if needed and starts a cluster in a new directory named `prefix...`
    /// (or reuses `SLUICE_YARN_CLUSTER_DIR`).
    pub fn start(prefix: &str) -> MiniYarn {
        Self::start_with_env(prefix, &[])
    }

    /// [`MiniYarn::start`] with extra environment for the cluster's JVM, which its
    /// NodeManagers pass on to containers as YARN's whitelist allows (e.g. `HADOOP_CONF_DIR`,
    /// as on a real node). A reused cluster keeps the environment it was started with.
    pub fn start_with_env(prefix: &str, env: &[(&str, &str)]) -> MiniYarn {
        let built = Command::new(script())
            .arg("build")
            .status()
            .expect("build launcher");
        assert!(built.success(), "building the YARN launcher failed");
        let (dir, owned, tmp) = match std::env::var_os("SLUICE_YARN_CLUSTER_DIR") {
            Some(d) => (PathBuf::from(d), false, None),
            None => {
                let tmp = tempfile::Builder::new()
                    .prefix(prefix)
                    .tempdir_in("/var/tmp")
                    .expect("temp dir");
                (tmp.path().to_path_buf(), true, Some(tmp))
            }
        };
        let out = Command::new(script())
            .arg("start")
            .arg(&dir)
            .envs(env.iter().copied())
            .output()
            .expect("start mini cluster");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "mini cluster did not start:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let web = stdout
            .lines()
            .find(|l| l.starts_with("READY "))
            .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("web=")))
            .unwrap_or_else(|| panic!("no READY line with web= in {stdout:?}"))
            .to_string();
        MiniYarn {
            dir,
            owned,
            _tmp: tmp,
            web,
        }
    }
}

/// A test's client environment: HADOOP_CONF_DIR for the cluster, its own TMPDIR (so the
/// properties file and staging directories are the test's own) and USER (and
/// HADOOP_USER_NAME, the user YARN and HDFS see).
pub struct YarnClient<'a> {
    /// The cluster.
    pub cluster: &'a MiniYarn,
    /// The client's HADOOP_CONF_DIR (the cluster's directory unless given).
    pub conf_dir: PathBuf,
    /// The client's own TMPDIR and working directory.
    pub tmp: tempfile::TempDir,
    http: reqwest::blocking::Client,
}

impl<'a> YarnClient<'a> {
    /// A client environment of its own for `cluster`.
    pub fn new(cluster: &'a MiniYarn) -> Self {
        Self::with_conf_dir(cluster, cluster.dir.clone())
    }

    /// A client environment whose HADOOP_CONF_DIR is `conf_dir` (e.g. one that also names an
    /// HDFS).
    pub fn with_conf_dir(cluster: &'a MiniYarn, conf_dir: PathBuf) -> Self {
        YarnClient {
            cluster,
            conf_dir,
            tmp: tempfile::tempdir().expect("tmp"),
            http: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(10))
                // Below the JobManager's close of idle keep-alive connections (10 s).
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .expect("http"),
        }
    }

    pub fn sluice(&self, args: &[&str]) -> Output {
        self.run(&sluice_bin(), args)
    }

    /// Runs the `sluice` binary at `bin` (e.g. a copy the test deletes later) as [`Self::sluice`].
    pub fn run(&self, bin: &std::path::Path, args: &[&str]) -> Output {
        Command::new(bin)
            .args(args)
            .env("HADOOP_CONF_DIR", &self.conf_dir)
            .env("TMPDIR", self.tmp.path())
            .env("USER", "sluice-it")
            .env("HADOOP_USER_NAME", "sluice-it")
            .env_remove("SLUICE_CONF_DIR")
            .current_dir(self.tmp.path())
            .output()
            .expect("run sluice")
    }

    pub fn yarn(&self, path: &str) -> Value {
        self.http
            .get(format!("http://{}{path}", self.cluster.web))
            .send()
            .and_then(|r| r.json())
            .unwrap_or(Value::Null)
    }

    pub fn app(&self, id: &str) -> Value {
        self.yarn(&format!("/ws/v1/cluster/apps/{id}"))["app"].clone()
    }

    /// Ids of sluice applications YARN has not finished.
    pub fn live_sluice_apps(&self) -> Vec<String> {
        let apps = self.yarn("/ws/v1/cluster/apps?applicationTypes=sluice&states=NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING");
        let mut ids: Vec<String> = match &apps["apps"]["app"] {
            Value::Array(list) => list
                .iter()
                .filter_map(|a| a["id"].as_str().map(str::to_string))
                .collect(),
            Value::Object(_) => apps["apps"]["app"]["id"]
                .as_str()
                .map(str::to_string)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        ids.sort();
        ids
    }

    pub fn running_containers(&self, id: &str) -> i64 {
        self.app(id)["runningContainers"].as_i64().unwrap_or(-1)
    }

    pub fn sluice_rest(&self, address: &str, path: &str) -> Value {
        self.http
            .get(format!("http://{address}{path}"))
            .send()
            .and_then(|r| r.json())
            .unwrap_or(Value::Null)
    }

    /// A `PUT` of the JSON `body` to the sluice REST API at `address`: status and body.
    pub fn sluice_put(&self, address: &str, path: &str, body: &Value) -> (u16, String) {
        match self
            .http
            .put(format!("http://{address}{path}"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
        {
            Ok(r) => (r.status().as_u16(), r.text().unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        }
    }

    pub fn properties(&self) -> PathBuf {
        self.tmp.path().join(".yarn-properties-sluice-it")
    }
}

/// A process's stdout and stderr, for messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Processes whose working directory lies in a container of `app`, with their RSS in KiB and
/// command line.
pub fn container_processes(app: &str) -> Vec<(u32, u64, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cwd) = std::fs::read_link(e.path().join("cwd")) else {
            continue;
        };
        if !cwd.to_string_lossy().contains(app) {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        if !cmd.starts_with("./sluice") {
            continue;
        }
        let rss = std::fs::read_to_string(e.path().join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0);
        found.push((pid, rss, cmd));
    }
    found
}

/// The word after `prefix` on the first line that has it.
pub fn field_after<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.split_once(prefix).map(|(_, rest)| rest))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {prefix:?} in:\n{out}"))
}

/// Kills the application however the test ends, so no container outlives it.
pub struct KillOnDrop<'a> {
    /// Who kills it.
    pub client: &'a YarnClient<'a>,
    /// The application id.
    pub app: String,
}

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self
            .client
            .sluice(&["yarn-session", "-id", &self.app, "--kill"]);
    }
}
