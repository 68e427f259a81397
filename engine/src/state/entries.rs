//! Stored entries as the store and the backends exchange them.

use super::StateError;

/// How a state's entries are stored: one value per key (value, list, reducing, aggregating
/// state) or many user-key entries per key (map state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StorageKind {
    Value,
    Map,
}

impl StorageKind {
    pub(super) fn tag(self) -> u8 {
        match self {
            StorageKind::Value => 0,
            StorageKind::Map => 1,
        }
    }

    pub(super) fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            0 => Some(StorageKind::Value),
            1 => Some(StorageKind::Map),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            StorageKind::Value => "single-value",
            StorageKind::Map => "map",
        }
    }
}

/// One stored entry, borrowed: what snapshots and restores move between backends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawEntry<'a> {
    pub key_group: u32,
    pub state: &'a str,
    pub kind: StorageKind,
    pub key: &'a [u8],
    /// The map key for map state, empty otherwise.
    pub user_key: &'a [u8],
    pub value: &'a [u8],
}

/// One stored entry, as [`KeyedStateStore::entries`](super::KeyedStateStore::entries) lists it
/// (for inspection, migration between backends, or tests). Keys and values are rkyv archives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateEntry {
    /// The key's key group.
    pub key_group: u32,
    /// The state's name.
    pub state: String,
    /// The key's archive.
    pub key: Vec<u8>,
    /// The map key's archive, for map state.
    pub user_key: Option<Vec<u8>>,
    /// The value's archive (for list state, the whole `Vec`).
    pub value: Vec<u8>,
}

/// Visits (user key, value) archives of one key's map.
pub(crate) type BytesVisitor<'a, R = ()> = dyn FnMut(&[u8], &[u8]) -> Result<R, StateError> + 'a;
