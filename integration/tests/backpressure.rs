//! A deliberately slow consumer: backpressure throttles the sources, and every process's memory
//! stays bounded by the configured network memory, however far the producers could run ahead.

use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_integration::{StandaloneCluster, wait_for};

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Each thread of `pid`: its name and Linux scheduling policy (`/proc/PID/task/TID/stat`).
fn thread_policies(pid: u32) -> Vec<(String, u32)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            // The name is in parentheses and may hold spaces; fields count on after it.
            let (open, close) = (stat.find('(')?, stat.rfind(')')?);
            let name = stat[open + 1..close].to_string();
            // Field 41 (policy) is the 39th after the name's ")".
            let policy = stat[close + 1..].split_whitespace().nth(38)?.parse().ok()?;
            Some((name, policy))
        })
        .collect()
}

fn vertex_metric(job: &Value, name_prefix: &str, metric: &str) -> u64 {
    job["vertices"]
        .as_array()
        .and_then(|vs| {
            vs.iter().find(|v| {
                v["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(name_prefix))
            })
        })
        .and_then(|v| v["metrics"][metric].as_u64())
        .unwrap_or(0)
}

#[test]
fn a_slow_sink_throttles_the_sources_and_memory_stays_bounded() {
    // 8 MiB of network memory per TaskManager: 256 buffers of 32 KiB.
    let cluster = StandaloneCluster::start(
        2,
        1,
        "taskmanager.memory.network.min: 8mb\ntaskmanager.memory.network.max: 8mb\nheartbeat.interval: 500 ms\nheartbeat.timeout: 10 s\nheartbeat.rpc-failure-threshold: -1",
    );
    let rest = cluster.rest();
    // Unthrottled, the sources would make 20 M records (2 GB) in seconds.
    let job = cluster.submit_detached(&[
        "-p",
        "2",
        "shuffle",
        "--records",
        "20000000",
        "--sink-delay-us",
        "20",
    ]);
    wait_for(Duration::from_secs(30), "the job to run", || {
        (cluster.get(&format!("/jobs/{job}")).ok()?["state"] == "RUNNING").then_some(())
    });
    let pids = cluster.pids("taskmanager");
    // A RUNNING job may still be starting its subtasks' threads: wait until every TaskManager
    // runs some.
    wait_for(
        Duration::from_secs(30),
        "subtask threads on every TaskManager",
        || {
            pids.iter()
                .all(|&pid| {
                    thread_policies(pid)
                        .iter()
                        .any(|(name, _)| name.starts_with("task v"))
                })
                .then_some(())
        },
    );
    // The threads that run subtasks and move their records run under SCHED_BATCH (3), the
    // default of `taskmanager.threads.scheduling-policy`; the RPC runtime keeps the default (0).
    for &pid in &pids {
        let threads = thread_policies(pid);
        let of = |prefix: &str| -> Vec<u32> {
            threads
                .iter()
                .filter(|(name, _)| name.starts_with(prefix))
                .map(|(_, policy)| *policy)
                .collect()
        };
        for prefix in ["task v", "sluice-data"] {
            let policies = of(prefix);
            assert!(
                !policies.is_empty() && policies.iter().all(|&p| p == 3),
                "TaskManager {pid}: {prefix} threads' policies {policies:?} in {threads:?}"
            );
        }
        assert!(of("tokio-rt-worker").iter().all(|&p| p == 0), "{threads:?}");
    }
    let baseline: Vec<u64> = pids.iter().map(|p| rss_kib(*p).unwrap_or(0)).collect();
    let started = Instant::now();
    let mut peak = baseline.clone();
    let mut max_in_flight = 0u64;
    let mut sink_read = 0u64;
    // The slow sink's input channels fill up: Flink's inPoolUsage near 1.
    let mut sink_in_pool = 0.0f64;
    while started.elapsed() < Duration::from_secs(8) {
        for (i, pid) in pids.iter().enumerate() {
            peak[i] = peak[i].max(rss_kib(*pid).unwrap_or(0));
        }
        if let Ok(details) = cluster.get(&format!("/jobs/{job}")) {
            let written = vertex_metric(&details, "Generator", "write-records");
            sink_read = vertex_metric(&details, "Count", "read-records");
            max_in_flight = max_in_flight.max(written.saturating_sub(sink_read));
            let sink = details["vertices"].as_array().and_then(|vs| {
                vs.iter()
                    .find(|v| v["name"].as_str().is_some_and(|n| n.starts_with("Count")))
            });
            if let Some(vid) = sink.and_then(|v| v["id"].as_str()) {
                let usage = cluster
                    .get(&format!(
                        "/jobs/{job}/vertices/{vid}/subtasks/metrics?get=inPoolUsage&agg=max"
                    ))
                    .ok();
                if let Some(max) = usage.as_ref().and_then(|u| u[0]["max"].as_f64()) {
                    sink_in_pool = sink_in_pool.max(max);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = cluster.cli(&["cancel", "-m", &rest, &job]);
    eprintln!(
        "sink read {sink_read} records; sources at most {max_in_flight} ahead; sink inPoolUsage up to {sink_in_pool}; RSS baseline {baseline:?} KiB, peak {peak:?} KiB"
    );
    assert!(
        sink_in_pool > 0.5,
        "a back-pressuring sink's input channels are full: inPoolUsage {sink_in_pool}"
    );
    assert!(sink_read > 0, "the sink made progress");
    // The sources ran no further ahead of the sink than the buffers between them can hold:
    // 8 MiB per TaskManager of 104-byte records is under 170 k records (metrics lag by a
    // heartbeat, so allow for half a second of the sink's pace on top).
    assert!(
        max_in_flight < 400_000,
        "sources ran {max_in_flight} records ahead of a slow sink"
    );
    for (i, pid) in pids.iter().enumerate() {
        let growth_mib = peak[i].saturating_sub(baseline[i]) / 1024;
        assert!(
            growth_mib < 64,
            "TaskManager {pid} grew by {growth_mib} MiB under a slow sink (network memory: 8 MiB)"
        );
    }
}

/// Bytes sent and received so far on the established TCP connections of a local port.
fn bytes_on_port(port: u16) -> u64 {
    let out = std::process::Command::new("ss")
        .args([
            "-tin",
            "state",
            "established",
            &format!("( sport = :{port} )"),
        ])
        .output()
        .expect("ss (iproute2) is needed to count bytes on a port");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .filter_map(|field| {
            field
                .strip_prefix("bytes_sent:")
                .or_else(|| field.strip_prefix("bytes_received:"))
        })
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

#[test]
fn the_jobmanager_carries_control_traffic_only_not_records() {
    let cluster = StandaloneCluster::start(2, 1, "");
    let rest = cluster.rest();
    let mut deltas = Vec::new();
    for records in ["1000000", "10000000"] {
        let before = bytes_on_port(cluster.rpc_port);
        let out = cluster.cli(&[
            "run",
            "-m",
            &rest,
            "-p",
            "2",
            "shuffle",
            "--records",
            records,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        deltas.push(bytes_on_port(cluster.rpc_port) - before);
    }
    eprintln!(
        "bytes on the JobManager's RPC port: 1 M records: {}, 10 M records: {}",
        deltas[0], deltas[1]
    );
    // 10 M records of 100 bytes are 1 GB; the JobManager saw deployments, state changes and
    // heartbeats, which depend on tasks and time, not on records.
    assert!(deltas[1] < 1024 * 1024, "{deltas:?}");
    assert!(deltas[1] < 3 * deltas[0] + 64 * 1024, "{deltas:?}");
}
