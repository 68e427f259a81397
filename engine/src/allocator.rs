//! The C allocator's settings for a sluice process.
//!
//! The data plane's QUIC endpoint (quinn) copies every received datagram, up to 64 KB on
//! loopback, into an allocation of its own and frees it once the stream has read it. glibc gives
//! the free top of a thread's heap back to the kernel whenever it exceeds its trim threshold
//! (128 KiB by default), so the data-plane thread's heap shrank and grew again hundreds of times a
//! second: a page fault and a zeroed page for every 4 KiB of about one received byte in twenty.
//! Keeping up to [`TRIM_THRESHOLD`] free per heap ended that: in the shuffle benchmark the
//! TaskManagers' CPU per record fell by a tenth and their throughput rose by about 17%
//! (`bench/README.md`, "glibc's heap trimming"). The memory kept is memory the process used
//! a moment ago; the slow-sink measurement shows the TaskManagers' RSS still bounded.

/// Free memory glibc keeps at the top of a heap before returning it to the kernel. The
/// measured gain was the same with 8 and 64 MiB.
pub const TRIM_THRESHOLD: usize = 8 << 20;

/// Applies the settings, unless the environment already sets glibc's trim threshold
/// (`MALLOC_TRIM_THRESHOLD_`, or `GLIBC_TUNABLES` naming it): an operator's choice wins. Call it
/// first thing in `main`, before other threads start.
pub fn tune() {
    let tuned_by_env = std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("trim_threshold"));
    if !tuned_by_env {
        set_trim_threshold(TRIM_THRESHOLD);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_trim_threshold(bytes: usize) {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` only sets a parameter of glibc's allocator (it takes the allocator's
    // own lock); it touches no memory of ours. A refusal (return 0) leaves glibc's default,
    // which is correct, only slower.
    unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, bytes) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_trim_threshold(_bytes: usize) {}
