//! The fenced HA stores: job graphs, completed checkpoints, checkpoint ids, job results.

mod checkpoints;
mod counter;
mod pointer;

use std::sync::Arc;

pub use self::checkpoints::{CheckpointStore, CompletedCheckpoint};
pub use self::counter::CheckpointIdCounter;
use self::pointer::{PointerStore, PutMode};
use crate::error::HaError;
use crate::fence::LeaderFence;
use crate::storage::BlobStore;
use crate::zk::SharedClient;

/// Submitted jobs: `<base>/jobgraphs/<job-id>` points at the serialized job graph (opaque bytes).
///
/// A new leader lists this store to find the jobs it must recover. There are no per-job locks
/// (Flink's FLINK-10011 came from them): only the fenced leader can change or remove an entry.
#[derive(Debug, Clone)]
pub struct JobGraphStore {
    inner: PointerStore,
}

impl JobGraphStore {
    pub(crate) fn new(zk: Arc<SharedClient>, blobs: Arc<dyn BlobStore>, dir: String) -> Self {
        JobGraphStore {
            inner: PointerStore::new(zk, blobs, dir, "jobgraph"),
        }
    }

    /// Stores (or replaces) the job graph of `job_id`.
    pub async fn put(
        &self,
        fence: &LeaderFence,
        job_id: &str,
        job_graph: &[u8],
    ) -> Result<(), HaError> {
        self.inner
            .put(fence, job_id, job_graph.to_vec(), PutMode::CreateOrReplace)
            .await
    }

    /// The job graph of `job_id`, if stored.
    pub async fn get(&self, job_id: &str) -> Result<Option<Vec<u8>>, HaError> {
        self.inner.get(job_id).await
    }

    /// All stored job ids, sorted.
    pub async fn job_ids(&self) -> Result<Vec<String>, HaError> {
        self.inner.keys().await
    }

    /// Removes the job graph of `job_id` (after the job terminated globally).
    pub async fn remove(&self, fence: &LeaderFence, job_id: &str) -> Result<(), HaError> {
        self.inner.remove(fence, job_id).await
    }

    pub(crate) async fn referenced_files(&self) -> Result<Vec<String>, HaError> {
        self.inner.referenced_files().await
    }

    /// The storage file behind `job_id`'s pointer (diagnostics, invariant checks).
    pub async fn file_of(&self, job_id: &str) -> Result<Option<String>, HaError> {
        self.inner.file_of(job_id).await
    }
}

/// Globally terminated jobs: `<base>/job-results/<job-id>` points at the job's result (opaque
/// bytes). A new leader skips every job found here, so a finished job is never run again.
///
/// Write the result before removing the job's graph: a crash in between leaves both, and the
/// result wins.
#[derive(Debug, Clone)]
pub struct JobResultStore {
    inner: PointerStore,
}

impl JobResultStore {
    pub(crate) fn new(zk: Arc<SharedClient>, blobs: Arc<dyn BlobStore>, dir: String) -> Self {
        JobResultStore {
            inner: PointerStore::new(zk, blobs, dir, "jobresult"),
        }
    }

    /// Records the result of `job_id`. Recording a different result for a recorded job fails with
    /// [`HaError::AlreadyExists`] (a job terminates once); recording the same bytes again
    /// succeeds, so a retry after [`HaError::CommitUnknown`] is safe.
    pub async fn put(
        &self,
        fence: &LeaderFence,
        job_id: &str,
        result: &[u8],
    ) -> Result<(), HaError> {
        self.inner
            .put(fence, job_id, result.to_vec(), PutMode::CreateOnly)
            .await
    }

    /// The result of `job_id`, if recorded.
    pub async fn get(&self, job_id: &str) -> Result<Option<Vec<u8>>, HaError> {
        self.inner.get(job_id).await
    }

    /// Whether `job_id` has terminated.
    pub async fn contains(&self, job_id: &str) -> Result<bool, HaError> {
        Ok(self.inner.file_of(job_id).await?.is_some())
    }

    /// All terminated job ids, sorted.
    pub async fn job_ids(&self) -> Result<Vec<String>, HaError> {
        self.inner.keys().await
    }

    pub(crate) async fn referenced_files(&self) -> Result<Vec<String>, HaError> {
        self.inner.referenced_files().await
    }

    /// Forgets `job_id`'s result (once the operator no longer needs it).
    pub async fn remove(&self, fence: &LeaderFence, job_id: &str) -> Result<(), HaError> {
        self.inner.remove(fence, job_id).await
    }
}
