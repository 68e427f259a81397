//! `sluice-bench window-state [--keys 10000,100000,1000000]`: how much state event-time windows
//! keep per key. `counting --window-ms` (one tumbling event-time window per key, its records
//! counted and summed by `aggregate`) runs on two TaskManager processes at parallelism 2, once
//! with the hashmap and once with the RocksDB backend, with windows long enough that none fires
//! while it runs. Once every key has a window open, the window vertex's part of the next
//! completed checkpoint is its state: each key's accumulator and the timer of its window's end.
//! Printed: bytes in all and per key, per backend and key count. Nothing here asserts.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::CLUSTER_CONFIG;
use crate::cluster::Cluster;

/// Longer than any run: no window ends while the job runs.
const WINDOW_MS: u64 = 1 << 50;

pub fn run(bin: &Path, quick: bool, keys: &[u64]) -> Result<()> {
    let keys: Vec<u64> = match (keys.is_empty(), quick) {
        (false, _) => keys.to_vec(),
        (true, true) => vec![10_000],
        (true, false) => vec![10_000, 100_000, 1_000_000],
    };
    let scratch = tempfile::Builder::new()
        .prefix("sluice-bench-window-state-")
        .tempdir()?;
    let dir = scratch.path().display().to_string();
    let mut rows: Vec<(u64, Vec<u64>)> = keys.iter().map(|k| (*k, Vec::new())).collect();
    for kind in ["hashmap", "rocksdb"] {
        let mut cluster = Cluster::start(
            bin,
            2,
            &format!(
                "{CLUSTER_CONFIG}state.backend.type: {kind}\nexecution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {dir}/{kind}\n"
            ),
        )?;
        for (keys, sizes) in rows.iter_mut() {
            let size = window_state(&mut cluster, *keys, &format!("{dir}/out-{kind}-{keys}"))?;
            eprintln!(
                "  {kind}, {keys} keys: {size} bytes of window state, {:.1} per key",
                size as f64 / *keys as f64
            );
            sizes.push(size);
        }
    }
    println!(
        "\n### Window state per key: `counting --window-ms` (a tumbling event-time window per key, `aggregate` of count and sum), parallelism 2, the window vertex's part of a checkpoint\n"
    );
    println!("| keys | hashmap bytes | per key | rocksdb bytes | per key |");
    println!("|---:|---:|---:|---:|---:|");
    for (keys, sizes) in rows {
        println!(
            "| {keys} | {} | {:.1} | {} | {:.1} |",
            sizes[0],
            sizes[0] as f64 / keys as f64,
            sizes[1],
            sizes[1] as f64 / keys as f64,
        );
    }
    Ok(())
}

/// Runs `counting` over `keys` keys until a checkpoint taken after every key's window opened
/// completes; returns the window vertex's state size in it and cancels the job.
fn window_state(cluster: &mut Cluster, keys: u64, output: &str) -> Result<u64> {
    // Every key within the first half second; then the job runs on for ten more seconds.
    let rate = (2 * keys).max(200_000);
    let args: Vec<String> = [
        "--records",
        &(10 * rate).to_string(),
        "--keys",
        &keys.to_string(),
        "--rate",
        &rate.to_string(),
        "--window-ms",
        &WINDOW_MS.to_string(),
        "--output",
        output,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let id = cluster.submit("counting", &args, 2)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut all_keys_at = None;
    let size = loop {
        if Instant::now() > deadline {
            bail!("{id}: no checkpoint with every key's window in 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
        let job = cluster.get(&format!("/jobs/{id}"))?;
        let Some(window) = job["vertices"].as_array().and_then(|vs| {
            vs.iter()
                .find(|v| v["name"].as_str().is_some_and(|n| n.contains("Window")))
        }) else {
            bail!("{id}: no window vertex in {job}");
        };
        if job["state"] != "RUNNING" {
            bail!("{id}: {} before every key had a window", job["state"]);
        }
        let read = window["metrics"]["read-records"].as_u64().unwrap_or(0);
        let Some(since) = all_keys_at else {
            if read >= keys {
                all_keys_at = Some(crate::nexmark::now_ms()?);
            }
            continue;
        };
        let stats = cluster.get(&format!("/jobs/{id}/checkpoints"))?;
        let latest = &stats["latest"]["completed"];
        if latest["trigger_timestamp"].as_u64().unwrap_or(0) <= since {
            continue;
        }
        let cid = latest["id"].as_u64().context("checkpoint id")?;
        let details = cluster.get(&format!("/jobs/{id}/checkpoints/details/{cid}"))?;
        let vid = window["id"].as_str().context("vertex id")?;
        break details["tasks"][vid]["state_size"]
            .as_u64()
            .context("the window vertex's state size")?;
    };
    cluster.cancel(&id)?;
    Ok(size)
}
