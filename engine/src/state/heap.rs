//! The hashmap backend: entries in memory, one table per key group and state, so that a
//! snapshot writes key groups in order and a key group's entries can be found without a scan.
//!
//! Value states keep the values themselves (`values.rs`); map state entries are archives (a
//! user key is looked up by its archive).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use rkyv::util::AlignedVec;

use super::archives::FastHasher;
use super::format;
use super::storage::{self, StateStorage};
use super::values::{TableKey, ValueTables};
use super::{
    BackendKind, BytesVisitor, KeyGroupRange, KeyedStateHandle, RawEntry, SnapshotLocation,
    StateError, StateFile, StateId, StorageKind,
};
use crate::record::{Appender, Data};

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// User key archive -> value archive.
type UserMap = FastMap<Vec<u8>, Vec<u8>>;
/// Key archive -> the key's map.
type MapTable = FastMap<Vec<u8>, UserMap>;

/// The map states of one key group, indexed by state id.
#[derive(Default)]
struct Group {
    maps: Vec<MapTable>,
}

impl Group {
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
    /// Value states' tables, indexed by state id.
    values: Vec<ValueTables>,
    /// Map states, by key group.
    groups: Vec<Group>,
}

impl HeapBackend {
    pub(crate) fn new(range: KeyGroupRange) -> Self {
        HeapBackend {
            first: range.first,
            values: Vec::new(),
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

    /// The index of key group `kg` among this backend's.
    #[inline]
    fn index(&self, kg: u32) -> usize {
        (kg - self.first) as usize
    }

    /// The tables of value state `id`.
    #[inline]
    fn value_tables(&mut self, id: &StateId) -> &mut ValueTables {
        let i = id.id as usize;
        if self.values.len() <= i {
            let groups = self.groups.len();
            self.values.resize_with(i + 1, || ValueTables::new(groups));
        }
        &mut self.values[i]
    }

    /// The current value of `key`, cloned.
    #[inline]
    pub(crate) fn value_get<T: Data>(
        &mut self,
        kg: u32,
        id: &StateId,
        key: TableKey<'_>,
    ) -> Result<Option<T>, StateError> {
        let index = self.index(kg);
        let tables = self.value_tables(id).typed::<T>(&id.name)?;
        Ok(tables.get_mut(index, key).map(|v| v.clone()))
    }

    /// Sets the value of `key`.
    #[inline]
    pub(crate) fn value_put<T: Data>(
        &mut self,
        kg: u32,
        id: &StateId,
        key: TableKey<'_>,
        value: T,
    ) -> Result<(), StateError> {
        let index = self.index(kg);
        self.value_tables(id)
            .typed::<T>(&id.name)?
            .put(index, key, value);
        Ok(())
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
        let index = self.index(kg);
        let tables = self.value_tables(id).typed::<T>(&id.name)?;
        if let Some(old) = tables.get_mut(index, key) {
            let new = f(Some(old.clone()));
            *old = new.clone();
            return Ok(new);
        }
        let new = f(None);
        tables.insert_new(index, key, new.clone());
        Ok(new)
    }

    /// Imports a value's archive (a restore).
    pub(crate) fn value_import(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), StateError> {
        let index = self.index(kg);
        self.value_tables(id).import(&id.name, index, key, value)
    }

    pub(crate) fn value_delete(&mut self, kg: u32, id: &StateId, key: TableKey<'_>) {
        let index = self.index(kg);
        self.value_tables(id).remove(index, key);
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

    /// Removes every entry of map state `id` and visits each first.
    pub(crate) fn take_map_state(
        &mut self,
        id: &StateId,
        f: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        for index in 0..self.groups.len() {
            let key_group = self.first + index as u32;
            let Some(table) = self.groups[index].maps.get_mut(id.id as usize) else {
                continue;
            };
            for (key, map) in std::mem::take(table) {
                for (uk, value) in map {
                    f(RawEntry {
                        key_group,
                        state: &id.name,
                        kind: StorageKind::Map,
                        key: &key,
                        user_key: &uk,
                        value: &value,
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Visits the entries of one key group, values first, then map entries.
    fn for_each_in_group(
        &self,
        index: usize,
        states: &[(Rc<str>, StorageKind)],
        encoder: &mut Appender,
        scratch: &mut AlignedVec,
        f: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let group = &self.groups[index];
        let key_group = self.first + index as u32;
        let (encoder, scratch) = (&mut *encoder, &mut *scratch);
        for (id, tables) in self.values.iter().enumerate() {
            let Some((name, _)) = states.get(id) else {
                continue;
            };
            tables.visit_group(index, name, encoder, scratch, &mut |key, value| {
                f(RawEntry {
                    key_group,
                    state: name,
                    kind: StorageKind::Value,
                    key,
                    user_key: &[],
                    value,
                })
            })?;
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
        let (mut encoder, mut scratch) = (Appender::default(), AlignedVec::new());
        for index in 0..self.groups.len() {
            self.for_each_in_group(index, states, &mut encoder, &mut scratch, f)?;
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
        let (mut encoder, mut scratch) = (Appender::default(), AlignedVec::new());
        for index in 0..self.groups.len() {
            writer.begin_group();
            self.for_each_in_group(index, states, &mut encoder, &mut scratch, &mut |e| {
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
