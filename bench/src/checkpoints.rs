//! `sluice-bench checkpoints [--quick]`: what checkpointing costs a running job.
//!
//! `stream-sum --rate 0 --keys 1000` at parallelism 2 on two TaskManager processes, in three
//! configurations, interleaved run by run so that changes of the machine's load hit all three
//! alike: no checkpoints; a checkpoint every second on the hashmap backend; a checkpoint every
//! second on RocksDB (incremental). Printed: records/s, the ratio to the run without
//! checkpoints, and the completed checkpoints with their mean duration and size from
//! `GET /jobs/:id/checkpoints`. Nothing here asserts on time.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::cluster::Cluster;
use crate::{CLUSTER_CONFIG, Stat};

struct Variant {
    label: &'static str,
    config: String,
}

pub fn run(bin: &Path, quick: bool) -> Result<()> {
    let (repetitions, records) = if quick {
        (1, 4_000_000u64)
    } else {
        (3, 40_000_000)
    };
    let scratch = tempfile::Builder::new()
        .prefix("sluice-bench-checkpoints-")
        .tempdir()?;
    let dir = scratch.path().display().to_string();
    let variants = [
        Variant {
            label: "no checkpoints (hashmap)",
            config: String::new(),
        },
        Variant {
            label: "checkpoint every 1 s, hashmap",
            config: format!(
                "execution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {dir}/hashmap\n"
            ),
        },
        Variant {
            label: "checkpoint every 1 s, rocksdb incremental",
            config: format!(
                "execution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {dir}/rocksdb\nstate.backend.type: rocksdb\nexecution.checkpointing.incremental: true\n"
            ),
        },
    ];
    let mut clusters = Vec::new();
    for v in &variants {
        clusters.push(Cluster::start(
            bin,
            2,
            &format!("{CLUSTER_CONFIG}{}", v.config),
        )?);
    }
    let args: Vec<String> = [
        "--rate",
        "0",
        "--keys",
        "1000",
        "--records",
        &records.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut rates = vec![Vec::new(); variants.len()];
    let mut checkpoints = vec![Vec::new(); variants.len()];
    for _ in 0..repetitions {
        for (i, cluster) in clusters.iter_mut().enumerate() {
            let id = cluster.submit("stream-sum", &args, 2)?;
            let done = cluster.wait_finished(&id, Duration::from_secs(600))?;
            let wall = done.running_to_finished()?;
            let rate = records as f64 / wall.as_secs_f64() / 1e6;
            let stats = cluster.get(&format!("/jobs/{id}/checkpoints"))?;
            let completed = stats["counts"]["completed"].as_u64().unwrap_or(0);
            let duration = stats["summary"]["end_to_end_duration"]["avg"]
                .as_f64()
                .unwrap_or(0.0);
            let size = stats["summary"]["state_size"]["avg"]
                .as_f64()
                .unwrap_or(0.0);
            if i > 0 && completed == 0 {
                bail!("{}: no checkpoint completed", variants[i].label);
            }
            eprintln!(
                "  {}: {:.2} s, {rate:.2} M records/s, {completed} checkpoints, avg {duration:.0} ms, {size:.0} B",
                variants[i].label,
                wall.as_secs_f64()
            );
            rates[i].push(rate);
            checkpoints[i].push((completed, duration, size));
        }
    }
    println!(
        "\n### Checkpoint overhead: stream-sum, parallelism 2, 2 TaskManagers, {records} records, {repetitions} run(s) each\n"
    );
    println!(
        "| configuration | M records/s (median) | range | vs no checkpoints | checkpoints completed | mean duration | mean state size |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let base = Stat::of(&rates[0]).median;
    for (i, v) in variants.iter().enumerate() {
        let s = Stat::of(&rates[i]);
        let n = checkpoints[i].len().max(1) as f64;
        let completed: u64 = checkpoints[i].iter().map(|c| c.0).sum();
        let duration: f64 = checkpoints[i].iter().map(|c| c.1).sum::<f64>() / n;
        let size: f64 = checkpoints[i].iter().map(|c| c.2).sum::<f64>() / n;
        println!(
            "| {} | {:.2} | {} | {:.2}x | {} | {} | {} |",
            v.label,
            s.median,
            s.range(2),
            s.median / base,
            completed,
            if i == 0 {
                "–".to_string()
            } else {
                format!("{duration:.0} ms")
            },
            if i == 0 {
                "–".to_string()
            } else {
                format!("{:.1} KiB", size / 1024.0)
            },
        );
    }
    Ok(())
}
