//! Keyed state: what a keyed operator remembers per key, and how it is snapshotted into a
//! checkpoint and restored from one (possibly at a different parallelism).
//!
//! One [`KeyedStateStore`] serves one keyed operator in one subtask. The operator calls
//! [`KeyedStateStore::set_current_key`] before user code sees a record; the typed handles
//! ([`ValueState`], [`ListState`], [`MapState`], [`ReducingState`], [`AggregatingState`]) then
//! read and write the state of that key. Two backends keep the entries:
//!
//! - `hashmap`: in memory, organized by key group; every snapshot writes one file with all of
//!   this subtask's key groups in order, behind an index, so a rescaled restore reads only the
//!   groups it owns.
//! - `rocksdb`: one RocksDB instance in a directory private to the subtask; keys start with the
//!   big-endian key group, so a key-group range is a contiguous key range. Snapshots are RocksDB
//!   checkpoints (hard links), uploaded in full or, incrementally, only the SST files no
//!   confirmed checkpoint uploaded yet.
//!
//! A key's key group is `key_group(key_hash.hash(&key), max_parallelism)` with the job's
//! [`KeyHash`](crate::common::keys::KeyHash), exactly what the hash partitioner uses, so a key's
//! state lives in the subtask its records are sent to.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::str::FromStr;

use rkyv::rancor;
use rkyv::util::AlignedVec;

use crate::common::error::TaskError;
use crate::common::keys::{KeyGroups, KeyHash, key_group, operator_index_for_key_group};
use crate::record::Data;

mod format;
mod heap;
mod memory;
mod rocks;
mod snapshot;
pub mod storage;
#[cfg(test)]
mod tests;
mod write_buffer;

use heap::HeapBackend;
pub use memory::RocksMemory;
use rocks::RocksBackend;
pub use snapshot::{KeyedStateHandle, SnapshotKind, SnapshotLocation, StateFile};
pub use storage::{LocalFileStorage, StateStorage};

/// The largest supported max parallelism (Flink's limit): key groups are stored as 16 bits.
pub const MAX_MAX_PARALLELISM: u32 = 1 << 15;

/// A range of key groups, `[first, last]` inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyGroupRange {
    /// First key group of the range.
    pub first: u32,
    /// Last key group of the range (inclusive).
    pub last: u32,
}

impl KeyGroupRange {
    /// The range `[first, last]`.
    pub fn new(first: u32, last: u32) -> Self {
        KeyGroupRange { first, last }
    }

    /// The key groups owned by subtask `index` of `parallelism` (Flink's
    /// `computeKeyGroupRangeForOperatorIndex`): the inverse of
    /// [`operator_index_for_key_group`].
    pub fn for_subtask(max_parallelism: u32, parallelism: u32, index: u32) -> Self {
        let (max_p, p, i) = (max_parallelism as u64, parallelism as u64, index as u64);
        KeyGroupRange {
            first: (i * max_p).div_ceil(p) as u32,
            last: (((i + 1) * max_p - 1) / p) as u32,
        }
    }

    /// Whether `key_group` lies in the range.
    pub fn contains(&self, key_group: u32) -> bool {
        self.first <= key_group && key_group <= self.last
    }

    /// Whether the two ranges share a key group.
    pub fn intersects(&self, other: &KeyGroupRange) -> bool {
        self.first <= other.last && other.first <= self.last && !self.is_empty()
    }

    /// The key groups in both ranges, if any.
    pub fn intersection(&self, other: &KeyGroupRange) -> Option<KeyGroupRange> {
        let r = KeyGroupRange::new(self.first.max(other.first), self.last.min(other.last));
        (!r.is_empty()).then_some(r)
    }

    /// Whether the range has no key group (a subtask of a parallelism above max parallelism).
    pub fn is_empty(&self) -> bool {
        self.first > self.last
    }

    /// The number of key groups.
    pub fn len(&self) -> u32 {
        if self.is_empty() {
            0
        } else {
            self.last - self.first + 1
        }
    }

    /// As stored in a [`KeyedStateHandle`].
    pub fn as_tuple(&self) -> (u32, u32) {
        (self.first, self.last)
    }

    /// From a [`KeyedStateHandle`]'s `key_groups`.
    pub fn from_tuple((first, last): (u32, u32)) -> Self {
        KeyGroupRange { first, last }
    }
}

impl fmt::Display for KeyGroupRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.first, self.last)
    }
}

/// Which backend keeps the keyed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BackendKind {
    /// In memory; full snapshots.
    #[default]
    HashMap,
    /// RocksDB on local disk; full or incremental snapshots.
    RocksDb,
}

impl BackendKind {
    /// The name used in configuration and in [`KeyedStateHandle::backend`].
    pub fn name(&self) -> &'static str {
        match self {
            BackendKind::HashMap => "hashmap",
            BackendKind::RocksDb => "rocksdb",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = StateError;

    fn from_str(s: &str) -> Result<Self, StateError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hashmap" => Ok(BackendKind::HashMap),
            "rocksdb" => Ok(BackendKind::RocksDb),
            _ => Err(StateError::Config(format!(
                "unknown state backend '{s}': choose 'hashmap' or 'rocksdb'"
            ))),
        }
    }
}

/// How one keyed operator of one subtask keeps its state.
#[derive(Clone, Debug)]
pub struct BackendSettings {
    /// The backend.
    pub kind: BackendKind,
    /// A directory private to this operator, subtask and attempt. RocksDB keeps its instance
    /// there, restores use it for temporary files; the store deletes it when dropped.
    pub local_dir: PathBuf,
    /// RocksDB: upload only new SST files in checkpoints (savepoints are always full).
    pub incremental: bool,
    /// RocksDB: the memory of the slot the subtask runs in, shared with the slot's other
    /// instances; `None` sizes the instance on its own (no memory budget).
    pub rocks_memory: Option<std::sync::Arc<RocksMemory>>,
    /// How keys are hashed into key groups: the job's, as its partitioners hash them.
    pub key_hash: KeyHash,
}

/// Why keyed state could not be read, written, snapshotted or restored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// A file operation failed.
    #[error("{context} {path}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The storage or local path.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file a snapshot references does not exist.
    #[error("state file {path} referenced by the checkpoint does not exist")]
    MissingFile {
        /// Its storage path.
        path: String,
    },
    /// A file a snapshot references has a different size than recorded (truncated).
    #[error("state file {path} has {actual} bytes, the checkpoint recorded {expected}")]
    SizeMismatch {
        /// Its storage path.
        path: String,
        /// The recorded size.
        expected: u64,
        /// The size found.
        actual: u64,
    },
    /// A state file's contents are not what was written (checksum, format).
    #[error("corrupted state file {path}: {reason}")]
    Corrupted {
        /// Its storage or local path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// RocksDB failed.
    #[error("rocksdb at {path}: {source}")]
    RocksDb {
        /// The instance's local directory.
        path: String,
        /// RocksDB's error.
        source: rocksdb::Error,
    },
    /// A key or value could not be serialized or did not validate when read back.
    #[error("state '{state}': {reason}")]
    Codec {
        /// The state's name (or `key` for the current key).
        state: String,
        /// rkyv's error.
        reason: String,
    },
    /// State was accessed before [`KeyedStateStore::set_current_key`].
    #[error("no current key: set_current_key must be called before keyed state is used")]
    NoCurrentKey,
    /// The current key's key group belongs to another subtask: the key was not partitioned
    /// with the same max parallelism.
    #[error(
        "key group {key_group} of the current key is outside this subtask's key groups {range}"
    )]
    KeyGroupOutOfRange {
        /// The key's key group.
        key_group: u32,
        /// This subtask's key groups.
        range: KeyGroupRange,
    },
    /// The same state name was used for two kinds of state.
    #[error("state '{name}' is a {existing} state, it cannot be used as a {requested} state")]
    KindMismatch {
        /// The state's name.
        name: String,
        /// Its kind.
        existing: &'static str,
        /// The kind asked for.
        requested: &'static str,
    },
    /// A snapshot was written by a backend this build does not know.
    #[error("the checkpoint's keyed state uses backend '{backend}', which is not supported")]
    UnknownBackend {
        /// The handle's backend name.
        backend: String,
    },
    /// Invalid settings or arguments.
    #[error("{0}")]
    Config(String),
}

impl StateError {
    fn io(context: &'static str, path: impl fmt::Display, source: std::io::Error) -> Self {
        StateError::Io {
            context,
            path: path.to_string(),
            source,
        }
    }

    fn rocks(path: &Path, source: rocksdb::Error) -> Self {
        StateError::RocksDb {
            path: path.display().to_string(),
            source,
        }
    }
}

impl From<StateError> for TaskError {
    fn from(e: StateError) -> Self {
        TaskError::State(e.to_string())
    }
}

/// How a state's entries are stored: one value per key (value, list, reducing, aggregating
/// state) or many user-key entries per key (map state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StorageKind {
    Value,
    Map,
}

impl StorageKind {
    fn tag(self) -> u8 {
        match self {
            StorageKind::Value => 0,
            StorageKind::Map => 1,
        }
    }

    fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            0 => Some(StorageKind::Value),
            1 => Some(StorageKind::Map),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
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

/// One stored entry, as [`KeyedStateStore::entries`] lists it (for inspection, migration
/// between backends, or tests). Keys and values are rkyv archives.
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

/// Identifies a registered state inside the backends.
#[derive(Clone, Debug)]
pub(crate) struct StateId {
    pub id: u32,
    pub name: Rc<str>,
}

/// Names to ids, so that the per-record path indexes vectors rather than hashing names.
#[derive(Default)]
pub(crate) struct Registry {
    states: Vec<(Rc<str>, StorageKind)>,
    ids: HashMap<Rc<str>, u32>,
}

impl Registry {
    pub(crate) fn register(
        &mut self,
        name: &str,
        kind: StorageKind,
    ) -> Result<StateId, StateError> {
        if let Some(&id) = self.ids.get(name) {
            let (name, existing) = &self.states[id as usize];
            if *existing != kind {
                return Err(StateError::KindMismatch {
                    name: name.to_string(),
                    existing: existing.name(),
                    requested: kind.name(),
                });
            }
            return Ok(StateId {
                id,
                name: name.clone(),
            });
        }
        let id = self.states.len() as u32;
        let name: Rc<str> = Rc::from(name);
        self.states.push((name.clone(), kind));
        self.ids.insert(name.clone(), id);
        Ok(StateId { id, name })
    }

    pub(crate) fn states(&self) -> &[(Rc<str>, StorageKind)] {
        &self.states
    }
}

enum Backend {
    Heap(HeapBackend),
    // Boxed: the handle and options are large, the heap backend is a few words.
    Rocks(Box<RocksBackend>),
}

/// The key the handles act on: its key group and its archive.
struct CurrentKey {
    key_group: u32,
    set: bool,
    bytes: AlignedVec,
}

struct Inner {
    kind: BackendKind,
    max_parallelism: u32,
    /// `key_group` for `max_parallelism`, without a division per record.
    key_groups: KeyGroups,
    key_hash: KeyHash,
    range: KeyGroupRange,
    local_dir: PathBuf,
    current: RefCell<CurrentKey>,
    /// Reused for encoding values, so the per-record path does not allocate.
    scratch: RefCell<AlignedVec>,
    /// Serializes keys and values.
    encoder: RefCell<crate::record::Appender>,
    registry: RefCell<Registry>,
    backend: RefCell<Option<Backend>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Close RocksDB before deleting its directory.
        self.backend.get_mut().take();
        if let Err(e) = std::fs::remove_dir_all(&self.local_dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.local_dir.display(), "could not delete state directory: {e}");
        }
    }
}

/// The keyed state of one keyed operator in one subtask. Cheap to clone (the clones share the
/// state); not `Send`: a subtask's state lives in its thread.
#[derive(Clone)]
pub struct KeyedStateStore {
    inner: Rc<Inner>,
}

impl fmt::Debug for KeyedStateStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedStateStore")
            .field("backend", &self.inner.kind)
            .field("max_parallelism", &self.inner.max_parallelism)
            .field("key_groups", &self.inner.range)
            .finish()
    }
}

impl Inner {
    /// Serializes `value` into `buf` (cleared first) with the store's own rkyv arena (rkyv's
    /// thread-local one costs a lookup, and a shrink, per call).
    fn encode_into<T: Data>(
        &self,
        value: &T,
        buf: &mut AlignedVec,
        state: &str,
    ) -> Result<(), StateError> {
        buf.clear();
        let mut encoder = self.encoder.borrow_mut();
        encoder.encode(buf, value).map_err(|e| StateError::Codec {
            state: state.to_string(),
            reason: match e {
                crate::common::error::RecordError::Serialize(reason) => reason,
                other => other.to_string(),
            },
        })?;
        encoder.trim();
        Ok(())
    }

    /// Serializes `value` into a new buffer.
    fn encode<T: Data>(&self, value: &T, state: &str) -> Result<AlignedVec, StateError> {
        let mut buf = AlignedVec::new();
        self.encode_into(value, &mut buf, state)?;
        Ok(buf)
    }
}

/// Validates and deserializes an archive. rkyv needs the archive aligned; bytes from RocksDB or
/// from inside a snapshot file may not be, and are copied first.
fn decode<T: Data>(bytes: &[u8], state: &str) -> Result<T, StateError> {
    let err = |e: rancor::Error| StateError::Codec {
        state: state.to_string(),
        reason: e.to_string(),
    };
    if (bytes.as_ptr() as usize).is_multiple_of(16) {
        rkyv::from_bytes::<T, rancor::Error>(bytes).map_err(err)
    } else {
        let mut aligned = AlignedVec::<16>::with_capacity(bytes.len());
        aligned.extend_from_slice(bytes);
        rkyv::from_bytes::<T, rancor::Error>(&aligned).map_err(err)
    }
}

impl KeyedStateStore {
    /// Opens the state of one keyed operator in one subtask, owning `key_groups`. `restore` is
    /// empty for a fresh start; otherwise it holds every handle of the restored checkpoint whose
    /// key groups intersect ours (one handle of exactly our range when the parallelism did not
    /// change), with file paths relative to `metadata_dir`.
    ///
    /// Before anything is read, every referenced file must exist with its recorded size; the
    /// error names the first one that does not.
    pub fn open(
        settings: &BackendSettings,
        max_parallelism: u32,
        key_groups: KeyGroupRange,
        restore: &[KeyedStateHandle],
        storage: &dyn StateStorage,
        metadata_dir: &str,
    ) -> Result<Self, StateError> {
        if max_parallelism == 0 || max_parallelism > MAX_MAX_PARALLELISM {
            return Err(StateError::Config(format!(
                "max parallelism {max_parallelism} is outside 1..={MAX_MAX_PARALLELISM}"
            )));
        }
        if key_groups.is_empty() || key_groups.last >= max_parallelism {
            return Err(StateError::Config(format!(
                "key groups {key_groups} are not a non-empty range of 0..{max_parallelism}"
            )));
        }
        for handle in restore {
            if handle.backend != BackendKind::HashMap.name()
                && handle.backend != BackendKind::RocksDb.name()
            {
                return Err(StateError::UnknownBackend {
                    backend: handle.backend.clone(),
                });
            }
        }
        check_files(restore, storage, metadata_dir)?;
        if let Err(e) = std::fs::create_dir_all(&settings.local_dir) {
            return Err(StateError::io(
                "create state directory",
                settings.local_dir.display(),
                e,
            ));
        }
        // From here on, `inner`'s Drop deletes the local directory if the restore fails.
        let inner = Rc::new(Inner {
            kind: settings.kind,
            max_parallelism,
            key_groups: KeyGroups::new(max_parallelism),
            key_hash: settings.key_hash,
            range: key_groups,
            local_dir: settings.local_dir.clone(),
            current: RefCell::new(CurrentKey {
                key_group: 0,
                set: false,
                bytes: AlignedVec::new(),
            }),
            scratch: RefCell::new(AlignedVec::new()),
            encoder: RefCell::default(),
            registry: RefCell::new(Registry::default()),
            backend: RefCell::new(None),
        });
        let store = KeyedStateStore { inner };
        let relevant: Vec<&KeyedStateHandle> = restore
            .iter()
            .filter(|h| KeyGroupRange::from_tuple(h.key_groups).intersects(&key_groups))
            .collect();
        let backend = match settings.kind {
            BackendKind::HashMap => Backend::Heap(HeapBackend::new(key_groups)),
            BackendKind::RocksDb => {
                let same_range = relevant.len() == 1
                    && relevant[0].backend == BackendKind::RocksDb.name()
                    && relevant[0].key_groups == key_groups.as_tuple();
                if same_range {
                    // The common case: same parallelism. Use the checkpoint's files as they are.
                    let rocks =
                        RocksBackend::restore_exact(settings, relevant[0], storage, metadata_dir)?;
                    *store.inner.backend.borrow_mut() = Some(Backend::Rocks(Box::new(rocks)));
                    return Ok(store);
                }
                Backend::Rocks(Box::new(RocksBackend::open_fresh(settings)?))
            }
        };
        *store.inner.backend.borrow_mut() = Some(backend);
        for (i, handle) in relevant.iter().enumerate() {
            store.import(handle, i, storage, metadata_dir)?;
        }
        Ok(store)
    }

    /// Copies the entries of `handle` in our key groups into the backend (rescaling, or a
    /// snapshot of the other backend).
    fn import(
        &self,
        handle: &KeyedStateHandle,
        index: usize,
        storage: &dyn StateStorage,
        metadata_dir: &str,
    ) -> Result<(), StateError> {
        let range = self.inner.range;
        let mut registry = self.inner.registry.borrow_mut();
        let mut backend = self.inner.backend.borrow_mut();
        let Some(backend) = backend.as_mut() else {
            return Ok(());
        };
        let mut sink = ImportSink::new(backend);
        let mut visit = |e: RawEntry<'_>| -> Result<(), StateError> {
            let id = registry.register(e.state, e.kind)?;
            sink.insert(&id, &e)
        };
        if handle.backend == BackendKind::HashMap.name() {
            for file in &handle.files {
                let path = storage::join(metadata_dir, &file.path);
                let bytes = storage
                    .read(&path)
                    .map_err(|e| StateError::io("read state file", &path, e))?;
                format::read_hashmap_file(
                    &bytes,
                    &path,
                    self.inner.max_parallelism,
                    range,
                    &mut visit,
                )?;
            }
        } else {
            let dir = self.inner.local_dir.join(format!("import-{index}"));
            rocks::read_checkpoint(handle, storage, metadata_dir, &dir, range, &mut visit)?;
        }
        sink.finish()
    }

    /// The backend this store uses.
    pub fn backend_kind(&self) -> BackendKind {
        self.inner.kind
    }

    /// The key groups this store owns.
    pub fn key_groups(&self) -> KeyGroupRange {
        self.inner.range
    }

    /// The max parallelism the key groups are computed with.
    pub fn max_parallelism(&self) -> u32 {
        self.inner.max_parallelism
    }

    /// Makes `key` the key the state handles act on. Its key group is computed as the hash
    /// partitioner does; a key of another subtask's key groups is an error (the operator and the
    /// partitioner disagree on max parallelism).
    pub fn set_current_key<K: Hash + Data>(&self, key: &K) -> Result<(), StateError> {
        let kg = self.inner.key_groups.of(self.inner.key_hash.hash(key));
        if !self.inner.range.contains(kg) {
            return Err(StateError::KeyGroupOutOfRange {
                key_group: kg,
                range: self.inner.range,
            });
        }
        let mut current = self.inner.current.borrow_mut();
        current.set = false;
        self.inner.encode_into(key, &mut current.bytes, "key")?;
        current.key_group = kg;
        current.set = true;
        Ok(())
    }

    /// Like [`set_current_key`](Self::set_current_key) for a key already serialized (its rkyv
    /// archive) with its key group computed by the caller.
    pub fn set_current_key_bytes(&self, key_group: u32, key: &[u8]) -> Result<(), StateError> {
        if !self.inner.range.contains(key_group) {
            return Err(StateError::KeyGroupOutOfRange {
                key_group,
                range: self.inner.range,
            });
        }
        let mut current = self.inner.current.borrow_mut();
        current.bytes.clear();
        current.bytes.extend_from_slice(key);
        current.key_group = key_group;
        current.set = true;
        Ok(())
    }

    /// The current key's key group, if a key is set.
    pub fn current_key_group(&self) -> Option<u32> {
        let current = self.inner.current.borrow();
        current.set.then_some(current.key_group)
    }

    fn register(&self, name: &str, kind: StorageKind) -> Result<StateId, StateError> {
        self.inner.registry.borrow_mut().register(name, kind)
    }

    /// The value state `name` (the same state every time the name is used).
    pub fn value_state<T: Data>(&self, name: &str) -> Result<ValueState<T>, StateError> {
        Ok(ValueState {
            cell: Cell::new(self, name, StorageKind::Value)?,
            _t: PhantomData,
        })
    }

    /// The list state `name`.
    pub fn list_state<T: Data>(&self, name: &str) -> Result<ListState<T>, StateError> {
        Ok(ListState {
            cell: Cell::new(self, name, StorageKind::Value)?,
            _t: PhantomData,
        })
    }

    /// The map state `name`.
    pub fn map_state<UK: Data, UV: Data>(
        &self,
        name: &str,
    ) -> Result<MapState<UK, UV>, StateError> {
        Ok(MapState {
            cell: Cell::new(self, name, StorageKind::Map)?,
            _t: PhantomData,
        })
    }

    /// The reducing state `name`: `add` folds values with `reduce`.
    pub fn reducing_state<T: Data>(
        &self,
        name: &str,
        reduce: impl Fn(T, T) -> T + 'static,
    ) -> Result<ReducingState<T>, StateError> {
        Ok(ReducingState {
            cell: Cell::new(self, name, StorageKind::Value)?,
            reduce: Rc::new(reduce),
        })
    }

    /// The aggregating state `name`: `add` folds inputs into an accumulator with `function`.
    pub fn aggregating_state<IN, ACC: Data, OUT, F>(
        &self,
        name: &str,
        function: F,
    ) -> Result<AggregatingState<IN, ACC, OUT, F>, StateError>
    where
        F: AggregateFunction<IN, ACC, OUT>,
    {
        Ok(AggregatingState {
            cell: Cell::new(self, name, StorageKind::Value)?,
            function: Rc::new(function),
            _t: PhantomData,
        })
    }

    /// Every stored entry of every state, in no particular order.
    pub fn entries(&self) -> Result<Vec<StateEntry>, StateError> {
        let mut out = Vec::new();
        self.for_each_entry(&mut |e: RawEntry<'_>| {
            out.push(StateEntry {
                key_group: e.key_group,
                state: e.state.to_string(),
                key: e.key.to_vec(),
                user_key: (e.kind == StorageKind::Map).then(|| e.user_key.to_vec()),
                value: e.value.to_vec(),
            });
            Ok(())
        })?;
        Ok(out)
    }

    fn for_each_entry(
        &self,
        f: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let registry = self.inner.registry.borrow();
        let mut backend = self.inner.backend.borrow_mut();
        match backend.as_mut() {
            Some(Backend::Heap(h)) => h.for_each(registry.states(), f),
            Some(Backend::Rocks(r)) => r.for_each(self.inner.range, f),
            None => Ok(()),
        }
    }

    /// Writes a snapshot of all state for checkpoint (or savepoint) `location`, returning the
    /// handle to acknowledge. `file_prefix` is unique per operator, subtask and attempt; file
    /// names add the checkpoint id, so no snapshot overwrites another's files.
    pub fn snapshot(
        &self,
        location: &SnapshotLocation,
        storage: &dyn StateStorage,
        file_prefix: &str,
    ) -> Result<KeyedStateHandle, StateError> {
        let registry = self.inner.registry.borrow();
        let mut backend = self.inner.backend.borrow_mut();
        match backend.as_mut() {
            Some(Backend::Heap(h)) => h.snapshot(
                registry.states(),
                self.inner.max_parallelism,
                location,
                storage,
                file_prefix,
            ),
            Some(Backend::Rocks(r)) => r.snapshot(
                self.inner.range,
                location,
                storage,
                file_prefix,
                &self.inner.local_dir,
            ),
            None => Err(StateError::Config("the state store is closed".into())),
        }
    }

    /// RocksDB: compacts every level now and waits for it (after a bulk load, so that later
    /// incremental checkpoints do not re-upload what background compaction rewrites). The
    /// hashmap backend has nothing to compact.
    pub fn compact(&self) -> Result<(), StateError> {
        match self.inner.backend.borrow_mut().as_mut() {
            Some(Backend::Rocks(r)) => r.compact(),
            _ => Ok(()),
        }
    }

    /// Checkpoint `checkpoint_id` completed: the files it uploaded may be referenced by later
    /// incremental checkpoints.
    pub fn notify_checkpoint_complete(&self, checkpoint_id: u64) {
        if let Some(Backend::Rocks(r)) = self.inner.backend.borrow_mut().as_mut() {
            r.notify_checkpoint_complete(checkpoint_id);
        }
    }

    /// Runs `f` on the backend with the current key.
    fn with_key<R>(
        &self,
        f: impl FnOnce(&mut Backend, u32, &[u8]) -> Result<R, StateError>,
    ) -> Result<R, StateError> {
        let current = self.inner.current.borrow();
        if !current.set {
            return Err(StateError::NoCurrentKey);
        }
        let mut backend = self.inner.backend.borrow_mut();
        let Some(backend) = backend.as_mut() else {
            return Err(StateError::Config("the state store is closed".into()));
        };
        f(backend, current.key_group, &current.bytes)
    }
}

/// Checks that every file of every handle exists with its recorded size.
fn check_files(
    restore: &[KeyedStateHandle],
    storage: &dyn StateStorage,
    metadata_dir: &str,
) -> Result<(), StateError> {
    for handle in restore {
        for file in &handle.files {
            let path = storage::join(metadata_dir, &file.path);
            match storage.size(&path) {
                Err(e) => return Err(StateError::io("check state file", &path, e)),
                Ok(None) => return Err(StateError::MissingFile { path }),
                Ok(Some(actual)) if actual != file.size => {
                    return Err(StateError::SizeMismatch {
                        path,
                        expected: file.size,
                        actual,
                    });
                }
                Ok(Some(_)) => {}
            }
        }
    }
    Ok(())
}

/// Inserts imported entries, batching RocksDB writes.
struct ImportSink<'a> {
    backend: &'a mut Backend,
    batch: rocksdb::WriteBatch,
    key: Vec<u8>,
}

impl<'a> ImportSink<'a> {
    fn new(backend: &'a mut Backend) -> Self {
        ImportSink {
            backend,
            batch: rocksdb::WriteBatch::default(),
            key: Vec::new(),
        }
    }

    fn insert(&mut self, id: &StateId, e: &RawEntry<'_>) -> Result<(), StateError> {
        match self.backend {
            Backend::Heap(h) => {
                match e.kind {
                    StorageKind::Value => h.value_put(e.key_group, id, e.key, e.value),
                    StorageKind::Map => {
                        h.map_put(e.key_group, id, e.key, e.user_key, e.value);
                    }
                }
                Ok(())
            }
            Backend::Rocks(r) => {
                rocks::encode_key(&mut self.key, e.key_group, &id.name, e.kind, e.key);
                self.key.extend_from_slice(e.user_key);
                self.batch.put(&self.key, e.value);
                if self.batch.len() >= 16 * 1024 {
                    let batch = std::mem::take(&mut self.batch);
                    r.write_batch(batch)?;
                }
                Ok(())
            }
        }
    }

    fn finish(mut self) -> Result<(), StateError> {
        if let Backend::Rocks(r) = self.backend
            && !self.batch.is_empty()
        {
            r.write_batch(std::mem::take(&mut self.batch))?;
        }
        Ok(())
    }
}

/// What every state handle holds: the store and the registered state.
#[derive(Clone)]
struct Cell {
    store: KeyedStateStore,
    id: StateId,
}

impl Cell {
    fn new(store: &KeyedStateStore, name: &str, kind: StorageKind) -> Result<Self, StateError> {
        Ok(Cell {
            store: store.clone(),
            id: store.register(name, kind)?,
        })
    }

    fn get<T: Data>(&self) -> Result<Option<T>, StateError> {
        let name = &self.id.name;
        self.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => h
                .value_get(kg, &self.id, key)
                .map(|v| decode(v, name))
                .transpose(),
            Backend::Rocks(r) => r.value_get(kg, &self.id, key, |v| {
                v.map(|v| decode(v, name)).transpose()
            })?,
        })
    }

    fn put<T: Data>(&self, value: &T) -> Result<(), StateError> {
        let mut scratch = self.store.inner.scratch.borrow_mut();
        self.store
            .inner
            .encode_into(value, &mut scratch, &self.id.name)?;
        self.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.value_put(kg, &self.id, key, &scratch);
                Ok(())
            }
            Backend::Rocks(r) => r.value_put(kg, &self.id, key, &scratch),
        })
    }

    fn clear(&self) -> Result<(), StateError> {
        self.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.value_delete(kg, &self.id, key);
                Ok(())
            }
            Backend::Rocks(r) => r.value_delete(kg, &self.id, key),
        })
    }
}

/// One value per key.
#[derive(Clone)]
pub struct ValueState<T> {
    cell: Cell,
    _t: PhantomData<fn() -> T>,
}

impl<T: Data> ValueState<T> {
    /// The current key's value, if any.
    pub fn value(&self) -> Result<Option<T>, StateError> {
        self.cell.get()
    }

    /// Sets the current key's value.
    pub fn update(&self, value: T) -> Result<(), StateError> {
        self.cell.put(&value)
    }

    /// Removes the current key's value.
    pub fn clear(&self) -> Result<(), StateError> {
        self.cell.clear()
    }
}

/// A list of values per key. Stored as one archive of the whole list: `add` rewrites it, which
/// suits the short lists (window contents, pending events) keyed operators keep.
#[derive(Clone)]
pub struct ListState<T> {
    cell: Cell,
    _t: PhantomData<fn() -> T>,
}

impl<T: Data> ListState<T> {
    /// The current key's list (empty if none).
    pub fn get(&self) -> Result<Vec<T>, StateError> {
        Ok(self.cell.get::<Vec<T>>()?.unwrap_or_default())
    }

    /// Appends a value to the current key's list.
    pub fn add(&self, value: T) -> Result<(), StateError> {
        let mut list = self.get()?;
        list.push(value);
        self.cell.put(&list)
    }

    /// Replaces the current key's list; an empty list clears it.
    pub fn update(&self, values: Vec<T>) -> Result<(), StateError> {
        if values.is_empty() {
            self.cell.clear()
        } else {
            self.cell.put(&values)
        }
    }

    /// Removes the current key's list.
    pub fn clear(&self) -> Result<(), StateError> {
        self.cell.clear()
    }
}

/// A map per key: each entry is stored on its own, so a large map is not rewritten on `put`.
#[derive(Clone)]
pub struct MapState<UK, UV> {
    cell: Cell,
    _t: PhantomData<fn() -> (UK, UV)>,
}

impl<UK: Data, UV: Data> MapState<UK, UV> {
    /// The value under `user_key` for the current key.
    pub fn get(&self, user_key: &UK) -> Result<Option<UV>, StateError> {
        let uk = self.cell.store.inner.encode(user_key, &self.cell.id.name)?;
        let id = &self.cell.id;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => h
                .map_get(kg, id, key, &uk)
                .map(|v| decode(v, &id.name))
                .transpose(),
            Backend::Rocks(r) => r.map_get(kg, id, key, &uk, |v| {
                v.map(|v| decode(v, &id.name)).transpose()
            })?,
        })
    }

    /// Sets the value under `user_key` for the current key.
    pub fn put(&self, user_key: UK, value: UV) -> Result<(), StateError> {
        let id = &self.cell.id;
        let uk = self.cell.store.inner.encode(&user_key, &id.name)?;
        let v = self.cell.store.inner.encode(&value, &id.name)?;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.map_put(kg, id, key, &uk, &v);
                Ok(())
            }
            Backend::Rocks(r) => r.map_put(kg, id, key, &uk, &v),
        })
    }

    /// Removes `user_key` from the current key's map.
    pub fn remove(&self, user_key: &UK) -> Result<(), StateError> {
        let id = &self.cell.id;
        let uk = self.cell.store.inner.encode(user_key, &id.name)?;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.map_remove(kg, id, key, &uk);
                Ok(())
            }
            Backend::Rocks(r) => r.map_remove(kg, id, key, &uk),
        })
    }

    /// Whether the current key's map has `user_key`.
    pub fn contains(&self, user_key: &UK) -> Result<bool, StateError> {
        let id = &self.cell.id;
        let uk = self.cell.store.inner.encode(user_key, &id.name)?;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => Ok(h.map_get(kg, id, key, &uk).is_some()),
            Backend::Rocks(r) => r.map_get(kg, id, key, &uk, |v| v.is_some()),
        })
    }

    /// All entries of the current key's map, in no particular order.
    pub fn entries(&self) -> Result<Vec<(UK, UV)>, StateError> {
        let id = &self.cell.id;
        let mut out = Vec::new();
        self.cell.store.with_key(|b, kg, key| {
            let mut f = |uk: &[u8], v: &[u8]| -> Result<(), StateError> {
                out.push((decode(uk, &id.name)?, decode(v, &id.name)?));
                Ok(())
            };
            match b {
                Backend::Heap(h) => h.map_for_each(kg, id, key, &mut f),
                Backend::Rocks(r) => r.map_for_each(kg, id, key, &mut f),
            }
        })?;
        Ok(out)
    }

    /// Whether the current key's map has no entry.
    pub fn is_empty(&self) -> Result<bool, StateError> {
        let id = &self.cell.id;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => Ok(h.map_is_empty(kg, id, key)),
            Backend::Rocks(r) => r.map_is_empty(kg, id, key),
        })
    }

    /// Removes the current key's map.
    pub fn clear(&self) -> Result<(), StateError> {
        let id = &self.cell.id;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.map_clear(kg, id, key);
                Ok(())
            }
            Backend::Rocks(r) => r.map_clear(kg, id, key),
        })
    }
}

/// A value per key that `add` folds new values into.
#[derive(Clone)]
pub struct ReducingState<T> {
    cell: Cell,
    reduce: Rc<dyn Fn(T, T) -> T>,
}

impl<T: Data> ReducingState<T> {
    /// The current key's folded value, if any value was added.
    pub fn get(&self) -> Result<Option<T>, StateError> {
        self.cell.get()
    }

    /// Folds `value` into the current key's value.
    pub fn add(&self, value: T) -> Result<(), StateError> {
        let next = match self.cell.get::<T>()? {
            Some(acc) => (self.reduce)(acc, value),
            None => value,
        };
        self.cell.put(&next)
    }

    /// Removes the current key's value.
    pub fn clear(&self) -> Result<(), StateError> {
        self.cell.clear()
    }
}

/// An aggregation with an accumulator (Flink's `AggregateFunction`): inputs `IN` are added to
/// an accumulator `ACC` (the stored state), from which the result `OUT` is computed.
pub trait AggregateFunction<IN, ACC, OUT>: 'static {
    /// A new, empty accumulator.
    fn create_accumulator(&self) -> ACC;
    /// Adds one input to the accumulator.
    fn add(&self, value: IN, accumulator: ACC) -> ACC;
    /// The result of an accumulator.
    fn get_result(&self, accumulator: ACC) -> OUT;
}

/// A value per key that inputs are aggregated into through an [`AggregateFunction`].
pub struct AggregatingState<IN, ACC, OUT, F> {
    cell: Cell,
    function: Rc<F>,
    _t: PhantomData<fn(IN) -> (ACC, OUT)>,
}

impl<IN, ACC, OUT, F> Clone for AggregatingState<IN, ACC, OUT, F> {
    fn clone(&self) -> Self {
        AggregatingState {
            cell: self.cell.clone(),
            function: self.function.clone(),
            _t: PhantomData,
        }
    }
}

impl<IN, ACC: Data, OUT, F: AggregateFunction<IN, ACC, OUT>> AggregatingState<IN, ACC, OUT, F> {
    /// The result for the current key, if any input was added.
    pub fn get(&self) -> Result<Option<OUT>, StateError> {
        Ok(self
            .cell
            .get::<ACC>()?
            .map(|acc| self.function.get_result(acc)))
    }

    /// Adds `value` to the current key's accumulator.
    pub fn add(&self, value: IN) -> Result<(), StateError> {
        let acc = match self.cell.get::<ACC>()? {
            Some(acc) => acc,
            None => self.function.create_accumulator(),
        };
        self.cell.put(&self.function.add(value, acc))
    }

    /// Removes the current key's accumulator.
    pub fn clear(&self) -> Result<(), StateError> {
        self.cell.clear()
    }
}

/// The subtask (of `parallelism`) whose key groups hold `key` in a new job (for tests and
/// tools).
pub fn subtask_for_key<K: Hash + ?Sized>(key: &K, max_parallelism: u32, parallelism: u32) -> u32 {
    operator_index_for_key_group(
        max_parallelism,
        parallelism,
        key_group(KeyHash::CURRENT.hash(key), max_parallelism),
    )
}
