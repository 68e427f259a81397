//! The web UI in a real browser: headless Chromium renders the page served by the JobManager,
//! runs its script against the REST API, and the rendered page shows the cluster and its jobs.

use std::process::Command;
use std::time::Duration;

use sluice_integration::{StandaloneCluster, wait_for};

fn rendered_dom(url: &str, profile: &std::path::Path) -> String {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("no Chromium: scripts/install-deps.sh installs Debian's chromium package");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_web_ui_shows_taskmanagers_and_running_jobs_in_a_real_browser() {
    let cluster = StandaloneCluster::start(2, 1, "");
    let job = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "1000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        (cluster.get(&format!("/jobs/{job}")).ok()?["state"] == "RUNNING").then_some(())
    });
    let profile = tempfile::tempdir().expect("profile dir");
    let url = format!("http://{}/", cluster.rest());
    let dom = wait_for(
        Duration::from_secs(60),
        "the page to render the job",
        || {
            let dom = rendered_dom(&url, profile.path());
            dom.contains(&job).then_some(dom)
        },
    );
    assert!(dom.contains("StreamSum"), "the job's name is shown");
    assert!(dom.contains("RUNNING"), "the job's state is shown");
    let tms = cluster.get("/taskmanagers").expect("taskmanagers");
    for tm in tms["taskmanagers"].as_array().expect("list") {
        let id = tm["id"].as_str().expect("id");
        assert!(dom.contains(id), "TaskManager {id} is listed");
    }
}
