//! The Kafka connector against a real broker (scripts/kafka.sh, one per test binary): the
//! source reads every record exactly once through a savepoint and a rescaled restart, bounded
//! mode ends the job, a missing topic or an unreachable broker fails the job naming it, the
//! sink writes what the job produced (read back with a consumer), and the exactly-once sink
//! writes every record of Kafka → counting → Kafka once through TaskManager kills, a frozen
//! TaskManager and a broker restart (read back with a `read_committed` consumer, checked by
//! `sluice check-counting`); partitions added while the job runs or while it is stopped are
//! discovered and read once, and event-time windows over Kafka timestamps count every record
//! of a partition that lags the other by an hour (watermarks per partition).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use sluice_integration::kafka::{Broker, Produced, broker};
use sluice_integration::{
    StandaloneCluster, all_running, free_port, reference_counts, signal, wait_for,
};

fn config(checkpoints: &Path, restarts: bool) -> String {
    let restart = if restarts {
        "restart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 5\nrestart-strategy.fixed-delay.delay: 200 ms\n"
    } else {
        "restart-strategy.type: none\n"
    };
    format!(
        "execution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {}\n{restart}",
        checkpoints.display()
    )
}

/// `n` lines of words from a small vocabulary, numbered from `first` so batches differ.
fn lines(first: usize, n: usize) -> Vec<(String, String)> {
    const WORDS: [&str; 7] = [
        "kafka", "flink", "sluice", "stream", "offset", "topic", "barrier",
    ];
    (first..first + n)
        .map(|i| {
            let line = (0..1 + i % 5)
                .map(|j| WORDS[(i * 3 + j * 5) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ");
            (format!("k{i}"), line)
        })
        .collect()
}

/// The latest count per word the job wrote: the largest (counts only grow). Read as a
/// `read_committed` consumer, which sees all of an at-least-once sink's records and the
/// committed ones of an exactly-once sink.
fn output_counts(broker: &Broker, topic: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for (_, key, value) in broker.read_all(topic, true) {
        let (word, count) = value.rsplit_once(' ').expect("'word count'");
        assert_eq!(word, key, "the record's key is its word");
        let count: u64 = count.parse().expect("a count");
        let c = counts.entry(word.to_string()).or_insert(0);
        *c = (*c).max(count);
    }
    counts
}

fn text_of(batches: &[&[(String, String)]]) -> String {
    batches
        .iter()
        .flat_map(|b| b.iter().map(|(_, line)| format!("{line}\n")))
        .collect()
}

fn wordcount_args(
    p: u32,
    broker: &Broker,
    input: &str,
    output: &str,
    group: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = [
        "-p",
        &p.to_string(),
        "kafka-wordcount",
        "--bootstrap-servers",
        &broker.bootstrap,
        "--input-topic",
        input,
        "--output-topic",
        output,
        "--group-id",
        group,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

#[test]
fn the_source_reads_every_record_once_through_a_savepoint_and_a_rescaled_restart() {
    let broker = broker();
    let (input, output, group) = ("wc-in", "wc-out", "wc-group");
    broker.create_topic(input, 5);
    broker.create_topic(output, 2);
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster = StandaloneCluster::start(2, 2, &config(&scratch.path().join("chk"), true));
    let (a, b, c) = (lines(0, 400), lines(400, 300), lines(700, 300));
    broker.produce(input, None, &a);
    let id = cluster.submit_args(&wordcount_args(2, broker, input, output, group, &[]));
    wait_for(Duration::from_secs(60), "two completed checkpoints", || {
        (cluster.completed_checkpoints(&id) >= 2).then_some(())
    });
    // More input while the job runs, then a stop with a savepoint.
    broker.produce(input, None, &b);
    let expected_ab = reference_counts(&text_of(&[&a, &b]));
    wait_for(
        Duration::from_secs(60),
        "the counts of the first two batches",
        || (output_counts(broker, output) == expected_ab).then_some(()),
    );
    // The group's committed offsets follow the completed checkpoints: soon all of a and b.
    wait_for(
        Duration::from_secs(30),
        "offsets committed to the group",
        || {
            let committed: i64 = broker.committed(group, input, 5).values().sum();
            (committed == (a.len() + b.len()) as i64).then_some(())
        },
    );
    let savepoint = cluster.cli_savepoint(&[
        "stop",
        "-m",
        &cluster.rest(),
        "-p",
        &scratch.path().join("sp").display().to_string(),
        &id,
    ]);
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(30));
    // Input while the job is stopped; the restored offsets win over "latest", at parallelism 3.
    broker.produce(input, None, &c);
    let mut args = vec!["-s".to_string(), savepoint];
    args.extend(wordcount_args(
        3,
        broker,
        input,
        output,
        group,
        &["--starting-offsets", "latest"],
    ));
    let id2 = cluster.submit_args(&args);
    let expected = reference_counts(&text_of(&[&a, &b, &c]));
    wait_for(
        Duration::from_secs(90),
        "the counts of all three batches",
        || {
            let got = output_counts(broker, output);
            // A record read twice would push a count past the reference: never wait for that.
            for (word, count) in &got {
                assert!(
                    *count <= expected[word],
                    "'{word}' counted {count} times, {} expected: a record was read twice",
                    expected[word]
                );
            }
            (got == expected).then_some(())
        },
    );
    cluster.cli(&["cancel", "-m", &cluster.rest(), &id2]);
}

/// Waits until the job's counts are `expected`, failing at once if a word is counted more
/// often than the reference (a record read twice).
fn wait_for_counts(broker: &Broker, output: &str, expected: &BTreeMap<String, u64>, what: &str) {
    wait_for(Duration::from_secs(90), what, || {
        let got = output_counts(broker, output);
        for (word, count) in &got {
            assert!(
                *count <= expected[word],
                "'{word}' counted {count} times, {} expected: a record was read twice",
                expected[word]
            );
        }
        (&got == expected).then_some(())
    });
}

/// `records` spread over `partitions` of `topic`, round-robin.
fn produce_to(
    broker: &Broker,
    topic: &str,
    partitions: std::ops::Range<i32>,
    records: &[(String, String)],
) {
    let parts: Vec<i32> = partitions.collect();
    let records: Vec<Produced> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| Produced {
            partition: Some(parts[i % parts.len()]),
            timestamp: None,
            key: key.clone(),
            value: value.clone(),
        })
        .collect();
    broker.produce_records(topic, &records);
}

/// Partition discovery: partitions added while the job runs are found and read from their
/// start (records written to them before discovery noticed them included); the positions
/// survive a killed TaskManager; partitions added while the job is stopped are read after a
/// restore from a savepoint at another parallelism (2 -> 3 over 8 partitions), though it
/// starts from "latest"; nothing is read twice or lost.
#[test]
fn partitions_added_while_running_or_stopped_are_discovered_and_read_once() {
    let broker = broker();
    let (input, output, group) = ("disc-in", "disc-out", "disc-group");
    broker.create_topic(input, 2);
    broker.create_topic(output, 2);
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster = StandaloneCluster::start(2, 2, &config(&scratch.path().join("chk"), true));
    let (a, b, c, d) = (
        lines(0, 200),
        lines(200, 300),
        lines(500, 200),
        lines(700, 300),
    );
    broker.produce(input, None, &a);
    let discovery = ["--partition-discovery-interval-ms", "500"];
    let id = cluster.submit_args(&wordcount_args(2, broker, input, output, group, &discovery));
    wait_for_counts(
        broker,
        output,
        &reference_counts(&text_of(&[&a])),
        "the first batch",
    );
    // Three partitions more; records go to them at once, before discovery can notice them.
    broker.add_partitions(input, 5);
    produce_to(broker, input, 2..5, &b);
    wait_for_counts(
        broker,
        output,
        &reference_counts(&text_of(&[&a, &b])),
        "the records of the discovered partitions",
    );
    let logs: usize = cluster
        .logs("taskmanager")
        .iter()
        .map(|l| l.matches("discovered new partitions").count())
        .sum();
    assert!(logs >= 1, "no subtask logged a discovery");
    // A TaskManager dies; the restored positions include the discovered partitions.
    let now = cluster.completed_checkpoints(&id);
    wait_for(
        Duration::from_secs(60),
        "a checkpoint after the discovery",
        || (cluster.completed_checkpoints(&id) >= now + 2).then_some(()),
    );
    signal("-9", cluster.pids("taskmanager")[0]);
    let out = cluster.script("taskmanager.sh", &["start"]);
    assert!(out.status.success(), "taskmanager.sh start failed");
    produce_to(broker, input, 0..5, &c);
    wait_for_counts(
        broker,
        output,
        &reference_counts(&text_of(&[&a, &b, &c])),
        "the counts after the failover",
    );
    let savepoint = cluster.cli_savepoint(&[
        "stop",
        "-m",
        &cluster.rest(),
        "-p",
        &scratch.path().join("sp").display().to_string(),
        &id,
    ]);
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(30));
    // While it is stopped the topic grows to 8 partitions, and only the new ones get records.
    broker.add_partitions(input, 8);
    produce_to(broker, input, 5..8, &d);
    let mut args = vec!["-s".to_string(), savepoint];
    let mut extra = vec!["--starting-offsets", "latest"];
    extra.extend(discovery);
    args.extend(wordcount_args(3, broker, input, output, group, &extra));
    let id2 = cluster.submit_args(&args);
    wait_for_counts(
        broker,
        output,
        &reference_counts(&text_of(&[&a, &b, &c, &d])),
        "every batch after the rescaled restore",
    );
    // Still reading every partition, each once, at parallelism 3.
    let e = lines(1000, 160);
    produce_to(broker, input, 0..8, &e);
    wait_for_counts(
        broker,
        output,
        &reference_counts(&text_of(&[&a, &b, &c, &d, &e])),
        "input after the restore",
    );
    cluster.cli(&["cancel", "-m", &cluster.rest(), &id2]);
}

/// Event time from Kafka record timestamps with watermarks per partition: a subtask reads two
/// partitions whose times are an hour apart, the one ahead read first. With one watermark for
/// the subtask, the first partition's records would move it an hour on and the other's
/// records would come late and be dropped; per partition, the lagging one holds the watermark
/// back and every record lands in its window.
#[test]
fn event_time_windows_over_kafka_timestamps_count_every_record_of_a_lagging_partition() {
    let broker = broker();
    let (input, output) = ("et-in", "et-out");
    broker.create_topic(input, 2);
    broker.create_topic(output, 1);
    let (base, window) = (1_700_000_000_000i64, 10_000i64);
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    let mut batch = |partition: i32, from: i64| -> Vec<Produced> {
        (0..300i64)
            .map(|i| {
                let ts = from + i * 250;
                let word = ["alpha", "beta", "gamma"][(i % 3) as usize];
                let end = (ts - ts.rem_euclid(window)) + window;
                *expected.entry(format!("{word}@{end}")).or_insert(0) += 1;
                Produced {
                    partition: Some(partition),
                    timestamp: Some(ts),
                    key: format!("k{i}"),
                    value: word.to_string(),
                }
            })
            .collect()
    };
    let (ahead, behind) = (batch(0, base + 3_600_000), batch(1, base));
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster = StandaloneCluster::start(1, 2, &config(&scratch.path().join("chk"), false));
    let id = cluster.submit_args(&wordcount_args(
        1,
        broker,
        input,
        output,
        "et-group",
        &["--window-ms", &window.to_string()],
    ));
    wait_for(Duration::from_secs(60), "the job to run", || {
        all_running(&cluster.job(&id)).then_some(())
    });
    broker.produce_records(input, &ahead);
    // Periodic watermarks (every 200 ms) go out after the first partition's records.
    std::thread::sleep(Duration::from_secs(2));
    broker.produce_records(input, &behind);
    // A record two hours on in each partition moves both watermarks past every window above.
    let closer = |partition| Produced {
        partition: Some(partition),
        timestamp: Some(base + 7_200_000),
        key: "end".into(),
        value: "end".into(),
    };
    broker.produce_records(input, &[closer(0), closer(1)]);
    wait_for_counts(broker, output, &expected, "every window of both partitions");
    cluster.cli(&["cancel", "-m", &cluster.rest(), &id]);
}

#[test]
fn bounded_mode_ends_the_job_at_the_end_offsets_of_its_start() {
    let broker = broker();
    let (input, output) = ("bounded-in", "bounded-out");
    broker.create_topic(input, 3);
    broker.create_topic(output, 1);
    let batch = lines(0, 500);
    broker.produce(input, None, &batch);
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster = StandaloneCluster::start(1, 4, &config(&scratch.path().join("chk"), false));
    // Parallelism 4 over 3 partitions: one subtask has none and must end too. The input topic
    // is found by a pattern (`--input-pattern` replaces `--input-topic`). The output is exactly
    // once: the final checkpoint after the input's end commits the last transactions.
    let id = cluster.submit_args(&wordcount_args(
        4,
        broker,
        "unused",
        output,
        "bounded-group",
        &[
            "--bounded",
            "--input-pattern",
            "bounded-i.*",
            "--delivery-guarantee",
            "exactly-once",
        ],
    ));
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(90));
    assert_eq!(
        output_counts(broker, output),
        reference_counts(&text_of(&[&batch]))
    );
}

/// The job's root exception (waits for the job to fail).
fn failure_of(cluster: &StandaloneCluster, args: &[String]) -> String {
    let id = cluster.submit_args(args);
    cluster.wait_state(&id, "FAILED", Duration::from_secs(90));
    let exceptions = cluster
        .get(&format!("/jobs/{id}/exceptions"))
        .expect("exceptions");
    exceptions.to_string()
}

#[test]
fn a_missing_topic_or_an_unreachable_broker_fails_the_job_naming_it() {
    let broker = broker();
    broker.create_topic("present-out", 1);
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster = StandaloneCluster::start(1, 2, &config(&scratch.path().join("chk"), false));
    let missing = failure_of(
        &cluster,
        &wordcount_args(
            1,
            broker,
            "no-such-topic",
            "present-out",
            "g",
            &["--bounded"],
        ),
    );
    assert!(
        missing.contains("no-such-topic") && missing.contains(&broker.bootstrap),
        "{missing}"
    );
    let down = Broker {
        dir: scratch.path().to_path_buf(),
        bootstrap: format!("127.0.0.1:{}", free_port()),
    };
    let unreachable = failure_of(
        &cluster,
        &wordcount_args(1, &down, "some-topic", "present-out", "g", &["--bounded"]),
    );
    assert!(
        unreachable.contains(&down.bootstrap) && unreachable.contains("some-topic"),
        "{unreachable}"
    );
    // The exactly-once sink's transaction timeout above the broker's maximum (900000 ms, the
    // default of scripts/kafka.sh) fails the job at start, naming both values.
    let mut args = wordcount_args(1, broker, "present-out", "present-out", "g", &[]);
    args.extend(
        [
            "--delivery-guarantee",
            "exactly-once",
            "--transaction-timeout-ms",
            "1000000",
        ]
        .map(String::from),
    );
    let timeout = failure_of(&cluster, &args);
    assert!(
        timeout.contains("transaction.timeout.ms=1000000")
            && timeout.contains("transaction.max.timeout.ms=900000"),
        "{timeout}"
    );
}

/// `counting` from Kafka topic `input` to Kafka topic `output`, exactly once.
fn kafka_counting_args(
    p: u32,
    broker: &Broker,
    input: &str,
    output: &str,
    keys: u64,
) -> Vec<String> {
    [
        "-p",
        &p.to_string(),
        "counting",
        "--keys",
        &keys.to_string(),
        "--bootstrap-servers",
        &broker.bootstrap,
        "--input-topic",
        input,
        "--output-topic",
        output,
        "--delivery-guarantee",
        "exactly-once",
        // A transaction left open by a killed TaskManager hides later ones from read_committed
        // consumers until it is aborted: at the latest after this timeout.
        "--transaction-timeout-ms",
        "15000",
    ]
    .map(String::from)
    .to_vec()
}

/// The seqs `first..first + n` as input records.
fn seqs(first: u64, n: u64) -> Vec<(String, String)> {
    (first..first + n)
        .map(|s| (format!("s{s}"), s.to_string()))
        .collect()
}

/// Writes what a `read_committed` consumer sees of `topic` into `dir/part` and lets
/// `sluice check-counting` judge it; returns the number of lines and the report.
fn check_committed(
    cluster: &StandaloneCluster,
    broker: &Broker,
    topic: &str,
    records: u64,
    keys: u64,
    dir: &Path,
) -> (usize, bool, String) {
    let lines: Vec<String> = broker
        .read_all(topic, true)
        .into_iter()
        .map(|(_, _, value)| value)
        .collect();
    std::fs::create_dir_all(dir).expect("check dir");
    std::fs::write(dir.join("part"), lines.join("\n") + "\n").expect("write lines");
    let (ok, report) = cluster.check_counting(records, keys, dir);
    (lines.len(), ok && report.starts_with("OK"), report)
}

#[test]
fn exactly_once_kafka_to_counting_to_kafka_through_kills_a_freeze_and_a_broker_restart() {
    let broker = broker();
    let (input, output) = ("eo-in", "eo-out");
    broker.create_topic(input, 3);
    broker.create_topic(output, 2);
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster = StandaloneCluster::start(2, 2, &config(&scratch.path().join("chk"), true));
    let (batch, batches, keys) = (1500u64, 6u64, 7u64);
    let id = cluster.submit_args(&kafka_counting_args(2, broker, input, output, keys));
    let running = |cluster: &StandaloneCluster| {
        wait_for(Duration::from_secs(60), "the job to run", || {
            all_running(&cluster.job(&id)).then_some(())
        })
    };
    running(&cluster);
    let checkpoints_after = |n: u64| {
        let now = cluster.completed_checkpoints(&id);
        wait_for(Duration::from_secs(60), "completed checkpoints", || {
            (cluster.completed_checkpoints(&id) >= now + n).then_some(())
        });
    };
    for b in 0..batches {
        broker.produce(input, None, &seqs(b * batch, batch));
        match b {
            // A TaskManager dies with records in flight; a replacement joins.
            1 | 3 => {
                std::thread::sleep(Duration::from_millis(300));
                let victim = cluster.pids("taskmanager")[0];
                signal("-9", victim);
                let out = cluster.script("taskmanager.sh", &["start"]);
                assert!(out.status.success(), "taskmanager.sh start failed");
                running(&cluster);
            }
            // A TaskManager freezes for a moment (SIGSTOP) with records in flight, then
            // goes on where it stood.
            2 => {
                let frozen = cluster.pids("taskmanager")[0];
                signal("-STOP", frozen);
                std::thread::sleep(Duration::from_secs(3));
                signal("-CONT", frozen);
            }
            // The broker goes away and comes back while the job runs.
            4 => broker.restart(),
            _ => {}
        }
        checkpoints_after(1);
    }
    let dir = scratch.path().join("check");
    let all_committed = |cluster: &StandaloneCluster, records: u64| {
        let mut last = String::new();
        let seen = wait_for(
            Duration::from_secs(120),
            "every record committed to the output",
            || {
                let (lines, ok, report) =
                    check_committed(cluster, broker, output, records, keys, &dir);
                assert!(
                    lines as u64 <= records,
                    "more lines than records:\n{report}"
                );
                last = report;
                ok.then_some(lines)
            },
        );
        assert_eq!(seen as u64, records, "{last}");
    };
    all_committed(&cluster, batch * batches);
    // Nothing more arrives later (a transaction committed twice would).
    checkpoints_after(2);
    let (lines, ok, report) =
        check_committed(&cluster, broker, output, batch * batches, keys, &dir);
    assert!(ok && lines as u64 == batch * batches, "{report}");
    // Stop with a savepoint, write more input while the job is down, and resume at parallelism
    // 3: the savepoint's intervals are recovered by the subtasks they are dealt to.
    let savepoint = cluster.cli_savepoint(&[
        "stop",
        "-m",
        &cluster.rest(),
        "-p",
        &scratch.path().join("sp").display().to_string(),
        &id,
    ]);
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(30));
    broker.produce(input, None, &seqs(batch * batches, batch));
    let mut args = vec!["-s".to_string(), savepoint];
    args.extend(kafka_counting_args(3, broker, input, output, keys));
    let id = cluster.submit_args(&args);
    all_committed(&cluster, batch * (batches + 1));
    let restored = cluster
        .logs("taskmanager")
        .iter()
        .map(|l| {
            l.matches("commits the restored checkpoint's intervals")
                .count()
        })
        .sum::<usize>();
    eprintln!("restored intervals were committed {restored} times");
    // The uncommitted view holds at least as much: aborted attempts, if a kill caught one.
    assert!(broker.read_all(output, false).len() as u64 >= batch * (batches + 1));
    cluster.cli(&["cancel", "-m", &cluster.rest(), &id]);
}
