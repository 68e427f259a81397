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
            // The TaskManagers' (voluntary, preempted) context switches and minor page faults.
            let counts = |cluster: &Cluster| -> Result<[u64; 3]> {
                cluster
                    .taskmanager_pids()
                    .into_iter()
                    .try_fold([0; 3], |sum, pid| {
                        let (v, i) = procs::context_switches(pid)?;
                        Ok([sum[0] + v, sum[1] + i, sum[2] + procs::minor_faults(pid)?])
                    })
            };
            let (drops, before) = (procs::udp_receive_buffer_drops()?, counts(cluster)?);
            let r = run_job(cluster, "shuffle", &args, records, Duration::from_secs(600))?;
            let (drops, after) = (procs::udp_receive_buffer_drops()? - drops, counts(cluster)?);
            let [voluntary, preempted, faults] =
                [0, 1, 2].map(|i| (after[i] - before[i]) as f64 * 1000.0 / records as f64);
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
