//! `sluice-bench metrics [--job stream-sum|shuffle] [--quick]`: what the metric system costs a
//! running job.
//!
//! `stream-sum --rate 0 --keys 1000` (or `shuffle`: the same key_by into a sink that discards)
//! at parallelism 2 on two TaskManager processes, on two
//! clusters side by side, interleaved run by run (which goes first alternating) so that changes
//! of the machine's load hit both alike: one without a metric reporter, one with the Prometheus reporter on every process,
//! scraped every second (each TaskManager's and the JobManager's `/metrics`) and with the REST
//! metric endpoints read every second, as a Prometheus server and a dashboard would. The task
//! counters themselves are always kept (they feed the REST API's vertex I/O fields), so this
//! measures what serving metrics adds. Printed: records/s and the ratio. Nothing here asserts on
//! time.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cluster::Cluster;
use crate::{CLUSTER_CONFIG, Stat};

pub fn run(
    bin: &Path,
    job: &str,
    quick: bool,
    runs: Option<usize>,
    size: Option<u64>,
) -> Result<()> {
    let (repetitions, records) = if quick {
        (1, 4_000_000u64)
    } else {
        (4, 40_000_000)
    };
    let (repetitions, records) = (runs.unwrap_or(repetitions), size.unwrap_or(records));
    let first = free_port()?;
    let range = format!("{first}-{}", first.saturating_add(20));
    let labels = [
        "no reporter",
        "Prometheus reporter scraped every 1 s + REST metrics every 1 s",
    ];
    let mut clusters = [
        Cluster::start(bin, 2, CLUSTER_CONFIG)?,
        Cluster::start(
            bin,
            2,
            &format!(
                "{CLUSTER_CONFIG}metrics.reporter.prom.factory.class: org.apache.flink.metrics.prometheus.PrometheusReporterFactory\nmetrics.reporter.prom.port: {range}\n"
            ),
        )?,
    ];
    let ports = reporter_ports(&clusters[1], first)?;
    let args = match job {
        "shuffle" => vec!["--records".to_string(), records.to_string()],
        _ => crate::stream_sum_args(records),
    };
    let mut rates = vec![Vec::new(); 2];
    // The TaskManagers' CPU per record: steadier than records/s when other load shares the
    // cores.
    let mut cpu_ns = vec![Vec::new(); 2];
    for rep in 0..repetitions {
        // Which configuration goes first alternates, so running second is no one's handicap.
        let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let cluster = &mut clusters[i];
            let cpu_before = taskmanagers_cpu(cluster)?;
            let id = cluster.submit(job, &args, 2)?;
            let scraper = (i == 1).then(|| Scraper::start(ports.clone(), cluster.rest_port(), &id));
            let done = cluster.wait_finished(&id, Duration::from_secs(600))?;
            let scrapes = scraper.map(Scraper::stop).transpose()?;
            let cpu = taskmanagers_cpu(cluster)? - cpu_before;
            let wall = done.running_to_finished()?;
            let rate = records as f64 / wall.as_secs_f64() / 1e6;
            let ns = cpu * 1e9 / records as f64;
            eprintln!(
                "  {}: {:.2} s, {rate:.2} M records/s, {ns:.1} ns TaskManager CPU per record{}",
                labels[i],
                wall.as_secs_f64(),
                scrapes.map_or(String::new(), |n| format!(", {n} scrapes"))
            );
            rates[i].push(rate);
            cpu_ns[i].push(ns);
        }
    }
    println!(
        "\n### Metrics overhead: {job}, parallelism 2, 2 TaskManagers, {records} records, {repetitions} run(s) each\n"
    );
    println!(
        "| configuration | M records/s (median) | range | vs no reporter | TaskManager CPU ns per record (median) | range | vs no reporter |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let base = Stat::of(&rates[0]).median;
    let base_ns = Stat::of(&cpu_ns[0]).median;
    for (i, label) in labels.iter().enumerate() {
        let (s, c) = (Stat::of(&rates[i]), Stat::of(&cpu_ns[i]));
        println!(
            "| {label} | {:.2} | {} | {:.3}x | {:.1} | {} | {:.3}x |",
            s.median,
            s.range(2),
            s.median / base,
            c.median,
            c.range(1),
            c.median / base_ns
        );
    }
    Ok(())
}

/// CPU seconds (user + system) of the cluster's TaskManager processes so far.
pub(crate) fn taskmanagers_cpu(cluster: &Cluster) -> Result<f64> {
    cluster
        .taskmanager_pids()
        .into_iter()
        .map(crate::procs::cpu_seconds)
        .sum()
}

/// `sluice-bench metrics-scrape`: the time and size of one TaskManager's `/metrics` while it
/// runs `jobs` jobs of 8 vertices each (`stream-sum --stages 6` at parallelism 1, 1000
/// records/s, all in one 4-slot TaskManager): `scrapes` scrapes one after the other, the
/// median and the slowest time, the bytes and the sample lines of one scrape.
pub fn scrape_size(bin: &Path, jobs: usize, scrapes: usize) -> Result<()> {
    let first = free_port()?;
    let range = format!("{first}-{}", first.saturating_add(20));
    let cluster = Cluster::start_with_slots(
        bin,
        1,
        jobs.max(1) as u32,
        &format!(
            "{CLUSTER_CONFIG}metrics.reporter.prom.factory.class: org.apache.flink.metrics.prometheus.PrometheusReporterFactory\nmetrics.reporter.prom.port: {range}\n"
        ),
    )?;
    let tms = cluster.get("/taskmanagers")?;
    let port = tms["taskmanagers"][0]["prometheusReporterPort"]
        .as_u64()
        .with_context(|| format!("no reporter port in {tms}"))? as u16;
    let args: Vec<String> = ["--rate", "1000", "--stages", "6"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut ids = Vec::new();
    for _ in 0..jobs {
        ids.push(cluster.submit("stream-sum", &args, 1)?);
    }
    let mut subtasks = 0;
    for id in &ids {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let job = cluster.get(&format!("/jobs/{id}"))?;
            let vertices = job["vertices"].as_array().cloned().unwrap_or_default();
            if vertices.len() != 8 {
                bail!(
                    "stream-sum --stages 6 has {} vertices, not 8",
                    vertices.len()
                );
            }
            if vertices.iter().all(|v| v["status"] == "RUNNING") {
                subtasks += vertices.len();
                break;
            }
            if std::time::Instant::now() > deadline {
                bail!("job {id} did not run within 60 s: {job}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // Every task has reported and every meter has a sample before the measurement.
    std::thread::sleep(Duration::from_secs(3));
    let mut times = Vec::with_capacity(scrapes);
    let mut text = String::new();
    for _ in 0..scrapes.max(1) {
        let started = std::time::Instant::now();
        text = scrape(port)?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let body = text
        .split_once("\r\n\r\n")
        .map_or(text.as_str(), |(_, b)| b);
    let samples = body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    let task_samples = body
        .lines()
        .filter(|l| l.starts_with("flink_taskmanager_job_task_"))
        .count();
    let s = Stat::of(&times);
    let slowest = times.iter().copied().fold(0.0, f64::max);
    println!(
        "\n### One TaskManager's /metrics: {jobs} jobs of 8 vertices ({subtasks} subtasks), {} scrapes\n",
        times.len()
    );
    println!("| median | slowest | bytes | samples | task samples |");
    println!("|---:|---:|---:|---:|---:|");
    println!(
        "| {:.2} ms | {slowest:.2} ms | {} | {samples} | {task_samples} |",
        s.median,
        body.len()
    );
    for id in &ids {
        cluster.cancel(id)?;
    }
    Ok(())
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The reporter ports of the cluster's TaskManagers (from REST) and of its JobManager (the port
/// of the range from `first` that answers with JobManager metrics).
fn reporter_ports(cluster: &Cluster, first: u16) -> Result<Vec<u16>> {
    let tms = cluster.get("/taskmanagers")?;
    let mut ports: Vec<u16> = tms["taskmanagers"]
        .as_array()
        .context("no taskmanagers")?
        .iter()
        .filter_map(|tm| tm["prometheusReporterPort"].as_u64().map(|p| p as u16))
        .collect();
    if ports.len() != 2 {
        bail!("expected two TaskManager reporter ports, REST says {tms}");
    }
    let jm = (first..=first.saturating_add(20))
        .filter(|p| !ports.contains(p))
        .find(|p| {
            scrape(*p).is_ok_and(|t| t.contains("flink_jobmanager_numRegisteredTaskManagers"))
        })
        .context("the JobManager's reporter port")?;
    ports.push(jm);
    Ok(ports)
}

/// One plain HTTP/1.0 GET of `/metrics` (the harness's scraper needs no client library).
fn scrape(port: u16) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    if !text.starts_with("HTTP/1.") || !text.contains(" 200 ") {
        bail!("port {port}: {}", text.lines().next().unwrap_or_default());
    }
    Ok(text)
}

/// Reads every reporter and the REST metric endpoints of the job once a second, on its own
/// thread, until stopped.
struct Scraper {
    stop: Arc<AtomicBool>,
    scrapes: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Result<()>>,
}

impl Scraper {
    fn start(ports: Vec<u16>, rest_port: u16, job: &str) -> Scraper {
        let (stop, scrapes) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (stopped, count) = (stop.clone(), scrapes.clone());
        let paths = [
            "/jobmanager/metrics?get=numRegisteredTaskManagers,taskSlotsAvailable".to_string(),
            format!("/jobs/{job}/metrics?get=uptime,numRestarts"),
        ];
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                for &p in &ports {
                    scrape(p)?;
                    count.fetch_add(1, Ordering::Relaxed);
                }
                for path in &paths {
                    rest_get(rest_port, path)?;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            Ok(())
        });
        Scraper {
            stop,
            scrapes,
            thread,
        }
    }

    /// Stops and returns how many scrapes were made.
    fn stop(self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the scraper panicked"))??;
        Ok(self.scrapes.load(Ordering::Relaxed))
    }
}

fn rest_get(port: u16, path: &str) -> Result<()> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    if !text.contains(" 200 ") {
        bail!("{path}: {}", text.lines().next().unwrap_or_default());
    }
    Ok(())
}
