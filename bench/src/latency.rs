//! `sluice-bench latency`: the end-to-end latency of a record, from the wall-clock time its
//! source emitted it to the time the sink took it, on sluice and on Apache Flink 2.3.0, at
//! paced rates and with the buffer timeout at its default (100 ms) and at 0.
//!
//! The job is stream-sum's shape at parallelism 2: a paced generator (key, stamp, index, 1) →
//! key_by → a running sum per key carrying the newest stamp → a sink counting `now - stamp` in a
//! log-linear histogram (sluice's bundled `latency` program; `FlinkJobs latency` in
//! `bench/flink/`, the same buckets). Records the first `--warmup-ms` of the schedule hold are
//! not counted, on both engines alike. Both stamp with the wall clock (`CLOCK_REALTIME`), the
//! one clock two processes of a machine share. Each engine runs as one child process, as in
//! `sluice-bench flink`: `sluice run -t local -p 2 latency ...` and a Flink MiniCluster. The
//! harness merges the sink subtasks' histograms, checks that every record arrived, and takes
//! the process's CPU over the window in which the counted records were emitted from a trace of
//! `/proc/PID/stat` sampled every 50 ms.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sluice::examples::{LatencyHistogram, warmup_records};

use crate::flink::{FlinkJar, build_jar, project_dir};
use crate::procs;

/// One engine, sluice possibly with a setting of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Engine {
    Sluice(Option<String>),
    Flink,
}

impl Engine {
    fn name(&self) -> String {
        match self {
            Engine::Sluice(None) => "sluice".into(),
            Engine::Sluice(Some(setting)) => format!("sluice, {setting}"),
            Engine::Flink => "Flink 2.3.0".into(),
        }
    }
}

/// What one run measured.
struct Measured {
    engine: Engine,
    rate: u64,
    timeout_ms: u64,
    histogram: LatencyHistogram,
    /// CPU seconds of the process while the counted records were emitted, per wall second.
    cores: f64,
    /// CPU seconds of the whole process, start-up and shutdown included.
    cpu: f64,
    wall: f64,
}

/// The sizes of one invocation.
pub struct Plan {
    pub rates: Vec<u64>,
    pub timeouts_ms: Vec<u64>,
    /// Seconds of counted records per run.
    pub seconds: f64,
    pub warmup_ms: u64,
    pub runs: usize,
    /// sluice settings (`KEY=VALUE`), each an extra row of sluice.
    pub variants: Vec<String>,
}

/// The CPU seconds `trace` (time in ns since the epoch, CPU seconds; in time order) shows
/// between `from` and `to`, interpolating linearly between samples; `None` when the trace does
/// not reach over both ends.
pub fn cpu_between(trace: &[(u64, f64)], from: u64, to: u64) -> Option<f64> {
    let at = |t: u64| -> Option<f64> {
        let i = trace.iter().position(|&(s, _)| s >= t)?;
        let (t1, c1) = trace[i];
        if t1 == t {
            return Some(c1);
        }
        let (t0, c0) = *trace.get(i.checked_sub(1)?)?;
        Some(c0 + (c1 - c0) * (t - t0) as f64 / (t1 - t0) as f64)
    };
    Some(at(to)? - at(from)?)
}

struct Bench<'a> {
    sluice: &'a Path,
    flink: FlinkJar,
    scratch: tempfile::TempDir,
}

impl Bench<'_> {
    fn run(
        &self,
        engine: &Engine,
        rate: u64,
        timeout_ms: u64,
        plan: &Plan,
        tag: &str,
    ) -> Result<Measured> {
        let warmup = warmup_records(rate, plan.warmup_ms);
        let records = warmup + (rate as f64 * plan.seconds).round() as u64;
        let out = self.scratch.path().join(format!("out-{tag}"));
        let args = [
            "latency".to_string(),
            "--rate".into(),
            rate.to_string(),
            "--records".into(),
            records.to_string(),
            "--keys".into(),
            "1000".into(),
            "--warmup-ms".into(),
            plan.warmup_ms.to_string(),
            "--output".into(),
            out.display().to_string(),
        ];
        let mut cmd = match engine {
            Engine::Sluice(setting) => {
                let mut cmd = Command::new(self.sluice);
                if let Some(setting) = setting {
                    cmd.args(["-D", setting]);
                }
                cmd.args(["-D", &format!("execution.buffer-timeout={timeout_ms} ms")])
                    .args(["run", "-t", "local", "-p", "2"])
                    .args(&args);
                cmd
            }
            Engine::Flink => {
                let mut cmd = self.flink.jobs_command();
                cmd.args(&args)
                    .args(["--parallelism", "2", "--buffer-timeout-ms"])
                    .arg(timeout_ms.to_string());
                cmd
            }
        };
        let log = self.scratch.path().join(format!("{tag}.log"));
        cmd.current_dir(self.scratch.path());
        let started = Instant::now();
        let mut child = procs::Child::spawn_logged(&engine.name(), cmd, &log)?;
        let trace = procs::cpu_trace(child.pid());
        let cpu = child.wait_cpu(Duration::from_secs(600));
        let wall = started.elapsed().as_secs_f64();
        let mut trace = trace.finish();
        // The process is gone: its last point is the exit with the total `wait4` reports (the
        // sampler cannot read a reaped process, and the last records may follow its last
        // sample by up to 50 ms).
        if let Ok(total) = &cpu {
            trace.push((now_nanos(), *total));
        }
        let cpu = cpu.map_err(|e| {
            let tail = procs::log_tail(&log);
            e.context(format!(
                "{} latency at {rate}/s failed; the end of its output:\n{tail}",
                engine.name()
            ))
        })?;
        let mut histogram = LatencyHistogram::default();
        let mut skipped = 0;
        let mut files = 0;
        for entry in std::fs::read_dir(&out).with_context(|| format!("read {}", out.display()))? {
            let path = entry?.path();
            let text = std::fs::read_to_string(&path)?;
            let doc: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("JSON in {}", path.display()))?;
            let h = LatencyHistogram::from_json(&doc)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            histogram.merge(&h);
            skipped += doc["skipped"].as_u64().unwrap_or(0);
            files += 1;
        }
        if files != 2 || histogram.count() + skipped != records || skipped != warmup {
            bail!(
                "{} latency at {rate}/s: {files} sink histograms with {} counted and {skipped} skipped records, expected 2 with {} and {warmup}",
                engine.name(),
                histogram.count(),
                records - warmup
            );
        }
        let (first, last) = histogram.stamps();
        let cores = cpu_between(&trace, first, last)
            .filter(|_| last > first)
            .map_or(f64::NAN, |c| c / ((last - first) as f64 / 1e9));
        let m = Measured {
            engine: engine.clone(),
            rate,
            timeout_ms,
            histogram,
            cores,
            cpu,
            wall,
        };
        eprintln!(
            "  {} at {rate}/s, buffer timeout {timeout_ms} ms: p50 {} p99 {} p99.9 {} max {}, emitted at {:.0}/s, {:.2} cores, {:.2} CPU s in {:.2} s",
            engine.name(),
            millis(m.histogram.quantile(0.5)),
            millis(m.histogram.quantile(0.99)),
            millis(m.histogram.quantile(0.999)),
            millis(m.histogram.max()),
            m.histogram.emission_rate(),
            cores,
            cpu,
            wall
        );
        std::fs::remove_dir_all(&out).ok();
        Ok(m)
    }
}

/// The wall clock in nanoseconds since the Unix epoch, as the jobs stamp records.
fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Nanoseconds as milliseconds, with three decimals.
fn millis(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// `sluice-bench latency`: every rate and timeout on both engines, `runs` times, and the table.
pub fn run(sluice: &Path, plan: &Plan) -> Result<()> {
    let flink = build_jar(&project_dir())?;
    let sluice = std::fs::canonicalize(sluice).unwrap_or_else(|_| sluice.to_path_buf());
    let bench = Bench {
        sluice: &sluice,
        flink,
        scratch: tempfile::Builder::new()
            .prefix("sluice-bench-latency-")
            .tempdir()?,
    };
    let load = procs::load_average().unwrap_or(f64::NAN);
    let started = Instant::now();
    eprintln!(
        "sluice-bench latency: rates {:?}/s, buffer timeouts {:?} ms, {} s counted after {} ms of warm-up, {} run(s); 1-minute load {load:.2}; sluice at {}",
        plan.rates,
        plan.timeouts_ms,
        plan.seconds,
        plan.warmup_ms,
        plan.runs,
        sluice.display()
    );
    let mut engines = vec![Engine::Sluice(None), Engine::Flink];
    engines.extend(
        plan.variants
            .iter()
            .map(|v| Engine::Sluice(Some(v.clone()))),
    );
    let mut results = Vec::new();
    let mut k = 0;
    for run in 1..=plan.runs {
        for &rate in &plan.rates {
            for &timeout in &plan.timeouts_ms {
                // Alternate which engine goes first.
                let mut order = engines.clone();
                if k % 2 == 1 {
                    order.reverse();
                }
                k += 1;
                for (i, engine) in order.iter().enumerate() {
                    let tag = format!("{i}-{rate}-{timeout}-{run}");
                    results.push(bench.run(engine, rate, timeout, plan, &tag)?);
                }
            }
        }
    }

    println!();
    println!(
        "sluice-bench latency: 1-minute load {load:.2} at the start and {:.2} at the end, {} run(s), {:.0} s in all",
        procs::load_average().unwrap_or(f64::NAN),
        plan.runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "Parallelism 2, one process per run (sluice run -t local; a Flink MiniCluster); paced source -> key_by -> running sum per key -> sink; {} s of records counted after {} ms of warm-up. Latency = sink's wall clock - the source's stamp at emission, in ms (buckets of 1/128 of their magnitude). Cores = the process's CPU seconds per second while the counted records were emitted; CPU s = the whole process, start-up included.",
        plan.seconds, plan.warmup_ms
    );
    println!();
    println!(
        "| engine | rate /s | buffer timeout | emitted /s | p50 ms | p99 ms | p99.9 ms | max ms | cores | CPU s | wall s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &rate in &plan.rates {
        for &timeout in &plan.timeouts_ms {
            for engine in &engines {
                for m in results
                    .iter()
                    .filter(|m| m.engine == *engine && m.rate == rate && m.timeout_ms == timeout)
                {
                    let h = &m.histogram;
                    println!(
                        "| {} | {} | {} ms | {:.0} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                        engine.name(),
                        rate,
                        timeout,
                        h.emission_rate(),
                        millis(h.quantile(0.5)),
                        millis(h.quantile(0.99)),
                        millis(h.quantile(0.999)),
                        millis(h.max()),
                        m.cores,
                        m.cpu,
                        m.wall
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_between_interpolates_within_the_trace() {
        let trace = [(1_000, 1.0), (2_000, 2.0), (4_000, 2.5)];
        assert_eq!(cpu_between(&trace, 1_000, 2_000), Some(1.0));
        assert_eq!(cpu_between(&trace, 1_500, 3_000), Some(0.75));
        assert_eq!(cpu_between(&trace, 500, 2_000), None);
        assert_eq!(cpu_between(&trace, 1_000, 5_000), None);
    }
}
