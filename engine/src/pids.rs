//! Whether a process still runs, for the clean-ups that remove what dead processes left behind.

/// Whether the process `pid` runs: it exists and is not a zombie. A killed process whose parent
/// has not collected it yet (or whose parent, as some container inits, never does) keeps its
/// `/proc` entry in state `Z`; it runs no more, so what it left is anyone's to remove.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses, which may itself hold ") ".
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_a_reaped_or_zombie_child_does_not() {
        assert!(alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not yet collected: a zombie.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive(pid) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(
            !alive(pid),
            "an exited, uncollected child is a zombie, not alive"
        );
        child.wait().unwrap();
        assert!(!alive(pid));
    }
}
