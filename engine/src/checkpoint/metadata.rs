//! The `_metadata` file of a checkpoint or savepoint: a versioned JSON document that names every
//! operator's state in every subtask. It is the only file a restore has to find by name; every
//! other file is reached through the handles it holds, relative to its directory.
//!
//! Invariant kept by the coordinator: `_metadata` is written (atomically) only after every
//! expected subtask acknowledged, so a directory with a `_metadata` is a complete snapshot.

use std::collections::BTreeMap;
use std::fmt;
use std::io;

use serde::{Deserialize, Serialize};

use super::OperatorSubtaskState;
use crate::common::ids::OperatorId;
use crate::common::keys::KeyHash;
use crate::state::storage::{StateStorage, join, resolve_inside};
use crate::state::{KeyedStateHandle, OperatorStateFile};

/// The name of the metadata file inside a checkpoint or savepoint directory.
pub const METADATA_FILE: &str = "_metadata";
/// The format marker: tells a sluice metadata file from any other JSON a user points `-s` at.
pub const METADATA_FORMAT: &str = "sluice-checkpoint-metadata";
/// The version this code writes; bump it (and keep a reader for the old one) when the layout
/// changes, so old savepoints stay restorable. Version 3 addresses operators by their stable
/// id (32 hex digits) and records their uid; versions 1 and 2 addressed them by their node
/// index in the program that took the snapshot, and restore onto the operator of the same
/// node index. Version 2 added operator state in files (an operator state handle may be
/// `{"file": ...}`); version 1 held operator state inline only and reads as it is (its inline
/// lists are version 2's inline form). Version 3 later gained an optional `"distribution":
/// "union"` per subtask state for union list state; without it (every earlier snapshot) state
/// is split, so no version was bumped: what older snapshots hold reads as it always did.
pub const METADATA_VERSION: u32 = 3;
/// The first version that addresses operators by their stable id.
pub const STABLE_ID_METADATA_VERSION: u32 = 3;
/// The oldest version this code reads.
pub const OLDEST_METADATA_VERSION: u32 = 1;

/// A completed checkpoint or savepoint, as written to `_metadata`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Always [`METADATA_FORMAT`].
    pub format: String,
    /// Always [`METADATA_VERSION`] for what this code writes.
    pub version: u32,
    /// The job that took it (32 hex digits).
    pub job_id: String,
    /// The checkpoint's id.
    pub checkpoint_id: u64,
    /// When it was triggered (ms since the epoch).
    pub timestamp: u64,
    /// Whether it is a (self-contained) savepoint.
    pub is_savepoint: bool,
    /// How the job hashed keys into key groups; a restored job must hash the same way.
    /// Metadata written before it was recorded used FNV-1a.
    #[serde(default = "KeyHash::legacy")]
    pub key_hash: KeyHash,
    /// Per operator.
    pub operators: BTreeMap<OperatorKey, OperatorMetadata>,
}

/// How a snapshot names an operator: by its stable id (metadata version 3 on), or, in versions
/// 1 and 2, by its node index in the program that took it. Written as a JSON object key: 32 hex
/// digits, or the node index in decimal.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OperatorKey {
    /// A stable operator id.
    Id(OperatorId),
    /// A node index of a version 1 or 2 snapshot.
    Node(u32),
}

impl fmt::Display for OperatorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperatorKey::Id(id) => write!(f, "{id}"),
            OperatorKey::Node(node) => write!(f, "{node}"),
        }
    }
}

impl std::str::FromStr for OperatorKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() == 32 {
            return s.parse().map(OperatorKey::Id);
        }
        s.parse().map(OperatorKey::Node).map_err(|_| {
            format!("'{s}' is neither an operator id (32 hexadecimal digits) nor a node index")
        })
    }
}

impl Serialize for OperatorKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for OperatorKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One operator's state across its subtasks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorMetadata {
    /// The uid the program gave the operator, if any (version 3 on), for messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The parallelism it ran with.
    pub parallelism: u32,
    /// Its number of key groups; a restore must keep it.
    pub max_parallelism: u32,
    /// Per subtask index. A subtask missing here had nothing for this operator; a subtask that had
    /// finished is present with an empty state, so a restored source knows it is done.
    pub subtasks: BTreeMap<u32, OperatorSubtaskState>,
}

impl CheckpointMetadata {
    /// Metadata in the current format with no operators yet, of a job hashing keys with
    /// [`KeyHash::CURRENT`] (set `key_hash` otherwise).
    pub fn new(job_id: String, checkpoint_id: u64, timestamp: u64, is_savepoint: bool) -> Self {
        CheckpointMetadata {
            format: METADATA_FORMAT.to_string(),
            version: METADATA_VERSION,
            job_id,
            checkpoint_id,
            timestamp,
            is_savepoint,
            key_hash: KeyHash::CURRENT,
            operators: BTreeMap::new(),
        }
    }

    /// Every keyed handle, with the operator and subtask index it belongs to.
    pub fn keyed_handles(&self) -> impl Iterator<Item = (OperatorKey, u32, &KeyedStateHandle)> {
        self.operators.iter().flat_map(|(&op, m)| {
            m.subtasks
                .iter()
                .filter_map(move |(&s, st)| st.keyed.as_ref().map(|k| (op, s, k)))
        })
    }

    /// Every operator state file, with the operator and subtask index it belongs to.
    pub fn operator_state_files(
        &self,
    ) -> impl Iterator<Item = (OperatorKey, u32, &OperatorStateFile)> {
        self.operators.iter().flat_map(|(&op, m)| {
            m.subtasks
                .iter()
                .filter_map(move |(&s, st)| st.operator_state.file().map(|f| (op, s, f)))
        })
    }

    /// Storage paths of every file the checkpoint references, resolved against `metadata_dir`.
    /// A path that would lie outside the checkpoint is left out: sluice never wrote it, so it is
    /// neither read nor deleted ([`validate`] refuses such metadata for a restore).
    pub fn file_paths(&self, metadata_dir: &str) -> Vec<String> {
        let keyed = self
            .keyed_handles()
            .flat_map(|(_, _, k)| k.files.iter())
            .filter_map(|f| self.resolve(metadata_dir, &f.path).ok());
        let operator = self
            .operator_state_files()
            .filter_map(|(_, _, f)| self.resolve_private(metadata_dir, &f.path).ok());
        keyed.chain(operator).collect()
    }

    /// Storage paths of the shared (incremental) files it references, as [`Self::file_paths`].
    pub fn shared_file_paths(&self, metadata_dir: &str) -> Vec<String> {
        self.keyed_handles()
            .flat_map(|(_, _, k)| k.files.iter().filter(|f| f.shared))
            .filter_map(|f| self.resolve(metadata_dir, &f.path).ok())
            .collect()
    }

    /// The storage path of a file this metadata references: inside `metadata_dir`, or for a
    /// checkpoint (not a savepoint, which is self-contained) in the job's shared directory.
    fn resolve(&self, metadata_dir: &str, relative: &str) -> Result<String, RestoreError> {
        resolve_inside(metadata_dir, relative, !self.is_savepoint).map_err(|reason| {
            RestoreError::OutsideCheckpoint {
                checkpoint_id: self.checkpoint_id,
                path: relative.to_string(),
                reason,
            }
        })
    }

    /// The storage path of a file that must lie inside `metadata_dir` itself (operator state
    /// files are never shared between checkpoints).
    fn resolve_private(&self, metadata_dir: &str, relative: &str) -> Result<String, RestoreError> {
        resolve_inside(metadata_dir, relative, false).map_err(|reason| {
            RestoreError::OutsideCheckpoint {
                checkpoint_id: self.checkpoint_id,
                path: relative.to_string(),
                reason,
            }
        })
    }

    /// The JSON bytes written to `_metadata`.
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(self)
    }
}

/// Why a checkpoint or savepoint cannot be restored. Every variant names what is wrong, so the
/// user can act (`run -s` with a wrong path, a deleted or truncated file, a changed program).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// No `_metadata` where one was expected.
    #[error("no checkpoint metadata at {path}: the file does not exist")]
    MetadataMissing {
        /// The metadata file's storage path.
        path: String,
    },
    /// A file could not be read or its size not queried.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file's storage path.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The metadata file is not JSON or not in the expected layout.
    #[error("{path} is not valid checkpoint metadata: {message}")]
    NotJson {
        /// The metadata file's storage path.
        path: String,
        /// The parser's complaint.
        message: String,
    },
    /// The metadata file lacks the format marker: it is some other JSON file.
    #[error(
        "{path} is not sluice checkpoint metadata (format marker {found:?}, expected \"sluice-checkpoint-metadata\")"
    )]
    WrongFormat {
        /// The metadata file's storage path.
        path: String,
        /// The marker found, if any.
        found: Option<String>,
    },
    /// The metadata was written by a version of sluice this one cannot read.
    #[error(
        "{path} has metadata version {version}; this sluice reads versions {} to {}",
        OLDEST_METADATA_VERSION,
        METADATA_VERSION
    )]
    UnsupportedVersion {
        /// The metadata file's storage path.
        path: String,
        /// The version found.
        version: u64,
    },
    /// The path given is not one this version can read (another scheme, another host).
    #[error("cannot restore from {path}: {reason}")]
    BadPath {
        /// The path as given.
        path: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A checkpoint was not checked for its files before a restore (a caller's mistake; the
    /// restore refuses it rather than trusting it).
    #[error("checkpoint {checkpoint_id} at {path} was not checked before the restore")]
    Unchecked {
        /// The checkpoint's id.
        checkpoint_id: u64,
        /// Its metadata directory.
        path: String,
    },
    /// A state file the metadata references lies outside the checkpoint or savepoint directory.
    #[error("checkpoint {checkpoint_id} cannot be restored: {reason}")]
    OutsideCheckpoint {
        /// The snapshot's id.
        checkpoint_id: u64,
        /// The path as the metadata gives it.
        path: String,
        /// Where it had to lie.
        reason: String,
    },
    /// A state file the checkpoint references does not exist.
    #[error("checkpoint {checkpoint_id} references {path}, which does not exist")]
    FileMissing {
        /// The checkpoint's id.
        checkpoint_id: u64,
        /// The file's storage path.
        path: String,
    },
    /// A state file has another size than recorded: truncated or overwritten.
    #[error(
        "checkpoint {checkpoint_id} references {path} with {expected} bytes, but it has {actual} bytes"
    )]
    FileSize {
        /// The checkpoint's id.
        checkpoint_id: u64,
        /// The file's storage path.
        path: String,
        /// The size recorded in the metadata.
        expected: u64,
        /// The size found.
        actual: u64,
    },
    /// An operator of the snapshot with state does not exist in the job restored into, and
    /// the job does not allow skipping its state (Flink's message).
    #[error(
        "Failed to rollback to checkpoint/savepoint {path}. Cannot map checkpoint/savepoint state for operator {operator}{} to the new program, because the operator is not available in the new program. If you want to allow to skip this, you can set the --allowNonRestoredState option on the CLI.",
        uid_note(.uid)
    )]
    OperatorNotMapped {
        /// The snapshot's metadata directory.
        path: String,
        /// The operator's id (or node index, in an old snapshot).
        operator: OperatorKey,
        /// The uid it had, if the snapshot knows it.
        uid: Option<String>,
    },
    /// An operator's max parallelism (number of key groups) changed.
    #[error(
        "operator {operator}{} was checkpointed with max parallelism {checkpointed}, but the new program has {new}; the number of key groups cannot change",
        uid_note(.uid)
    )]
    MaxParallelismMismatch {
        /// The operator's id (or node index, in an old snapshot).
        operator: OperatorKey,
        /// The uid it had, if the snapshot knows it.
        uid: Option<String>,
        /// Its max parallelism in the snapshot.
        checkpointed: u32,
        /// Its max parallelism in the new job.
        new: u32,
    },
    /// An operator appears in more than one vertex of the topology given.
    #[error("operator {operator} appears in more than one vertex of the program")]
    DuplicateOperator {
        /// The operator.
        operator: OperatorKey,
    },
}

/// ` (uid "x")` after an operator's id in a message, when its uid is known.
fn uid_note(uid: &Option<String>) -> String {
    match uid {
        Some(uid) => format!(" (uid \"{uid}\")"),
        None => String::new(),
    }
}

impl RestoreError {
    /// Whether the error tells something about a file that is not a snapshot: that it does not
    /// exist, cannot be read, or holds something else. A client that may name any path on the
    /// JobManager's host must not learn which (it would probe the file system); it is told
    /// only that the path is not a valid savepoint, and the details go to the log.
    pub fn reveals_foreign_files(&self) -> bool {
        matches!(
            self,
            RestoreError::MetadataMissing { .. }
                | RestoreError::Read { .. }
                | RestoreError::NotJson { .. }
                | RestoreError::WrongFormat { .. }
        )
    }

    /// Whether trying again may succeed: an I/O error reading storage may be transient (a
    /// remote file system); a missing or wrong file, or a program that does not fit, is not.
    pub fn is_retryable(&self) -> bool {
        matches!(self, RestoreError::Read { .. })
    }
}

/// The directory and the `_metadata` file for a path naming either of them.
pub fn metadata_location(path: &str) -> (String, String) {
    let trimmed = path.trim_end_matches('/');
    let trimmed = if trimmed.is_empty() { path } else { trimmed };
    match trimmed.rsplit_once('/') {
        Some((dir, file)) if file == METADATA_FILE => {
            let dir = if dir.is_empty() { "/" } else { dir };
            (dir.to_string(), trimmed.to_string())
        }
        _ => (trimmed.to_string(), join(trimmed, METADATA_FILE)),
    }
}

/// Reads the metadata of the checkpoint or savepoint at `path` (its directory or its `_metadata`
/// file). Checks the format marker and the version before the layout, so a wrong file gets a
/// message about what it is rather than about a missing field.
pub fn load_metadata(
    storage: &dyn StateStorage,
    path: &str,
) -> Result<CheckpointMetadata, RestoreError> {
    let (_, file) = metadata_location(path);
    let bytes = match storage.read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(RestoreError::MetadataMissing { path: file });
        }
        Err(source) => return Err(RestoreError::Read { path: file, source }),
    };
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| RestoreError::NotJson {
            path: file.clone(),
            message: e.to_string(),
        })?;
    let found = value.get("format").and_then(|f| f.as_str());
    if found != Some(METADATA_FORMAT) {
        return Err(RestoreError::WrongFormat {
            path: file,
            found: found.map(str::to_string),
        });
    }
    let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
    if !(u64::from(OLDEST_METADATA_VERSION)..=u64::from(METADATA_VERSION)).contains(&version) {
        return Err(RestoreError::UnsupportedVersion {
            path: file,
            version,
        });
    }
    let metadata: CheckpointMetadata =
        serde_json::from_value(value).map_err(|e| RestoreError::NotJson {
            path: file.clone(),
            message: e.to_string(),
        })?;
    // Each version names operators one way; a key of the other kind is a damaged file.
    let stable = metadata.version >= STABLE_ID_METADATA_VERSION;
    if let Some(key) = metadata
        .operators
        .keys()
        .find(|k| matches!(k, OperatorKey::Id(_)) != stable)
    {
        let expected = if stable {
            "an operator id (32 hexadecimal digits)"
        } else {
            "a node index"
        };
        return Err(RestoreError::NotJson {
            path: file,
            message: format!(
                "operator '{key}' is not {expected}, as metadata version {} names operators",
                metadata.version
            ),
        });
    }
    Ok(metadata)
}

/// Checks that every file the metadata references exists with its recorded size. A restore that
/// skipped this would fail later inside a task, far from the cause, or silently lose state.
pub fn validate(
    storage: &dyn StateStorage,
    metadata_dir: &str,
    metadata: &CheckpointMetadata,
) -> Result<(), RestoreError> {
    let keyed = metadata
        .keyed_handles()
        .flat_map(|(_, _, k)| k.files.iter())
        .map(|f| Ok((metadata.resolve(metadata_dir, &f.path)?, f.size)));
    let operator = metadata
        .operator_state_files()
        .map(|(_, _, f)| Ok((metadata.resolve_private(metadata_dir, &f.path)?, f.size)));
    for file in keyed.chain(operator) {
        let (path, expected): (String, u64) = file?;
        match storage.size(&path) {
            Ok(Some(actual)) if actual == expected => {}
            Ok(Some(actual)) => {
                return Err(RestoreError::FileSize {
                    checkpoint_id: metadata.checkpoint_id,
                    path,
                    expected,
                    actual,
                });
            }
            Ok(None) => {
                return Err(RestoreError::FileMissing {
                    checkpoint_id: metadata.checkpoint_id,
                    path,
                });
            }
            Err(source) => return Err(RestoreError::Read { path, source }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::StateDistribution;
    use crate::state::{LocalFileStorage, OperatorStateHandle, StateFile};

    fn base() -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().to_string_lossy().into_owned();
        (dir, base)
    }

    fn op(n: u128) -> OperatorKey {
        OperatorKey::Id(OperatorId(n))
    }

    fn sample() -> CheckpointMetadata {
        let mut m = CheckpointMetadata::new("ab".repeat(16), 7, 1000, false);
        m.operators.insert(
            op(3),
            OperatorMetadata {
                uid: Some("counter".into()),
                parallelism: 1,
                max_parallelism: 128,
                subtasks: BTreeMap::from([(
                    0,
                    OperatorSubtaskState {
                        distribution: Default::default(),
                        operator_state: OperatorStateHandle::Inline(vec![b"offset=5".to_vec()]),
                        keyed: Some(KeyedStateHandle {
                            backend: "rocksdb".into(),
                            key_groups: (0, 127),
                            files: vec![
                                StateFile {
                                    path: "private-1".into(),
                                    size: 3,
                                    shared: false,
                                },
                                StateFile {
                                    path: "../shared/a.sst".into(),
                                    size: 4,
                                    shared: true,
                                },
                            ],
                            checkpointed_size: 7,
                            full_size: 7,
                        }),
                    },
                )]),
            },
        );
        m.operators.insert(
            op(4),
            OperatorMetadata {
                uid: None,
                parallelism: 1,
                max_parallelism: 128,
                subtasks: BTreeMap::from([(
                    0,
                    OperatorSubtaskState {
                        distribution: StateDistribution::Union,
                        operator_state: OperatorStateHandle::File {
                            file: OperatorStateFile {
                                path: "op4-sub0-att0-chk7-operator".into(),
                                size: 5,
                                elements: 2,
                            },
                        },
                        keyed: None,
                    },
                )]),
            },
        );
        m
    }

    /// Writes the files `sample()` references into `dir` (its shared one beside it).
    fn write_sample_files(s: &LocalFileStorage, dir: &str) {
        s.write(&join(dir, "private-1"), b"abc").expect("write");
        s.write(&join(dir, "../shared/a.sst"), b"abcd")
            .expect("write");
        s.write(&join(dir, "op4-sub0-att0-chk7-operator"), b"12345")
            .expect("write");
    }

    #[test]
    fn metadata_round_trips_from_dir_or_file_path() {
        let (_t, base) = base();
        let s = LocalFileStorage;
        let dir = join(&base, "chk-7");
        let m = sample();
        s.write(&join(&dir, METADATA_FILE), &m.to_bytes().expect("json"))
            .expect("write");
        assert_eq!(load_metadata(&s, &dir).expect("dir"), m);
        assert_eq!(
            load_metadata(&s, &join(&dir, METADATA_FILE)).expect("file"),
            m
        );
        assert_eq!(load_metadata(&s, &format!("{dir}/")).expect("slash"), m);
        assert_eq!(
            metadata_location(&join(&dir, METADATA_FILE)).0,
            dir,
            "the directory of a _metadata path"
        );
    }

    #[test]
    fn load_errors_name_the_file() {
        let (_t, base) = base();
        let s = LocalFileStorage;
        let file = join(&base, "x/_metadata");
        let err = load_metadata(&s, &join(&base, "x")).unwrap_err();
        assert!(matches!(err, RestoreError::MetadataMissing { .. }));
        assert!(!err.is_retryable());
        assert!(err.to_string().contains(&file), "{err}");

        s.write(&file, b"not json").expect("write");
        let err = load_metadata(&s, &file).unwrap_err();
        assert!(matches!(err, RestoreError::NotJson { .. }), "{err}");
        assert!(err.to_string().contains(&file), "{err}");

        s.write(&file, br#"{"some": "other json"}"#).expect("write");
        let err = load_metadata(&s, &file).unwrap_err();
        assert!(matches!(err, RestoreError::WrongFormat { .. }), "{err}");
        assert!(err.to_string().contains(&file), "{err}");

        let mut v = serde_json::to_value(sample()).expect("value");
        v["version"] = serde_json::json!(4);
        s.write(&file, v.to_string().as_bytes()).expect("write");
        let err = load_metadata(&s, &file).unwrap_err();
        assert!(
            matches!(err, RestoreError::UnsupportedVersion { version: 4, .. }),
            "{err}"
        );
        assert!(err.to_string().contains(&file), "{err}");
        assert!(err.to_string().contains("versions 1 to 3"), "{err}");

        // Version 2 named operators by node index: a version 2 file with operator ids is damaged,
        // as is a version 3 file with node indices.
        v["version"] = serde_json::json!(2);
        s.write(&file, v.to_string().as_bytes()).expect("write");
        let err = load_metadata(&s, &file).unwrap_err();
        assert!(matches!(err, RestoreError::NotJson { .. }), "{err}");
        assert!(err.to_string().contains("is not a node index"), "{err}");
        let mut v3 = serde_json::to_value(sample()).expect("value");
        let ops = v3["operators"].as_object_mut().expect("a map");
        let first = ops.keys().next().cloned().expect("an operator");
        let state = ops.remove(&first).expect("state");
        ops.insert("3".into(), state);
        s.write(&file, v3.to_string().as_bytes()).expect("write");
        let err = load_metadata(&s, &file).unwrap_err();
        assert!(err.to_string().contains("is not an operator id"), "{err}");

        v["version"] = serde_json::json!(3);
        v["operators"] = serde_json::json!("oops");
        s.write(&file, v.to_string().as_bytes()).expect("write");
        let err = load_metadata(&s, &file).unwrap_err();
        assert!(matches!(err, RestoreError::NotJson { .. }), "{err}");
    }

    #[test]
    fn validate_names_missing_and_truncated_files() {
        let (_t, base) = base();
        let s = LocalFileStorage;
        let dir = join(&base, "job/chk-7");
        let m = sample();
        s.write(&join(&dir, "private-1"), b"abc").expect("write");
        s.write(&join(&dir, "op4-sub0-att0-chk7-operator"), b"12345")
            .expect("write");
        let shared = join(&base, "job/shared/a.sst");
        let err = validate(&s, &dir, &m).unwrap_err();
        assert!(matches!(err, RestoreError::FileMissing { .. }), "{err}");
        assert!(err.to_string().contains(&shared), "{err}");
        s.write(&shared, b"ab").expect("write");
        let err = validate(&s, &dir, &m).unwrap_err();
        assert!(
            matches!(
                err,
                RestoreError::FileSize {
                    expected: 4,
                    actual: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(&shared), "{err}");
        s.write(&shared, b"abcd").expect("write");
        validate(&s, &dir, &m).expect("valid");
        assert_eq!(m.shared_file_paths(&dir), vec![shared]);
    }

    /// A crafted `_metadata` pointing at a file outside the checkpoint: the file exists with the
    /// recorded size, so only the path check stands between it and the restore.
    #[test]
    fn state_files_outside_the_checkpoint_are_refused_naming_the_path() {
        let (_t, base) = base();
        let s = LocalFileStorage;
        let dir = join(&base, "job/chk-7");
        let outside = join(&base, "secret");
        s.write(&outside, b"abc").expect("write");
        write_sample_files(&s, &dir);
        let crafted = |path: &str, is_savepoint: bool| {
            let mut m = sample();
            m.is_savepoint = is_savepoint;
            let op = m.operators.get_mut(&op(3)).expect("operator");
            let keyed = op.subtasks.get_mut(&0).unwrap().keyed.as_mut().unwrap();
            keyed.files[0].path = path.to_string();
            m
        };
        for (path, is_savepoint) in [
            ("../../secret", false),
            ("../shared/../../secret", false),
            (outside.as_str(), false),
            ("../shared/a.sst", true),
        ] {
            let m = crafted(path, is_savepoint);
            let err = validate(&s, &dir, &m).unwrap_err();
            assert!(
                matches!(&err, RestoreError::OutsideCheckpoint { path: p, .. } if p == path),
                "{path}: {err}"
            );
            assert!(err.to_string().contains(path), "{err}");
            assert!(!err.is_retryable());
            // Nor would discarding the checkpoint touch it.
            assert!(m.file_paths(&dir).iter().all(|f| f != &outside), "{path}");
        }
        // The untouched sample still validates.
        validate(&s, &dir, &sample()).expect("valid");
    }

    /// Metadata version 2 holds operator state inline or as a file handle; both come back, and
    /// the file counts among the checkpoint's files (validated before a restore, deleted with it).
    #[test]
    fn metadata_with_inline_and_file_operator_state_round_trips() {
        let (_t, base) = base();
        let s = LocalFileStorage;
        let dir = join(&base, "job/chk-7");
        let m = sample();
        s.write(&join(&dir, METADATA_FILE), &m.to_bytes().expect("json"))
            .expect("write");
        let back = load_metadata(&s, &dir).expect("load");
        assert_eq!(back, m);
        assert_eq!(back.version, METADATA_VERSION);
        let op_file = join(&dir, "op4-sub0-att0-chk7-operator");
        assert!(back.file_paths(&dir).contains(&op_file));
        write_sample_files(&s, &dir);
        validate(&s, &dir, &back).expect("valid");
        s.write(&op_file, b"1234").expect("truncate");
        let err = validate(&s, &dir, &back).unwrap_err();
        assert!(
            matches!(
                err,
                RestoreError::FileSize {
                    expected: 5,
                    actual: 4,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(&op_file), "{err}");
        s.delete_file(&op_file).expect("delete");
        let err = validate(&s, &dir, &back).unwrap_err();
        assert!(matches!(err, RestoreError::FileMissing { .. }), "{err}");
        assert!(err.to_string().contains(&op_file), "{err}");

        // An operator state file may not even reach the shared directory.
        let mut shared = m.clone();
        let st = shared
            .operators
            .get_mut(&op(4))
            .unwrap()
            .subtasks
            .get_mut(&0)
            .unwrap();
        if let OperatorStateHandle::File { file } = &mut st.operator_state {
            file.path = "../shared/a.sst".into();
        }
        let err = validate(&s, &dir, &shared).unwrap_err();
        assert!(
            matches!(err, RestoreError::OutsideCheckpoint { .. }),
            "{err}"
        );
    }

    /// `_metadata` as version 1 wrote it (operator state inline only, as a list of byte lists)
    /// still loads.
    #[test]
    fn version_1_metadata_still_loads() {
        let (_t, base) = base();
        let s = LocalFileStorage;
        let dir = join(&base, "chk-3");
        let v1 = r#"{
          "format": "sluice-checkpoint-metadata",
          "version": 1,
          "job_id": "abababababababababababababababab",
          "checkpoint_id": 3,
          "timestamp": 1000,
          "is_savepoint": true,
          "key_hash": "words",
          "operators": {
            "2": {
              "parallelism": 2,
              "max_parallelism": 128,
              "subtasks": {
                "0": { "operator_state": [[111, 102, 102], []], "keyed": null },
                "1": { "operator_state": [], "keyed": null }
              }
            }
          }
        }"#;
        s.write(&join(&dir, METADATA_FILE), v1.as_bytes())
            .expect("write");
        let m = load_metadata(&s, &dir).expect("version 1 loads");
        assert_eq!(m.version, 1);
        let subtasks = &m.operators[&OperatorKey::Node(2)].subtasks;
        assert_eq!(
            subtasks[&0].operator_state,
            OperatorStateHandle::Inline(vec![b"off".to_vec(), Vec::new()])
        );
        assert_eq!(subtasks[&1].operator_state, OperatorStateHandle::default());
        assert!(
            subtasks
                .values()
                .all(|st| st.distribution == StateDistribution::Split),
            "metadata without a distribution is split state"
        );
        assert!(m.file_paths(&dir).is_empty());
        validate(&s, &dir, &m).expect("nothing to check");
    }

    /// Version 3 names operators by their 32-hex-digit id and records their uid; the JSON
    /// stays readable.
    #[test]
    fn version_3_metadata_names_operators_by_id_and_uid() {
        let m = sample();
        let text = String::from_utf8(m.to_bytes().expect("json")).expect("utf-8");
        assert!(text.contains("\"version\": 3"), "{text}");
        assert!(
            text.contains(&format!("\"{}\": {{", OperatorId(3))),
            "the id as a key: {text}"
        );
        assert!(text.contains("\"uid\": \"counter\""), "{text}");
        // Only union state records its distribution: split state's JSON is as before.
        assert_eq!(
            text.matches("\"distribution\": \"union\"").count(),
            1,
            "{text}"
        );
        assert!(!text.contains("split"), "{text}");
        let back: CheckpointMetadata = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, m);
        assert_eq!(
            back.operators[&op(3)].uid.as_deref(),
            Some("counter"),
            "the uid comes back"
        );
        assert_eq!(back.operators[&op(4)].uid, None);
    }

    /// `_metadata` as version 2 wrote it (operators by node index, no uid) still loads, its
    /// operators named by node index.
    #[test]
    fn version_2_metadata_still_loads_by_node_index() {
        let (_t, base) = base();
        let s = LocalFileStorage;
        let dir = join(&base, "chk-5");
        let v2 = r#"{
          "format": "sluice-checkpoint-metadata",
          "version": 2,
          "job_id": "abababababababababababababababab",
          "checkpoint_id": 5,
          "timestamp": 1000,
          "is_savepoint": true,
          "key_hash": "words",
          "operators": {
            "0": {
              "parallelism": 1,
              "max_parallelism": 128,
              "subtasks": { "0": { "operator_state": [[1]], "keyed": null } }
            },
            "12": {
              "parallelism": 1,
              "max_parallelism": 128,
              "subtasks": { "0": { "operator_state": [], "keyed": null } }
            }
          }
        }"#;
        s.write(&join(&dir, METADATA_FILE), v2.as_bytes())
            .expect("write");
        let m = load_metadata(&s, &dir).expect("version 2 loads");
        assert_eq!(m.version, 2);
        let keys: Vec<OperatorKey> = m.operators.keys().copied().collect();
        assert_eq!(keys, [OperatorKey::Node(0), OperatorKey::Node(12)]);
        assert_eq!(m.operators[&OperatorKey::Node(0)].uid, None);
    }
}
