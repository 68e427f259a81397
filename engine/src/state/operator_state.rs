//! Operator state in checkpoint files: what a subtask writes when an operator's operator state
//! exceeds `state.storage.fs.memory-threshold` (Flink's key and meaning: smaller state is inlined
//! into the checkpoint's metadata, larger goes to a file in the checkpoint's directory), and how
//! a restoring subtask reads its share of such a file back.
//!
//! ```text
//! "SLUICEOP" | version u32 | element count u64
//! per element: length u32, bytes
//! checksum u64: stable hash of everything before it
//! ```
//!
//! Little-endian throughout. Elements are read by index (a rescaled restore reads a range of
//! them); the checksum catches a file damaged after its size was recorded.

use std::io;

use super::storage::{StateStorage, join, resolve_inside};
use super::{OperatorStateFile, OperatorStateHandle, SnapshotLocation, StateError};
use crate::common::keys::stable_hash_bytes;

const MAGIC: &[u8; 8] = b"SLUICEOP";
const VERSION: u32 = 1;
const HEADER_LEN: usize = MAGIC.len() + 4 + 8;
const CHECKSUM_LEN: usize = 8;

/// Whether `elements` stay inline under `threshold`: their bytes must not exceed it. Empty state
/// is always inline (a file for nothing would only cost a write).
pub fn stays_inline(elements: &[Vec<u8>], threshold: u64) -> bool {
    let bytes: u64 = elements.iter().map(|e| e.len() as u64).sum();
    bytes <= threshold
}

/// The file's bytes for `elements`.
pub fn encode(elements: &[Vec<u8>]) -> Vec<u8> {
    let payload: usize = elements.iter().map(|e| 4 + e.len()).sum();
    let mut out = Vec::with_capacity(HEADER_LEN + payload + CHECKSUM_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(elements.len() as u64).to_le_bytes());
    for e in elements {
        out.extend_from_slice(&(e.len() as u32).to_le_bytes());
        out.extend_from_slice(e);
    }
    let sum = stable_hash_bytes(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Elements `first..first + count` of a file's `bytes` (the file at `path`, recorded with
/// `expected` elements). Every problem names the file.
pub fn decode(
    bytes: &[u8],
    path: &str,
    expected: u64,
    first: u64,
    count: u64,
) -> Result<Vec<Vec<u8>>, StateError> {
    let corrupted = |reason: String| StateError::Corrupted {
        path: path.to_string(),
        reason,
    };
    if bytes.len() < HEADER_LEN + CHECKSUM_LEN || &bytes[..MAGIC.len()] != MAGIC {
        return Err(corrupted(
            "not a sluice operator state file (bad magic)".into(),
        ));
    }
    let (content, sum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    if stable_hash_bytes(content).to_le_bytes() != sum {
        return Err(corrupted("checksum mismatch".into()));
    }
    let version = u32::from_le_bytes(content[8..12].try_into().unwrap_or_default());
    if version != VERSION {
        return Err(corrupted(format!(
            "format version {version}, this build reads {VERSION}"
        )));
    }
    let n = u64::from_le_bytes(content[12..20].try_into().unwrap_or_default());
    if n != expected {
        return Err(corrupted(format!(
            "it holds {n} elements, the checkpoint recorded {expected}"
        )));
    }
    let end = first
        .checked_add(count)
        .filter(|&e| e <= n)
        .ok_or_else(|| {
            corrupted(format!(
                "elements {first}..{} asked for, it holds {n}",
                first.saturating_add(count)
            ))
        })?;
    let mut pos = HEADER_LEN;
    let mut out = Vec::with_capacity(count as usize);
    for index in 0..end {
        let len = content
            .get(pos..pos + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()) as usize)
            .ok_or_else(|| corrupted(format!("element {index} lies outside the file")))?;
        let element = content
            .get(pos + 4..pos + 4 + len)
            .ok_or_else(|| corrupted(format!("element {index} lies outside the file")))?;
        if index >= first {
            out.push(element.to_vec());
        }
        pos += 4 + len;
    }
    if end == n && pos != content.len() {
        return Err(corrupted(format!(
            "{} bytes follow the last element",
            content.len() - pos
        )));
    }
    Ok(out)
}

/// The handle for `elements` of one operator in one subtask: inline while they do not exceed
/// `threshold` bytes, else written (atomically) as `name` into the snapshot's directory.
pub fn snapshot(
    elements: Vec<Vec<u8>>,
    threshold: u64,
    location: &SnapshotLocation,
    storage: &dyn StateStorage,
    name: &str,
) -> Result<OperatorStateHandle, StateError> {
    if stays_inline(&elements, threshold) {
        return Ok(OperatorStateHandle::Inline(elements));
    }
    let bytes = encode(&elements);
    let path = join(&location.dir, name);
    storage
        .write(&path, &bytes)
        .map_err(|e| StateError::io("write operator state file", &path, e))?;
    Ok(OperatorStateHandle::File {
        file: OperatorStateFile {
            path: name.to_string(),
            size: bytes.len() as u64,
            elements: elements.len() as u64,
        },
    })
}

/// Reads elements `first..first + count` of `file`, of the checkpoint whose `_metadata` lies in
/// `metadata_dir`. A missing, truncated or damaged file is an error naming it.
pub fn read(
    storage: &dyn StateStorage,
    metadata_dir: &str,
    file: &OperatorStateFile,
    first: u64,
    count: u64,
) -> Result<Vec<Vec<u8>>, StateError> {
    let path = resolve_inside(metadata_dir, &file.path, false).map_err(|reason| {
        StateError::OutsideSnapshot {
            dir: metadata_dir.to_string(),
            reason,
        }
    })?;
    let bytes = match storage.read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(StateError::MissingFile { path });
        }
        Err(e) => return Err(StateError::io("read operator state file", &path, e)),
    };
    if bytes.len() as u64 != file.size {
        return Err(StateError::SizeMismatch {
            path,
            expected: file.size,
            actual: bytes.len() as u64,
        });
    }
    decode(&bytes, &path, file.elements, first, count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{LocalFileStorage, SnapshotKind};

    fn location(dir: &str) -> SnapshotLocation {
        SnapshotLocation {
            checkpoint_id: 3,
            kind: SnapshotKind::Checkpoint,
            dir: dir.to_string(),
            shared_dir: None,
        }
    }

    fn elements(n: usize, len: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![i as u8; len]).collect()
    }

    #[test]
    fn state_up_to_the_threshold_stays_inline_and_larger_goes_to_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("chk-3").display().to_string();
        let s = LocalFileStorage;
        // 4 elements of 10 bytes: 40 bytes.
        let at = snapshot(elements(4, 10), 40, &location(&dir), &s, "op1-a").unwrap();
        assert_eq!(at, OperatorStateHandle::Inline(elements(4, 10)));
        assert!(s.list(&dir).unwrap().is_empty(), "nothing written inline");
        let empty = snapshot(Vec::new(), 0, &location(&dir), &s, "op1-e").unwrap();
        assert_eq!(empty, OperatorStateHandle::Inline(Vec::new()));

        let over = snapshot(elements(4, 10), 39, &location(&dir), &s, "op1-b").unwrap();
        let file = over.file().expect("a file handle").clone();
        assert_eq!(file.path, "op1-b");
        assert_eq!(file.elements, 4);
        assert_eq!(s.size(&join(&dir, "op1-b")).unwrap(), Some(file.size));
        assert_eq!((over.element_count(), over.size()), (4, file.size));
        assert_eq!(
            s.list(&dir).unwrap(),
            vec!["op1-b"],
            "no temporary file left"
        );
        assert_eq!(read(&s, &dir, &file, 0, 4).unwrap(), elements(4, 10));
        assert_eq!(read(&s, &dir, &file, 1, 2).unwrap(), elements(4, 10)[1..3]);
        assert!(read(&s, &dir, &file, 4, 0).unwrap().is_empty());
        assert!(read(&s, &dir, &file, 3, 2).is_err(), "past the end");
    }

    #[test]
    fn missing_truncated_and_damaged_files_are_errors_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("chk-3").display().to_string();
        let s = LocalFileStorage;
        let handle = snapshot(elements(3, 100), 0, &location(&dir), &s, "op2-x").unwrap();
        let file = handle.file().unwrap().clone();
        let path = join(&dir, "op2-x");
        let bytes = s.read(&path).unwrap();

        let mut flipped = bytes.clone();
        flipped[HEADER_LEN + 10] ^= 1;
        s.write(&path, &flipped).unwrap();
        let err = read(&s, &dir, &file, 0, 3).unwrap_err();
        assert!(matches!(err, StateError::Corrupted { .. }), "{err}");
        assert!(err.to_string().contains(&path), "{err}");

        s.write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let err = read(&s, &dir, &file, 0, 3).unwrap_err();
        assert!(matches!(err, StateError::SizeMismatch { .. }), "{err}");
        assert!(err.to_string().contains(&path), "{err}");

        let mut other = file.clone();
        other.elements = 4;
        s.write(&path, &bytes).unwrap();
        let err = read(&s, &dir, &other, 0, 1).unwrap_err();
        assert!(err.to_string().contains("recorded 4"), "{err}");

        s.delete_file(&path).unwrap();
        let err = read(&s, &dir, &file, 0, 3).unwrap_err();
        assert!(matches!(err, StateError::MissingFile { .. }), "{err}");
        assert!(err.to_string().contains(&path), "{err}");

        let mut outside = file.clone();
        outside.path = "../chk-2/op2-x".into();
        let err = read(&s, &dir, &outside, 0, 3).unwrap_err();
        assert!(matches!(err, StateError::OutsideSnapshot { .. }), "{err}");
    }

    #[test]
    fn decode_refuses_other_files() {
        let err = decode(b"SLUICEKS and more bytes here", "/x", 0, 0, 0).unwrap_err();
        assert!(err.to_string().contains("bad magic"), "{err}");
        assert_eq!(decode(&encode(&[]), "/x", 0, 0, 0).unwrap().len(), 0);
    }
}
