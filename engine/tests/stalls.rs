//! Slow I/O must not stall the JobManager's control plane: while it discards a checkpoint of
//! 100 000 files, and while ZooKeeper does not answer, heartbeats are answered, REST answers,
//! and time-driven decisions (a silent TaskManager declared lost) still happen.
//!
//! A real JobManager and TaskManager run in this process over loopback; two more "TaskManagers"
//! are played by the test over the real control protocol, so it can time heartbeat answers and
//! fall silent on purpose. The ZooKeeper test uses a real ZooKeeper behind a proxy that holds
//! its traffic back.

use std::path::Path;
mod common;

use common::jobmanager;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::common::ids::JobId;
use sluice::config::Config;
use sluice::jobmanager::JobManager;
use sluice::rpc::messages::{JmToTm, PROTOCOL_VERSION, ProgramSpec, TmToJm};
use sluice::rpc::transport;
use sluice::security::ClusterSecret;
use sluice::taskmanager::service::TaskManager;
use tokio::io::{ReadHalf, WriteHalf};
use zk_ha::testkit::{Proxy, ZkServer};

type Stream = transport::Stream<tokio::net::TcpStream>;

/// Loopback settings with heartbeats fast enough to notice delays, then `extra`.
fn config(extra: &[(&str, &str)]) -> Config {
    let heartbeats = [
        ("heartbeat.interval", "200 ms"),
        ("heartbeat.timeout", "2 s"),
    ];
    let all: Vec<(&str, &str)> = heartbeats.iter().chain(extra).copied().collect();
    common::config(&all)
}

/// A TaskManager played by the test: registers over the real protocol and heartbeats when
/// asked, timing the JobManager's answers.
struct FakeTaskManager {
    reader: ReadHalf<Stream>,
    writer: WriteHalf<Stream>,
}

impl FakeTaskManager {
    async fn register(jm: &JobManager, secret: &ClusterSecret, id: &str) -> FakeTaskManager {
        let stream = transport::connect(jm.shared.rpc_address(), secret)
            .await
            .expect("connect");
        let (mut reader, mut writer) = tokio::io::split(stream);
        let register = TmToJm::Register {
            protocol_version: PROTOCOL_VERSION,
            resource_id: id.into(),
            host: "127.0.0.1".into(),
            data_port: 1,
            slots: 1,
            hardware: Default::default(),
            network_memory: 0,
            managed_memory: 0,
            running: vec![],
            leader_session: jm.shared.leader_session(),
            metrics_port: None,
            worker_of: None,
        };
        transport::send(&mut writer, &register).await.expect("send");
        match transport::recv::<_, JmToTm>(&mut reader)
            .await
            .expect("recv")
        {
            JmToTm::Registered { .. } => {}
            other => panic!("registration refused: {other:?}"),
        }
        FakeTaskManager { reader, writer }
    }

    /// One heartbeat; how long the answer took.
    async fn heartbeat(&mut self) -> Duration {
        let sent = Instant::now();
        let beat = TmToJm::Heartbeat {
            metrics: vec![],
            process: None,
        };
        transport::send(&mut self.writer, &beat)
            .await
            .expect("send");
        loop {
            match transport::recv::<_, JmToTm>(&mut self.reader).await {
                Ok(JmToTm::HeartbeatAck) => return sent.elapsed(),
                Ok(_) => continue,
                Err(e) => panic!("the control connection broke: {e}"),
            }
        }
    }
}

/// What was measured while something slow went on.
#[derive(Default, Debug)]
struct Latencies {
    rest: Vec<Duration>,
    heartbeats: Vec<Duration>,
}

impl Latencies {
    fn worst(samples: &[Duration]) -> Duration {
        samples.iter().copied().max().unwrap_or_default()
    }

    fn summary(&self) -> String {
        format!(
            "{} REST answers (worst {:?}), {} heartbeat answers (worst {:?})",
            self.rest.len(),
            Self::worst(&self.rest),
            self.heartbeats.len(),
            Self::worst(&self.heartbeats)
        )
    }

    /// REST and heartbeat answers, each well under a second, and enough of them.
    fn assert_prompt(&self, during: &str) {
        assert!(
            self.rest.len() >= 5 && self.heartbeats.len() >= 5,
            "too few samples while {during}: {self:?}"
        );
        let (rest, beats) = (Self::worst(&self.rest), Self::worst(&self.heartbeats));
        assert!(
            rest < Duration::from_millis(500) && beats < Duration::from_millis(500),
            "answers were delayed while {during}: worst REST {rest:?}, worst heartbeat {beats:?}"
        );
    }
}

/// Samples REST (`GET /overview`) and heartbeat answers every 20 ms until `done` says so;
/// `explain` says what was still pending if it never does.
async fn sample_until(
    rest: &str,
    tm: &mut FakeTaskManager,
    deadline: Duration,
    mut done: impl FnMut() -> bool,
    explain: impl Fn() -> String,
) -> Latencies {
    let http = reqwest::Client::new();
    let mut measured = Latencies::default();
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < deadline,
            "gave up after {deadline:?}: {}",
            explain()
        );
        let sent = Instant::now();
        let answer = http
            .get(format!("http://{rest}/overview"))
            .send()
            .await
            .expect("REST answers");
        assert!(answer.status().is_success());
        measured.rest.push(sent.elapsed());
        measured.heartbeats.push(tm.heartbeat().await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    measured
}

async fn job_state(rest: &str, job: JobId) -> String {
    let body: serde_json::Value = reqwest::get(format!("http://{rest}/jobs/{job}"))
        .await
        .expect("REST answers")
        .json()
        .await
        .expect("JSON");
    body["state"].as_str().unwrap_or_default().to_string()
}

async fn wait_until<F: Future<Output = bool>>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> F,
) {
    let start = Instant::now();
    while !f().await {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn fill(dir: &Path, files: usize) {
    for chunk in 0..files.div_ceil(1000) {
        let sub = dir.join(format!("sst-{chunk}"));
        std::fs::create_dir_all(&sub).expect("mkdir");
        for i in 0..1000.min(files - chunk * 1000) {
            std::fs::write(sub.join(format!("{i}.sst")), b"x").expect("write");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discarding_a_checkpoint_of_100000_files_delays_no_answer() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let checkpoints = scratch.path().join("checkpoints");
    let checkpoint_dir = checkpoints.display().to_string();
    let config = config(&[
        ("execution.checkpointing.interval", "100 ms"),
        ("execution.checkpointing.dir", &checkpoint_dir),
        ("taskmanager.numberOfTaskSlots", "1"),
    ]);
    let secret = ClusterSecret::random();
    let jm = jobmanager(&config, &secret).await;
    let rest = jm.rest_address.to_string();
    let tm = TaskManager::start(
        config.clone(),
        secret.clone(),
        Arc::new(sluice::examples::bundled()),
    )
    .await
    .expect("the TaskManager starts");
    let runner = tm.clone();
    let rpc = jm.shared.rpc_address().to_string();
    let worker = tokio::spawn(async move { runner.run(rpc).await });
    wait_until(
        "the TaskManager to register",
        Duration::from_secs(10),
        || async { jm.shared.view().resources().total_slots() == 1 },
    )
    .await;

    let program = ProgramSpec::new("stream-sum", vec!["--rate".into(), "1000".into()]);
    let job = jm
        .shared
        .submit(program, Some(1), &[], None)
        .await
        .expect("submitted");
    let root = checkpoints.join(job.to_string());
    wait_until(
        "a completed checkpoint",
        Duration::from_secs(30),
        || async {
            std::fs::read_dir(&root).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.path().join("_metadata").exists())
            })
        },
    )
    .await;
    // The job's shared directory gets 100 000 more files: the checkpoint directory the
    // JobManager deletes when the job is cancelled (retention: delete on cancellation).
    fill(&root.join("shared"), 100_000);
    let mut fake = FakeTaskManager::register(&jm, &secret, "fake-tm").await;
    let before = sample_until(
        &rest,
        &mut fake,
        Duration::from_secs(5),
        {
            let mut n = 0;
            move || {
                n += 1;
                n > 10
            }
        },
        String::new,
    )
    .await;
    before.assert_prompt("idle");

    let cancelled = Instant::now();
    jm.shared.cancel(job).expect("cancel");
    let during = sample_until(
        &rest,
        &mut fake,
        Duration::from_secs(120),
        || !root.exists(),
        || {
            let status = jm.shared.view().job(job).map(|j| j.status());
            let left: Vec<String> = std::fs::read_dir(&root)
                .map(|entries| {
                    entries
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "the job is {status:?}; {} still holds {left:?}",
                root.display()
            )
        },
    )
    .await;
    let deletion = cancelled.elapsed();
    println!(
        "deleting the checkpoints took {deletion:?}; meanwhile {}",
        during.summary()
    );
    during.assert_prompt("100 000 files were deleted");
    assert!(
        during.rest.len() >= 10,
        "the deletion was too quick to show anything ({deletion:?})"
    );
    assert_eq!(job_state(&rest, job).await, "CANCELED");
    tm.shutdown();
    worker.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_zookeeper_delays_no_answer_and_no_heartbeat_timeout() {
    let zk = ZkServer::start();
    let proxy = Proxy::start(zk.process.client_port()).await;
    let scratch = tempfile::tempdir().expect("tempdir");
    let storage = scratch.path().join("ha").display().to_string();
    let quorum = proxy.connect_string();
    let config = config(&[
        ("high-availability.zookeeper.quorum", &quorum),
        ("high-availability.storageDir", &storage),
        ("high-availability.type", "zookeeper"),
        ("high-availability.cluster-id", "stall-test"),
    ]);
    let secret = ClusterSecret::random();
    let jm = jobmanager(&config, &secret).await;
    let rest = jm.rest_address.to_string();
    wait_until("leadership", Duration::from_secs(30), || async {
        jm.shared.is_leader()
    })
    .await;
    let mut fake = FakeTaskManager::register(&jm, &secret, "beating").await;
    let mut silent = FakeTaskManager::register(&jm, &secret, "falling-silent").await;
    silent.heartbeat().await;
    // A job that waits for slots (the fake TaskManagers never run it) ...
    let program = ProgramSpec::new("stream-sum", vec![]);
    let job = jm
        .shared
        .submit(program, Some(3), &[], None)
        .await
        .expect("submitted");

    // ... ends while ZooKeeper answers late: recording its end in the job result store waits
    // for ZooKeeper.
    proxy.stall();
    jm.shared.cancel(job).expect("cancel");
    let lost = || {
        jm.shared
            .view()
            .resources()
            .taskmanager("falling-silent")
            .is_none()
    };
    let silent_since = Instant::now();
    let during = sample_until(&rest, &mut fake, Duration::from_secs(20), lost, || {
        "the TaskManager was not declared lost".to_string()
    })
    .await;
    let detected = silent_since.elapsed();
    println!(
        "the silent TaskManager was lost after {detected:?}; meanwhile {}",
        during.summary()
    );
    during.assert_prompt("ZooKeeper was slow");
    assert_eq!(job_state(&rest, job).await, "CANCELED");
    assert!(
        jm.shared.is_leader(),
        "still the leader: the stall was shorter than the session timeout"
    );
    proxy.thaw();
    // The job's end was waiting for ZooKeeper all along; now it gets recorded.
    let ha = jm.shared.ha().expect("HA is configured");
    let key = job.to_string();
    let start = Instant::now();
    while !ha
        .services()
        .job_result_store()
        .contains(&key)
        .await
        .unwrap_or(false)
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the job's end was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(silent);
}
