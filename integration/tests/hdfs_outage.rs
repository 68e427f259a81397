//! HDFS failing under a running job, each test on a MiniDFSCluster of its own that it breaks
//! (`sluice_integration::dfs::private_dfs`), with checkpoints on `hdfs://` every second:
//!
//! - the NameNode stops for a while: checkpoints fail, naming the path and the cause, the job
//!   runs on without a restart (the failures stay below
//!   `execution.checkpointing.tolerable-failed-checkpoints`), and checkpoints complete again once
//!   the NameNode is back;
//! - one of the three DataNodes dies while RocksDB's incremental checkpoints upload files of
//!   several blocks: the uploads recover (the pipeline drops the DataNode, or the file is
//!   written again from the start) and checkpoints keep completing.
//!
//! Both end with the exactly-once checker on the job's output.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice::state::StateStorage;
use sluice::state::fs::{FileSystems, HadoopConf};
use sluice_integration::dfs::{MiniDfs, private_dfs};
use sluice_integration::{StandaloneCluster, counting_args, wait_for};

/// Each test runs a MiniDFSCluster and a sluice cluster of its own; two at once on a small
/// machine would only make both slower and their timing less certain.
static SERIAL: Mutex<()> = Mutex::new(());

/// A standalone cluster of one-slot TaskManagers with RocksDB incremental checkpoints every
/// second on HDFS (`checkpoints`), a job that restarts should it fail, and `extra` settings.
fn cluster(
    dfs: &MiniDfs,
    taskmanagers: usize,
    checkpoints: &str,
    extra: &str,
) -> StandaloneCluster {
    let config = format!(
        "state.backend.type: rocksdb\nexecution.checkpointing.incremental: true\nexecution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {checkpoints}\nrestart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 5\nrestart-strategy.fixed-delay.delay: 200 ms\n{extra}"
    );
    let conf_dir = dfs.conf_dir();
    StandaloneCluster::start_with_env(
        taskmanagers,
        1,
        &config,
        &[("HADOOP_CONF_DIR", conf_dir.as_str())],
    )
}

/// The job's `GET /jobs/:id/checkpoints`, or null while it cannot be had.
fn checkpoint_stats(cluster: &StandaloneCluster, id: &str) -> Value {
    cluster
        .get(&format!("/jobs/{id}/checkpoints"))
        .unwrap_or(Value::Null)
}

/// `counts.<kind>` of the job's checkpoint statistics (0 while unknown).
fn count(cluster: &StandaloneCluster, id: &str, kind: &str) -> u64 {
    checkpoint_stats(cluster, id)["counts"][kind]
        .as_u64()
        .unwrap_or(0)
}

/// The failures the job has gone through (each one a restart), as its exception history
/// lists them.
fn failures(cluster: &StandaloneCluster, id: &str) -> Vec<Value> {
    cluster.exceptions(id)["exceptionHistory"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Panics unless the job is RUNNING and has never failed (restarted).
fn assert_running_without_restart(cluster: &StandaloneCluster, id: &str, when: &str) {
    let state = cluster.job_state(id);
    let failures = failures(cluster, id);
    assert!(
        state == "RUNNING" && failures.is_empty(),
        "{when}: the job is {state} and failed {} times: {failures:?}",
        failures.len()
    );
}

fn assert_exactly_once(cluster: &StandaloneCluster, records: u64, keys: u64, output: &Path) {
    let (ok, report) = cluster.check_counting(records, keys, output);
    assert!(
        ok && report.starts_with("OK"),
        "not exactly once:\n{report}"
    );
}

#[test]
fn a_namenode_outage_fails_checkpoints_not_the_job_and_checkpointing_resumes_after_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dfs = private_dfs("namenode");
    let checkpoints = dfs.uri("/checkpoints");
    // A NameNode that refuses fails a call after ≈ 10 s (the client's retries, see
    // HadoopConf::client_settings); the timeout fails a checkpoint stuck longer than that.
    let cluster = cluster(
        &dfs,
        2,
        &checkpoints,
        "execution.checkpointing.tolerable-failed-checkpoints: 1000\nexecution.checkpointing.timeout: 20 s\n",
    );
    let output = cluster.work_dir().join("out");
    // 1000 records/s: the job runs ≈ 100 s, past the outage and the checkpoints after it.
    let (records, keys) = (100_000u64, 5u64);
    let id = cluster.submit_args(&counting_args(2, records, keys, &output, 1000));
    wait_for(Duration::from_secs(60), "two completed checkpoints", || {
        (cluster.completed_checkpoints(&id) >= 2).then_some(())
    });

    let failed_before = count(&cluster, &id, "failed");
    dfs.stop_namenode();
    let stopped = Instant::now();
    wait_for(
        Duration::from_secs(60),
        "a checkpoint to fail while the NameNode is down",
        || (count(&cluster, &id, "failed") > failed_before).then_some(()),
    );
    // Down for 20 s at least: longer than a call's retries, so checkpoints fail for them.
    let mut messages = std::collections::BTreeSet::new();
    while stopped.elapsed() < Duration::from_secs(20) {
        assert_running_without_restart(&cluster, &id, "while the NameNode is down");
        let stats = checkpoint_stats(&cluster, &id);
        for checkpoint in stats["history"].as_array().into_iter().flatten() {
            if let Some(m) = checkpoint["failure_message"].as_str() {
                messages.insert(m.to_string());
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // A task's upload (or the JobManager's metadata) names the file and the cause.
    assert!(
        messages
            .iter()
            .any(|m| m.contains(&checkpoints) && m.to_lowercase().contains("refused")),
        "no failure names a path under {checkpoints} and the refused connection: {messages:#?}"
    );

    dfs.restart_namenode();
    let completed_at_restart = cluster.completed_checkpoints(&id);
    wait_for(
        Duration::from_secs(60),
        "two checkpoints to complete after the NameNode is back",
        || (cluster.completed_checkpoints(&id) >= completed_at_restart + 2).then_some(()),
    );
    assert_running_without_restart(&cluster, &id, "after the NameNode is back");
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(180));
    assert!(
        failures(&cluster, &id).is_empty(),
        "the job restarted: {:?}",
        failures(&cluster, &id)
    );
    assert_exactly_once(&cluster, records, keys, &output);
}

#[test]
fn checkpoints_keep_completing_when_one_of_three_datanodes_dies_during_an_upload() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dfs = private_dfs("datanode");
    let fs = FileSystems::with_hadoop_conf(HadoopConf::load(&dfs.dir).expect("the cluster's conf"));
    let checkpoints = dfs.uri("/checkpoints");
    let cluster = cluster(
        &dfs,
        2,
        &checkpoints,
        "execution.checkpointing.tolerable-failed-checkpoints: 3\n",
    );
    let output = cluster.work_dir().join("out");
    // Many keys, so RocksDB's files (flushed at each checkpoint, and what compactions merge
    // them into) grow past the cluster's 1 MiB blocks.
    let (records, keys) = (1_500_000u64, 300_000u64);
    // 20 000 records/s: the job runs ≈ 75 s.
    let id = cluster.submit_args(&counting_args(2, records, keys, &output, 20_000));
    let shared = format!("{checkpoints}/{id}/shared");
    wait_for(
        Duration::from_secs(90),
        "two completed checkpoints and a shared file larger than a block",
        || {
            let big = fs.list(&shared).ok()?.into_iter().any(|name| {
                fs.size(&format!("{shared}/{name}"))
                    .ok()
                    .flatten()
                    .is_some_and(|size| size > 1 << 20)
            });
            (big && cluster.completed_checkpoints(&id) >= 2).then_some(())
        },
    );
    // Kill the DataNode while a file is being written (its hidden temporary name is there).
    wait_for(Duration::from_secs(30), "an upload in progress", || {
        let names = fs.list(&shared).ok()?;
        names
            .iter()
            .any(|n| n.starts_with('.') && n.contains(".inprogress-"))
            .then_some(())
    });
    dfs.stop_datanode(0);
    let completed_at_kill = cluster.completed_checkpoints(&id);
    wait_for(
        Duration::from_secs(90),
        "three checkpoints to complete with a DataNode gone",
        || (cluster.completed_checkpoints(&id) >= completed_at_kill + 3).then_some(()),
    );
    assert_running_without_restart(&cluster, &id, "with a DataNode gone");
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(180));
    assert!(
        failures(&cluster, &id).is_empty(),
        "the job restarted: {:?}",
        failures(&cluster, &id)
    );
    let retried: usize = cluster
        .logs("taskmanager")
        .iter()
        .map(|log| log.matches("retrying the whole file").count())
        .sum();
    eprintln!(
        "{} checkpoints failed, {retried} files were written again",
        count(&cluster, &id, "failed")
    );
    assert_exactly_once(&cluster, records, keys, &output);
}
