//! Process metrics from `/proc/self`, named as Flink's `Status.JVM.*` are, under
//! `Status.Process.*` (sluice has no JVM): CPU load and time, resident memory, threads, open
//! files. Parsing and the CPU load are pure; [`read`] is the thin I/O around them.

use serde::{Deserialize, Serialize};

/// A process's resource use at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessMetrics {
    /// `Status.Process.CPU.Load`: CPU used since the previous reading, as a fraction of all
    /// cores of the machine (0..=1, as Flink's `Status.JVM.CPU.Load`).
    pub cpu_load: f64,
    /// `Status.Process.CPU.Time`: CPU time used since the process started, in ms.
    pub cpu_time_ms: u64,
    /// `Status.Process.Memory.RSS`: resident memory in bytes.
    pub rss_bytes: u64,
    /// `Status.Process.Threads.Count`: live threads.
    pub threads: u64,
    /// `Status.Process.FileDescriptors.Open`: open file descriptors.
    pub open_files: u64,
}

impl ProcessMetrics {
    /// The metrics with Flink-style names, for REST and Prometheus.
    pub fn values(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("Status.Process.CPU.Load", self.cpu_load),
            ("Status.Process.CPU.Time", self.cpu_time_ms as f64),
            ("Status.Process.Memory.RSS", self.rss_bytes as f64),
            ("Status.Process.Threads.Count", self.threads as f64),
            (
                "Status.Process.FileDescriptors.Open",
                self.open_files as f64,
            ),
        ]
    }
}

/// The CPU load between readings: CPU time used over wall time × cores.
#[derive(Debug, Clone, Default)]
pub struct CpuLoad {
    /// `(wall ms, CPU ms)` of the previous reading.
    last: Option<(u64, u64)>,
    load: f64,
}

impl CpuLoad {
    /// Takes a reading of the process's CPU time at `now_ms` on a machine of `cores`; returns
    /// the load since the previous one (the previous load while less than 100 ms passed).
    pub fn update(&mut self, now_ms: u64, cpu_ms: u64, cores: u32) -> f64 {
        match self.last {
            Some((t, c)) if now_ms >= t + 100 && cpu_ms >= c => {
                let wall = (now_ms - t) as f64 * cores.max(1) as f64;
                self.load = ((cpu_ms - c) as f64 / wall).clamp(0.0, 1.0);
                self.last = Some((now_ms, cpu_ms));
            }
            Some((t, c)) if now_ms >= t && cpu_ms >= c => {}
            _ => self.last = Some((now_ms, cpu_ms)),
        }
        self.load
    }
}

/// CPU time (user + system) in clock ticks from the text of `/proc/<pid>/stat`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15; field 3 (state) is the first after ')'.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// `(resident bytes, threads)` from the text of `/proc/<pid>/status`.
pub fn parse_status(status: &str) -> (u64, u64) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:") * 1024, field("Threads:"))
}

/// Clock ticks per second of `/proc`'s CPU times.
fn ticks_per_second() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: sysconf reads a constant of the system.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if t > 0 {
            return t as u64;
        }
    }
    100
}

/// Reads this process's metrics now (`now_ms` feeds the CPU load). Values that cannot be read
/// (no `/proc`) are 0.
pub fn read(now_ms: u64, cpu: &mut CpuLoad) -> ProcessMetrics {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat_cpu_ticks(&s))
        .unwrap_or(0);
    let cpu_time_ms = ticks * 1000 / ticks_per_second();
    let (rss_bytes, threads) = std::fs::read_to_string("/proc/self/status")
        .map(|s| parse_status(&s))
        .unwrap_or((0, 0));
    let open_files = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    ProcessMetrics {
        cpu_load: cpu.update(now_ms, cpu_time_ms, cores),
        cpu_time_ms,
        rss_bytes,
        threads,
        open_files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_texts() {
        let stat = "4242 (sluice (tm) x) S 1 4242 4242 0 -1 4194560 5000 0 0 0 150 50 0 0 20 0 31 0 123 0 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(200));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
        let status = "Name:\tsluice\nVmRSS:\t  2048 kB\nThreads:\t31\n";
        assert_eq!(parse_status(status), (2048 * 1024, 31));
        assert_eq!(parse_status(""), (0, 0));
    }

    #[test]
    fn cpu_load_is_cpu_time_over_wall_time_and_cores() {
        let mut c = CpuLoad::default();
        assert_eq!(c.update(0, 1000, 2), 0.0, "no load before two readings");
        // 1 s of CPU in 1 s of wall time on 2 cores: half the machine.
        assert_eq!(c.update(1000, 2000, 2), 0.5);
        // Too soon for a new reading: the last load stays.
        assert_eq!(c.update(1050, 2050, 2), 0.5);
        assert_eq!(c.update(2000, 2000, 2), 0.0);
    }

    #[test]
    fn reads_this_process() {
        let m = read(0, &mut CpuLoad::default());
        assert!(
            m.rss_bytes > 0 && m.threads >= 1 && m.open_files >= 1,
            "{m:?}"
        );
    }
}
