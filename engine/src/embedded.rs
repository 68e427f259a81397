//! An embedded cluster: a JobManager and TaskManagers in one process, talking over loopback
//! exactly as separate processes do (same RPC, same QUIC data plane). `sluice run -t local`
//! and the tests use it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::config::Config;
use crate::jobmanager::JobManager;
use crate::security::ClusterSecret;
use crate::taskmanager::service::TaskManager;

/// An embedded cluster: a JobManager and one TaskManager in this process, over loopback.
pub struct EmbeddedCluster {
    /// The JobManager.
    pub jobmanager: JobManager,
    /// The TaskManagers.
    pub taskmanagers: Vec<Arc<TaskManager>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl EmbeddedCluster {
    /// The settings that put every endpoint of a cluster in this process on loopback, on free
    /// ports.
    pub const LOOPBACK: [(&'static str, &'static str); 7] = [
        ("rest.port", "0"),
        ("rest.bind-address", "127.0.0.1"),
        ("jobmanager.rpc.port", "0"),
        ("jobmanager.bind-host", "127.0.0.1"),
        ("taskmanager.bind-host", "127.0.0.1"),
        ("taskmanager.host", "127.0.0.1"),
        ("taskmanager.data.port", "0"),
    ];

    /// Starts a cluster with one TaskManager of `slots` slots on ephemeral loopback ports.
    pub async fn start(config: Config, slots: u32) -> Result<EmbeddedCluster> {
        Self::start_with(config, 1, slots).await
    }

    /// Starts a cluster with `taskmanagers` TaskManagers of `slots` slots each.
    pub async fn start_with(
        config: Config,
        taskmanagers: u32,
        slots: u32,
    ) -> Result<EmbeddedCluster> {
        Self::start_running(config, taskmanagers, slots, crate::examples::bundled()).await
    }

    /// Starts a cluster that knows the programs of `programs`.
    pub(crate) async fn start_running(
        mut config: Config,
        taskmanagers: u32,
        slots: u32,
        programs: crate::api::ProgramRegistry,
    ) -> Result<EmbeddedCluster> {
        for (key, value) in Self::LOOPBACK {
            config.set(key, value)?;
        }
        config.set("taskmanager.numberOfTaskSlots", &slots.max(1).to_string())?;
        let secret = ClusterSecret::random();
        let programs = Arc::new(programs);
        let jobmanager =
            crate::rest::start_jobmanager(config.clone(), secret.clone(), programs.clone()).await?;
        let mut tms = Vec::new();
        let mut workers = Vec::new();
        for _ in 0..taskmanagers {
            let tm = TaskManager::start(config.clone(), secret.clone(), programs.clone()).await?;
            let rpc = jobmanager.shared.rpc_address().to_string();
            let runner = tm.clone();
            workers.push(tokio::spawn(async move {
                let err = runner.run(rpc).await;
                tracing::error!(error = %err, "embedded TaskManager stopped");
            }));
            tms.push(tm);
        }
        // Wait until the TaskManagers have registered, so a job does not wait for slots.
        let deadline = Instant::now() + Duration::from_secs(10);
        while jobmanager.shared.view().resources().total_slots() < taskmanagers * slots.max(1) {
            if Instant::now() > deadline {
                bail!("the embedded TaskManagers did not register within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(EmbeddedCluster {
            jobmanager,
            taskmanagers: tms,
            workers,
        })
    }

    /// The REST address.
    pub fn rest_address(&self) -> String {
        self.jobmanager.rest_address.to_string()
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        // The JobManager first: TaskManagers that go away after it are not failures to log.
        self.jobmanager.shared.stop();
        for tm in &self.taskmanagers {
            tm.shutdown();
        }
        for w in &self.workers {
            w.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::AfterSavepoint;
    use crate::jobmanager::jobmaster::JobStatus;
    use crate::rpc::messages::ProgramSpec;
    use std::collections::BTreeMap;

    async fn wait_terminal(cluster: &EmbeddedCluster, job: crate::common::ids::JobId) -> JobStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = cluster
                .jobmanager
                .shared
                .view()
                .job(job)
                .expect("the job")
                .status();
            if status.is_globally_terminal() || Instant::now() > deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wordcount_runs_embedded_with_correct_counts() {
        wordcount(1, 3).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wordcount_across_two_taskmanagers_over_quic_gives_the_same_counts() {
        wordcount(2, 2).await;
    }

    async fn wordcount(taskmanagers: u32, slots: u32) {
        let parallelism = taskmanagers * slots;
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.txt");
        let mut text = String::new();
        let mut expected: BTreeMap<String, u64> = BTreeMap::new();
        for i in 0..5000u64 {
            let line = format!("alpha beta{} Gamma{} alpha", i % 7, i % 113);
            for w in crate::examples::wordcount_tokens(&line) {
                *expected.entry(w).or_default() += 1;
            }
            text.push_str(&line);
            text.push('\n');
        }
        std::fs::write(&input, text).unwrap();
        let output = dir.path().join("out");
        let cluster = EmbeddedCluster::start_with(Config::default(), taskmanagers, slots)
            .await
            .unwrap();
        let args = vec![
            "--input".into(),
            input.display().to_string(),
            "--output".into(),
            output.display().to_string(),
        ];
        let job = cluster
            .jobmanager
            .shared
            .submit(
                ProgramSpec::new("wordcount", args),
                Some(parallelism),
                &[],
                None,
            )
            .await
            .unwrap();
        assert_eq!(wait_terminal(&cluster, job).await, JobStatus::Finished);
        let mut got: BTreeMap<String, u64> = BTreeMap::new();
        for entry in std::fs::read_dir(&output).unwrap() {
            for line in std::fs::read_to_string(entry.unwrap().path())
                .unwrap()
                .lines()
            {
                let (w, c) = line.rsplit_once(' ').unwrap();
                assert!(
                    got.insert(w.to_string(), c.parse().unwrap()).is_none(),
                    "{w} twice"
                );
            }
        }
        assert_eq!(got, expected);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_submissions_runtime_mode_decides_batch_or_streaming_and_both_finish() {
        let cluster = EmbeddedCluster::start_with(Config::default(), 1, 2)
            .await
            .unwrap();
        let cases = [
            (None, false),
            (Some("STREAMING"), false),
            (Some("BATCH"), true),
            (Some("AUTOMATIC"), true),
        ];
        for (mode, batch) in cases {
            let overrides: Vec<(String, String)> = mode
                .map(|m| ("execution.runtime-mode".to_string(), m.to_string()))
                .into_iter()
                .collect();
            let args = vec!["--records".into(), "5000".into()];
            let job = cluster
                .jobmanager
                .shared
                .submit(ProgramSpec::new("shuffle", args), Some(2), &overrides, None)
                .await
                .unwrap();
            assert_eq!(wait_terminal(&cluster, job).await, JobStatus::Finished);
            let view = cluster.jobmanager.shared.view();
            let jm = view.job(job).expect("the job");
            assert_eq!(jm.is_batch(), batch, "{mode:?}");
            assert_eq!(jm.graph().batch, batch, "{mode:?}");
            // The same records cross the exchange either way.
            let read: u64 = jm.executions()[1]
                .iter()
                .map(|e| e.metrics.records_in)
                .sum();
            assert_eq!(read, 5000, "{mode:?}");
        }
        // A bad value is refused with the key named, and nothing runs.
        let refused = cluster
            .jobmanager
            .shared
            .submit(
                ProgramSpec::new("shuffle", vec![]),
                Some(1),
                &[("execution.runtime-mode".into(), "SOMETIMES".into())],
                None,
            )
            .await
            .expect_err("a bad runtime mode");
        assert!(
            refused.to_string().contains("execution.runtime-mode"),
            "{refused}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn panicking_user_code_restarts_per_strategy_then_fails_while_other_jobs_run() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_test_writer()
            .try_init();
        let mut config = Config::default();
        config.set("restart-strategy.type", "fixed-delay").unwrap();
        config
            .set("restart-strategy.fixed-delay.attempts", "2")
            .unwrap();
        config
            .set("restart-strategy.fixed-delay.delay", "50 ms")
            .unwrap();
        let cluster = EmbeddedCluster::start_with(config, 2, 2).await.unwrap();
        let shared = &cluster.jobmanager.shared;
        let steady = shared
            .submit(
                ProgramSpec::new("stream-sum", vec!["--rate".into(), "1000".into()]),
                Some(2),
                &[],
                None,
            )
            .await
            .unwrap();
        let args = vec![
            "--rate".into(),
            "0".into(),
            "--records".into(),
            "100000".into(),
            "--poison-at".into(),
            "5000".into(),
        ];
        let poisoned = shared
            .submit(ProgramSpec::new("stream-sum", args), Some(2), &[], None)
            .await
            .unwrap();
        assert_eq!(wait_terminal(&cluster, poisoned).await, JobStatus::Failed);
        {
            let d = shared.view();
            let jm = d.job(poisoned).expect("the job");
            assert_eq!(jm.restarts(), 2);
            assert_eq!(jm.exceptions().len(), 3, "{:?}", jm.exceptions());
            assert!(
                jm.exceptions()
                    .iter()
                    .all(|e| e.exception.contains("poisoned record: key 0 reached")),
                "{:?}",
                jm.exceptions()
            );
            assert!(
                jm.exceptions()[2]
                    .exception
                    .starts_with("Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy")
            );
            assert_eq!(d.job(steady).expect("the job").status(), JobStatus::Running);
            assert_eq!(d.resources().total_slots(), 4, "no TaskManager died");
        }
        shared.cancel(steady).unwrap();
        assert_eq!(wait_terminal(&cluster, steady).await, JobStatus::Canceled);
    }

    /// `file://` URIs (the form Flink's configurations use) name the same directories as plain
    /// paths, for checkpoints and savepoints alike; nothing lands in a `file:` directory under
    /// the working directory.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn file_uris_name_checkpoint_and_savepoint_directories() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = dir.path().join("chk");
        let savepoints = dir.path().join("sp");
        let mut config = Config::default();
        config
            .set("execution.checkpointing.interval", "100 ms")
            .unwrap();
        config
            .set(
                "execution.checkpointing.dir",
                &format!("file://{}", checkpoints.display()),
            )
            .unwrap();
        let cluster = EmbeddedCluster::start(config, 2).await.unwrap();
        let shared = &cluster.jobmanager.shared;
        let job = shared
            .submit(
                ProgramSpec::new("stream-sum", vec!["--rate".into(), "1000".into()]),
                Some(2),
                &[],
                None,
            )
            .await
            .unwrap();
        let root = checkpoints.join(job.to_string());
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_dir(&root)
            .is_ok_and(|mut e| e.any(|e| e.is_ok_and(|e| e.path().join("_metadata").exists())))
        {
            assert!(
                Instant::now() < deadline,
                "no checkpoint in {}",
                root.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let target = format!("file:{}", savepoints.display());
        let request = shared
            .trigger_savepoint(job, Some(target), AfterSavepoint::Stop)
            .unwrap();
        let path = loop {
            let result = shared
                .view()
                .job(job)
                .and_then(|jm| jm.savepoint(&request).and_then(|r| r.result.clone()));
            if let Some(result) = result {
                break result.expect("the savepoint completes");
            }
            assert!(Instant::now() < deadline, "the savepoint did not complete");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(
            path.starts_with(&savepoints.display().to_string()),
            "{path}"
        );
        assert!(std::path::Path::new(&path).join("_metadata").exists());
        assert!(!std::path::Path::new("file:").exists());
        // hdfs:// targets are storage paths now; a scheme no file system serves is refused.
        let refused =
            shared.trigger_savepoint(job, Some("s3://bucket/sp".into()), AfterSavepoint::Run);
        assert!(
            matches!(&refused, Err(crate::jobmanager::dispatcher::SavepointError::BadTarget(e)) if e.contains("scheme 's3'")),
            "{refused:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancel_stops_an_unbounded_job_and_frees_slots() {
        let cluster = EmbeddedCluster::start(Config::default(), 2).await.unwrap();
        let shared = &cluster.jobmanager.shared;
        let job = shared
            .submit(
                ProgramSpec::new("stream-sum", vec!["--rate".into(), "0".into()]),
                Some(2),
                &[],
                None,
            )
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while cluster.taskmanagers[0].running_tasks() < 2 {
            assert!(Instant::now() < deadline, "tasks did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(shared.view().resources().free_slots(), 0);
        shared.cancel(job).unwrap();
        assert_eq!(wait_terminal(&cluster, job).await, JobStatus::Canceled);
        assert_eq!(shared.view().resources().free_slots(), 2);
    }
}

#[cfg(test)]
mod event_time {
    use super::*;
    use crate::api::{JobProgram, ProgramRegistry, StreamExecutionEnvironment, WatermarkStrategy};
    use crate::rpc::messages::ProgramSpec;
    use std::collections::BTreeMap;

    /// Numbers whose event time is their value in ms, up to 40 ms out of order, through an
    /// exchange by key.
    struct OutOfOrder;

    impl JobProgram for OutOfOrder {
        fn name(&self) -> &str {
            "out-of-order"
        }
        fn description(&self) -> &str {
            "numbers with event times, out of order, keyed"
        }
        fn usage(&self) -> &str {
            ""
        }
        fn build(&self, env: &StreamExecutionEnvironment, _: &[String]) -> Result<String, String> {
            // Every 8th number comes 40 ms late.
            env.generate(4_000, |i| if i % 8 == 0 { i.saturating_sub(40) } else { i })
                .assign_timestamps_and_watermarks(
                    WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(50))
                        .with_timestamp_assigner(|n: &u64, _| *n as i64),
                )
                .map(|n| (n % 4, n))
                .key_by(|pair: &(u64, u64)| pair.0)
                .reduce(|a, b| (a.0, a.1.max(b.1)))
                .discard();
            Ok("out of order".into())
        }
    }

    /// Per-key counts of tumbling 100 ms windows over numbers whose event times are up to 20 ms
    /// out of order, written to [`WINDOWS`].
    struct WindowedCounts;

    /// `(key, window start, count)` as the window job's sink got them.
    static WINDOWS: std::sync::Mutex<Vec<(u64, i64, u64)>> = std::sync::Mutex::new(Vec::new());

    /// Event time of the `i`th number: every 5th one comes 20 ms late.
    fn event_time(i: u64) -> i64 {
        i as i64 - if i.is_multiple_of(5) { 20 } else { 0 }
    }

    struct Remember;

    impl crate::api::SinkFunction<(u64, i64, u64)> for Remember {
        fn invoke(&mut self, record: (u64, i64, u64)) -> Result<(), crate::api::TaskError> {
            WINDOWS.lock().unwrap().push(record);
            Ok(())
        }
    }

    impl JobProgram for WindowedCounts {
        fn name(&self) -> &str {
            "windowed-counts"
        }
        fn description(&self) -> &str {
            "tumbling event-time window counts"
        }
        fn usage(&self) -> &str {
            ""
        }
        fn build(&self, env: &StreamExecutionEnvironment, _: &[String]) -> Result<String, String> {
            env.generate_bounded(30_000, 0, |i| (i % 3, event_time(i)))
                .assign_timestamps_and_watermarks(
                    WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(30))
                        .with_timestamp_assigner(|r: &(u64, i64), _| r.1),
                )
                .map(|(key, _)| (key, 1u64))
                .key_by(|r: &(u64, u64)| r.0)
                .window(crate::api::TumblingEventTimeWindows::of(
                    Duration::from_millis(100),
                ))
                .reduce_with(
                    |a, b| (a.0, a.1 + b.1),
                    |key, window, (_, count)| (*key, window.start, count),
                )
                .add_sink("Remember", |_| Ok(Remember));
            Ok("windowed counts".into())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tumbling_window_counts_are_exact_under_out_of_order_input_in_both_backends() {
        let mut expected = std::collections::BTreeMap::new();
        for i in 0..30_000u64 {
            let ts = event_time(i);
            *expected
                .entry((i % 3, ts.div_euclid(100) * 100))
                .or_insert(0u64) += 1;
        }
        for backend in ["hashmap", "rocksdb"] {
            WINDOWS.lock().unwrap().clear();
            let (cluster, job) =
                run_on_two_taskmanagers(WindowedCounts, &[("state.backend.type", backend)]).await;
            let shared = &cluster.jobmanager.shared;
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let status = shared.view().job(job).expect("the job").status();
                if status.is_globally_terminal() {
                    assert_eq!(status, crate::jobmanager::jobmaster::JobStatus::Finished);
                    break;
                }
                assert!(Instant::now() < deadline, "the job did not finish");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut got = std::collections::BTreeMap::new();
            for (key, start, count) in WINDOWS.lock().unwrap().drain(..) {
                assert!(
                    got.insert((key, start), count).is_none(),
                    "window ({key}, {start}) emitted twice ({backend})"
                );
            }
            assert_eq!(got, expected, "{backend}");
        }
    }

    /// Starts two TaskManagers of one slot with `config` set, and `program` on them at
    /// parallelism 2.
    async fn run_on_two_taskmanagers(
        program: impl JobProgram + 'static,
        config: &[(&str, &str)],
    ) -> (EmbeddedCluster, crate::common::ids::JobId) {
        let name = program.name().to_string();
        let mut programs = ProgramRegistry::new();
        programs.register(Arc::new(program)).unwrap();
        let mut c = Config::default();
        for (key, value) in config {
            c.set(key, value).unwrap();
        }
        let cluster = EmbeddedCluster::start_running(c, 2, 1, programs)
            .await
            .unwrap();
        let spec = ProgramSpec::new(name, vec![]);
        let job = cluster
            .jobmanager
            .shared
            .submit(spec, Some(2), &[], None)
            .await
            .unwrap();
        (cluster, job)
    }

    /// The per-subtask input watermarks of vertex `v`, as the JobManager last heard them.
    fn input_watermarks(
        cluster: &EmbeddedCluster,
        job: crate::common::ids::JobId,
        v: u32,
    ) -> Vec<i64> {
        cluster
            .jobmanager
            .shared
            .metrics()
            .subtasks(job, v)
            .into_iter()
            .map(|(_, m)| m.latest().current_input_watermark)
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn watermarks_cross_the_exchange_between_taskmanagers_and_advance() {
        let (cluster, job) =
            run_on_two_taskmanagers(OutOfOrder, &[("heartbeat.interval", "200 ms")]).await;
        let shared = &cluster.jobmanager.shared;
        // Vertex 1 (the keyed reduce) reads both sources' subtasks, one of them over QUIC from
        // the other TaskManager: its input watermark is the least of theirs.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            let marks = input_watermarks(&cluster, job, 1);
            assert!(
                Instant::now() < deadline,
                "watermarks did not advance: {marks:?}"
            );
            if marks.len() == 2 && marks.iter().all(|&w| w > 1_000) {
                seen.push(marks);
                if seen.len() >= 2 {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // They only move forward, and never past what the sources can have emitted by now
        // (4000 numbers per second, each its own event time in ms).
        for s in 0..2 {
            assert!(seen[1][s] >= seen[0][s], "{seen:?}");
        }
        let elapsed_ms = (Instant::now() - (deadline - Duration::from_secs(30))).as_millis() as i64;
        assert!(
            seen[1].iter().all(|&w| w < 4 * elapsed_ms + 1_000),
            "{seen:?}"
        );
        // And REST serves them as Flink does.
        let url = format!(
            "http://{}/jobs/{job}/vertices/{}/watermarks",
            cluster.rest_address(),
            shared.view().job(job).unwrap().graph().vertices[1].id
        );
        let body: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        let ids: Vec<&str> = body
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            ["0.currentInputWatermark", "1.currentInputWatermark"],
            "{body}"
        );
        let value: i64 = body[0]["value"].as_str().unwrap().parse().unwrap();
        assert!(value > 1_000, "{body}");
        shared.cancel(job).unwrap();
    }

    /// Per-key counts of tumbling 1 s windows with 500 ms of allowed lateness, over numbers
    /// whose event times are mostly in order, some 300 ms late (within the lateness) and some
    /// 2 s late (too late): one window sends those to a side output, which crosses the network
    /// to a process function; a second, equal window drops them and counts them.
    struct LateWindows;

    const LATE_RECORDS: u64 = 40_000;

    /// `(key, event time)` of the `i`th record.
    fn late_record(i: u64) -> (u64, i64) {
        let now = (i / 8) as i64;
        let ts = if i.is_multiple_of(11) {
            now - 300
        } else if i.is_multiple_of(17) && now >= 2_500 {
            now - 2_000
        } else {
            now
        };
        (i % 3, ts)
    }

    /// Each window result `(key, window start, count)` in the order emitted, per branch.
    static LATE_FIRINGS: std::sync::Mutex<Vec<(u64, i64, u64)>> = std::sync::Mutex::new(Vec::new());
    static DROPPING_FIRINGS: std::sync::Mutex<Vec<(u64, i64, u64)>> =
        std::sync::Mutex::new(Vec::new());
    static SLIDING_FIRINGS: std::sync::Mutex<Vec<(u64, i64, u64)>> =
        std::sync::Mutex::new(Vec::new());
    /// What reached the late-data side output: `(key, timestamp in the record, timestamp in
    /// the context)`.
    static TOO_LATE: std::sync::Mutex<Vec<(u64, i64, i64)>> = std::sync::Mutex::new(Vec::new());
    /// The same for the sliding window: `(key, timestamp)`.
    static SLIDING_TOO_LATE: std::sync::Mutex<Vec<(u64, i64)>> = std::sync::Mutex::new(Vec::new());

    struct Store<T: 'static>(&'static std::sync::Mutex<Vec<T>>);

    impl<T: 'static> crate::api::SinkFunction<T> for Store<T> {
        fn invoke(&mut self, record: T) -> Result<(), crate::api::TaskError> {
            self.0.lock().unwrap().push(record);
            Ok(())
        }
    }

    /// Watermarks at every record: the largest timestamp seen less 100 ms, so that what the
    /// window sees depends on the data only (there is one source subtask).
    struct Punctuated(i64);

    impl crate::api::WatermarkGenerator<(u64, i64)> for Punctuated {
        fn on_event(&mut self, _: &(u64, i64), ts: i64, out: &mut crate::api::WatermarkOutput) {
            self.0 = self.0.max(ts);
            out.emit_watermark(self.0 - 101);
        }
        fn on_periodic_emit(&mut self, _: &mut crate::api::WatermarkOutput) {}
    }

    /// Passes each late record on with the timestamp its context shows.
    #[derive(Clone)]
    struct WithContextTime;

    impl crate::api::ProcessFunction<(u64, i64, u64), (u64, i64, i64)> for WithContextTime {
        fn process_element(
            &mut self,
            (key, ts, _): (u64, i64, u64),
            ctx: &mut crate::api::ProcessContext<'_>,
            out: &mut crate::api::Collector<'_, (u64, i64, i64)>,
        ) -> Result<(), crate::api::TaskError> {
            out.collect((key, ts, ctx.timestamp().unwrap_or(i64::MIN)))
        }
    }

    impl JobProgram for LateWindows {
        fn name(&self) -> &str {
            "late-windows"
        }
        fn description(&self) -> &str {
            "windows with allowed lateness and a late-data side output"
        }
        fn usage(&self) -> &str {
            ""
        }
        fn build(&self, env: &StreamExecutionEnvironment, _: &[String]) -> Result<String, String> {
            let late = crate::api::OutputTag::<(u64, i64, u64)>::new("late");
            let keyed = env
                .generate_bounded(LATE_RECORDS, 20_000, late_record)
                .set_parallelism(1)
                .assign_timestamps_and_watermarks(
                    WatermarkStrategy::for_generator(|| Punctuated(i64::MIN + 101))
                        .with_timestamp_assigner(|r: &(u64, i64), _| r.1),
                )
                .set_parallelism(1)
                .map(|(key, ts)| (key, ts, 1u64))
                .set_parallelism(1)
                .key_by(|r: &(u64, i64, u64)| r.0);
            let window = || {
                keyed
                    .window(crate::api::TumblingEventTimeWindows::of(
                        Duration::from_secs(1),
                    ))
                    .allowed_lateness(Duration::from_millis(500))
            };
            let count = |a: (u64, i64, u64), b: (u64, i64, u64)| (a.0, a.1, a.2 + b.2);
            let with_window = |key: &u64, w: crate::api::TimeWindow, (_, _, n): (u64, i64, u64)| {
                (*key, w.start, n)
            };
            let firings = window()
                .side_output_late_data(&late)
                .reduce_with(count, with_window);
            firings.add_sink("Firings", |_| Ok(Store(&LATE_FIRINGS)));
            firings
                .get_side_output(&late)
                .rebalance()
                .process(WithContextTime)
                .add_sink("Too late", |_| Ok(Store(&TOO_LATE)));
            let sliding = keyed
                .window(crate::api::SlidingEventTimeWindows::of(
                    Duration::from_secs(1),
                    Duration::from_millis(500),
                ))
                .allowed_lateness(Duration::from_millis(500))
                .side_output_late_data(&late)
                .reduce_with(count, with_window);
            sliding.add_sink("Sliding firings", |_| Ok(Store(&SLIDING_FIRINGS)));
            // This side output goes through a hash exchange.
            sliding
                .get_side_output(&late)
                .key_by(|r: &(u64, i64, u64)| r.0)
                .map(|(key, ts, _)| (key, ts))
                .add_sink("Sliding too late", |_| Ok(Store(&SLIDING_TOO_LATE)));
            window()
                .reduce_with(count, with_window)
                .name("Window Reduce (dropping)")
                .add_sink("Dropping firings", |_| Ok(Store(&DROPPING_FIRINGS)));
            Ok("late windows".into())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn late_records_update_windows_within_lateness_and_go_to_the_side_output_beyond_it() {
        // What the job must compute: every record within the lateness counts in its window;
        // the 2 s late ones reach the side output with their timestamps (or are dropped).
        let mut expected = BTreeMap::new();
        let mut expected_sliding = BTreeMap::new();
        let mut too_late = Vec::new();
        for i in 0..LATE_RECORDS {
            let (key, ts) = late_record(i);
            if (i / 8) as i64 - ts == 2_000 {
                too_late.push((key, ts, ts));
            } else {
                let start = ts.div_euclid(1000) * 1000;
                *expected.entry((key, start)).or_insert(0u64) += 1;
                // The sliding windows of 1 s every 500 ms that hold `ts`.
                let last = ts.div_euclid(500) * 500;
                for start in [last - 500, last] {
                    *expected_sliding.entry((key, start)).or_insert(0u64) += 1;
                }
            }
        }
        too_late.sort();
        for backend in ["hashmap", "rocksdb"] {
            for store in [&LATE_FIRINGS, &DROPPING_FIRINGS, &SLIDING_FIRINGS] {
                store.lock().unwrap().clear();
            }
            TOO_LATE.lock().unwrap().clear();
            SLIDING_TOO_LATE.lock().unwrap().clear();
            // With checkpoints every 100 ms over the job's two seconds: the job only finishes
            // once a checkpoint covers all its sinks, so barriers must reach the side outputs'
            // consumers too.
            let dir = tempfile::tempdir().unwrap();
            let checkpoints = dir.path().display().to_string();
            let config = [
                ("state.backend.type", backend),
                ("execution.checkpointing.interval", "100 ms"),
                ("execution.checkpointing.dir", checkpoints.as_str()),
            ];
            let (cluster, job) = run_on_two_taskmanagers(LateWindows, &config).await;
            let shared = &cluster.jobmanager.shared;
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let status = shared.view().job(job).expect("the job").status();
                if status.is_globally_terminal() {
                    assert_eq!(status, crate::jobmanager::jobmaster::JobStatus::Finished);
                    break;
                }
                assert!(Instant::now() < deadline, "the job did not finish");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let counts = shared.view().job(job).unwrap().checkpoints().stats().counts;
            assert!(counts.completed > 0, "{backend}: {counts:?}");
            let branches = [
                ("side output", &LATE_FIRINGS, &expected),
                ("dropping", &DROPPING_FIRINGS, &expected),
                ("sliding", &SLIDING_FIRINGS, &expected_sliding),
            ];
            for (branch, store, expected) in branches {
                // Each window fires when the watermark passes it and again for each record
                // within the lateness after that: its counts only grow, and its last one
                // counts every record that was not too late.
                let mut last = BTreeMap::new();
                let mut late_firings = 0;
                for (key, start, count) in store.lock().unwrap().drain(..) {
                    if let Some(before) = last.insert((key, start), count) {
                        assert!(count > before, "{branch} {backend}: ({key}, {start})");
                        late_firings += 1;
                    }
                }
                assert_eq!(&last, expected, "{branch} {backend}");
                assert!(late_firings > 100, "{branch} {backend}: {late_firings}");
            }
            let mut got = std::mem::take(&mut *TOO_LATE.lock().unwrap());
            got.sort();
            assert_eq!(got, too_late, "{backend}");
            let mut sliding_late = std::mem::take(&mut *SLIDING_TOO_LATE.lock().unwrap());
            sliding_late.sort();
            let once: Vec<(u64, i64)> = too_late.iter().map(|&(k, ts, _)| (k, ts)).collect();
            assert_eq!(sliding_late, once, "{backend}: each too-late record once");
            // The dropping window counted what it dropped, as `numLateRecordsDropped`.
            let graph = shared.view().job(job).unwrap().graph().clone();
            let dropping = graph
                .vertices
                .iter()
                .position(|v| v.name.contains("(dropping)"))
                .unwrap();
            let side = graph
                .vertices
                .iter()
                .position(|v| v.name.contains("Firings"))
                .unwrap();
            let url = format!(
                "http://{}/jobs/{job}/vertices/{}/subtasks/metrics?get=numLateRecordsDropped&agg=sum",
                cluster.rest_address(),
                graph.vertices[dropping].id
            );
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let body: serde_json::Value =
                    reqwest::get(&url).await.unwrap().json().await.unwrap();
                if body[0]["sum"].as_f64() == Some(too_late.len() as f64) {
                    break;
                }
                assert!(Instant::now() < deadline, "{backend}: {body}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let dropped = |v: usize| -> u64 {
                shared
                    .metrics()
                    .subtasks(job, v as u32)
                    .into_iter()
                    .map(|(_, m)| m.latest().late_records_dropped)
                    .sum()
            };
            assert_eq!(dropped(side), 0, "late records went to the side output");
        }
    }
}

#[cfg(test)]
mod throughput {
    use super::*;
    use crate::rpc::messages::ProgramSpec;

    /// Not a test: `cargo test -p sluice --lib throughput -- --ignored --nocapture` prints rough
    /// numbers while developing; the benchmarks live in bench/.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a rough measurement, not a test"]
    async fn rough_throughput() {
        for (tms, slots) in [(1, 2), (2, 1)] {
            let cluster = EmbeddedCluster::start_with(Config::default(), tms, slots)
                .await
                .unwrap();
            let n = 10_000_000u64;
            let args = vec![
                "--records".into(),
                n.to_string(),
                "--rate".into(),
                "0".into(),
                "--keys".into(),
                "10000".into(),
            ];
            let started = Instant::now();
            let job = cluster
                .jobmanager
                .shared
                .submit(ProgramSpec::new("stream-sum", args), Some(2), &[], None)
                .await
                .unwrap();
            loop {
                let status = cluster
                    .jobmanager
                    .shared
                    .view()
                    .job(job)
                    .expect("the job")
                    .status();
                if status.is_globally_terminal() {
                    println!(
                        "{tms} TM x {slots} slots: {status:?} {n} records in {:?}: {:.2} M records/s",
                        started.elapsed(),
                        n as f64 / started.elapsed().as_secs_f64() / 1e6
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

#[cfg(test)]
mod nexmark_tests;

#[cfg(test)]
mod window_tests;

#[cfg(test)]
mod two_inputs {
    use super::*;
    use crate::api::{
        Collector, Context, JobProgram, KeyedCoProcessFunction, ProgramRegistry,
        StreamExecutionEnvironment,
    };
    use crate::checkpoint::AfterSavepoint;
    use crate::common::ids::JobId;
    use crate::jobmanager::jobmaster::JobStatus;
    use crate::rpc::messages::ProgramSpec;
    use crate::state::ValueState;
    use std::collections::BTreeMap;

    async fn wait_terminal(cluster: &EmbeddedCluster, job: JobId) -> JobStatus {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let status = cluster
                .jobmanager
                .shared
                .view()
                .job(job)
                .expect("the job")
                .status();
            if status.is_globally_terminal() || Instant::now() > deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs the bundled `program` with `args` (`--key value` separated by single spaces) and
    /// `--output DIR` at `parallelism` on a fresh cluster of `(TaskManagers, slots each)`; when
    /// it has finished, the lines of its output files, each file's in order.
    pub(super) async fn output_of(
        config: Config,
        (taskmanagers, slots): (u32, u32),
        program: &str,
        args: &str,
        parallelism: u32,
    ) -> Vec<String> {
        let programs = crate::examples::bundled();
        output_with(
            config,
            (taskmanagers, slots),
            programs,
            program,
            args,
            parallelism,
        )
        .await
    }

    /// [`output_of`] for a program of `programs`.
    pub(super) async fn output_with(
        config: Config,
        (taskmanagers, slots): (u32, u32),
        programs: crate::api::ProgramRegistry,
        program: &str,
        args: &str,
        parallelism: u32,
    ) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("out");
        let cluster = EmbeddedCluster::start_running(config, taskmanagers, slots, programs)
            .await
            .unwrap();
        let args = format!("{args} --output {}", output.display());
        let args = args.split(' ').map(String::from).collect();
        let job = cluster
            .jobmanager
            .shared
            .submit(
                ProgramSpec::new(program, args),
                Some(parallelism),
                &[],
                None,
            )
            .await
            .unwrap();
        assert_eq!(wait_terminal(&cluster, job).await, JobStatus::Finished);
        lines_in(&output)
    }

    /// The lines of the visible files in `dir` and its folders.
    fn lines_in(dir: &std::path::Path) -> Vec<String> {
        let mut lines = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return lines;
        };
        for entry in entries {
            let entry = entry.unwrap();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if entry.path().is_dir() {
                lines.extend(lines_in(&entry.path()));
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).unwrap();
            lines.extend(text.lines().map(String::from));
        }
        lines
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn auction_bids_across_two_taskmanagers_equal_a_brute_force_interval_join() {
        let (auctions, bids, duration) = (3000, 12_000, 30);
        let args = format!("--auctions {auctions} --bids {bids} --duration {duration}");
        let mut got = output_of(Config::default(), (2, 2), "auction-bids", &args, 3).await;
        got.sort();
        let expected = crate::examples::expected_auction_bids(auctions, bids, duration);
        assert!(
            expected.len() > bids as usize / 2,
            "most bids meet: {}",
            expected.len()
        );
        assert!(
            expected.len() < bids as usize,
            "some bids come after the auction closed"
        );
        assert_eq!(got.len(), expected.len());
        assert_eq!(got, expected);
    }

    /// `counting` over two inputs: even seqs come from one source, odd ones from the other,
    /// and one count per key (`seq % K`) in keyed state counts the records of both; each
    /// record gives a `seq key count` line, exactly once into a directory. Exact output
    /// (`check_counting`) needs the keyed state shared by both inputs, and kept through
    /// savepoints and rescaling.
    struct CoCounting;

    /// The count of a key over both inputs.
    struct CountBoth {
        count: ValueState<u64>,
    }

    impl CountBoth {
        fn count(
            &self,
            seq: u64,
            key: u64,
            out: &mut Collector<'_, String>,
        ) -> Result<(), crate::api::TaskError> {
            let count = self.count.update_with(|c| c.unwrap_or(0) + 1)?;
            out.collect(format!("{seq} {key} {count}"))
        }
    }

    impl KeyedCoProcessFunction<u64, u64, (u64, u64), String> for CountBoth {
        fn process_element1(
            &mut self,
            key: &u64,
            seq: u64,
            _ctx: &mut Context<'_>,
            out: &mut Collector<'_, String>,
        ) -> Result<(), crate::api::TaskError> {
            self.count(seq, *key, out)
        }
        fn process_element2(
            &mut self,
            key: &u64,
            (seq, _): (u64, u64),
            _ctx: &mut Context<'_>,
            out: &mut Collector<'_, String>,
        ) -> Result<(), crate::api::TaskError> {
            self.count(seq, *key, out)
        }
    }

    impl JobProgram for CoCounting {
        fn name(&self) -> &str {
            "co-counting"
        }
        fn description(&self) -> &str {
            "counting over two connected inputs"
        }
        fn usage(&self) -> &str {
            "--records N --keys K --rate R --output DIR"
        }
        fn build(
            &self,
            env: &StreamExecutionEnvironment,
            args: &[String],
        ) -> Result<String, String> {
            let p = crate::examples::Params::parse(args, &["records", "keys", "rate", "output"])?;
            let (records, keys, rate) = (
                p.number("records", 0)?,
                p.number("keys", 1)?,
                p.number("rate", 0)?,
            );
            let output = p.path("output")?.ok_or("--output")?;
            let evens = env
                .generate_bounded(records.div_ceil(2), rate, |i| i * 2)
                .name("Evens");
            // The second input is of another type: (seq, key).
            let odds = env
                .generate_bounded(records / 2, rate, move |i| (i * 2 + 1, (i * 2 + 1) % keys))
                .name("Odds");
            evens
                .connect(&odds)
                .key_by(move |seq: &u64| seq % keys, |pair: &(u64, u64)| pair.1)
                .process(|store| {
                    Ok(CountBoth {
                        count: store.value_state("count")?,
                    })
                })
                .uid("count-both")
                .sink_to_directory(output);
            Ok("co-counting".into())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keyed_co_process_state_is_exact_through_a_savepoint_and_a_rescaled_restore() {
        for backend in ["hashmap", "rocksdb"] {
            co_counting_through_a_rescaled_savepoint(backend).await;
        }
    }

    /// Takes a savepoint of `job` into `dir` (the job then runs on, stops, or drains and
    /// stops, as `after` says) and waits for its path; panics with the job's exceptions if it
    /// fails.
    async fn savepoint(
        cluster: &EmbeddedCluster,
        job: JobId,
        dir: &std::path::Path,
        after: AfterSavepoint,
    ) -> String {
        let shared = &cluster.jobmanager.shared;
        let target = dir.display().to_string();
        let request = shared.trigger_savepoint(job, Some(target), after).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let view = shared.view();
            let result = view
                .job(job)
                .and_then(|jm| jm.savepoint(&request).and_then(|r| r.result.clone()));
            if let Some(result) = result {
                let failures = view
                    .job(job)
                    .map(|jm| format!("{:?}", jm.exceptions()))
                    .unwrap_or_default();
                return result.unwrap_or_else(|e| panic!("the savepoint failed: {e}; {failures}"));
            }
            drop(view);
            assert!(Instant::now() < deadline, "the savepoint did not complete");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `counting --window-ms` with windows of an hour of event time (each seq is its ms, so
    /// every record is in the first window), stopped with a savepoint a second in and resumed
    /// from it: a plain stop keeps the open windows in the savepoint, so they fire once, after
    /// the resume; a drained stop fires them into the savepoint, and the resumed job fires
    /// what came after in a second result. Either way every record counts exactly once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_keeps_open_windows_in_the_savepoint_and_a_drained_stop_fires_them_first() {
        let (records, keys, window) = (40_000u64, 3u64, 3_600_000u64);
        for after in [AfterSavepoint::Stop, AfterSavepoint::Drain] {
            let dir = tempfile::tempdir().unwrap();
            let output = dir.path().join("out");
            let mut config = Config::default();
            config
                .set("execution.checkpointing.interval", "200 ms")
                .unwrap();
            let checkpoints = dir.path().join("chk").display().to_string();
            config
                .set("execution.checkpointing.dir", &checkpoints)
                .unwrap();
            config.set("state.backend.type", "rocksdb").unwrap();
            let cluster = EmbeddedCluster::start_running(config, 2, 1, crate::examples::bundled())
                .await
                .unwrap();
            let shared = &cluster.jobmanager.shared;
            let args = |rate: u64| -> Vec<String> {
                format!(
                    "--records {records} --keys {keys} --rate {rate} --window-ms {window} --output {}",
                    output.display()
                )
                .split(' ')
                .map(String::from)
                .collect()
            };
            let spec = |rate| ProgramSpec::new("counting", args(rate));
            let first = shared
                .submit(spec(8_000), Some(2), &[], None)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let path = savepoint(&cluster, first, &dir.path().join("sp"), after).await;
            assert_eq!(wait_terminal(&cluster, first).await, JobStatus::Finished);
            let before = lines_in(&output);
            match after {
                AfterSavepoint::Drain => assert_eq!(before.len() as u64, keys, "{before:?}"),
                _ => assert_eq!(before, Vec::<String>::new()),
            }
            let second = shared
                .submit(spec(0), Some(2), &[], Some(path))
                .await
                .unwrap();
            assert_eq!(wait_terminal(&cluster, second).await, JobStatus::Finished);
            // A window's results added up: all of its records, each once.
            let mut per_window: BTreeMap<(u64, u64), (u64, u64)> = BTreeMap::new();
            let lines = lines_in(&output);
            for line in &lines {
                let f: Vec<u64> = line.split(' ').map(|f| f.parse().unwrap()).collect();
                let w = per_window.entry((f[0], f[1])).or_default();
                *w = (w.0 + f[2], w.1 + f[3]);
            }
            let added: Vec<String> = per_window
                .iter()
                .map(|((start, key), (n, sum))| format!("{start} {key} {n} {sum}"))
                .collect();
            let report = crate::examples::check_windowed_counting(
                records,
                keys,
                window,
                added.iter().map(String::as_str),
            );
            assert!(report.is_exactly_once(), "{after:?}: {report}");
            let expected = if after == AfterSavepoint::Drain { 2 } else { 1 };
            assert_eq!(lines.len() as u64, expected * keys, "{after:?}: {lines:?}");
        }
    }

    async fn co_counting_through_a_rescaled_savepoint(backend: &str) {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("out");
        let mut config = Config::default();
        config
            .set("execution.checkpointing.interval", "100 ms")
            .unwrap();
        config
            .set(
                "execution.checkpointing.dir",
                &dir.path().join("chk").display().to_string(),
            )
            .unwrap();
        config.set("state.backend.type", backend).unwrap();
        let mut programs = ProgramRegistry::new();
        programs.register(Arc::new(CoCounting)).unwrap();
        let cluster = EmbeddedCluster::start_running(config, 2, 2, programs)
            .await
            .unwrap();
        let shared = &cluster.jobmanager.shared;
        let (records, keys) = (30_000u64, 7u64);
        let args = |rate: u64| -> Vec<String> {
            format!(
                "--records {records} --keys {keys} --rate {rate} --output {}",
                output.display()
            )
            .split(' ')
            .map(String::from)
            .collect()
        };
        // At parallelism 2, slowly, so that the savepoint cuts the input in the middle.
        let first = shared
            .submit(
                ProgramSpec::new("co-counting", args(4000)),
                Some(2),
                &[],
                None,
            )
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while lines_in(&output).len() < 2000 {
            assert!(Instant::now() < deadline, "no output committed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let savepoint = savepoint(
            &cluster,
            first,
            &dir.path().join("sp"),
            AfterSavepoint::Stop,
        )
        .await;
        assert_eq!(wait_terminal(&cluster, first).await, JobStatus::Finished);
        let cut = lines_in(&output).len() as u64;
        assert!(
            cut < records,
            "the savepoint came before the end ({cut} lines, {backend})"
        );
        // The rest at parallelism 3: keys move to other subtasks with their counts.
        let second = shared
            .submit(
                ProgramSpec::new("co-counting", args(0)),
                Some(3),
                &[],
                Some(savepoint),
            )
            .await
            .unwrap();
        assert_eq!(wait_terminal(&cluster, second).await, JobStatus::Finished);
        let report = crate::examples::check_counting_dir(records, keys, None, &output).unwrap();
        assert!(report.is_exactly_once(), "{backend}: {report}");
        assert_eq!(report.lines, records, "{backend}");
        eprintln!("{backend}: {cut} of {records} lines before the savepoint, all exactly once");
    }

    /// What the co-map job's sink got: each line with the timestamp its record carried.
    static CO_MAPPED: std::sync::Mutex<Vec<(Option<i64>, String)>> =
        std::sync::Mutex::new(Vec::new());

    /// Evens with timestamps (their value) connected to odds without, co-flat-mapped to
    /// lines, rebalanced, then a process function that reads each line's timestamp.
    struct CoMap;

    #[derive(Clone)]
    struct WithTimestamp;

    impl crate::api::ProcessFunction<String, (Option<i64>, String)> for WithTimestamp {
        fn process_element(
            &mut self,
            line: String,
            ctx: &mut crate::api::ProcessContext<'_>,
            out: &mut Collector<'_, (Option<i64>, String)>,
        ) -> Result<(), crate::api::TaskError> {
            out.collect((ctx.timestamp(), line))
        }
    }

    struct RememberCoMapped;

    impl crate::api::SinkFunction<(Option<i64>, String)> for RememberCoMapped {
        fn invoke(&mut self, record: (Option<i64>, String)) -> Result<(), crate::api::TaskError> {
            CO_MAPPED.lock().unwrap().push(record);
            Ok(())
        }
    }

    impl JobProgram for CoMap {
        fn name(&self) -> &str {
            "co-map"
        }
        fn description(&self) -> &str {
            "evens with timestamps and odds without, co-flat-mapped"
        }
        fn usage(&self) -> &str {
            ""
        }
        fn build(&self, env: &StreamExecutionEnvironment, _: &[String]) -> Result<String, String> {
            let evens = env
                .generate_bounded(1000, 0, |i| i * 2)
                .assign_timestamps_and_watermarks(
                    crate::api::WatermarkStrategy::for_monotonous_timestamps()
                        .with_timestamp_assigner(|n: &u64, _| *n as i64),
                );
            let odds = env.generate_bounded(1000, 0, |i| (i * 2 + 1, "odd".to_string()));
            evens
                .connect(&odds)
                .flat_map(
                    |n: u64| [format!("even {n}"), format!("twice {}", n * 2)],
                    |(n, what): (u64, String)| Some(format!("{what} {n}")),
                )
                .rebalance()
                .process(WithTimestamp)
                .add_sink("Remember", |_| Ok(RememberCoMapped));
            Ok("co-map".into())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn co_flat_map_keeps_the_timestamps_of_the_input_that_has_them() {
        let mut programs = ProgramRegistry::new();
        programs.register(Arc::new(CoMap)).unwrap();
        let cluster = EmbeddedCluster::start_running(Config::default(), 2, 2, programs)
            .await
            .unwrap();
        let job = cluster
            .jobmanager
            .shared
            .submit(ProgramSpec::new("co-map", vec![]), Some(2), &[], None)
            .await
            .unwrap();
        assert_eq!(wait_terminal(&cluster, job).await, JobStatus::Finished);
        let mut got = std::mem::take(&mut *CO_MAPPED.lock().unwrap());
        got.sort();
        let mut expected = Vec::new();
        for i in 0..1000u64 {
            let n = i * 2;
            expected.push((Some(n as i64), format!("even {n}")));
            expected.push((Some(n as i64), format!("twice {}", n * 2)));
            // A record of the input without timestamps has none in the stamped result.
            expected.push((Some(i64::MIN), format!("odd {}", n + 1)));
        }
        expected.sort();
        assert_eq!(got, expected);
    }
}
