//! Losing a TaskManager process: detection, the failure cause, and failover to a replacement.

use std::process::Command;
use std::time::Duration;

use sluice_integration::{StandaloneCluster, wait_for};

fn all_tasks_running(cluster: &StandaloneCluster, id: &str) -> bool {
    let j = cluster.job(id);
    j["state"] == "RUNNING"
        && j["vertices"]
            .as_array()
            .is_some_and(|vs| vs.iter().all(|v| v["status"] == "RUNNING"))
}

fn kill9(pid: u32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}

#[test]
fn killing_a_taskmanager_fails_the_job_promptly_naming_the_lost_taskmanager() {
    let cluster = StandaloneCluster::start(2, 1, "");
    let id = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "5000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        all_tasks_running(&cluster, &id).then_some(())
    });
    let before = cluster.taskmanager_ids();
    let victim = cluster.pids("taskmanager")[0];
    kill9(victim);
    // The broken control connection is noticed at once, not after heartbeat.timeout (50 s).
    wait_for(Duration::from_secs(15), "the job to fail", || {
        (cluster.job(&id)["state"] == "FAILED").then_some(())
    });
    let after = cluster.taskmanager_ids();
    assert_eq!(after.len(), 1);
    let lost: Vec<&String> = before.iter().filter(|t| !after.contains(t)).collect();
    assert_eq!(lost.len(), 1);
    let exceptions = cluster
        .get(&format!("/jobs/{id}/exceptions"))
        .expect("exceptions");
    let root = exceptions["root-exception"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        root.contains(lost[0].as_str()) && root.contains("was lost"),
        "{root}"
    );
}

#[test]
fn with_a_restart_strategy_the_job_comes_back_on_a_replacement_taskmanager() {
    let cluster = StandaloneCluster::start(
        2,
        1,
        "restart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 3\nrestart-strategy.fixed-delay.delay: 200 ms\nslot.request.timeout: 1 min",
    );
    let id = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "5000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        all_tasks_running(&cluster, &id).then_some(())
    });
    kill9(cluster.pids("taskmanager")[0]);
    wait_for(Duration::from_secs(15), "the job to restart", || {
        let state = cluster.job(&id)["state"].as_str().map(String::from)?;
        matches!(state.as_str(), "RESTARTING" | "RUNNING").then_some(())
    });
    // One TaskManager cannot hold parallelism 2: the job waits for slots, it never runs smaller.
    // The restarted job asks for both slots at once and the ResourceManager grants a request
    // only in full, so once the job is back to RUNNING with tasks SCHEDULED its request has
    // been weighed and refused.
    wait_for(
        Duration::from_secs(15),
        "the restarted job to wait for slots",
        || {
            let job = cluster.job(&id);
            let restarted = job["timestamps"]["RESTARTING"].as_u64().unwrap_or(0) > 0;
            let scheduled = job["status-counts"]["SCHEDULED"].as_u64().unwrap_or(0);
            (restarted && job["state"] == "RUNNING" && scheduled > 0).then_some(())
        },
    );
    assert!(!all_tasks_running(&cluster, &id), "ran with half its slots");
    assert_eq!(
        cluster.get("/overview").expect("overview")["slots-available"],
        1,
        "the remaining TaskManager's slot was taken for half the job"
    );
    let out = cluster.script("taskmanager.sh", &["start"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(
        Duration::from_secs(30),
        "the job to run again on the replacement",
        || all_tasks_running(&cluster, &id).then_some(()),
    );
    let exceptions = cluster
        .get(&format!("/jobs/{id}/exceptions"))
        .expect("exceptions");
    let entries = exceptions["exceptionHistory"]["entries"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert!(entries >= 1, "{exceptions}");
    assert_eq!(
        cluster.get("/overview").expect("overview")["taskmanagers"],
        2
    );
}

#[test]
fn without_ha_a_lost_jobmanager_takes_its_jobs_down_and_taskmanagers_register_with_its_successor() {
    let cluster = StandaloneCluster::start(2, 1, "");
    let id = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "2000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        all_tasks_running(&cluster, &id).then_some(())
    });
    kill9(cluster.pids("jobmanager")[0]);
    // The TaskManagers notice the broken connection and cancel the orphaned subtasks.
    wait_for(
        Duration::from_secs(15),
        "the TaskManagers to cancel their subtasks",
        || {
            let logs = cluster.logs("taskmanager");
            let cancelled = logs
                .iter()
                .filter(|l| {
                    l.contains(&format!("execution={id}")) && l.contains("state=\"CANCELED\"")
                })
                .count();
            (cancelled == 2).then_some(())
        },
    );
    for pid in cluster.pids("taskmanager") {
        assert!(
            sluice_integration::alive(pid),
            "TaskManager {pid} must survive the JobManager"
        );
    }
    // A new JobManager (no HA: it knows nothing of the old jobs) gets both TaskManagers back
    // with all their slots free.
    let out = cluster.script("jobmanager.sh", &["start"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(
        Duration::from_secs(30),
        "the TaskManagers to register again",
        || {
            let o = cluster.get("/overview").ok()?;
            (o["taskmanagers"] == 2 && o["slots-available"] == 2).then_some(())
        },
    );
    assert!(
        cluster
            .get(&format!("/jobs/{id}"))
            .map(|j| j["state"].is_null())
            .unwrap_or(true),
        "the old job is gone without HA"
    );
}

#[test]
fn failover_to_a_spare_taskmanager_reports_the_time_from_kill_to_running() {
    // Three TaskManagers of one slot for a job of parallelism 2: one is a spare.
    let cluster = StandaloneCluster::start(
        3,
        1,
        "restart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 3\nrestart-strategy.fixed-delay.delay: 0 ms",
    );
    let id = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "5000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        all_tasks_running(&cluster, &id).then_some(())
    });
    // Kill a TaskManager that runs part of the job (the spare has all its slots free).
    let busy: Vec<String> = cluster.get("/taskmanagers").expect("taskmanagers")["taskmanagers"]
        .as_array()
        .expect("list")
        .iter()
        .filter(|t| t["freeSlots"] == 0)
        .filter_map(|t| t["id"].as_str().map(String::from))
        .collect();
    assert_eq!(busy.len(), 2);
    let victim = cluster
        .pids("taskmanager")
        .into_iter()
        .find(|pid| cluster.logs_of_pid_mention(*pid, &busy[0]))
        .expect("the busy TaskManager's pid");
    let kill_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let killed = std::time::Instant::now();
    kill9(victim);
    // Every vertex deployed again after the kill: the lost TaskManager can leave the REST list a
    // moment before the job fails over, when the old tasks still show RUNNING.
    wait_for(Duration::from_secs(30), "the job to run again", || {
        let restarted = cluster.job(&id)["vertices"].as_array().is_some_and(|vs| {
            vs.iter().all(|v| {
                v["status"] == "RUNNING" && v["start-time"].as_i64().is_some_and(|t| t >= kill_ms)
            })
        });
        (restarted && !cluster.taskmanager_ids().contains(&busy[0])).then_some(())
    });
    eprintln!(
        "failover: kill -9 of a TaskManager to all tasks RUNNING on the spare: {} ms",
        killed.elapsed().as_millis()
    );
}

#[test]
fn a_frozen_taskmanager_is_given_up_after_its_unanswered_heartbeats_not_the_full_timeout() {
    // heartbeat.timeout alone would wait 50 s; two unanswered heartbeats of 500 ms (plus one
    // interval of slack) give up after 1.5 s.
    let cluster = StandaloneCluster::start(
        2,
        1,
        "heartbeat.interval: 500 ms\nheartbeat.timeout: 50 s\nheartbeat.rpc-failure-threshold: 2",
    );
    let id = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "2000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        all_tasks_running(&cluster, &id).then_some(())
    });
    let victim = cluster.pids("taskmanager")[0];
    let _ = Command::new("kill")
        .args(["-STOP", &victim.to_string()])
        .status();
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for(Duration::from_secs(20), "the job to fail", || {
            (cluster.job(&id)["state"] == "FAILED").then_some(())
        })
    }));
    let _ = Command::new("kill")
        .args(["-CONT", &victim.to_string()])
        .status();
    assert!(
        failed.is_ok(),
        "the frozen TaskManager was not given up within 20 s"
    );
    let exceptions = cluster
        .get(&format!("/jobs/{id}/exceptions"))
        .expect("exceptions");
    let root = exceptions["root-exception"].as_str().unwrap_or_default();
    assert!(root.contains("no heartbeat for 1500 ms"), "{root}");
}

#[test]
fn a_savepoint_cut_short_by_a_killed_jobmanager_is_removed_when_a_jobmanager_starts_again() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let savepoints = scratch.path().join("savepoints");
    let cluster = StandaloneCluster::start(
        1,
        2,
        &format!(
            "execution.checkpointing.savepoint-dir: {}",
            savepoints.display()
        ),
    );
    // Another program's directory in the same place, and one of a name sluice would use but
    // without its marker: neither is sluice's to remove.
    std::fs::create_dir_all(savepoints.join("backups")).expect("dir");
    std::fs::create_dir_all(savepoints.join("savepoint-000000-000000000000")).expect("dir");
    let id = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "2000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        all_tasks_running(&cluster, &id).then_some(())
    });
    // Frozen TaskManagers never answer the barrier, so the savepoint stays in progress.
    let taskmanagers = cluster.pids("taskmanager");
    for &pid in &taskmanagers {
        sluice_integration::signal("-STOP", pid);
    }
    let (status, body) = cluster.request(
        "POST",
        &format!("/jobs/{id}/savepoints"),
        r#"{"cancel-job": false}"#,
    );
    assert_eq!(status, 202, "{body}");
    let partial = wait_for(
        Duration::from_secs(15),
        "the savepoint's directory with its in-progress marker",
        || {
            std::fs::read_dir(&savepoints)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.join("_sluice_in_progress").exists())
        },
    );
    assert!(!partial.join("_metadata").exists());
    kill9(cluster.pids("jobmanager")[0]);
    for &pid in &taskmanagers {
        sluice_integration::signal("-CONT", pid);
    }
    assert!(
        partial.exists(),
        "nothing removes it while no JobManager runs"
    );
    let out = cluster.script("jobmanager.sh", &["start"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while partial.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !partial.exists(),
        "the new JobManager did not remove {} (marker: {:?}); its log:\n{}",
        partial.display(),
        std::fs::read_to_string(partial.join("_sluice_in_progress")),
        cluster.logs("jobmanager").join("\n")
    );
    assert!(savepoints.join("backups").exists());
    assert!(savepoints.join("savepoint-000000-000000000000").exists());
}

#[test]
fn a_taskmanager_that_no_jobmanager_takes_exits_after_its_registration_timeout() {
    // At start: nothing listens at the JobManager's address.
    let dead = format!("127.0.0.1:{}", sluice_integration::free_port());
    let started = std::time::Instant::now();
    let out = Command::new(sluice_integration::sluice_bin())
        .args(["-D", "taskmanager.registration.timeout=2 s"])
        .args(["taskmanager", "--jobmanager", &dead])
        .env("SLUICE_CLUSTER_SECRET", "a secret that no cluster has")
        .output()
        .expect("run the TaskManager");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("not registered at a JobManager for 2 s (taskmanager.registration.timeout)"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30), "it gave up");

    // Later: its JobManager is lost for good. The clock starts again at the loss.
    let cluster = StandaloneCluster::start(1, 1, "taskmanager.registration.timeout: 3 s\n");
    let tm = cluster.pids("taskmanager")[0];
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        sluice_integration::alive(tm),
        "a registered TaskManager stays past the timeout"
    );
    kill9(cluster.pids("jobmanager")[0]);
    wait_for(
        Duration::from_secs(30),
        "the orphaned TaskManager to exit",
        || (!sluice_integration::alive(tm)).then_some(()),
    );
}
