//! The client side of an application cluster (`run -t kubernetes-application`): a cluster of
//! one job, which its JobManager submits at its start and which goes when the job ends.
//!
//! The JobManager records its job on the cluster's Deployment (annotations, see
//! [`super::specs::application_status`]): the job's id once submitted, its final state and
//! causes once it ended or was refused. It then keeps serving for a grace period
//! (`super::jobmanager`), and deletes the Deployment unless the client, which waits for that
//! record, deleted it first. The record lives exactly as long as the cluster.

use std::time::{Duration, Instant};

use super::client::KubeClient;
use super::error::KubeError;
use super::session::{Session, delete_cluster, deploy};
use super::specs::{ApplicationStatus, JobEnd, application_status};
use crate::config::Config;
use crate::resource::application::ApplicationJob;

/// How long the client waits for the JobManager to record its job's id.
const SUBMIT_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the client reads the Deployment.
const POLL: Duration = Duration::from_millis(100);

/// A started application cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Application {
    /// The cluster, its REST address and how long it took to answer.
    pub session: Session,
    /// What the JobManager recorded by the time the client returned: the job's id, or its end
    /// when it was refused or ended at once.
    pub status: ApplicationStatus,
}

/// Starts the application cluster `cluster_id` running `job` and waits until its JobManager
/// submitted the job (or recorded that it could not). A cluster that cannot start, or whose
/// JobManager records nothing within [`SUBMIT_TIMEOUT`], is deleted again.
pub async fn start(
    config: &Config,
    cluster_id: &str,
    job: &ApplicationJob,
) -> Result<Application, KubeError> {
    let session = deploy(config, cluster_id, Some(job)).await?;
    let client = KubeClient::from_config(config)?;
    let recorded = poll(&client, config, cluster_id, SUBMIT_TIMEOUT, |s| {
        s.job_id.is_some() || s.end.is_some()
    })
    .await;
    match recorded {
        Ok(status) => Ok(Application { session, status }),
        Err(e) => {
            delete_cluster(config, cluster_id).await.ok();
            Err(e)
        }
    }
}

/// Waits until the job of the application cluster `cluster_id` ended, and returns how. An
/// error when the cluster is gone without a record of its job's end.
pub async fn wait_for_end(config: &Config, cluster_id: &str) -> Result<JobEnd, KubeError> {
    let client = KubeClient::from_config(config)?;
    let status = poll(&client, config, cluster_id, Duration::MAX, |s| {
        s.end.is_some()
    })
    .await?;
    status.end.ok_or_else(|| {
        KubeError::Cluster(format!(
            "the application cluster {cluster_id} recorded no end of its job"
        ))
    })
}

/// Reads the cluster's Deployment until `done` holds for what it records, or `timeout` passed.
async fn poll(
    client: &KubeClient,
    config: &Config,
    cluster_id: &str,
    timeout: Duration,
    done: impl Fn(&ApplicationStatus) -> bool,
) -> Result<ApplicationStatus, KubeError> {
    let ns = &config.kubernetes.namespace;
    let path = format!("/apis/apps/v1/namespaces/{ns}/deployments/{cluster_id}");
    let started = Instant::now();
    loop {
        let Some(deployment) = client.get_opt(&path).await? else {
            return Err(KubeError::Cluster(format!(
                "the application cluster {cluster_id} in namespace {ns} is gone (its Deployment was deleted) without recording its job's end"
            )));
        };
        let status = application_status(&deployment);
        if done(&status) {
            return Ok(status);
        }
        if started.elapsed() > timeout {
            return Err(KubeError::Timeout {
                what: format!("the JobManager of {cluster_id} to submit its job"),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}
