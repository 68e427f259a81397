//! The keyed state store of one keyed operator in one subtask: opening (and restoring), the
//! current key, snapshots, and the backend behind it.

use std::cell::RefCell;
use std::fmt;
use std::hash::Hash;
use std::path::PathBuf;
use std::rc::Rc;

use rkyv::util::AlignedVec;

use super::backend::Backend;
use super::format;
use super::heap::HeapBackend;
use super::import::ImportSink;
use super::rocks::{self, RocksBackend};
use super::storage::StateStorage;
use super::values::{KeyProbe, TableKey};
use super::{
    BackendKind, BackendSettings, KeyGroupRange, KeyedStateHandle, MAX_MAX_PARALLELISM, RawEntry,
    Registry, SnapshotLocation, StateEntry, StateError, StateId, StorageKind,
};
use crate::common::error::RecordError;
use crate::common::keys::{KeyGroups, KeyHash};
use crate::record::Data;

/// The key the handles act on: its key group, its archive and what the hashmap tables need.
struct CurrentKey {
    key_group: u32,
    set: bool,
    bytes: AlignedVec,
    probe: KeyProbe,
}

impl CurrentKey {
    #[inline]
    fn table_key(&self) -> TableKey<'_> {
        TableKey::new(&self.bytes, self.probe)
    }
}

pub(super) struct Inner {
    kind: BackendKind,
    max_parallelism: u32,
    /// `key_group` for `max_parallelism`, without a division per record.
    key_groups: KeyGroups,
    key_hash: KeyHash,
    range: KeyGroupRange,
    local_dir: PathBuf,
    current: RefCell<CurrentKey>,
    /// Reused for encoding values, so the per-record path does not allocate.
    pub(super) scratch: RefCell<AlignedVec>,
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
    pub(super) inner: Rc<Inner>,
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
    pub(super) fn encode_into<T: Data>(
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
                RecordError::Serialize(reason) => reason,
                other => other.to_string(),
            },
        })?;
        encoder.trim();
        Ok(())
    }

    /// Makes `key` the current key: its key group (as the hash partitioner computes it; one of
    /// another subtask's key groups is an error, the operator and the partitioner disagree on
    /// max parallelism), its archive and its probe.
    #[inline]
    fn make_current<K: Hash + Data>(
        &self,
        current: &mut CurrentKey,
        key: &K,
    ) -> Result<(), StateError> {
        let kg = self.key_groups.of(self.key_hash.hash(key));
        if !self.range.contains(kg) {
            return Err(StateError::KeyGroupOutOfRange {
                key_group: kg,
                range: self.range,
            });
        }
        current.set = false;
        match crate::record::plain_archive(key) {
            // An integer key (the common case) is its own archive: no serializer call.
            Some(bytes) => {
                current.bytes.clear();
                current.bytes.extend_from_slice(bytes);
            }
            None => self.encode_into(key, &mut current.bytes, "key")?,
        }
        current.probe = KeyProbe::of(&current.bytes);
        current.key_group = kg;
        current.set = true;
        Ok(())
    }

    /// Serializes `value` into a new buffer.
    pub(super) fn encode<T: Data>(&self, value: &T, state: &str) -> Result<AlignedVec, StateError> {
        let mut buf = AlignedVec::new();
        self.encode_into(value, &mut buf, state)?;
        Ok(buf)
    }
}

/// An entry [`KeyedStateStore::take_map_state`] took out: (key group, key archive, user key,
/// value).
pub type TakenEntry<UK, UV> = (u32, Vec<u8>, UK, UV);

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
                probe: KeyProbe::default(),
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
                let path = file.resolve(metadata_dir)?;
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
        self.inner
            .make_current(&mut self.inner.current.borrow_mut(), key)
    }

    /// Runs `f` for each item with the item's key (`key` of it) as the current key and the
    /// backend borrowed once for all of them: what [`set_current_key`](Self::set_current_key)
    /// and a handle's call do per record, for a batch of records. The last item's key stays
    /// current.
    #[inline]
    pub(super) fn with_each_key<I, K: Hash + Data>(
        &self,
        items: impl Iterator<Item = I>,
        key: impl Fn(&I) -> K,
        mut f: impl FnMut(&mut Backend, u32, TableKey<'_>, I) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let mut current = self.inner.current.borrow_mut();
        let mut backend = self.inner.backend.borrow_mut();
        let Some(backend) = backend.as_mut() else {
            return Err(StateError::Config("the state store is closed".into()));
        };
        for item in items {
            self.inner.make_current(&mut current, &key(&item))?;
            f(backend, current.key_group, current.table_key(), item)?;
        }
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
        current.probe = KeyProbe::of(key);
        current.key_group = key_group;
        current.set = true;
        Ok(())
    }

    /// The current key's key group and archive, if a key is set.
    pub(super) fn current_key_archive(&self) -> Option<(u32, Vec<u8>)> {
        let current = self.inner.current.borrow();
        current
            .set
            .then(|| (current.key_group, current.bytes.to_vec()))
    }

    /// The current key, deserialized.
    pub fn current_key<K: Data>(&self) -> Result<K, StateError> {
        let current = self.inner.current.borrow();
        if !current.set {
            return Err(StateError::Config("no current key is set".into()));
        }
        super::archives::decode(&current.bytes, "current key")
    }

    /// The current key's key group, if a key is set.
    pub fn current_key_group(&self) -> Option<u32> {
        let current = self.inner.current.borrow();
        current.set.then_some(current.key_group)
    }

    pub(super) fn register(&self, name: &str, kind: StorageKind) -> Result<StateId, StateError> {
        self.inner.registry.borrow_mut().register(name, kind)
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

    /// Removes every entry of map state `name` (of any key) and returns them, decoded: for an
    /// operator whose state moved to another layout, to convert what a snapshot of the old
    /// layout restored. Each key archive is one for
    /// [`set_current_key_bytes`](Self::set_current_key_bytes).
    pub fn take_map_state<UK: Data, UV: Data>(
        &self,
        name: &str,
    ) -> Result<Vec<TakenEntry<UK, UV>>, StateError> {
        let mut out = Vec::new();
        let mut collect = |e: RawEntry<'_>| -> Result<(), StateError> {
            out.push((
                e.key_group,
                e.key.to_vec(),
                super::archives::decode(e.user_key, name)?,
                super::archives::decode(e.value, name)?,
            ));
            Ok(())
        };
        let id = self.register(name, StorageKind::Map)?;
        let mut backend = self.inner.backend.borrow_mut();
        match backend.as_mut() {
            Some(Backend::Heap(h)) => h.take_map_state(&id, &mut collect)?,
            Some(Backend::Rocks(r)) => r.take_map_state(self.inner.range, name, &mut collect)?,
            None => return Err(StateError::Config("the state store is closed".into())),
        }
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
    pub(super) fn with_key<R>(
        &self,
        f: impl FnOnce(&mut Backend, u32, TableKey<'_>) -> Result<R, StateError>,
    ) -> Result<R, StateError> {
        let current = self.inner.current.borrow();
        if !current.set {
            return Err(StateError::NoCurrentKey);
        }
        let mut backend = self.inner.backend.borrow_mut();
        let Some(backend) = backend.as_mut() else {
            return Err(StateError::Config("the state store is closed".into()));
        };
        f(backend, current.key_group, current.table_key())
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
            let path = file.resolve(metadata_dir)?;
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
