//! JobManager high availability with a real ZooKeeper: two JobManagers elect a leader, the
//! standby takes over when the leader dies or is frozen past its session, and the job resumes
//! from its last checkpoint with every record exactly once, its code from a job artifact too.

use std::path::Path;
use std::time::{Duration, Instant};

use sluice_integration::{
    StandaloneCluster, all_running, counting_args, signal, test_job_bin, wait_for,
};
use zk_ha::testkit::{ZkEnsemble, ZkServer};

fn ha_config(zk: &ZkServer, scratch: &Path) -> String {
    ha_config_for(&zk.connect_string(), scratch)
}

fn ha_config_for(quorum: &str, scratch: &Path) -> String {
    format!(
        "high-availability.type: zookeeper\nhigh-availability.zookeeper.quorum: {}\nhigh-availability.storageDir: {}\nexecution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {}\nrestart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 100\nrestart-strategy.fixed-delay.delay: 200 ms\n",
        quorum,
        scratch.join("ha").display(),
        scratch.join("checkpoints").display(),
    )
}

/// The pid of the JobManager whose log says it leads, and the other one.
fn leader_and_standby(cluster: &StandaloneCluster) -> (u32, u32) {
    let pids = cluster.pids("jobmanager");
    assert_eq!(pids.len(), 2, "two JobManagers run");
    let leader = wait_for(Duration::from_secs(30), "a JobManager to lead", || {
        pids.iter()
            .copied()
            .find(|&p| cluster.logs_of_pid_mention(p, "granted leadership"))
    });
    let standby = pids.into_iter().find(|&p| p != leader).expect("standby");
    (leader, standby)
}

fn check_exactly_once(cluster: &StandaloneCluster, records: u64, keys: u64, dir: &Path) {
    let (ok, text) = cluster.check_counting(records, keys, dir);
    assert!(
        ok,
        "not exactly once:
{text}"
    );
}

fn start_counting(cluster: &StandaloneCluster, records: u64, keys: u64, out: &Path) -> String {
    cluster.submit_args(&counting_args(2, records, keys, out, 5000))
}

/// `counting` from the test job's artifact: a new leader plans the job again from the copy kept
/// in high-availability.storageDir, and the TaskManagers' workers fetch it there.
fn start_counting_from_artifact(
    cluster: &StandaloneCluster,
    records: u64,
    keys: u64,
    out: &Path,
    scratch: &Path,
) -> String {
    let mut args = counting_args(2, records, keys, out, 5000);
    let at = args.iter().position(|a| a == "counting").expect("program");
    let artifact = test_job_bin().display().to_string();
    args.splice(
        at..=at,
        ["-c".to_string(), "counting".to_string(), artifact],
    );
    let id = cluster.submit_args(&args);
    let stored = scratch.join("ha/default/jars");
    let kept = std::fs::read_dir(&stored).map_or(0, |d| d.flatten().count());
    assert!(kept >= 2, "no artifact and record in {}", stored.display());
    id
}

#[test]
fn killing_the_leader_lets_the_standby_resume_the_job_from_its_checkpoint_exactly_once() {
    let zk = ZkServer::start();
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster =
        StandaloneCluster::start_with_jobmanagers(2, 2, 1, &ha_config(&zk, scratch.path()));
    let (leader, standby) = leader_and_standby(&cluster);
    // The standby's REST API points at the leader.
    let standby_port = cluster.rest_ports[cluster
        .pids("jobmanager")
        .iter()
        .position(|&p| p == standby)
        .expect("index")];
    let (status, _) = {
        let r = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client")
            .get(format!("http://127.0.0.1:{standby_port}/overview"))
            .send()
            .expect("standby answers");
        (r.status().as_u16(), r.headers().get("location").cloned())
    };
    assert_eq!(status, 307, "a standby redirects to the leader");

    let out = scratch.path().join("out");
    let (records, keys) = (60_000u64, 5u64);
    let id = start_counting_from_artifact(&cluster, records, keys, &out, scratch.path());
    wait_for(Duration::from_secs(40), "a completed checkpoint", || {
        (cluster.completed_checkpoints(&id) >= 1).then_some(())
    });
    let killed = Instant::now();
    signal("-9", leader);
    let back = wait_for(
        Duration::from_secs(60),
        "the job RUNNING under the new leader",
        || all_running(&cluster.job(&id)).then(|| killed.elapsed()),
    );
    println!(
        "kill -9 of the leader -> job RUNNING under the standby: {} ms",
        back.as_millis()
    );
    assert!(cluster.logs_of_pid_mention(standby, "granted leadership"));
    wait_for(Duration::from_secs(90), "the job to finish", || {
        let s = cluster.job(&id)["state"].as_str().unwrap_or("").to_string();
        assert_ne!(s, "FAILED", "the job failed");
        (s == "FINISHED").then_some(())
    });
    check_exactly_once(&cluster, records, keys, &out);
}

#[test]
fn a_leader_frozen_past_its_session_is_deposed_and_acts_no_more() {
    let zk = ZkServer::start();
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster =
        StandaloneCluster::start_with_jobmanagers(2, 2, 1, &ha_config(&zk, scratch.path()));
    let (leader, standby) = leader_and_standby(&cluster);
    let out = scratch.path().join("out");
    let (records, keys) = (60_000u64, 5u64);
    let id = start_counting_from_artifact(&cluster, records, keys, &out, scratch.path());
    wait_for(Duration::from_secs(40), "a completed checkpoint", || {
        (cluster.completed_checkpoints(&id) >= 1).then_some(())
    });
    // Longer than the session timeout (6 s): ZooKeeper expires the session, the standby leads.
    signal("-STOP", leader);
    wait_for(Duration::from_secs(40), "the standby to lead", || {
        cluster
            .logs_of_pid_mention(standby, "granted leadership")
            .then_some(())
    });
    // The new leader acts while the old one is still frozen: it takes over the job.
    wait_for(
        Duration::from_secs(40),
        "the standby to recover the job",
        || {
            cluster
                .logs_of_pid_mention(standby, "recovered a job from the HA job graph store")
                .then_some(())
        },
    );
    signal("-CONT", leader);
    wait_for(
        Duration::from_secs(30),
        "the old leader to notice it was deposed",
        || {
            cluster
                .logs_of_pid_mention(leader, "leadership revoked")
                .then_some(())
        },
    );
    wait_for(Duration::from_secs(90), "the job to finish", || {
        let s = cluster.job(&id)["state"].as_str().unwrap_or("").to_string();
        assert_ne!(s, "FAILED", "the job failed");
        (s == "FINISHED").then_some(())
    });
    check_exactly_once(&cluster, records, keys, &out);
}

/// How often the JobManager `pid` has logged its ZooKeeper connection coming back within its
/// session.
fn reconnections(cluster: &StandaloneCluster, pid: u32) -> usize {
    cluster.mentions_in_logs_of_pid(
        pid,
        "ZooKeeper connection re-established within the session",
    )
}

/// Whether the job ever left RUNNING: a restart shows as a RESTARTING timestamp.
fn restarted(cluster: &StandaloneCluster, id: &str) -> bool {
    let j = cluster.job(id);
    j["timestamps"]["RESTARTING"].as_u64().unwrap_or(0) > 0 || j["state"] != "RUNNING"
}

#[test]
fn losing_the_zookeeper_leader_or_restarting_the_whole_ensemble_restarts_no_job() {
    let mut zk = ZkEnsemble::start(3);
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster = StandaloneCluster::start_with_jobmanagers(
        2,
        1,
        2,
        &ha_config_for(&zk.connect_string(), scratch.path()),
    );
    let (leader, _) = leader_and_standby(&cluster);
    let id = cluster.submit_detached(&["-p", "2", "stream-sum", "--rate", "2000"]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        all_running(&cluster.job(&id)).then_some(())
    });
    // Kill the ensemble's leader: the others elect a new one; sessions move over. Every server
    // drops its clients until the new quorum forms, so the leading JobManager sees its
    // connection go and come back within the session: the moment it could have given up.
    let back = |n| {
        wait_for(
            Duration::from_secs(40),
            "the leader's ZooKeeper connection to come back within its session",
            || (reconnections(&cluster, leader) > n).then_some(()),
        )
    };
    let before = reconnections(&cluster, leader);
    let zk_leader = zk.wait_leader(Duration::from_secs(30));
    zk.members[zk_leader].kill();
    back(before);
    assert!(
        !restarted(&cluster, &id),
        "the job restarted when ZooKeeper's leader died"
    );
    zk.members[zk_leader].restart();
    zk.wait_leader(Duration::from_secs(30));
    // Restart every member, within the session timeout (6 s): sessions survive.
    let before = reconnections(&cluster, leader);
    for m in zk.members.iter_mut() {
        m.kill();
    }
    for m in zk.members.iter_mut() {
        m.restart();
    }
    zk.wait_leader(Duration::from_secs(30));
    back(before);
    assert!(
        !restarted(&cluster, &id),
        "the job restarted when the ensemble restarted"
    );
    assert!(
        !cluster.logs_of_pid_mention(leader, "leadership revoked"),
        "the JobManager kept its leadership"
    );
    let out = cluster.cli(&["cancel", "-m", &cluster.rest(), &id]);
    assert!(out.status.success());
}

/// The REST port of the JobManager that leads now: a standby redirects, the leader answers.
fn leading_port(ports: &[u16]) -> Option<u16> {
    let http = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    ports.iter().copied().find(|p| {
        http.get(format!("http://127.0.0.1:{p}/overview"))
            .send()
            .is_ok_and(|r| r.status().as_u16() == 200)
    })
}

/// A seeded schedule of JobManager failures while `counting` runs under checkpoints: the
/// leader is killed (and started again later as a standby) or frozen past its session, a few
/// times; then the job must finish with every record exactly once. The seed is printed; set
/// `SLUICE_CHAOS_SEED` to replay a schedule and `SLUICE_HA_CHAOS_EVENTS` for a longer one.
#[test]
fn seeded_jobmanager_chaos_keeps_counting_exactly_once() {
    let seed: u64 = std::env::var("SLUICE_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
        | 1;
    let events: usize = std::env::var("SLUICE_HA_CHAOS_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    println!("HA chaos seed {seed} ({events} events); replay with SLUICE_CHAOS_SEED={seed}");
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let zk = ZkServer::start();
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster =
        StandaloneCluster::start_with_jobmanagers(2, 2, 1, &ha_config(&zk, scratch.path()));
    let ports = cluster.rest_ports.clone();
    // Port -> pid, in start order as the pid file lists them.
    let mut pid_of: Vec<(u16, u32)> = ports
        .iter()
        .copied()
        .zip(cluster.pids("jobmanager"))
        .collect();
    let out = scratch.path().join("out");
    let (records, keys) = (40_000u64 * (events as u64 + 1), 5u64);
    let id = start_counting(&cluster, records, keys, &out);
    for event in 0..events {
        wait_for(Duration::from_secs(60), "a completed checkpoint", || {
            (cluster.completed_checkpoints(&id) >= 1).then_some(())
        });
        let port = wait_for(Duration::from_secs(60), "a leader", || leading_port(&ports));
        let pid = pid_of
            .iter()
            .find(|(p, _)| *p == port)
            .map(|(_, pid)| *pid)
            .expect("the leader's pid");
        if next() % 2 == 0 {
            println!("event {event} (seed {seed}): kill -9 the leader on port {port}");
            signal("-9", pid);
            wait_for(Duration::from_secs(60), "another leader", || {
                leading_port(&ports).filter(|p| *p != port)
            });
            // Start it again as a standby on its port.
            let o = cluster.script(
                "jobmanager.sh",
                &[
                    "start",
                    "-D",
                    "jobmanager.rpc.port=0",
                    "-D",
                    &format!("rest.port={port}"),
                ],
            );
            assert!(o.status.success(), "seed {seed}: restart a JobManager");
            let new_pid = *cluster.pids("jobmanager").last().expect("a pid");
            pid_of.retain(|(p, _)| *p != port);
            pid_of.push((port, new_pid));
        } else {
            println!(
                "event {event} (seed {seed}): SIGSTOP the leader on port {port} past its session"
            );
            signal("-STOP", pid);
            wait_for(Duration::from_secs(60), "another leader", || {
                leading_port(&ports).filter(|p| *p != port)
            });
            signal("-CONT", pid);
        }
        let wait = Duration::from_millis(1_000 + next() % 3_000);
        std::thread::sleep(wait);
    }
    wait_for(Duration::from_secs(180), "the job to finish", || {
        let s = cluster.job(&id)["state"].as_str().unwrap_or("").to_string();
        assert_ne!(s, "FAILED", "seed {seed}: the job failed");
        (s == "FINISHED").then_some(())
    });
    let report = cluster.cli(&[
        "check-counting",
        "--records",
        &records.to_string(),
        "--keys",
        &keys.to_string(),
        &out.display().to_string(),
    ]);
    assert!(
        report.status.success(),
        "seed {seed}: not exactly once:\n{}",
        String::from_utf8_lossy(&report.stdout)
    );
}
