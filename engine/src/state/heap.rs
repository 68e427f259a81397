//! The hashmap backend: entries in memory, one table per key group and state, so that a
//! snapshot writes key groups in order and a key group's entries can be found without a scan.
//!
//! Values are kept as the objects the typed handles put there, as Flink's heap backend keeps
//! Java objects: reading a key's value clones it and updating it overwrites it in place, with
//! no serialization on the per-record path. Archives are written only when a snapshot is taken;
//! a restore imports archives, and each one becomes an object at its first typed read. Map
//! state entries stay archives (a user key is looked up by its archive).

use std::any::Any;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use hashbrown::HashTable;
use rkyv::util::AlignedVec;

use super::format;
use super::storage::{self, StateStorage};
use super::store::decode;
use super::{
    BackendKind, BytesVisitor, KeyGroupRange, KeyedStateHandle, RawEntry, SnapshotLocation,
    StateError, StateFile, StateId, StorageKind,
};
use crate::common::error::RecordError;
use crate::record::{Appender, Data};

/// A fast hasher for the per-record path (SipHash costs more than the rest of a lookup).
/// Multiply-rotate over 8-byte words, then a mix so that hashbrown's low bucket bits and high
/// tag bits both depend on every input bit.
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        crate::common::keys::for_each_word(bytes, |word| self.add(word));
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 32;
        h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
        h ^ (h >> 32)
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// The in-memory hash of a key's archive: computed once per record when the key is set, then
/// used by every state the record touches.
#[inline]
pub(crate) fn key_hash(bytes: &[u8]) -> u64 {
    let mut h = FastHasher::default();
    h.write(bytes);
    h.finish()
}

/// How many bytes of a key's archive a table entry holds inline: integers, pairs of them and
/// short strings fit, so comparing keys reads no other memory than the entry.
const INLINE_KEY: usize = 16;

/// The current key as the tables look it up: its archive, the archive's in-memory hash, and
/// its first [`INLINE_KEY`] bytes (zero-padded).
#[derive(Clone, Copy)]
pub(crate) struct TableKey<'a> {
    bytes: &'a [u8],
    hash: u64,
    head: [u8; INLINE_KEY],
}

impl<'a> TableKey<'a> {
    #[inline]
    pub(crate) fn new(bytes: &'a [u8], hash: u64) -> Self {
        let mut head = [0u8; INLINE_KEY];
        let n = bytes.len().min(INLINE_KEY);
        head[..n].copy_from_slice(&bytes[..n]);
        TableKey { bytes, hash, head }
    }

    /// The key's archive.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// A key's value in a state's table of one key group. The hash is kept so that a growing
/// table does not hash its keys again; a key longer than [`INLINE_KEY`] bytes is kept whole in
/// `long` as well.
struct ValueEntry {
    hash: u64,
    len: u32,
    head: [u8; INLINE_KEY],
    long: Option<Box<[u8]>>,
    slot: Slot,
}

impl ValueEntry {
    #[inline]
    fn is(&self, key: &TableKey<'_>) -> bool {
        self.len as usize == key.bytes.len()
            && self.head == key.head
            && self.long.as_deref().is_none_or(|long| long == key.bytes)
    }

    /// The key's archive.
    fn key(&self) -> &[u8] {
        match &self.long {
            Some(long) => long,
            None => &self.head[..self.len as usize],
        }
    }
}

/// Key archive -> value.
type Table = HashTable<ValueEntry>;
/// User key archive -> value archive.
type UserMap = FastMap<Vec<u8>, Vec<u8>>;
/// Key archive -> the key's map.
type MapTable = FastMap<Vec<u8>, UserMap>;

/// A value of the hashmap backend.
pub(crate) enum Slot {
    /// Imported from a snapshot and not read since.
    Archive(Vec<u8>),
    /// Put by a typed handle, or an archive read once.
    Object(Box<dyn Stored>),
}

/// A value object the backend can archive when a snapshot is taken.
pub(crate) trait Stored: Any {
    /// Appends the value's archive to `buf`.
    fn encode(&self, encoder: &mut Appender, buf: &mut AlignedVec) -> Result<(), RecordError>;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Data> Stored for T {
    fn encode(&self, encoder: &mut Appender, buf: &mut AlignedVec) -> Result<(), RecordError> {
        encoder.encode(buf, self)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The error of a typed read of a value another type put there (one state name used with two
/// types in one operator).
fn other_type<T>(id: &StateId) -> StateError {
    StateError::Codec {
        state: id.name.to_string(),
        reason: format!(
            "the state holds values of another type than {} (is its name used for two states?)",
            std::any::type_name::<T>()
        ),
    }
}

/// A slot as an object of type `T`, decoding an imported archive first.
#[inline]
fn object_mut<'a, T: Data>(slot: &'a mut Slot, id: &StateId) -> Result<&'a mut T, StateError> {
    if let Slot::Archive(bytes) = slot {
        let value: T = decode(bytes, &id.name)?;
        *slot = Slot::Object(Box::new(value));
    }
    match slot {
        Slot::Object(object) => object
            .as_any_mut()
            .downcast_mut::<T>()
            .ok_or_else(|| other_type::<T>(id)),
        Slot::Archive(_) => unreachable!("decoded just above"),
    }
}

/// The tables of one key group, indexed by state id.
#[derive(Default)]
struct Group {
    values: Vec<Table>,
    maps: Vec<MapTable>,
}

impl Group {
    fn values_mut(&mut self, id: u32) -> &mut Table {
        let i = id as usize;
        if self.values.len() <= i {
            self.values.resize_with(i + 1, Table::new);
        }
        &mut self.values[i]
    }

    fn maps_mut(&mut self, id: u32) -> &mut MapTable {
        let i = id as usize;
        if self.maps.len() <= i {
            self.maps.resize_with(i + 1, FastMap::default);
        }
        &mut self.maps[i]
    }
}

pub(crate) struct HeapBackend {
    first: u32,
    groups: Vec<Group>,
}

impl HeapBackend {
    pub(crate) fn new(range: KeyGroupRange) -> Self {
        HeapBackend {
            first: range.first,
            groups: (0..range.len()).map(|_| Group::default()).collect(),
        }
    }

    /// The group of `kg`, which the store checked is in range.
    #[inline]
    fn group(&self, kg: u32) -> &Group {
        &self.groups[(kg - self.first) as usize]
    }

    #[inline]
    fn group_mut(&mut self, kg: u32) -> &mut Group {
        &mut self.groups[(kg - self.first) as usize]
    }

    /// The entry of `key` in the table of state `id` in key group `kg`, if any.
    #[inline]
    fn entry_mut(&mut self, kg: u32, id: &StateId, key: TableKey<'_>) -> Option<&mut ValueEntry> {
        self.group_mut(kg)
            .values
            .get_mut(id.id as usize)?
            .find_mut(key.hash, |e| e.is(&key))
    }

    /// The current value of `key`, cloned. An imported archive becomes an object here.
    #[inline]
    pub(crate) fn value_get<T: Data>(
        &mut self,
        kg: u32,
        id: &StateId,
        key: TableKey<'_>,
    ) -> Result<Option<T>, StateError> {
        match self.entry_mut(kg, id, key) {
            Some(entry) => object_mut::<T>(&mut entry.slot, id).map(|v| Some(v.clone())),
            None => Ok(None),
        }
    }

    /// Sets the value of `key`: overwritten in place when it holds one of this type already.
    #[inline]
    pub(crate) fn value_put<T: Data>(
        &mut self,
        kg: u32,
        id: &StateId,
        key: TableKey<'_>,
        value: T,
    ) {
        if let Some(entry) = self.entry_mut(kg, id, key) {
            match &mut entry.slot {
                Slot::Object(object) => match object.as_any_mut().downcast_mut::<T>() {
                    Some(old) => *old = value,
                    None => *object = Box::new(value),
                },
                slot => *slot = Slot::Object(Box::new(value)),
            }
            return;
        }
        self.insert(kg, id, key, Slot::Object(Box::new(value)));
    }

    /// Replaces the value of `key` by `f(value)` with one look-up, and returns a copy of it.
    #[inline]
    pub(crate) fn value_update<T: Data>(
        &mut self,
        kg: u32,
        id: &StateId,
        key: TableKey<'_>,
        f: impl FnOnce(Option<T>) -> T,
    ) -> Result<T, StateError> {
        if let Some(entry) = self.entry_mut(kg, id, key) {
            let old = object_mut::<T>(&mut entry.slot, id)?;
            let new = f(Some(old.clone()));
            *old = new.clone();
            return Ok(new);
        }
        let new = f(None);
        self.insert(kg, id, key, Slot::Object(Box::new(new.clone())));
        Ok(new)
    }

    fn insert(&mut self, kg: u32, id: &StateId, key: TableKey<'_>, slot: Slot) {
        let entry = ValueEntry {
            hash: key.hash,
            len: key.bytes.len() as u32,
            head: key.head,
            long: (key.bytes.len() > INLINE_KEY).then(|| key.bytes.into()),
            slot,
        };
        self.group_mut(kg)
            .values_mut(id.id)
            .insert_unique(key.hash, entry, |e| e.hash);
    }

    /// Imports a value's archive (a restore).
    pub(crate) fn value_import(&mut self, kg: u32, id: &StateId, key: &[u8], value: &[u8]) {
        let key = TableKey::new(key, key_hash(key));
        let slot = Slot::Archive(value.to_vec());
        match self.entry_mut(kg, id, key) {
            Some(entry) => entry.slot = slot,
            None => self.insert(kg, id, key, slot),
        }
    }

    pub(crate) fn value_delete(&mut self, kg: u32, id: &StateId, key: TableKey<'_>) {
        if let Some(table) = self.group_mut(kg).values.get_mut(id.id as usize)
            && let Ok(entry) = table.find_entry(key.hash, |e| e.is(&key))
        {
            entry.remove();
        }
    }

    pub(crate) fn map_get(&self, kg: u32, id: &StateId, key: &[u8], uk: &[u8]) -> Option<&[u8]> {
        self.group(kg)
            .maps
            .get(id.id as usize)?
            .get(key)?
            .get(uk)
            .map(|v| v.as_slice())
    }

    pub(crate) fn map_put(&mut self, kg: u32, id: &StateId, key: &[u8], uk: &[u8], value: &[u8]) {
        let table = self.group_mut(kg).maps_mut(id.id);
        let map = match table.get_mut(key) {
            Some(m) => m,
            None => table.entry(key.to_vec()).or_default(),
        };
        map.insert(uk.to_vec(), value.to_vec());
    }

    pub(crate) fn map_remove(&mut self, kg: u32, id: &StateId, key: &[u8], uk: &[u8]) {
        if let Some(table) = self.group_mut(kg).maps.get_mut(id.id as usize)
            && let Some(map) = table.get_mut(key)
        {
            map.remove(uk);
            // An empty map is no map: do not keep (or snapshot) the key.
            if map.is_empty() {
                table.remove(key);
            }
        }
    }

    pub(crate) fn map_for_each(
        &self,
        kg: u32,
        id: &StateId,
        key: &[u8],
        f: &mut BytesVisitor<'_>,
    ) -> Result<(), StateError> {
        if let Some(map) = self
            .group(kg)
            .maps
            .get(id.id as usize)
            .and_then(|t| t.get(key))
        {
            for (uk, v) in map {
                f(uk, v)?;
            }
        }
        Ok(())
    }

    pub(crate) fn map_is_empty(&self, kg: u32, id: &StateId, key: &[u8]) -> bool {
        self.group(kg)
            .maps
            .get(id.id as usize)
            .and_then(|t| t.get(key))
            .is_none_or(|m| m.is_empty())
    }

    pub(crate) fn map_clear(&mut self, kg: u32, id: &StateId, key: &[u8]) {
        if let Some(table) = self.group_mut(kg).maps.get_mut(id.id as usize) {
            table.remove(key);
        }
    }

    /// Visits the entries of one key group, values first, then map entries.
    fn for_each_in_group(
        &self,
        index: usize,
        states: &[(Rc<str>, StorageKind)],
        f: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let group = &self.groups[index];
        let key_group = self.first + index as u32;
        let mut encoder = Appender::default();
        let mut scratch = AlignedVec::new();
        for (id, table) in group.values.iter().enumerate() {
            let Some((name, _)) = states.get(id) else {
                continue;
            };
            for entry in table {
                let (key, slot) = (entry.key(), &entry.slot);
                let value: &[u8] = match slot {
                    Slot::Archive(bytes) => bytes,
                    Slot::Object(object) => {
                        scratch.clear();
                        object.encode(&mut encoder, &mut scratch).map_err(|e| {
                            StateError::Codec {
                                state: name.to_string(),
                                reason: e.to_string(),
                            }
                        })?;
                        &scratch
                    }
                };
                f(RawEntry {
                    key_group,
                    state: name,
                    kind: StorageKind::Value,
                    key,
                    user_key: &[],
                    value,
                })?;
            }
        }
        for (id, table) in group.maps.iter().enumerate() {
            let Some((name, _)) = states.get(id) else {
                continue;
            };
            for (key, map) in table {
                for (uk, value) in map {
                    f(RawEntry {
                        key_group,
                        state: name,
                        kind: StorageKind::Map,
                        key,
                        user_key: uk,
                        value,
                    })?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn for_each(
        &self,
        states: &[(Rc<str>, StorageKind)],
        f: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        for index in 0..self.groups.len() {
            self.for_each_in_group(index, states, f)?;
        }
        Ok(())
    }

    /// A full snapshot: one file in the checkpoint's directory with every key group in order.
    /// Serialized in the task thread (the tables are not shared), then written atomically.
    pub(crate) fn snapshot(
        &self,
        states: &[(Rc<str>, StorageKind)],
        max_parallelism: u32,
        location: &SnapshotLocation,
        storage: &dyn StateStorage,
        file_prefix: &str,
    ) -> Result<KeyedStateHandle, StateError> {
        let range = KeyGroupRange::new(self.first, self.first + self.groups.len() as u32 - 1);
        let mut writer = format::HashMapFileWriter::new(max_parallelism, range, states);
        for index in 0..self.groups.len() {
            writer.begin_group();
            self.for_each_in_group(index, states, &mut |e| {
                writer.entry(&e);
                Ok(())
            })?;
        }
        let bytes = writer.finish();
        let name = format!("{file_prefix}-chk{}-keyed.hashmap", location.checkpoint_id);
        let path = storage::join(&location.dir, &name);
        storage
            .write(&path, &bytes)
            .map_err(|e| StateError::io("write state file", &path, e))?;
        let size = bytes.len() as u64;
        Ok(KeyedStateHandle {
            backend: BackendKind::HashMap.name().to_string(),
            key_groups: range.as_tuple(),
            files: vec![StateFile {
                path: name,
                size,
                shared: false,
            }],
            checkpointed_size: size,
            full_size: size,
        })
    }
}
