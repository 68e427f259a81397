//! sluice's benchmark harness: in one invocation it measures the
//! loopback ceilings (TCP, plain quinn with default and tuned settings), then the data plane
//! between real TaskManager processes (a key_by shuffle, `stream-sum`), the TaskManagers'
//! memory under a slow sink, and the JobManager's control-plane bytes for 1x and 10x the
//! records, and prints markdown tables with ratios against the baselines of the same run.
//!
//! `cargo run -p sluice-bench -- [--quick]`; `cargo run -p sluice-bench -- state [--quick]` measures
//! the keyed-state backends alone (see `state.rs`); `hostile` what strangers on the network cost
//! a JobManager and a TaskManager (see `hostile.rs`); `flink` sluice beside Apache Flink on the
//! same jobs (see `flink.rs`); `latency` the end-to-end latency of both (see `latency.rs`);
//! `flink-cluster` the exchange between two TaskManagers of both (see `flink_cluster.rs`); `kafka`
//! the Kafka connectors against the broker's own tools (see `kafka.rs`); `nexmark` the Nexmark
//! queries beside Flink's published numbers (see `nexmark.rs`); `window-state` the state event-time
//! windows keep per key (see `window_state.rs`).
//! Nothing here asserts on time: it prints
//! numbers.

mod ab;
mod baseline;
mod batch;
mod checkpoints;
mod cluster;
mod control;
mod flink;
mod flink_cluster;
mod hostile;
mod kafka;
mod latency;
mod metrics;
mod nexmark;
mod procs;
mod state;
mod window_state;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use baseline::Transport;
use cluster::Cluster;

/// Bytes of one `shuffle` record: a u64 key and a 92-byte payload.
const RECORD_BYTES: u64 = 100;
/// Extra configuration of the bench's clusters: heartbeats carry the vertex metrics, so a
/// shorter interval makes the metrics read during the slow-sink run current. The data plane's
/// datagrams grow to loopback's MTU by default (`taskmanager.network.quic.max-mtu: auto`), as
/// the tuned quinn baseline's do.
const CLUSTER_CONFIG: &str = "heartbeat.interval: 1 s\nheartbeat.rpc-failure-threshold: -1\n";

#[derive(Parser, Debug)]
#[command(name = "sluice-bench", about = "sluice's data-plane benchmarks")]
struct Cli {
    /// Small sizes and one repetition: a smoke run of well under a minute.
    #[arg(long, global = true)]
    quick: bool,
    /// The sluice binary (default: `$SLUICE_BIN`, else build it with cargo next to this one).
    #[arg(long, value_name = "PATH")]
    sluice_bin: Option<PathBuf>,
    /// A configuration line (`key: value`) added to the clusters' configuration, repeatable:
    /// the whole harness (or `shuffle`'s first side) with a setting other than the default.
    #[arg(long, global = true, value_name = "KEY: VALUE")]
    set: Vec<String>,
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// The receiving end of a baseline transfer (the harness starts it).
    #[command(hide = true)]
    Receive {
        #[arg(value_enum)]
        transport: Transport,
    },
    /// The keyed-state backends: keyed aggregation throughput (hashmap vs RocksDB) and
    /// RocksDB full and incremental checkpoints.
    State {
        /// Only the keyed count, over this many keys (no checkpoint measurement): for
        /// profiling one key set.
        #[arg(long, value_name = "N")]
        keys: Option<u64>,
    },
    /// What an event-time timer costs, set and fired, in each state backend.
    Timers,
    /// How much state event-time windows keep per key: `counting --window-ms` with the
    /// hashmap and RocksDB, the window vertex's part of a checkpoint once every key's window is
    /// open.
    WindowState {
        /// Key counts, comma-separated (default 10000,100000,1000000; 10000 with `--quick`).
        #[arg(long, value_delimiter = ',')]
        keys: Vec<u64>,
    },
    /// What event time costs stream-sum on a cluster: the job as it is vs with timestamps and
    /// watermarks (`--event-time`).
    EventTime,
    /// What checkpointing costs stream-sum on a cluster: none vs every second (hashmap,
    /// RocksDB).
    Checkpoints,
    /// The Nexmark queries (q0..q8, q11, q12) with hashmap and RocksDB state and a checkpoint every
    /// 10 s: events/s and events per TaskManager CPU second beside Flink's published events/s
    /// per core.
    Nexmark {
        /// Events per run (default 10 M; 1 M with `--quick`).
        #[arg(long)]
        events: Option<u64>,
        /// Only these queries, comma-separated (`q0,q5`; default all).
        #[arg(long, value_name = "LIST")]
        queries: Option<String>,
    },
    /// What serving metrics costs a job on a cluster: no reporter vs the Prometheus reporter
    /// scraped every second with the REST metric endpoints read every second (records/s, and
    /// the TaskManagers' CPU per record).
    Metrics {
        /// The job: `stream-sum` (key_by and a running sum) or `shuffle` (key_by between the
        /// two TaskManagers into a discarding sink).
        #[arg(long, default_value = "stream-sum", value_parser = ["stream-sum", "shuffle"])]
        job: String,
        /// Runs per configuration, alternating (default 4; 1 with `--quick`).
        #[arg(long)]
        runs: Option<usize>,
        /// Records per run (default 40 M; 4 M with `--quick`).
        #[arg(long)]
        records: Option<u64>,
    },
    /// The time and size of one TaskManager's Prometheus `/metrics` while it runs `jobs`
    /// jobs of 8 vertices (stream-sum with 6 pass-through stages, 1000 records/s each).
    MetricsScrape {
        /// How many jobs.
        #[arg(long, default_value_t = 4)]
        jobs: usize,
        /// How many scrapes to time.
        #[arg(long, default_value_t = 50)]
        scrapes: usize,
    },
    /// Serialization alone: appends `records` shuffle records (100 bytes: a u64 key and a
    /// 92-byte payload) into 32 KiB buffers with `sluice::record::Appender`, on this thread,
    /// and prints the CPU time per record; then as many records validated and read in place
    /// from one full buffer, as the shuffle's sink reads them.
    Append {
        /// How many records.
        #[arg(long, default_value_t = 100_000_000)]
        records: u64,
    },
    /// The shuffle alone, alternating between two engines (`--against`) or two configurations
    /// (`--set`, `--set-against`) running side by side; prints each run and the medians.
    Shuffle {
        /// The second engine (default: the first, `--sluice-bin`).
        #[arg(long, value_name = "PATH")]
        against: Option<PathBuf>,
        /// A configuration line for the second cluster; repeatable.
        #[arg(long, value_name = "KEY: VALUE")]
        set_against: Vec<String>,
        /// Runs on each side.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Records per run.
        #[arg(long, default_value_t = 40_000_000)]
        records: u64,
    },
    /// The JobManager as the control plane, with stand-in TaskManagers in a child process: one
    /// job of two vertices of `parallelism` subtasks all-to-all (deploy, a checkpoint, a
    /// failover), then `jobs` jobs of `job-parallelism` subtasks with 1 s checkpoints for
    /// `seconds` (the JobManager's CPU share and RSS).
    Control {
        /// Subtasks of each vertex of the wide job (0: skip it).
        #[arg(long, default_value_t = 1000)]
        parallelism: u32,
        /// Stand-in TaskManagers.
        #[arg(long, default_value_t = 20)]
        taskmanagers: u32,
        /// Concurrent jobs of the second scenario (0: skip it).
        #[arg(long, default_value_t = 200)]
        jobs: u32,
        /// Subtasks of each of those jobs.
        #[arg(long, default_value_t = 8)]
        job_parallelism: u32,
        /// How long the second scenario is measured.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
    },
    /// What hostile clients cost a JobManager and a TaskManager (processes of `--sluice-bin`):
    /// slow REST connections, oversized pre-authentication proofs on the RPC port,
    /// unauthenticated QUIC connections pushing data (see `hostile.rs`).
    Hostile {
        /// Slow REST connections to open.
        #[arg(long, default_value_t = 10_000)]
        connections: usize,
    },
    /// sluice beside Apache Flink 2.3.0 (a MiniCluster, jobs in `bench/flink/`, built with
    /// Maven when needed) on the same jobs at parallelism 2: steady-state records/s and
    /// records per CPU second of each, and the ratios.
    Flink {
        /// Runs per engine and job, alternating between the engines (default 3; 1 with
        /// `--quick`).
        #[arg(long)]
        runs: Option<usize>,
        /// The jobs to compare (default: all).
        #[arg(long, value_enum, value_delimiter = ',')]
        jobs: Vec<flink::Job>,
    },
    /// Bounded jobs in BATCH and STREAMING execution mode on sluice and on Flink 2.3.0:
    /// wordcount over G GiB of text and a keyed sum over G GiB of records, one process each at
    /// parallelism 2 (wall, CPU, peak memory and spill), then sluice's BATCH wordcount at
    /// parallelism 8 on one TaskManager of 2 slots.
    Batch {
        /// GiB of input (default 1; 0.02 with `--quick`).
        #[arg(long)]
        gib: Option<f64>,
        /// Runs of each job, engine and mode (default 1).
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// Only sluice (no Maven, no JVM).
        #[arg(long)]
        no_flink: bool,
    },
    /// The key_by exchange between two TaskManager processes: `shuffle` on a standalone
    /// cluster of sluice and one of Flink 2.3.0 (JobManager + 2 TaskManagers of one slot each):
    /// steady-state records/s and records per CPU second of the three processes. `--set`
    /// configures sluice's cluster (e.g. `taskmanager.network.quic.max-mtu: 1452`, Ethernet's
    /// datagrams instead of loopback's).
    FlinkCluster {
        /// Short-and-long run pairs per engine (default 3; 1 with `--quick`).
        #[arg(long)]
        runs: Option<usize>,
    },
    /// End-to-end latency (source stamp to sink) of a paced stream-sum on sluice and on Flink
    /// 2.3.0 at parallelism 2, at each rate and buffer timeout: p50, p99, p99.9, max, CPU.
    Latency {
        /// Records per second over both sources; comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "10000,1000000")]
        rates: Vec<u64>,
        /// `execution.buffer-timeout` values in ms (0: flush after every record); comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "100,0")]
        timeouts: Vec<u64>,
        /// Seconds of counted records per run (default 10; 1 with `--quick`).
        #[arg(long)]
        seconds: Option<f64>,
        /// Records scheduled in the first this many ms are not counted (default 2000; 500 with
        /// `--quick`).
        #[arg(long)]
        warmup_ms: Option<u64>,
        /// Runs of every rate and timeout on each engine.
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// A sluice setting `KEY=VALUE` for an extra row of sluice with it (as `-D`), e.g.
        /// `taskmanager.threads.scheduling-policy=normal`; repeatable.
        #[arg(long, value_name = "KEY=VALUE")]
        variant: Vec<String>,
    },
    /// The Kafka connectors on one broker the bench starts (scripts/kafka.sh): the broker's
    /// producer and consumer perf tools, kafka-wordcount's steady-state throughput at least
    /// once and exactly once, and exactly-once end-to-end latency per checkpoint interval.
    Kafka {
        /// Records of the tools' fixed-size baseline (default 2000000; 200000 with `--quick`).
        #[arg(long)]
        records: Option<u64>,
        /// Bytes per record of that baseline.
        #[arg(long, default_value_t = 100)]
        record_size: u64,
        /// Lines of the short and the long input topic of kafka-wordcount at least once,
        /// `SHORT,LONG` (default 100000,600000; 20000,100000 with `--quick`).
        #[arg(long, value_delimiter = ',')]
        lines: Vec<u64>,
        /// The same for exactly once (default 20000,120000; 10000,40000 with `--quick`).
        #[arg(long, value_delimiter = ',')]
        eos_lines: Vec<u64>,
        /// Runs of each tool and short-and-long pairs per delivery guarantee (default 3; 1
        /// with `--quick`).
        #[arg(long)]
        runs: Option<usize>,
        /// Checkpoint interval of the throughput runs, in seconds.
        #[arg(long, default_value_t = 1)]
        checkpoint_interval: u64,
        /// Records per second of the latency runs.
        #[arg(long, default_value_t = 1000)]
        rate: u64,
        /// Seconds of counted records per latency run (default 30; 5 with `--quick`).
        #[arg(long)]
        seconds: Option<f64>,
        /// Seconds of records produced before the counted ones.
        #[arg(long, default_value_t = 3.0)]
        warmup: f64,
        /// Checkpoint intervals of the latency runs in seconds; comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,10")]
        intervals: Vec<u64>,
    },
    /// The stand-in TaskManagers of `control` (the harness starts them).
    #[command(hide = true)]
    StandIns {
        #[arg(long)]
        jobmanager: String,
        #[arg(long)]
        count: u32,
        #[arg(long)]
        slots: u32,
    },
    /// Only one baseline: `count` transfers of `seconds` each, one line per transfer.
    Baseline {
        #[arg(value_enum)]
        transport: Transport,
        /// How many transfers.
        #[arg(long, default_value_t = 7)]
        count: usize,
        /// Seconds per transfer.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
    },
}

/// How big each measurement is.
struct Sizes {
    repetitions: usize,
    /// Transfers per baseline: enough that the best of them is the transport's ceiling.
    transfers: usize,
    transfer: Duration,
    shuffle_records: u64,
    stream_sum_records: u64,
    slow_sink_time: Duration,
    jm_records: [u64; 2],
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                repetitions: 1,
                transfers: 3,
                transfer: Duration::from_millis(500),
                shuffle_records: 2_000_000,
                stream_sum_records: 4_000_000,
                slow_sink_time: Duration::from_secs(3),
                jm_records: [100_000, 1_000_000],
            }
        } else {
            Sizes {
                repetitions: 3,
                transfers: 7,
                transfer: Duration::from_secs(2),
                shuffle_records: 40_000_000,
                stream_sum_records: 40_000_000,
                slow_sink_time: Duration::from_secs(10),
                jm_records: [1_000_000, 10_000_000],
            }
        }
    }
}

/// A runtime for the in-process JobManager (two worker threads: the machine's cores).
fn tokio_runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Sub::Receive { transport }) => baseline::receive(transport),
        Some(Sub::State { keys }) => state::run(cli.quick, keys),
        Some(Sub::Timers) => state::timers(cli.quick),
        Some(Sub::Checkpoints) => {
            sluice_bin(&cli).and_then(|bin| checkpoints::run(&bin, cli.quick))
        }
        Some(Sub::EventTime) => {
            sluice_bin(&cli).and_then(|bin| checkpoints::event_time(&bin, cli.quick))
        }
        Some(Sub::Metrics {
            ref job,
            runs,
            records,
        }) => sluice_bin(&cli).and_then(|bin| metrics::run(&bin, job, cli.quick, runs, records)),
        Some(Sub::Nexmark {
            events,
            ref queries,
        }) => sluice_bin(&cli)
            .and_then(|bin| nexmark::run(&bin, cli.quick, events, queries.as_deref())),
        Some(Sub::WindowState { ref keys }) => {
            sluice_bin(&cli).and_then(|bin| window_state::run(&bin, cli.quick, keys))
        }
        Some(Sub::MetricsScrape { jobs, scrapes }) => {
            sluice_bin(&cli).and_then(|bin| metrics::scrape_size(&bin, jobs, scrapes))
        }
        Some(Sub::Append { records }) => append_only(records),
        Some(Sub::Control {
            parallelism,
            taskmanagers,
            jobs,
            job_parallelism,
            seconds,
        }) => tokio_runtime().and_then(|rt| {
            rt.block_on(async {
                if parallelism > 0 {
                    control::wide(parallelism, taskmanagers).await?;
                }
                if jobs > 0 {
                    control::many(jobs, job_parallelism, seconds, taskmanagers).await?;
                }
                Ok(())
            })
        }),
        Some(Sub::Hostile { connections }) => {
            sluice_bin(&cli).and_then(|bin| hostile::run(&bin, connections))
        }
        Some(Sub::Flink { runs, ref jobs }) => sluice_bin(&cli).and_then(|bin| {
            let all = [
                flink::Job::StreamSum,
                flink::Job::Wordcount,
                flink::Job::StreamSumRocksdb,
            ];
            let jobs = if jobs.is_empty() { &all[..] } else { jobs };
            let runs = runs.unwrap_or(if cli.quick { 1 } else { 3 });
            flink::run(&bin, jobs, runs, cli.quick)
        }),
        Some(Sub::Batch {
            gib,
            runs,
            no_flink,
        }) => sluice_bin(&cli).and_then(|bin| {
            let gib = gib.unwrap_or(if cli.quick { 0.02 } else { 1.0 });
            batch::run(&bin, gib, runs.max(1), !no_flink)
        }),
        Some(Sub::FlinkCluster { runs }) => sluice_bin(&cli).and_then(|bin| {
            let runs = runs.unwrap_or(if cli.quick { 1 } else { 3 });
            flink_cluster::run(&bin, runs, cli.quick, &cli.set)
        }),
        Some(Sub::Latency {
            ref rates,
            ref timeouts,
            seconds,
            warmup_ms,
            runs,
            ref variant,
        }) => sluice_bin(&cli).and_then(|bin| {
            let plan = latency::Plan {
                rates: rates.clone(),
                timeouts_ms: timeouts.clone(),
                seconds: seconds.unwrap_or(if cli.quick { 1.0 } else { 10.0 }),
                warmup_ms: warmup_ms.unwrap_or(if cli.quick { 500 } else { 2000 }),
                runs,
                variants: variant.clone(),
            };
            latency::run(&bin, &plan)
        }),
        Some(Sub::Kafka {
            records,
            record_size,
            ref lines,
            ref eos_lines,
            checkpoint_interval,
            runs,
            rate,
            seconds,
            warmup,
            ref intervals,
        }) => (|| {
            let bin = sluice_bin(&cli)?;
            let q = cli.quick;
            let plan = kafka::Plan {
                records: records.unwrap_or(if q { 200_000 } else { 2_000_000 }),
                record_size,
                lines: [
                    kafka::short_long("--lines", lines, [20_000, 100_000], [100_000, 600_000], q)?,
                    kafka::short_long(
                        "--eos-lines",
                        eos_lines,
                        [10_000, 40_000],
                        [20_000, 120_000],
                        q,
                    )?,
                ],
                runs: runs.unwrap_or(if q { 1 } else { 3 }),
                checkpoint_interval,
                rate,
                seconds: seconds.unwrap_or(if q { 5.0 } else { 30.0 }),
                warmup,
                intervals: intervals.clone(),
                set: cli.set.clone(),
            };
            kafka::run(&bin, &plan)
        })(),
        Some(Sub::StandIns {
            jobmanager,
            count,
            slots,
        }) => tokio_runtime()
            .and_then(|rt| rt.block_on(control::run_stand_ins(jobmanager, count, slots))),
        Some(Sub::Baseline {
            transport,
            count,
            seconds,
        }) => baseline_only(transport, count, Duration::from_secs_f64(seconds)),
        Some(Sub::Shuffle {
            ref against,
            ref set_against,
            runs,
            records,
        }) => sluice_bin(&cli).and_then(|bin| {
            let a = ab::Side {
                bin: &bin,
                config: &cli.set,
            };
            let b = (against.is_some() || !set_against.is_empty()).then(|| ab::Side {
                bin: against.as_deref().unwrap_or(&bin),
                config: set_against,
            });
            ab::run(a, b, runs, records)
        }),
        None => run(&cli),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `sluice-bench append`: the writer's serialization of the shuffle's records, alone.
fn append_only(records: u64) -> Result<()> {
    const SEGMENT: usize = 32 * 1024;
    let mut appender = sluice::record::Appender::default();
    let mut buf = rkyv::util::AlignedVec::<16>::with_capacity(SEGMENT + 256);
    // Records join runs as a network writer's do: one header per buffer for these.
    let mut run = None;
    let cpu = procs::cpu_seconds(std::process::id())?;
    let start = Instant::now();
    for i in 0..records {
        let record = std::hint::black_box((i % 1024, [(i & 0xff) as u8; 92]));
        appender.append_to_run(&mut buf, &mut run, &record)?;
        if buf.len() >= SEGMENT {
            sluice::record::close_run(&mut buf, &mut run);
            std::hint::black_box(&buf);
            buf.clear();
        }
    }
    let (wall, cpu) = (
        start.elapsed().as_secs_f64(),
        procs::cpu_seconds(std::process::id())? - cpu,
    );
    println!(
        "{records} records appended: {:.2} ns CPU per record ({:.2} ns wall)",
        cpu * 1e9 / records as f64,
        wall * 1e9 / records as f64
    );
    // The consuming side: frames of one full buffer validated and read in place, as the
    // shuffle's sink does (the buffer stays in the cache: this is the instructions' cost).
    for i in 0u64.. {
        let record = (i % 1024, [(i & 0xff) as u8; 92]);
        appender.append_to_run(&mut buf, &mut run, &record)?;
        if buf.len() >= SEGMENT {
            sluice::record::close_run(&mut buf, &mut run);
            break;
        }
    }
    let per_buffer = sluice::record::Frames::new(&buf).count() as u64;
    let rounds = (records / per_buffer).max(1);
    let cpu = procs::cpu_seconds(std::process::id())?;
    let mut matches = 0u64;
    for _ in 0..rounds {
        for frame in sluice::record::Frames::new(std::hint::black_box(&buf[..])) {
            let (offset, bytes) = frame?;
            let r = sluice::record::access::<(u64, [u8; 92])>(offset, bytes)?;
            matches += u64::from(r.1[0] == 0xff && r.1[91] == 0xff && r.0.to_native() == u64::MAX);
        }
    }
    let cpu = procs::cpu_seconds(std::process::id())? - cpu;
    println!(
        "{} records validated and read in place: {:.2} ns CPU per record ({matches} matched)",
        rounds * per_buffer,
        cpu * 1e9 / (rounds * per_buffer) as f64
    );
    Ok(())
}

/// `sluice-bench baseline`: one baseline's transfers, each on its own line, then the statistics.
fn baseline_only(transport: Transport, count: usize, duration: Duration) -> Result<()> {
    let mut gbs = Vec::new();
    for i in 0..count {
        let t = baseline::measure(transport, duration)?;
        println!("{i}: {t}");
        gbs.push(t.gb_per_s());
    }
    let s = Stat::of(&gbs);
    println!(
        "median {:.3}, min {:.3}, max {:.3} GB/s",
        s.median, s.min, s.max
    );
    Ok(())
}

/// `stream-sum`'s arguments for a bounded run as fast as it goes over 1000 keys.
fn stream_sum_args(records: u64) -> Vec<String> {
    let records = records.to_string();
    ["--rate", "0", "--keys", "1000", "--records", &records]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The directory holding this binary's sibling binaries (the cargo profile directory).
fn profile_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("this binary's path")?;
    let mut dir = exe.parent().context("binary directory")?.to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    Ok(dir)
}

/// The sluice binary: given, or freshly built so that the numbers are the current engine's.
fn sluice_bin(cli: &Cli) -> Result<PathBuf> {
    if let Some(bin) = cli
        .sluice_bin
        .clone()
        .or_else(|| std::env::var_os("SLUICE_BIN").map(PathBuf::from))
    {
        return Ok(bin);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("workspace root")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // Only the engine: rebuilding this running binary would replace it under the receivers
    // it re-executes. The bench enables no dependency feature the engine lacks, so this build
    // reuses the library `cargo run -p sluice-bench` just built.
    eprintln!("building the sluice binary (cargo build --bin sluice)...");
    let status = Command::new(cargo)
        .args(["build", "--quiet", "-p", "sluice", "--bin", "sluice"])
        .current_dir(root)
        .status()
        .context("run cargo build")?;
    if !status.success() {
        bail!("cargo build of the sluice binary failed");
    }
    let bin = profile_dir()?.join("sluice");
    if !bin.is_file() {
        bail!("no sluice binary at {}", bin.display());
    }
    Ok(bin)
}

/// Median, minimum and maximum of some samples.
#[derive(Clone, Copy, Debug, Default)]
struct Stat {
    median: f64,
    min: f64,
    max: f64,
}

impl Stat {
    /// The statistics of `f` over `runs`.
    fn by<R>(runs: &[R], f: impl Fn(&R) -> f64) -> Stat {
        Stat::of(&runs.iter().map(f).collect::<Vec<_>>())
    }

    fn of(samples: &[f64]) -> Stat {
        let mut s: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if s.is_empty() {
            return Stat::default();
        }
        s.sort_by(f64::total_cmp);
        Stat {
            median: s[s.len() / 2],
            min: s[0],
            max: s[s.len() - 1],
        }
    }

    fn range(&self, digits: usize) -> String {
        if self.min == self.max {
            String::new()
        } else {
            format!("{:.digits$}–{:.digits$}", self.min, self.max)
        }
    }
}

/// One measured job run on the cluster.
struct JobRun {
    wall: Duration,
    records: u64,
    source_write_bytes: u64,
    sink_read_records: u64,
    tm_cpu_seconds: f64,
    tm_peak_rss: u64,
}

fn run_job(
    cluster: &mut Cluster,
    job: &str,
    args: &[String],
    records: u64,
    timeout: Duration,
) -> Result<JobRun> {
    let tms = cluster.taskmanager_pids();
    let cpu_before: f64 = tms
        .iter()
        .map(|&p| procs::cpu_seconds(p))
        .sum::<Result<f64>>()?;
    let sampler = procs::peak_rss(tms.clone());
    let id = cluster.submit(job, args, 2)?;
    let done = cluster.wait_finished(&id, timeout)?;
    let peak = sampler.finish();
    let cpu_after: f64 = tms
        .iter()
        .map(|&p| procs::cpu_seconds(p))
        .sum::<Result<f64>>()?;
    Ok(JobRun {
        wall: done.running_to_finished()?,
        records,
        source_write_bytes: done.metric("Source", "write-bytes"),
        sink_read_records: done.metric("Sink", "read-records"),
        tm_cpu_seconds: cpu_after - cpu_before,
        tm_peak_rss: peak.values().copied().max().unwrap_or(0),
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn run(cli: &Cli) -> Result<()> {
    let sizes = Sizes::new(cli.quick);
    let bin = sluice_bin(cli)?;
    let load = procs::load_average().unwrap_or(f64::NAN);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let started = Instant::now();
    eprintln!(
        "sluice-bench ({} mode): {cores} cores, 1-minute load {load:.2}, sluice at {}",
        if cli.quick { "quick" } else { "full" },
        bin.display()
    );

    // 1. Baselines.
    let mut transfers = Vec::new();
    for (transport, label) in [
        (Transport::Tcp, "TCP loopback, 1 MiB writes"),
        (Transport::QuicDefault, "quinn bulk, default settings"),
        (Transport::QuicTuned, "quinn bulk, tuned"),
        (
            Transport::QuicDiscovery,
            "quinn bulk, tuned, MTU by discovery up to 65000",
        ),
    ] {
        let (mut gbs, mut per_cpu) = (Vec::new(), Vec::new());
        for _ in 0..sizes.transfers {
            let t = baseline::measure(transport, sizes.transfer)
                .with_context(|| format!("baseline {label}"))?;
            eprintln!("  {label}: {t}");
            gbs.push(t.gb_per_s());
            per_cpu.push(t.gb_per_cpu_s());
        }
        transfers.push((label, Stat::of(&gbs), Stat::of(&per_cpu)));
    }
    // The ceilings are the best transfers: other load on the machine only ever slows a
    // transfer down, so the fastest one is the closest to what the transport can do here.
    let tcp = transfers[0].1.max;
    let quinn_tuned = transfers[2].1.max;

    // 2. and 3. Shuffle and stream-sum between two TaskManager processes.
    let cluster_config = format!("{CLUSTER_CONFIG}{}\n", cli.set.join("\n"));
    let mut cluster = Cluster::start(&bin, 2, &cluster_config)?;
    let network_memory = cluster.network_memory()?;
    let mut shuffles = Vec::new();
    for _ in 0..sizes.repetitions {
        let n = sizes.shuffle_records;
        let args = vec!["--records".to_string(), n.to_string()];
        let r = run_job(&mut cluster, "shuffle", &args, n, Duration::from_secs(300))?;
        if r.sink_read_records != n {
            bail!(
                "shuffle: the sinks read {} of {n} records",
                r.sink_read_records
            );
        }
        eprintln!(
            "  shuffle {n} records: {:.2} s, {:.2} M records/s",
            r.wall.as_secs_f64(),
            n as f64 / r.wall.as_secs_f64() / 1e6
        );
        shuffles.push(r);
    }
    let mut sums = Vec::new();
    for _ in 0..sizes.repetitions {
        let n = sizes.stream_sum_records;
        let args = stream_sum_args(n);
        let r = run_job(
            &mut cluster,
            "stream-sum",
            &args,
            n,
            Duration::from_secs(300),
        )?;
        eprintln!(
            "  stream-sum {n} records: {:.2} s, {:.2} CPU s",
            r.wall.as_secs_f64(),
            r.tm_cpu_seconds
        );
        sums.push(r);
    }

    // 4b. The JobManager's bytes for 1x and 10x the records, on the same cluster.
    let mut jm = Vec::new();
    for n in sizes.jm_records {
        let (rpc_before, io_before) = (
            procs::tcp_port_bytes(cluster.rpc_port)?,
            procs::io_chars(cluster.jobmanager_pid())?,
        );
        let args = vec!["--records".to_string(), n.to_string()];
        let r = run_job(&mut cluster, "shuffle", &args, n, Duration::from_secs(300))?;
        let (rpc_after, io_after) = (
            procs::tcp_port_bytes(cluster.rpc_port)?,
            procs::io_chars(cluster.jobmanager_pid())?,
        );
        jm.push((n, r.wall, rpc_after - rpc_before, io_after - io_before));
    }
    drop(cluster);

    // 4a. Memory under a slow sink, on a fresh cluster so VmHWM is this run's peak.
    let cluster = Cluster::start(&bin, 2, &cluster_config)?;
    let tms = cluster.taskmanager_pids();
    let idle: Vec<u64> = tms
        .iter()
        .map(|&p| procs::status_bytes(p, "VmRSS"))
        .collect::<Result<_>>()?;
    let sampler = procs::peak_rss(tms.clone());
    let args: Vec<String> = ["--records", "1000000000", "--sink-delay-us", "200"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let id = cluster.submit("shuffle", &args, 2)?;
    std::thread::sleep(sizes.slow_sink_time);
    let peak = sampler.finish();
    let hwm: Vec<u64> = tms
        .iter()
        .map(|&p| procs::status_bytes(p, "VmHWM"))
        .collect::<Result<_>>()?;
    // Metrics travel with heartbeats (1 s here): wait for one more before reading them.
    std::thread::sleep(Duration::from_millis(1500));
    let job = cluster.job(&id)?;
    let (emitted, consumed) = (
        job.metric("Source", "write-records"),
        job.metric("Sink", "read-records"),
    );
    let emitted_bytes = job.metric("Source", "write-bytes");
    cluster.cancel(&id)?;
    drop(cluster);

    // The report.
    let mode = if cli.quick { "quick" } else { "full" };
    println!();
    println!(
        "sluice-bench, {mode} mode: {cores} cores, 1-minute load {load:.2} at start and {:.2} at the end, {} repetition(s), {:.0} s in all",
        procs::load_average().unwrap_or(f64::NAN),
        sizes.repetitions,
        started.elapsed().as_secs_f64()
    );
    if !cli.set.is_empty() {
        println!();
        println!(
            "Cluster configuration beyond the defaults: {}.",
            cli.set.join(", ")
        );
    }
    println!();
    println!(
        "Ratios are against the ceilings: the best of the {} transfers of TCP ({tcp:.2} GB/s) and of tuned quinn ({quinn_tuned:.2} GB/s); a shuffle ratio takes the shuffle's median.",
        sizes.transfers
    );
    println!();
    println!("| measurement | median | min–max | unit | vs TCP best | vs tuned quinn best |");
    println!("|---|---:|---:|---|---:|---:|");
    for (label, s, _) in &transfers {
        println!(
            "| {label} | {:.2} | {} | GB/s | {:.2} | {:.2} |",
            s.median,
            s.range(2),
            s.median / tcp,
            s.median / quinn_tuned
        );
    }
    let shuffle_rps = Stat::by(&shuffles, |r| r.records as f64 / r.wall.as_secs_f64() / 1e6);
    let shuffle_gbs = Stat::by(&shuffles, |r| {
        (r.records * RECORD_BYTES) as f64 / r.wall.as_secs_f64() / 1e9
    });
    let wire_gbs = Stat::by(&shuffles, |r| {
        r.source_write_bytes as f64 / r.wall.as_secs_f64() / 1e9
    });
    let cross_gbs = Stat::by(&shuffles, |r| {
        r.source_write_bytes as f64 / 2.0 / r.wall.as_secs_f64() / 1e9
    });
    let n = sizes.shuffle_records;
    println!(
        "| shuffle key_by p=2, 2 TMs: {n} records of 100 B | {:.2} | {} | M records/s | | |",
        shuffle_rps.median,
        shuffle_rps.range(2)
    );
    for (label, s) in [
        ("shuffle: record bytes (N × 100 B / wall)", shuffle_gbs),
        ("shuffle: serialized bytes (write-bytes / wall)", wire_gbs),
        ("shuffle: bytes between the TMs (≈ half)", cross_gbs),
    ] {
        println!(
            "| {label} | {:.3} | {} | GB/s | {:.3} | {:.3} |",
            s.median,
            s.range(3),
            s.median / tcp,
            s.median / quinn_tuned
        );
    }
    let shuffle_ns = Stat::by(&shuffles, |r| r.tm_cpu_seconds * 1e9 / r.records as f64);
    let shuffle_cores = Stat::by(&shuffles, |r| r.tm_cpu_seconds / r.wall.as_secs_f64());
    let shuffle_per_cpu = Stat::by(&shuffles, |r| {
        (r.records * RECORD_BYTES) as f64 / r.tm_cpu_seconds / 1e9
    });
    println!(
        "| shuffle: TaskManager CPU per record (both TMs, utime + stime) | {:.0} | {} | ns | | |",
        shuffle_ns.median,
        shuffle_ns.range(0)
    );
    println!(
        "| shuffle: TaskManager cores busy (CPU s / wall s) | {:.2} | {} | cores | | |",
        shuffle_cores.median,
        shuffle_cores.range(2)
    );
    let sum_rps = Stat::by(&sums, |r| r.records as f64 / r.wall.as_secs_f64() / 1e6);
    let sum_per_core = Stat::by(&sums, |r| r.records as f64 / r.tm_cpu_seconds / 1e6);
    let sum_cores = Stat::by(&sums, |r| r.tm_cpu_seconds / r.wall.as_secs_f64());
    let n = sizes.stream_sum_records;
    println!(
        "| stream-sum p=2, 2 TMs: {n} records | {:.2} | {} | M records/s | | |",
        sum_rps.median,
        sum_rps.range(2)
    );
    println!(
        "| stream-sum per TaskManager CPU second | {:.2} | {} | M records/core-s | | |",
        sum_per_core.median,
        sum_per_core.range(2)
    );
    println!(
        "| stream-sum: TaskManager cores busy (CPU s / wall s) | {:.2} | {} | cores | | |",
        sum_cores.median,
        sum_cores.range(2)
    );

    println!();
    let share = shuffle_gbs.median / quinn_tuned;
    let best_share = shuffle_gbs.max / quinn_tuned;
    println!(
        "Goal ≥ 3 M records/s through the key_by exchange: {} ({:.2} M/s).",
        if shuffle_rps.median >= 3.0 {
            "met"
        } else {
            "MISSED"
        },
        shuffle_rps.median
    );
    println!(
        "Goal shuffle ≥ 70% of tuned quinn bulk: {} — the shuffle's median {:.3} GB/s of record bytes (N × 100 B / wall) is {:.0}% of the best tuned-quinn transfer, {:.2} GB/s (its median: {:.2}). The shuffle's best run is {:.0}% of it; counting only the bytes that cross between the TaskManagers, the median is {:.0}%.",
        if share >= 0.7 { "met" } else { "MISSED" },
        shuffle_gbs.median,
        share * 100.0,
        quinn_tuned,
        transfers[2].1.median,
        best_share * 100.0,
        cross_gbs.median / quinn_tuned * 100.0
    );
    let quinn_per_cpu = transfers[2].2;
    println!(
        "Per CPU second (a second view, independent of how the scheduler shares the cores with other load, though not of the cache and memory traffic that load adds): tuned quinn moves {:.2} GB per CPU second of its two processes (best transfer; median {:.2}), the shuffle {:.2} GB of record bytes per CPU second of its two TaskManagers (median{}): {:.0}% of quinn's best. With both cores to itself, ≥ 70% of the ceiling needs about {:.0} ns of TaskManager CPU per record (the ceiling's bytes in 100-byte records, over {cores} cores busy); the shuffle used {:.0}.",
        quinn_per_cpu.max,
        quinn_per_cpu.median,
        shuffle_per_cpu.median,
        match shuffle_per_cpu.range(2) {
            r if r.is_empty() => r,
            r => format!(" of {r}"),
        },
        shuffle_per_cpu.median / quinn_per_cpu.max * 100.0,
        cores as f64 * 1e9 / (0.7 * quinn_tuned * 1e9 / RECORD_BYTES as f64),
        shuffle_ns.median
    );
    println!(
        "Peak TaskManager RSS during the full-speed shuffles: {:.1} MiB.",
        mib(shuffles.iter().map(|r| r.tm_peak_rss).max().unwrap_or(0))
    );

    println!();
    println!(
        "Slow sink (shuffle --sink-delay-us 200, sampled {:.0} s; network memory configured per TaskManager: {:.1} MiB):",
        sizes.slow_sink_time.as_secs_f64(),
        mib(network_memory)
    );
    println!();
    println!(
        "| TaskManager | RSS idle | peak RSS (sampled) | VmHWM | growth | growth / network memory |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, &pid) in tms.iter().enumerate() {
        let p = peak.get(&pid).copied().unwrap_or(0).max(hwm[i]);
        let growth = p.saturating_sub(idle[i]);
        println!(
            "| {i} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1}% |",
            mib(idle[i]),
            mib(peak.get(&pid).copied().unwrap_or(0)),
            mib(hwm[i]),
            mib(growth),
            growth as f64 / network_memory as f64 * 100.0
        );
    }
    println!();
    println!(
        "The sources emitted {emitted} records ({:.1} MiB serialized) while the sinks consumed {consumed}: {} records in flight; the sources are throttled to the sinks' pace.",
        mib(emitted_bytes),
        emitted.saturating_sub(consumed)
    );

    println!();
    println!("JobManager traffic against the number of records (shuffle p=2):");
    println!();
    println!(
        "| records | job wall | bytes on the RPC port (ss) | JobManager rchar+wchar (/proc/PID/io) |"
    );
    println!("|---:|---:|---:|---:|");
    for (n, wall, rpc, io) in &jm {
        println!("| {n} | {:.2} s | {rpc} | {io} |", wall.as_secs_f64());
    }
    if let [(n0, _, rpc0, _), (n1, _, rpc1, _)] = jm[..] {
        println!();
        println!(
            "{}x the records: {:.2}x the RPC bytes.",
            n1 / n0.max(1),
            rpc1 as f64 / (rpc0 as f64).max(1.0)
        );
    }
    Ok(())
}
