//! The entry point: one object per process that hands out elections, retrievals and stores.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::config::{HaConfig, Layout};
use crate::election::LeaderElection;
use crate::error::HaError;
use crate::fence::LeaderFence;
use crate::retrieval::LeaderRetrieval;
use crate::storage::{BlobStore, FsBlobStore};
use crate::stores::{CheckpointIdCounter, CheckpointStore, JobGraphStore, JobResultStore};
use crate::zk::{self, Connector, FencedOutcome, SharedClient};

/// ZooKeeper HA services of one cluster (`<root>/<cluster-id>`).
///
/// Cheap to clone; connects lazily. Must be used inside a tokio runtime.
#[derive(Debug, Clone)]
pub struct ZooKeeperHaServices {
    layout: Layout,
    connector: Connector,
    zk: Arc<SharedClient>,
    blobs: Arc<dyn BlobStore>,
}

impl ZooKeeperHaServices {
    /// Services storing data in `<storage_dir>/<cluster_id>/` on the local (or mounted) filesystem.
    pub fn new(config: &HaConfig) -> Result<Self, HaError> {
        let blobs = FsBlobStore::new(config.cluster_storage_dir()?)?;
        Self::with_blob_store(config, Arc::new(blobs))
    }

    /// Services storing data in `blobs` (the engine's store on HDFS, for one).
    pub fn with_blob_store(config: &HaConfig, blobs: Arc<dyn BlobStore>) -> Result<Self, HaError> {
        let layout = config.validate()?;
        let connector = Connector::new(config);
        let zk = Arc::new(SharedClient::new(connector.clone()));
        Ok(ZooKeeperHaServices {
            layout,
            connector,
            zk,
            blobs,
        })
    }

    /// The node layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The blob store behind the pointers.
    pub fn blob_store(&self) -> &Arc<dyn BlobStore> {
        &self.blobs
    }

    /// Joins the leader election with a session of its own.
    pub fn start_election(&self) -> LeaderElection {
        LeaderElection::start(self.connector.clone(), self.layout.clone())
    }

    /// Watches the published leader of `component` (e.g. `dispatcher`, `resource_manager`).
    pub fn leader_retrieval(&self, component: &str) -> Result<LeaderRetrieval, HaError> {
        Ok(LeaderRetrieval::start(
            self.connector.clone(),
            self.layout.connection_info(component)?,
        ))
    }

    /// The job graph store.
    pub fn job_graph_store(&self) -> JobGraphStore {
        JobGraphStore::new(
            self.zk.clone(),
            self.blobs.clone(),
            self.layout.job_graphs_dir(),
        )
    }

    /// The completed-checkpoint store of `job_id`.
    pub fn checkpoint_store(&self, job_id: &str) -> Result<CheckpointStore, HaError> {
        Ok(CheckpointStore::new(
            self.zk.clone(),
            self.blobs.clone(),
            self.layout.checkpoints_dir(job_id)?,
        ))
    }

    /// The checkpoint id counter of `job_id`.
    pub fn checkpoint_id_counter(&self, job_id: &str) -> Result<CheckpointIdCounter, HaError> {
        Ok(CheckpointIdCounter::new(
            self.zk.clone(),
            self.layout.checkpoint_counter(job_id)?,
        ))
    }

    /// Removes all HA data of `job_id` under `<base>/jobs/<job-id>` (retained checkpoints and
    /// their files, the checkpoint id counter), fenced. Call it after the job's result is in the
    /// [`JobResultStore`] and its graph is removed; a deposed leader cannot call it successfully
    /// (FLINK-25486). Idempotent.
    pub async fn remove_job_data(&self, fence: &LeaderFence, job_id: &str) -> Result<(), HaError> {
        let checkpoints = self.checkpoint_store(job_id)?;
        for id in checkpoints.ids().await? {
            checkpoints.remove(fence, id).await?;
        }
        let client = self.zk.get().await?;
        let job_dir = self.layout.job_dir(job_id)?;
        // Children first; each delete is fenced on its own so that a lost term stops the sweep.
        for path in [
            self.layout.checkpoint_counter(job_id)?,
            self.layout.checkpoints_dir(job_id)?,
            job_dir,
        ] {
            match zk::commit_fenced(&client, fence, &path, |w| w.add_delete(&path, None)).await? {
                FencedOutcome::Committed
                | FencedOutcome::OpFailed(zookeeper_client::Error::NoNode) => {}
                FencedOutcome::OpFailed(zookeeper_client::Error::NotEmpty) => {
                    // Something new appeared (a concurrent checkpoint of a job that is not over).
                    return Err(HaError::Conflict { path });
                }
                FencedOutcome::OpFailed(e) => return Err(HaError::from_zk("remove", &path, e)),
            }
        }
        Ok(())
    }

    /// Deletes blobs that no pointer references and that are older than `min_age`; returns their
    /// names. Such blobs are left by writes whose commit outcome was unknown, by crashes between
    /// blob and pointer, and by failed deletions. `min_age` must exceed the longest time a write
    /// can spend between its blob and its pointer (minutes are plenty); younger blobs may belong
    /// to a write in progress. Only the leader should collect: the fence is checked before any
    /// deletion.
    pub async fn collect_garbage(
        &self,
        fence: &LeaderFence,
        min_age: Duration,
    ) -> Result<Vec<String>, HaError> {
        let client = self.zk.get().await?;
        let mut referenced: HashSet<String> = HashSet::new();
        referenced.extend(self.job_graph_store().referenced_files().await?);
        referenced.extend(self.job_result_store().referenced_files().await?);
        let jobs_dir = format!("{}/jobs", self.layout.base());
        let jobs = match client.list_children(&jobs_dir).await {
            Ok(jobs) => jobs,
            Err(zookeeper_client::Error::NoNode) => Vec::new(),
            Err(e) => return Err(HaError::from_zk("list", &jobs_dir, e)),
        };
        for job in jobs {
            referenced.extend(self.checkpoint_store(&job)?.referenced_files().await?);
        }
        // A fenced no-op: proves we still lead before deleting anything.
        zk::commit_fenced(&client, fence, &self.layout.latch_dir(), |_| Ok(())).await?;
        let blobs = self.blobs.clone();
        let removed = tokio::task::spawn_blocking(move || -> Result<Vec<String>, HaError> {
            let now = SystemTime::now();
            let mut removed = Vec::new();
            for name in blobs.list()? {
                if referenced.contains(&name) {
                    continue;
                }
                let Some(modified) = blobs.modified(&name)? else {
                    continue;
                };
                if now.duration_since(modified).unwrap_or_default() >= min_age {
                    blobs.delete(&name)?;
                    removed.push(name);
                }
            }
            Ok(removed)
        })
        .await
        .map_err(|e| HaError::Storage {
            path: "<blocking task>".into(),
            source: std::io::Error::other(e),
        })??;
        if !removed.is_empty() {
            tracing::info!(count = removed.len(), "deleted unreferenced HA blobs");
        }
        Ok(removed)
    }

    /// The job result store.
    pub fn job_result_store(&self) -> JobResultStore {
        JobResultStore::new(
            self.zk.clone(),
            self.blobs.clone(),
            self.layout.job_results_dir(),
        )
    }
}
