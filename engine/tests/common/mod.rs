//! What the engine's end-to-end tests share: a loopback configuration and an in-process
//! JobManager serving REST.

use std::sync::Arc;

use sluice::config::Config;
use sluice::embedded::EmbeddedCluster;
use sluice::jobmanager::JobManager;
use sluice::security::ClusterSecret;

/// The embedded cluster's loopback settings, then `extra` (later keys win).
pub fn config(extra: &[(&str, &str)]) -> Config {
    let mut config = Config::default();
    for (key, value) in EmbeddedCluster::LOOPBACK.iter().chain(extra) {
        if let Err(e) = config.set(key, value) {
            panic!("{key}: {value}: {e}");
        }
    }
    config
}

/// A JobManager with REST and the bundled programs.
pub async fn jobmanager(config: &Config, secret: &ClusterSecret) -> JobManager {
    sluice::rest::start_jobmanager(
        config.clone(),
        secret.clone(),
        Arc::new(sluice::examples::bundled()),
    )
    .await
    .expect("the JobManager starts")
}
