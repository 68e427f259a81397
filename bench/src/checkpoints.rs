//! What a feature costs a running job: `stream-sum --rate 0 --keys 1000` at parallelism 2 on
//! two TaskManager processes, in several variants interleaved run by run, so that changes of the
//! machine's load hit all of them alike. Printed: records/s, the TaskManagers' CPU time per
//! record (user + system), the ratio of each to the first variant, and the completed
//! checkpoints with their mean duration and size from `GET /jobs/:id/checkpoints`. Nothing here
//! asserts on time.
//!
//! `sluice-bench checkpoints [--quick]`: no checkpoints; a checkpoint every second on the
//! hashmap backend; a checkpoint every second on RocksDB (incremental).
//!
//! `sluice-bench event-time [--quick]`: the job as it is, and with `--event-time` (timestamps
//! assigned at the source and watermarks every `pipeline.auto-watermark-interval`, 200 ms, both
//! carried to the keyed sum), with the hashmap backend and no checkpoints.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::cluster::Cluster;
use crate::metrics::taskmanagers_cpu;
use crate::{CLUSTER_CONFIG, Stat};

struct Variant {
    label: &'static str,
    /// Configuration lines of its cluster.
    config: String,
    /// Arguments of `stream-sum` beside the common ones.
    args: &'static [&'static str],
    /// Whether it takes checkpoints (and must complete one).
    checkpoints: bool,
}

/// One run of one variant.
#[derive(Clone, Copy)]
struct Run {
    /// M records/s.
    rate: f64,
    /// TaskManager CPU ns per record.
    cpu_ns: f64,
    completed: u64,
    /// Mean checkpoint duration in ms and state size in bytes.
    duration: f64,
    size: f64,
}

pub fn run(bin: &Path, quick: bool) -> Result<()> {
    let scratch = tempfile::Builder::new()
        .prefix("sluice-bench-checkpoints-")
        .tempdir()?;
    let dir = scratch.path().display().to_string();
    let variants = [
        Variant {
            label: "no checkpoints (hashmap)",
            config: String::new(),
            args: &[],
            checkpoints: false,
        },
        Variant {
            label: "checkpoint every 1 s, hashmap",
            config: format!(
                "execution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {dir}/hashmap\n"
            ),
            args: &[],
            checkpoints: true,
        },
        Variant {
            label: "checkpoint every 1 s, rocksdb incremental",
            config: format!(
                "execution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {dir}/rocksdb\nstate.backend.type: rocksdb\nexecution.checkpointing.incremental: true\n"
            ),
            args: &[],
            checkpoints: true,
        },
    ];
    compare(bin, quick, "Checkpoint overhead", &variants)
}

pub fn event_time(bin: &Path, quick: bool) -> Result<()> {
    let variants = [
        Variant {
            label: "processing time only",
            config: String::new(),
            args: &[],
            checkpoints: false,
        },
        Variant {
            label: "--event-time: timestamps and watermarks",
            config: String::new(),
            args: &["--event-time"],
            checkpoints: false,
        },
    ];
    compare(bin, quick, "Event time on vs off", &variants)
}

fn compare(bin: &Path, quick: bool, title: &str, variants: &[Variant]) -> Result<()> {
    let (repetitions, records) = if quick {
        (1, 4_000_000u64)
    } else {
        (3, 40_000_000)
    };
    let mut clusters = Vec::new();
    for v in variants {
        clusters.push(Cluster::start(
            bin,
            2,
            &format!("{CLUSTER_CONFIG}{}", v.config),
        )?);
    }
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); variants.len()];
    for _ in 0..repetitions {
        for (i, (cluster, v)) in clusters.iter_mut().zip(variants).enumerate() {
            let mut args = crate::stream_sum_args(records);
            args.extend(v.args.iter().map(|s| s.to_string()));
            let cpu_before = taskmanagers_cpu(cluster)?;
            let id = cluster.submit("stream-sum", &args, 2)?;
            let done = cluster.wait_finished(&id, Duration::from_secs(600))?;
            let cpu = taskmanagers_cpu(cluster)? - cpu_before;
            let wall = done.running_to_finished()?;
            let stats = cluster.get(&format!("/jobs/{id}/checkpoints"))?;
            let run = Run {
                rate: records as f64 / wall.as_secs_f64() / 1e6,
                cpu_ns: cpu * 1e9 / records as f64,
                completed: stats["counts"]["completed"].as_u64().unwrap_or(0),
                duration: stats["summary"]["end_to_end_duration"]["avg"]
                    .as_f64()
                    .unwrap_or(0.0),
                size: stats["summary"]["state_size"]["avg"]
                    .as_f64()
                    .unwrap_or(0.0),
            };
            if v.checkpoints && run.completed == 0 {
                bail!("{}: no checkpoint completed", v.label);
            }
            eprintln!(
                "  {}: {:.2} s, {:.2} M records/s, {:.1} TaskManager CPU ns/record, {} checkpoints, avg {:.0} ms, {:.0} B",
                v.label,
                wall.as_secs_f64(),
                run.rate,
                run.cpu_ns,
                run.completed,
                run.duration,
                run.size
            );
            runs[i].push(run);
        }
    }
    println!(
        "\n### {title}: stream-sum, parallelism 2, 2 TaskManagers, {records} records, {repetitions} run(s) each\n"
    );
    println!(
        "| configuration | M records/s (median) | range | vs first | TM CPU ns/record (median) | vs first | checkpoints completed | mean duration | mean state size |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let stat = |runs: &[Run], f: fn(&Run) -> f64| Stat::of(&runs.iter().map(f).collect::<Vec<_>>());
    let base_rate = stat(&runs[0], |r| r.rate).median;
    let base_cpu = stat(&runs[0], |r| r.cpu_ns).median;
    for (v, runs) in variants.iter().zip(&runs) {
        let (rate, cpu) = (stat(runs, |r| r.rate), stat(runs, |r| r.cpu_ns));
        let n = runs.len().max(1) as f64;
        let completed: u64 = runs.iter().map(|r| r.completed).sum();
        let (duration, size) = if v.checkpoints {
            (
                format!("{:.0} ms", runs.iter().map(|r| r.duration).sum::<f64>() / n),
                format!(
                    "{:.1} KiB",
                    runs.iter().map(|r| r.size).sum::<f64>() / n / 1024.0
                ),
            )
        } else {
            ("–".to_string(), "–".to_string())
        };
        println!(
            "| {} | {:.2} | {} | {:.2}x | {:.1} | {:.2}x | {completed} | {duration} | {size} |",
            v.label,
            rate.median,
            rate.range(2),
            rate.median / base_rate,
            cpu.median,
            cpu.median / base_cpu,
        );
    }
    Ok(())
}
