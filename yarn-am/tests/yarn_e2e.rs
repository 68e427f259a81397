//! End to end against a real YARN: a MiniYARNCluster (integration/yarn-launcher, started by
//! scripts/yarn-minicluster.sh) runs the `demo_am` example as an ApplicationMaster submitted
//! over REST; the AM speaks Hadoop RPC to the ResourceManager and a NodeManager.
//!
//! Needs Java 17 and Maven (the launcher is built on first use). `SLUICE_SKIP_YARN=1` skips
//! it. `SLUICE_YARN_CLUSTER_DIR=DIR` reuses (and leaves running) a cluster started with
//! `scripts/yarn-minicluster.sh start DIR`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use yarn_am::{
    AM_PROTOCOL, AppState, AppSubmission, FinalStatus, LaunchContext, LocalResource, Resource,
    RestClient, RestError, RpcClient, RpcError, Token, YarnSite,
};

/// Everything the test does after the launcher is built must end within this bound
/// (typically 10-25 s, mostly the cluster's start).
const TEST_BUDGET: Duration = Duration::from_secs(180);

struct Cluster {
    dir: PathBuf,
    owned: bool,
    _tmp: Option<tempfile::TempDir>,
    scheduler: String,
    web: String,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.owned {
            let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn script() -> PathBuf {
    repo_root().join("scripts/yarn-minicluster.sh")
}

fn start_cluster() -> Cluster {
    let (dir, owned, tmp) = match std::env::var_os("SLUICE_YARN_CLUSTER_DIR") {
        Some(d) => (PathBuf::from(d), false, None),
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("sluice-yarn-")
                .tempdir_in("/var/tmp")
                .expect("a temp dir under /var/tmp");
            (tmp.path().to_path_buf(), true, Some(tmp))
        }
    };
    let out = Command::new(script())
        .arg("start")
        .arg(&dir)
        .output()
        .expect("run scripts/yarn-minicluster.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mini cluster did not start:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ready = stdout
        .lines()
        .find(|l| l.starts_with("READY "))
        .unwrap_or_else(|| panic!("no READY line in {stdout:?}"));
    let field = |name: &str| {
        ready
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name}= in {ready:?}"))
            .to_string()
    };
    Cluster {
        scheduler: field("scheduler"),
        web: field("web"),
        dir,
        owned,
        _tmp: tmp,
    }
}

/// The demo AM binary. `cargo test -p yarn-am` builds examples, but `cargo test --test
/// yarn_e2e` alone does not, and a stale binary would test old code: when the binary is
/// missing or older than the crate's sources it is (re)built here.
fn demo_am() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test executable path");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("target/<profile>");
            let path = profile_dir.join("examples/demo_am");
            let built_at = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            let newest_source = newest_mtime(&[manifest.join("src"), manifest.join("examples")]);
            if built_at.is_none_or(|b| newest_source.is_some_and(|s| s > b)) {
                // Note: the nested build may recompile a few dependencies, because cargo
                // test's environment differs from a plain build's.
                let status = Command::new(env!("CARGO"))
                    .args(["build", "-p", "yarn-am", "--example", "demo_am"])
                    .current_dir(repo_root())
                    .status()
                    .expect("run cargo build");
                assert!(status.success(), "building demo_am failed");
            }
            assert!(path.exists(), "demo_am not found at {}", path.display());
            path
        })
        .clone()
}

fn newest_mtime(dirs: &[PathBuf]) -> Option<std::time::SystemTime> {
    let mut newest = None;
    let mut stack = dirs.to_vec();
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                newest = newest.max(Some(t));
            }
        }
    }
    newest
}

fn submission(
    id: yarn_am::ApplicationId,
    mode: &str,
    cluster: &Cluster,
    container_cmd: &str,
) -> AppSubmission {
    let binary = LocalResource::local_file(&demo_am()).expect("stat demo_am");
    let mut launch = LaunchContext::default();
    launch.local_resources.insert("demo_am".into(), binary);
    launch
        .environment
        .insert("YARN_AM_SCHEDULER".into(), cluster.scheduler.clone());
    launch
        .environment
        .insert("DEMO_CONTAINER_COMMAND".into(), container_cmd.into());
    launch
        .environment
        .insert("RUST_LOG".into(), "yarn_am=debug,info".into());
    // Lets a developer capture the AM's raw RPC frames (see yarn_am::CAPTURE_DIR_ENV).
    if let Ok(dir) = std::env::var(yarn_am::CAPTURE_DIR_ENV) {
        launch
            .environment
            .insert(yarn_am::CAPTURE_DIR_ENV.into(), format!("{dir}/{mode}"));
    }
    launch.commands = vec![
        format!("./demo_am {mode}"),
        "1><LOG_DIR>/stdout".into(),
        "2><LOG_DIR>/stderr".into(),
    ];
    AppSubmission {
        id,
        name: format!("yarn-am e2e {mode}"),
        application_type: "yarn-am-test".into(),
        queue: "default".into(),
        max_attempts: 1,
        keep_containers_across_attempts: false,
        am_resource: Resource::new(128, 1),
        am_launch: launch,
        tags: vec![],
    }
}

/// Refused submissions, wrong tokens and unreachable servers give typed, clear errors.
async fn errors_are_clear(rest: &RestClient, cluster: &Cluster) {
    // Memory over the maximum: refused outright with YARN's message.
    let app = rest.new_application().await.expect("new application");
    let mut too_big = submission(app.id, "run", cluster, "true");
    too_big.am_resource = Resource::new(app.maximum_capability.memory_mb * 4, 1);
    match rest.submit(&too_big).await {
        Err(e @ RestError::Refused { .. }) => {
            assert!(!e.is_retryable());
            assert!(e.to_string().contains("memory"), "{e}");
            println!("over-max submission: {e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Unknown queue: accepted by REST, then failed by the scheduler; submit_checked reports it.
    let app = rest.new_application().await.expect("new application");
    let mut bad_queue = submission(app.id, "run", cluster, "true");
    bad_queue.queue = "no-such-queue".into();
    match rest
        .submit_checked(&bad_queue, Duration::from_secs(30))
        .await
    {
        Err(e @ RestError::Refused { .. }) => {
            assert!(e.to_string().contains("no-such-queue"), "{e}");
            println!("unknown queue: {e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A forged AMRM token: the scheduler rejects the SASL exchange.
    let forged = Token {
        identifier: vec![1, 2, 3],
        password: vec![4; 20],
        kind: yarn_am::AMRM_TOKEN_KIND.into(),
        service: cluster.scheduler.clone(),
    };
    let mut rpc = RpcClient::new(cluster.scheduler.clone(), AM_PROTOCOL, forged)
        .with_timeout(Duration::from_secs(20));
    // Any request will do: authentication fails before it is read.
    let err = rpc
        .call::<(), ()>("allocate", &())
        .await
        .expect_err("a forged token must not authenticate");
    assert!(matches!(err, RpcError::Auth { .. }), "{err:?}");
    assert!(!err.is_retryable());
    println!("forged token: {err}");
    // Nothing listens on port 1.
    let dead = RestClient::new("127.0.0.1:1").expect("client");
    let err = dead.cluster_metrics().await.expect_err("port 1 is closed");
    assert!(err.is_retryable(), "{err:?}");
}

/// The AM container's logs of `app`, for failure messages.
fn am_logs(cluster: &Cluster, app: &str) -> String {
    let mut out = String::new();
    let mut stack = vec![cluster.dir.join("target")];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().contains(app)
                && matches!(
                    p.file_name().and_then(|n| n.to_str()),
                    Some("stdout" | "stderr")
                )
            {
                out.push_str(&format!("--- {}\n", p.display()));
                out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// Processes whose command line contains `sleep <secs>` (the marker of our containers).
fn sleepers(secs: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let words: Vec<&str> = cmd.split_whitespace().collect();
            if words
                .windows(2)
                .any(|w| w[0].ends_with("sleep") && w[1] == secs)
            {
                found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// VmRSS of the first process whose command line starts with `cmd`.
fn process_rss_kib(cmd: &str) -> Option<u64> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(line) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&line)
            .replace('\0', " ")
            .starts_with(cmd)
        {
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            return status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
        }
    }
    None
}

async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_am_runs_a_container_and_kill_leaves_nothing() {
    if std::env::var("SLUICE_SKIP_YARN").as_deref() == Ok("1") {
        println!("SKIPPED: SLUICE_SKIP_YARN=1, not starting a MiniYARNCluster");
        return;
    }
    // The first build downloads the launcher's dependencies from Maven Central; it is not
    // part of the time budget.
    let built = tokio::task::spawn_blocking(|| Command::new(script()).arg("build").status())
        .await
        .expect("join build")
        .expect("run scripts/yarn-minicluster.sh build");
    assert!(
        built.success(),
        "building the MiniYARNCluster launcher failed"
    );
    tokio::task::spawn_blocking(demo_am)
        .await
        .expect("build demo_am");
    tokio::time::timeout(TEST_BUDGET, scenario())
        .await
        .expect("the YARN end-to-end test exceeded its time budget");
}

async fn scenario() {
    let t0 = Instant::now();
    let cluster = tokio::task::spawn_blocking(start_cluster)
        .await
        .expect("start cluster");
    println!(
        "mini cluster ready after {:?}: web={} scheduler={}",
        t0.elapsed(),
        cluster.web,
        cluster.scheduler
    );
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    let rest = RestClient::new(&cluster.web)
        .expect("client")
        .with_user(user);

    let metrics = rest.cluster_metrics().await.expect("metrics");
    assert_eq!(metrics.active_nodes, 2, "{metrics:?}");
    assert_eq!(rest.nodes().await.expect("nodes").len(), 2);

    // 0. The written yarn-site.xml names the same addresses as the ready line.
    let site = YarnSite::load(&cluster.dir.join("yarn-site.xml")).expect("yarn-site.xml");
    assert_eq!(site.scheduler_address(), cluster.scheduler);
    assert_eq!(site.webapp_address(), cluster.web);
    errors_are_clear(&rest, &cluster).await;

    // 1. An AM that runs a container, stops it and succeeds.
    let t1 = Instant::now();
    let app = rest.new_application().await.expect("new application");
    assert!(app.maximum_capability.memory_mb >= 128, "{app:?}");
    rest.submit(&submission(app.id, "run", &cluster, "sleep 30"))
        .await
        .expect("submit");
    let id = app.id.to_string();
    let report = wait_for(
        "the run application to end",
        Duration::from_secs(120),
        || async {
            let r = rest.application(&id).await.expect("status");
            r.state.is_terminal().then_some(r)
        },
    )
    .await;
    assert!(
        report.state == AppState::Finished && report.final_status == FinalStatus::Succeeded,
        "application ended {:?}/{:?}: {}\n{}",
        report.state,
        report.final_status,
        report.diagnostics,
        am_logs(&cluster, &id)
    );
    let logs = am_logs(&cluster, &id);
    assert!(
        logs.contains(&format!(
            "attempt appattempt_{}_{:04}_000001",
            app.id.cluster_timestamp, app.id.id
        )) && logs.contains("is running")
            && logs.contains("completed"),
        "AM log lacks its steps:\n{logs}"
    );
    let attempts = rest.attempts(&id).await.expect("attempts");
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    println!("run application SUCCEEDED in {:?}", t1.elapsed());

    // 2. An AM that holds a running container; killing the application must end both.
    let marker = "313";
    let app = rest.new_application().await.expect("new application");
    let id = app.id.to_string();
    rest.submit(&submission(
        app.id,
        "hold",
        &cluster,
        &format!("sleep {marker}"),
    ))
    .await
    .expect("submit");
    let submitted = Instant::now();
    wait_for(
        "the hold application to run",
        Duration::from_secs(60),
        || async {
            let r = rest.application(&id).await.expect("status");
            assert!(
                !r.state.is_terminal(),
                "hold application ended early: {r:?}\n{}",
                am_logs(&cluster, &id)
            );
            (r.state == AppState::Running).then_some(())
        },
    )
    .await;
    println!("submission to RUNNING: {:?}", submitted.elapsed());
    wait_for(
        "the held container's process",
        Duration::from_secs(90),
        || async {
            let r = rest.application(&id).await.expect("status");
            assert!(
                !r.state.is_terminal(),
                "hold application ended early: {r:?}\n{}",
                am_logs(&cluster, &id)
            );
            (!sleepers(marker).is_empty()).then_some(())
        },
    )
    .await;
    if let Some(rss) = process_rss_kib("./demo_am hold") {
        println!("demo AM resident memory: {rss} KiB");
    }
    let listed = rest
        .applications(Some("yarn-am-test"), &["RUNNING"])
        .await
        .expect("list");
    assert!(listed.iter().any(|a| a.id == id), "{listed:?}");
    let killed = rest.kill(&id, Duration::from_secs(60)).await.expect("kill");
    assert_eq!(killed.state, AppState::Killed, "{killed:?}");
    wait_for(
        "no container process left",
        Duration::from_secs(30),
        || async { sleepers(marker).is_empty().then_some(()) },
    )
    .await;
    wait_for(
        "no container allocated",
        Duration::from_secs(30),
        || async {
            let m = rest.cluster_metrics().await.expect("metrics");
            (m.containers_allocated == 0 && m.apps_running == 0).then_some(())
        },
    )
    .await;
    println!("kill left nothing running");

    // 3. AM failover: attempt 1 starts a container and crashes; attempt 2 gets the container
    //    back in its registration and finishes the job with it.
    let t3 = Instant::now();
    let marker = "317";
    let app = rest.new_application().await.expect("new application");
    let id = app.id.to_string();
    let mut failover = submission(app.id, "failover", &cluster, &format!("sleep {marker}"));
    failover.max_attempts = 2;
    failover.keep_containers_across_attempts = true;
    rest.submit(&failover).await.expect("submit");
    let report = wait_for(
        "the failover application to end",
        Duration::from_secs(120),
        || async {
            let r = rest.application(&id).await.expect("status");
            r.state.is_terminal().then_some(r)
        },
    )
    .await;
    let logs = am_logs(&cluster, &id);
    assert!(
        report.state == AppState::Finished && report.final_status == FinalStatus::Succeeded,
        "failover application ended {:?}/{:?}: {}\n{logs}",
        report.state,
        report.final_status,
        report.diagnostics,
    );
    assert!(
        logs.contains("crashing on purpose")
            && logs.contains("recovered 1 container(s)")
            && logs.contains("still running after failover"),
        "AM logs lack the failover steps:\n{logs}"
    );
    let attempts = rest.attempts(&id).await.expect("attempts");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    wait_for(
        "the recovered container's process to end",
        Duration::from_secs(30),
        || async { sleepers(marker).is_empty().then_some(()) },
    )
    .await;
    println!(
        "AM failover with a kept container SUCCEEDED in {:?}",
        t3.elapsed()
    );
    println!("whole test took {:?}", t0.elapsed());
}
