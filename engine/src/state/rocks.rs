//! The RocksDB backend: one instance in the subtask's local directory.
//!
//! Key layout: `[key group u16 BE][name length u16 BE][name][kind u8][key length u32 BE][key]`,
//! followed by the user key for map state. The key group comes first so that a key-group range
//! is one contiguous key range (rescaling reads exactly its groups); the length prefixes keep a
//! key from being a prefix of another key's entries.
//!
//! The write-ahead log is disabled: durability comes from checkpoints, as in Flink, and a
//! snapshot flushes the memtables first.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocksdb::checkpoint::Checkpoint;
use rocksdb::{
    BlockBasedOptions, DB, DBCompressionType, Options, ReadOptions, WriteBatch, WriteOptions,
};

use super::memory::{RocksMemory, ValueCacheLease};
use super::storage::{self, StateStorage};
use super::write_buffer::WriteBuffer;
use super::{
    BackendKind, BackendSettings, BytesVisitor, KeyGroupRange, KeyedStateHandle, RawEntry,
    SnapshotLocation, StateError, StateFile, StateId, StorageKind,
};

/// Writes `[kg][name][kind][key]` into `buf`.
#[inline]
pub(crate) fn encode_key(buf: &mut Vec<u8>, kg: u32, name: &str, kind: StorageKind, key: &[u8]) {
    buf.clear();
    // Key groups are below MAX_MAX_PARALLELISM (2^15), checked when the store opens.
    buf.extend_from_slice(&(kg as u16).to_be_bytes());
    buf.extend_from_slice(&(name.len() as u16).to_be_bytes());
    buf.extend_from_slice(name.as_bytes());
    buf.push(kind.tag());
    buf.extend_from_slice(&(key.len() as u32).to_be_bytes());
    buf.extend_from_slice(key);
}

/// Splits a stored key into its parts; `None` if it is not one of ours.
fn decode_key(k: &[u8]) -> Option<RawEntry<'_>> {
    let kg = u16::from_be_bytes([*k.first()?, *k.get(1)?]) as u32;
    let name_len = u16::from_be_bytes([*k.get(2)?, *k.get(3)?]) as usize;
    let name = std::str::from_utf8(k.get(4..4 + name_len)?).ok()?;
    let mut pos = 4 + name_len;
    let kind = StorageKind::from_tag(*k.get(pos)?)?;
    pos += 1;
    let mut len = [0u8; 4];
    len.copy_from_slice(k.get(pos..pos + 4)?);
    pos += 4;
    let key_len = u32::from_be_bytes(len) as usize;
    let key = k.get(pos..pos.checked_add(key_len)?)?;
    let user_key = &k[pos + key_len..];
    Some(RawEntry {
        key_group: kg,
        state: name,
        kind,
        key,
        user_key,
        value: &[],
    })
}

/// The smallest key greater than every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Length of the part of a stored key before the map's user key: `[kg][name][kind][key]`.
fn key_prefix_len(k: &[u8]) -> Option<usize> {
    let name_len = u16::from_be_bytes([*k.get(2)?, *k.get(3)?]) as usize;
    let pos = 4 + name_len + 1;
    let mut len = [0u8; 4];
    len.copy_from_slice(k.get(pos..pos + 4)?);
    let end = (pos + 4).checked_add(u32::from_be_bytes(len) as usize)?;
    (end <= k.len()).then_some(end)
}

/// RocksDB's prefix extractor: a key's entries (one value, or a map's entries) share a prefix,
/// which the memtable's and the SSTs' bloom filters record, so that a seek to one key's map
/// entries skips files without them.
fn key_prefix(k: &[u8]) -> &[u8] {
    match key_prefix_len(k) {
        Some(n) => &k[..n],
        None => k,
    }
}

fn in_prefix_domain(k: &[u8]) -> bool {
    key_prefix_len(k).is_some()
}

/// Bits of the memtable's bloom filter as a share of the memtable's bytes (RocksDB's
/// `memtable_prefix_bloom_size_ratio`): 0.02 of 64 MiB is ~10 bits per entry for entries of
/// ~50 bytes with the skiplist's overhead, a 1% false-positive rate.
const MEMTABLE_BLOOM_RATIO: f64 = 0.02;

fn options(memory: &RocksMemory) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    // The crate is built with lz4 only; the default (snappy) is not linked.
    o.set_compression_type(DBCompressionType::Lz4);
    // Large enough that a checkpoint interval's updates of a hot key set mostly overwrite each
    // other in memory instead of producing SSTs; the slot's write buffer manager caps the sum.
    o.set_write_buffer_size(memory.split().memtable_size());
    if let Some(manager) = memory.write_buffer_manager() {
        o.set_write_buffer_manager(manager);
    }
    o.set_max_background_jobs(2);
    // The default skiplist memtable: the write-back buffer hands it sorted batches, which it
    // inserts nearly sequentially, and a flush reads it in order as it is. (A hash memtable
    // made point lookups cheaper but sorted all its entries on every flush: a third of the
    // CPU of a keyed count over 5 M keys.) Writes are plain inserts: an in-place update
    // would search the skiplist before every insert.
    o.set_allow_concurrent_memtable_write(false);
    o.set_enable_write_thread_adaptive_yield(false);
    // A lookup of a key absent from the memtable (most lookups: the key is in an SST, or new)
    // is answered by the memtable's bloom filter instead of a skiplist search. The filter holds
    // prefixes, which for value state are whole keys; adding whole keys too would hash every
    // insert twice (4% more CPU in a keyed count).
    o.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO);
    o.set_prefix_extractor(rocksdb::SliceTransform::create(
        "sluice-key",
        key_prefix,
        Some(in_prefix_domain),
    ));
    let mut table = BlockBasedOptions::default();
    // Index and filter blocks stay beside the cache, in the table readers (~1.3 bytes per key
    // with these filters): in a small cache, data blocks evict them and every lookup reloads
    // them (a keyed count with a 16 MiB budget ran 5x slower with them cached).
    table.set_block_cache(memory.cache());
    // Point lookups of absent keys (a key's first record) skip SSTs through the filter.
    table.set_bloom_filter(10.0, false);
    o.set_block_based_table_factory(&table);
    o
}

fn open_db(dir: &Path, memory: &RocksMemory) -> Result<DB, StateError> {
    DB::open(&options(memory), dir).map_err(|e| StateError::rocks(dir, e))
}

/// The memory an instance of `settings` uses: its slot's, or its own without a budget.
fn memory_of(settings: &BackendSettings) -> Arc<RocksMemory> {
    settings
        .rocks_memory
        .clone()
        .unwrap_or_else(RocksMemory::unmanaged)
}

/// Removes a local directory when dropped (temporary checkpoints and restore copies), so an
/// error path does not leave hard links or downloads behind.
struct TempDir(PathBuf);

impl TempDir {
    fn create(path: PathBuf) -> Result<Self, StateError> {
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .map_err(|e| StateError::io("remove directory", path.display(), e))?;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| StateError::io("create directory", parent.display(), e))?;
        }
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An SST file in the shared directory that later checkpoints may reference.
#[derive(Clone, Debug)]
struct SharedSst {
    /// Its name in the shared directory.
    shared_name: String,
    /// Its storage path, to check it is the shared directory of the checkpoint being taken
    /// (a job restored from another job's checkpoint has another shared directory).
    storage_path: String,
    size: u64,
}

pub(crate) struct RocksBackend {
    db: DB,
    path: PathBuf,
    read: ReadOptions,
    write: WriteOptions,
    key: Vec<u8>,
    incremental: bool,
    /// Local SST name -> its upload by a completed checkpoint. SST files are immutable and
    /// RocksDB never reuses a file number, so the name identifies the contents.
    confirmed: HashMap<String, SharedSst>,
    /// Uploads of checkpoints not yet known to be complete, by checkpoint id.
    pending: BTreeMap<u64, Vec<(String, SharedSst)>>,
    /// Value-state writes not yet in RocksDB, so that a key read and written for every record
    /// (a running count) costs a hash lookup rather than a RocksDB `get` and `put` each time.
    /// Written to RocksDB in one sorted batch when they reach `dirty_limit` bytes, and before
    /// every snapshot, scan over all state and compaction, so checkpoints and iterations see
    /// every write. Flushed writes stay as clean copies (a checkpoint does not empty the cache
    /// of a job's hot keys: a key updated again soon after its flush is found there instead of
    /// in a memtable or SST) while the slot's write-back caches fit their share of its memory.
    /// Losing it in a crash loses nothing: the subtask restores from its last checkpoint, as it
    /// would without it.
    buffer: WriteBuffer,
    /// Dirty bytes after which the buffer is written to RocksDB.
    dirty_limit: usize,
    /// This instance's part of the slot's memory for write-back caches.
    lease: ValueCacheLease,
    /// Every value-state entry RocksDB holds is in `buffer` too: true for a fresh instance
    /// until the buffer first drops its clean entries (or entries arrive around it, by a
    /// restore). While it holds, a key the buffer lacks has no value, and looking it up skips
    /// RocksDB (for a job whose state fits its memory, every key's first record).
    complete: bool,
}

/// The name a downloaded file must have locally: shared SSTs were uploaded as
/// `<prefix>-chk<id>-<sst>`, private files under their own name in a per-snapshot directory.
fn local_name(file: &StateFile) -> &str {
    let base = file.path.rsplit('/').next().unwrap_or(&file.path);
    if file.shared {
        base.rsplit('-').next().unwrap_or(base)
    } else {
        base
    }
}

/// Downloads a handle's files into `dir` under their RocksDB names.
fn download(
    handle: &KeyedStateHandle,
    storage: &dyn StateStorage,
    metadata_dir: &str,
    dir: &Path,
) -> Result<(), StateError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| StateError::io("create directory", dir.display(), e))?;
    for file in &handle.files {
        let from = file.resolve(metadata_dir)?;
        storage
            .download(&from, &dir.join(local_name(file)))
            .map_err(|e| StateError::io("download state file", &from, e))?;
    }
    Ok(())
}

/// Visits the entries in `range` of a RocksDB snapshot (rescaling, or importing into the
/// hashmap backend), using `dir` as a temporary local copy.
pub(crate) fn read_checkpoint(
    handle: &KeyedStateHandle,
    storage: &dyn StateStorage,
    metadata_dir: &str,
    dir: &Path,
    range: KeyGroupRange,
    visit: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
) -> Result<(), StateError> {
    let tmp = TempDir::create(dir.to_path_buf())?;
    download(handle, storage, metadata_dir, &tmp.0)?;
    // A scan that neither fills the cache nor writes: the instance's own small memory suffices.
    let db = open_db(&tmp.0, &RocksMemory::unmanaged())?;
    let r = for_each_in(&db, &tmp.0, range, visit);
    drop(db);
    r
}

fn for_each_in(
    db: &DB,
    path: &Path,
    range: KeyGroupRange,
    visit: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
) -> Result<(), StateError> {
    let mut opts = ReadOptions::default();
    opts.set_iterate_lower_bound((range.first as u16).to_be_bytes().to_vec());
    // last + 1 <= MAX_MAX_PARALLELISM fits in 16 bits.
    opts.set_iterate_upper_bound(((range.last + 1) as u16).to_be_bytes().to_vec());
    // A bulk scan should not evict the working set from the block cache.
    opts.fill_cache(false);
    opts.set_total_order_seek(true);
    let mut it = db.raw_iterator_opt(opts);
    it.seek_to_first();
    while it.valid() {
        if let (Some(k), Some(v)) = (it.key(), it.value()) {
            let entry = decode_key(k).ok_or_else(|| StateError::Corrupted {
                path: path.display().to_string(),
                reason: "a key not written by sluice".into(),
            })?;
            visit(RawEntry { value: v, ..entry })?;
        }
        it.next();
    }
    it.status().map_err(|e| StateError::rocks(path, e))
}

impl RocksBackend {
    fn new(
        db: DB,
        path: PathBuf,
        incremental: bool,
        memory: Arc<RocksMemory>,
        complete: bool,
    ) -> Self {
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        RocksBackend {
            db,
            path,
            read: ReadOptions::default(),
            write,
            key: Vec::with_capacity(64),
            incremental,
            confirmed: HashMap::new(),
            pending: BTreeMap::new(),
            buffer: WriteBuffer::default(),
            dirty_limit: memory.split().dirty_limit(),
            lease: ValueCacheLease::new(memory),
            complete,
        }
    }

    /// Writes the value-state writes since the last flush to RocksDB; the buffer keeps them as
    /// clean entries while the slot's write-back caches fit their share of its memory.
    pub(crate) fn flush_buffer(&mut self) -> Result<(), StateError> {
        if self.buffer.dirty_bytes() > 0 {
            // Sized up front (an entry adds a tag and two length varints to its bytes): the
            // batch's buffer would otherwise double its way up to ~16 MiB.
            let mut batch = WriteBatch::with_capacity_bytes(self.buffer.dirty_bytes() + 64);
            self.buffer.flush_sorted(|k, v| match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            });
            self.write(batch)?;
        }
        if self.lease.report(self.buffer.bytes()) {
            self.drop_clean();
        }
        Ok(())
    }

    /// Empties the flushed buffer: its memory goes back to the slot, and RocksDB alone now has
    /// the values.
    fn drop_clean(&mut self) {
        self.buffer.clear();
        self.lease.report(0);
        self.complete = false;
    }

    fn buffer_write(&mut self, value: Option<&[u8]>) -> Result<(), StateError> {
        if !self.buffer.fits(&self.key, value) {
            self.flush_buffer()?;
            self.drop_clean();
            if !self.buffer.fits(&self.key, value) {
                return Err(StateError::Config(format!(
                    "a value-state entry of {} bytes is larger than RocksDB's limit of 4 GiB",
                    self.key.len() + value.map_or(0, <[u8]>::len)
                )));
            }
        }
        self.buffer.put(&self.key, value);
        if self.buffer.dirty_bytes() >= self.dirty_limit {
            self.flush_buffer()?;
        }
        Ok(())
    }

    fn db_dir(settings: &BackendSettings) -> PathBuf {
        settings.local_dir.join("db")
    }

    pub(crate) fn open_fresh(settings: &BackendSettings) -> Result<Self, StateError> {
        let dir = Self::db_dir(settings);
        // The directory is private to this attempt; anything there is a leftover.
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| StateError::io("remove stale state directory", dir.display(), e))?;
        }
        let memory = memory_of(settings);
        let db = open_db(&dir, &memory)?;
        Ok(Self::new(db, dir, settings.incremental, memory, true))
    }

    /// Restores a snapshot of exactly our key groups: its files become the instance, and its
    /// shared SSTs count as uploaded, so the next incremental checkpoint references them.
    pub(crate) fn restore_exact(
        settings: &BackendSettings,
        handle: &KeyedStateHandle,
        storage: &dyn StateStorage,
        metadata_dir: &str,
    ) -> Result<Self, StateError> {
        let dir = Self::db_dir(settings);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| StateError::io("remove stale state directory", dir.display(), e))?;
        }
        download(handle, storage, metadata_dir, &dir)?;
        let memory = memory_of(settings);
        let db = open_db(&dir, &memory)?;
        let mut backend = Self::new(db, dir, settings.incremental, memory, false);
        for file in handle.files.iter().filter(|f| f.shared) {
            let shared_name = file.path.rsplit('/').next().unwrap_or(&file.path);
            backend.confirmed.insert(
                local_name(file).to_string(),
                SharedSst {
                    shared_name: shared_name.to_string(),
                    storage_path: file.resolve(metadata_dir)?,
                    size: file.size,
                },
            );
        }
        Ok(backend)
    }

    /// Writes entries straight into RocksDB, around the write-back buffer (a restore's import).
    pub(crate) fn write_batch(&mut self, batch: WriteBatch) -> Result<(), StateError> {
        self.complete = false;
        self.write(batch)
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StateError> {
        self.db
            .write_opt(batch, &self.write)
            .map_err(|e| StateError::rocks(&self.path, e))
    }

    #[inline]
    pub(crate) fn value_get<R>(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Value, key);
        match self.buffer.get(&self.key) {
            Some(buffered) => Ok(f(buffered)),
            None if self.complete => Ok(f(None)),
            None => self.get(f),
        }
    }

    #[inline]
    fn get<R>(&self, f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R, StateError> {
        let v = self
            .db
            .get_pinned_opt(&self.key, &self.read)
            .map_err(|e| StateError::rocks(&self.path, e))?;
        Ok(f(v.as_deref()))
    }

    #[inline]
    pub(crate) fn value_put(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Value, key);
        self.buffer_write(Some(value))
    }

    pub(crate) fn value_delete(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
    ) -> Result<(), StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Value, key);
        self.buffer_write(None)
    }

    pub(crate) fn map_get<R>(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
        uk: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Map, key);
        self.key.extend_from_slice(uk);
        self.get(f)
    }

    pub(crate) fn map_put(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
        uk: &[u8],
        value: &[u8],
    ) -> Result<(), StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Map, key);
        self.key.extend_from_slice(uk);
        self.db
            .put_opt(&self.key, value, &self.write)
            .map_err(|e| StateError::rocks(&self.path, e))
    }

    pub(crate) fn map_remove(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
        uk: &[u8],
    ) -> Result<(), StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Map, key);
        self.key.extend_from_slice(uk);
        self.db
            .delete_opt(&self.key, &self.write)
            .map_err(|e| StateError::rocks(&self.path, e))
    }

    /// Visits the map entries of the current key (keys starting with the prefix in `self.key`),
    /// stopping early when `f` returns `false`.
    fn scan_prefix(&self, f: &mut BytesVisitor<'_, bool>) -> Result<(), StateError> {
        let prefix_len = self.key.len();
        let mut opts = ReadOptions::default();
        opts.set_iterate_lower_bound(self.key.clone());
        if let Some(end) = prefix_end(&self.key) {
            opts.set_iterate_upper_bound(end);
        }
        // The scan stays within one key's prefix: the hash memtable's bucket suffices.
        opts.set_prefix_same_as_start(true);
        let mut it = self.db.raw_iterator_opt(opts);
        it.seek_to_first();
        while it.valid() {
            if let (Some(k), Some(v)) = (it.key(), it.value())
                && !f(&k[prefix_len..], v)?
            {
                return Ok(());
            }
            it.next();
        }
        it.status().map_err(|e| StateError::rocks(&self.path, e))
    }

    pub(crate) fn map_for_each(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
        f: &mut BytesVisitor<'_>,
    ) -> Result<(), StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Map, key);
        self.scan_prefix(&mut |uk, v| f(uk, v).map(|()| true))
    }

    pub(crate) fn map_is_empty(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
    ) -> Result<bool, StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Map, key);
        let mut empty = true;
        self.scan_prefix(&mut |_, _| {
            empty = false;
            Ok(false)
        })?;
        Ok(empty)
    }

    pub(crate) fn map_clear(
        &mut self,
        kg: u32,
        id: &StateId,
        key: &[u8],
    ) -> Result<(), StateError> {
        encode_key(&mut self.key, kg, &id.name, StorageKind::Map, key);
        let prefix = self.key.clone();
        let mut batch = WriteBatch::default();
        self.scan_prefix(&mut |uk, _| {
            let mut k = prefix.clone();
            k.extend_from_slice(uk);
            batch.delete(k);
            Ok(true)
        })?;
        self.write(batch)
    }

    /// Removes every entry of map state `name` in `range` and visits each first.
    pub(crate) fn take_map_state(
        &mut self,
        range: KeyGroupRange,
        name: &str,
        f: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let mut batch = WriteBatch::default();
        for kg in range.first..=range.last {
            // Every key of the state in this key group starts with `[kg][name][map]`.
            encode_key(&mut self.key, kg, name, StorageKind::Map, &[]);
            self.key.truncate(self.key.len() - 4);
            let mut opts = ReadOptions::default();
            opts.set_iterate_lower_bound(self.key.clone());
            if let Some(end) = prefix_end(&self.key) {
                opts.set_iterate_upper_bound(end);
            }
            opts.set_total_order_seek(true);
            let mut it = self.db.raw_iterator_opt(opts);
            it.seek_to_first();
            while it.valid() {
                if let (Some(k), Some(v)) = (it.key(), it.value()) {
                    let entry = decode_key(k).ok_or_else(|| StateError::Corrupted {
                        path: self.path.display().to_string(),
                        reason: "a key not written by sluice".into(),
                    })?;
                    f(RawEntry { value: v, ..entry })?;
                    batch.delete(k);
                }
                it.next();
            }
            it.status().map_err(|e| StateError::rocks(&self.path, e))?;
        }
        self.write(batch)
    }

    pub(crate) fn for_each(
        &mut self,
        range: KeyGroupRange,
        f: &mut dyn FnMut(RawEntry<'_>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        self.flush_buffer()?;
        for_each_in(&self.db, &self.path, range, f)
    }

    /// Takes a RocksDB checkpoint (hard links of the SSTs after a flush) and uploads it: new
    /// SSTs to the shared directory when incremental, everything else privately.
    pub(crate) fn snapshot(
        &mut self,
        range: KeyGroupRange,
        location: &SnapshotLocation,
        storage: &dyn StateStorage,
        file_prefix: &str,
        local_dir: &Path,
    ) -> Result<KeyedStateHandle, StateError> {
        let id = location.checkpoint_id;
        self.flush_buffer()?;
        self.db
            .flush()
            .map_err(|e| StateError::rocks(&self.path, e))?;
        let cp = TempDir::create(local_dir.join(format!("snapshot-{id}")))?;
        Checkpoint::new(&self.db)
            .and_then(|c| c.create_checkpoint(&cp.0))
            .map_err(|e| StateError::rocks(&self.path, e))?;
        let mut names = Vec::new();
        let entries = std::fs::read_dir(&cp.0)
            .map_err(|e| StateError::io("list checkpoint", cp.0.display(), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StateError::io("list checkpoint", cp.0.display(), e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();

        let shared_dir = location.shared_dir.as_deref().filter(|_| self.incremental);
        let mut files = Vec::with_capacity(names.len());
        let mut uploaded_now = Vec::new();
        let (mut checkpointed, mut full) = (0u64, 0u64);
        for name in &names {
            let local = cp.0.join(name);
            match shared_dir {
                Some(sd) if name.ends_with(".sst") => {
                    if let Some(prev) = self.confirmed.get(name.as_str())
                        && prev.storage_path == storage::join(sd, &prev.shared_name)
                    {
                        files.push(StateFile {
                            path: SnapshotLocation::shared_reference(&prev.shared_name),
                            size: prev.size,
                            shared: true,
                        });
                        full += prev.size;
                        continue;
                    }
                    let shared_name = format!("{file_prefix}-chk{id}-{name}");
                    let to = storage::join(sd, &shared_name);
                    let size = storage
                        .upload(&local, &to)
                        .map_err(|e| StateError::io("upload state file", &to, e))?;
                    files.push(StateFile {
                        path: SnapshotLocation::shared_reference(&shared_name),
                        size,
                        shared: true,
                    });
                    checkpointed += size;
                    full += size;
                    uploaded_now.push((
                        name.clone(),
                        SharedSst {
                            shared_name,
                            storage_path: to,
                            size,
                        },
                    ));
                }
                _ => {
                    let rel = format!("{file_prefix}-chk{id}-rocksdb/{name}");
                    let to = storage::join(&location.dir, &rel);
                    let size = storage
                        .upload(&local, &to)
                        .map_err(|e| StateError::io("upload state file", &to, e))?;
                    files.push(StateFile {
                        path: rel,
                        size,
                        shared: false,
                    });
                    checkpointed += size;
                    full += size;
                }
            }
        }
        if shared_dir.is_some() {
            // SSTs compacted away never come back (file numbers are not reused).
            let live: HashSet<&str> = names.iter().map(String::as_str).collect();
            self.confirmed.retain(|n, _| live.contains(n.as_str()));
            self.pending.insert(id, uploaded_now);
        }
        drop(cp);
        Ok(KeyedStateHandle {
            backend: BackendKind::RocksDb.name().to_string(),
            key_groups: range.as_tuple(),
            files,
            checkpointed_size: checkpointed,
            full_size: full,
        })
    }

    pub(crate) fn compact(&mut self) -> Result<(), StateError> {
        self.flush_buffer()?;
        self.db
            .flush()
            .map_err(|e| StateError::rocks(&self.path, e))?;
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }

    pub(crate) fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) {
        if let Some(uploaded) = self.pending.remove(&checkpoint_id) {
            self.confirmed.extend(uploaded);
        }
        // Older pending checkpoints are subsumed: their uploads were never confirmed, and a
        // later checkpoint is complete, so the coordinator may delete their files.
        self.pending.retain(|&id, _| id > checkpoint_id);
    }
}
