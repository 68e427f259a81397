//! The TaskManager's local state directories (`sluice-state-<pid>-<resource id>`): removed when
//! the TaskManager stops, and, when one starts, the directories of TaskManagers whose process
//! is gone (killed, crashed) are removed too, so that neither a graceful stop nor a `kill -9`
//! leaves state on the disk for ever.

use std::path::{Path, PathBuf};

use crate::config::LOCAL_STATE_PREFIX;

/// The pid a local state directory's name records, if it is one.
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(LOCAL_STATE_PREFIX)?;
    let (pid, id) = rest.split_once('-')?;
    if id.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Removes the local state directories in `base` whose owner (the pid in the name) is neither
/// `own_pid` nor a running process; returns those it removed. A pid reused by another process
/// keeps its directory: sluice cannot tell, and keeping it is the safe mistake.
pub(crate) fn remove_orphans(base: &Path, own_pid: u32) -> Vec<PathBuf> {
    remove_orphans_if(base, own_pid, crate::pids::alive)
}

fn remove_orphans_if(base: &Path, own_pid: u32, alive: impl Fn(u32) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if pid == own_pid || !is_dir || alive(pid) {
            continue;
        }
        let path = entry.path();
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed.push(path),
            Err(e) => {
                tracing::warn!(dir = %path.display(), "cannot remove the local state of a dead TaskManager: {e}")
            }
        }
    }
    removed
}

/// Removes a stopping TaskManager's own directory.
pub(crate) fn remove_own(dir: &Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => tracing::info!(dir = %dir.display(), "removed the TaskManager's local state"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "cannot remove the TaskManager's local state: {e}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_come_from_the_name_only() {
        assert_eq!(
            owner_pid("sluice-state-4242-localhost_6121-ab12cd"),
            Some(4242)
        );
        for other in [
            "sluice-state-localhost_6121-ab12cd",
            "sluice-state-4242",
            "sluice-state-4242-",
            "sluice-state--x",
            "other-4242-x",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }

    #[test]
    fn only_directories_of_dead_owners_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let dir = base.path().join(name);
            std::fs::create_dir_all(dir.join("job/db")).unwrap();
            std::fs::write(dir.join("job/db/000001.sst"), b"x").unwrap();
            dir
        };
        let dead = make("sluice-state-101-tm_a");
        let living = make("sluice-state-102-tm_b");
        let own = make("sluice-state-103-tm_c");
        let foreign = make("sluice-state-tm_old_format");
        let unrelated = make("something-else");
        std::fs::write(base.path().join("sluice-state-104-file"), b"x").unwrap();
        let removed = remove_orphans_if(base.path(), 103, |pid| pid == 102);
        assert_eq!(removed, vec![dead.clone()]);
        assert!(!dead.exists());
        for kept in [&living, &own, &foreign, &unrelated] {
            assert!(kept.exists(), "{}", kept.display());
        }
        assert!(base.path().join("sluice-state-104-file").exists());
        // With the real process table: this process is alive, so its directory stays.
        let me = std::process::id();
        let mine = make(&format!("sluice-state-{me}-tm_d"));
        remove_orphans(base.path(), 0);
        assert!(mine.exists());
    }
}
