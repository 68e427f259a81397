//! The client side of a Kubernetes session: `sluice kubernetes-session` creates the cluster's
//! Secret, Deployment and REST Service and waits for the REST API; `--kill` deletes the
//! Deployment (and with it everything it owns); `run -t kubernetes-session` finds the REST
//! address from the cluster id.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::KubeClient;
use super::error::KubeError;
use super::specs::{
    PodState, jobmanager_deployment, owned_by_deployment, pod_state, rest_address, rest_service,
    rest_service_name, secret, secret_name, selector,
};
use crate::config::Config;
use crate::resource::application::ApplicationJob;

/// How long `kubernetes-session` waits for the JobManager's REST API.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// A running session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// `kubernetes.cluster-id`.
    pub cluster_id: String,
    /// `host:port` of the JobManager's REST API.
    pub rest_address: String,
    /// From the first API call to the REST API answering.
    pub startup: Duration,
}

/// The cluster id of the configuration, or a new one (`sluice-` and 8 hex digits).
pub fn cluster_id_or_new(config: &Config) -> String {
    config
        .kubernetes
        .cluster_id
        .clone()
        .unwrap_or_else(|| format!("sluice-{:08x}", rand::random::<u32>()))
}

fn cluster_id(config: &Config) -> Result<String, KubeError> {
    config.kubernetes.cluster_id.clone().ok_or_else(|| {
        KubeError::Cluster("no Kubernetes session named: set -D kubernetes.cluster-id=ID".into())
    })
}

/// Starts a session named `cluster_id` and waits until its REST API answers. With `job`, the
/// cluster is an application cluster running that one job (`run -t kubernetes-application`):
/// one that cannot start is deleted again, since no one would ever use it.
pub async fn deploy(
    config: &Config,
    cluster_id: &str,
    job: Option<&ApplicationJob>,
) -> Result<Session, KubeError> {
    let mut config = config.clone();
    config.set("kubernetes.cluster-id", cluster_id)?;
    if config.rest.port == 0 {
        return Err(KubeError::Cluster(
            "rest.port is 0: the REST Service needs the JobManager's port".into(),
        ));
    }
    let ns = &config.kubernetes.namespace;
    let client = KubeClient::from_config(&config)?;
    let started = Instant::now();
    let deployments = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    if client
        .get_opt(&format!("{deployments}/{cluster_id}"))
        .await?
        .is_some()
    {
        return Err(KubeError::Cluster(format!(
            "a Deployment {cluster_id} already exists in namespace {ns}: pick another kubernetes.cluster-id, or stop it with `sluice kubernetes-session -D kubernetes.cluster-id={cluster_id} --kill`"
        )));
    }
    // The secret first: the JobManager pod reads it at its start. It gets its owner once the
    // Deployment exists.
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let secrets = format!("/api/v1/namespaces/{ns}/secrets");
    let secret_path = format!("{secrets}/{}", secret_name(cluster_id));
    // A leftover of a session whose Deployment is gone holds a secret nobody uses.
    client.delete(&secret_path).await?;
    client.create(&secrets, &secret(cluster_id, &hex)).await?;
    let created = client
        .create(
            &deployments,
            &jobmanager_deployment(&config, cluster_id, job),
        )
        .await;
    let deployment = match created {
        Ok(deployment) => deployment,
        Err(e) => {
            if job.is_some() {
                client.delete(&secret_path).await.ok();
            }
            return Err(e);
        }
    };
    let uid = deployment["metadata"]["uid"].as_str().unwrap_or_default();
    let started_up = async {
        client
            .merge_patch(
                &secret_path,
                &json!({"metadata": {"ownerReferences": owned_by_deployment(cluster_id, uid)}}),
            )
            .await?;
        client
            .create(
                &format!("/api/v1/namespaces/{ns}/services"),
                &rest_service(&config, cluster_id, uid),
            )
            .await?;
        wait_for_rest(&client, &config, cluster_id).await
    }
    .await;
    let rest_address = match started_up {
        Ok(address) => address,
        Err(e) => {
            if job.is_some() {
                // Its Secret and Service are owned by it and go along.
                client
                    .delete(&format!("{deployments}/{cluster_id}"))
                    .await
                    .ok();
            }
            return Err(e);
        }
    };
    Ok(Session {
        cluster_id: cluster_id.to_string(),
        rest_address,
        startup: started.elapsed(),
    })
}

/// Waits until the session's REST API answers; fails at once when its JobManager pod cannot
/// start.
async fn wait_for_rest(
    client: &KubeClient,
    config: &Config,
    cluster_id: &str,
) -> Result<String, KubeError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut last = String::from("no JobManager pod yet");
    while Instant::now() < deadline {
        match find_address(client, config, cluster_id).await {
            Ok(Some(address)) => {
                let rest = crate::rest::client::RestClient::from_config(&address, config)
                    .map_err(|e| anyhow::anyhow!(e))?;
                match tokio::time::timeout(Duration::from_secs(2), rest.overview()).await {
                    Ok(Ok(_)) => return Ok(address),
                    Ok(Err(e)) => last = format!("the REST API at {address}: {e}"),
                    Err(_) => last = format!("the REST API at {address} does not answer"),
                }
            }
            Ok(None) => {}
            Err(KubeError::Cluster(why)) => return Err(KubeError::Cluster(why)),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(KubeError::Timeout {
        what: format!("the JobManager of {cluster_id} to answer ({last})"),
        seconds: START_TIMEOUT.as_secs(),
    })
}

/// The REST address of a session, `None` while it is not known yet; an error when the
/// session does not exist or its JobManager pod cannot start.
async fn find_address(
    client: &KubeClient,
    config: &Config,
    cluster_id: &str,
) -> Result<Option<String>, KubeError> {
    let ns = &config.kubernetes.namespace;
    let Some(service) = client
        .get_opt(&format!(
            "/api/v1/namespaces/{ns}/services/{}",
            rest_service_name(cluster_id)
        ))
        .await?
    else {
        return Err(KubeError::Cluster(format!(
            "no Kubernetes session {cluster_id} in namespace {ns} (no Service {})",
            rest_service_name(cluster_id)
        )));
    };
    let pods = client
        .get(&format!(
            "/api/v1/namespaces/{ns}/pods?labelSelector={}",
            selector(cluster_id, "jobmanager")
        ))
        .await?;
    let pods: Vec<Value> = pods["items"].as_array().cloned().unwrap_or_default();
    // During a rollout an old pod may still be there: the running one counts.
    let pod = pods
        .iter()
        .find(|p| p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null())
        .or(pods.first());
    let Some(pod) = pod else {
        return Ok(None);
    };
    if let PodState::CannotStart(why) | PodState::Ended(why) = pod_state(pod) {
        return Err(KubeError::Cluster(format!(
            "the JobManager of {cluster_id}: {why}"
        )));
    }
    let node = match pod["spec"]["nodeName"].as_str() {
        Some(node)
            if config.kubernetes.rest_service_exposed_type
                == crate::config::ServiceExposedType::NodePort =>
        {
            client.get_opt(&format!("/api/v1/nodes/{node}")).await?
        }
        _ => None,
    };
    Ok(rest_address(
        config.kubernetes.rest_service_exposed_type,
        &service,
        pod,
        node.as_ref(),
    ))
}

/// The REST address of the running session `kubernetes.cluster-id` names.
pub async fn find_session(config: &Config) -> Result<String, KubeError> {
    let cluster_id = cluster_id(config)?;
    let client = KubeClient::from_config(config)?;
    find_address(&client, config, &cluster_id)
        .await?
        .ok_or_else(|| {
            KubeError::Cluster(format!(
                "the JobManager of the Kubernetes session {cluster_id} is not running yet"
            ))
        })
}

/// Deletes the Deployment of the cluster `cluster_id` (and with it everything it owns), then
/// its Secret, which a start cut short may have left without its owner; `false` when there
/// was no Deployment.
pub async fn delete_cluster(config: &Config, cluster_id: &str) -> Result<bool, KubeError> {
    let ns = &config.kubernetes.namespace;
    let client = KubeClient::from_config(config)?;
    let existed = client
        .delete(&format!(
            "/apis/apps/v1/namespaces/{ns}/deployments/{cluster_id}"
        ))
        .await?;
    client
        .delete(&format!(
            "/api/v1/namespaces/{ns}/secrets/{}",
            secret_name(cluster_id)
        ))
        .await?;
    Ok(existed)
}

/// Stops the session `kubernetes.cluster-id` names: deletes its Deployment, whose dependents
/// (the JobManager's ReplicaSet and pod, the TaskManager pods, the Service and the Secret)
/// the garbage collector removes. Returns the cluster id.
pub async fn kill(config: &Config) -> Result<String, KubeError> {
    let cluster_id = cluster_id(config)?;
    let ns = &config.kubernetes.namespace;
    if !delete_cluster(config, &cluster_id).await? {
        return Err(KubeError::Cluster(format!(
            "no Kubernetes session {cluster_id} in namespace {ns} (no Deployment {cluster_id})"
        )));
    }
    Ok(cluster_id)
}
