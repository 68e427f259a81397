//! The hashmap backend's snapshot file.
//!
//! ```text
//! "SLUICEKS" | version u32 | max_parallelism u32 | first u32 | last u32
//! state count u32 | per state: kind u8, name length u32, name
//! index: per key group first..=last: offset u64, length u64 (relative to the body)
//! body: per key group, its entries:
//!     kind u8 | state u32 | key length u32, key | (map: user key length u32, user key)
//!     | value length u32, value
//! checksum u64: stable hash of everything before it
//! ```
//!
//! Little-endian throughout. The index lets a rescaled restore read only its key groups; the
//! checksum catches a file damaged after its size was recorded.

use std::collections::HashMap;
use std::rc::Rc;

use crate::common::keys::stable_hash_bytes;

use super::{KeyGroupRange, RawEntry, StateError, StorageKind};

const MAGIC: &[u8; 8] = b"SLUICEKS";
const VERSION: u32 = 1;
const CHECKSUM_LEN: usize = 8;

pub(crate) struct HashMapFileWriter {
    head: Vec<u8>,
    body: Vec<u8>,
    /// Start of each key group's entries in `body`.
    starts: Vec<u64>,
    ids: HashMap<Rc<str>, u32>,
}

impl HashMapFileWriter {
    pub(crate) fn new(
        max_parallelism: u32,
        range: KeyGroupRange,
        states: &[(Rc<str>, StorageKind)],
    ) -> Self {
        let mut head = Vec::with_capacity(64);
        head.extend_from_slice(MAGIC);
        for v in [VERSION, max_parallelism, range.first, range.last] {
            head.extend_from_slice(&v.to_le_bytes());
        }
        head.extend_from_slice(&(states.len() as u32).to_le_bytes());
        let mut ids = HashMap::new();
        for (i, (name, kind)) in states.iter().enumerate() {
            head.push(kind.tag());
            head.extend_from_slice(&(name.len() as u32).to_le_bytes());
            head.extend_from_slice(name.as_bytes());
            ids.insert(name.clone(), i as u32);
        }
        HashMapFileWriter {
            head,
            body: Vec::new(),
            starts: Vec::with_capacity(range.len() as usize),
            ids,
        }
    }

    /// Starts the next key group.
    pub(crate) fn begin_group(&mut self) {
        self.starts.push(self.body.len() as u64);
    }

    pub(crate) fn entry(&mut self, e: &RawEntry<'_>) {
        // Entries come from the registry the writer was made from, so the name is there.
        let id = self.ids.get(e.state).copied().unwrap_or(u32::MAX);
        let b = &mut self.body;
        b.push(e.kind.tag());
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&(e.key.len() as u32).to_le_bytes());
        b.extend_from_slice(e.key);
        if e.kind == StorageKind::Map {
            b.extend_from_slice(&(e.user_key.len() as u32).to_le_bytes());
            b.extend_from_slice(e.user_key);
        }
        b.extend_from_slice(&(e.value.len() as u32).to_le_bytes());
        b.extend_from_slice(e.value);
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        let total = self.body.len() as u64;
        let mut out = Vec::with_capacity(
            self.head.len() + self.starts.len() * 16 + self.body.len() + CHECKSUM_LEN,
        );
        out.extend_from_slice(&self.head);
        for (i, &start) in self.starts.iter().enumerate() {
            let end = self.starts.get(i + 1).copied().unwrap_or(total);
            out.extend_from_slice(&start.to_le_bytes());
            out.extend_from_slice(&(end - start).to_le_bytes());
        }
        out.extend_from_slice(&self.body);
        let sum = stable_hash_bytes(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }
}

/// A bounds-checked reader over a file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| format!("{n} bytes needed at offset {}, file ends first", self.pos))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn bytes32(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

/// Visits the entries of the key groups of `bytes` (a file at `path`) that lie in `wanted`.
pub(crate) fn read_hashmap_file(
    bytes: &[u8],
    path: &str,
    max_parallelism: u32,
    wanted: KeyGroupRange,
    visit: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
) -> Result<(), StateError> {
    let corrupted = |reason: String| StateError::Corrupted {
        path: path.to_string(),
        reason,
    };
    if bytes.len() < MAGIC.len() + CHECKSUM_LEN || &bytes[..MAGIC.len()] != MAGIC {
        return Err(corrupted(
            "not a sluice hashmap state file (bad magic)".into(),
        ));
    }
    let (content, sum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    let mut stored = [0u8; 8];
    stored.copy_from_slice(sum);
    if stable_hash_bytes(content) != u64::from_le_bytes(stored) {
        return Err(corrupted("checksum mismatch".into()));
    }
    let mut c = Cursor {
        bytes: content,
        pos: MAGIC.len(),
    };
    let parsed = (|| -> Result<Result<(), StateError>, String> {
        let version = c.u32()?;
        if version != VERSION {
            return Err(format!(
                "format version {version}, this build reads {VERSION}"
            ));
        }
        let file_max_p = c.u32()?;
        if file_max_p != max_parallelism {
            return Ok(Err(StateError::Config(format!(
                "state file {path} was written with max parallelism {file_max_p}, the job now \
                 uses {max_parallelism}: max parallelism cannot change across a restore"
            ))));
        }
        let range = KeyGroupRange::new(c.u32()?, c.u32()?);
        if range.is_empty() || range.last >= file_max_p {
            return Err(format!("invalid key group range {range}"));
        }
        let n_states = c.u32()?;
        let mut states = Vec::new();
        for _ in 0..n_states {
            let kind = c.u8()?;
            let kind = StorageKind::from_tag(kind).ok_or(format!("unknown state kind {kind}"))?;
            let name = std::str::from_utf8(c.bytes32()?).map_err(|e| e.to_string())?;
            states.push((name, kind));
        }
        let mut index = Vec::with_capacity(range.len() as usize);
        for _ in 0..range.len() {
            index.push((c.u64()?, c.u64()?));
        }
        let body = &content[c.pos..];
        let Some(take) = range.intersection(&wanted) else {
            return Ok(Ok(()));
        };
        for kg in take.first..=take.last {
            let (offset, len) = index[(kg - range.first) as usize];
            let group = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(o, l)| body.get(o..o.checked_add(l)?))
                .ok_or(format!("key group {kg} lies outside the file"))?;
            let mut g = Cursor {
                bytes: group,
                pos: 0,
            };
            while g.pos < group.len() {
                let kind = g.u8()?;
                let kind =
                    StorageKind::from_tag(kind).ok_or(format!("unknown entry kind {kind}"))?;
                let id = g.u32()?;
                let &(state, state_kind) = states
                    .get(id as usize)
                    .ok_or(format!("entry of unknown state {id}"))?;
                if state_kind != kind {
                    return Err(format!("entry kind does not match state '{state}'"));
                }
                let key = g.bytes32()?;
                let user_key = if kind == StorageKind::Map {
                    g.bytes32()?
                } else {
                    &[]
                };
                let value = g.bytes32()?;
                let r = visit(RawEntry {
                    key_group: kg,
                    state,
                    kind,
                    key,
                    user_key,
                    value,
                });
                if r.is_err() {
                    return Ok(r);
                }
            }
        }
        Ok(Ok(()))
    })();
    parsed.map_err(corrupted)?
}
