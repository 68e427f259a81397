//! High availability with ZooKeeper, as the engine uses the `zk-ha` library: JobManagers elect a
//! leader that publishes its RPC and REST addresses; TaskManagers and clients look the leader up;
//! the leader keeps its jobs' submissions in the job graph store and their ends in the job
//! result store, so a new leader re-runs exactly the jobs that had not ended.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use zk_ha::{BlobStore, HaConfig, HaError, LeaderInfo, ZooKeeperHaServices};

use crate::common::ids::JobId;
use crate::config::{Config, HdfsUri};
use crate::rpc::messages::ProgramSpec;
use crate::state::{FileSystems, StateStorage};

/// The component name under which the leading JobManager publishes its addresses.
pub const COMPONENT: &str = "dispatcher";

/// The HA services `config` asks for: `None` without `high-availability.type: zookeeper`.
pub fn services(config: &Config) -> Result<Option<ZooKeeperHaServices>, HaError> {
    if !config.ha.zookeeper {
        return Ok(None);
    }
    let (Some(quorum), Some(storage)) = (&config.ha.quorum, &config.ha.storage_dir) else {
        // Config::load refuses this combination; a hand-built Config may not.
        return Ok(None);
    };
    let ha = HaConfig::new(quorum.clone(), storage.clone())
        .with_root(config.ha.root.clone())
        .with_cluster_id(config.ha.cluster_id.clone())
        .with_session_timeout(config.ha.session_timeout)
        .with_connection_timeout(config.ha.connection_timeout);
    if HdfsUri::parse(storage).is_none() {
        return ZooKeeperHaServices::new(&ha).map(Some);
    }
    let dir = path_text(ha.cluster_storage_dir()?)?;
    let blobs = StorageBlobStore::new(Arc::new(FileSystems::new()), dir);
    ZooKeeperHaServices::with_blob_store(&ha, Arc::new(blobs)).map(Some)
}

/// A storage path built by [`HaConfig`] (which joins paths as `PathBuf`s) as text again.
fn path_text(path: PathBuf) -> Result<String, HaError> {
    path.into_os_string()
        .into_string()
        .map_err(|p| HaError::Invalid {
            what: "high-availability.storageDir",
            reason: format!("{} is not UTF-8", p.to_string_lossy()),
        })
}

/// Where job artifacts are kept with HA (unless `web.upload.dir` says otherwise):
/// `<storageDir>/<cluster id>/jars`, beside the HA stores' files, so that a new leader finds
/// the code of the jobs it recovers: a local path or an `hdfs:` URI. `None` without ZooKeeper
/// HA.
pub fn artifact_dir(config: &Config) -> Option<String> {
    if !config.ha.zookeeper {
        return None;
    }
    let storage = config.ha.storage_dir.as_ref()?;
    HaConfig::new(String::new(), storage.clone())
        .with_cluster_id(config.ha.cluster_id.clone())
        .cluster_storage_dir()
        .and_then(path_text)
        .ok()
        .map(|dir| crate::state::storage::join(&dir, "jars"))
}

/// The HA stores' blobs as files in one directory of the engine's durable storage, which is
/// how `high-availability.storageDir` works on HDFS. Every blob is a new file written whole and
/// renamed into place by the storage (never appended to), so a reader sees all of it or
/// nothing; the directory is created by the first write, so a process that only looks up the
/// leader never touches the file system.
pub struct StorageBlobStore {
    storage: Arc<dyn StateStorage>,
    dir: String,
}

impl std::fmt::Debug for StorageBlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageBlobStore")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl StorageBlobStore {
    /// Blobs in `dir` of `storage`.
    pub fn new(storage: Arc<dyn StateStorage>, dir: String) -> Self {
        StorageBlobStore { storage, dir }
    }

    fn path_of(&self, name: &str) -> Result<String, HaError> {
        zk_ha::check_blob_name(name)?;
        Ok(format!("{}/{name}", self.dir.trim_end_matches('/')))
    }
}

fn storage_error(path: &str) -> impl FnOnce(io::Error) -> HaError + '_ {
    move |source| HaError::Storage {
        path: PathBuf::from(path),
        source,
    }
}

impl BlobStore for StorageBlobStore {
    fn write_new(&self, prefix: &str, data: &[u8]) -> Result<String, HaError> {
        let name = zk_ha::new_blob_name(prefix);
        let path = self.path_of(&name)?;
        self.storage
            .write(&path, data)
            .map_err(storage_error(&path))?;
        Ok(name)
    }

    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, HaError> {
        let path = self.path_of(name)?;
        match self.storage.read(&path) {
            Ok(data) => Ok(Some(data)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(storage_error(&path)(e)),
        }
    }

    fn delete(&self, name: &str) -> Result<(), HaError> {
        let path = self.path_of(name)?;
        self.storage
            .delete_file(&path)
            .map_err(storage_error(&path))
    }

    fn list(&self) -> Result<Vec<String>, HaError> {
        self.storage
            .list(&self.dir)
            .map_err(storage_error(&self.dir))
    }

    fn modified(&self, name: &str) -> Result<Option<SystemTime>, HaError> {
        let path = self.path_of(name)?;
        let status = self.storage.status(&path).map_err(storage_error(&path))?;
        Ok(status.map(|s| {
            SystemTime::UNIX_EPOCH
                + Duration::from_millis(u64::try_from(s.modified_ms).unwrap_or(0))
        }))
    }
}

/// The current leader's published addresses, waiting up to `timeout` for one.
pub async fn leader(ha: &ZooKeeperHaServices, timeout: Duration) -> Result<LeaderInfo, String> {
    let mut retrieval = ha
        .leader_retrieval(COMPONENT)
        .map_err(|e| format!("cannot watch the leader in ZooKeeper: {e}"))?;
    match tokio::time::timeout(timeout, retrieval.wait_for(|l| l.is_some())).await {
        Ok(Ok(Some(info))) => Ok(info),
        Ok(Ok(None)) | Err(_) => Err(format!(
            "no JobManager leader is published in ZooKeeper after {timeout:?}"
        )),
        Ok(Err(e)) => Err(format!("cannot read the leader from ZooKeeper: {e}")),
    }
}

/// The leader's REST address (`host:port`, without the scheme it was published with: a client
/// speaks https or http as its own `security.ssl.rest.enabled` says), for clients.
pub async fn leader_rest_address(config: &Config) -> Result<Option<String>, String> {
    let Some(ha) = services(config).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let info = leader(
        &ha,
        config.ha.connection_timeout.max(Duration::from_secs(5)),
    )
    .await?;
    let rest = info
        .address("rest")
        .ok_or("the published leader has no REST address")?;
    Ok(Some(
        rest.trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string(),
    ))
}

/// What the job graph store keeps of a submission: enough for a new leader to submit the job
/// again under the same id (the job graph itself is rebuilt from the program, deterministically).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job's id.
    pub job_id: JobId,
    /// The program and its arguments.
    pub program: ProgramSpec,
    /// The parallelism it was submitted with.
    pub parallelism: u32,
    /// Its job-scoped configuration.
    pub overrides: Vec<(String, String)>,
    /// The savepoint it started from, if any.
    pub savepoint: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LocalFileStorage;

    #[test]
    fn blobs_in_storage_are_written_whole_read_listed_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let at = format!("{}/ha/default", dir.path().display());
        let store = StorageBlobStore::new(Arc::new(LocalFileStorage), at.clone());
        assert_eq!(
            store.list().unwrap(),
            Vec::<String>::new(),
            "no directory yet"
        );
        let a = store.write_new("jobgraph-j1", b"one").unwrap();
        let b = store.write_new("jobgraph-j1", b"two").unwrap();
        assert_ne!(a, b, "names must be unique");
        assert!(a.starts_with("jobgraph-j1-"));
        assert_eq!(store.read(&a).unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(store.list().unwrap(), {
            let mut v = vec![a.clone(), b.clone()];
            v.sort();
            v
        });
        let written = store.modified(&a).unwrap().expect("exists");
        assert!(written <= SystemTime::now() + Duration::from_secs(1));
        store.delete(&a).unwrap();
        store.delete(&a).unwrap();
        assert_eq!(store.read(&a).unwrap(), None);
        assert_eq!(store.modified(&a).unwrap(), None);
        assert!(store.read("../../etc/passwd").is_err());
        assert!(store.delete("/etc/passwd").is_err());
    }

    #[test]
    fn artifacts_live_beside_the_ha_blobs_on_any_storage() {
        let mut config = Config::default();
        assert_eq!(artifact_dir(&config), None);
        config.ha.zookeeper = true;
        config.ha.storage_dir = Some("hdfs://nn:8020/ha".into());
        config.ha.cluster_id = "/team/one/".into();
        assert_eq!(
            artifact_dir(&config).as_deref(),
            Some("hdfs://nn:8020/ha/team/one/jars")
        );
        config.ha.storage_dir = Some("/shared/ha".into());
        assert_eq!(
            artifact_dir(&config).as_deref(),
            Some("/shared/ha/team/one/jars")
        );
    }
}
