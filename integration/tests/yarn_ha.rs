//! ApplicationMaster failover on a real YARN with a real ZooKeeper: a detached session with
//! ZooKeeper HA runs `counting` under 1 s checkpoints; `kill -9` of the AM process makes YARN
//! start attempt 2, whose JobManager becomes the leader, recovers the job from the HA job graph
//! store and restores its latest checkpoint on attempt 1's TaskManager containers, which YARN
//! kept and which found the new leader through ZooKeeper; the job finishes
//! and `check-counting` finds every record exactly once. The same for a one-job application
//! (`run -t yarn-application`), which then ends FINISHED/SUCCEEDED.
//!
//! Needs Java 17 and Maven (the MiniYARNCluster launcher is built on first use) and
//! ZooKeeper's jars. `SLUICE_SKIP_YARN=1` skips it; `SLUICE_YARN_CLUSTER_DIR=DIR` reuses (and
//! leaves running) a cluster started with `scripts/yarn-minicluster.sh start DIR`. Prints
//! `MEASURED AM kill -9 -> ...` lines (session and one-job application).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_integration::yarn::{
    self, KillOnDrop, MiniYarn, YarnClient, container_processes, field_after, text,
};
use sluice_integration::{all_running, wait_for};
use zk_ha::testkit::ZkServer;

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn killing_the_am_with_zookeeper_ha_resumes_the_job_in_attempt_2_exactly_once() {
    if yarn::skipped() {
        return;
    }
    let zk = ZkServer::start();
    let cluster = MiniYarn::start("sluice-yarn-ha-");
    let client = YarnClient::new(&cluster);
    // Containers run on this machine: a local directory is "shared" by every attempt.
    let scratch = tempfile::Builder::new()
        .prefix("sluice-yarn-ha-data-")
        .tempdir_in("/var/tmp")
        .expect("scratch");
    let settings = [
        "high-availability.type=zookeeper".to_string(),
        format!("high-availability.zookeeper.quorum={}", zk.connect_string()),
        format!(
            "high-availability.storageDir={}",
            path(&scratch.path().join("ha"))
        ),
        "execution.checkpointing.interval=1 s".into(),
        format!(
            "execution.checkpointing.dir={}",
            path(&scratch.path().join("checkpoints"))
        ),
        "restart-strategy.type=fixed-delay".into(),
        "restart-strategy.fixed-delay.attempts=100".into(),
        "restart-strategy.fixed-delay.delay=200 ms".into(),
        "yarn.application-attempts=2".into(),
    ];
    let mut args: Vec<&str> = Vec::new();
    for s in &settings {
        args.extend(["-D", s.as_str()]);
    }
    args.extend([
        "yarn-session",
        "-d",
        "-nm",
        "it-ha-session",
        "-s",
        "1",
        "-tm",
        "256",
        "-jm",
        "256",
    ]);
    let out = client.sluice(&args);
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    let app = field_after(&printed, "YARN application ").to_string();
    let _kill = KillOnDrop {
        client: &client,
        app: app.clone(),
    };
    let first = field_after(&printed, "JobManager Web Interface: http://").to_string();

    let output = scratch.path().join("out");
    let (records, keys) = (60_000u64, 5u64);
    let run = client.sluice(&[
        "run",
        "-t",
        "yarn-session",
        "-d",
        "-p",
        "2",
        "counting",
        "--records",
        &records.to_string(),
        "--keys",
        &keys.to_string(),
        "--rate",
        "5000",
        "--output",
        &path(&output),
    ]);
    assert!(run.status.success(), "{}", text(&run));
    let job = sluice_integration::job_id_of(&String::from_utf8_lossy(&run.stdout));
    wait_for(Duration::from_secs(60), "a completed checkpoint", || {
        let c = client.sluice_rest(&first, &format!("/jobs/{job}/checkpoints"));
        (c["counts"]["completed"].as_u64().unwrap_or(0) >= 1).then_some(())
    });
    let attempt1_tms: Vec<String> = container_processes(&app)
        .into_iter()
        .filter(|p| p.2.contains(" taskmanager"))
        .map(|p| p.2)
        .collect();
    assert_eq!(attempt1_tms.len(), 2, "{attempt1_tms:?}");
    // TaskManagers follow the leader through ZooKeeper under the application's id.
    assert!(
        attempt1_tms.iter().all(
            |c| c.contains(&format!("high-availability.cluster-id={app}"))
                && !c.contains("--jobmanager")
        ),
        "{attempt1_tms:?}"
    );

    let am = container_processes(&app)
        .into_iter()
        .find(|p| p.2.contains("yarn-appmaster"))
        .expect("the AM process");
    let killed = Instant::now();
    let status = Command::new("kill")
        .args(["-9", &am.0.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let second = wait_for(Duration::from_secs(60), "attempt 2 to register", || {
        let a = client.app(&app);
        let address = a["amRPCAddress"].as_str()?.to_string();
        (a["state"] == "RUNNING" && address != first && address.contains(':')).then_some(address)
    });
    let registered = killed.elapsed();
    let back = wait_for(
        Duration::from_secs(90),
        "the job RUNNING under attempt 2",
        || {
            let j = client.sluice_rest(&second, &format!("/jobs/{job}"));
            assert_ne!(j["state"], "FAILED", "the job failed: {j}");
            all_running(&j).then(|| killed.elapsed())
        },
    );
    println!(
        "MEASURED AM kill -9 -> attempt 2 registered with YARN {} ms -> job RUNNING under attempt 2 {} ms",
        registered.as_millis(),
        back.as_millis()
    );
    // YARN kept attempt 1's TaskManager containers (keep-containers with HA); they found the
    // new leader through ZooKeeper and run the job again.
    let kept = format!("container_{}_01_", app.trim_start_matches("application_"));
    let tms = client.sluice_rest(&second, "/taskmanagers");
    let ids: Vec<&str> = tms["taskmanagers"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t["id"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        ids.len() == 2 && ids.iter().all(|id| id.starts_with(&kept)),
        "{tms}"
    );
    // Clients find attempt 2 through YARN.
    let list = client.sluice(&["list", "-m", "yarn-session"]);
    assert!(
        list.status.success() && text(&list).contains(&job),
        "{}",
        text(&list)
    );
    // It resumed from a checkpoint rather than from the beginning.
    let checkpoints = client.sluice_rest(&second, &format!("/jobs/{job}/checkpoints"));
    assert!(
        !checkpoints["latest"]["restored"].is_null(),
        "no restored checkpoint: {checkpoints}"
    );

    wait_for(Duration::from_secs(120), "the job to finish", || {
        let j = client.sluice_rest(&second, &format!("/jobs/{job}"));
        assert_ne!(j["state"], "FAILED", "the job failed: {j}");
        (j["state"] == "FINISHED").then_some(())
    });
    let check = client.sluice(&[
        "check-counting",
        "--records",
        &records.to_string(),
        "--keys",
        &keys.to_string(),
        &path(&output),
    ]);
    assert!(
        check.status.success(),
        "not exactly once:\n{}",
        text(&check)
    );

    let kill = client.sluice(&["yarn-session", "--kill"]);
    assert!(kill.status.success(), "{}", text(&kill));
    assert_eq!(client.app(&app)["state"], "KILLED");
    wait_for(
        Duration::from_secs(20),
        "the application's processes to end",
        || container_processes(&app).is_empty().then_some(()),
    );

    // One job, one application (`run -t yarn-application`) with HA: attempt 2 takes the job
    // over from the HA stores instead of submitting it again, and the application ends
    // FINISHED/SUCCEEDED with the job.
    let app_output = scratch.path().join("app-out");
    let mut args: Vec<&str> = Vec::new();
    for s in &settings {
        args.extend(["-D", s.as_str()]);
    }
    args.extend([
        "-D",
        "taskmanager.memory.process.size=256m",
        "-D",
        "jobmanager.memory.process.size=256m",
    ]);
    let (records_arg, keys_arg, out_arg) =
        (records.to_string(), keys.to_string(), path(&app_output));
    args.extend([
        "run",
        "-t",
        "yarn-application",
        "-d",
        "-p",
        "2",
        "counting",
        "--records",
        &records_arg,
        "--keys",
        &keys_arg,
        "--rate",
        "5000",
        "--output",
        &out_arg,
    ]);
    let run = client.sluice(&args);
    let printed = text(&run);
    assert!(run.status.success(), "{printed}");
    let one = field_after(&printed, "Submitted YARN application ").to_string();
    let _kill_one = KillOnDrop {
        client: &client,
        app: one.clone(),
    };
    // With HA the job's id derives from the application id: application_<ts>_<n>.
    let job2 = {
        let mut parts = one.split('_').skip(1);
        let ts: u64 = parts.next().and_then(|p| p.parse().ok()).expect("ts");
        let n: u64 = parts.next().and_then(|p| p.parse().ok()).expect("n");
        format!("{ts:016x}{n:016x}")
    };
    let am_address = |exclude: Option<&str>| {
        let a = client.app(&one);
        let address = a["amRPCAddress"].as_str()?.to_string();
        (a["state"] == "RUNNING" && address.contains(':') && Some(address.as_str()) != exclude)
            .then_some(address)
    };
    let first = wait_for(
        Duration::from_secs(60),
        "the one-job AM to register",
        || am_address(None),
    );
    wait_for(
        Duration::from_secs(60),
        "a completed checkpoint of the application's job",
        || {
            let c = client.sluice_rest(&first, &format!("/jobs/{job2}/checkpoints"));
            (c["counts"]["completed"].as_u64().unwrap_or(0) >= 1).then_some(())
        },
    );
    let am = container_processes(&one)
        .into_iter()
        .find(|p| p.2.contains("yarn-appmaster"))
        .expect("the one-job AM process");
    let killed = Instant::now();
    let status = Command::new("kill")
        .args(["-9", &am.0.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let second = wait_for(
        Duration::from_secs(60),
        "attempt 2 of the one-job application to register",
        || am_address(Some(&first)),
    );
    let app_back = wait_for(
        Duration::from_secs(90),
        "the application's job RUNNING under attempt 2",
        || {
            let j = client.sluice_rest(&second, &format!("/jobs/{job2}"));
            assert_ne!(j["state"], "FAILED", "the job failed: {j}");
            all_running(&j).then(|| killed.elapsed())
        },
    );
    println!(
        "MEASURED yarn-application: AM kill -9 -> job RUNNING under attempt 2 {} ms",
        app_back.as_millis()
    );
    let report = wait_for(
        Duration::from_secs(120),
        "the one-job application to end",
        || {
            let a = client.app(&one);
            (a["state"] == "FINISHED" || a["state"] == "FAILED" || a["state"] == "KILLED")
                .then_some(a)
        },
    );
    assert_eq!(
        (report["state"].as_str(), report["finalStatus"].as_str()),
        (Some("FINISHED"), Some("SUCCEEDED")),
        "{report}"
    );
    let check = client.sluice(&[
        "check-counting",
        "--records",
        &records_arg,
        "--keys",
        &keys_arg,
        &out_arg,
    ]);
    assert!(
        check.status.success(),
        "the one-job application was not exactly once:\n{}",
        text(&check)
    );
    wait_for(
        Duration::from_secs(20),
        "the one-job application's processes to end",
        || container_processes(&one).is_empty().then_some(()),
    );
}
