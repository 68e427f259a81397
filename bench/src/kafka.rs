//! `sluice-bench kafka`: sluice's Kafka connectors against the broker's own tools, on one real
//! broker (`scripts/kafka.sh`, Kafka 4.1, KRaft) that the harness starts and stops.
//!
//! 1. Baselines, same broker, same run: Kafka's `ProducerPerformance` and `ConsumerPerformance`
//!    (the classes behind `kafka-producer-perf-test.sh` and `kafka-consumer-perf-test.sh`, from
//!    the `kafka-tools` artifact that `bench/kafka/pom.xml` fetches with Maven): N records of a
//!    given size produced at full speed and read back, and the input topics of step 2 (lines of
//!    the bundled Hamlet text, picked at random by `--payload-file`) produced and read back.
//! 2. `kafka-wordcount --bounded` (Kafka → flat_map → key_by → running count → Kafka) on a
//!    standalone cluster of two TaskManagers, at least once and exactly once (checkpoints every
//!    second by default, `--checkpoint-interval`), over a short and a long pre-filled input
//!    topic: the steady rate is the difference of the two runs' lines over the difference of
//!    their RUNNING→FINISHED times, and per TaskManager CPU second the same over their
//!    TaskManagers' CPU (`/proc`), as `sluice-bench flink` does.
//! 3. End-to-end latency with exactly-once output: a producer in this process writes
//!    `s<seq>t<ns>` lines at a fixed rate (the wall clock at the send in the line), the job counts
//!    each as a word of its own, and a `read_committed` consumer here takes `now - ns` when the
//!    count becomes visible, for each checkpoint interval.
//!
//! Nothing asserts on time: it prints numbers.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use sluice::examples::LatencyHistogram;

use crate::cluster::Cluster;
use crate::flink::{Steady, Usage, java, newest};
use crate::{CLUSTER_CONFIG, Stat, procs, run_job};

/// Partitions of every topic: one per source and sink subtask (parallelism 2).
const PARTITIONS: i32 = 2;

/// The sizes of one invocation.
pub struct Plan {
    /// Records of the fixed-size baseline.
    pub records: u64,
    /// Bytes of each of them.
    pub record_size: u64,
    /// Lines of the short and the long input topic of the throughput runs, at least once
    /// (`[0]`) and exactly once (`[1]`).
    pub lines: [[u64; 2]; 2],
    /// Short-and-long pairs per delivery guarantee, and baseline repetitions.
    pub runs: usize,
    /// Checkpoint interval of the throughput runs, in seconds.
    pub checkpoint_interval: u64,
    /// Records per second of the latency runs.
    pub rate: u64,
    /// Seconds of counted records per latency run.
    pub seconds: f64,
    /// Seconds produced before the counted ones.
    pub warmup: f64,
    /// Checkpoint intervals of the latency runs, in seconds.
    pub intervals: Vec<u64>,
    /// Extra cluster configuration lines (`--set`).
    pub set: Vec<String>,
}

/// `--lines`-style option values: `[SHORT, LONG]`, or the default (`quick` or full) when none
/// are given.
pub fn short_long(
    option: &str,
    given: &[u64],
    quick_default: [u64; 2],
    default: [u64; 2],
    quick: bool,
) -> Result<[u64; 2]> {
    match given {
        [] if quick => Ok(quick_default),
        [] => Ok(default),
        [short, long] => Ok([*short, *long]),
        _ => bail!("{option} takes two numbers, SHORT,LONG; got {given:?}"),
    }
}

/// The broker, stopped (`scripts/kafka.sh stop`) when dropped.
struct Broker {
    dir: tempfile::TempDir,
    bootstrap: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn block_on<F: std::future::Future>(f: F) -> Result<F::Output> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(f))
}

impl Broker {
    /// Starts a broker in a fresh directory; it also stops when this process ends.
    fn start() -> Result<Broker> {
        let dir = tempfile::Builder::new()
            .prefix("sluice-bench-kafka-")
            .tempdir()?;
        let out = Command::new(repo_root().join("scripts/kafka.sh"))
            .arg("start")
            .arg(dir.path())
            .arg("")
            .arg(std::process::id().to_string())
            .output()
            .context("run scripts/kafka.sh start")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "the Kafka broker did not start (scripts/kafka.sh start):\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let bootstrap = stdout
            .lines()
            .find_map(|l| l.strip_prefix("READY bootstrap="))
            .with_context(|| format!("no READY line from scripts/kafka.sh: {stdout:?}"))?
            .trim()
            .to_string();
        Ok(Broker { dir, bootstrap })
    }

    /// The broker's process id.
    fn pid(&self) -> Result<u32> {
        let text = std::fs::read_to_string(self.dir.path().join("pid"))?;
        text.trim().parse().context("the broker's pid file")
    }

    /// Creates `topic` with [`PARTITIONS`] partitions and waits until its metadata is served.
    fn create_topic(&self, topic: &str) -> Result<()> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .context("Kafka admin client")?;
        let new = NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1));
        for r in
            block_on(admin.create_topics([&new], &AdminOptions::new()))?.context("create topics")?
        {
            r.map_err(|(t, e)| anyhow::anyhow!("cannot create topic {t}: {e}"))?;
        }
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = consumer
                .fetch_metadata(Some(topic), Duration::from_secs(5))
                .ok()
                .is_some_and(|m| {
                    m.topics().iter().any(|t| {
                        t.name() == topic
                            && t.error().is_none()
                            && t.partitions().len() == PARTITIONS as usize
                    })
                });
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("topic {topic}: no metadata 20 s after its creation");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/kafka.sh"))
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}

/// The classpath of Kafka's tools (`bench/kafka/target/lib/*`), fetched with Maven unless the
/// copy is newer than the POM: offline first, online otherwise.
fn tools_classpath() -> Result<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka");
    let stamp = dir.join("target/.installed");
    let fresh = std::fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .is_ok_and(|t| newest(&dir.join("pom.xml")).is_ok_and(|p| t > p));
    if !fresh {
        let mvn = |offline: bool| -> Result<bool> {
            eprintln!(
                "fetching Kafka's tools (mvn{} package in {})...",
                if offline { " -o" } else { "" },
                dir.display()
            );
            let mut cmd = Command::new("mvn");
            cmd.args(["-q", "-B"]);
            if offline {
                cmd.arg("-o");
            }
            Ok(cmd
                .arg("package")
                .current_dir(&dir)
                .status()
                .context("run mvn (Maven 3 and a JDK 17 are needed)")?
                .success())
        };
        if !mvn(true)? && !mvn(false)? {
            bail!("the Maven build of {} failed", dir.display());
        }
        std::fs::write(&stamp, "")?;
    }
    Ok(format!("{}/target/lib/*", dir.display()))
}

/// What `ProducerPerformance` printed last: (records/s, MB/s).
pub fn parse_producer(out: &str) -> Result<(f64, f64)> {
    // "1000000 records sent, 396196.5 records/sec (37.78 MB/sec), 567.0 ms avg latency, ..."
    let line = out
        .lines()
        .rev()
        .find(|l| l.contains(" records sent, ") && l.contains(" records/sec ("))
        .context("no summary line ('N records sent, R records/sec (M MB/sec), ...')")?;
    let number_before = |marker: &str| -> Result<f64> {
        let head = &line[..line
            .find(marker)
            .with_context(|| format!("no '{marker}' in {line:?}"))?];
        head.rsplit([' ', '('])
            .next()
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("no number before '{marker}' in {line:?}"))
    };
    Ok((number_before(" records/sec")?, number_before(" MB/sec")?))
}

/// What `ConsumerPerformance` printed: the value of `column` on the line after its header.
pub fn parse_consumer(out: &str, column: &str) -> Result<f64> {
    let mut lines = out.lines().map(str::trim);
    let header = lines
        .by_ref()
        .find(|l| l.starts_with("start.time"))
        .context("no header line ('start.time, end.time, ...')")?;
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    // Log lines may come between the header and the values.
    let values = lines
        .find(|l| {
            l.split(',').count() == names.len() && l.starts_with(|c: char| c.is_ascii_digit())
        })
        .context("no line of values after the header")?;
    let values: Vec<&str> = values.split(',').map(str::trim).collect();
    let i = names
        .iter()
        .position(|n| *n == column)
        .with_context(|| format!("no column {column} in {header:?}"))?;
    values
        .get(i)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no number in column {column} of {values:?}"))
}

/// One run of a Kafka tool: its records/s and MB/s by its own clock, and its process's CPU
/// seconds (JVM start-up included).
#[derive(Clone, Copy, Debug)]
struct ToolRun {
    records_per_s: f64,
    mb_per_s: f64,
    cpu: f64,
}

/// What every Kafka tool run needs.
struct Tools {
    classpath: String,
    scratch: tempfile::TempDir,
    bootstrap: String,
}

impl Tools {
    fn run(&self, class: &str, args: &[String], tag: &str) -> Result<(String, f64)> {
        let log = self.scratch.path().join(format!("{tag}.log"));
        let mut cmd = Command::new(java());
        cmd.args([
            "-Xmx512m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            &self.classpath,
        ])
        .arg(format!("org.apache.kafka.tools.{class}"))
        .args(args)
        .current_dir(self.scratch.path());
        let mut child = procs::Child::spawn_logged(class, cmd, &log)?;
        let cpu = child.wait_cpu(Duration::from_secs(300));
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        let cpu = cpu.with_context(|| format!("{class} {args:?} failed:\n{out}"))?;
        Ok((out, cpu))
    }

    /// `kafka-producer-perf-test`: `records` records of `size` bytes, or lines of `payload`.
    fn produce(&self, topic: &str, records: u64, size: Option<u64>, tag: &str) -> Result<ToolRun> {
        let mut args: Vec<String> = [
            "--topic",
            topic,
            "--num-records",
            &records.to_string(),
            "--throughput",
            "-1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        match size {
            Some(size) => args.extend(["--record-size".into(), size.to_string()]),
            None => {
                let payload = self.scratch.path().join("hamlet-lines.txt");
                if !payload.exists() {
                    let lines: Vec<&str> = crate::flink::TEXT
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .collect();
                    std::fs::write(&payload, lines.join("\n"))?;
                }
                args.extend(["--payload-file".into(), payload.display().to_string()]);
            }
        }
        args.extend([
            "--producer-props".into(),
            format!("bootstrap.servers={}", self.bootstrap),
        ]);
        let (out, cpu) = self.run("ProducerPerformance", &args, tag)?;
        let (records_per_s, mb_per_s) = parse_producer(&out)
            .with_context(|| format!("ProducerPerformance's output:\n{out}"))?;
        Ok(ToolRun {
            records_per_s,
            mb_per_s,
            cpu,
        })
    }

    /// `kafka-consumer-perf-test`: the first `records` records of `topic`, in a new group.
    /// Rates are its `fetch.*` columns: the time spent fetching, without the group's join.
    fn consume(&self, topic: &str, records: u64, tag: &str) -> Result<ToolRun> {
        let args: Vec<String> = [
            "--bootstrap-server",
            &self.bootstrap,
            "--topic",
            topic,
            "--messages",
            &records.to_string(),
            "--group",
            &format!("sluice-bench-{tag}"),
            "--timeout",
            "60000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (out, cpu) = self.run("ConsumerPerformance", &args, tag)?;
        let parse = |c| parse_consumer(&out, c).with_context(|| format!("output:\n{out}"));
        let consumed = parse("data.consumed.in.nMsg")?;
        if consumed < records as f64 {
            bail!("ConsumerPerformance read {consumed} of {records} records of {topic}");
        }
        Ok(ToolRun {
            records_per_s: parse("fetch.nMsg.sec")?,
            mb_per_s: parse("fetch.MB.sec")?,
            cpu,
        })
    }
}

/// A cluster of two one-slot TaskManagers checkpointing every `interval_s` seconds.
fn start_cluster(
    bin: &Path,
    interval_s: u64,
    checkpoints: &Path,
    set: &[String],
) -> Result<Cluster> {
    let config = format!(
        "{CLUSTER_CONFIG}execution.checkpointing.interval: {interval_s} s\nexecution.checkpointing.dir: {}\nrestart-strategy.type: none\n{}\n",
        checkpoints.display(),
        set.join("\n")
    );
    Cluster::start(bin, 2, &config)
}

fn wordcount_args(
    bootstrap: &str,
    input: &str,
    output: &str,
    exactly_once: bool,
    bounded: bool,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "--bootstrap-servers",
        bootstrap,
        "--input-topic",
        input,
        "--output-topic",
        output,
        "--group-id",
        output,
        "--delivery-guarantee",
        if exactly_once {
            "exactly-once"
        } else {
            "at-least-once"
        },
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if bounded {
        args.push("--bounded".into());
    }
    args
}

/// One steady-state measurement of kafka-wordcount: the pair and the output records per line.
struct WordcountPair {
    steady: Steady,
    words_per_line: f64,
    /// The broker's CPU seconds per line at the steady state.
    broker_per_line: f64,
}

/// The latency of one checkpoint interval.
struct LatencyRun {
    interval_s: u64,
    histogram: LatencyHistogram,
    emitted_per_s: f64,
}

/// `sluice-bench kafka`.
pub fn run(sluice: &Path, plan: &Plan) -> Result<()> {
    if plan.checkpoint_interval == 0 || plan.intervals.contains(&0) {
        bail!("checkpoint intervals are whole seconds above 0");
    }
    for (option, [short, long]) in ["--lines", "--eos-lines"].iter().zip(plan.lines) {
        if short >= long {
            bail!("{option}: the short run ({short}) needs fewer lines than the long one ({long})");
        }
    }
    let started = Instant::now();
    let load = procs::load_average().unwrap_or(f64::NAN);
    let classpath = tools_classpath()?;
    eprintln!("starting a Kafka broker (scripts/kafka.sh)...");
    let broker = Broker::start()?;
    let tools = Tools {
        classpath,
        scratch: tempfile::Builder::new()
            .prefix("sluice-bench-kafka-tools-")
            .tempdir()?,
        bootstrap: broker.bootstrap.clone(),
    };
    eprintln!(
        "sluice-bench kafka: broker at {} (pid {}); 1-minute load {load:.2}; sluice at {}",
        broker.bootstrap,
        broker.pid()?,
        sluice.display()
    );

    // 1. The broker's tools.
    broker.create_topic("perf")?;
    let (mut produced, mut consumed) = (Vec::new(), Vec::new());
    for r in 0..plan.runs {
        let p = tools.produce(
            "perf",
            plan.records,
            Some(plan.record_size),
            &format!("p{r}"),
        )?;
        eprintln!(
            "  producer-perf-test {} x {} B: {:.0} records/s, {:.2} MB/s",
            plan.records, plan.record_size, p.records_per_s, p.mb_per_s
        );
        produced.push(p);
        let c = tools.consume("perf", plan.records, &format!("c{r}"))?;
        eprintln!(
            "  consumer-perf-test {}: {:.0} records/s, {:.2} MB/s",
            plan.records, c.records_per_s, c.mb_per_s
        );
        consumed.push(c);
    }
    // The input topics, one per size (`lines-N`), filled by the producer tool with lines of
    // the text; the largest is read back by the consumer tool: the rates sluice's job compares
    // with.
    let mut sizes: Vec<u64> = plan.lines.iter().flatten().copied().collect();
    sizes.sort_unstable();
    sizes.dedup();
    let (mut line_produce, mut line_consume) = (None, Vec::new());
    for &n in &sizes {
        let topic = format!("lines-{n}");
        broker.create_topic(&topic)?;
        let p = tools.produce(&topic, n, None, &format!("fill-{n}"))?;
        eprintln!(
            "  producer-perf-test {n} Hamlet lines into {topic}: {:.0} records/s, {:.2} MB/s",
            p.records_per_s, p.mb_per_s
        );
        line_produce = Some(p);
    }
    let largest = *sizes.last().context("no input topic")?;
    let line_produce = line_produce.context("no input topic")?;
    for r in 0..plan.runs {
        let c = tools.consume(&format!("lines-{largest}"), largest, &format!("lines{r}"))?;
        eprintln!(
            "  consumer-perf-test {largest} lines: {:.0} records/s, {:.2} MB/s",
            c.records_per_s, c.mb_per_s
        );
        line_consume.push(c);
    }

    // 2. kafka-wordcount's steady state, at least once and exactly once.
    let scratch = tempfile::Builder::new()
        .prefix("sluice-bench-kafka-")
        .tempdir()?;
    let mut cluster = start_cluster(
        sluice,
        plan.checkpoint_interval,
        &scratch.path().join("checkpoints"),
        &plan.set,
    )?;
    let broker_pid = broker.pid()?;
    let mut pairs: [Vec<WordcountPair>; 2] = [Vec::new(), Vec::new()];
    for r in 0..plan.runs {
        for (g, exactly_once) in [false, true].into_iter().enumerate() {
            let lines = plan.lines[g];
            let mut usage = [Usage {
                wall: 0.0,
                cpu: 0.0,
            }; 2];
            let mut broker_cpu = [0.0; 2];
            let mut words_per_line = f64::NAN;
            for (i, &n) in lines.iter().enumerate() {
                let output = format!("counts-{g}-{r}-{i}");
                broker.create_topic(&output)?;
                let input = format!("lines-{n}");
                let args = wordcount_args(&broker.bootstrap, &input, &output, exactly_once, true);
                let before = procs::cpu_seconds(broker_pid)?;
                let run = run_job(
                    &mut cluster,
                    "kafka-wordcount",
                    &args,
                    n,
                    Duration::from_secs(600),
                )?;
                broker_cpu[i] = procs::cpu_seconds(broker_pid)? - before;
                usage[i] = Usage {
                    wall: run.wall.as_secs_f64(),
                    cpu: run.tm_cpu_seconds,
                };
                words_per_line = run.sink_read_records as f64 / n as f64;
                eprintln!(
                    "  kafka-wordcount {}, {n} lines: {:.2} s, {:.2} TaskManager CPU s, {:.2} broker CPU s, {} records to the sink",
                    guarantee_name(exactly_once),
                    usage[i].wall,
                    usage[i].cpu,
                    broker_cpu[i],
                    run.sink_read_records
                );
            }
            let steady = Steady::of(lines, usage);
            // The broker's CPU per line between the two runs, as per line.
            let broker_per_line = (broker_cpu[1] - broker_cpu[0]) / (lines[1] - lines[0]) as f64;
            eprintln!(
                "  -> {}: {:.0} lines/s, {:.0} lines per TaskManager CPU second",
                guarantee_name(exactly_once),
                steady.rate,
                steady.per_cpu
            );
            pairs[g].push(WordcountPair {
                steady,
                words_per_line,
                broker_per_line,
            });
        }
    }
    drop(cluster);

    // 3. Latency with exactly-once output.
    let mut latencies = Vec::new();
    for &interval in &plan.intervals {
        let dir = scratch
            .path()
            .join(format!("checkpoints-latency-{interval}"));
        let mut cluster = start_cluster(sluice, interval, &dir, &plan.set)?;
        let l = latency_run(&mut cluster, &broker, interval, plan)?;
        eprintln!(
            "  latency, exactly once, checkpoints every {interval} s: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} records",
            ms(l.histogram.quantile(0.5)),
            ms(l.histogram.quantile(0.99)),
            ms(l.histogram.max()),
            l.histogram.count()
        );
        latencies.push(l);
    }
    drop(broker);

    // The report.
    println!();
    println!(
        "sluice-bench kafka: one broker (scripts/kafka.sh, Kafka 4.1, KRaft, {PARTITIONS} partitions per topic), 1-minute load {load:.2} at the start and {:.2} at the end, {} run(s), {:.0} s in all",
        procs::load_average().unwrap_or(f64::NAN),
        plan.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "Broker tools (their own clocks; MB = 2^20 bytes as they print it; the consumer's rates are its fetch.* columns, without the group join). Each runs as one JVM; CPU s is that process's, start-up included."
    );
    println!();
    println!("| tool | records | records/s | min–max | MB/s | CPU s |");
    println!("|---|---:|---:|---:|---:|---:|");
    let tool_row = |label: &str, n: u64, runs: &[ToolRun]| {
        let rate = Stat::by(runs, |t| t.records_per_s);
        println!(
            "| {label} | {n} | {:.0} | {} | {:.2} | {:.2} |",
            rate.median,
            rate.range(0),
            Stat::by(runs, |t| t.mb_per_s).median,
            Stat::by(runs, |t| t.cpu).median
        );
    };
    let size = plan.record_size;
    tool_row(
        &format!("producer-perf-test, {size} B records"),
        plan.records,
        &produced,
    );
    tool_row(
        &format!("consumer-perf-test, {size} B records"),
        plan.records,
        &consumed,
    );
    tool_row(
        "producer-perf-test, Hamlet lines (fills the largest input topic)",
        largest,
        &[line_produce],
    );
    tool_row(
        "consumer-perf-test, Hamlet lines (the largest input topic)",
        largest,
        &line_consume,
    );
    let consume_lines = Stat::by(&line_consume, |t| t.records_per_s).median;
    let produce_lines = line_produce.records_per_s;

    println!();
    println!(
        "kafka-wordcount --bounded on a standalone cluster (JobManager + 2 TaskManagers of one slot, parallelism {PARTITIONS}, checkpoints every {} s): steady state from the difference of a short and a long input (RUNNING→FINISHED by the JobManager; CPU of both TaskManagers and of the broker from /proc). A line is an input record; it becomes one output record per word (words/line). The ratios divide sluice's lines/s by the tools' lines/s above.",
        plan.checkpoint_interval
    );
    println!();
    println!(
        "| output | lines (short, long) | lines/s | min–max | lines per TM CPU s | min–max | broker CPU s per M lines | start-up s | words/line | output records/s | vs consumer-perf-test | vs producer-perf-test |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (g, exactly_once) in [false, true].into_iter().enumerate() {
        let runs = &pairs[g];
        let rate = Stat::by(runs, |p| p.steady.rate);
        let per_cpu = Stat::by(runs, |p| p.steady.per_cpu);
        let words = Stat::by(runs, |p| p.words_per_line).median;
        println!(
            "| {} | {}, {} | {:.0} | {} | {:.0} | {} | {:.1} | {:.2} | {:.2} | {:.0} | {:.3} | {:.3} |",
            guarantee_name(exactly_once),
            plan.lines[g][0],
            plan.lines[g][1],
            rate.median,
            rate.range(0),
            per_cpu.median,
            per_cpu.range(0),
            Stat::by(runs, |p| p.broker_per_line).median * 1e6,
            Stat::by(runs, |p| p.steady.startup_wall).median,
            words,
            rate.median * words,
            rate.median / consume_lines,
            rate.median / produce_lines
        );
    }

    println!();
    println!(
        "End-to-end latency, exactly once: {} records/s of 's<seq>t<ns>' lines produced into a {PARTITIONS}-partition topic by this process (ns = the wall clock at the send); kafka-wordcount counts each as a word of its own; a read_committed consumer here takes now - ns when its count becomes visible. The first {} s of records are not counted; every record is checked to arrive exactly once.",
        plan.rate, plan.warmup
    );
    println!();
    println!("| checkpoint interval | records counted | emitted /s | p50 ms | p99 ms | max ms |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for l in &latencies {
        let h = &l.histogram;
        println!(
            "| {} s | {} | {:.0} | {:.1} | {:.1} | {:.1} |",
            l.interval_s,
            h.count(),
            l.emitted_per_s,
            ms(h.quantile(0.5)),
            ms(h.quantile(0.99)),
            ms(h.max())
        );
    }
    Ok(())
}

fn guarantee_name(exactly_once: bool) -> &'static str {
    if exactly_once {
        "exactly once"
    } else {
        "at least once"
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The wall clock in nanoseconds since the Unix epoch.
fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A latency line: `s<seq>t<ns>`, a single word to the tokenizer.
pub fn stamp_line(seq: u64, ns: u64) -> String {
    format!("s{seq}t{ns}")
}

/// The sequence number and stamp of an output record `s<seq>t<ns> <count>`.
pub fn parse_stamp(value: &str) -> Option<(u64, u64)> {
    let word = value.split(' ').next()?;
    let (seq, ns) = word.strip_prefix('s')?.split_once('t')?;
    Some((seq.parse().ok()?, ns.parse().ok()?))
}

/// One latency measurement on `cluster` with checkpoints every `interval_s` seconds.
fn latency_run(
    cluster: &mut Cluster,
    broker: &Broker,
    interval_s: u64,
    plan: &Plan,
) -> Result<LatencyRun> {
    let (input, output) = (
        format!("stamps-{interval_s}"),
        format!("stamped-{interval_s}"),
    );
    broker.create_topic(&input)?;
    broker.create_topic(&output)?;
    // The reader first, positioned at the start of the empty output topic.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .set("group.id", format!("sluice-bench-latency-{interval_s}"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set("fetch.wait.max.ms", "10")
        .create()
        .context("latency consumer")?;
    // Assigned, not subscribed: no group join to wait for before the first counted record.
    let mut partitions = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        partitions.add_partition_offset(&output, p, Offset::Beginning)?;
    }
    consumer.assign(&partitions)?;
    let args = wordcount_args(&broker.bootstrap, &input, &output, true, false);
    let id = cluster.submit("kafka-wordcount", &args, PARTITIONS as u32)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.job(&id)?.state() != "RUNNING" {
        if Instant::now() > deadline {
            bail!("kafka-wordcount is not RUNNING 60 s after its submission");
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // The paced producer, on a thread of its own.
    let warmup = (plan.rate as f64 * plan.warmup).round() as u64;
    let total = warmup + (plan.rate as f64 * plan.seconds).round() as u64;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .set("linger.ms", "0")
        .create()
        .context("latency producer")?;
    let stop = Arc::new(AtomicBool::new(false));
    let rate = plan.rate;
    let producing = {
        let (stop, input) = (stop.clone(), input.clone());
        std::thread::spawn(move || -> Result<()> {
            let start = Instant::now();
            for seq in 0..total {
                let due = start + Duration::from_secs_f64(seq as f64 / rate as f64);
                while let Some(wait) = due.checked_duration_since(Instant::now()) {
                    producer.poll(wait.min(Duration::from_millis(1)));
                }
                if stop.load(Ordering::Relaxed) {
                    bail!("stopped");
                }
                let line = stamp_line(seq, now_nanos());
                let mut record = Some(BaseRecord::<(), String>::to(&input).payload(&line));
                while let Some(r) = record.take() {
                    if let Err((e, back)) = producer.send(r) {
                        producer.poll(Duration::from_millis(1));
                        if start.elapsed() > Duration::from_secs(3600) {
                            bail!("producing the latency input: {e}");
                        }
                        record = Some(back);
                    }
                }
                producer.poll(Duration::ZERO);
            }
            producer
                .flush(Duration::from_secs(30))
                .context("flush the latency input")?;
            Ok(())
        })
    };

    // Read until every record arrived, or give up well after the last should have.
    let mut histogram = LatencyHistogram::default();
    let mut seen = HashSet::new();
    let (mut duplicates, mut first, mut last) = (0u64, u64::MAX, 0u64);
    let produce_time = Duration::from_secs_f64(plan.warmup + plan.seconds);
    let deadline = Instant::now() + produce_time + Duration::from_secs(3 * interval_s + 30);
    let read = (|| -> Result<()> {
        while (seen.len() as u64) < total && Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    let now = now_nanos();
                    let value = std::str::from_utf8(m.payload().unwrap_or(&[])).unwrap_or("");
                    let (seq, ns) = parse_stamp(value)
                        .with_context(|| format!("an unexpected output record {value:?}"))?;
                    if !seen.insert(seq) {
                        duplicates += 1;
                    } else if seq >= warmup {
                        histogram.record(ns, now);
                        first = first.min(ns);
                        last = last.max(ns);
                    }
                }
                Some(Err(e)) => bail!("reading {output}: {e}"),
                None => {}
            }
        }
        Ok(())
    })();
    // The producer stops early if reading failed.
    stop.store(true, Ordering::Relaxed);
    let produced = producing
        .join()
        .map_err(|_| anyhow::anyhow!("producer panicked"))?;
    cluster.cancel(&id)?;
    read?;
    produced?;
    if seen.len() as u64 != total || duplicates > 0 {
        bail!(
            "latency, checkpoints every {interval_s} s: {} of {total} records became visible, {duplicates} twice",
            seen.len()
        );
    }
    let emitted_per_s = if last > first {
        (histogram.count() - 1) as f64 * 1e9 / (last - first) as f64
    } else {
        0.0
    };
    Ok(LatencyRun {
        interval_s,
        histogram,
        emitted_per_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_summary_is_parsed() {
        let out = "500 records sent, 99.9 records/sec (0.01 MB/sec), 3.0 ms avg latency, 9.0 ms max latency.\n\
                   1000000 records sent, 396196.5 records/sec (37.78 MB/sec), 567.0 ms avg latency, 800.0 ms max latency, 500 ms 50th, 700 ms 95th, 790 ms 99th, 799 ms 99.9th.\n";
        assert_eq!(parse_producer(out).unwrap(), (396196.5, 37.78));
        assert!(parse_producer("nothing").is_err());
    }

    #[test]
    fn consumer_columns_are_parsed() {
        let out = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n\
                   [main] INFO a log line, with, commas\n\
                   2026-12-02 04:50:01:000, 2026-12-02 04:50:03:000, 95.3674, 47.6837, 1000000, 500000.0000, 300, 1700, 56.0985, 588235.2941\n";
        assert_eq!(parse_consumer(out, "fetch.nMsg.sec").unwrap(), 588235.2941);
        assert_eq!(
            parse_consumer(out, "data.consumed.in.nMsg").unwrap(),
            1000000.0
        );
        assert!(parse_consumer(out, "nope").is_err());
        assert!(parse_consumer("start.time, x\n", "x").is_err());
    }

    #[test]
    fn stamps_survive_the_tokenizer_and_the_count() {
        let line = stamp_line(42, 1_764_000_000_123_456_789);
        assert_eq!(
            parse_stamp(&format!("{line} 1")),
            Some((42, 1_764_000_000_123_456_789))
        );
        assert_eq!(parse_stamp("hamlet 3"), None);
    }
}
