//! The memory allocators of a sluice process.
//!
//! Rust allocations go to mimalloc: records that own heap memory (strings, vectors) are
//! allocated and freed per record by user functions and by deserialization, and glibc's
//! allocator spent about a sixth of the bundled word count's CPU in `malloc`/`free`
//! (`bench/README.md`, "mimalloc"). Being the global allocator of the engine's library, it is
//! also the allocator of every job artifact built on it.
//!
//! glibc's allocator still serves the C and C++ libraries (RocksDB, librdkafka). It gives the
//! free top of a thread's heap back to the kernel whenever it exceeds its trim threshold (128 KiB
//! by default); when it also served quinn's received datagrams (each up to 64 KB, allocated and
//! freed at once), the data-plane thread's heap shrank and grew hundreds of times a second: a
//! page fault and a zeroed page for every 4 KiB of about one received byte in twenty. Keeping up
//! to [`TRIM_THRESHOLD`] free per heap ended that (`bench/README.md`, "glibc's heap trimming");
//! the setting stays for the C libraries' sake.

/// Every Rust allocation of the process.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_arena_eager_commit` (its position in `mi_option_e` of `mimalloc.h`,
/// the same in its versions 2 and 3; the Rust bindings name no constant for it). Off, memory of
/// its arenas is committed as pages are used and purged when freed a while; on (its default on
/// Linux), freed memory stayed resident: a TaskManager behind a slow sink grew by 32 MiB instead
/// of 4 (`bench/README.md`, "mimalloc"). `MIMALLOC_ARENA_EAGER_COMMIT` in the environment wins.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// mimalloc's `mi_option_arena_reserve` (as above): the address space an arena reserves, in KiB.
/// Its default, 1 GiB, more than doubled a TaskManager's virtual size (0.72 to 1.77 GB), which
/// counts against YARN's virtual memory check where a cluster enables it; 256 MiB (0.98 GB)
/// cost the word count nothing measurable, and mimalloc reserves another arena when one is full.
const MI_OPTION_ARENA_RESERVE: libmimalloc_sys::mi_option_t = 23;
const ARENA_RESERVE_KIB: std::ffi::c_long = 256 * 1024;

/// Sets mimalloc's options before its first allocation: mimalloc reserves its first arena at
/// the first allocation, which the Rust runtime makes before `main`, and an arena keeps the
/// commit mode it was reserved with. So this runs as an ELF constructor of priority 100, ahead
/// of mimalloc's own (101) and of every unprioritized one.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array.00100")]
static SET_MIMALLOC_OPTIONS: extern "C" fn() = set_mimalloc_options;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn set_mimalloc_options() {
    for (option, variable, value) in [
        (
            MI_OPTION_ARENA_EAGER_COMMIT,
            c"MIMALLOC_ARENA_EAGER_COMMIT",
            0,
        ),
        (
            MI_OPTION_ARENA_RESERVE,
            c"MIMALLOC_ARENA_RESERVE",
            ARENA_RESERVE_KIB,
        ),
    ] {
        // `getenv`, not `std::env`: nothing may allocate here.
        // SAFETY: a NUL-terminated name; the process is single-threaded while constructors run.
        if unsafe { libc::getenv(variable.as_ptr()) }.is_null() {
            // SAFETY: a plain store into mimalloc's option table, which is static and valid
            // before mimalloc initializes; it allocates nothing.
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
}

/// Free memory glibc keeps at the top of a heap before returning it to the kernel. The
/// measured gain was the same with 8 and 64 MiB.
pub const TRIM_THRESHOLD: usize = 8 << 20;

/// Applies glibc's setting, unless the environment already sets its trim threshold
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

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// The constructor ran in this process (a test binary links the library like any program)
    /// and mimalloc holds the values, unless the environment chose others.
    #[test]
    fn mimalloc_options_are_set_before_main() {
        // SAFETY: reads of mimalloc's option table.
        let get = |option| unsafe { libmimalloc_sys::mi_option_get(option) };
        if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_none() {
            assert_eq!(get(MI_OPTION_ARENA_EAGER_COMMIT), 0);
        }
        if std::env::var_os("MIMALLOC_ARENA_RESERVE").is_none() {
            assert_eq!(get(MI_OPTION_ARENA_RESERVE), ARENA_RESERVE_KIB);
        }
    }
}
