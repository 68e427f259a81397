//! High availability with ZooKeeper, as the engine uses the `zk-ha` library: JobManagers elect a
//! leader that publishes its RPC and REST addresses; TaskManagers and clients look the leader up;
//! the leader keeps its jobs' submissions in the job graph store and their ends in the job
//! result store, so a new leader re-runs exactly the jobs that had not ended.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use zk_ha::{HaConfig, HaError, LeaderInfo, ZooKeeperHaServices};

use crate::common::ids::JobId;
use crate::config::Config;
use crate::rpc::messages::ProgramSpec;

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
    ZooKeeperHaServices::new(&ha).map(Some)
}

/// Where job artifacts are kept with HA (unless `web.upload.dir` says otherwise):
/// `<storageDir>/<cluster id>/jars`, beside the HA stores' files, so that a new leader finds
/// the code of the jobs it recovers. `None` without ZooKeeper HA.
pub fn artifact_dir(config: &Config) -> Option<std::path::PathBuf> {
    if !config.ha.zookeeper {
        return None;
    }
    let storage = config.ha.storage_dir.as_ref()?;
    HaConfig::new(String::new(), storage.clone())
        .with_cluster_id(config.ha.cluster_id.clone())
        .cluster_storage_dir()
        .ok()
        .map(|dir| dir.join("jars"))
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
