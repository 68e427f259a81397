//! A standalone cluster of real processes started by the scripts: jobs, listing, cancelling,
//! scheduling limits, authentication and robustness against garbage.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_integration::{
    StandaloneCluster, alive, free_port, job_id_of, make_text, read_counts, reference_counts,
    repo_root, sluice_bin, wait_for,
};

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn wordcount_at_parallelism_4_over_two_taskmanagers_gives_reference_counts() {
    let cluster = StandaloneCluster::start(2, 2, "");
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("input.txt");
    let text_in = make_text(3 * 1024 * 1024);
    std::fs::write(&input, &text_in).expect("write input");
    let output = dir.path().join("counts");
    let out = cluster.cli(&[
        "run",
        "-m",
        &cluster.rest(),
        "-p",
        "4",
        "wordcount",
        "--input",
        &input.display().to_string(),
        "--output",
        &output.display().to_string(),
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "run failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("has finished"), "{stdout}");
    let job = job_id_of(&stdout);
    assert_eq!(read_counts(&output), reference_counts(&text_in));
    // Both TaskManagers ran subtasks of the job.
    let logs = cluster.logs("taskmanager");
    assert_eq!(logs.len(), 2, "two TaskManager logs");
    for log in &logs {
        assert!(
            log.contains(&format!("task started execution={job}")),
            "a TaskManager ran nothing of {job}:\n{log}"
        );
    }
    let details = cluster.get(&format!("/jobs/{job}")).expect("job details");
    assert_eq!(details["state"], "FINISHED");
}

#[test]
fn two_jobs_share_the_taskmanagers_list_and_cancel_frees_slots() {
    let cluster = StandaloneCluster::start(2, 2, "");
    let mut jobs = Vec::new();
    for _ in 0..2 {
        let out = cluster.cli(&[
            "run",
            "-m",
            &cluster.rest(),
            "-d",
            "-p",
            "2",
            "stream-sum",
            "--rate",
            "2000",
        ]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        jobs.push(job_id_of(&stdout));
    }
    wait_for(
        Duration::from_secs(30),
        "both jobs running all tasks",
        || {
            let overview = cluster.get("/jobs/overview").ok()?;
            let running = overview["jobs"]
                .as_array()?
                .iter()
                .filter(|j| j["state"] == "RUNNING" && j["tasks"]["running"] == j["tasks"]["total"])
                .count();
            (running == 2).then_some(())
        },
    );
    assert_eq!(
        cluster.get("/overview").expect("overview")["slots-available"],
        0
    );
    let (list, _) = text(&cluster.cli(&["list", "-m", &cluster.rest()]));
    for job in &jobs {
        assert!(
            list.contains(&format!(": {job} : ")) && list.contains("(RUNNING)"),
            "{list}"
        );
    }
    let out = cluster.cli(&["cancel", "-m", &cluster.rest(), &jobs[0]]);
    assert!(out.status.success(), "{:?}", text(&out));
    wait_for(
        Duration::from_secs(30),
        "the cancelled job's slots to be free",
        || {
            let canceled = cluster.get(&format!("/jobs/{}", jobs[0])).ok()?["state"] == "CANCELED";
            let free = cluster.get("/overview").ok()?["slots-available"] == 2;
            (canceled && free).then_some(())
        },
    );
    assert_eq!(
        cluster.get(&format!("/jobs/{}", jobs[1])).expect("job")["state"],
        "RUNNING"
    );
    let (list_all, _) = text(&cluster.cli(&["list", "-a", "-m", &cluster.rest()]));
    assert!(list_all.contains("(CANCELED)"), "{list_all}");
}

#[test]
fn more_parallelism_than_slots_fails_with_no_resource_available() {
    let cluster = StandaloneCluster::start(1, 2, "slot.request.timeout: 2 s");
    let started = Instant::now();
    let out = cluster.cli(&["run", "-m", &cluster.rest(), "-p", "99", "stream-sum"]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stderr.contains(
            "NoResourceAvailableException: Could not acquire the minimum required resources."
        ),
        "{stderr}"
    );
    assert!(started.elapsed() >= Duration::from_secs(2));
    let job = job_id_of(&stdout);
    let exceptions = cluster
        .get(&format!("/jobs/{job}/exceptions"))
        .expect("exceptions")
        .to_string();
    assert!(
        exceptions.contains("Could not acquire the minimum required resources."),
        "{exceptions}"
    );
    // Nothing ran at a smaller parallelism, and the slots are free again.
    let overview = cluster.get("/overview").expect("overview");
    assert_eq!(overview["slots-available"], 2);
    assert_eq!(overview["jobs-failed"], 1);
}

#[test]
fn a_taskmanager_with_the_wrong_secret_is_refused() {
    let cluster = StandaloneCluster::start(1, 1, "");
    let mut intruder = Command::new(sluice_bin())
        .args([
            "--config-dir",
            &cluster.conf_dir().display().to_string(),
            "-D",
            "security.cluster.secret=not-the-cluster-secret-at-all",
            "taskmanager",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start intruder");
    let status = wait_for(Duration::from_secs(20), "the intruder to give up", || {
        intruder.try_wait().ok().flatten()
    });
    let mut stderr = String::new();
    if let Some(mut e) = intruder.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    assert!(!status.success());
    assert!(stderr.contains("cluster secret"), "{stderr}");
    assert_eq!(
        cluster.get("/overview").expect("overview")["taskmanagers"],
        1
    );
    let jm_log = cluster.logs("jobmanager").concat();
    assert!(
        jm_log.contains("did not prove knowledge of the cluster secret"),
        "{jm_log}"
    );
}

#[test]
fn garbage_on_every_port_and_malformed_requests_leave_every_process_running() {
    let cluster = StandaloneCluster::start(2, 1, "");
    let tms = cluster.get("/taskmanagers").expect("taskmanagers");
    let data_ports: Vec<u16> = tms["taskmanagers"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|t| t["dataPort"].as_u64())
        .map(|p| p as u16)
        .collect();
    assert_eq!(data_ports.len(), 2);
    let mut seed = 7u64;
    let mut garbage = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 56) as u8
            })
            .collect()
    };
    for port in [cluster.rpc_port, cluster.rest_port] {
        for payload in [
            garbage(10),
            garbage(5000),
            vec![0xff; 64],
            b"GET / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n".to_vec(),
        ] {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
                let _ = s.write_all(&payload);
            }
        }
    }
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    for port in &data_ports {
        for n in [1, 100, 1200, 1500] {
            let _ = udp.send_to(&garbage(n), ("127.0.0.1", *port));
        }
    }
    for (method, path, body) in [
        ("POST", "/sluice/jobs", "{"),
        ("POST", "/sluice/jobs", "[]"),
        ("POST", "/sluice/jobs", "{\"job\": 1}"),
        ("POST", "/sluice/jobs", "{\"job\": \"no-such-job\"}"),
        (
            "POST",
            "/sluice/jobs",
            "{\"job\": \"stream-sum\", \"args\": [\"--rate\", \"fast\"]}",
        ),
        ("PATCH", "/jobs/zzz?mode=cancel", "{}"),
        (
            "PATCH",
            "/jobs/00000000000000000000000000000000?mode=cancel",
            "{}",
        ),
        ("GET", "/jobs/0123", ""),
        ("GET", "/no/such/path", ""),
    ] {
        let (status, body) = cluster.request(method, path, body);
        assert!(
            (400..500).contains(&status),
            "{method} {path}: {status} {body}"
        );
        assert!(body.contains("\"errors\""), "{method} {path}: {body}");
    }
    for kind in ["jobmanager", "taskmanager"] {
        for pid in cluster.pids(kind) {
            assert!(alive(pid), "{kind} {pid} died");
        }
    }
    let out = cluster.cli(&["run", "-m", &cluster.rest(), "-p", "2", "wordcount"]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(
        cluster.get("/overview").expect("overview")["taskmanagers"],
        2
    );
}

#[test]
fn run_without_a_cluster_uses_an_embedded_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Point the client at a port where nothing listens, so `run` starts its own cluster.
    std::fs::write(
        dir.path().join("config.yaml"),
        format!("rest.port: {}\n", free_port()),
    )
    .expect("config");
    let out = Command::new(sluice_bin())
        .args([
            "--config-dir",
            &dir.path().display().to_string(),
            "run",
            "-p",
            "2",
            "wordcount",
        ])
        .output()
        .expect("run");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let hamlet = std::fs::read_to_string(repo_root().join("engine/src/examples/hamlet.txt"))
        .expect("bundled text");
    let mut printed = BTreeMap::new();
    for line in stdout
        .lines()
        .filter(|l| !l.starts_with("Job ") && !l.starts_with("Program "))
    {
        // Parallel print prefixes lines with "N> ".
        let line = line.split_once("> ").map(|(_, rest)| rest).unwrap_or(line);
        if let Some((w, c)) = line.rsplit_once(' ') {
            printed.insert(w.to_string(), c.parse::<u64>().unwrap_or(0));
        }
    }
    assert_eq!(printed, reference_counts(&hamlet));
}

#[test]
fn bad_configuration_stops_start_up_naming_the_key() {
    for (args, expected) in [
        (
            vec!["-D", "taskmanager.numberOfTaskSlotz=2", "jobmanager"],
            "taskmanager.numberOfTaskSlotz",
        ),
        (vec!["-D", "rest.port=eighty", "jobmanager"], "rest.port"),
        (
            vec!["-D", "heartbeat.interval=1 parsec", "taskmanager"],
            "heartbeat.interval",
        ),
    ] {
        let out = Command::new(sluice_bin())
            .args(&args)
            .output()
            .expect("run sluice");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("config.yaml"),
        "jobmanager.rpc.port: 6123\nstate.backend.typo: rocksdb\n",
    )
    .expect("config");
    let out = Command::new(sluice_bin())
        .args([
            "--config-dir",
            &dir.path().display().to_string(),
            "jobmanager",
        ])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("state.backend.typo")
            && stderr.contains("config.yaml"),
        "{stderr}"
    );
}

#[test]
fn counting_output_checks_out_exactly_once_without_failures() {
    let cluster = StandaloneCluster::start(2, 2, "");
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("counting");
    let out = cluster.cli(&[
        "run",
        "-m",
        &cluster.rest(),
        "-p",
        "4",
        "counting",
        "--records",
        "300000",
        "--keys",
        "7",
        "--output",
        &out_dir.display().to_string(),
    ]);
    assert!(out.status.success(), "{:?}", text(&out));
    let check = cluster.cli(&[
        "check-counting",
        "--records",
        "300000",
        "--keys",
        "7",
        &out_dir.display().to_string(),
    ]);
    let (stdout, stderr) = text(&check);
    assert!(check.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with("OK: 300000 lines"), "{stdout}");
    // The checker is not a rubber stamp: one line fewer is reported as missing.
    let victim = std::fs::read_dir(&out_dir)
        .expect("dir")
        .next()
        .expect("a part file")
        .expect("entry")
        .path();
    let content = std::fs::read_to_string(&victim).expect("part");
    let first = content.lines().next().expect("a line").to_string();
    std::fs::write(
        &victim,
        content.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n",
    )
    .expect("rewrite");
    let check = cluster.cli(&[
        "check-counting",
        "--records",
        "300000",
        "--keys",
        "7",
        &out_dir.display().to_string(),
    ]);
    let (stdout, _) = text(&check);
    assert!(!check.status.success());
    let seq = first.split(' ').next().expect("seq");
    assert!(
        stdout.contains(&format!("missing 1 records: {seq}")),
        "{stdout}"
    );
}

/// The names of the TaskManagers' local state directories in `base`.
fn state_dirs(base: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(base)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("sluice-state-"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Every TaskManager that ran tasks used to leave `sluice-state-<id>` behind, even after a
/// graceful stop, and `stop-all` signalled whatever process had inherited a pid in the pid file.
/// Now a stopping TaskManager removes its directory, a starting one removes those of dead
/// TaskManagers (the pid is in the name), and the scripts signal only sluice processes.
#[test]
fn taskmanagers_leave_no_local_state_and_the_scripts_signal_only_sluice() {
    let state = tempfile::tempdir().expect("temp dir");
    let cluster = StandaloneCluster::start(
        2,
        1,
        &format!("state.backend.rocksdb.localdir: {}", state.path().display()),
    );
    cluster.submit_detached(&[
        "-p",
        "2",
        "-D",
        "state.backend.type=rocksdb",
        "stream-sum",
        "--rate",
        "1000",
    ]);
    let tms = cluster.pids("taskmanager");
    assert_eq!(tms.len(), 2);
    wait_for(Duration::from_secs(30), "both TaskManagers' state", || {
        (state_dirs(state.path()).len() == 2).then_some(())
    });
    // A TaskManager killed outright cannot clean up; the next one to start does.
    let killed = tms[0];
    sluice_integration::signal("-9", killed);
    wait_for(Duration::from_secs(10), "the kill", || {
        (!alive(killed)).then_some(())
    });
    let orphan = format!("sluice-state-{killed}-");
    assert!(
        state_dirs(state.path())
            .iter()
            .any(|n| n.starts_with(&orphan)),
        "{:?}",
        state_dirs(state.path())
    );
    let out = cluster.script("taskmanager.sh", &["start"]);
    assert!(out.status.success(), "{}", text(&out).1);
    wait_for(Duration::from_secs(30), "the orphan's removal", || {
        (!state_dirs(state.path())
            .iter()
            .any(|n| n.starts_with(&orphan)))
        .then_some(())
    });

    // A pid file naming a process that is not sluice (a dead daemon's pid, reused): stop-all
    // leaves that process alone.
    let mut bystander = Command::new("sleep").arg("60").spawn().expect("sleep");
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    let pid_file = cluster
        .log_dir()
        .join(format!("sluice-{user}-taskmanager.pid"));
    let mut pids = std::fs::read_to_string(&pid_file).expect("pid file");
    pids.push_str(&format!("{}\n", bystander.id()));
    std::fs::write(&pid_file, pids).expect("pid file");

    // A graceful stop removes every TaskManager's directory.
    let out = cluster.script("taskmanager.sh", &["stop-all"]);
    assert!(out.status.success(), "{}", text(&out).1);
    assert!(
        !text(&out).0.contains(&bystander.id().to_string()),
        "{}",
        text(&out).0
    );
    assert!(
        alive(bystander.id()),
        "stop-all signalled a process that is not sluice"
    );
    wait_for(Duration::from_secs(15), "the directories' removal", || {
        state_dirs(state.path()).is_empty().then_some(())
    });
    let _ = bystander.kill();
    let _ = bystander.wait();
}

/// Logs were never rotated: a daemon's log grew for as long as it ran. With a small
/// `log.file.max-size` the JobManager's log rolls over and keeps `log.file.max-count` old files.
#[test]
fn daemon_logs_roll_over_by_size_and_count() {
    let cluster = StandaloneCluster::start(1, 1, "log.file.max-size: 1kb\nlog.file.max-count: 2");
    let jm_logs = || -> Vec<(String, u64)> {
        let mut files: Vec<(String, u64)> = std::fs::read_dir(cluster.log_dir())
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let len = e.metadata().ok()?.len();
                        name.contains("-jobmanager-").then_some((name, len))
                    })
                    .filter(|(name, _)| name.contains(".log"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    };
    // Every submission and cancellation logs a few lines at the JobManager.
    let mut round = 0;
    wait_for(Duration::from_secs(60), "two rolled-over logs", || {
        round += 1;
        let job = cluster.submit_detached(&["stream-sum", "--rate", "10"]);
        let (status, body) = cluster.request("PATCH", &format!("/jobs/{job}?mode=cancel"), "");
        assert_eq!(status, 202, "round {round}: {body}");
        jm_logs()
            .iter()
            .any(|(name, _)| name.ends_with(".log.2"))
            .then_some(())
    });
    let files = jm_logs();
    assert!(
        files.iter().all(|(name, _)| !name.ends_with(".log.3")),
        "{files:?}"
    );
    for (name, len) in &files {
        assert!(*len <= 1024, "{name} has {len} bytes: {files:?}");
    }
}

#[test]
fn taskmanager_logs_are_served_through_the_jobmanager_and_only_their_own() {
    let cluster = StandaloneCluster::start(2, 1, "");
    let ids = wait_for(
        Duration::from_secs(30),
        "two TaskManagers registered",
        || {
            let ids = cluster.taskmanager_ids();
            (ids.len() == 2).then_some(ids)
        },
    );
    let mut names = Vec::new();
    for id in &ids {
        let listed = cluster
            .get(&format!("/taskmanagers/{id}/logs"))
            .expect("the TaskManager's log list");
        let logs = listed["logs"].as_array().expect("logs");
        assert!(!logs.is_empty(), "{listed}");
        let name = logs[0]["name"].as_str().expect("name").to_string();
        assert!(name.contains("taskmanager"), "{listed}");
        assert!(logs[0]["size"].as_u64().is_some_and(|s| s > 0), "{listed}");
        assert!(logs[0]["mtime"].as_u64().is_some_and(|t| t > 0), "{listed}");

        // The current log and the listed file are the TaskManager's own: it wrote its id there.
        for path in [
            format!("/taskmanagers/{id}/log"),
            format!("/taskmanagers/{id}/logs/{name}"),
            format!("/taskmanagers/{id}/stdout"),
        ] {
            let (status, body) = cluster.request("GET", &path, "");
            assert_eq!(status, 200, "{path}: {body}");
            assert!(body.contains("TaskManager started"), "{path}: {body}");
            assert!(body.contains(id.as_str()), "{path} holds {id}: {body}");
        }
        names.push(name);
    }
    assert_ne!(names[0], names[1], "each TaskManager lists its own log");

    // Another TaskManager's log beside it, paths and unknown names are refused.
    for (path, want) in [
        (format!("/taskmanagers/{}/logs/{}", ids[0], names[1]), 404),
        (format!("/taskmanagers/{}/logs/..%2Fx", ids[0]), 400),
        (
            format!("/taskmanagers/{}/logs/..%2F..%2Fconf%2Fconfig.yaml", ids[0]),
            400,
        ),
        (format!("/taskmanagers/{}/logs/no-such.log", ids[0]), 404),
        ("/taskmanagers/no-such-taskmanager/logs".to_string(), 404),
        ("/taskmanagers/no-such-taskmanager/log".to_string(), 404),
        (
            "/taskmanagers/no-such-taskmanager/logs/x.log".to_string(),
            404,
        ),
    ] {
        let (status, body) = cluster.request("GET", &path, "");
        assert_eq!(status, want, "{path}: {body}");
        let errors: serde_json::Value = serde_json::from_str(&body).expect("Flink's errors");
        assert!(errors["errors"][0].is_string(), "{path}: {body}");
    }

    // A whole (small) file: nothing left out, and the header says so.
    let answer = reqwest::blocking::get(format!(
        "http://{}/taskmanagers/{}/log",
        cluster.rest(),
        ids[0]
    ))
    .expect("GET");
    assert_eq!(
        answer
            .headers()
            .get("x-sluice-log-skipped-bytes")
            .and_then(|v| v.to_str().ok()),
        Some("0")
    );

    // The cluster keeps serving, and both TaskManagers are still registered and answering.
    assert_eq!(cluster.taskmanager_ids().len(), 2);
    let (status, body) = cluster.request("GET", &format!("/taskmanagers/{}/log", ids[1]), "");
    assert_eq!(status, 200, "{body}");
}
