//! YARN with nothing shared but HDFS: a real MiniYARNCluster whose NodeManagers localize the
//! shipped files from a real MiniDFSCluster. The client uploads the binary, the configuration
//! and the cluster secret to its HDFS home (`/user/<user>/.sluice/<application id>/`, the
//! default staging directory when `fs.defaultFS` is HDFS); the client's own binary and
//! configuration directory are deleted right after submission and TaskManager containers are
//! still localized (from HDFS) and run a job with checkpoints on `hdfs:///`, exactly once; the
//! staging directory is gone after `--kill`, after a one-job application ended (whose binary
//! came from `yarn.provided.lib.dirs` and was not staged), and after a submission YARN refused.
//!
//! Needs Java 17 and Maven (the launcher is built on first use). `SLUICE_SKIP_YARN=1` skips it.
//! Starts its own clusters (one MiniYARN, one MiniDFS), both at once.

use std::path::Path;
use std::time::{Duration, Instant};

use sluice::state::StateStorage;
use sluice::state::fs::{FileSystems, HadoopConf};
use sluice_integration::dfs::{MiniDfs, mini_dfs};
use sluice_integration::yarn::{
    self, KillOnDrop, MiniYarn, YarnClient, container_processes, field_after, text,
};
use sluice_integration::{sluice_bin, wait_for};

/// The user the test client submits and writes to HDFS as.
const USER: &str = "sluice-it";

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// The test user's HDFS home, made as an administrator makes it: by the superuser (the
/// NameNode's own user, this process's), then given to the user.
fn make_home(dfs: &MiniDfs) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let superuser = hdfs_native::ClientBuilder::new()
        .with_url(dfs.uri(""))
        .build()
        .expect("HDFS client");
    runtime.block_on(async {
        let home = format!("/user/{USER}");
        superuser
            .mkdirs(&home, 0o755, true)
            .await
            .expect("mkdir home");
        superuser
            .set_owner(&home, Some(USER), None)
            .await
            .expect("chown home");
    });
}

/// A process's environment variable, from `/proc`.
fn environment_of(pid: u32, name: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ.split(|b| *b == 0).find_map(|entry| {
        let entry = String::from_utf8_lossy(entry);
        entry.strip_prefix(&format!("{name}=")).map(str::to_string)
    })
}

#[test]
fn applications_localize_from_hdfs_and_leave_no_staging_directory() {
    if yarn::skipped() {
        return;
    }
    let started = Instant::now();
    // One Hadoop configuration directory naming both clusters, the client's and (through the
    // NodeManagers' environment, as on a real node) the containers' HADOOP_CONF_DIR. It is
    // filled once both clusters wrote their site files.
    let conf = tempfile::Builder::new()
        .prefix("sluice-yarn-hdfs-conf-")
        .tempdir_in("/var/tmp")
        .expect("conf dir");
    let conf_dir = conf.path().to_path_buf();
    let dfs_starting = std::thread::spawn(mini_dfs);
    let cluster = MiniYarn::start_with_env(
        "sluice-yarn-hdfs-",
        &[("HADOOP_CONF_DIR", conf_dir.to_str().expect("utf-8"))],
    );
    let dfs = dfs_starting.join().expect("the MiniDFSCluster");
    for (dir, name) in [
        (&dfs.dir, "core-site.xml"),
        (&dfs.dir, "hdfs-site.xml"),
        (&cluster.dir, "yarn-site.xml"),
    ] {
        std::os::unix::fs::symlink(dir.join(name), conf_dir.join(name)).expect("link site file");
    }
    println!("clusters up after {} ms", started.elapsed().as_millis());
    make_home(dfs);
    let client = YarnClient::with_conf_dir(&cluster, conf_dir.clone());
    let hdfs = FileSystems::with_hadoop_conf(HadoopConf::load(&dfs.dir).expect("conf"));
    let staging_root = dfs.uri(&format!("/user/{USER}/.sluice"));
    let staging = |app: &str| format!("{staging_root}/{app}");
    let small = [
        "-D",
        "taskmanager.memory.process.size=256m",
        "-D",
        "jobmanager.memory.process.size=256m",
    ];

    // A submission YARN refuses (no such queue) after the files were uploaded: the client
    // removes its staging directory.
    let mut args = small.to_vec();
    args.extend(["yarn-session", "-d", "-qu", "no-such-queue"]);
    let refused = client.sluice(&args);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("no-such-queue"),
        "{}",
        text(&refused)
    );
    assert!(
        hdfs.status(&staging_root)
            .unwrap()
            .is_some_and(|s| s.is_dir),
        "nothing was staged on HDFS before the refusal"
    );
    assert_eq!(
        hdfs.list(&staging_root).unwrap(),
        Vec::<String>::new(),
        "the refused application's staging directory is left"
    );

    // A detached session submitted by a client whose binary and configuration directory are
    // gone right after submission: nothing but HDFS is left to localize from.
    let client_files = tempfile::tempdir().expect("client files");
    let client_bin = client_files.path().join("sluice");
    std::fs::copy(sluice_bin(), &client_bin).expect("copy the client binary");
    let client_conf = client_files.path().join("conf");
    std::fs::create_dir(&client_conf).expect("conf dir");
    let checkpoints = format!("hdfs:///user/{USER}/checkpoints");
    std::fs::write(
        client_conf.join("config.yaml"),
        format!(
            "execution.checkpointing.interval: 500 ms\nexecution.checkpointing.dir: {checkpoints}\nstate.backend.type: rocksdb\nexecution.checkpointing.incremental: true\ntaskmanager.memory.process.size: 256m\njobmanager.memory.process.size: 256m\n"
        ),
    )
    .expect("config.yaml");
    let submitted = Instant::now();
    let out = client.run(
        &client_bin,
        &[
            "--config-dir",
            &path(&client_conf),
            "yarn-session",
            "-d",
            "-s",
            "1",
        ],
    );
    let submit_ms = submitted.elapsed().as_millis();
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    std::fs::remove_dir_all(client_files.path()).expect("delete the client's files");
    let app = field_after(&printed, "YARN application ").to_string();
    let _kill = KillOnDrop {
        client: &client,
        app: app.clone(),
    };
    let rest = field_after(&printed, "JobManager Web Interface: http://").to_string();
    let staged = hdfs.list(&staging(&app)).unwrap();
    assert_eq!(staged, [".cluster-secret", "config.yaml", "sluice"]);
    let uploaded = hdfs
        .size(&format!("{}/sluice", staging(&app)))
        .unwrap()
        .unwrap();
    assert_eq!(
        uploaded,
        std::fs::metadata(sluice_bin()).unwrap().len(),
        "the whole binary is on HDFS"
    );
    let am = container_processes(&app)
        .into_iter()
        .find(|p| p.2.contains("yarn-appmaster"))
        .expect("the AM process");
    assert_eq!(
        environment_of(am.0, "SLUICE_YARN_SHIP_DIR").as_deref(),
        Some(staging(&app).as_str()),
        "the AM is told its staging directory as a full HDFS URI"
    );

    // The job's TaskManager containers start only now, after the client's files are gone.
    let output = std::env::temp_dir().join(format!("sluice-yarn-hdfs-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&output);
    let (records, keys) = ("6000", "5");
    let run = client.sluice(&[
        "run",
        "-t",
        "yarn-session",
        "-p",
        "2",
        "counting",
        "--records",
        records,
        "--keys",
        keys,
        "--rate",
        "3000",
        "--output",
        &path(&output),
    ]);
    assert!(run.status.success(), "{}", text(&run));
    let job = sluice_integration::job_id_of(&String::from_utf8_lossy(&run.stdout));
    let job_info = client.sluice_rest(&rest, &format!("/jobs/{job}"));
    assert_eq!(job_info["state"], "FINISHED", "{job_info}");
    let taskmanagers: Vec<u32> = container_processes(&app)
        .into_iter()
        .filter(|p| p.2.contains(" taskmanager"))
        .map(|p| p.0)
        .collect();
    assert_eq!(taskmanagers.len(), 2, "two TaskManager containers");
    for pid in taskmanagers.iter().copied().chain([am.0]) {
        assert_eq!(
            environment_of(pid, "HADOOP_CONF_DIR").as_deref(),
            Some(conf_dir.to_str().unwrap()),
            "the NodeManager's HADOOP_CONF_DIR reaches container {pid}"
        );
        assert_eq!(
            environment_of(pid, "HADOOP_USER_NAME").as_deref(),
            Some(USER)
        );
    }
    let check = client.sluice(&[
        "check-counting",
        "--records",
        records,
        "--keys",
        keys,
        &path(&output),
    ]);
    assert!(
        check.status.success(),
        "not exactly once:\n{}",
        text(&check)
    );
    let _ = std::fs::remove_dir_all(&output);

    let kill = client.sluice(&["yarn-session", "--kill"]);
    assert!(kill.status.success(), "{}", text(&kill));
    wait_for(
        Duration::from_secs(20),
        "the killed session's staging directory to go",
        || (hdfs.status(&staging(&app)).unwrap().is_none()).then_some(()),
    );

    // A one-job application whose binary was uploaded once to a provided lib directory: it is
    // localized from there, only the configuration and secret are staged, and the staging
    // directory goes when the application ends.
    let lib = dfs.uri(&format!("/user/{USER}/lib"));
    hdfs.upload(&sluice_bin(), &format!("{lib}/sluice"))
        .expect("upload the binary once");
    let app_output = client.tmp.path().join("app-out");
    let provided =
        format!("yarn.provided.lib.dirs=hdfs:///user/{USER}/none;hdfs:///user/{USER}/lib");
    let checkpointing = format!("execution.checkpointing.dir={checkpoints}");
    let mut args = small.to_vec();
    // At 1000 records/s the job runs for seconds after the client returned: the staging
    // directory is looked at while the application still uses it.
    args.extend([
        "-D",
        &provided,
        "-D",
        "execution.checkpointing.interval=500 ms",
        "-D",
        &checkpointing,
        "run",
        "-t",
        "yarn-application",
        "-d",
        "-p",
        "1",
        "counting",
        "--records",
        "3000",
        "--keys",
        "3",
        "--rate",
        "1000",
        "--output",
        app_output.to_str().expect("utf-8"),
    ]);
    let submitted = Instant::now();
    let run = client.sluice(&args);
    let provided_ms = submitted.elapsed().as_millis();
    let printed = text(&run);
    assert!(run.status.success(), "{printed}");
    let one_job = field_after(&printed, "Submitted YARN application ").to_string();
    let _kill_app = KillOnDrop {
        client: &client,
        app: one_job.clone(),
    };
    let staged = hdfs.list(&staging(&one_job)).unwrap();
    assert_eq!(
        staged,
        [".cluster-secret", "config.yaml"],
        "the binary is not uploaded again"
    );
    let report = wait_for(Duration::from_secs(60), "the application to end", || {
        let a = client.app(&one_job);
        (a["state"] == "FINISHED").then_some(a)
    });
    assert_eq!(report["finalStatus"], "SUCCEEDED", "{report}");
    let check = client.sluice(&[
        "check-counting",
        "--records",
        "3000",
        "--keys",
        "3",
        &path(&app_output),
    ]);
    assert!(
        check.status.success(),
        "not exactly once:\n{}",
        text(&check)
    );
    wait_for(
        Duration::from_secs(20),
        "the ended application's staging directory to go",
        || (hdfs.status(&staging(&one_job)).unwrap().is_none()).then_some(()),
    );
    assert!(
        hdfs.size(&format!("{lib}/sluice")).unwrap().is_some(),
        "the provided binary stays"
    );
    assert_eq!(hdfs.list(&staging_root).unwrap(), Vec::<String>::new());
    println!(
        "MEASURED yarn-session -d with HDFS staging ({} MB binary uploaded): submission to serving {submit_ms} ms; run -t yarn-application -d with the binary from yarn.provided.lib.dirs: submission to registered {provided_ms} ms; whole test {} ms",
        uploaded >> 20,
        started.elapsed().as_millis()
    );
}
