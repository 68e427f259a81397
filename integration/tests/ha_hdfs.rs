//! JobManager high availability with nothing shared but a real ZooKeeper and a real HDFS (a
//! MiniDFSCluster): `high-availability.storageDir`, the checkpoints and the job artifacts all on
//! `hdfs://`. The leader is killed; the standby finds the job's submission, its last checkpoint
//! and its code on HDFS, fetches the code into a local cache, and the job ends exactly once.

use std::path::Path;
use std::time::{Duration, Instant};

use sluice::state::StateStorage;
use sluice::state::fs::{FileSystems, HadoopConf};
use sluice_integration::dfs::mini_dfs;
use sluice_integration::{
    StandaloneCluster, all_running, counting_args, signal, test_job_bin, wait_for,
};
use zk_ha::testkit::ZkServer;

/// A directory of its own under the HDFS root for one test.
fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("/{name}-{}-{nanos}", std::process::id())
}

/// The pid of the JobManager whose log says it leads, and the other one.
fn leader_and_standby(cluster: &StandaloneCluster) -> (u32, u32) {
    let pids = cluster.pids("jobmanager");
    assert_eq!(pids.len(), 2, "two JobManagers run");
    let leader = wait_for(Duration::from_secs(30), "a JobManager to lead", || {
        pids.iter()
            .copied()
            .find(|&p| cluster.logs_of_pid_mention(p, "granted leadership"))
    });
    let standby = pids.into_iter().find(|&p| p != leader).expect("standby");
    (leader, standby)
}

#[test]
fn with_ha_storage_on_hdfs_the_standby_resumes_an_artifact_job_exactly_once() {
    let dfs = mini_dfs();
    let zk = ZkServer::start();
    let root = unique("ha");
    let (ha_dir, checkpoints) = (
        dfs.uri(&format!("{root}/ha")),
        dfs.uri(&format!("{root}/chk")),
    );
    let config = format!(
        "high-availability.type: zookeeper\nhigh-availability.zookeeper.quorum: {}\nhigh-availability.storageDir: {ha_dir}\nexecution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {checkpoints}\nrestart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 100\nrestart-strategy.fixed-delay.delay: 200 ms\n",
        zk.connect_string(),
    );
    let conf_dir = dfs.conf_dir();
    let cluster = StandaloneCluster::start_with_jobmanagers_and_env(
        2,
        2,
        1,
        &config,
        &[("HADOOP_CONF_DIR", conf_dir.as_str())],
    );
    let (leader, standby) = leader_and_standby(&cluster);

    let scratch = tempfile::tempdir().expect("scratch");
    let out = scratch.path().join("out");
    let (records, keys) = (60_000u64, 5u64);
    let mut args = counting_args(2, records, keys, &out, 5000);
    let at = args.iter().position(|a| a == "counting").expect("program");
    let artifact = test_job_bin().display().to_string();
    args.splice(
        at..=at,
        ["-c".to_string(), "counting".to_string(), artifact],
    );
    let id = cluster.submit_args(&args);

    // Everything the standby needs is on HDFS: the artifact and its record, the HA blobs.
    let storage =
        FileSystems::with_hadoop_conf(HadoopConf::load(&dfs.dir).expect("the mini cluster's conf"));
    let jars = storage
        .list(&format!("{ha_dir}/default/jars"))
        .expect("list jars");
    assert!(
        jars.iter().any(|n| n.ends_with(".json")) && jars.len() >= 2,
        "no artifact and record on HDFS: {jars:?}"
    );
    let blobs = storage
        .list(&format!("{ha_dir}/default"))
        .expect("list HA blobs");
    assert!(
        blobs.iter().any(|n| n.starts_with("jobgraph-")),
        "no job graph blob on HDFS: {blobs:?}"
    );

    wait_for(Duration::from_secs(60), "a completed checkpoint", || {
        (cluster.completed_checkpoints(&id) >= 1).then_some(())
    });
    let killed = Instant::now();
    signal("-9", leader);
    let back = wait_for(
        Duration::from_secs(90),
        "the job RUNNING under the new leader",
        || all_running(&cluster.job(&id)).then(|| killed.elapsed()),
    );
    println!(
        "kill -9 of the leader -> job RUNNING under the standby (HA storage on HDFS): {} ms",
        back.as_millis()
    );
    assert!(cluster.logs_of_pid_mention(standby, "granted leadership"));
    assert!(
        cluster.logs_of_pid_mention(standby, "fetched a job artifact into the local cache"),
        "the standby ran the job from the artifact it fetched from HDFS"
    );
    wait_for(Duration::from_secs(120), "the job to finish", || {
        let s = cluster.job(&id)["state"].as_str().unwrap_or("").to_string();
        assert_ne!(s, "FAILED", "the job failed");
        (s == "FINISHED").then_some(())
    });
    check_exactly_once(&cluster, records, keys, &out);
}

fn check_exactly_once(cluster: &StandaloneCluster, records: u64, keys: u64, dir: &Path) {
    let (ok, text) = cluster.check_counting(records, keys, dir);
    assert!(ok, "not exactly once:\n{text}");
}
