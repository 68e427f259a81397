//! `sluice-bench flink-cluster`: the key_by exchange between two TaskManager processes on
//! sluice and on Apache Flink 2.3.0, each as a standalone cluster of three processes on
//! loopback (a JobManager and two TaskManagers of one slot each), the same `shuffle` job at
//! parallelism 2 in the same minutes.
//!
//! Flink's cluster is started as its `bin/start-cluster.sh` would, from the jars Maven resolved
//! for `bench/flink/` (no flink-dist: Maven Central has none to run): the memory settings
//! from `BashJavaUtils` (what the scripts call), then
//! `StandaloneSessionClusterEntrypoint` and two `TaskManagerRunner` JVMs with a generated
//! `config.yaml` in a temp directory. Jobs are submitted by `FlinkJobs shuffle --remote`
//! (a `RemoteStreamEnvironment`, i.e. Flink's REST client); the benchmark jar is on the
//! cluster's classpath, as a jar in flink-dist's `lib/` would be. sluice's cluster is
//! [`Cluster`] (the same as `shuffle` in the main run). Start-up is taken out as in
//! `sluice-bench flink`: a short and a long run, the records between them over the difference
//! in the job's RUNNING → FINISHED time (from each JobManager's REST API) and over the
//! difference in the CPU seconds of all three cluster processes (`/proc/PID/stat`, before the
//! submission and after the end; the Flink client's own JVM is not counted, as the harness's
//! own REST calls to sluice are not).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::Stat;
use crate::cluster::{Cluster, JobDetails};
use crate::flink::{
    Engine, FlinkJar, JAVA_OPTIONS, Steady, Usage, build_jar, java, project_dir, steady_row,
};
use crate::procs::{self, Child};

/// A free TCP port on loopback.
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("find a free port")?
        .port())
}

/// The values of the lines `BashJavaUtils` marks as its results.
fn bash_java_utils_results(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("BASH_JAVA_UTILS_EXEC_RESULT:"))
        .map(str::to_string)
        .collect()
}

/// A running Flink standalone session cluster; its processes are killed on drop.
struct FlinkCluster {
    // Dropped in declaration order: TaskManagers, JobManager, then the directory.
    taskmanagers: Vec<Child>,
    jobmanager: Child,
    dir: tempfile::TempDir,
    rest_port: u16,
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl FlinkCluster {
    fn start(flink: &FlinkJar) -> Result<FlinkCluster> {
        let dir = tempfile::Builder::new()
            .prefix("sluice-bench-flink-cluster-")
            .tempdir()?;
        let (rest_port, rpc_port) = (free_port()?, free_port()?);
        // Loopback and free ports; one slot per TaskManager; the process sizes of flink-dist's
        // default config.yaml. Everything else is Flink's default.
        let config = format!(
            "jobmanager.rpc.address: 127.0.0.1\njobmanager.rpc.port: {rpc_port}\n\
             jobmanager.bind-host: 127.0.0.1\nrest.address: 127.0.0.1\n\
             rest.bind-address: 127.0.0.1\nrest.port: {rest_port}\n\
             taskmanager.host: 127.0.0.1\ntaskmanager.bind-host: 127.0.0.1\n\
             taskmanager.numberOfTaskSlots: 1\ntaskmanager.memory.process.size: 1728m\n\
             jobmanager.memory.process.size: 1600m\nio.tmp.dirs: {}\n",
            dir.path().display()
        );
        std::fs::write(dir.path().join("config.yaml"), config)?;
        let conf_dir = dir.path().to_path_buf();
        let classpath = flink.classpath();
        // What `bin/taskmanager.sh` and `bin/jobmanager.sh` ask `BashJavaUtils` for: the JVM's
        // memory options and the derived memory settings as dynamic properties.
        let resources = |what: &str| -> Result<(Vec<String>, Vec<String>)> {
            let out = Command::new(java())
                .arg("-cp")
                .arg(&classpath)
                .arg("org.apache.flink.runtime.util.bash.BashJavaUtils")
                .arg(what)
                .arg("--configDir")
                .arg(&conf_dir)
                .output()
                .context("run Flink's BashJavaUtils")?;
            let text = String::from_utf8_lossy(&out.stdout);
            let results = bash_java_utils_results(&text);
            let split = |i: usize| -> Vec<String> {
                results
                    .get(i)
                    .map(|l| l.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default()
            };
            if !out.status.success() || results.is_empty() {
                bail!(
                    "BashJavaUtils {what} failed: {}{}",
                    text,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Ok((split(0), split(1)))
        };
        let process = |class: &str, (jvm, dynamic): (Vec<String>, Vec<String>)| {
            let mut cmd = Command::new(java());
            cmd.args(JAVA_OPTIONS)
                .args(jvm)
                .arg("-cp")
                .arg(&classpath)
                .arg(class)
                .arg("--configDir")
                .arg(&conf_dir)
                .args(dynamic)
                .current_dir(&conf_dir);
            cmd
        };
        let jm = process(
            "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint",
            resources("GET_JM_RESOURCE_PARAMS")?,
        );
        let tm_resources = resources("GET_TM_RESOURCE_PARAMS")?;
        let jobmanager =
            Child::spawn_logged("Flink JobManager", jm, &dir.path().join("jobmanager.log"))?;
        let mut cluster = FlinkCluster {
            taskmanagers: Vec::new(),
            jobmanager,
            dir,
            rest_port,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()?,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
        };
        for i in 0..2 {
            let cmd = process(
                "org.apache.flink.runtime.taskexecutor.TaskManagerRunner",
                tm_resources.clone(),
            );
            let log = cluster.dir.path().join(format!("taskmanager-{i}.log"));
            cluster
                .taskmanagers
                .push(Child::spawn_logged("Flink TaskManager", cmd, &log)?);
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if cluster
                .get("/overview")
                .is_ok_and(|o| o["slots-total"].as_u64() == Some(2))
            {
                return Ok(cluster);
            }
            cluster.jobmanager.check_alive()?;
            for tm in &mut cluster.taskmanagers {
                tm.check_alive()?;
            }
            if Instant::now() > deadline {
                bail!("Flink's TaskManagers did not register within 120 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn get(&self, path: &str) -> Result<Value> {
        let url = format!("http://127.0.0.1:{}{path}", self.rest_port);
        self.runtime.block_on(async {
            let resp = self
                .http
                .get(&url)
                .send()
                .await
                .with_context(|| url.clone())?;
            if !resp.status().is_success() {
                bail!("{url}: {}", resp.status());
            }
            resp.json()
                .await
                .with_context(|| format!("JSON from {url}"))
        })
    }

    fn pids(&self) -> Vec<u32> {
        let mut pids = vec![self.jobmanager.pid()];
        pids.extend(self.taskmanagers.iter().map(Child::pid));
        pids
    }
}

/// CPU seconds of `pids` together.
fn cpu_of(pids: &[u32]) -> Result<f64> {
    pids.iter().map(|&p| procs::cpu_seconds(p)).sum()
}

impl Engine {
    /// The short and the long run's records: long enough that start-up is a small share.
    fn sizes(self, quick: bool) -> [u64; 2] {
        match (self, quick) {
            (_, true) => [500_000, 2_000_000],
            (Engine::Sluice, false) => [10_000_000, 60_000_000],
            (Engine::Flink, false) => [5_000_000, 30_000_000],
        }
    }
}

struct Clusters<'a> {
    sluice: Cluster,
    flink: FlinkCluster,
    jar: &'a FlinkJar,
}

impl Clusters<'_> {
    /// One shuffle of `records`: RUNNING → FINISHED and the CPU of the cluster's processes.
    fn shuffle(&mut self, engine: Engine, records: u64) -> Result<Usage> {
        let args = vec![
            "--records".to_string(),
            records.to_string(),
            "--keys".into(),
            "1024".into(),
        ];
        match engine {
            Engine::Sluice => {
                let mut pids = vec![self.sluice.jobmanager_pid()];
                pids.extend(self.sluice.taskmanager_pids());
                let before = cpu_of(&pids)?;
                let id = self.sluice.submit("shuffle", &args, 2)?;
                let job = self.sluice.wait_finished(&id, Duration::from_secs(600))?;
                Ok(Usage {
                    wall: job.running_to_finished()?.as_secs_f64(),
                    cpu: cpu_of(&pids)? - before,
                })
            }
            Engine::Flink => {
                let pids = self.flink.pids();
                let before = cpu_of(&pids)?;
                let log = self.flink.dir.path().join(format!("client-{records}.log"));
                let mut cmd = self.jar.jobs_command();
                cmd.arg("shuffle")
                    .args(&args)
                    .args(["--parallelism", "2", "--remote"])
                    .arg(format!("127.0.0.1:{}", self.flink.rest_port))
                    .current_dir(self.flink.dir.path());
                let mut client = Child::spawn_logged("Flink client", cmd, &log)?;
                let done = client.wait_cpu(Duration::from_secs(600));
                let cpu = cpu_of(&pids)? - before;
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if let Err(e) = done {
                    let tail = crate::procs::log_tail(&log);
                    return Err(e.context(format!("the Flink client failed:\n{tail}")));
                }
                let id = text
                    .lines()
                    .find_map(|l| l.strip_prefix("JOBID "))
                    .context("the Flink client printed no JOBID")?
                    .trim()
                    .to_string();
                let job = JobDetails(self.flink.get(&format!("/jobs/{id}"))?);
                if job.state() != "FINISHED" {
                    bail!("Flink job {id} ended {}", job.state());
                }
                Ok(Usage {
                    wall: job.running_to_finished()?.as_secs_f64(),
                    cpu,
                })
            }
        }
    }

    fn steady(&mut self, engine: Engine, quick: bool, run: usize) -> Result<Steady> {
        let sizes = engine.sizes(quick);
        let mut usage = [Usage {
            wall: 0.0,
            cpu: 0.0,
        }; 2];
        for (k, &n) in sizes.iter().enumerate() {
            usage[k] = self.shuffle(engine, n)?;
        }
        let s = Steady::of(sizes, usage);
        eprintln!(
            "  run {run}, {}: {} and {} records in {:.2} and {:.2} s ({:.2} and {:.2} CPU s of the three processes): {:.2} M records/s, {:.2} M per CPU second, start-up {:.2} s, {:.2} CPU s",
            engine.name(),
            sizes[0],
            sizes[1],
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

/// `sluice-bench flink-cluster`: both clusters, `runs` short-and-long pairs on each, the table.
/// `set` holds configuration lines for sluice's cluster (`--set`).
pub fn run(sluice: &Path, runs: usize, quick: bool, set: &[String]) -> Result<()> {
    let jar = build_jar(&project_dir())?;
    let sluice: PathBuf = std::fs::canonicalize(sluice).unwrap_or_else(|_| sluice.to_path_buf());
    let load = procs::load_average().unwrap_or(f64::NAN);
    let started = Instant::now();
    eprintln!("sluice-bench flink-cluster: starting a sluice and a Flink standalone cluster...");
    let mut clusters = Clusters {
        sluice: Cluster::start(&sluice, 2, &set.join("\n"))?,
        flink: FlinkCluster::start(&jar)?,
        jar: &jar,
    };
    // One short run on each first, not counted: the clusters' first deployment, and the JVMs'
    // JIT compilers, which are still at work after a job of 100 000 records.
    for engine in [Engine::Sluice, Engine::Flink] {
        clusters.shuffle(engine, engine.sizes(quick)[0])?;
    }
    let mut by_engine = [Vec::new(), Vec::new()];
    for run in 1..=runs {
        let mut order = [Engine::Sluice, Engine::Flink];
        if run % 2 == 0 {
            order.reverse();
        }
        for engine in order {
            by_engine[engine as usize].push(clusters.steady(engine, quick, run)?);
        }
    }
    println!();
    println!(
        "sluice-bench flink-cluster, {} mode: 1-minute load {load:.2} at the start and {:.2} at the end, {runs} run(s) per engine, {:.0} s in all",
        if quick { "quick" } else { "full" },
        procs::load_average().unwrap_or(f64::NAN),
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "sluice's configuration: the defaults with loopback addresses, free ports, one slot per TaskManager and a cluster secret{}.",
        if set.is_empty() {
            String::new()
        } else {
            format!("; and {}", set.join(", "))
        }
    );
    if quick {
        println!();
        println!(
            "Quick mode is a smoke run: the sizes are too small for these numbers to mean anything."
        );
    }
    println!();
    println!(
        "shuffle (records of 100 bytes, key_by over 1024 keys, a filter that reads each record and keeps none) at parallelism 2 on a standalone cluster of three processes per engine (JobManager + 2 TaskManagers of one slot each, loopback): about half of the records cross between the TaskManagers. Steady state from a short and a long run: records over the difference in RUNNING -> FINISHED time, and over the difference in CPU seconds of the three processes. Medians, with the range over the runs."
    );
    println!();
    println!(
        "| engine | M records/s | range | M records per CPU s (3 processes) | range | start-up s | start-up CPU s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for engine in [Engine::Sluice, Engine::Flink] {
        println!(
            "| {}",
            steady_row(engine.name(), &by_engine[engine as usize])
        );
    }
    let [s, f] = &by_engine;
    let ratio = |g: fn(&Steady) -> f64| Stat::by(s, g).median / Stat::by(f, g).median;
    println!();
    println!(
        "sluice / Flink: {:.2}x records/s, {:.2}x records per CPU second",
        ratio(|s| s.rate),
        ratio(|s| s.per_cpu)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_java_utils_lines_are_picked_out() {
        let out = "SLF4J: noise\nBASH_JAVA_UTILS_EXEC_RESULT:-Xmx1 -Xms1\nother\nBASH_JAVA_UTILS_EXEC_RESULT:-D a=1 -D b=2\n";
        assert_eq!(
            bash_java_utils_results(out),
            vec!["-Xmx1 -Xms1".to_string(), "-D a=1 -D b=2".to_string()]
        );
    }
}
