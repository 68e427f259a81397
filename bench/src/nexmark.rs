//! `sluice-bench nexmark [--quick] [--events N] [--queries q0,q5]`: the Nexmark queries
//! (`nexmark-q0` ... `nexmark-q8`, `nexmark-q11`, `nexmark-q12`, `engine/src/examples/nexmark`) on two TaskManager processes
//! at parallelism 2, with the hashmap and with the RocksDB state backend and a checkpoint every
//! 10 s (exactly-once), as Flink's published Nexmark numbers were measured. Printed per query
//! and backend: events/s (from the job's start until its TaskManagers go idle, before the
//! final checkpoint ends it), and events per second of TaskManager CPU (user + system) beside
//! Flink's published events/s per core (Flink 1.13, RocksDB, exactly-once) with the ratio.
//! The CPU figure is the one to compare: it does not depend on how many cores the machine
//! gives the job. Nothing here asserts on time.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use sluice::examples::nexmark::Query;

use crate::CLUSTER_CONFIG;
use crate::cluster::Cluster;
use crate::metrics::taskmanagers_cpu;

/// Flink's published Nexmark throughput per core, events/s (Flink 1.13 on Nexmark's reference
/// setup, RocksDB, exactly-once).
fn flink_per_core(query: Query) -> f64 {
    match query {
        Query::Q0 => 155_000.0,
        Query::Q1 => 157_900.0,
        Query::Q2 => 175_200.0,
        Query::Q3 => 152_100.0,
        Query::Q4 => 34_300.0,
        Query::Q5 => 22_100.0,
        Query::Q7 => 12_300.0,
        Query::Q8 => 146_100.0,
        Query::Q11 => 39_700.0,
        Query::Q12 => 75_670.0,
    }
}

/// One measured run.
struct Measured {
    events_per_s: f64,
    events_per_cpu_s: f64,
    checkpoints: u64,
}

pub fn run(bin: &Path, quick: bool, events: Option<u64>, only: Option<&str>) -> Result<()> {
    let events = events.unwrap_or(if quick { 1_000_000 } else { 10_000_000 });
    let queries: Vec<Query> = match only {
        None => Query::ALL.to_vec(),
        Some(list) => list
            .split(',')
            .map(|name| {
                let name = name.trim();
                Query::ALL
                    .into_iter()
                    .find(|q| q.program().trim_start_matches("nexmark-") == name)
                    .ok_or_else(|| {
                        anyhow::anyhow!("no Nexmark query '{name}' (q0 ... q8, q11, q12)")
                    })
            })
            .collect::<Result<_>>()?,
    };
    let scratch = tempfile::Builder::new()
        .prefix("sluice-bench-nexmark-")
        .tempdir()?;
    let dir = scratch.path().display().to_string();
    let backends = [("hashmap", "hashmap"), ("rocksdb", "rocksdb")];
    let mut clusters = Vec::new();
    for (label, kind) in backends {
        clusters.push(Cluster::start(
            bin,
            2,
            &format!(
                "{CLUSTER_CONFIG}state.backend.type: {kind}\nexecution.checkpointing.interval: 10 s\nexecution.checkpointing.dir: {dir}/{label}\n"
            ),
        )?);
    }
    let args = vec!["--events".to_string(), events.to_string()];
    let mut rows = Vec::new();
    for query in &queries {
        let mut measured = Vec::new();
        for (cluster, (label, _)) in clusters.iter_mut().zip(backends) {
            let cpu_before = taskmanagers_cpu(cluster)?;
            let id = cluster.submit(query.program(), &args, 2)?;
            let busy_end = wait_busy_end(cluster, &id)?;
            let done = cluster.wait_finished(&id, Duration::from_secs(60))?;
            let cpu = taskmanagers_cpu(cluster)? - cpu_before;
            let running = done.0["timestamps"]["RUNNING"].as_u64().unwrap_or(0);
            let wall = Duration::from_millis(busy_end.saturating_sub(running).max(1));
            if cpu <= 0.0 {
                bail!("{}: no TaskManager CPU time measured", query.program());
            }
            let stats = cluster.get(&format!("/jobs/{id}/checkpoints"))?;
            let m = Measured {
                events_per_s: events as f64 / wall.as_secs_f64(),
                events_per_cpu_s: events as f64 / cpu,
                checkpoints: stats["counts"]["completed"].as_u64().unwrap_or(0),
            };
            eprintln!(
                "  {} {label}: {:.2} s, {:.0} events/s, {:.1} TaskManager CPU s, {:.0} events per CPU s, {} checkpoints",
                query.program(),
                wall.as_secs_f64(),
                m.events_per_s,
                cpu,
                m.events_per_cpu_s,
                m.checkpoints
            );
            measured.push(m);
        }
        rows.push((*query, measured));
    }
    println!(
        "\n### Nexmark: {events} events, parallelism 2, 2 TaskManagers, checkpoint every 10 s\n"
    );
    println!(
        "| query | Flink events/s per core | hashmap events/s | hashmap events per TM CPU s | vs Flink | rocksdb events/s | rocksdb events per TM CPU s | vs Flink | checkpoints (hashmap, rocksdb) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (query, m) in rows {
        let flink = flink_per_core(query);
        println!(
            "| {} | {:.1}K | {:.1}K | {:.1}K | {:.2}x | {:.1}K | {:.1}K | {:.2}x | {}, {} |",
            query.program().trim_start_matches("nexmark-"),
            flink / 1e3,
            m[0].events_per_s / 1e3,
            m[0].events_per_cpu_s / 1e3,
            m[0].events_per_cpu_s / flink,
            m[1].events_per_s / 1e3,
            m[1].events_per_cpu_s / 1e3,
            m[1].events_per_cpu_s / flink,
            m[0].checkpoints,
            m[1].checkpoints,
        );
    }
    Ok(())
}

/// When (ms since the epoch) the job stopped keeping its TaskManagers busy: the last 100 ms
/// poll in which their CPU time grew by more than 10 ms before the first half second in which
/// it did not. A bounded job waits for its final checkpoint, up to the checkpoint interval,
/// after its last event before it finishes; the time to the job's end would count that idle
/// wait, Nexmark's throughput does not (it reads the sources' output rate while they run).
fn wait_busy_end(cluster: &Cluster, id: &str) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut cpu = taskmanagers_cpu(cluster)?;
    let mut busy_end = now_ms()?;
    let mut idle_polls = 0;
    // Idle before the first busy poll is the deployment, not the end.
    let mut busy = false;
    let mut settled = false;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let job = cluster.job(id)?;
        let now = taskmanagers_cpu(cluster)?;
        if now - cpu > 0.010 {
            if !settled {
                busy_end = now_ms()?;
            }
            busy = true;
            idle_polls = 0;
        } else {
            idle_polls += 1;
            settled |= busy && idle_polls >= 5;
        }
        cpu = now;
        match job.state() {
            "FINISHED" => return Ok(busy_end),
            "FAILED" | "CANCELED" => bail!("{id}: {}", job.state()),
            _ if Instant::now() > deadline => bail!("{id}: still {}", job.state()),
            _ => {}
        }
    }
}

pub(crate) fn now_ms() -> Result<u64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64)
}
