//! Upgrading a job as Flink users do: stop it with a savepoint, resume a changed version of
//! the program (the test job's `upgrade-v1`, `-v2`, `-v3`) from the savepoint. State follows
//! the operators' uids through an added operator; state of a removed operator refuses the
//! restore unless `--allowNonRestoredState`; the output stays exactly once throughout.

use std::path::Path;
use std::time::Duration;

use sluice_integration::{StandaloneCluster, test_job_bin, wait_for};

const RECORDS: u64 = 120_000;
const KEYS: u64 = 7;

/// `sluice run` arguments of version `version` of the upgrade job, detached, at parallelism 2.
fn version_args(version: u32, output: &Path, savepoint: Option<&str>, allow: bool) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(path) = savepoint {
        args.extend(["-s".to_string(), path.to_string()]);
    }
    if allow {
        args.push("--allowNonRestoredState".into());
    }
    args.extend(
        [
            "-p",
            "2",
            "-c",
            &format!("upgrade-v{version}"),
            test_job_bin().to_str().expect("a UTF-8 path"),
            "--records",
            &RECORDS.to_string(),
            "--keys",
            &KEYS.to_string(),
            "--rate",
            "6000",
            "--output",
            &output.display().to_string(),
        ]
        .map(str::to_string),
    );
    args
}

/// Waits for a completed checkpoint of the running job, then stops it with a savepoint into
/// `dir`; returns the savepoint's path.
fn stop_with_savepoint(cluster: &StandaloneCluster, id: &str, dir: &Path) -> String {
    wait_for(Duration::from_secs(40), "a completed checkpoint", || {
        (cluster.completed_checkpoints(id) >= 1).then_some(())
    });
    let path = cluster.cli_savepoint(&[
        "stop",
        "-m",
        &cluster.rest(),
        "-p",
        &dir.display().to_string(),
        id,
    ]);
    cluster.wait_state(id, "FINISHED", Duration::from_secs(20));
    path
}

/// The stored metadata names the stateful operators by uid.
fn uids_in(savepoint: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(savepoint).join("_metadata")).expect("metadata");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(json["version"], 3, "{text}");
    let mut uids: Vec<String> = json["operators"]
        .as_object()
        .expect("operators")
        .values()
        .filter_map(|o| o["uid"].as_str().map(str::to_string))
        .collect();
    uids.sort();
    uids
}

#[test]
fn a_changed_program_resumes_from_a_savepoint_by_uid_exactly_once() {
    let scratch = tempfile::tempdir().expect("scratch");
    let conf = format!(
        "state.backend.type: rocksdb\nexecution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {}\n",
        scratch.path().join("checkpoints").display()
    );
    let cluster = StandaloneCluster::start(2, 2, &conf);
    let output = scratch.path().join("out");
    let savepoints = scratch.path().join("savepoints");

    // Version 1 runs a while and stops with a savepoint.
    let v1 = cluster.submit_args(&version_args(1, &output, None, false));
    let first = stop_with_savepoint(&cluster, &v1, &savepoints);
    assert_eq!(
        uids_in(&first),
        [
            "count-per-key",
            "directory-sink",
            "largest-seq",
            "sequence-source"
        ]
    );

    // Version 2 adds a filter to the source's chain: every stateful operator finds its state
    // by uid, and it goes on counting where version 1 stopped.
    let v2 = cluster.submit_args(&version_args(2, &output, Some(&first), false));
    cluster.wait_state(&v2, "RUNNING", Duration::from_secs(30));
    let second = stop_with_savepoint(&cluster, &v2, &savepoints);

    // Version 3 lacks the largest-seq operator, whose keyed state is in the savepoint: refused
    // with Flink's message, naming the operator's uid, and no job runs.
    let args = version_args(3, &output, Some(&second), false);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rest = cluster.rest();
    let mut run = vec!["run", "-m", rest.as_str(), "-d"];
    run.extend_from_slice(&args);
    let out = cluster.cli(&run);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Failed to rollback to checkpoint/savepoint {second}. Cannot map checkpoint/savepoint state for operator"
        )) && stderr.contains("(uid \"largest-seq\")")
            && stderr.contains("--allowNonRestoredState"),
        "{stderr}"
    );

    // With --allowNonRestoredState it skips that state and finishes the counting exactly once.
    let v3 = cluster.submit_args(&version_args(3, &output, Some(&second), true));
    cluster.wait_state(&v3, "FINISHED", Duration::from_secs(90));
    let (ok, report) = cluster.check_counting(RECORDS, KEYS, &output);
    assert!(
        ok && report.starts_with("OK"),
        "not exactly once:\n{report}"
    );
    let log = cluster.logs("jobmanager").concat();
    assert!(
        log.contains("skipping the state of an operator the program no longer has")
            && log.contains("largest-seq"),
        "the JobManager logs the skipped state"
    );
}
