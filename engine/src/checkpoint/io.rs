//! The checkpoint coordinator's file work, done for it: the coordinator decides (write this
//! `_metadata`, discard those files, which checkpoints a restore may use) and the functions here
//! carry the decisions out against a [`StateStorage`]. They block on the file system, so the
//! JobManager calls them off its async runtime and off the lock that guards the coordinator;
//! tests call them directly.

use super::coordinator::{RestoreCandidate, RestoreVerdicts};
use super::metadata::{
    CheckpointMetadata, RestoreError, load_metadata, metadata_location, validate,
};
use crate::common::log_text::clip;
use crate::state::StateStorage;
use crate::state::storage::join;

/// Writes a checkpoint's `_metadata` (atomically: readers see all of it or nothing).
pub fn write_metadata(storage: &dyn StateStorage, path: &str, bytes: &[u8]) -> Result<(), String> {
    storage.write(path, bytes).map_err(|e| e.to_string())
}

/// The file that marks a savepoint directory as sluice's while the savepoint is taken: the
/// JobManager's pid and host, one per line. A directory with it and without `_metadata` is a
/// savepoint that never completed.
pub const IN_PROGRESS_MARKER: &str = "_sluice_in_progress";

/// This host's name, as the marker records it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Writes the [`IN_PROGRESS_MARKER`] of a savepoint into `dir`.
pub fn mark_in_progress(storage: &dyn StateStorage, dir: &str) -> Result<(), String> {
    let text = format!("{}\n{}\n", std::process::id(), host_name());
    storage
        .write(&join(dir, IN_PROGRESS_MARKER), text.as_bytes())
        .map_err(|e| e.to_string())
}

/// Removes the savepoints in `root` (a savepoint target directory) that a JobManager of this
/// host started and never completed: a `savepoint-*` directory with sluice's marker, without
/// `_metadata`, whose marking process is gone (`alive` says which pids run). Anything without
/// the marker is not clearly sluice's and stays; so does a savepoint of another host, whose
/// JobManager may still be writing it. Returns the directories removed.
pub fn remove_abandoned_savepoints(
    storage: &dyn StateStorage,
    root: &str,
    alive: impl Fn(u32) -> bool,
) -> Vec<String> {
    let host = host_name();
    let mut removed = Vec::new();
    for name in storage.list(root).unwrap_or_default() {
        if !name.starts_with("savepoint-") {
            continue;
        }
        let dir = join(root, &name);
        let complete = storage
            .size(&join(&dir, super::metadata::METADATA_FILE))
            .map_or(true, |size| size.is_some());
        let Ok(marker) = storage.read(&join(&dir, IN_PROGRESS_MARKER)) else {
            continue;
        };
        let marker = String::from_utf8_lossy(&marker);
        let mut lines = marker.lines();
        let pid = lines.next().and_then(|p| p.trim().parse::<u32>().ok());
        let same_host = lines.next().map(str::trim) == Some(host.as_str());
        if complete || !same_host || pid.is_none_or(&alive) {
            continue;
        }
        match storage.delete_dir(&dir) {
            Ok(()) => removed.push(dir),
            Err(e) => {
                tracing::warn!(dir = %clip(&dir), "cannot remove an abandoned savepoint: {e}")
            }
        }
    }
    removed
}

/// Deletes discarded directories and files. A failure is logged and otherwise ignored: a file
/// left behind costs space, never correctness (nothing references it any more).
pub fn discard(storage: &dyn StateStorage, dirs: &[String], files: &[String]) {
    for dir in dirs {
        if let Err(e) = storage.delete_dir(dir) {
            tracing::warn!(dir = %clip(dir), "cannot delete checkpoint directory: {e}");
        }
    }
    for file in files {
        if let Err(e) = storage.delete_file(file) {
            tracing::warn!(file = %clip(file), "cannot delete shared checkpoint file: {e}");
        }
    }
}

/// Checks restore candidates in order (most preferred first) for their files, up to the first
/// whose files are all there with their recorded sizes.
pub fn check_candidates(
    storage: &dyn StateStorage,
    candidates: &[RestoreCandidate],
) -> RestoreVerdicts {
    let mut verdicts = Vec::new();
    for c in candidates {
        let verdict = validate(storage, &c.metadata_dir, &c.metadata);
        let valid = verdict.is_ok();
        verdicts.push((c.metadata_dir.clone(), verdict));
        if valid {
            break;
        }
    }
    verdicts
}

/// The entries of a job's checkpoint directory, each `chk-<n>` with its metadata or why it could
/// not be read (for [`super::CheckpointCoordinator::adopt_retained`]). A missing directory has
/// no entries.
pub type RetainedEntries = Vec<(String, Result<CheckpointMetadata, RestoreError>)>;

/// Reads what [`RetainedEntries`] describes from `root`.
pub fn read_retained(
    storage: &dyn StateStorage,
    root: &str,
) -> Result<RetainedEntries, RestoreError> {
    let names = storage.list(root).map_err(|source| RestoreError::Read {
        path: root.to_string(),
        source,
    })?;
    Ok(names
        .into_iter()
        .filter(|name| name.starts_with("chk-"))
        .map(|name| {
            let metadata = load_metadata(storage, &join(root, &name));
            (name, metadata)
        })
        .collect())
}

/// A savepoint or retained checkpoint a job is submitted to start from (`run -s PATH`): its
/// directory and metadata, refused with the reason if it cannot be read or a file it references
/// is missing or has another size. `PATH` is its directory or its `_metadata`, as a plain path,
/// a `file:` URI (Flink prints savepoint paths as URIs) or an `hdfs:` URI.
pub fn load_restore(
    storage: &dyn StateStorage,
    path: &str,
) -> Result<(String, CheckpointMetadata), RestoreError> {
    let path = crate::config::storage_path(path).map_err(|reason| RestoreError::BadPath {
        path: path.to_string(),
        reason,
    })?;
    let (metadata_dir, _) = metadata_location(&path);
    let metadata = load_metadata(storage, &path)?;
    validate(storage, &metadata_dir, &metadata)?;
    Ok((metadata_dir, metadata))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LocalFileStorage;

    /// A savepoint interrupted by a kill left its partial directory for ever. At start the
    /// JobManager removes the ones this host's dead JobManagers marked, and nothing else.
    #[test]
    fn only_abandoned_savepoints_marked_by_this_host_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().display().to_string();
        let s = LocalFileStorage;
        let dir = |name: &str| join(&root, name);
        let marker = |pid: u32, host: &str| format!("{pid}\n{host}\n");
        let here = host_name();
        // Interrupted by a kill: marked by a dead pid of this host, no _metadata.
        s.write(
            &join(&dir("savepoint-aaaaaa-1"), IN_PROGRESS_MARKER),
            marker(7, &here).as_bytes(),
        )
        .unwrap();
        s.write(&join(&dir("savepoint-aaaaaa-1"), "sub0-att0-op1"), b"state")
            .unwrap();
        // Completed: _metadata is there.
        s.write(
            &join(&dir("savepoint-aaaaaa-2"), IN_PROGRESS_MARKER),
            marker(7, &here).as_bytes(),
        )
        .unwrap();
        s.write(&join(&dir("savepoint-aaaaaa-2"), "_metadata"), b"{}")
            .unwrap();
        // In progress by a living JobManager; by another host; without a marker; not a savepoint.
        s.write(
            &join(&dir("savepoint-aaaaaa-3"), IN_PROGRESS_MARKER),
            marker(8, &here).as_bytes(),
        )
        .unwrap();
        s.write(
            &join(&dir("savepoint-aaaaaa-4"), IN_PROGRESS_MARKER),
            marker(7, "elsewhere").as_bytes(),
        )
        .unwrap();
        s.write(&join(&dir("savepoint-aaaaaa-5"), "x"), b"x")
            .unwrap();
        s.write(
            &join(&dir("precious"), IN_PROGRESS_MARKER),
            marker(7, &here).as_bytes(),
        )
        .unwrap();
        let removed = remove_abandoned_savepoints(&s, &root, |pid| pid == 8);
        assert_eq!(removed, vec![dir("savepoint-aaaaaa-1")]);
        let mut left = s.list(&root).unwrap();
        left.sort();
        assert_eq!(
            left,
            [
                "precious",
                "savepoint-aaaaaa-2",
                "savepoint-aaaaaa-3",
                "savepoint-aaaaaa-4",
                "savepoint-aaaaaa-5"
            ]
        );
        // The marker the JobManager writes names this process and host.
        mark_in_progress(&s, &dir("savepoint-bbbbbb-1")).unwrap();
        let written = s
            .read(&join(&dir("savepoint-bbbbbb-1"), IN_PROGRESS_MARKER))
            .unwrap();
        assert_eq!(
            String::from_utf8(written).unwrap(),
            marker(std::process::id(), &here)
        );
    }
}
