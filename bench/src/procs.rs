//! Processes the harness starts and what it reads about them from `/proc` and `ss`.
//!
//! Every child lives in a [`Child`] guard that kills it when dropped, so a failed measurement,
//! an early `?` return or a panic (unwinding) never leaves a JobManager or TaskManager behind.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// A child process that is killed (SIGKILL) and reaped when the guard is dropped.
pub struct Child {
    name: String,
    inner: std::process::Child,
    /// Reaped by [`Child::wait_cpu`] behind `inner`'s back: nothing is left to kill or wait for.
    reaped: bool,
}

impl Child {
    /// Starts `cmd` with stdout and stderr appended to `log`.
    pub fn spawn_logged(name: &str, mut cmd: Command, log: &Path) -> Result<Child> {
        let out = File::create(log).with_context(|| format!("create {}", log.display()))?;
        let err = out.try_clone().context("clone log file handle")?;
        let inner = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("start {name}: {cmd:?}"))?;
        Ok(Child {
            name: name.to_string(),
            inner,
            reaped: false,
        })
    }

    /// Starts `cmd` with a piped stdout (for a re-executed receiver that prints its port).
    pub fn spawn_piped(name: &str, mut cmd: Command) -> Result<(Child, std::process::ChildStdout)> {
        let mut inner = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {name}: {cmd:?}"))?;
        let stdout = inner.stdout.take().context("child stdout")?;
        Ok((
            Child {
                name: name.to_string(),
                inner,
                reaped: false,
            },
            stdout,
        ))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.inner.id()
    }

    /// Fails if the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.inner.try_wait().context("wait")? {
            bail!("{} (pid {}) exited: {status}", self.name, self.pid());
        }
        Ok(())
    }

    /// Waits up to `timeout` for the process to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.inner.try_wait().context("wait")? {
                if !status.success() {
                    bail!("{} exited with {status}", self.name);
                }
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                bail!("{} did not exit within {timeout:?}", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to `timeout` for the process to exit by itself, polling every 2 ms, and returns
    /// the user plus system CPU seconds it used. The process is reaped with `wait4`, whose
    /// resource usage counts every thread, also those that ended before the process did (a
    /// JVM's compiler and GC threads, a job's task threads), which no `/proc` sample taken
    /// before the exit can see completely. Fails if the process exits unsuccessfully.
    pub fn wait_cpu(&mut self, timeout: Duration) -> Result<f64> {
        let deadline = std::time::Instant::now() + timeout;
        let pid = self.pid() as libc::pid_t;
        loop {
            let mut status = 0;
            // SAFETY: an all-zero rusage is a valid value of this plain C struct.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `pid` is this guard's own child, not yet reaped (`reaped` is false until
            // here); `status` and `usage` are valid for writes.
            let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if got == pid {
                self.reaped = true;
                if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                    bail!("{} exited with wait status {status:#x}", self.name);
                }
                let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1_000_000.0;
                return Ok(seconds(usage.ru_utime) + seconds(usage.ru_stime));
            }
            if got < 0 {
                bail!(
                    "wait4 for {}: {}",
                    self.name,
                    std::io::Error::last_os_error()
                );
            }
            if std::time::Instant::now() > deadline {
                bail!("{} did not exit within {timeout:?}", self.name);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        if let Ok(None) = self.inner.try_wait() {
            let _ = self.inner.kill();
        }
        let _ = self.inner.wait();
    }
}

/// Clock ticks per second of `/proc/PID/stat` times (`getconf CLK_TCK`, 100 on Linux).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// Fields of `/proc/PID/stat`, numbered as in proc(5) (from 1).
fn stat_fields<const N: usize>(pid: u32, numbers: [usize; N]) -> Result<[f64; N]> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("read /proc/{pid}/stat"))?;
    // The command name may hold spaces and parentheses; the fields after the last ')' are fixed,
    // starting with the state, field 3.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("malformed /proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let mut out = [0.0; N];
    for (o, n) in out.iter_mut().zip(numbers) {
        *o = fields
            .get(n - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .with_context(|| format!("field {n} of /proc/{pid}/stat"))?;
    }
    Ok(out)
}

/// User plus system CPU seconds a process has used (all its threads).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let [utime, stime] = stat_fields(pid, [14, 15])?;
    Ok((utime + stime) / clock_ticks())
}

/// Minor page faults of a process (all its threads): pages it touched for the first time,
/// such as memory the allocator got from the kernel again after giving it back.
pub fn minor_faults(pid: u32) -> Result<u64> {
    let [minflt] = stat_fields(pid, [10])?;
    Ok(minflt as u64)
}

/// A `kB` line of `/proc/PID/status` (`VmRSS`, `VmHWM`), in bytes.
pub fn status_bytes(pid: u32, key: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .with_context(|| format!("{key} in /proc/{pid}/status"))
}

/// `rchar + wchar` of `/proc/PID/io`: bytes through read/write-like calls. Linux counts `read`,
/// `write` and their vector forms there, not `recv`/`send`, which is what Rust's sockets use,
/// so this mostly shows file and pipe I/O; [`tcp_port_bytes`] counts the sockets.
pub fn io_chars(pid: u32) -> Result<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))
        .with_context(|| format!("read /proc/{pid}/io"))?;
    let get = |key: &str| -> u64 {
        io.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok(get("rchar:") + get("wchar:"))
}

/// Bytes sent plus received, as the kernel's TCP counters say (`ss -ti`), over the established
/// connections whose local port is `port`. The counters live as long as the connections do, so
/// differences between two calls are the traffic in between.
pub fn tcp_port_bytes(port: u16) -> Result<u64> {
    let out = Command::new("ss")
        .args([
            "-tinH",
            "state",
            "established",
            &format!("( sport = :{port} )"),
        ])
        .output()
        .context("run ss (iproute2)")?;
    if !out.status.success() {
        bail!("ss failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut total = 0u64;
    for word in text.split_whitespace() {
        for key in ["bytes_sent:", "bytes_received:"] {
            if let Some(v) = word.strip_prefix(key) {
                total += v.parse::<u64>().unwrap_or(0);
            }
        }
    }
    Ok(total)
}

/// A thread that samples something until it is told to stop, then hands over what it found.
pub struct Sampler<R> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<R>>,
}

impl<R: Default + Send + 'static> Sampler<R> {
    /// Runs `sample` every `every` until stopped, then `finish` on what it gathered.
    fn start<S: Send + 'static>(
        every: Duration,
        mut state: S,
        mut sample: impl FnMut(&mut S) + Send + 'static,
        finish: impl FnOnce(S) -> R + Send + 'static,
    ) -> Sampler<R> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            loop {
                sample(&mut state);
                if flag.load(Ordering::Relaxed) {
                    return finish(state);
                }
                std::thread::sleep(every);
            }
        });
        Sampler {
            stop,
            handle: Some(handle),
        }
    }

    /// Takes a last sample and stops; what was gathered.
    pub fn finish(mut self) -> R {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl<R> Drop for Sampler<R> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Samples the resident set size of `pids` every 50 ms and keeps the largest value per process
/// (bytes).
pub fn peak_rss(pids: Vec<u32>) -> Sampler<HashMap<u32, u64>> {
    Sampler::start(
        Duration::from_millis(50),
        HashMap::new(),
        move |peak: &mut HashMap<u32, u64>| {
            for &pid in &pids {
                if let Ok(rss) = status_bytes(pid, "VmRSS") {
                    let p = peak.entry(pid).or_default();
                    *p = (*p).max(rss);
                }
            }
        },
        |peak| peak,
    )
}

/// The last 30 lines of the log at `path` (empty if it cannot be read): what a failed child
/// said last.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Samples the bytes of the files under `dir` (all depths) every 50 ms and keeps the largest
/// total: what a process spilled there at its peak. Files vanishing while they are counted
/// are skipped.
pub fn peak_dir_bytes(dir: std::path::PathBuf) -> Sampler<u64> {
    fn bytes_under(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|entry| match entry.metadata() {
                Ok(m) if m.is_dir() => bytes_under(&entry.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    }
    Sampler::start(
        Duration::from_millis(50),
        0u64,
        move |peak: &mut u64| *peak = (*peak).max(bytes_under(&dir)),
        |peak| peak,
    )
}

/// Samples the CPU seconds of `pid` (user + system, all its threads) every 50 ms, with the wall
/// clock in nanoseconds since the Unix epoch: `(time, cpu)` pairs, for the CPU a process used
/// between two moments another process stamped.
pub fn cpu_trace(pid: u32) -> Sampler<Vec<(u64, f64)>> {
    Sampler::start(
        Duration::from_millis(50),
        Vec::new(),
        move |trace: &mut Vec<(u64, f64)>| {
            if let Ok(cpu) = cpu_seconds(pid) {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                trace.push((now, cpu));
            }
        },
        |trace| trace,
    )
}

/// The 1-minute load average.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Datagrams the kernel dropped because a UDP socket's receive buffer was full, over the whole
/// machine (`RcvbufErrors` in `/proc/net/snmp`): QUIC loss on loopback.
pub fn udp_receive_buffer_drops() -> Result<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").context("read /proc/net/snmp")?;
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next(), udp.next());
    let (Some(names), Some(values)) = (names, values) else {
        bail!("/proc/net/snmp has no Udp lines");
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(name, _)| *name == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .context("/proc/net/snmp has no Udp RcvbufErrors")
}

/// Context switches of each live thread of `pid`: thread id → (voluntary, involuntary).
fn thread_switches(pid: u32) -> HashMap<u32, (u64, u64)> {
    let mut threads = HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return threads;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        // A thread that ended meanwhile has no status.
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        let mut counts = (0, 0);
        for line in status.lines() {
            let field = |name: &str| {
                line.strip_prefix(name)
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            if let Some(n) = field("voluntary_ctxt_switches:") {
                counts.0 = n;
            } else if let Some(n) = field("nonvoluntary_ctxt_switches:") {
                counts.1 = n;
            }
        }
        threads.insert(tid, counts);
    }
    threads
}

/// Counts the context switches of the threads of `pids` over a span of time, including
/// threads that start and end within it (a job's task threads): the kernel keeps the counts
/// per thread and drops them when a thread exits, so they are sampled every 20 ms and each
/// thread's last sample counts (a thread loses at most its last 20 ms). The result is
/// (voluntary, involuntary) switches since the start.
pub fn context_switches(pids: Vec<u32>) -> Sampler<(u64, u64)> {
    // Threads alive now count from their present values; later ones from zero.
    let first: HashMap<(u32, u32), (u64, u64)> = pids
        .iter()
        .flat_map(|&pid| {
            thread_switches(pid)
                .into_iter()
                .map(move |(t, c)| ((pid, t), c))
        })
        .collect();
    Sampler::start(
        Duration::from_millis(20),
        first.clone(),
        move |last: &mut HashMap<(u32, u32), (u64, u64)>| {
            for &pid in &pids {
                for (tid, counts) in thread_switches(pid) {
                    last.insert((pid, tid), counts);
                }
            }
        },
        move |last| {
            last.iter().fold((0, 0), |sum, (thread, now)| {
                let was = first.get(thread).copied().unwrap_or_default();
                (sum.0 + now.0 - was.0, sum.1 + now.1 - was.1)
            })
        },
    )
}
