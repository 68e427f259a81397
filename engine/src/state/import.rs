//! Restoring from snapshots: inserting imported entries into the backend.

use super::backend::Backend;
use super::rocks;
use super::{RawEntry, StateError, StateId, StorageKind};

/// Inserts imported entries, batching RocksDB writes.
pub(super) struct ImportSink<'a> {
    backend: &'a mut Backend,
    batch: rocksdb::WriteBatch,
    key: Vec<u8>,
}

impl<'a> ImportSink<'a> {
    pub(super) fn new(backend: &'a mut Backend) -> Self {
        ImportSink {
            backend,
            batch: rocksdb::WriteBatch::default(),
            key: Vec::new(),
        }
    }

    pub(super) fn insert(&mut self, id: &StateId, e: &RawEntry<'_>) -> Result<(), StateError> {
        match self.backend {
            Backend::Heap(h) => match e.kind {
                StorageKind::Value => h.value_import(e.key_group, id, e.key, e.value),
                StorageKind::Map => {
                    h.map_put(e.key_group, id, e.key, e.user_key, e.value);
                    Ok(())
                }
            },
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

    pub(super) fn finish(mut self) -> Result<(), StateError> {
        if let Backend::Rocks(r) = self.backend
            && !self.batch.is_empty()
        {
            r.write_batch(std::mem::take(&mut self.batch))?;
        }
        Ok(())
    }
}
