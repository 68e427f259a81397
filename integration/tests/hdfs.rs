//! Checkpoints, savepoints, inputs and outputs on a real HDFS (a MiniDFSCluster shared by the
//! tests of this binary): the engine's HDFS storage against the NameNode and DataNodes, RocksDB
//! incremental checkpoints on `hdfs://` surviving a killed TaskManager exactly once, a savepoint
//! on HDFS that still restores, at another parallelism, after it was moved to another HDFS
//! path, and jobs reading text from HDFS and writing through the exactly-once file sink to HDFS.

use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::time::Duration;

use sluice::state::StateStorage;
use sluice::state::fs::{FileSystems, HadoopConf};
use sluice_integration::dfs::{MiniDfs, mini_dfs};
use sluice_integration::{StandaloneCluster, counting_args, signal, wait_for};

/// The engine's storage with the mini cluster's Hadoop configuration.
fn storage(dfs: &MiniDfs) -> FileSystems {
    FileSystems::with_hadoop_conf(HadoopConf::load(&dfs.dir).expect("the mini cluster's conf"))
}

/// A directory of its own under the HDFS root for one test.
fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("/{name}-{}-{nanos}", std::process::id())
}

fn cluster(dfs: &MiniDfs, taskmanagers: usize, slots: u32, extra: &str) -> StandaloneCluster {
    let config = format!(
        "state.backend.type: rocksdb\nexecution.checkpointing.incremental: true\nexecution.checkpointing.interval: 1 s\nrestart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 5\nrestart-strategy.fixed-delay.delay: 200 ms\n{extra}"
    );
    let conf_dir = dfs.conf_dir();
    StandaloneCluster::start_with_env(
        taskmanagers,
        slots,
        &config,
        &[("HADOOP_CONF_DIR", conf_dir.as_str())],
    )
}

fn assert_exactly_once(cluster: &StandaloneCluster, records: u64, keys: u64, output: &Path) {
    let (ok, report) = cluster.check_counting(records, keys, output);
    assert!(
        ok && report.starts_with("OK"),
        "not exactly once:\n{report}"
    );
}

/// Copies the tree at `from` to `to`, file by file, with `storage` (a directory is what cannot
/// be read as a file).
fn copy_tree(storage: &dyn StateStorage, from: &str, to: &str) -> usize {
    let mut copied = 0;
    for name in storage.list(from).expect("list") {
        let (src, dst) = (format!("{from}/{name}"), format!("{to}/{name}"));
        match storage.read(&src) {
            Ok(bytes) => {
                storage.write(&dst, &bytes).expect("write");
                copied += 1;
            }
            Err(_) => copied += copy_tree(storage, &src, &dst),
        }
    }
    copied
}

#[test]
fn hdfs_storage_writes_atomically_and_errors_name_the_path() {
    let dfs = mini_dfs();
    let fs = storage(dfs);
    let root = dfs.uri(&unique("storage"));
    let file = format!("{root}/a/b/file");
    // Three blocks and a bit (the mini cluster's block size is 1 MiB).
    let big: Vec<u8> = (0..3 * 1024 * 1024 + 17).map(|i| (i % 251) as u8).collect();
    fs.write(&file, &big).unwrap();
    assert_eq!(fs.read(&file).unwrap(), big);
    assert_eq!(fs.size(&file).unwrap(), Some(big.len() as u64));
    // Replacing is a rename over the old file; no temporary file stays beside it.
    fs.write(&file, b"second").unwrap();
    assert_eq!(fs.read(&file).unwrap(), b"second");
    assert_eq!(fs.list(&format!("{root}/a/b")).unwrap(), vec!["file"]);
    // The same file through fs.defaultFS and through the configured name service.
    let path = file.strip_prefix(&dfs.uri("")).unwrap();
    assert_eq!(fs.read(&format!("hdfs://{path}")).unwrap(), b"second");
    let via_ns = format!("hdfs://{}{path}", dfs.nameservice);
    assert_eq!(fs.read(&via_ns).unwrap(), b"second");

    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("up");
    std::fs::write(&src, &big).unwrap();
    assert_eq!(
        fs.upload(&src, &format!("{root}/up")).unwrap(),
        big.len() as u64
    );
    let back = local.path().join("nested/down");
    fs.download(&format!("{root}/up"), &back).unwrap();
    assert_eq!(std::fs::read(&back).unwrap(), big);

    // Streamed reads from any offset, across block boundaries.
    for offset in [0usize, 1, 1024 * 1024 - 1, 2 * 1024 * 1024 + 5, big.len()] {
        let mut got = Vec::new();
        let mut input = fs.open_read(&format!("{root}/up"), offset as u64).unwrap();
        input.read_to_end(&mut got).unwrap();
        assert!(got == big[offset..], "a read from byte {offset}");
    }
    // A streamed write is complete when closed, and a rename puts it in place.
    let (hidden, visible) = (format!("{root}/.s.inprogress"), format!("{root}/s"));
    let mut out = fs.create_file(&hidden).unwrap();
    out.write_all(&big).unwrap();
    out.sync().unwrap();
    out.write_all(b"end").unwrap();
    out.close().unwrap();
    fs.rename(&hidden, &visible).unwrap();
    assert_eq!(fs.size(&hidden).unwrap(), None);
    assert_eq!(fs.read(&visible).unwrap(), [&big[..], b"end"].concat());
    let e = fs.rename(&hidden, &visible).unwrap_err();
    assert!(e.to_string().contains(&hidden), "{e}");
    let Err(e) = fs.create_file(&format!("{root}/no/dir/f")) else {
        panic!("a file created in a missing directory");
    };
    assert!(e.to_string().contains(&format!("{root}/no/dir/f")), "{e}");

    let missing = format!("{root}/nope/_metadata");
    assert_eq!(fs.size(&missing).unwrap(), None);
    assert_eq!(
        fs.list(&format!("{root}/nope")).unwrap(),
        Vec::<String>::new()
    );
    let e = fs.read(&missing).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(
        e.to_string().contains(&missing),
        "the error names the path: {e}"
    );
    // Writing below a file fails, naming the path and HDFS's reason.
    let below = format!("{file}/child");
    let e = fs.write(&below, b"x").unwrap_err();
    assert!(
        e.to_string().contains(&below) && e.to_string().contains("cannot write"),
        "{e}"
    );

    fs.delete_file(&file).unwrap();
    fs.delete_file(&file).unwrap();
    assert_eq!(fs.size(&file).unwrap(), None);
    fs.delete_dir(&root).unwrap();
    fs.delete_dir(&root).unwrap();
    assert_eq!(fs.list(&root).unwrap(), Vec::<String>::new());
}

#[test]
fn rocksdb_incremental_checkpoints_on_hdfs_survive_a_killed_taskmanager_exactly_once() {
    let dfs = mini_dfs();
    let fs = storage(dfs);
    let checkpoints = dfs.uri(&unique("checkpoints"));
    // Three TaskManagers of one slot for a job of parallelism 2: one is the spare.
    let cluster = cluster(
        dfs,
        3,
        1,
        &format!(
            "execution.checkpointing.dir: {checkpoints}\nexecution.checkpointing.num-retained: 2\n"
        ),
    );
    let output = cluster.work_dir().join("out");
    let (records, keys) = (40_000u64, 5u64);
    let id = cluster.submit_args(&counting_args(2, records, keys, &output, 5000));
    wait_for(Duration::from_secs(40), "two completed checkpoints", || {
        (cluster.completed_checkpoints(&id) >= 2).then_some(())
    });
    // The checkpoints are on HDFS: their metadata, and RocksDB's SST files in the job's shared
    // directory, where incremental checkpoints reference them from.
    let job_dir = format!("{checkpoints}/{id}");
    let chk: Vec<String> = fs
        .list(&job_dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("chk-"))
        .filter(|n| {
            fs.size(&format!("{job_dir}/{n}/_metadata"))
                .unwrap()
                .is_some()
        })
        .collect();
    assert!(!chk.is_empty(), "no completed checkpoint in {job_dir}");
    let shared = fs.list(&format!("{job_dir}/shared")).unwrap();
    assert!(
        shared.iter().any(|n| n.ends_with(".sst")),
        "no SST file in {job_dir}/shared: {shared:?}"
    );

    // Kill a TaskManager that runs the job's subtasks; the job restores from HDFS.
    let victim = *cluster
        .pids("taskmanager")
        .iter()
        .find(|&&pid| cluster.logs_of_pid_mention(pid, &id))
        .expect("a TaskManager running the job");
    signal("-9", victim);
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(90));
    let log = cluster.logs("jobmanager").concat();
    assert!(
        log.contains("restoring from a checkpoint"),
        "the job restored a checkpoint"
    );
    assert_exactly_once(&cluster, records, keys, &output);
    // A finished job's checkpoints are deleted from HDFS (NO_EXTERNALIZED_CHECKPOINTS).
    let left: Vec<String> = fs
        .list(&job_dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("chk-"))
        .collect();
    assert!(left.is_empty(), "checkpoints left on HDFS: {left:?}");
    fs.delete_dir(&checkpoints).unwrap();
}

#[test]
fn a_savepoint_moved_to_another_hdfs_path_restores_at_another_parallelism() {
    let dfs = mini_dfs();
    let fs = storage(dfs);
    let base = unique("savepoints");
    let checkpoints = dfs.uri(&format!("{base}/checkpoints"));
    // Every operator state goes to a file of the snapshot (threshold 0): those move too.
    let cluster = cluster(
        dfs,
        2,
        2,
        &format!(
            "execution.checkpointing.dir: {checkpoints}\nstate.storage.fs.memory-threshold: 0\n"
        ),
    );
    let output = cluster.work_dir().join("out");
    let (records, keys) = (40_000u64, 7u64);
    let id = cluster.submit_args(&counting_args(2, records, keys, &output, 8000));
    wait_for(Duration::from_secs(40), "a completed checkpoint", || {
        (cluster.completed_checkpoints(&id) >= 1).then_some(())
    });
    // The target is named through fs.defaultFS (hdfs:///), as an operator would.
    let target = format!("hdfs://{base}/sp");
    let path = cluster.cli_savepoint(&["stop", "-m", &cluster.rest(), "-p", &target, &id]);
    assert!(path.starts_with(&target), "{path} is not under {target}");
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(20));

    // Move it, through the name service, to a path it was never written to, and delete the
    // original and the job's checkpoints: the copy alone must restore.
    let name = path.trim_end_matches('/').rsplit('/').next().unwrap();
    let moved = format!("hdfs://{}{base}/moved/{name}", dfs.nameservice);
    let copied = copy_tree(&fs, &path, &moved);
    assert!(
        copied >= 2,
        "the savepoint has metadata and state files: {copied}"
    );
    let operator_files = fs
        .list(&moved)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with("-operator"))
        .count();
    assert!(
        operator_files >= 2,
        "operator state files: {operator_files}"
    );
    fs.delete_dir(&path).unwrap();
    fs.delete_dir(&checkpoints).unwrap();

    let mut args = vec!["-s".to_string(), moved.clone()];
    args.extend(counting_args(3, records, keys, &output, 8000));
    let id2 = cluster.submit_args(&args);
    cluster.wait_state(&id2, "FINISHED", Duration::from_secs(60));
    assert_exactly_once(&cluster, records, keys, &output);
    fs.delete_dir(&dfs.uri(&base)).unwrap();
}

/// `counting` arguments reading its seqs from the text input `input` at `rate` lines per second
/// per reading subtask (0: unlimited) and writing to the directory `output`.
fn counting_text_args(p: u32, keys: u64, input: &str, output: &str, rate: u64) -> Vec<String> {
    let p = p.to_string();
    let (keys, rate) = (keys.to_string(), rate.to_string());
    let args = [
        "-p", &p, "counting", "--input", input, "--keys", &keys, "--output", output, "--rate",
        &rate,
    ];
    args.map(String::from).to_vec()
}

/// Writes the seqs `0..records` to `files` files in the HDFS directory `dir`, one per line,
/// dealt round-robin, plus a hidden and an underscore file whose lines a reader must skip.
fn write_seqs(fs: &FileSystems, dir: &str, records: u64, files: u64) {
    for f in 0..files {
        let text: String = (f..records)
            .step_by(files as usize)
            .map(|seq| format!("{seq}\n"))
            .collect();
        fs.write(&format!("{dir}/seqs-{f}"), text.as_bytes())
            .unwrap();
    }
    fs.write(&format!("{dir}/_SUCCESS"), b"not a seq\n")
        .unwrap();
    fs.write(&format!("{dir}/.seqs.crc"), b"not a seq\n")
        .unwrap();
}

/// The names in the HDFS directory `dir` that are committed part files (visible ones).
fn committed(fs: &FileSystems, dir: &str) -> Vec<String> {
    let names = fs.list(dir).unwrap();
    names
        .into_iter()
        .filter(|n| n.starts_with("part-"))
        .collect()
}

#[test]
fn text_input_on_hdfs_to_the_exactly_once_file_sink_on_hdfs_survives_a_killed_taskmanager() {
    let dfs = mini_dfs();
    let fs = storage(dfs);
    let root = dfs.uri(&unique("files"));
    let (input, output) = (format!("{root}/input"), format!("{root}/output"));
    let (records, keys) = (30_000u64, 5u64);
    write_seqs(&fs, &input, records, 3);
    // Three TaskManagers of one slot for a job of parallelism 2: one is the spare.
    let cluster = cluster(
        dfs,
        3,
        1,
        &format!(
            "execution.checkpointing.dir: {root}/checkpoints
"
        ),
    );
    // 2 x 2000 lines/s: the job runs ≈ 7.5 s unless failed.
    let id = cluster.submit_args(&counting_text_args(2, keys, &input, &output, 2000));
    wait_for(Duration::from_secs(40), "two completed checkpoints", || {
        (cluster.completed_checkpoints(&id) >= 2).then_some(())
    });
    assert!(
        !committed(&fs, &output).is_empty(),
        "a completed checkpoint committed part files to {output}"
    );
    let victim = *cluster
        .pids("taskmanager")
        .iter()
        .find(|&&pid| cluster.logs_of_pid_mention(pid, &id))
        .expect("a TaskManager running the job");
    signal("-9", victim);
    cluster.wait_state(&id, "FINISHED", Duration::from_secs(90));
    let log = cluster.logs("jobmanager").concat();
    assert!(
        log.contains("restoring from a checkpoint"),
        "the job restored a checkpoint"
    );
    // Only committed files count: what the killed attempt left in progress or pending is
    // hidden, and every seq of the input is in exactly one committed line.
    assert_exactly_once(&cluster, records, keys, Path::new(&output));
    let hidden: Vec<String> = fs
        .list(&output)
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(
        hidden
            .iter()
            .all(|n| n.ends_with(".inprogress") || n.ends_with(".pending")),
        "{hidden:?}"
    );
    fs.delete_dir(&root).unwrap();
}

#[test]
fn the_text_source_reads_every_line_of_an_hdfs_file_once_at_parallelism_1_and_3() {
    let dfs = mini_dfs();
    let fs = storage(dfs);
    let root = dfs.uri(&unique("text"));
    // ≈ 2.3 MB: three blocks of the mini cluster's 1 MiB, so ranges and lines cross blocks.
    let records = 330_000u64;
    let file = format!("{root}/seqs.txt");
    let text: String = (0..records).map(|seq| format!("{seq}\n")).collect();
    fs.write(&file, text.as_bytes()).unwrap();
    let cluster = cluster(
        dfs,
        1,
        3,
        &format!("execution.checkpointing.dir: {root}/checkpoints\n"),
    );
    for p in [1, 3] {
        let output = format!("{root}/out-{p}");
        let id = cluster.submit_args(&counting_text_args(p, 7, &file, &output, 0));
        cluster.wait_state(&id, "FINISHED", Duration::from_secs(60));
        assert_exactly_once(&cluster, records, 7, Path::new(&output));
        assert!(!committed(&fs, &output).is_empty(), "parallelism {p}");
    }
    fs.delete_dir(&root).unwrap();
}
