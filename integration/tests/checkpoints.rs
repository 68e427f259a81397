//! Checkpoints, savepoints and restores with real processes, real RocksDB and the exactly-once
//! file sink, proven by the `counting` workload and its checker.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice_integration::{StandaloneCluster, counting_args, signal, wait_for};

/// How a rescaled run of `counting` goes.
struct Rescale {
    backend: &'static str,
    before: u32,
    after: u32,
    /// `state.storage.fs.memory-threshold` 0 and the savepoint moved before the restore.
    operator_state_in_files: bool,
    /// `counting --window-ms W`: event-time windows whose state and timers travel in the
    /// savepoint.
    window: Option<u64>,
}

/// The job's completed checkpoint directories (with their `_metadata`; a checkpoint being
/// written has a directory too).
fn chk_dirs(root: &Path, job: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join(job))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().join("_metadata").is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("chk-"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn config(backend: &str, checkpoints: &Path, retained: u32) -> String {
    format!(
        "state.backend.type: {backend}\nexecution.checkpointing.incremental: true\nexecution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {}\nexecution.checkpointing.num-retained: {retained}\nrestart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 5\nrestart-strategy.fixed-delay.delay: 200 ms\n",
        checkpoints.display()
    )
}

/// Runs `counting` under checkpoints, stops it with a savepoint, resumes from the savepoint at
/// another parallelism into the same output directory, and checks every record is there once.
/// With `operator_state_in_files`, `state.storage.fs.memory-threshold` is 0: every operator
/// state (the source's positions, the sink's pending files) goes to a file of the snapshot, and
/// the savepoint is moved to another directory before the restore.
fn stop_and_resume_rescaled(how: Rescale) {
    let Rescale {
        backend,
        before,
        after,
        operator_state_in_files,
        window,
    } = how;
    let scratch = tempfile::tempdir().expect("scratch");
    let checkpoints = scratch.path().join("checkpoints");
    let mut conf = config(backend, &checkpoints, 1);
    if operator_state_in_files {
        conf.push_str("state.storage.fs.memory-threshold: 0\n");
    }
    let cluster = StandaloneCluster::start(2, 2, &conf);
    let output: PathBuf = scratch.path().join("out");
    let savepoints = scratch.path().join("savepoints");
    let (records, keys) = (60_000u64, 7u64);
    let args = |p: u32| {
        let mut args = counting_args(p, records, keys, &output, 8_000);
        if let Some(window) = window {
            args.extend(["--window-ms".to_string(), window.to_string()]);
        }
        args
    };
    let first: Vec<String> = args(before);
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let id = cluster.submit_detached(&first);
    wait_for(Duration::from_secs(40), "two completed checkpoints", || {
        (cluster.completed_checkpoints(&id) >= 2).then_some(())
    });
    // Only the retained checkpoint stays (num-retained 1), the older ones are deleted.
    wait_for(Duration::from_secs(5), "one retained checkpoint", || {
        (chk_dirs(&checkpoints, &id).len() == 1).then_some(())
    });
    let path = cluster.cli_savepoint(&[
        "stop",
        "-m",
        &cluster.rest(),
        "-p",
        &savepoints.display().to_string(),
        &id,
    ]);
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(20));
    assert!(
        Path::new(&path).join("_metadata").is_file(),
        "savepoint {path} has no _metadata"
    );
    // The savepoint is self-contained: it survives the deletion of the job's checkpoints.
    let _ = std::fs::remove_dir_all(checkpoints.join(&id));
    let path = if operator_state_in_files {
        let files: Vec<String> = std::fs::read_dir(&path)
            .expect("the savepoint")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with("-operator"))
            .collect();
        assert!(
            files.len() >= before as usize,
            "operator state files in {path}: {files:?}"
        );
        // And relocatable: moved elsewhere, it restores from there.
        let moved = scratch.path().join("moved");
        std::fs::create_dir(&moved).expect("mkdir");
        let moved = moved.join(Path::new(&path).file_name().expect("a name"));
        std::fs::rename(&path, &moved).expect("move the savepoint");
        moved.display().to_string()
    } else {
        path
    };

    let mut second = vec!["-s".to_string(), path.clone()];
    second.extend(args(after));
    let second: Vec<&str> = second.iter().map(String::as_str).collect();
    let id2 = cluster.submit_detached(&second);
    cluster.wait_state(&id2, "FINISHED", Duration::from_secs(60));
    let report = cluster.expect_exactly_once((records, keys, window), &output, backend);
    assert!(report.starts_with("OK"), "{report}");
    // A finished job's checkpoints are deleted (NO_EXTERNALIZED_CHECKPOINTS), also any
    // directory of a checkpoint that was being written.
    let left: Vec<_> = std::fs::read_dir(checkpoints.join(&id2))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("chk-"))
        .collect();
    assert!(left.is_empty(), "checkpoint directories left: {left:?}");
}

#[test]
fn rocksdb_stop_with_savepoint_then_resume_at_higher_parallelism_is_exactly_once() {
    stop_and_resume_rescaled(Rescale {
        backend: "rocksdb",
        before: 2,
        after: 3,
        operator_state_in_files: false,
        window: None,
    });
}

#[test]
fn hashmap_stop_with_savepoint_then_resume_at_lower_parallelism_is_exactly_once() {
    stop_and_resume_rescaled(Rescale {
        backend: "hashmap",
        before: 3,
        after: 1,
        operator_state_in_files: false,
        window: None,
    });
}

#[test]
fn operator_state_in_files_survives_a_moved_savepoint_and_rescaling_exactly_once() {
    stop_and_resume_rescaled(Rescale {
        backend: "hashmap",
        before: 2,
        after: 3,
        operator_state_in_files: true,
        window: None,
    });
}

/// Windows open at the savepoint (their slices and timers in RocksDB, redistributed by key
/// group to three subtasks) fire after the restore, each once, with exactly its records.
#[test]
fn windows_open_at_a_savepoint_fire_once_after_a_rescaled_restore_on_rocksdb() {
    stop_and_resume_rescaled(Rescale {
        backend: "rocksdb",
        before: 2,
        after: 3,
        operator_state_in_files: false,
        window: Some(700),
    });
}

/// Any regular file below `dir` other than `_metadata`, largest first.
fn state_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| {
                // Not the metadata, nor a file still being written (they start with a dot).
                n != "_metadata" && !n.to_string_lossy().starts_with('.')
            }) {
                files.push((e.metadata().map(|m| m.len()).unwrap_or(0), p));
            }
        }
    }
    files.sort();
    files.into_iter().rev().map(|(_, p)| p).collect()
}

#[test]
fn a_damaged_latest_checkpoint_falls_back_to_the_previous_one_and_loses_nothing() {
    let scratch = tempfile::tempdir().expect("scratch");
    let checkpoints = scratch.path().join("checkpoints");
    // Three TaskManagers of one slot for a job of parallelism 2: one is the spare.
    let cluster = StandaloneCluster::start(3, 1, &config("rocksdb", &checkpoints, 2));
    let output = scratch.path().join("out");
    let (records, keys) = (50_000u64, 5u64);
    let id = cluster.submit_args(&counting_args(2, records, keys, &output, 6000));
    wait_for(Duration::from_secs(40), "two retained checkpoints", || {
        (chk_dirs(&checkpoints, &id).len() == 2).then_some(())
    });
    // Freeze the TaskManagers so no checkpoint completes while we damage the latest one.
    let tms = cluster.pids("taskmanager");
    for &pid in &tms {
        signal("-STOP", pid);
    }
    let mut dirs = chk_dirs(&checkpoints, &id);
    dirs.sort_by_key(|d| d.trim_start_matches("chk-").parse::<u64>().unwrap_or(0));
    let latest = checkpoints
        .join(&id)
        .join(dirs.last().expect("a checkpoint"));
    let previous = dirs[dirs.len() - 2].trim_start_matches("chk-").to_string();
    let victim_file = state_files(&latest)
        .into_iter()
        .next()
        .expect("a private state file in the latest checkpoint");
    std::fs::remove_file(&victim_file).expect("remove a state file");
    // Kill a TaskManager that runs the job's subtasks; let the others go on.
    let victim = *tms
        .iter()
        .find(|&&pid| cluster.logs_of_pid_mention(pid, &id))
        .expect("a TaskManager running the job");
    signal("-9", victim);
    for &pid in tms.iter().filter(|&&p| p != victim) {
        signal("-CONT", pid);
    }
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(90));
    let name = victim_file.display().to_string();
    let log = cluster.logs("jobmanager").concat();
    assert!(
        log.contains(&name),
        "the JobManager log names the damaged file {name}"
    );
    assert!(
        log.contains(&format!(
            "restoring from a checkpoint checkpoint={previous}"
        )),
        "the job restored checkpoint {previous}"
    );
    // Checkpoint n had committed its output before it was damaged, so what came between n-1
    // and n is written again (as with Flink's two-phase sinks): nothing is lost, though.
    let out = cluster.cli(&[
        "check-counting",
        "--records",
        &records.to_string(),
        "--keys",
        &keys.to_string(),
        &output.display().to_string(),
    ]);
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !report.contains("missing") && !report.contains("malformed"),
        "{report}"
    );
}

#[test]
fn resuming_from_a_savepoint_with_a_missing_file_is_refused_naming_the_file() {
    let scratch = tempfile::tempdir().expect("scratch");
    let checkpoints = scratch.path().join("checkpoints");
    let cluster = StandaloneCluster::start(1, 2, &config("hashmap", &checkpoints, 1));
    let output = scratch.path().join("out");
    let id = cluster.submit_args(&counting_args(2, 1_000_000, 3, &output, 5000));
    cluster.wait_state(&id, "RUNNING", Duration::from_secs(30));
    let savepoints = scratch.path().join("sp");
    let path = cluster.cli_savepoint(&[
        "savepoint",
        "-m",
        &cluster.rest(),
        &id,
        &savepoints.display().to_string(),
    ]);
    // A savepoint leaves the job running.
    assert_eq!(cluster.job_state(&id), "RUNNING");
    let out = cluster.cli(&["cancel", "-m", &cluster.rest(), &id]);
    assert!(out.status.success());
    let victim = state_files(Path::new(&path))
        .into_iter()
        .next()
        .expect("a state file in the savepoint");
    std::fs::remove_file(&victim).expect("remove");
    let out = cluster.cli(&[
        "run",
        "-m",
        &cluster.rest(),
        "-d",
        "-s",
        &path,
        "counting",
        "--records",
        "1000",
        "--keys",
        "3",
        "--output",
        &output.display().to_string(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success());
    assert!(
        stderr.contains(&victim.display().to_string()),
        "the error names the missing file: {stderr}"
    );
}
