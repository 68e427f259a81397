//! `sluice-bench batch [--gib G] [--runs N] [--no-flink]`: bounded jobs over about G GiB (1 by
//! default) in BATCH and in STREAMING execution mode, on sluice and on Apache Flink 2.3.0.
//!
//! Every run is one process at parallelism 2, as in `sluice-bench flink`: `sluice run -t local
//! -p 2 ...` and a Flink MiniCluster (`bench/flink/`). The jobs:
//!
//! - `wordcount` over G GiB of text in two files, one per source subtask; the counts are
//!   discarded (the final ones in BATCH mode, every updated one in STREAMING mode);
//! - a keyed sum, `stream-sum --records N --keys 1000000`: N = G GiB of 16-byte records through
//!   a key_by exchange into a sum per key.
//!
//! Each run reports its wall time, the CPU seconds of the whole process (from `wait4`), its
//! peak resident memory and the peak bytes on disk in its spill directory, where BATCH mode's
//! blocking partitions go (sluice's `state.backend.rocksdb.localdir`, Flink's `io.tmp.dirs`).
//! Both sampled. The engines alternate which goes first. Start-up (about 0.1 s for sluice,
//! 2.5 s for Flink) is included, small beside these runs.
//!
//! Last, one sluice run shows what BATCH mode's stage-by-stage scheduling buys: `wordcount` at
//! parallelism 8 on a standalone cluster of one TaskManager with 2 slots. A streaming job of
//! parallelism 8 would wait for 8 slots there and fail. Nothing here asserts on time.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::cluster::Cluster;
use crate::flink::{self, Engine, FlinkJar};
use crate::{Stat, procs};

/// Distinct keys of the keyed sum.
const SUM_KEYS: u64 = 1_000_000;
/// Bytes of one keyed-sum record: a u64 key and a u64 count.
const SUM_RECORD_BYTES: u64 = 16;
/// How long one run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(3600);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    Wordcount,
    KeyedSum,
}

impl Job {
    fn label(self) -> &'static str {
        match self {
            Job::Wordcount => "wordcount",
            Job::KeyedSum => "keyed sum, 1 M keys",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Batch,
    Streaming,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Batch => "BATCH",
            Mode::Streaming => "STREAMING",
        }
    }
}

/// One run's figures.
#[derive(Clone, Copy, Debug)]
struct Measured {
    wall: f64,
    cpu: f64,
    /// Peak resident set, bytes.
    rss: u64,
    /// Peak bytes in the spill directory.
    spill: u64,
}

/// What the runs share.
struct Bench<'a> {
    sluice: &'a Path,
    flink: Option<FlinkJar>,
    scratch: tempfile::TempDir,
    /// The wordcount input: a directory of two text files.
    text: PathBuf,
    /// Words in the wordcount input.
    words: u64,
    /// Records of the keyed sum.
    sum_records: u64,
}

/// Writes `bytes` of the bundled text (whole copies, rounded up) into two files under `dir`;
/// the words they hold.
fn write_text(dir: &Path, bytes: u64) -> Result<u64> {
    std::fs::create_dir_all(dir)?;
    let text = flink::TEXT.as_bytes();
    let copies = (bytes / 2).div_ceil(text.len() as u64).max(1);
    for i in 0..2 {
        let path = dir.join(format!("part-{i}.txt"));
        let file = std::fs::File::create(&path).with_context(|| format!("{}", path.display()))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        for _ in 0..copies {
            out.write_all(text)?;
        }
        out.flush()?;
    }
    Ok(2 * copies * flink::count_words(flink::TEXT))
}

impl Bench<'_> {
    fn records(&self, job: Job) -> u64 {
        match job {
            Job::Wordcount => self.words,
            Job::KeyedSum => self.sum_records,
        }
    }

    /// The command of one run, spilling into `spill`.
    fn command(&self, engine: Engine, job: Job, mode: Mode, spill: &Path) -> Result<Command> {
        let text = self.text.display().to_string();
        let records = self.sum_records.to_string();
        let keys = SUM_KEYS.to_string();
        Ok(match engine {
            Engine::Sluice => {
                let mut cmd = Command::new(self.sluice);
                cmd.arg("-D").arg(format!(
                    "state.backend.rocksdb.localdir={}",
                    spill.display()
                ));
                match job {
                    Job::Wordcount => {
                        cmd.args(["run", "-t", "local", "-p", "2", "wordcount", "--input"])
                            .arg(&text)
                            .args(["--discard", "--execution-mode", mode.name()]);
                    }
                    Job::KeyedSum => {
                        cmd.arg("-D")
                            .arg(format!("execution.runtime-mode={}", mode.name()))
                            .args(["run", "-t", "local", "-p", "2", "stream-sum", "--rate", "0"])
                            .args(["--records", &records, "--keys", &keys]);
                    }
                }
                cmd
            }
            Engine::Flink => {
                let jar = self.flink.as_ref().context("Flink runs were turned off")?;
                let mut cmd = jar.jobs_command();
                match job {
                    Job::Wordcount => cmd.args(["wordcount", "--input", &text]),
                    Job::KeyedSum => {
                        cmd.args(["stream-sum", "--records", &records, "--keys", &keys])
                    }
                };
                cmd.args(["--parallelism", "2", "--mode", mode.name(), "--tmp-dir"])
                    .arg(spill);
                cmd
            }
        })
    }

    /// Runs one process to its end.
    fn measure(&self, engine: Engine, job: Job, mode: Mode, tag: &str) -> Result<Measured> {
        let spill = self.scratch.path().join(format!("spill-{tag}"));
        std::fs::create_dir_all(&spill)?;
        let mut cmd = self.command(engine, job, mode, &spill)?;
        // Away from any conf/ directory where the harness was started.
        cmd.current_dir(self.scratch.path());
        let log = self.scratch.path().join(format!("{tag}.log"));
        let started = Instant::now();
        let mut child = procs::Child::spawn_logged(engine.name(), cmd, &log)?;
        let rss = procs::peak_rss(vec![child.pid()]);
        let disk = procs::peak_dir_bytes(spill.clone());
        let cpu = child.wait_cpu(RUN_TIMEOUT);
        let wall = started.elapsed().as_secs_f64();
        let rss = rss.finish().values().copied().max().unwrap_or(0);
        let spill_bytes = disk.finish();
        let cpu = cpu.map_err(|e| {
            let tail = procs::log_tail(&log);
            e.context(format!(
                "{} {} in {} mode failed; the end of its output:\n{tail}",
                engine.name(),
                job.label(),
                mode.name()
            ))
        })?;
        let _ = std::fs::remove_dir_all(&spill);
        let m = Measured {
            wall,
            cpu,
            rss,
            spill: spill_bytes,
        };
        eprintln!(
            "  {} {} {}: {:.1} s, {:.1} CPU s, {:.2} M records per CPU s, peak RSS {} MiB, peak spill {} MiB",
            engine.name(),
            job.label(),
            mode.name(),
            m.wall,
            m.cpu,
            self.records(job) as f64 / m.cpu / 1e6,
            m.rss >> 20,
            m.spill >> 20
        );
        Ok(m)
    }

    /// `wordcount` in BATCH mode at parallelism 8 on one TaskManager of 2 slots: the job's
    /// time, the TaskManager's CPU, its peak memory and spill.
    fn narrow_cluster(&self) -> Result<Measured> {
        let spill = self.scratch.path().join("spill-cluster");
        std::fs::create_dir_all(&spill)?;
        let extra = format!("state.backend.rocksdb.localdir: {}\n", spill.display());
        let mut cluster = Cluster::start_with_slots(self.sluice, 1, 2, &extra)?;
        let tm = cluster.taskmanager_pids()[0];
        let rss = procs::peak_rss(vec![tm]);
        let disk = procs::peak_dir_bytes(spill.clone());
        let cpu_before = procs::cpu_seconds(tm)?;
        let args = vec![
            "--input".to_string(),
            self.text.display().to_string(),
            "--discard".into(),
        ];
        let id = cluster.submit("wordcount", &args, 8)?;
        let job = cluster.wait_finished(&id, RUN_TIMEOUT)?;
        let cpu = procs::cpu_seconds(tm)? - cpu_before;
        let m = Measured {
            wall: job.running_to_finished()?.as_secs_f64(),
            cpu,
            rss: rss.finish().values().copied().max().unwrap_or(0),
            spill: disk.finish(),
        };
        eprintln!(
            "  sluice wordcount BATCH at -p 8 on 2 slots: {:.1} s, {:.1} TaskManager CPU s, peak spill {} MiB",
            m.wall,
            m.cpu,
            m.spill >> 20
        );
        Ok(m)
    }
}

/// `sluice-bench batch`.
pub fn run(sluice: &Path, gib: f64, runs: usize, with_flink: bool) -> Result<()> {
    let sluice = std::fs::canonicalize(sluice).unwrap_or_else(|_| sluice.to_path_buf());
    let flink = if with_flink {
        Some(flink::build_jar(&flink::project_dir())?)
    } else {
        None
    };
    let bytes = (gib * f64::from(1u32 << 30)) as u64;
    let scratch = tempfile::Builder::new()
        .prefix("sluice-bench-batch-")
        .tempdir()?;
    let text = scratch.path().join("text");
    let words = write_text(&text, bytes)?;
    let bench = Bench {
        sluice: &sluice,
        flink,
        scratch,
        text,
        words,
        sum_records: (bytes / SUM_RECORD_BYTES).max(1),
    };
    let load = procs::load_average().unwrap_or(f64::NAN);
    let started = Instant::now();
    eprintln!(
        "sluice-bench batch: {gib} GiB, {runs} run(s), 1-minute load {load:.2}, sluice at {}",
        sluice.display()
    );
    let engines: &[Engine] = if with_flink {
        &[Engine::Sluice, Engine::Flink]
    } else {
        &[Engine::Sluice]
    };
    let cases: Vec<(Job, Mode)> = [Job::Wordcount, Job::KeyedSum]
        .into_iter()
        .flat_map(|j| [(j, Mode::Batch), (j, Mode::Streaming)])
        .collect();
    // results[case][engine]: the runs.
    let mut results = vec![vec![Vec::new(); engines.len()]; cases.len()];
    for run in 1..=runs {
        for (c, &(job, mode)) in cases.iter().enumerate() {
            let mut order: Vec<usize> = (0..engines.len()).collect();
            if (run + c) % 2 == 0 {
                order.reverse();
            }
            for e in order {
                let engine = engines[e];
                let tag = format!(
                    "{}-{job:?}-{}-{run}",
                    engine.name().replace(' ', "-"),
                    mode.name()
                );
                results[c][e].push(bench.measure(engine, job, mode, &tag)?);
            }
        }
    }
    let narrow = (1..=runs)
        .map(|_| bench.narrow_cluster())
        .collect::<Result<Vec<_>>>()?;

    println!();
    println!(
        "sluice-bench batch: {:.2} GiB of text ({} words) and {} keyed-sum records, 1-minute load {load:.2} at the start and {:.2} at the end, {runs} run(s), {:.0} s in all",
        bytes as f64 / f64::from(1u32 << 30),
        bench.words,
        bench.sum_records,
        procs::load_average().unwrap_or(f64::NAN),
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "One process per run at parallelism 2 (sluice run -t local; a Flink MiniCluster), start-up included. CPU: user + system of the process. Peak RSS and spill (bytes on disk in the spill directory) sampled every 50 ms. Medians over the runs."
    );
    println!();
    println!(
        "| job | engine | mode | wall s | CPU s | M records per CPU s | peak RSS MiB | peak spill MiB |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    let median = |runs: &[Measured], f: fn(&Measured) -> f64| Stat::by(runs, f).median;
    for (c, &(job, mode)) in cases.iter().enumerate() {
        for (e, engine) in engines.iter().enumerate() {
            let r = &results[c][e];
            println!(
                "| {} | {} | {} | {:.1} | {:.1} | {:.2} | {:.0} | {:.0} |",
                job.label(),
                engine.name(),
                mode.name(),
                median(r, |m| m.wall),
                median(r, |m| m.cpu),
                bench.records(job) as f64 / median(r, |m| m.cpu) / 1e6,
                median(r, |m| m.rss as f64) / f64::from(1u32 << 20),
                median(r, |m| m.spill as f64) / f64::from(1u32 << 20),
            );
        }
    }
    println!();
    println!("| job | engine | STREAMING CPU / BATCH CPU |");
    println!("|---|---|---:|");
    for job in [Job::Wordcount, Job::KeyedSum] {
        let at = |mode| cases.iter().position(|&c| c == (job, mode)).unwrap_or(0);
        for (e, engine) in engines.iter().enumerate() {
            let cpu = |mode| median(&results[at(mode)][e], |m| m.cpu);
            println!(
                "| {} | {} | {:.2}x |",
                job.label(),
                engine.name(),
                cpu(Mode::Streaming) / cpu(Mode::Batch)
            );
        }
    }
    if with_flink {
        println!();
        println!("| job | mode | Flink CPU / sluice CPU | Flink wall / sluice wall |");
        println!("|---|---|---:|---:|");
        for (c, &(job, mode)) in cases.iter().enumerate() {
            let ratio =
                |f: fn(&Measured) -> f64| median(&results[c][1], f) / median(&results[c][0], f);
            println!(
                "| {} | {} | {:.2}x | {:.2}x |",
                job.label(),
                mode.name(),
                ratio(|m| m.cpu),
                ratio(|m| m.wall)
            );
        }
    }
    println!();
    println!(
        "sluice wordcount in BATCH mode at parallelism 8 on a standalone cluster of one TaskManager with 2 slots (a streaming job would need 8): {:.1} s from RUNNING to FINISHED, {:.1} TaskManager CPU s, peak TaskManager RSS {:.0} MiB, peak spill {:.0} MiB.",
        median(&narrow, |m| m.wall),
        median(&narrow, |m| m.cpu),
        median(&narrow, |m| m.rss as f64) / f64::from(1u32 << 20),
        median(&narrow, |m| m.spill as f64) / f64::from(1u32 << 20),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_written_in_whole_copies_over_two_files() {
        let dir = tempfile::tempdir().unwrap();
        let words = write_text(dir.path(), 3 * flink::TEXT.len() as u64).unwrap();
        let size = |i| {
            std::fs::metadata(dir.path().join(format!("part-{i}.txt")))
                .unwrap()
                .len()
        };
        // 1.5 copies per file, rounded up to 2.
        assert_eq!(size(0), 2 * flink::TEXT.len() as u64);
        assert_eq!(size(1), size(0));
        assert_eq!(words, 4 * flink::count_words(flink::TEXT));
    }
}
