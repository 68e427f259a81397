//! sluice on a real YARN: a MiniYARNCluster (1 ResourceManager, 2 NodeManagers, started by
//! scripts/yarn-minicluster.sh) runs a detached `sluice yarn-session`; `run -t yarn-session`
//! grows TaskManager containers on demand, idle ones are given back, and killing the session
//! leaves no process behind. Refused and unreachable cases fail cleanly with nothing left over.
//!
//! Needs Java 17 and Maven (the launcher is built on first use). `SLUICE_SKIP_YARN=1` skips
//! it; `SLUICE_YARN_CLUSTER_DIR=DIR` reuses (and leaves running) a cluster started with
//! `scripts/yarn-minicluster.sh start DIR`. Prints the measured numbers (`MEASURED ...`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_integration::yarn::{
    self, MiniYarn, YarnClient, container_processes, field_after, text,
};
use sluice_integration::{
    final_sums, make_text, read_counts, read_final_counts, reference_counts, sluice_bin,
    test_job_bin, wait_for,
};

fn write_input(dir: &Path) -> (PathBuf, String) {
    let input = dir.join("input.txt");
    let text_in = make_text(512 * 1024);
    std::fs::write(&input, &text_in).expect("input");
    (input, text_in)
}

/// `run -t TARGET` of the test job's `sum` over 20000 records and 10 keys into `out`.
fn sum_run<'a>(target: &'a str, artifact: &'a Path, out: &'a Path) -> Vec<&'a str> {
    vec![
        "run",
        "-t",
        target,
        "-p",
        "2",
        "-c",
        "sum",
        artifact.to_str().expect("utf-8"),
        "--records",
        "20000",
        "--keys",
        "10",
        "--output",
        out.to_str().expect("utf-8"),
    ]
}

/// `sum_run`'s output holds the exact sum of every key.
fn assert_exact_sums(out: &Path) {
    let finals = final_sums(out);
    assert_eq!(finals.len(), 10, "{finals:?}");
    assert!(finals.values().all(|&s| s == 2_000), "{finals:?}");
}

#[test]
fn sessions_and_applications_on_yarn_grow_taskmanagers_recover_lost_ones_and_leave_nothing() {
    if yarn::skipped() {
        return;
    }
    let cluster = MiniYarn::start("sluice-yarn-session-");
    let client = YarnClient::new(&cluster);

    // Errors first: they must leave no application behind.
    let before = client.live_sluice_apps();
    let unreachable = client.sluice(&[
        "-D",
        "yarn.resourcemanager.webapp.address=127.0.0.1:1",
        "yarn-session",
        "-d",
    ]);
    assert!(!unreachable.status.success());
    assert!(
        text(&unreachable).contains("127.0.0.1:1"),
        "{}",
        text(&unreachable)
    );
    let too_big = client.sluice(&["yarn-session", "-d", "-tm", "100g"]);
    assert!(!too_big.status.success());
    assert!(
        text(&too_big).contains("refused")
            && text(&too_big).contains("taskmanager.memory.process.size"),
        "{}",
        text(&too_big)
    );
    let bad_queue = client.sluice(&[
        "yarn-session",
        "-d",
        "-jm",
        "256",
        "-tm",
        "256",
        "-qu",
        "no-such-queue",
    ]);
    assert!(!bad_queue.status.success());
    assert!(
        text(&bad_queue).contains("no-such-queue"),
        "{}",
        text(&bad_queue)
    );
    assert_eq!(
        client.live_sluice_apps(),
        before,
        "a failed submission left an application behind"
    );

    // TaskManagers that cannot start (their data port is taken): after more failed containers
    // than yarn.maximum-failed-containers the application fails, naming the cause.
    let busy = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp");
    let busy_port = busy.local_addr().expect("addr").port();
    let port_arg = format!("taskmanager.data.port={busy_port}");
    let out = client.sluice(&[
        "-D",
        &port_arg,
        "-D",
        "yarn.maximum-failed-containers=1",
        "yarn-session",
        "-d",
        "-tm",
        "256",
        "-jm",
        "256",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let doomed = field_after(&text(&out), "YARN application ").to_string();
    let run = client.sluice(&["run", "-t", "yarn-session", "-d", "wordcount"]);
    assert!(run.status.success(), "{}", text(&run));
    let report = wait_for(
        Duration::from_secs(60),
        "the doomed session to fail",
        || {
            let a = client.app(&doomed);
            (a["state"] == "FINISHED").then_some(a)
        },
    );
    let diagnostics = report["diagnostics"].as_str().unwrap_or_default();
    assert_eq!(report["finalStatus"], "FAILED", "{report}");
    assert!(
        diagnostics.contains("2 TaskManager containers failed")
            && diagnostics.contains("Address already in use"),
        "{diagnostics}"
    );
    drop(busy);
    wait_for(
        Duration::from_secs(20),
        "the failed session's processes to end",
        || container_processes(&doomed).is_empty().then_some(()),
    );
    // The AM unregistered for good and removed the files it shipped.
    let staging = client
        .tmp
        .path()
        .join("sluice-yarn-sluice-it/.sluice")
        .join(&doomed);
    wait_for(
        Duration::from_secs(20),
        "the failed session's staging directory to go",
        || (!staging.exists()).then_some(()),
    );

    // A detached session: 1 slot per TaskManager, idle ones given back after 3 s.
    let started = Instant::now();
    let out = client.sluice(&[
        "-D",
        "resourcemanager.taskmanager-timeout=3 s",
        "-D",
        "yarn.application-attempts=2",
        "yarn-session",
        "-d",
        "-nm",
        "it-session",
        "-s",
        "1",
        "-tm",
        "256",
        "-jm",
        "256",
    ]);
    let wall = started.elapsed();
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    let app = field_after(&printed, "YARN application ").to_string();
    let startup_ms: u64 = field_after(&printed, "its JobManager answered ")
        .parse()
        .expect("ms");
    let rest = field_after(&printed, "JobManager Web Interface: http://").to_string();
    assert!(client.properties().is_file(), "no properties file");
    let report = client.app(&app);
    assert_eq!(report["state"], "RUNNING", "{report}");
    assert_eq!(report["applicationType"], "sluice");
    assert_eq!(report["name"], "it-session");
    // Only the AM runs until a job needs slots.
    assert_eq!(client.running_containers(&app), 1);
    assert_eq!(client.sluice_rest(&rest, "/overview")["taskmanagers"], 0);
    let list = client.sluice(&["list", "-m", "yarn-session"]);
    assert!(list.status.success(), "{}", text(&list));
    let listed = client.sluice(&["yarn-session", "--list"]);
    assert!(text(&listed).contains(&app), "{}", text(&listed));
    // Attaching by id finds the same JobManager.
    let attach = client.sluice(&["yarn-session", "-id", &app, "-d"]);
    assert!(attach.status.success(), "{}", text(&attach));
    assert!(text(&attach).contains(&rest), "{}", text(&attach));

    // wordcount at parallelism 2, streaming, needs two 1-slot TaskManagers at once: YARN grows
    // them. (In batch mode it would run stage by stage on whatever slots come first.)
    let (input, text_in) = write_input(client.tmp.path());
    let output = client.tmp.path().join("out");
    let job_started = Instant::now();
    let run = client.sluice(&[
        "run",
        "-t",
        "yarn-session",
        "-p",
        "2",
        "wordcount",
        "--input",
        input.to_str().expect("utf-8"),
        "--output",
        output.to_str().expect("utf-8"),
        "--execution-mode",
        "STREAMING",
    ]);
    let job_wall = job_started.elapsed();
    assert!(run.status.success(), "{}", text(&run));
    assert_eq!(read_final_counts(&output), reference_counts(&text_in));
    let overview = client.sluice_rest(&rest, "/overview");
    assert_eq!(overview["taskmanagers"], 2, "{overview}");
    let processes = container_processes(&app);
    let am_rss = processes
        .iter()
        .find(|p| p.2.contains("yarn-appmaster"))
        .map(|p| p.1)
        .expect("the AM process");
    let tm_rss: Vec<u64> = processes
        .iter()
        .filter(|p| p.2.contains(" taskmanager "))
        .map(|p| p.1)
        .collect();
    assert_eq!(tm_rss.len(), 2, "{processes:?}");

    // A job artifact submitted to the session: uploaded to its JobManager, fetched by the
    // TaskManager containers, which run its subtasks in worker processes.
    let artifact = test_job_bin();
    let sums = client.tmp.path().join("artifact-sums");
    let run = client.sluice(&sum_run("yarn-session", &artifact, &sums));
    assert!(run.status.success(), "{}", text(&run));
    assert_exact_sums(&sums);
    assert_eq!(
        client.sluice_rest(&rest, "/jars")["files"][0]["name"],
        "sluice-test-job"
    );

    // Idle for 3 s: both TaskManager containers go back to YARN; the AM stays.
    wait_for(
        Duration::from_secs(40),
        "idle TaskManagers to be released",
        || (client.running_containers(&app) == 1).then_some(()),
    );
    wait_for(
        Duration::from_secs(20),
        "the JobManager to see them gone",
        || (client.sluice_rest(&rest, "/overview")["taskmanagers"] == 0).then_some(()),
    );

    // A TaskManager container's process dies: the JobManager loses it, the pool asks YARN for
    // a replacement, and the job (with a restart strategy) runs again on the new container.
    let run = client.sluice(&[
        "-D",
        "restart-strategy.type=fixed-delay",
        "-D",
        "restart-strategy.fixed-delay.attempts=5",
        "run",
        "-t",
        "yarn-session",
        "-d",
        "-p",
        "1",
        "stream-sum",
        "--rate",
        "200",
    ]);
    assert!(run.status.success(), "{}", text(&run));
    let job = sluice_integration::job_id_of(&String::from_utf8_lossy(&run.stdout));
    let job_running =
        || (client.sluice_rest(&rest, &format!("/jobs/{job}"))["state"] == "RUNNING").then_some(());
    let first_tm = wait_for(Duration::from_secs(30), "stream-sum to run", || {
        job_running()?;
        let tms = client.sluice_rest(&rest, "/taskmanagers");
        tms["taskmanagers"][0]["id"].as_str().map(str::to_string)
    });
    let victim = container_processes(&app)
        .into_iter()
        .find(|p| p.2.contains(&first_tm))
        .unwrap_or_else(|| panic!("no process for {first_tm}"));
    let killed_at = Instant::now();
    let status = Command::new("kill")
        .args(["-9", &victim.0.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let replacement = wait_for(
        Duration::from_secs(60),
        "the job to run again on a replacement TaskManager",
        || {
            job_running()?;
            let tms = client.sluice_rest(&rest, "/taskmanagers");
            let id = tms["taskmanagers"][0]["id"].as_str()?.to_string();
            (id != first_tm).then_some(id)
        },
    );
    let recovery = killed_at.elapsed();
    assert!(replacement.starts_with("container_"), "{replacement}");
    let cancel = client.sluice(&["cancel", "-m", "yarn-session", &job]);
    assert!(cancel.status.success(), "{}", text(&cancel));

    // Two jobs at once in the session: the pool grows to a TaskManager for each.
    let mut jobs = Vec::new();
    for _ in 0..2 {
        let run = client.sluice(&[
            "run",
            "-t",
            "yarn-session",
            "-d",
            "-p",
            "1",
            "stream-sum",
            "--rate",
            "100",
        ]);
        assert!(run.status.success(), "{}", text(&run));
        jobs.push(sluice_integration::job_id_of(&String::from_utf8_lossy(
            &run.stdout,
        )));
    }
    wait_for(
        Duration::from_secs(60),
        "both jobs to run on two TaskManagers",
        || {
            let all_running = jobs
                .iter()
                .all(|j| client.sluice_rest(&rest, &format!("/jobs/{j}"))["state"] == "RUNNING");
            (all_running
                && client.sluice_rest(&rest, "/overview")["taskmanagers"] == 2
                && client.running_containers(&app) == 3)
                .then_some(())
        },
    );
    for j in &jobs {
        let cancel = client.sluice(&["cancel", "-m", "yarn-session", j]);
        assert!(cancel.status.success(), "{}", text(&cancel));
    }

    // The AM process dies: YARN starts attempt 2, a fresh JobManager (jobs are not recovered
    // without HA), and `run -t yarn-session` finds its new address through YARN.
    let am = container_processes(&app)
        .into_iter()
        .find(|p| p.2.contains("yarn-appmaster"))
        .expect("the AM process");
    let status = Command::new("kill")
        .args(["-9", &am.0.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let second = wait_for(Duration::from_secs(60), "attempt 2 to register", || {
        let a = client.app(&app);
        let address = a["amRPCAddress"].as_str()?.to_string();
        (a["state"] == "RUNNING" && address != rest && address.contains(':')).then_some(address)
    });
    let run = client.sluice(&["run", "-t", "yarn-session", "-p", "1", "wordcount"]);
    assert!(run.status.success(), "{}", text(&run));
    assert_eq!(client.sluice_rest(&second, "/overview")["jobs-finished"], 1);

    // Kill through the CLI: KILLED, no process of the application left, no properties file.
    let kill = client.sluice(&["yarn-session", "--kill"]);
    assert!(kill.status.success(), "{}", text(&kill));
    assert_eq!(client.app(&app)["state"], "KILLED");
    wait_for(
        Duration::from_secs(20),
        "the application's processes to end",
        || container_processes(&app).is_empty().then_some(()),
    );
    assert!(!client.properties().exists());
    let after = client.sluice(&["run", "-t", "yarn-session", "wordcount"]);
    assert!(!after.status.success());
    assert!(text(&after).contains("no YARN session"), "{}", text(&after));

    // An attached session lives until Ctrl-C, which kills the application.
    let mut attached = Command::new(sluice_bin())
        .args(["yarn-session", "-tm", "256", "-jm", "256"])
        .env("HADOOP_CONF_DIR", &cluster.dir)
        .env("TMPDIR", client.tmp.path())
        .env("USER", "sluice-it")
        .env_remove("SLUICE_CONF_DIR")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn yarn-session");
    let stdout = attached.stdout.take().expect("stdout");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let attached_app = loop {
        let line = lines
            .next()
            .expect("yarn-session ended before it was up")
            .expect("read");
        if let Some(rest) = line.strip_prefix("YARN application ") {
            break rest.split_whitespace().next().expect("id").to_string();
        }
    };
    assert_eq!(client.app(&attached_app)["state"], "RUNNING");
    let status = Command::new("kill")
        .args(["-INT", &attached.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let exit = attached.wait().expect("wait");
    assert!(exit.success(), "{exit:?}");
    assert_eq!(client.app(&attached_app)["state"], "KILLED");
    wait_for(
        Duration::from_secs(20),
        "the attached session's processes to end",
        || container_processes(&attached_app).is_empty().then_some(()),
    );

    // One job, one application: it ends with the job, SUCCEEDED or FAILED.
    let app_output = client.tmp.path().join("app-out");
    let small = [
        "-D",
        "taskmanager.memory.process.size=256m",
        "-D",
        "jobmanager.memory.process.size=256m",
    ];
    let mut args: Vec<&str> = small.to_vec();
    args.extend([
        "run",
        "-t",
        "yarn-application",
        "-p",
        "2",
        "wordcount",
        "--input",
        input.to_str().expect("utf-8"),
        "--output",
        app_output.to_str().expect("utf-8"),
    ]);
    let application_started = Instant::now();
    let run = client.sluice(&args);
    let application_wall = application_started.elapsed();
    let printed = text(&run);
    assert!(run.status.success(), "{printed}");
    assert_eq!(read_counts(&app_output), reference_counts(&text_in));
    let one_job_app = field_after(&printed, "Submitted YARN application ").to_string();
    let report = client.app(&one_job_app);
    assert_eq!(
        (report["state"].as_str(), report["finalStatus"].as_str()),
        (Some("FINISHED"), Some("SUCCEEDED")),
        "{report}"
    );
    wait_for(
        Duration::from_secs(20),
        "the one-job application's processes to end",
        || container_processes(&one_job_app).is_empty().then_some(()),
    );
    // A job artifact as an application: the artifact is the application's binary, so its
    // program runs in the JobManager's and TaskManagers' own processes.
    let app_sums = client.tmp.path().join("app-artifact-sums");
    let mut args: Vec<&str> = small.to_vec();
    let sum_args = sum_run("yarn-application", &artifact, &app_sums);
    args.extend(sum_args.iter().copied());
    let run = client.sluice(&args);
    let printed = text(&run);
    assert!(run.status.success(), "{printed}");
    assert!(printed.contains("running sum from "), "{printed}");
    assert_exact_sums(&app_sums);
    let artifact_app = field_after(&printed, "Submitted YARN application ").to_string();
    assert_eq!(client.app(&artifact_app)["finalStatus"], "SUCCEEDED");
    // What is not an artifact, or names no program of it, is refused before YARN is asked.
    let before = client.live_sluice_apps();
    let mut args: Vec<&str> = small.to_vec();
    let not_artifact = client.tmp.path().join("input.txt");
    let not_artifact = not_artifact.to_str().expect("utf-8");
    args.extend(["run", "-t", "yarn-application", not_artifact]);
    let refused = client.sluice(&args);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("no ELF header"),
        "{}",
        text(&refused)
    );
    let mut args: Vec<&str> = small.to_vec();
    let artifact_arg = artifact.to_str().expect("utf-8");
    args.extend(["run", "-t", "yarn-application", "-c", "nope", artifact_arg]);
    let refused = client.sluice(&args);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("no program 'nope'") && text(&refused).contains("sum"),
        "{}",
        text(&refused)
    );
    assert_eq!(client.live_sluice_apps(), before);

    let mut args: Vec<&str> = small.to_vec();
    args.extend([
        "run",
        "-t",
        "yarn-application",
        "wordcount",
        "--input",
        "/no/such/input",
    ]);
    let failing = client.sluice(&args);
    let printed = text(&failing);
    assert!(!failing.status.success(), "{printed}");
    assert!(
        printed.contains("FAILED") && printed.contains("/no/such/input"),
        "{printed}"
    );
    let failed_app = field_after(&printed, "Submitted YARN application ").to_string();
    assert_eq!(client.app(&failed_app)["finalStatus"], "FAILED");

    println!(
        "MEASURED submission-to-serving {startup_ms} ms (client wall {} ms); wordcount -p 2 with 2 new TaskManager containers {} ms; AM RSS {am_rss} KiB; TaskManager RSS {tm_rss:?} KiB; TaskManager killed to job RUNNING on a replacement container {} ms; run -t yarn-application wordcount -p 2 submission to FINISHED/SUCCEEDED {} ms",
        wall.as_millis(),
        job_wall.as_millis(),
        recovery.as_millis(),
        application_wall.as_millis()
    );
}
