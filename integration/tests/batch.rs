//! Batch execution on a standalone cluster of real processes: a batch job of parallelism 8
//! runs stage by stage on two slots, its exchanges written to disk and read back by the next
//! stage; a TaskManager killed in the middle costs a restart of its region only (the subtasks
//! that ran there), and the job still counts every word exactly; nothing is left on disk. A
//! batch aggregation with more keys than its slot's managed memory holds spills sorted runs
//! and still counts exactly.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_integration::{
    StandaloneCluster, make_text, read_counts, reference_counts, signal, wait_for,
};

/// The files left in the TaskManagers' blocking-partition folders under `local_base`.
fn partition_files(local_base: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for state_dir in std::fs::read_dir(local_base)
        .into_iter()
        .flatten()
        .flatten()
    {
        let shuffle = state_dir.path().join("shuffle");
        for file in std::fs::read_dir(&shuffle).into_iter().flatten().flatten() {
            found.push(file.path().display().to_string());
        }
    }
    found
}

/// Per vertex of job `id`: its name and each subtask's attempt number.
fn attempts(cluster: &StandaloneCluster, id: &str) -> Vec<(String, Vec<u64>)> {
    let job = cluster.job(id);
    job["vertices"]
        .as_array()
        .expect("vertices")
        .iter()
        .map(|v| {
            let vid = v["id"].as_str().expect("vertex id");
            let detail = cluster
                .get(&format!("/jobs/{id}/vertices/{vid}"))
                .expect("vertex details");
            let attempts = detail["subtasks"]
                .as_array()
                .expect("subtasks")
                .iter()
                .map(|s| s["attempt"].as_u64().expect("attempt"))
                .collect();
            (v["name"].as_str().unwrap_or_default().to_string(), attempts)
        })
        .collect()
}

/// How many subtasks of `vertex` (by position) are in `state`, from `GET /jobs/:id`.
fn tasks_in(job: &Value, vertex: usize, state: &str) -> u64 {
    job["vertices"][vertex]["tasks"][state]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn a_batch_wordcount_of_parallelism_8_runs_on_two_slots_and_a_lost_taskmanager_reruns_only_its_part()
 {
    let local = tempfile::tempdir().expect("temp dir");
    let cluster = StandaloneCluster::start(
        2,
        1,
        &format!(
            "state.backend.rocksdb.localdir: {}\nrestart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 10\nrestart-strategy.fixed-delay.delay: 200 ms",
            local.path().display()
        ),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("input.txt");
    let text_in = make_text(64 * 1024 * 1024);
    std::fs::write(&input, &text_in).expect("write input");
    let expected = reference_counts(&text_in);

    // Parallelism 8 on two slots: stage by stage, two subtasks at a time.
    let output = dir.path().join("counts");
    let started = Instant::now();
    let out = cluster.cli(&[
        "run",
        "-m",
        &cluster.rest(),
        "-p",
        "8",
        "wordcount",
        "--input",
        &input.display().to_string(),
        "--output",
        &output.display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = sluice_integration::job_id_of(&stdout);
    eprintln!(
        "MEASURED batch wordcount -p 8 on 2 slots over 64 MiB: {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!(read_counts(&output), expected);
    let details = cluster.job(&job);
    assert_eq!(details["job-type"], "BATCH", "{details}");
    for (name, attempts) in attempts(&cluster, &job) {
        assert_eq!(attempts, vec![0; 8], "{name} ran once per subtask");
    }
    let logs = cluster.logs("taskmanager").join("\n");
    assert!(logs.contains("blocking partition written"), "{logs}");
    wait_for(
        Duration::from_secs(10),
        "the finished job's partition files to be removed",
        || partition_files(local.path()).is_empty().then_some(()),
    );

    // The same job again, and one TaskManager killed once part of the first stage finished.
    let output = dir.path().join("counts-after-kill");
    let job = cluster.submit_detached(&[
        "-p",
        "8",
        "wordcount",
        "--input",
        &input.display().to_string(),
        "--output",
        &output.display().to_string(),
    ]);
    wait_for(
        Duration::from_secs(60),
        "three to six of the first stage's eight subtasks to finish",
        || {
            let j = cluster.get(&format!("/jobs/{job}")).ok()?;
            (3..=6).contains(&tasks_in(&j, 0, "FINISHED")).then_some(())
        },
    );
    let victims = cluster.pids("taskmanager");
    assert_eq!(victims.len(), 2, "{victims:?}");
    signal("-9", victims[1]);
    let out = cluster.script("taskmanager.sh", &["start"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.wait_state(&job, "FINISHED", Duration::from_secs(120));
    assert_eq!(read_counts(&output), expected);
    let runs = attempts(&cluster, &job);
    let total: usize = runs.iter().map(|(_, a)| a.len()).sum();
    let restarted: usize = runs
        .iter()
        .map(|(_, a)| a.iter().filter(|&&n| n > 0).count())
        .sum();
    eprintln!(
        "MEASURED batch region failover: {restarted} of {total} subtasks ran again ({runs:?})"
    );
    assert!(
        restarted >= 1,
        "the lost TaskManager's work ran again: {runs:?}"
    );
    assert!(
        restarted < total,
        "only the lost TaskManager's part ran again, not the whole job: {runs:?}"
    );
    let exceptions = cluster.exceptions(&job).to_string();
    assert!(exceptions.contains("was lost"), "{exceptions}");
    wait_for(
        Duration::from_secs(10),
        "the partition files to be removed",
        || partition_files(local.path()).is_empty().then_some(()),
    );
}

/// Managed memory of 1 MiB per TaskManager (one slot each) against 300,000 distinct words: each
/// subtask's table fills its share many times over, spills sorted runs to disk and merges them
/// at the end; the counts are exact and no run is left behind.
#[test]
fn a_batch_aggregation_with_more_keys_than_its_managed_memory_spills_and_counts_exactly() {
    let cluster = StandaloneCluster::start(2, 1, "taskmanager.memory.managed.size: 1 mb\n");
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("input.txt");
    // Every word three times, in another order each time (7919 is prime to 300,000).
    let mut text_in = String::new();
    for round in 0..3u64 {
        for i in 0..300_000u64 {
            text_in.push_str(&format!("k{} ", (i * 7919 + round * 1_000) % 300_000));
            if i % 16 == 15 {
                text_in.push('\n');
            }
        }
    }
    std::fs::write(&input, &text_in).expect("write input");
    let expected = reference_counts(&text_in);
    assert_eq!(expected.len(), 300_000);
    let output = dir.path().join("counts");
    let started = Instant::now();
    let out = cluster.cli(&[
        "run",
        "-m",
        &cluster.rest(),
        "-p",
        "2",
        "wordcount",
        "--input",
        &input.display().to_string(),
        "--output",
        &output.display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "MEASURED batch wordcount -p 2 of {} distinct words with 1 MiB of managed memory per slot: {} ms",
        expected.len(),
        started.elapsed().as_millis()
    );
    assert_eq!(read_counts(&output), expected);
    let logs = cluster.logs("taskmanager").join("\n");
    let spills: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("a batch aggregation outgrew its memory"))
        .collect();
    for line in &spills {
        let field = |name: &str| line.split_whitespace().find(|w| w.starts_with(name));
        eprintln!(
            "MEASURED a subtask's spill: {} {}",
            field("runs=").unwrap_or("?"),
            field("spilled_bytes=").unwrap_or("?")
        );
    }
    assert_eq!(spills.len(), 2, "each aggregating subtask spilled:\n{logs}");
}
