//! The web UI in a real browser: headless Chromium, driven by `engine/src/web/smoke.mjs` over
//! the DevTools protocol, opens the page served by a real JobManager with real TaskManagers,
//! follows a running job (graph, growing numbers, chart, subtasks, checkpoints, TaskManagers,
//! the JobManager's log), triggers a savepoint and cancels the job with the page's buttons, and
//! saves a screenshot of each page. With `SLUICE_UI_SCREENSHOTS=<dir>` the screenshots are kept
//! there; otherwise they go to a temporary directory.

use std::process::Command;
use std::time::Duration;

use sluice_integration::{StandaloneCluster, repo_root, wait_for};

fn chromium() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("no Chromium: scripts/install-deps.sh installs Debian's chromium package")
}

#[test]
fn the_web_ui_follows_a_job_takes_a_savepoint_and_cancels_it_in_a_real_browser() {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let savepoints = scratch.path().join("savepoints");
    let checkpoints = scratch.path().join("checkpoints");
    let cluster = StandaloneCluster::start(
        2,
        2,
        &format!(
            "execution.checkpointing.interval: 2 s\n\
             execution.checkpointing.dir: {}\n\
             execution.checkpointing.savepoint-dir: {}",
            checkpoints.display(),
            savepoints.display()
        ),
    );
    let job = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "2000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        (cluster.get(&format!("/jobs/{job}")).ok()?["state"] == "RUNNING").then_some(())
    });

    let kept = std::env::var_os("SLUICE_UI_SCREENSHOTS").map(std::path::PathBuf::from);
    let shots = kept.unwrap_or_else(|| scratch.path().join("screenshots"));
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = Command::new("node")
        .arg(repo_root().join("engine/src/web/smoke.mjs"))
        .arg(format!("http://{}", cluster.rest()))
        .arg(&job)
        .arg(&shots)
        .arg(chromium())
        .output()
        .expect("run node (scripts/install-deps.sh installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the walk failed:\n{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("the walk's report");
    eprintln!("web UI walk: {report}");

    // What the buttons did, seen through the API and on disk.
    assert_eq!(cluster.job_state(&job), "CANCELED");
    let savepoint = report["savepoint"].as_str().expect("savepoint path");
    let path = savepoint.strip_prefix("file://").unwrap_or(savepoint);
    assert!(
        std::path::Path::new(path).join("_metadata").is_file(),
        "the savepoint {savepoint} the page reported has its _metadata"
    );
    let stats = cluster
        .get(&format!("/jobs/{job}/checkpoints"))
        .expect("checkpoints");
    assert_eq!(stats["latest"]["savepoint"]["external_path"], savepoint);

    // The log the page showed is the JobManager's file; files beside it are not served.
    let (status, log) = cluster.request("GET", "/jobmanager/log", "");
    assert_eq!(status, 200, "{log}");
    assert!(log.contains("job submitted"), "the JobManager's log: {log}");
    let listed = cluster.get("/jobmanager/logs").expect("log list");
    let names: Vec<&str> = listed["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .map(|l| l["name"].as_str().expect("name"))
        .collect();
    assert!(
        names.iter().all(|n| n.contains("jobmanager")),
        "only the JobManager's own log files are listed: {names:?}"
    );
    for entry in std::fs::read_dir(cluster.log_dir()).expect("log dir") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        let (status, body) = cluster.request("GET", &format!("/jobmanager/logs/{name}"), "");
        if names.contains(&name.as_str()) {
            assert_eq!(status, 200, "{name}: {body}");
        } else {
            assert_eq!(
                status, 404,
                "{name} lies beside the log but is not served: {body}"
            );
        }
    }
    for shot in report["screenshots"].as_array().expect("screenshots") {
        let file = shot.as_str().expect("path");
        let bytes = std::fs::read(file).expect("screenshot written");
        assert!(bytes.starts_with(b"\x89PNG"), "{file} is a PNG");
    }
}
