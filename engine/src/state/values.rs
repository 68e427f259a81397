//! The value states of the hashmap backend (value, list, reducing and aggregating state): per
//! state, one table per key group, holding each key's value as the object a handle put there.
//!
//! Flink's heap backend keeps Java objects; this one keeps Rust values, inline in the table's
//! entries: a read clones the value, an update overwrites it in place, and nothing is
//! serialized on the per-record path. Archives are written when a snapshot is taken. A
//! restore imports archives; the first handle that reads the state turns its tables into tables
//! of the handle's type, decoding every entry once.

use std::any::TypeId;
use std::hash::Hasher;

use hashbrown::HashTable;
use rkyv::util::AlignedVec;

use super::archives::{FastHasher, decode};
use super::{BytesVisitor, StateError};
use crate::record::{Appender, Data};

/// How many bytes of a key's archive an entry holds inline: integers, pairs of them and short
/// strings fit, so comparing keys reads no other memory than the entry.
const INLINE_KEY: usize = 16;

/// What the tables need of a key besides its archive: the archive's in-memory hash and its
/// first [`INLINE_KEY`] bytes (zero-padded) as two little-endian words. Computed once per
/// record, when the key is set.
///
/// The words are read from the archive with loads of the key's own size, never through a
/// zeroed array patched with a shorter copy: a wide load of memory just written by narrower
/// stores cannot take its value from the store buffer and waits until they retire, which cost
/// more than the rest of a look-up.
#[derive(Clone, Copy, Default)]
pub(crate) struct KeyProbe {
    hash: u64,
    head: [u64; 2],
}

impl KeyProbe {
    #[inline(always)]
    pub(crate) fn of(bytes: &[u8]) -> Self {
        let head = head_of(bytes);
        let hash = if bytes.len() <= INLINE_KEY {
            // The zero-padded words and the length say everything. Two multiplications side
            // by side, not a chain of them: the hash is on the critical path of every record.
            fold(head[0] ^ SEED_LO, MIX_LO ^ bytes.len() as u64) ^ fold(head[1] ^ SEED_HI, MIX_HI)
        } else {
            let mut h = FastHasher::default();
            h.write(bytes);
            h.finish()
        };
        KeyProbe { hash, head }
    }
}

const SEED_LO: u64 = 0x243f_6a88_85a3_08d3;
const SEED_HI: u64 = 0x1319_8a2e_0370_7344;
const MIX_LO: u64 = 0xa409_3822_299f_31d0;
const MIX_HI: u64 = 0x082e_fa98_ec4e_6c89;

/// The high and low halves of the 128-bit product, folded: every bit of either factor
/// reaches both the low bits (hashbrown's bucket index) and the high bits (its tag).
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// The first [`INLINE_KEY`] bytes of `bytes`, zero-padded, as little-endian words. The common
/// lengths load with their own size.
#[inline(always)]
fn head_of(bytes: &[u8]) -> [u64; 2] {
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    match bytes.len() {
        4 => [
            u64::from(u32::from_le_bytes(bytes.try_into().unwrap_or_default())),
            0,
        ],
        8 => [word(bytes), 0],
        16 => [word(&bytes[..8]), word(&bytes[8..])],
        n => {
            let mut head = [0u8; INLINE_KEY];
            let n = n.min(INLINE_KEY);
            head[..n].copy_from_slice(&bytes[..n]);
            [word(&head[..8]), word(&head[8..])]
        }
    }
}

/// The bytes of a key's head words, for an entry.
fn head_bytes(head: [u64; 2]) -> [u8; INLINE_KEY] {
    let mut bytes = [0u8; INLINE_KEY];
    bytes[..8].copy_from_slice(&head[0].to_le_bytes());
    bytes[8..].copy_from_slice(&head[1].to_le_bytes());
    bytes
}

/// A key as the tables look it up: its archive and its probe.
#[derive(Clone, Copy)]
pub(crate) struct TableKey<'a> {
    bytes: &'a [u8],
    probe: KeyProbe,
}

impl<'a> TableKey<'a> {
    /// `bytes` with the probe [`KeyProbe::of`] computed for them.
    #[inline]
    pub(crate) fn new(bytes: &'a [u8], probe: KeyProbe) -> Self {
        TableKey { bytes, probe }
    }

    /// The key's archive.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// A key and its value. The hash is kept so that a growing table does not hash its keys
/// again; a key longer than [`INLINE_KEY`] bytes is kept whole in `long` as well.
struct Entry<V> {
    hash: u64,
    len: u32,
    head: [u8; INLINE_KEY],
    long: Option<Box<[u8]>>,
    value: V,
}

impl<V> Entry<V> {
    #[inline]
    fn is(&self, key: &TableKey<'_>) -> bool {
        self.len as usize == key.bytes.len()
            && self.head_words() == key.probe.head
            && self.long.as_deref().is_none_or(|long| long == key.bytes)
    }

    #[inline(always)]
    fn head_words(&self) -> [u64; 2] {
        let (lo, hi) = self.head.split_at(8);
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
        [word(lo), word(hi)]
    }

    /// The key's archive.
    fn key(&self) -> &[u8] {
        match &self.long {
            Some(long) => long,
            None => &self.head[..self.len as usize],
        }
    }
}

/// One state's tables, one per key group of the backend (by index from its first group).
pub(crate) struct Tables<V> {
    groups: Vec<HashTable<Entry<V>>>,
}

impl<V> Tables<V> {
    fn new(groups: usize) -> Self {
        Tables {
            groups: (0..groups).map(|_| HashTable::new()).collect(),
        }
    }

    /// The value of `key` in key group `index`.
    #[inline]
    pub(crate) fn get_mut(&mut self, index: usize, key: TableKey<'_>) -> Option<&mut V> {
        self.groups[index]
            .find_mut(key.probe.hash, |e| e.is(&key))
            .map(|e| &mut e.value)
    }

    /// Adds `key`, which the table does not have, with `value`.
    #[inline]
    pub(crate) fn insert_new(&mut self, index: usize, key: TableKey<'_>, value: V) {
        let entry = Entry {
            hash: key.probe.hash,
            len: key.bytes.len() as u32,
            head: head_bytes(key.probe.head),
            long: (key.bytes.len() > INLINE_KEY).then(|| key.bytes.into()),
            value,
        };
        self.groups[index].insert_unique(entry.hash, entry, |e| e.hash);
    }

    /// Sets the value of `key`.
    pub(crate) fn put(&mut self, index: usize, key: TableKey<'_>, value: V) {
        match self.get_mut(index, key) {
            Some(old) => *old = value,
            None => self.insert_new(index, key, value),
        }
    }

    fn remove(&mut self, index: usize, key: TableKey<'_>) {
        if let Ok(entry) = self.groups[index].find_entry(key.probe.hash, |e| e.is(&key)) {
            entry.remove();
        }
    }

    /// The same keys with every value mapped by `f`.
    fn try_map<W>(
        self,
        mut f: impl FnMut(V) -> Result<W, StateError>,
    ) -> Result<Tables<W>, StateError> {
        let mut out = Tables::new(self.groups.len());
        for (index, table) in self.groups.into_iter().enumerate() {
            out.groups[index].reserve(table.len(), |e| e.hash);
            for e in table {
                let entry = Entry {
                    hash: e.hash,
                    len: e.len,
                    head: e.head,
                    long: e.long,
                    value: f(e.value)?,
                };
                out.groups[index].insert_unique(entry.hash, entry, |e| e.hash);
            }
        }
        Ok(out)
    }
}

/// A state's typed tables, with their type erased.
pub(crate) trait TypedTables {
    fn remove(&mut self, index: usize, key: TableKey<'_>);
    /// Visits key group `index`'s keys and value archives.
    fn visit_group(
        &self,
        index: usize,
        encoder: &mut Appender,
        scratch: &mut AlignedVec,
        f: &mut BytesVisitor<'_>,
    ) -> Result<(), StateError>;
}

impl<T: Data> TypedTables for Tables<T> {
    fn remove(&mut self, index: usize, key: TableKey<'_>) {
        Tables::remove(self, index, key)
    }

    fn visit_group(
        &self,
        index: usize,
        encoder: &mut Appender,
        scratch: &mut AlignedVec,
        f: &mut BytesVisitor<'_>,
    ) -> Result<(), StateError> {
        for entry in &self.groups[index] {
            scratch.clear();
            encoder
                .encode(scratch, &entry.value)
                .map_err(|e| StateError::Codec {
                    state: String::new(),
                    reason: e.to_string(),
                })?;
            f(entry.key(), scratch)?;
        }
        Ok(())
    }
}

/// The tables of one value state: archives imported from a snapshot that no handle has read
/// yet, or values of the handles' type.
pub(crate) enum ValueTables {
    Imported(Tables<Vec<u8>>),
    /// With the tables' type, checked on every access without a call through the vtable.
    Typed(TypeId, Box<dyn TypedTables>),
}

impl ValueTables {
    /// Empty tables for `groups` key groups.
    pub(crate) fn new(groups: usize) -> Self {
        ValueTables::Imported(Tables::new(groups))
    }

    /// The tables as tables of `T`, decoding imported archives the first time. `name` is the
    /// state's, for errors.
    #[inline]
    pub(crate) fn typed<T: Data>(&mut self, name: &str) -> Result<&mut Tables<T>, StateError> {
        if let ValueTables::Imported(imported) = self {
            let archives = std::mem::replace(imported, Tables::new(0));
            let groups = archives.groups.len();
            match archives.try_map(|bytes| decode::<T>(&bytes, name)) {
                Ok(tables) => {
                    *self = ValueTables::Typed(TypeId::of::<Tables<T>>(), Box::new(tables))
                }
                Err(e) => {
                    *self = ValueTables::new(groups);
                    return Err(e);
                }
            }
        }
        match self {
            ValueTables::Typed(type_id, tables) if *type_id == TypeId::of::<Tables<T>>() => {
                let tables: *mut dyn TypedTables = &mut **tables;
                // SAFETY: `type_id` is the type of the boxed tables (set together with them
                // just above and never apart), so the box holds a `Tables<T>`: what
                // `downcast_mut` would check through the vtable, checked here without a call.
                Ok(unsafe { &mut *tables.cast::<Tables<T>>() })
            }
            ValueTables::Typed(..) => Err(StateError::Codec {
                state: name.to_string(),
                reason: format!(
                    "the state holds values of another type than {} (is its name used for two \
                     states?)",
                    std::any::type_name::<T>()
                ),
            }),
            ValueTables::Imported(_) => unreachable!("converted just above"),
        }
    }

    /// Imports a value's archive (a restore, before any handle reads the state).
    pub(crate) fn import(
        &mut self,
        name: &str,
        index: usize,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), StateError> {
        match self {
            ValueTables::Imported(tables) => {
                tables.put(index, TableKey::new(key, KeyProbe::of(key)), value.to_vec());
                Ok(())
            }
            ValueTables::Typed(..) => Err(StateError::Config(format!(
                "state {name} was imported into after it was read"
            ))),
        }
    }

    pub(crate) fn remove(&mut self, index: usize, key: TableKey<'_>) {
        match self {
            ValueTables::Imported(tables) => tables.remove(index, key),
            ValueTables::Typed(_, tables) => tables.remove(index, key),
        }
    }

    /// Visits key group `index`'s keys and value archives.
    pub(crate) fn visit_group(
        &self,
        index: usize,
        name: &str,
        encoder: &mut Appender,
        scratch: &mut AlignedVec,
        f: &mut BytesVisitor<'_>,
    ) -> Result<(), StateError> {
        let result = match self {
            ValueTables::Imported(tables) => {
                for entry in &tables.groups[index] {
                    f(entry.key(), &entry.value)?;
                }
                Ok(())
            }
            ValueTables::Typed(_, tables) => tables.visit_group(index, encoder, scratch, f),
        };
        result.map_err(|e| match e {
            StateError::Codec { state, reason } if state.is_empty() => StateError::Codec {
                state: name.to_string(),
                reason,
            },
            other => other,
        })
    }
}
