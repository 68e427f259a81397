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
/// is missing or has another size. `PATH` is its directory or its `_metadata`, as a plain path
/// or a `file:` URI (Flink prints savepoint paths as URIs).
pub fn load_restore(
    storage: &dyn StateStorage,
    path: &str,
) -> Result<(String, CheckpointMetadata), RestoreError> {
    let path = crate::config::local_path(path)
        .map_err(|reason| RestoreError::BadPath {
            path: path.to_string(),
            reason,
        })?
        .display()
        .to_string();
    let (metadata_dir, _) = metadata_location(&path);
    let metadata = load_metadata(storage, &path)?;
    validate(storage, &metadata_dir, &metadata)?;
    Ok((metadata_dir, metadata))
}
