//! `sluice-bench flink [--runs N] [--jobs ...] [--quick]`: sluice beside Apache Flink 2.3.0 on
//! the same jobs, the same machine and in the same minutes.
//!
//! Each engine runs each job as one child process with an embedded cluster at parallelism 2:
//! `sluice run -t local -p 2 JOB ...` and `java ... dev.sluice.bench.FlinkJobs JOB ...` (a
//! MiniCluster; the jobs are in `bench/flink/`, built here with Maven when the jar is missing or
//! older than its sources). Start-up is taken out by running every job twice, with a short and
//! a long input: the difference in records over the difference in wall time is the steady
//! records/s, over the difference in CPU time (user + system of the whole process, from
//! `wait4`) the records per CPU second. What remains of the short run is the start-up, also
//! printed. The runs alternate between the engines, so a change of the machine's load falls on
//! both alike. Nothing here asserts on time: it prints numbers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};

use crate::{Stat, procs};

/// The Maven project of the Flink jobs.
pub(crate) fn project_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("flink")
}

/// The text the wordcount inputs repeat: sluice's bundled WordCount text.
pub(crate) const TEXT: &str = include_str!("../../engine/src/examples/hamlet.txt");

/// What a Flink job needs on its command line besides `java`.
pub(crate) const JAVA_OPTIONS: &[&str] = &[
    // Flink's serializers and its RocksDB and network code reach into the JDK's internals,
    // which Java 17 closes by default (flink-dist's config.yaml opens the same ones).
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
];

/// The jobs compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Job {
    /// `stream-sum --rate 0 --keys 1000`: a generated sequence mapped to (i % 1000, 1), key_by,
    /// a running sum per key, discarded; heap state, no checkpoints.
    StreamSum,
    /// The same on RocksDB with incremental checkpoints every second.
    StreamSumRocksdb,
    /// `wordcount` in BATCH mode over two text files (a directory), one per source subtask;
    /// its records are the words.
    Wordcount,
}

impl Job {
    fn label(self) -> &'static str {
        match self {
            Job::StreamSum => "stream-sum, heap",
            Job::StreamSumRocksdb => "stream-sum, RocksDB, 1 s incremental checkpoints",
            Job::Wordcount => "wordcount (batch), 2 files",
        }
    }

    /// The short and the long run's size: records for stream-sum, copies of the text per input
    /// file for wordcount.
    fn sizes(self, quick: bool) -> [u64; 2] {
        match (self, quick) {
            (Job::StreamSum, false) => [10_000_000, 110_000_000],
            (Job::StreamSum, true) => [1_000_000, 5_000_000],
            (Job::StreamSumRocksdb, false) => [2_000_000, 17_000_000],
            (Job::StreamSumRocksdb, true) => [200_000, 1_200_000],
            // About 4 MB and 58 MB per file.
            (Job::Wordcount, false) => [2_700, 38_000],
            (Job::Wordcount, true) => [300, 1_500],
        }
    }
}

/// The two engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Sluice,
    Flink,
}

impl Engine {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Engine::Sluice => "sluice",
            Engine::Flink => "Flink 2.3.0",
        }
    }
}

/// The built Flink jobs: the jar and the classpath of its dependencies.
pub(crate) struct FlinkJar {
    jar: PathBuf,
    classpath: String,
}

impl FlinkJar {
    pub(crate) fn classpath(&self) -> String {
        format!("{}:{}", self.jar.display(), self.classpath)
    }

    /// `java ... dev.sluice.bench.FlinkJobs`: the Flink side of a run, to add the job's
    /// arguments to.
    pub(crate) fn jobs_command(&self) -> Command {
        let mut cmd = Command::new(java());
        cmd.args(JAVA_OPTIONS)
            .arg("-cp")
            .arg(self.classpath())
            .arg("dev.sluice.bench.FlinkJobs");
        cmd
    }
}

/// The newest modification time of `path` and everything under it.
pub(crate) fn newest(path: &Path) -> Result<SystemTime> {
    let meta = std::fs::metadata(path).with_context(|| format!("stat {}", path.display()))?;
    let mut t = meta.modified()?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            t = t.max(newest(&entry?.path())?);
        }
    }
    Ok(t)
}

/// Builds the Flink jobs with Maven unless the jar is newer than the POM and the sources:
/// offline first (`mvn -o`, enough once the local repository holds Flink), online otherwise.
pub(crate) fn build_jar(dir: &Path) -> Result<FlinkJar> {
    let jar = dir.join("target/sluice-bench-flink-0.1.0.jar");
    let classpath = dir.join("target/classpath.txt");
    let sources = newest(&dir.join("pom.xml"))?.max(newest(&dir.join("src"))?);
    let fresh = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok() > Some(sources);
    if !(fresh(&jar) && fresh(&classpath)) {
        let mvn = |offline: bool| -> Result<bool> {
            let mut cmd = Command::new("mvn");
            cmd.args(["-q", "-B"]);
            if offline {
                cmd.arg("-o");
            }
            eprintln!(
                "building the Flink jobs (mvn{} package in {})...",
                if offline { " -o" } else { "" },
                dir.display()
            );
            let status = cmd
                .arg("package")
                .current_dir(dir)
                .status()
                .context("run mvn (Maven 3 and a JDK 17 are needed)")?;
            Ok(status.success())
        };
        if !mvn(true)? && !mvn(false)? {
            bail!("the Maven build of {} failed", dir.display());
        }
    }
    Ok(FlinkJar {
        classpath: std::fs::read_to_string(&classpath)
            .with_context(|| format!("read {}", classpath.display()))?
            .trim()
            .to_string(),
        jar,
    })
}

/// The java launcher: `$JAVA_HOME/bin/java`, else `java` on the PATH.
pub(crate) fn java() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/java"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// What the jobs share within one invocation.
struct Bench<'a> {
    sluice: &'a Path,
    flink: FlinkJar,
    scratch: tempfile::TempDir,
    /// Words in one copy of [`TEXT`], by WordCount's tokenizer.
    words_per_copy: u64,
}

/// One process: its wall time from start to exit and the CPU it used.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Usage {
    pub(crate) wall: f64,
    pub(crate) cpu: f64,
}

/// The cells of a table row for one engine's steady-state runs: its name, records/s and
/// records per CPU second (medians and ranges, millions), and its start-up wall and CPU time.
pub(crate) fn steady_row(engine: &str, runs: &[Steady]) -> String {
    let rate = Stat::by(runs, |s| s.rate / 1e6);
    let per_cpu = Stat::by(runs, |s| s.per_cpu / 1e6);
    format!(
        "{} | {:.2} | {} | {:.2} | {} | {:.2} | {:.2} |",
        engine,
        rate.median,
        rate.range(2),
        per_cpu.median,
        per_cpu.range(2),
        Stat::by(runs, |s| s.startup_wall).median,
        Stat::by(runs, |s| s.startup_cpu).median
    )
}

/// A short and a long run of one job on one engine, and what follows from them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Steady {
    /// Records per second between the two runs.
    pub(crate) rate: f64,
    /// Records per CPU second between the two runs.
    pub(crate) per_cpu: f64,
    /// The short run's wall time less its records at the steady rate.
    pub(crate) startup_wall: f64,
    /// The same for CPU time.
    pub(crate) startup_cpu: f64,
}

impl Steady {
    pub(crate) fn of(records: [u64; 2], usage: [Usage; 2]) -> Steady {
        let n = records[1].saturating_sub(records[0]) as f64;
        let rate = n / (usage[1].wall - usage[0].wall);
        let per_cpu = n / (usage[1].cpu - usage[0].cpu);
        Steady {
            rate,
            per_cpu,
            startup_wall: usage[0].wall - records[0] as f64 / rate,
            startup_cpu: usage[0].cpu - records[0] as f64 / per_cpu,
        }
    }
}

impl Bench<'_> {
    /// The wordcount input of `copies` copies of the text per file: a directory of two files,
    /// written once per size; its path and its words.
    fn wordcount_input(&self, copies: u64) -> Result<(PathBuf, u64)> {
        let dir = self.scratch.path().join(format!("text-{copies}"));
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir)?;
            let file = TEXT.repeat(copies as usize);
            for i in 0..2 {
                std::fs::write(dir.join(format!("part-{i}.txt")), &file)?;
            }
        }
        Ok((dir, 2 * copies * self.words_per_copy))
    }

    /// The command running `job` of size `size` on `engine`, and the records it processes.
    fn command(&self, engine: Engine, job: Job, size: u64, tag: &str) -> Result<(Command, u64)> {
        let checkpoints = self.scratch.path().join(format!("checkpoints-{tag}"));
        let (args, records) = match job {
            Job::StreamSum | Job::StreamSumRocksdb => (
                vec![
                    "stream-sum".to_string(),
                    "--records".into(),
                    size.to_string(),
                    "--keys".into(),
                    "1000".into(),
                ],
                size,
            ),
            Job::Wordcount => {
                let (input, words) = self.wordcount_input(size)?;
                (
                    vec![
                        "wordcount".to_string(),
                        "--input".into(),
                        input.display().to_string(),
                    ],
                    words,
                )
            }
        };
        let cmd = match engine {
            Engine::Sluice => {
                let mut cmd = Command::new(self.sluice);
                if job == Job::StreamSumRocksdb {
                    for setting in [
                        "state.backend.type=rocksdb".to_string(),
                        "execution.checkpointing.incremental=true".into(),
                        "execution.checkpointing.interval=1 s".into(),
                        format!("execution.checkpointing.dir={}", checkpoints.display()),
                    ] {
                        cmd.args(["-D", &setting]);
                    }
                }
                cmd.args(["run", "-t", "local", "-p", "2"]).args(&args);
                match job {
                    Job::StreamSum | Job::StreamSumRocksdb => {
                        cmd.args(["--rate", "0"]);
                    }
                    // The counts go to a file, not through this harness's pipe.
                    Job::Wordcount => {
                        cmd.arg("--output")
                            .arg(self.scratch.path().join(format!("counts-{tag}")));
                    }
                }
                cmd
            }
            Engine::Flink => {
                let mut cmd = self.flink.jobs_command();
                cmd.args(&args).args(["--parallelism", "2"]);
                if job == Job::StreamSumRocksdb {
                    cmd.args(["--rocksdb", "--checkpoint-interval-ms", "1000"])
                        .arg("--checkpoint-dir")
                        .arg(&checkpoints);
                }
                cmd
            }
        };
        Ok((cmd, records))
    }

    /// Runs one process to its end: wall time and CPU, or the failure with its log's tail.
    fn measure(&self, engine: Engine, job: Job, size: u64, tag: &str) -> Result<(Usage, u64)> {
        let (mut cmd, records) = self.command(engine, job, size, tag)?;
        let log = self.scratch.path().join(format!("{tag}.log"));
        // In the scratch directory, so that neither engine picks up a configuration file from
        // wherever the harness was started (sluice reads ./conf/config.yaml if there is one).
        cmd.current_dir(self.scratch.path());
        let started = Instant::now();
        let mut child = procs::Child::spawn_logged(engine.name(), cmd, &log)?;
        let cpu = child.wait_cpu(Duration::from_secs(1200));
        let wall = started.elapsed().as_secs_f64();
        match cpu {
            Ok(cpu) => Ok((Usage { wall, cpu }, records)),
            Err(e) => {
                let tail = procs::log_tail(&log);
                Err(e.context(format!(
                    "{} {} ({size}) failed; the end of its output:\n{tail}",
                    engine.name(),
                    job.label()
                )))
            }
        }
    }

    /// The short and the long run of `job` on `engine`.
    fn steady(&self, engine: Engine, job: Job, quick: bool, run: usize) -> Result<Steady> {
        let sizes = job.sizes(quick);
        let mut usage = [Usage {
            wall: 0.0,
            cpu: 0.0,
        }; 2];
        let mut records = [0; 2];
        for (k, &size) in sizes.iter().enumerate() {
            let tag = format!("{}-{job:?}-{run}-{size}", engine.name().replace(' ', "-"));
            (usage[k], records[k]) = self.measure(engine, job, size, &tag)?;
        }
        let s = Steady::of(records, usage);
        eprintln!(
            "  run {run}, {}, {}: {} and {} records in {:.2} and {:.2} s ({:.2} and {:.2} CPU s): {:.2} M records/s, {:.2} M per CPU second, start-up {:.2} s, {:.2} CPU s",
            job.label(),
            engine.name(),
            records[0],
            records[1],
            usage[0].wall,
            usage[1].wall,
            usage[0].cpu,
            usage[1].cpu,
            s.rate / 1e6,
            s.per_cpu / 1e6,
            s.startup_wall,
            s.startup_cpu
        );
        Ok(s)
    }
}

/// Words of `text` by Flink's WordCount tokenizer (runs of letters, digits and `_`), as
/// sluice's `wordcount` splits them.
pub(crate) fn count_words(text: &str) -> u64 {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .count() as u64
}

/// `sluice-bench flink`: every job in `jobs`, `runs` times on each engine, and the table.
pub fn run(sluice: &Path, jobs: &[Job], runs: usize, quick: bool) -> Result<()> {
    let flink = build_jar(&project_dir())?;
    // The children run in the scratch directory: a relative path would name another file there.
    let sluice = std::fs::canonicalize(sluice).unwrap_or_else(|_| sluice.to_path_buf());
    let bench = Bench {
        sluice: &sluice,
        flink,
        scratch: tempfile::Builder::new()
            .prefix("sluice-bench-flink-")
            .tempdir()?,
        words_per_copy: count_words(TEXT),
    };
    let load = procs::load_average().unwrap_or(f64::NAN);
    let started = Instant::now();
    eprintln!(
        "sluice-bench flink ({} mode): {runs} run(s), 1-minute load {load:.2}, sluice at {}",
        if quick { "quick" } else { "full" },
        sluice.display()
    );
    let mut results = Vec::new();
    for &job in jobs {
        let mut by_engine = [Vec::new(), Vec::new()];
        for run in 1..=runs {
            // Alternate which engine goes first, so neither always follows the other's heat.
            let mut order = [Engine::Sluice, Engine::Flink];
            if run % 2 == 0 {
                order.reverse();
            }
            for engine in order {
                let s = bench.steady(engine, job, quick, run)?;
                by_engine[engine as usize].push(s);
            }
        }
        results.push((job, by_engine));
    }

    println!();
    println!(
        "sluice-bench flink, {} mode: 1-minute load {load:.2} at the start and {:.2} at the end, {runs} run(s) per engine and job, {:.0} s in all",
        if quick { "quick" } else { "full" },
        procs::load_average().unwrap_or(f64::NAN),
        started.elapsed().as_secs_f64()
    );
    if quick {
        println!();
        println!(
            "Quick mode is a smoke run: Flink's long runs are shorter than the noise of its start-up, so these numbers (negative rates included) mean nothing."
        );
    }
    println!();
    println!(
        "Parallelism 2, one process per run (sluice run -t local; a Flink MiniCluster). Steady state: the records between a short and a long run over the difference in wall time and in CPU time (user + system of the process); start-up is what remains of the short run. Medians, with the range over the runs."
    );
    println!();
    println!(
        "| job | engine | M records/s | range | M records per CPU s | range | start-up s | start-up CPU s |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (job, by_engine) in &results {
        for engine in [Engine::Sluice, Engine::Flink] {
            println!(
                "| {} | {}",
                job.label(),
                steady_row(engine.name(), &by_engine[engine as usize])
            );
        }
    }
    println!();
    println!("| job | sluice / Flink, records/s | sluice / Flink, records per CPU s |");
    println!("|---|---:|---:|");
    for (job, [sluice, flink]) in &results {
        let ratio = |f: fn(&Steady) -> f64| Stat::by(sluice, f).median / Stat::by(flink, f).median;
        println!(
            "| {} | {:.2}x | {:.2}x |",
            job.label(),
            ratio(|s| s.rate),
            ratio(|s| s.per_cpu)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_flinks_tokenizer_does() {
        assert_eq!(
            count_words("To be, or not to be:--that is the Question!"),
            10
        );
        assert_eq!(count_words(""), 0);
    }

    #[test]
    fn steady_state_subtracts_the_short_run() {
        // 1 s and 2 CPU s of start-up, then 10 M records/s on 2 cores.
        let usage = |n: f64| Usage {
            wall: 1.0 + n / 10e6,
            cpu: 2.0 + n / 5e6,
        };
        let s = Steady::of([10_000_000, 110_000_000], [usage(1e7), usage(1.1e8)]);
        assert!((s.rate - 10e6).abs() < 1.0);
        assert!((s.per_cpu - 5e6).abs() < 1.0);
        assert!((s.startup_wall - 1.0).abs() < 1e-9);
        assert!((s.startup_cpu - 2.0).abs() < 1e-9);
    }
}
