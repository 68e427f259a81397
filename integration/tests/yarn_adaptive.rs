//! The adaptive scheduler on a real YARN (a MiniYARNCluster of 2 NodeManagers, started by
//! scripts/yarn-minicluster.sh): in a session of 1-slot TaskManager containers, a checkpointed
//! `counting` job gets a container per subtask of its upper bound of parallelism; raising that
//! bound through REST makes the JobManager ask YARN for one more container and the job grows
//! onto it; a killed container shrinks the job to the slots left at once, and the replacement
//! YARN grants grows it back. The output is still exactly once. Prints the measured times
//! (`MEASURED ...`).
//!
//! `SLUICE_SKIP_YARN=1` skips it; `SLUICE_YARN_CLUSTER_DIR=DIR` reuses a running cluster.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_integration::yarn::{self, KillOnDrop, MiniYarn, YarnClient, container_processes};
use sluice_integration::yarn::{field_after, text};
use sluice_integration::{all_running, job_id_of, job_parallelism, wait_for};

/// The parallelism every vertex of `job` runs at under the adaptive scheduler's `Executing`,
/// if they agree.
fn executing_at(job: &Value) -> Option<u64> {
    if !all_running(job) || job["adaptive-scheduler-state"] != "Executing" {
        return None;
    }
    job_parallelism(job)
}

/// The ids of the TaskManagers registered at the JobManager.
fn taskmanager_ids(client: &YarnClient<'_>, rest: &str) -> Vec<String> {
    client.sluice_rest(rest, "/taskmanagers")["taskmanagers"]
        .as_array()
        .map(|tms| {
            tms.iter()
                .filter_map(|t| t["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_adaptive_job_on_yarn_gets_containers_up_to_its_bound_and_rescales_as_they_come_and_go() {
    if yarn::skipped() {
        return;
    }
    let cluster = MiniYarn::start("sluice-yarn-adaptive-");
    let client = YarnClient::new(&cluster);
    let checkpoints = client.tmp.path().join("checkpoints");
    let checkpoint_dir = format!("execution.checkpointing.dir={}", checkpoints.display());
    let out = client.sluice(&[
        "-D",
        "jobmanager.scheduler=adaptive",
        "-D",
        "jobmanager.adaptive-scheduler.resource-stabilization-timeout=500 ms",
        "-D",
        "jobmanager.adaptive-scheduler.scaling-interval.min=2 s",
        "-D",
        "execution.checkpointing.interval=500 ms",
        "-D",
        &checkpoint_dir,
        "-D",
        "restart-strategy.type=fixed-delay",
        "-D",
        "restart-strategy.fixed-delay.attempts=20",
        "-D",
        "restart-strategy.fixed-delay.delay=100 ms",
        "yarn-session",
        "-d",
        "-nm",
        "adaptive-session",
        "-s",
        "1",
        "-tm",
        "256",
        "-jm",
        "256",
    ]);
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    let app = field_after(&printed, "YARN application ").to_string();
    let _kill = KillOnDrop {
        client: &client,
        app: app.clone(),
    };
    let rest = field_after(&printed, "JobManager Web Interface: http://").to_string();
    // Only the ApplicationMaster until a job declares what it wants.
    assert_eq!(client.running_containers(&app), 1);

    let output = client.tmp.path().join("out");
    let (rate, keys) = (2_000u64, 7u64);
    let records = rate * 25;
    let (records_arg, keys_arg, rate_arg) =
        (records.to_string(), keys.to_string(), rate.to_string());
    let submitted = Instant::now();
    let run = client.sluice(&[
        "run",
        "-t",
        "yarn-session",
        "-d",
        "-p",
        "2",
        "counting",
        "--records",
        &records_arg,
        "--keys",
        &keys_arg,
        "--rate",
        &rate_arg,
        "--output",
        output.to_str().expect("utf-8"),
    ]);
    assert!(run.status.success(), "{}", text(&run));
    let job = job_id_of(&String::from_utf8_lossy(&run.stdout));
    let job_path = format!("/jobs/{job}");
    let running_at = |p: u64| {
        let j = client.sluice_rest(&rest, &job_path);
        assert_ne!(j["state"], "FAILED", "{j}");
        (executing_at(&j) == Some(p)).then_some(())
    };

    // Its upper bound of 2: YARN grows two 1-slot TaskManager containers for it.
    wait_for(Duration::from_secs(90), "the job to run at 2", || {
        running_at(2)
    });
    let started = submitted.elapsed();
    assert_eq!(
        client.running_containers(&app),
        3,
        "the AM and 2 TaskManagers"
    );

    // A raised bound: one more container is asked for, and the job grows onto it.
    let requirements = client.sluice_rest(&rest, &format!("{job_path}/resource-requirements"));
    let raised: serde_json::Map<String, Value> = requirements
        .as_object()
        .expect("requirements by vertex")
        .keys()
        .map(|v| {
            let bounds = json!({"parallelism": {"lowerBound": 1, "upperBound": 3}});
            (v.clone(), bounds)
        })
        .collect();
    assert!(!raised.is_empty(), "{requirements}");
    let put = Instant::now();
    let (status, body) = client.sluice_put(
        &rest,
        &format!("{job_path}/resource-requirements"),
        &Value::Object(raised),
    );
    assert_eq!(status, 200, "{body}");
    wait_for(Duration::from_secs(90), "the job to grow to 3", || {
        running_at(3)
    });
    let grew = put.elapsed();
    assert_eq!(
        client.running_containers(&app),
        4,
        "the AM and 3 TaskManagers"
    );
    let before = taskmanager_ids(&client, &rest);
    assert_eq!(before.len(), 3, "{before:?}");

    // A TaskManager container's process dies: the job runs on the 2 slots left instead of
    // waiting, then grows back onto the replacement container YARN grants.
    let victim = container_processes(&app)
        .into_iter()
        .find(|p| p.2.contains(" taskmanager "))
        .expect("a TaskManager container's process");
    let killed = Instant::now();
    let status = Command::new("kill")
        .args(["-9", &victim.0.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let on_a_replacement = || {
        running_at(3)?;
        let now = taskmanager_ids(&client, &rest);
        (now.len() == 3 && now.iter().any(|id| !before.contains(id))).then_some(())
    };
    // Mostly it restarts at 2 first; when YARN's replacement has registered before the restart
    // (it may, under load), the job goes straight back to 3 on it, which is as right: it did
    // not wait for a container it could not be sure of.
    let shrank = wait_for(
        Duration::from_secs(60),
        "the job to run at 2, or at 3 on a replacement container",
        || match running_at(2) {
            Some(()) => Some(Some(killed.elapsed())),
            None => on_a_replacement().map(|()| None),
        },
    );
    wait_for(
        Duration::from_secs(90),
        "the job to grow back to 3 on a replacement container",
        on_a_replacement,
    );
    let regrew = killed.elapsed();

    wait_for(
        Duration::from_secs(records / rate + 120),
        "the job to finish",
        || {
            let j = client.sluice_rest(&rest, &job_path);
            assert_ne!(j["state"], "FAILED", "{j}");
            (j["state"] == "FINISHED").then_some(())
        },
    );
    let check = client.sluice(&[
        "check-counting",
        "--records",
        &records_arg,
        "--keys",
        &keys_arg,
        output.to_str().expect("utf-8"),
    ]);
    let report = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success() && report.starts_with("OK"),
        "not exactly once:\n{report}{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let kill = client.sluice(&["yarn-session", "-id", &app, "--kill"]);
    assert!(kill.status.success(), "{}", text(&kill));
    wait_for(
        Duration::from_secs(20),
        "the session's processes to end",
        || container_processes(&app).is_empty().then_some(()),
    );
    println!(
        "MEASURED adaptive on YARN: submitted -> running at 2 on 2 new containers {} ms; PUT upper bound 3 -> running at 3 on a third {} ms; container killed -> running at 2 {}, -> at 3 on a replacement {} ms",
        started.as_millis(),
        grew.as_millis(),
        shrank.map_or(
            "skipped (the replacement came first)".to_string(),
            |d| format!("{} ms", d.as_millis())
        ),
        regrew.as_millis()
    );
}
