//! Users' own jobs: a job artifact (`integration/test-job`, built like a user's) uploaded to a
//! standalone cluster through the CLI and Flink's `/jars` calls, run in worker processes on the
//! TaskManagers, and failing alone when its code takes its process down.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use sluice_integration::{
    StandaloneCluster, alive, final_sums, free_port, job_id_of, shared_cluster, test_job_bin,
    wait_for,
};

/// One cluster for the tests that submit: two TaskManagers of two slots.
fn cluster() -> &'static StandaloneCluster {
    static CLUSTER: OnceLock<StandaloneCluster> = OnceLock::new();
    // Fetched artifacts no worker runs leave the TaskManagers' caches after 2 s. The job
    // projects here are built with the tests' profile, debug info included: over 100 MB, the
    // default upload limit, where a release build is a fraction of that.
    // Each process has a Prometheus reporter on a port of a range, and TaskManagers heartbeat
    // (and hear their workers' counters) every second.
    shared_cluster(&CLUSTER, || {
        let first = free_port();
        StandaloneCluster::start(
            2,
            2,
            &format!(
                "blob.service.cleanup.interval: 2\nrest.server.max-content-length: 512mb\n\
                 metrics.reporter.prom.factory.class: org.apache.flink.metrics.prometheus.PrometheusReporterFactory\n\
                 metrics.reporter.prom.port: {first}-{}\nheartbeat.interval: 1 s\n",
                first.saturating_add(20)
            ),
        )
    })
}

fn run(cluster: &StandaloneCluster, args: &[&str]) -> (bool, String) {
    let rest = cluster.rest();
    let mut full = vec!["run", "-m", rest.as_str()];
    full.extend_from_slice(args);
    let out = cluster.cli(&full);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn an_artifact_job_runs_across_taskmanagers_with_exact_results() {
    let cluster = cluster();
    let artifact = test_job_bin();
    let out = cluster.work_dir().join("sum");
    let (ok, text) = run(
        cluster,
        &[
            "-p",
            "4",
            "-c",
            "sum",
            artifact.to_str().unwrap(),
            "--records",
            "200000",
            "--keys",
            "10",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert!(ok, "{text}");
    assert!(text.contains("has finished"), "{text}");
    let sums = final_sums(&out);
    assert_eq!(sums.len(), 10, "{sums:?}");
    assert!(sums.values().all(|&s| s == 20_000), "{sums:?}");
    // Both TaskManagers ran a worker of the job (four subtasks over two of two slots).
    let logs = cluster.logs("taskmanager");
    assert_eq!(logs.len(), 2);
    assert!(
        logs.iter()
            .all(|log| log.contains("the job's worker registered")),
        "each TaskManager should have started a worker"
    );
}

#[test]
fn jobs_that_abort_their_process_or_outgrow_its_memory_fail_alone() {
    let cluster = cluster();
    let taskmanagers = cluster.pids("taskmanager");
    let steady = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "2000"]);
    cluster.wait_state(&steady, "RUNNING", Duration::from_secs(30));
    let artifact = test_job_bin();
    let records = |cluster: &StandaloneCluster| {
        cluster.job(&steady)["vertices"][0]["metrics"]["write-records"]
            .as_u64()
            .unwrap_or(0)
    };
    // A job that aborts, then one that holds ever more memory (it would stop at 3 GiB, past
    // the TaskManagers' 1728 MiB), each failing with its own reason.
    let cases: [(&[&str], &[&str]); 2] = [
        (&["-p", "2", "-c", "abort"], &["--after", "300"]),
        (
            &["-p", "1", "-c", "hog"],
            &["--mib-per-record", "4", "--max-mib", "3072"],
        ),
    ];
    for ((options, program_args), expected) in cases.iter().zip([
        &["worker process", "SIGABRT"][..],
        &[
            "worker process",
            "stopped for its memory",
            "taskmanager.memory.process.size (1728 MiB)",
        ][..],
    ]) {
        let mut args = vec!["-d", "-D", "restart-strategy.type=none"];
        args.extend_from_slice(options);
        args.push(artifact.to_str().unwrap());
        args.extend_from_slice(program_args);
        let (ok, text) = run(cluster, &args);
        assert!(ok, "{text}");
        let failing = job_id_of(&text);
        cluster.wait_state(&failing, "FAILED", Duration::from_secs(60));
        let exceptions = cluster
            .get(&format!("/jobs/{failing}/exceptions"))
            .expect("exceptions")
            .to_string();
        for part in expected {
            assert!(exceptions.contains(part), "{part:?} in {exceptions}");
        }
        // The other job and every TaskManager went on.
        let before = records(cluster);
        wait_for(
            Duration::from_secs(30),
            "the other job to keep going",
            || (records(cluster) > before).then_some(()),
        );
        assert_eq!(cluster.job_state(&steady), "RUNNING");
        assert!(taskmanagers.iter().all(|&pid| alive(pid)));
        assert_eq!(cluster.pids("taskmanager"), taskmanagers);
    }
    let _ = cluster.cli(&["cancel", "-m", &cluster.rest(), &steady]);
}

#[test]
fn a_workers_subtasks_are_served_by_its_taskmanagers_prometheus_reporter() {
    let cluster = cluster();
    let artifact = test_job_bin();
    let (ok, text) = run(
        cluster,
        &[
            "-d",
            "-p",
            "1",
            "-c",
            "stream-sum",
            artifact.to_str().unwrap(),
            "--rate",
            "2000",
        ],
    );
    assert!(ok, "{text}");
    let job = job_id_of(&text);
    cluster.wait_state(&job, "RUNNING", Duration::from_secs(30));
    let ports = cluster.reporter_ports();
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let scrape = |port: &u16| {
        http.get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .and_then(|r| r.text())
            .ok()
    };
    let of_the_job = format!("job_id=\"{job}\"");
    // The worker's source subtask, with Flink's labels, counting what it wrote.
    let wanted = "flink_taskmanager_job_task_numRecordsOut{host=";
    let line = wait_for(
        Duration::from_secs(30),
        "the worker's source among a TaskManager's task metrics",
        || {
            ports.iter().find_map(|port| {
                let text = scrape(port)?;
                text.lines()
                    .find(|l| {
                        l.starts_with(wanted)
                            && l.contains(&of_the_job)
                            && l.contains("task_name=\"Generator Source\"")
                            && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) > Some(0.0)
                    })
                    .map(str::to_string)
            })
        },
    );
    assert!(line.contains("subtask_index=\"0\""), "{line}");
    let _ = cluster.cli(&["cancel", "-m", &cluster.rest(), &job]);
    cluster.wait_state(&job, "CANCELED", Duration::from_secs(30));
    // Its subtasks leave the exposition with it.
    wait_for(
        Duration::from_secs(10),
        "the canceled job's tasks to leave the exposition",
        || {
            ports
                .iter()
                .all(|port| scrape(port).is_some_and(|t| !t.contains(&of_the_job)))
                .then_some(())
        },
    );
}

/// `POST /jars/upload` of `bytes` as `name`; status and body.
fn upload(cluster: &StandaloneCluster, name: &str, bytes: Vec<u8>) -> (u16, serde_json::Value) {
    let form = reqwest::blocking::multipart::Form::new().part(
        "jarfile",
        reqwest::blocking::multipart::Part::bytes(bytes).file_name(name.to_string()),
    );
    let response = reqwest::blocking::Client::new()
        .post(format!("http://{}/jars/upload", cluster.rest()))
        .multipart(form)
        .send()
        .expect("upload");
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(serde_json::Value::Null))
}

#[test]
fn the_jar_calls_list_run_and_delete_artifacts_and_refuse_what_is_not_one() {
    let cluster = cluster();
    let (status, body) = upload(cluster, "../../evil.jar", b"PK\x03\x04 not a job".to_vec());
    assert_eq!(status, 400, "{body}");
    let error = body["errors"][0].as_str().unwrap_or_default();
    assert!(
        error.contains("evil.jar") && error.contains("not an executable"),
        "{error}"
    );

    // Bytes after the executable's end change its content key, not what it runs: this
    // test's artifact is its own, apart from the other tests' uploads of the test job.
    let mut bytes = std::fs::read(test_job_bin()).expect("artifact");
    bytes.extend_from_slice(b"the jar calls' own copy");
    let (status, body) = upload(cluster, "my-job", bytes);
    assert_eq!(status, 200, "{body}");
    let id = body["filename"]
        .as_str()
        .and_then(|f| f.rsplit('/').next())
        .expect("filename")
        .to_string();
    let jars = cluster.get("/jars").expect("jars");
    let entry = jars["files"]
        .as_array()
        .and_then(|files| files.iter().find(|f| f["id"] == id.as_str()))
        .unwrap_or_else(|| panic!("{id} not listed: {jars}"));
    assert_eq!(entry["name"], "my-job");
    let programs: Vec<&str> = entry["entry"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for program in ["abort", "panic-in-build", "sum", "stream-sum"] {
        assert!(programs.contains(&program), "{programs:?}");
    }

    // Several programs: the entry must be named.
    let (status, body) = cluster.request("POST", &format!("/jars/{id}/run"), "{}");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("several programs"), "{body}");
    let (status, body) = cluster.request(
        "POST",
        &format!("/jars/{id}/run"),
        r#"{"entryClass": "panic-in-build"}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("panicked") && body.contains("cannot be built"),
        "{body}"
    );
    let (status, body) = cluster.request(
        "POST",
        &format!("/jars/{id}/run"),
        r#"{"entryClass": "sum", "programArgsList": ["--records", "x"]}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("--records must be a number"), "{body}");
    let out = cluster.work_dir().join("rest-sum");
    let (status, body) = cluster.request(
        "POST",
        &format!("/jars/{id}/run"),
        &format!(
            r#"{{"entryClass": "sum", "parallelism": 2, "programArgsList": ["--records", "1000", "--output", "{}"]}}"#,
            out.display()
        ),
    );
    assert_eq!(status, 202, "{body}");
    let job: serde_json::Value = serde_json::from_str(&body).unwrap();
    cluster.wait_state(
        job["jobid"].as_str().unwrap(),
        "FINISHED",
        Duration::from_secs(60),
    );
    assert_eq!(final_sums(&out).values().sum::<u64>(), 1000);

    // Deleting the upload of a running job's artifact: no longer listed or runnable, but the
    // job keeps its code; the executable goes when the job has ended, and the TaskManagers'
    // copies when no worker has run it for blob.service.cleanup.interval.
    let (status, body) = cluster.request(
        "POST",
        &format!("/jars/{id}/run"),
        r#"{"entryClass": "stream-sum", "programArgsList": ["--rate", "500"]}"#,
    );
    assert_eq!(status, 202, "{body}");
    let job: serde_json::Value = serde_json::from_str(&body).unwrap();
    let job = job["jobid"].as_str().unwrap().to_string();
    cluster.wait_state(&job, "RUNNING", Duration::from_secs(60));
    let (status, body) = cluster.request("DELETE", &format!("/jars/{id}"), "");
    assert_eq!(status, 200, "{body}");
    let (status, body) = cluster.request("POST", &format!("/jars/{id}/run"), "{}");
    assert_eq!(status, 404, "{body}");
    let jars = cluster.get("/jars").expect("jars");
    assert!(!jars.to_string().contains(&id), "{jars}");
    let (status, _) = cluster.request("DELETE", &format!("/jars/{id}"), "");
    assert_eq!(status, 404);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(cluster.job_state(&job), "RUNNING");
    let (status, body) = cluster.request("PATCH", &format!("/jobs/{job}?mode=cancel"), "");
    assert_eq!(status, 202, "{body}");
    cluster.wait_state(&job, "CANCELED", Duration::from_secs(30));
    wait_for(
        Duration::from_secs(30),
        "the JobManager to remove the deleted artifact",
        || {
            let logs = cluster.logs("jobmanager");
            let mut lines = logs.iter().flat_map(|log| log.lines());
            lines
                .any(|l| l.contains("removed a job artifact") && l.contains(&id))
                .then_some(())
        },
    );
    wait_for(
        Duration::from_secs(60),
        "the TaskManagers to remove their copies",
        || {
            let logs = cluster.logs("taskmanager");
            let mut lines = logs.iter().flat_map(|log| log.lines());
            lines
                .any(|l| l.contains("removed a cached job artifact") && l.contains(&id))
                .then_some(())
        },
    );
    let (status, _) = cluster.request("DELETE", "/jars/..%2F..%2Fetc%2Fpasswd", "");
    assert_eq!(status, 404);
}

#[test]
fn uploads_are_refused_when_submission_is_switched_off() {
    let cluster = StandaloneCluster::start(1, 1, "web.submit.enable: false");
    let (status, body) = upload(&cluster, "my-job", b"\x7fELF".to_vec());
    assert_eq!(status, 403, "{body}");
    assert!(body.to_string().contains("web.submit.enable"), "{body}");
}

/// The cargo flags that build a job project with the profile the workspace builds sluice with,
/// so its dependencies come from the test's own target directory instead of a cold build.
fn workspace_profile() -> Vec<String> {
    let mut flags = Vec::new();
    for setting in [
        "profile.dev.opt-level=2",
        r#"profile.dev.debug="line-tables-only""#,
        r#"profile.dev.package."*".opt-level=3"#,
        r#"profile.dev.package."*".debug=false"#,
    ] {
        flags.extend(["--config".to_string(), setting.to_string()]);
    }
    for member in ["sluice", "zk-ha", "yarn-am"] {
        for setting in ["opt-level=2", r#"debug="line-tables-only""#] {
            flags.extend([
                "--config".to_string(),
                format!("profile.dev.package.{member}.{setting}"),
            ]);
        }
    }
    flags
}

#[test]
fn a_new_job_project_builds_and_runs_on_a_cluster_and_embedded() {
    let cluster = cluster();
    let project = cluster.work_dir().join("word-job");
    let out = cluster.cli(&["new-job", project.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("cargo build --release"), "{text}");
    let target = sluice_integration::sluice_bin()
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    let build = std::process::Command::new("cargo")
        .arg("build")
        .arg("--offline")
        .args(workspace_profile())
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("cargo");
    assert!(
        build.status.success(),
        "the new job project does not build: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    let artifact = target.join("debug").join("word-job");
    let counts = |dir: &Path| {
        let mut all = std::collections::BTreeMap::new();
        // One file from a sink of parallelism 1, else a directory of part files.
        let files: Vec<std::path::PathBuf> = if dir.is_file() {
            vec![dir.to_path_buf()]
        } else {
            std::fs::read_dir(dir)
                .expect("output")
                .flatten()
                .map(|e| e.path())
                .collect()
        };
        for file in files {
            for line in std::fs::read_to_string(file).unwrap().lines() {
                let (word, n) = line.split_once(' ').unwrap();
                let n: u64 = n.parse().unwrap();
                let e = all.entry(word.to_string()).or_insert(0);
                *e = n.max(*e);
            }
        }
        all
    };
    let on_cluster = cluster.work_dir().join("word-counts");
    let (ok, text) = run(
        cluster,
        &[
            "-p",
            "2",
            artifact.to_str().unwrap(),
            "--output",
            on_cluster.to_str().unwrap(),
        ],
    );
    assert!(ok, "{text}");
    let counts_on_cluster = counts(&on_cluster);
    assert_eq!(counts_on_cluster["the"], 4);
    assert_eq!(counts_on_cluster["fox"], 2);
    // The artifact is a sluice command line of its own: an embedded cluster runs its program.
    let embedded = cluster.work_dir().join("word-counts-embedded");
    let local = std::process::Command::new(&artifact)
        .args(["run", "-t", "local", "word-job", "--output"])
        .arg(&embedded)
        .output()
        .expect("run the artifact");
    assert!(
        local.status.success(),
        "{}{}",
        String::from_utf8_lossy(&local.stdout),
        String::from_utf8_lossy(&local.stderr)
    );
    assert_eq!(counts(&embedded), counts_on_cluster);
}
