//! Completed checkpoints of one job.

use std::sync::Arc;

use tracing::warn;

use super::pointer::{PointerStore, PutMode};
use crate::error::HaError;
use crate::fence::LeaderFence;
use crate::storage::BlobStore;
use crate::zk::SharedClient;

/// A completed checkpoint as stored: its id and its opaque metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletedCheckpoint {
    /// The checkpoint id.
    pub id: u64,
    /// The engine's checkpoint metadata.
    pub metadata: Vec<u8>,
}

/// The retained completed checkpoints of one job: `<base>/jobs/<job-id>/checkpoints/<id>`, with
/// the id zero-padded to 19 digits so names sort by id.
///
/// A checkpoint counts as completed once [`CheckpointStore::add`] returned `Ok`. Older
/// checkpoints are subsumed only after a newer one is confirmed in ZooKeeper, never after an
/// ambiguous commit, so the latest confirmed checkpoint is never lost (FLINK-22494/24543).
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    inner: PointerStore,
}

fn key_of(id: u64) -> String {
    format!("{id:019}")
}

impl CheckpointStore {
    pub(crate) fn new(zk: Arc<SharedClient>, blobs: Arc<dyn BlobStore>, dir: String) -> Self {
        CheckpointStore {
            inner: PointerStore::new(zk, blobs, dir, "checkpoint"),
        }
    }

    /// Adds checkpoint `id`, then removes the oldest ones so that at most `max_retained` (at least
    /// one) remain. Returns the ids it removed.
    ///
    /// Fails with [`HaError::AlreadyExists`] if `id` is already stored with other metadata; the
    /// same metadata again succeeds (a retry after [`HaError::CommitUnknown`]).
    pub async fn add(
        &self,
        fence: &LeaderFence,
        id: u64,
        metadata: &[u8],
        max_retained: usize,
    ) -> Result<Vec<u64>, HaError> {
        self.inner
            .put(fence, &key_of(id), metadata.to_vec(), PutMode::CreateOnly)
            .await?;
        let ids = self.ids().await?;
        let excess = ids.len().saturating_sub(max_retained.max(1));
        let mut removed = Vec::new();
        // Only ids below the new one are subsumed: a higher id (a concurrent add) stays.
        for old in ids.into_iter().take(excess).filter(|old| *old < id) {
            match self.inner.remove(fence, &key_of(old)).await {
                Ok(()) => removed.push(old),
                // The new checkpoint is in; failing to trim is harmless and retried next time.
                Err(e @ HaError::NotLeader { .. }) => return Err(e),
                Err(e) => {
                    warn!(error = %e, checkpoint_id = old, "could not subsume an old checkpoint")
                }
            }
        }
        Ok(removed)
    }

    /// Ids of all stored checkpoints, ascending.
    pub async fn ids(&self) -> Result<Vec<u64>, HaError> {
        let mut ids: Vec<u64> = Vec::new();
        for key in self.inner.keys().await? {
            match key.parse() {
                Ok(id) => ids.push(id),
                Err(_) => {
                    warn!(dir = self.inner.dir(), %key, "ignoring a foreign node in the checkpoint directory")
                }
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// The newest `n` checkpoints, ascending by id.
    pub async fn latest_n(&self, n: usize) -> Result<Vec<CompletedCheckpoint>, HaError> {
        let ids = self.ids().await?;
        let mut out = Vec::new();
        for id in ids.iter().rev().take(n).rev() {
            // An id listed a moment ago may have been subsumed since: skip it.
            if let Some(metadata) = self.inner.get(&key_of(*id)).await? {
                out.push(CompletedCheckpoint { id: *id, metadata });
            }
        }
        Ok(out)
    }

    /// The newest checkpoint, the one to recover from.
    pub async fn latest(&self) -> Result<Option<CompletedCheckpoint>, HaError> {
        Ok(self.latest_n(1).await?.pop())
    }

    /// The checkpoint `id`, if stored.
    pub async fn get(&self, id: u64) -> Result<Option<Vec<u8>>, HaError> {
        self.inner.get(&key_of(id)).await
    }

    /// Removes checkpoint `id`.
    pub async fn remove(&self, fence: &LeaderFence, id: u64) -> Result<(), HaError> {
        self.inner.remove(fence, &key_of(id)).await
    }

    /// The blob names referenced by this job's checkpoint pointers.
    pub(crate) async fn referenced_files(&self) -> Result<Vec<String>, HaError> {
        self.inner.referenced_files().await
    }

    /// The storage file behind checkpoint `id` (diagnostics, invariant checks).
    pub async fn file_of(&self, id: u64) -> Result<Option<String>, HaError> {
        self.inner.file_of(&key_of(id)).await
    }
}
