//! `sluice-bench shuffle`: the key_by shuffle alone, for comparing two engines or two
//! configurations. Both clusters run side by side and the runs alternate between them, so a
//! change in the machine's load falls on both alike; the report gives each side's medians and
//! the ratio of the second to the first.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::cluster::Cluster;
use crate::{CLUSTER_CONFIG, JobRun, Stat, procs, run_job};

/// One side of the comparison.
pub struct Side<'a> {
    pub bin: &'a Path,
    /// Configuration lines added to the bench's cluster configuration.
    pub config: &'a [String],
}

impl Side<'_> {
    fn describe(&self) -> String {
        if self.config.is_empty() {
            self.bin.display().to_string()
        } else {
            format!("{} with {}", self.bin.display(), self.config.join(", "))
        }
    }
}

/// Runs the shuffle `runs` times on each side, alternating; `b` is optional.
pub fn run(a: Side, b: Option<Side>, runs: usize, records: u64) -> Result<()> {
    let sides: Vec<Side> = std::iter::once(a).chain(b).collect();
    let mut clusters = Vec::new();
    for side in &sides {
        let config = format!("{CLUSTER_CONFIG}{}\n", side.config.join("\n"));
        clusters.push(Cluster::start(side.bin, 2, &config)?);
    }
    let mut results: Vec<Vec<JobRun>> = sides.iter().map(|_| Vec::new()).collect();
    let args = vec!["--records".to_string(), records.to_string()];
    for i in 0..runs {
        for (k, cluster) in clusters.iter_mut().enumerate() {
            // The TaskManagers' minor page faults, and their threads' (voluntary, preempted)
            // context switches, the task threads' included.
            let faults = |cluster: &Cluster| -> Result<u64> {
                cluster
                    .taskmanager_pids()
                    .into_iter()
                    .map(procs::minor_faults)
                    .sum()
            };
            let (drops, faults_before) = (procs::udp_receive_buffer_drops()?, faults(cluster)?);
            let switches = procs::context_switches(cluster.taskmanager_pids());
            let r = run_job(cluster, "shuffle", &args, records, Duration::from_secs(600))?;
            let (voluntary, preempted) = switches.finish();
            let drops = procs::udp_receive_buffer_drops()? - drops;
            let per_1000 = |n: u64| n as f64 * 1000.0 / records as f64;
            let (voluntary, preempted, faults) = (
                per_1000(voluntary),
                per_1000(preempted),
                per_1000(faults(cluster)? - faults_before),
            );
            if r.sink_read_records != records {
                bail!(
                    "shuffle: the sinks read {} of {records} records",
                    r.sink_read_records
                );
            }
            println!(
                "{} run {}: {:.2} M records/s, {:.0} ns TaskManager CPU per record, {:.2} cores busy, per 1000 records {voluntary:.2} + {preempted:.2} context switches (voluntary + preempted) and {faults:.1} page faults, {drops} datagrams dropped",
                side_name(k),
                i + 1,
                rate(&r),
                ns_per_record(&r),
                cores(&r)
            );
            results[k].push(r);
        }
    }
    println!();
    let medians: Vec<Stat> = results.iter().map(|rs| Stat::by(rs, rate)).collect();
    for (k, (side, rs)) in sides.iter().zip(&results).enumerate() {
        println!(
            "{}: {} — median {:.2} M records/s ({}), {:.0} ns per record, {:.2} cores busy",
            side_name(k),
            side.describe(),
            medians[k].median,
            medians[k].range(2),
            Stat::by(rs, ns_per_record).median,
            Stat::by(rs, cores).median
        );
    }
    if medians.len() == 2 {
        println!(
            "B / A: {:.3}× records/s, {:.3}× CPU per record",
            medians[1].median / medians[0].median,
            Stat::by(&results[1], ns_per_record).median
                / Stat::by(&results[0], ns_per_record).median
        );
    }
    Ok(())
}

fn side_name(k: usize) -> &'static str {
    ["A", "B"][k]
}

fn rate(r: &JobRun) -> f64 {
    r.records as f64 / r.wall.as_secs_f64() / 1e6
}

fn ns_per_record(r: &JobRun) -> f64 {
    r.tm_cpu_seconds * 1e9 / r.records as f64
}

fn cores(r: &JobRun) -> f64 {
    r.tm_cpu_seconds / r.wall.as_secs_f64()
}
