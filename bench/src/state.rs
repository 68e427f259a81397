//! `sluice-bench state [--quick]`: the keyed-state backends measured in this process.
//!
//! 1. Keyed aggregation through `KeyedStateStore`: per record `set_current_key` and a
//!    `ValueState<u64>` read-modify-write, over uniformly random keys, for the hashmap and the
//!    RocksDB backend; records/s and RocksDB's ratio to the hashmap. RocksDB gets the memory a
//!    slot of a default TaskManager gives it (its share of managed memory), and once more a
//!    small budget far below the state's size, so both regimes stay visible.
//! 2. RocksDB checkpoints: a full checkpoint of a large state (100-byte incompressible values),
//!    then ~1% of the keys changed and an incremental checkpoint: duration and uploaded bytes.
//!
//!
//! `sluice-bench timers [--quick]`: event-time timers through `Timers` over the same stores,
//! one per key and timestamp as a window operator sets them: the CPU time to set them (random
//! keys and times) and to fire them all in time order, per timer and backend.
//!
//! Files go to a temporary directory under `$TMPDIR` (a real disk, not tmpfs, for meaningful
//! checkpoint times). Nothing here asserts on time.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sluice::common::keys::KeyHash;
use sluice::config::Config;
use sluice::state::{
    BackendKind, BackendSettings, KeyGroupRange, KeyedStateHandle, KeyedStateStore,
    LocalFileStorage, RocksMemory, SnapshotKind, SnapshotLocation, StateStorage, TimeDomain,
    Timers,
};

use crate::{Stat, mib};

const MAX_PARALLELISM: u32 = 128;
/// Bytes of each value in the checkpoint measurement.
const VALUE_BYTES: usize = 100;

struct Sizes {
    repetitions: usize,
    keys: u64,
    /// Key counts of the keyed count: a small one, and one whose state is several times the
    /// small budget.
    key_sets: [u64; 2],
    /// RocksDB memory of the small-budget row.
    small_budget: u64,
    records: u64,
    /// Approximate state size of the checkpoint measurement.
    checkpoint_state: u64,
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Sizes {
                repetitions: 1,
                keys: 100_000,
                key_sets: [100_000, 1_000_000],
                small_budget: 16 << 20,
                records: 1_000_000,
                checkpoint_state: 50 << 20,
            }
        } else {
            Sizes {
                repetitions: 3,
                keys: 100_000,
                key_sets: [100_000, 5_000_000],
                small_budget: 64 << 20,
                records: 5_000_000,
                checkpoint_state: 1 << 30,
            }
        }
    }
}

/// A small xorshift generator: the key sequence must cost little next to the state access.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// The RocksDB memory of one slot of a TaskManager with the default configuration (one slot).
fn default_slot_memory() -> u64 {
    let config = Config::default();
    config
        .state
        .rocksdb_memory_per_slot(&config.network, config.taskmanager.number_of_task_slots)
        .unwrap_or(0)
}

fn open(
    kind: BackendKind,
    dir: &std::path::Path,
    name: &str,
    memory: u64,
) -> Result<KeyedStateStore> {
    let ratio = Config::default().state.rocksdb_write_buffer_ratio;
    let settings = BackendSettings {
        kind,
        local_dir: dir.join(name),
        incremental: true,
        rocks_memory: Some(RocksMemory::budget(memory, ratio)),
        key_hash: KeyHash::CURRENT,
    };
    KeyedStateStore::open(
        &settings,
        MAX_PARALLELISM,
        KeyGroupRange::new(0, MAX_PARALLELISM - 1),
        &[],
        &LocalFileStorage,
        "",
    )
    .with_context(|| format!("open the {kind} state store"))
}

/// Keyed count: the per-record work of a keyed aggregation. Returns records/s and the CPU time
/// of this process per record in ns (its RocksDB flush and compaction threads included): on a
/// machine that others share, CPU time is the steadier measure.
fn aggregation(
    kind: BackendKind,
    memory: u64,
    dir: &std::path::Path,
    sizes: &Sizes,
    run: usize,
) -> Result<(f64, f64)> {
    let store = open(kind, dir, &format!("agg-{kind}-{memory}-{run}"), memory)?;
    let count = store.value_state::<u64>("count")?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 + run as u64);
    let cpu = crate::procs::cpu_seconds(std::process::id())?;
    let started = Instant::now();
    for _ in 0..sizes.records {
        let key = rng.next() % sizes.keys;
        store.set_current_key(&key)?;
        let c = count.value()?.unwrap_or(0);
        count.update(c + 1)?;
    }
    let elapsed = started.elapsed();
    let cpu = crate::procs::cpu_seconds(std::process::id())? - cpu;
    let result = (
        sizes.records as f64 / elapsed.as_secs_f64(),
        cpu * 1e9 / sizes.records as f64,
    );
    // Every record was counted once.
    let mut total = 0;
    for key in 0..sizes.keys {
        store.set_current_key(&key)?;
        total += count.value()?.unwrap_or(0);
    }
    anyhow::ensure!(
        total == sizes.records,
        "{kind}: counted {total} of {} records",
        sizes.records
    );
    Ok(result)
}

fn fill(store: &KeyedStateStore, keys: impl Iterator<Item = u64>, salt: u64) -> Result<()> {
    let blob = store.value_state::<Vec<u8>>("blob")?;
    let mut value = vec![0u8; VALUE_BYTES];
    for key in keys {
        let mut rng = Rng((key + 1).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ salt);
        for chunk in value.chunks_mut(8) {
            let r = rng.next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        store.set_current_key(&key)?;
        blob.update(value.clone())?;
    }
    Ok(())
}

struct CheckpointRun {
    keys: u64,
    fill: Duration,
    changed: u64,
    /// (label, duration, handle) per checkpoint.
    rows: Vec<(&'static str, Duration, KeyedStateHandle)>,
}

fn checkpoints(dir: &std::path::Path, sizes: &Sizes) -> Result<CheckpointRun> {
    // ~ key, value archive and RocksDB's per-entry overhead.
    let keys = sizes.checkpoint_state / (VALUE_BYTES as u64 + 28);
    let store = open(
        BackendKind::RocksDb,
        dir,
        "checkpoint",
        default_slot_memory(),
    )?;
    let started = Instant::now();
    fill(&store, 0..keys, 0)?;
    let fill_time = started.elapsed();
    let storage = LocalFileStorage;
    let base = dir.join("checkpoints").to_string_lossy().into_owned();
    let mut rows = Vec::new();
    let mut checkpoint = |id: u64, label: &'static str| -> Result<()> {
        let location = SnapshotLocation {
            checkpoint_id: id,
            kind: SnapshotKind::Checkpoint,
            dir: format!("{base}/job/chk-{id}"),
            shared_dir: Some(format!("{base}/job/shared")),
        };
        let started = Instant::now();
        let handle = store.snapshot(&location, &storage, "op1-sub0-att0")?;
        rows.push((label, started.elapsed(), handle));
        store.notify_checkpoint_complete(id);
        Ok(())
    };
    // ~1% of the keys, spread over the key space (and so over every key group).
    let changed = keys / 100;
    checkpoint(1, "full, right after the bulk load")?;
    fill(&store, (0..keys).step_by(100), 1)?;
    checkpoint(
        2,
        "incremental, ~1% changed, compactions of the load still running",
    )?;
    store.compact()?;
    checkpoint(3, "after a full compaction (every SST new)")?;
    fill(&store, (1..keys).step_by(100), 2)?;
    checkpoint(4, "incremental, ~1% changed, compacted state")?;
    drop(store);
    storage
        .delete_dir(&base)
        .with_context(|| format!("delete {base}"))?;
    Ok(CheckpointRun {
        keys,
        fill: fill_time,
        changed,
        rows,
    })
}

pub(crate) fn run(quick: bool, only_keys: Option<u64>) -> Result<()> {
    let mut sizes = Sizes::new(quick);
    if let Some(keys) = only_keys {
        sizes.key_sets = [keys; 2];
    }
    let dir = tempfile::tempdir().context("temporary directory")?;
    eprintln!(
        "sluice-bench state ({} mode) in {}",
        if quick { "quick" } else { "full" },
        dir.path().display()
    );
    let slot_memory = default_slot_memory();
    // (keys, backend, RocksDB memory): the hashmap, then RocksDB with a default slot's memory,
    // then, for the larger key set, RocksDB with the small budget.
    let mut runs = Vec::new();
    let key_sets = if only_keys.is_some() {
        &sizes.key_sets[..1]
    } else {
        &sizes.key_sets[..]
    };
    for (i, &keys) in key_sets.iter().enumerate() {
        runs.push((keys, BackendKind::HashMap, 0));
        runs.push((keys, BackendKind::RocksDb, slot_memory));
        if i + 1 == key_sets.len() {
            runs.push((keys, BackendKind::RocksDb, sizes.small_budget));
        }
    }
    let mut rates = Vec::new();
    for (keys, kind, memory) in runs {
        let with_keys = Sizes { keys, ..sizes };
        let (mut samples, mut cpu) = (Vec::new(), Vec::new());
        for run in 0..sizes.repetitions {
            let (r, c) = aggregation(kind, memory, dir.path(), &with_keys, run)?;
            eprintln!(
                "  {kind} keyed count, {keys} keys, {:.0} MiB: {:.2} M records/s, {c:.0} CPU ns/record",
                mib(memory),
                r / 1e6
            );
            samples.push(r / 1e6);
            cpu.push(c);
        }
        rates.push((keys, kind, memory, Stat::of(&samples), Stat::of(&cpu)));
    }
    let cp = match only_keys {
        Some(_) => None,
        None => Some(checkpoints(dir.path(), &sizes)?),
    };
    if let Some(cp) = &cp {
        eprintln!(
            "  filled {} keys in {:.1} s",
            cp.keys,
            cp.fill.as_secs_f64()
        );
    }

    println!();
    println!(
        "Keyed count through `KeyedStateStore` ({} records, uniform keys, {} run(s)):",
        sizes.records, sizes.repetitions
    );
    println!();
    println!(
        "RocksDB memory: the default configuration's per slot ({:.1} MiB: \
         taskmanager.memory.managed.fraction × process size, one slot), or the small budget.",
        mib(slot_memory)
    );
    println!();
    println!(
        "| keys | backend | RocksDB memory | median | min–max | unit | ns/record | vs hashmap | CPU ns/record | min–max | CPU vs hashmap |"
    );
    println!("|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|");
    let (mut heap, mut heap_cpu) = (1.0, 1.0);
    for (keys, kind, memory, s, c) in &rates {
        let memory = if *kind == BackendKind::HashMap {
            (heap, heap_cpu) = (s.median, c.median);
            "-".to_string()
        } else {
            format!("{:.0} MiB", mib(*memory))
        };
        println!(
            "| {keys} | {kind} | {memory} | {:.2} | {} | M records/s | {:.0} | {:.2}x | {:.0} | {} | {:.2}x |",
            s.median,
            s.range(2),
            1e3 / s.median,
            heap / s.median,
            c.median,
            c.range(0),
            c.median / heap_cpu
        );
    }
    let Some(cp) = cp else {
        return Ok(());
    };
    println!();
    println!(
        "RocksDB checkpoints in sequence ({} keys x {VALUE_BYTES}-byte values; {} keys changed each time):",
        cp.keys, cp.changed
    );
    println!();
    println!("| checkpoint | duration | uploaded | referenced (full size) | uploaded / full |");
    println!("|---|---:|---:|---:|---:|");
    for (label, time, h) in &cp.rows {
        println!(
            "| {label} | {:.2} s | {:.1} MiB | {:.1} MiB | {:.2}% |",
            time.as_secs_f64(),
            mib(h.checkpointed_size),
            mib(h.full_size),
            100.0 * h.checkpointed_size as f64 / h.full_size.max(1) as f64
        );
    }
    Ok(())
}

/// Sets `timers` event-time timers on random keys of `keys` at random times, then fires them
/// all: the CPU ns per timer of each half.
fn timer_run(store: &KeyedStateStore, keys: u64, timers: u64, run: usize) -> Result<(f64, f64)> {
    let mut queue = Timers::open(store)?;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d + run as u64);
    let me = std::process::id();
    let start = crate::procs::cpu_seconds(me)?;
    for _ in 0..timers {
        let key = rng.next() % keys;
        // Times of a day in ms, rounded to seconds as window ends are: some coincide.
        let time = (rng.next() % 86_400) as i64 * 1_000;
        store.set_current_key(&key)?;
        queue.register(TimeDomain::EventTime, time)?;
    }
    let set = crate::procs::cpu_seconds(me)?;
    let kept = queue.len(TimeDomain::EventTime) as u64;
    let mut fired = 0u64;
    let mut last = i64::MIN;
    while let Some(time) = queue.pop(TimeDomain::EventTime, i64::MAX)? {
        anyhow::ensure!(
            time >= last,
            "timers fired out of order: {time} after {last}"
        );
        last = time;
        fired += 1;
    }
    let fire = crate::procs::cpu_seconds(me)?;
    anyhow::ensure!(fired == kept, "fired {fired} of {kept} timers");
    Ok((
        (set - start) * 1e9 / timers as f64,
        (fire - set) * 1e9 / kept.max(1) as f64,
    ))
}

/// `sluice-bench timers`.
pub(crate) fn timers(quick: bool) -> Result<()> {
    let sizes = Sizes::new(quick);
    let (keys, count) = (sizes.keys, sizes.records / 5);
    let dir = tempfile::tempdir().context("temporary directory")?;
    let slot_memory = default_slot_memory();
    eprintln!(
        "sluice-bench timers: {count} timers over {keys} keys, {} run(s)",
        sizes.repetitions
    );
    let mut rows = Vec::new();
    for (kind, memory) in [
        (BackendKind::HashMap, 0),
        (BackendKind::RocksDb, slot_memory),
    ] {
        let (mut set, mut fire) = (Vec::new(), Vec::new());
        for run in 0..sizes.repetitions {
            let store = open(kind, dir.path(), &format!("timers-{kind}-{run}"), memory)?;
            let (s, f) = timer_run(&store, keys, count, run)?;
            eprintln!("  {kind}: set {s:.0} CPU ns/timer, fire {f:.0} CPU ns/timer");
            set.push(s);
            fire.push(f);
        }
        rows.push((kind, Stat::of(&set), Stat::of(&fire)));
    }
    println!();
    println!(
        "Event-time timers through `Timers` ({count} set on {keys} random keys at random seconds \
         of a day, then all fired; median of {} run(s), CPU time of this process):",
        sizes.repetitions
    );
    println!();
    println!(
        "| backend | set: CPU ns/timer | min–max | fire: CPU ns/timer | min–max | set + fire |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (kind, set, fire) in rows {
        println!(
            "| {kind} | {:.0} | {} | {:.0} | {} | {:.0} |",
            set.median,
            set.range(0),
            fire.median,
            fire.range(0),
            set.median + fire.median
        );
    }
    Ok(())
}
