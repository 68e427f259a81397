//! A real Prometheus server for the metric tests, started by `scripts/prometheus.sh`
//! (installed by `scripts/install-deps.sh`) to scrape given targets, and queried with PromQL.

use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::{free_port, repo_root};

/// A Prometheus server, killed on drop.
pub struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

/// Fails the test, saying how to fix it, when Prometheus is not installed.
pub fn assert_installed() {
    let status = Command::new(repo_root().join("scripts/prometheus.sh"))
        .arg("check")
        .status()
        .expect("run scripts/prometheus.sh");
    assert!(
        status.success(),
        "Prometheus is not installed: run scripts/install-deps.sh"
    );
}

impl Prometheus {
    /// Starts a server scraping `targets` (`host:port`, each serving `/metrics`).
    pub fn start(targets: &[String]) -> Prometheus {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let child = Command::new(repo_root().join("scripts/prometheus.sh"))
            .arg("start")
            .arg(dir.path())
            .arg(port.to_string())
            .args(targets)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start prometheus (scripts/install-deps.sh installs it)");
        Prometheus {
            child,
            port,
            _dir: dir,
        }
    }

    /// The result vector of an instant PromQL query, `None` while Prometheus does not answer.
    pub fn query(&self, http: &reqwest::blocking::Client, promql: &str) -> Option<Vec<Value>> {
        let body: Value = http
            .get(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .query(&[("query", promql)])
            .send()
            .ok()?
            .json()
            .ok()?;
        assert_eq!(body["status"], "success", "{promql}: {body}");
        body["data"]["result"].as_array().cloned()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
