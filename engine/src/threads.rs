//! How the operating system schedules the threads that move a TaskManager's records: its task
//! threads and its data plane's.
//!
//! A TaskManager usually has more busy threads than cores: every subtask runs on a thread of its
//! own, and the data plane's QUIC thread encrypts, sends and receives for all of them. Under
//! Linux's default policy a thread that wakes up preempts the one running when it has had less
//! CPU, and a consumer that wakes for each buffer has always had less than its producer: the
//! producer is switched out at every handoff, with its caches, and switched back soon after.
//! `SCHED_BATCH` tells the kernel these threads are throughput work: a woken batch thread
//! waits for the running thread's time slice to end instead of preempting it (threads of the
//! default policy, such as the TaskManager's RPC and heartbeat threads, still preempt batch
//! threads at once). In the shuffle benchmark on two shared cores it cut the TaskManagers'
//! context switches by about 40% and their CPU per record by 6–9%, for 1–11% more records per
//! second in two comparisons (`bench/README.md`, "Session 6"). What it costs is latency, and only while every core
//! is busy: a woken consumer may wait out the running thread's slice (a few milliseconds).
//! `taskmanager.threads.scheduling-policy: normal` keeps the default policy.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::warn;

/// `taskmanager.threads.scheduling-policy`: how task and data-plane threads are scheduled.
/// Its default is the option table's (`batch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulingPolicy {
    /// `batch`: Linux's `SCHED_BATCH`, no preemption on wake-up.
    Batch,
    /// `normal`: the default policy (`SCHED_OTHER`).
    Normal,
}

impl SchedulingPolicy {
    /// Puts the calling thread under this policy. Where the platform has no such policy (not
    /// Linux), or refuses it, the thread keeps the default and one warning per process says why:
    /// the engine works the same, only with more context switches.
    pub fn apply_to_current_thread(self) {
        static WARNED: AtomicBool = AtomicBool::new(false);
        if let Err(e) = set_current_thread(self)
            && !WARNED.swap(true, Ordering::Relaxed)
        {
            warn!(policy = ?self, "cannot set the scheduling policy of task threads: {e}");
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_current_thread(policy: SchedulingPolicy) -> std::io::Result<()> {
    let policy = match policy {
        SchedulingPolicy::Batch => libc::SCHED_BATCH,
        SchedulingPolicy::Normal => libc::SCHED_OTHER,
    };
    // Batch and normal threads take no static priority: it must be 0.
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` with pid 0 changes only the calling thread's policy; it reads
    // `param`, which lives across the call. Both policies need no privilege.
    match unsafe { libc::sched_setscheduler(0, policy, &param) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_current_thread(policy: SchedulingPolicy) -> std::io::Result<()> {
    match policy {
        SchedulingPolicy::Normal => Ok(()),
        SchedulingPolicy::Batch => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "SCHED_BATCH exists on Linux only",
        )),
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// The calling thread's policy, as the kernel reports it.
    fn current() -> libc::c_int {
        // SAFETY: reads the calling thread's policy; no memory is passed.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn a_thread_takes_the_policy_and_can_go_back() {
        std::thread::spawn(|| {
            assert_eq!(current(), libc::SCHED_OTHER);
            SchedulingPolicy::Batch.apply_to_current_thread();
            assert_eq!(current(), libc::SCHED_BATCH);
            SchedulingPolicy::Normal.apply_to_current_thread();
            assert_eq!(current(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_policy_is_per_thread() {
        let before = current();
        std::thread::spawn(|| SchedulingPolicy::Batch.apply_to_current_thread())
            .join()
            .unwrap();
        assert_eq!(current(), before, "the spawning thread is untouched");
    }
}
