//! Network partitions between hosts: a cluster whose JobManager and TaskManagers each run on
//! their own host (a network namespace, `sluice_integration::hosts`), `counting` under
//! checkpoints into a directory the hosts share, a seeded cut between two hosts, and the
//! exactly-once checker at the end. Needs root (CI has it).
//!
//! `SLUICE_PARTITION_SEED=S` replays a run (the seed is printed at the start and with every
//! failure): it draws when the cut happens and how long it lasts.

use std::time::{Duration, Instant};

use sluice_integration::hosts::Network;
use sluice_integration::{
    Rng, StandaloneCluster, all_running, counting_args, deployed_since, now_ms, run_seed, wait_for,
};

fn seed() -> u64 {
    run_seed("SLUICE_PARTITION_SEED")
}

/// Heartbeats every 500 ms, a TaskManager or JobManager given up after two missing ones
/// (`heartbeat.rpc-failure-threshold`, default 2: 1.5 s); checkpoints every second into the
/// shared directory; restart at once, always.
fn config(checkpoints: &std::path::Path) -> String {
    format!(
        "heartbeat.interval: 500 ms\nheartbeat.timeout: 10 s\nstate.backend.type: hashmap\nexecution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {}\nslot.request.timeout: 2 min\nrestart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 1000\nrestart-strategy.fixed-delay.delay: 100 ms\n",
        checkpoints.display()
    )
}

/// A cluster of a JobManager and three one-slot TaskManagers, each on its own host, running
/// `counting` at parallelism 2 with a checkpoint completed: what every scenario starts from.
struct Running {
    rng: Rng,
    cluster: StandaloneCluster,
    network: Network,
    _scratch: tempfile::TempDir,
    output: std::path::PathBuf,
    id: String,
    records: u64,
    keys: u64,
    rate: u64,
    /// The ids of the two TaskManagers that run the job (the third is the spare).
    busy: Vec<String>,
}

impl Running {
    fn start(test: &str) -> Running {
        let rng = Rng::for_test(seed(), test);
        eprintln!(
            "partition seed {}: replay with SLUICE_PARTITION_SEED={}",
            seed(),
            seed()
        );
        let network = Network::new(&["jm", "tm1", "tm2", "tm3"]);
        let scratch = tempfile::tempdir().expect("scratch");
        let checkpoints = scratch.path().join("checkpoints");
        let output = scratch.path().join("out");
        let tms = [
            network.host("tm1"),
            network.host("tm2"),
            network.host("tm3"),
        ];
        let cluster =
            StandaloneCluster::start_on_hosts(network.host("jm"), &tms, 1, &config(&checkpoints));
        let rate = 2_000u64;
        let (records, keys) = (rate * 25, 7u64);
        let id = cluster.submit_args(&counting_args(2, records, keys, &output, rate));
        wait_for(Duration::from_secs(60), "a completed checkpoint", || {
            (all_running(&cluster.job(&id)) && cluster.completed_checkpoints(&id) >= 1)
                .then_some(())
        });
        let busy: Vec<String> = cluster.get("/taskmanagers").expect("taskmanagers")["taskmanagers"]
            .as_array()
            .expect("list")
            .iter()
            .filter(|t| t["freeSlots"] == 0)
            .filter_map(|t| t["id"].as_str().map(String::from))
            .collect();
        assert_eq!(busy.len(), 2, "two busy TaskManagers and a spare");
        Running {
            rng,
            cluster,
            network,
            _scratch: scratch,
            output,
            id,
            records,
            keys,
            rate,
            busy,
        }
    }
}

/// Waits for the job to finish and checks that its output holds every record exactly once;
/// the checker's report.
fn finish_exactly_once(
    cluster: &StandaloneCluster,
    id: &str,
    records: u64,
    keys: u64,
    rate: u64,
    output: &std::path::Path,
) -> String {
    wait_for(
        Duration::from_secs(records / rate + 60),
        "the job to finish",
        || match cluster.job_state(id).as_str() {
            "FAILED" => panic!(
                "the job failed (partition seed {}): {}",
                seed(),
                cluster.exceptions(id)
            ),
            "FINISHED" => Some(()),
            _ => None,
        },
    );
    let (ok, report) = cluster.check_counting(records, keys, output);
    assert!(
        ok && report.starts_with("OK"),
        "not exactly once (partition seed {}):\n{report}",
        seed()
    );
    report
}

/// A TaskManager cut off from the JobManager, but not from the other TaskManagers: the
/// JobManager gives it up after the missing heartbeats and fails its tasks over to the spare,
/// the cut-off TaskManager gives up the silent JobManager and cancels its own tasks (so it
/// commits nothing more), and when the cut heals it registers again.
#[test]
fn a_taskmanager_cut_off_from_the_jobmanager_is_failed_over_and_rejoins_when_healed() {
    let Running {
        // Bound first, dropped last: the processes stop before their hosts and files go.
        _scratch,
        network,
        cluster,
        mut rng,
        id,
        records,
        keys,
        rate,
        output,
        busy,
    } = Running::start("tm_cut_from_jm");
    let victim_id = busy[rng.range(0, 2) as usize].clone();
    let by_address = cluster.taskmanagers_by_address();
    let victim = by_address
        .iter()
        .find(|(_, id)| **id == victim_id)
        .and_then(|(address, _)| network.host_of_address(address))
        .expect("the busy TaskManager's host")
        .clone();
    std::thread::sleep(rng.millis(0, 1_000));

    let cut_ms = now_ms();
    let cut = Instant::now();
    network.partition("jm", &victim.name);
    eprintln!("partition: cut {} ({victim_id}) from jm", victim.name);
    wait_for(
        Duration::from_secs(30),
        "the job to run again without the cut-off TaskManager",
        || {
            let j = cluster.job(&id);
            (all_running(&j)
                && deployed_since(&j, cut_ms)
                && !cluster.taskmanager_ids().contains(&victim_id))
            .then_some(())
        },
    );
    let cut_to_running = cut.elapsed();
    eprintln!("partition: cut -> RUNNING on the spare in {cut_to_running:?}");

    // What an operator sees: the JobManager lost it for missing heartbeats, and the cut-off
    // TaskManager lost the JobManager for its silence and cancelled what it ran.
    let e = cluster.exceptions(&id);
    let lost = format!("TaskManager {victim_id} was lost: no heartbeat for");
    assert!(
        e["exceptionHistory"]["entries"]
            .as_array()
            .is_some_and(|es| es
                .iter()
                .any(|x| x["stacktrace"].as_str().is_some_and(|s| s.contains(&lost)))),
        "the failover names the missing heartbeats ({lost}): {e}"
    );
    let victim_pid = cluster
        .pids("taskmanager")
        .into_iter()
        .find(|pid| cluster.logs_of_pid_mention(*pid, &victim_id))
        .expect("the cut-off TaskManager's pid");
    wait_for(
        Duration::from_secs(10),
        "the cut-off TaskManager to give up the silent JobManager",
        || {
            cluster
                .logs_of_pid_mention(victim_pid, "no message from the JobManager for")
                .then_some(())
        },
    );

    // Heal after a while; the TaskManager registers again and is the new spare.
    std::thread::sleep(rng.millis(500, 3_000));
    network.heal("jm", &victim.name);
    eprintln!(
        "partition: healed {} after {:?}",
        victim.name,
        cut.elapsed()
    );
    wait_for(
        Duration::from_secs(30),
        "the cut-off TaskManager to register again",
        || cluster.taskmanager_ids().contains(&victim_id).then_some(()),
    );

    let report = finish_exactly_once(&cluster, &id, records, keys, rate, &output);
    eprintln!(
        "partition (tm cut from jm, seed {}): cut -> RUNNING {} ms; {}",
        seed(),
        cut_to_running.as_millis(),
        report.lines().next().unwrap_or_default()
    );
}

/// The data path between the two TaskManagers that run the job cut while both keep their
/// control connections: the job must not hang. Both ends of the QUIC connection hear nothing,
/// not even keep-alives, for its idle timeout; whichever notices first (the consumer's read or
/// the producer's write) fails its channel as stalled, its task fails, and the job fails over
/// (again while the cut lasts); healed, it finishes exactly once.
#[test]
fn a_cut_data_path_between_taskmanagers_is_detected_as_a_stall_and_failed_over() {
    let Running {
        // Bound first, dropped last: the processes stop before their hosts and files go.
        _scratch,
        network,
        cluster,
        mut rng,
        id,
        records,
        keys,
        rate,
        output,
        busy,
    } = Running::start("data_path_cut");
    let by_address = cluster.taskmanagers_by_address();
    let host_of = |id: &str| {
        by_address
            .iter()
            .find(|(_, i)| *i == id)
            .and_then(|(address, _)| network.host_of_address(address))
            .expect("a busy TaskManager's host")
            .clone()
    };
    let (a, b) = (host_of(&busy[0]), host_of(&busy[1]));
    std::thread::sleep(rng.millis(0, 1_000));

    let cut = Instant::now();
    network.partition(&a.name, &b.name);
    eprintln!("partition: cut the data path {} <-> {}", a.name, b.name);
    let failures = |c: &StandaloneCluster| {
        c.exceptions(&id)["exceptionHistory"]["entries"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let first = wait_for(
        Duration::from_secs(30),
        "the stalled channel to fail the job over",
        || failures(&cluster).into_iter().next(),
    );
    let cut_to_failure = cut.elapsed();
    eprintln!("partition: cut -> first failure in {cut_to_failure:?}: {first}");
    // Both TaskManagers keep their control connections: nobody was lost.
    let ids = cluster.taskmanager_ids();
    assert!(
        busy.iter().all(|b| ids.contains(b)),
        "a cut data path costs no TaskManager: {ids:?}"
    );
    let history = failures(&cluster);
    // Either end may notice first: the consumer loses its input channel, or the producer
    // its consumer (its writes time out).
    assert!(
        history
            .iter()
            .any(|f| f["stacktrace"].as_str().is_some_and(|s| {
                s.contains("lost the input channel from")
                    || (s.contains("the consumer of subpartition") && s.contains("went away"))
            })),
        "a failure is the lost data channel: {history:?}"
    );
    wait_for(
        Duration::from_secs(10),
        "a TaskManager to log the stalled data channel",
        || {
            cluster
                .logs("taskmanager")
                .iter()
                .any(|l| {
                    l.lines().any(|line| {
                        line.contains("data channel to ")
                            && line.contains("stalled for")
                            && (line.contains(&a.address) || line.contains(&b.address))
                    })
                })
                .then_some(())
        },
    );

    std::thread::sleep(rng.millis(0, 3_000));
    network.heal(&a.name, &b.name);
    let healed = cut.elapsed();
    eprintln!("partition: healed after {healed:?}");
    // Running for good: every vertex deployed after the newest failure, and no new one since.
    wait_for(
        Duration::from_secs(60),
        "the job to run again after the heal",
        || {
            let j = cluster.job(&id);
            let newest = failures(&cluster)
                .first()
                .and_then(|f| f["timestamp"].as_u64())
                .unwrap_or(0);
            (all_running(&j) && deployed_since(&j, newest) || cluster.job_state(&id) == "FINISHED")
                .then_some(())
        },
    );
    let heal_to_running = cut.elapsed().saturating_sub(healed);
    let report = finish_exactly_once(&cluster, &id, records, keys, rate, &output);
    eprintln!(
        "partition (data path cut, seed {}): cut -> first failure {} ms, {} failures during a {} ms cut, heal -> RUNNING {} ms; {}",
        seed(),
        cut_to_failure.as_millis(),
        failures(&cluster).len(),
        healed.as_millis(),
        heal_to_running.as_millis(),
        report.lines().next().unwrap_or_default()
    );
}
