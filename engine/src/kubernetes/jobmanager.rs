//! The JobManager pod's process: `sluice kubernetes-jobmanager`, which the cluster's
//! Deployment runs. It runs a normal JobManager (Dispatcher, REST and web UI, JobMasters) and
//! the Kubernetes resource driver: a thin loop that feeds the ResourceManager's slot demand
//! and the pods it watches to [`WorkerPool`] and carries out its actions through the API.
//!
//! In an application cluster (`--job`) it also submits that one job at its start, records the
//! job's id and, once the job ended (or was refused, or the driver gave up), its end on its own
//! Deployment (see `super::application`), keeps serving the REST API for [`END_GRACE`], and
//! then deletes the Deployment: every pod of the cluster goes with it. A JobManager restarted
//! after recording the end does not run the job again; it only deletes the Deployment.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::client::KubeClient;
use super::error::KubeError;
use super::specs::{
    JobEnd, PodState, SLUICE, application_status, job_end_patch, job_id_patch, pod_state, selector,
    taskmanager_pod,
};
use crate::api::ProgramRegistry;
use crate::common::ids::JobId;
use crate::config::Config;
use crate::jobmanager::service::{JobManagerShared, now_ms};
use crate::resource::application::ApplicationJob;
use crate::resource::pool::{Action, FailureLimit, SlotView, WorkerPool};
use crate::rpc::messages::ProgramSpec;
use crate::security::ClusterSecret;

/// How often the driver looks at the slot demand.
const TICK: Duration = Duration::from_millis(250);
/// How long one watch runs before the server ends it and the driver starts the next.
const WATCH_TIMEOUT_S: u64 = 300;
/// How long an application cluster keeps serving after recording its job's end, before it
/// deletes itself: a client watching the REST API reads the final state meanwhile (the
/// attached `run` reads it from the Deployment and deletes the cluster at once).
pub const END_GRACE: Duration = Duration::from_secs(5);
/// How long the JobManager waits to be stopped after deleting its Deployment.
const DELETION_PATIENCE: Duration = Duration::from_secs(60);

/// What the pod watcher tells the driver.
#[derive(Debug)]
enum PodEvent {
    /// A complete list, asked for at `since` (ms): pods created before and not in it are gone.
    Listed { pods: Vec<Value>, since: u64 },
    /// A pod was added or changed.
    Changed(Value),
    /// A pod was deleted.
    Deleted(String),
}

fn slot_view(shared: &JobManagerShared) -> SlotView {
    let dispatcher = shared.view();
    SlotView {
        pending_slots: dispatcher.resources().pending_slots(),
        taskmanagers: dispatcher
            .resources()
            .taskmanagers()
            .map(|tm| {
                (
                    tm.resource_id.clone(),
                    (tm.free_slots(), tm.slots.len() as u32),
                )
            })
            .collect(),
    }
}

/// An environment variable the Deployment's pod template sets.
fn pod_env(name: &str) -> Result<String, KubeError> {
    std::env::var(name).map_err(|_| {
        KubeError::Cluster(format!(
            "{name} is not set: `sluice kubernetes-jobmanager` runs in the pod `sluice kubernetes-session` creates"
        ))
    })
}

/// The program of an application's job among `programs`: the one named, or with no name (a
/// job artifact given without `-c`) the only one.
pub fn application_program(programs: &ProgramRegistry, name: &str) -> Result<String, String> {
    let names: Vec<&str> = programs.iter().map(|p| p.name()).collect();
    if name.is_empty() {
        return match names.as_slice() {
            [only] => Ok(only.to_string()),
            _ => Err(format!(
                "the job artifact holds {} programs ({}): name one with -c",
                names.len(),
                names.join(", ")
            )),
        };
    }
    if programs.find(name).is_none() {
        return Err(format!(
            "there is no program '{name}' (there are: {})",
            names.join(", ")
        ));
    }
    Ok(name.to_string())
}

/// How the application's job ended, once it did.
fn job_end(shared: &JobManagerShared, job: JobId) -> Option<JobEnd> {
    let dispatcher = shared.view();
    let jm = dispatcher.job(job)?;
    if !jm.status().is_globally_terminal() {
        return None;
    }
    Some(JobEnd {
        state: jm.status().name().to_string(),
        causes: jm
            .exceptions()
            .iter()
            .map(|e| e.exception.clone())
            .collect(),
    })
}

/// Submits the application's job; its end at once when it is refused.
async fn submit(shared: &Arc<JobManagerShared>, job: &ApplicationJob) -> Result<JobId, JobEnd> {
    let refused = |why: String| JobEnd {
        state: "FAILED".into(),
        causes: vec![match job.name.as_str() {
            "" => format!("the job was refused: {why}"),
            name => format!("the job {name} was refused: {why}"),
        }],
    };
    let name = application_program(shared.programs(), &job.name).map_err(refused)?;
    shared
        .submit(
            ProgramSpec::new(name, job.args.clone()),
            job.parallelism,
            &job.overrides,
            job.savepoint.clone(),
        )
        .await
        .map_err(|e| refused(e.to_string()))
}

/// Runs the JobManager pod until it is stopped (SIGTERM), the driver gives up, or (with `job`,
/// an application cluster) the job ended and the cluster deleted itself; returns the process's
/// exit code.
pub async fn run(
    mut config: Config,
    conf_dir: Option<&Path>,
    programs: Arc<ProgramRegistry>,
    job: Option<ApplicationJob>,
) -> Result<u8, KubeError> {
    let cluster_id = config
        .kubernetes
        .cluster_id
        .clone()
        .ok_or_else(|| KubeError::Cluster("kubernetes.cluster-id is not set".into()))?;
    let namespace = config.kubernetes.namespace.clone();
    let pod_ip = pod_env("POD_IP")?;
    let client = KubeClient::from_config(&config)?;
    let deployment = client
        .get(&format!(
            "/apis/apps/v1/namespaces/{namespace}/deployments/{cluster_id}"
        ))
        .await?;
    let owner_uid = deployment["metadata"]["uid"]
        .as_str()
        .ok_or_else(|| KubeError::Cluster(format!("the Deployment {cluster_id} has no uid")))?
        .to_string();
    let deployment_path = format!("/apis/apps/v1/namespaces/{namespace}/deployments/{cluster_id}");
    if job.is_some() && application_status(&deployment).end.is_some() {
        info!(%cluster_id, "the application's job ended under an earlier JobManager; deleting the cluster");
        return delete_own_deployment(&client, &deployment_path).await;
    }
    // TaskManagers run what this JobManager runs: the image's sluice or the application's job
    // artifact, as the Deployment names it.
    let binary = deployment["spec"]["template"]["spec"]["containers"][0]["command"][0]
        .as_str()
        .unwrap_or(SLUICE)
        .to_string();
    // The RPC port is whatever is free (TaskManager pods are told it); REST keeps its
    // configured port, which the Service names.
    for (key, value) in [
        ("jobmanager.bind-host", "0.0.0.0"),
        ("jobmanager.rpc.port", "0"),
        ("jobmanager.rpc.address", pod_ip.as_str()),
        ("rest.bind-address", "0.0.0.0"),
        ("rest.address", pod_ip.as_str()),
    ] {
        config.set(key, value)?;
    }
    let secret = ClusterSecret::resolve(&config, conf_dir).map_err(|e| anyhow::anyhow!(e))?;
    let pods_path = format!("/api/v1/namespaces/{namespace}/pods");
    // TaskManagers of an earlier JobManager of this cluster know only its address: remove
    // them; the jobs' demand brings new ones.
    let listed = client
        .get(&format!(
            "{pods_path}?labelSelector={}",
            selector(&cluster_id, "taskmanager")
        ))
        .await?;
    for pod in listed["items"].as_array().into_iter().flatten() {
        if let Some(name) = pod["metadata"]["name"].as_str() {
            info!(
                pod = name,
                "deleting a TaskManager pod of an earlier JobManager"
            );
            client.delete(&format!("{pods_path}/{name}")).await?;
        }
    }
    let jm = crate::rest::start_jobmanager(config.clone(), secret, programs)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let jobmanager = format!("{pod_ip}:{}", jm.shared.rpc_address().port());
    println!(
        "JobManager REST endpoint: {}://{pod_ip}:{}",
        config.security.rest_ssl.scheme(),
        jm.rest_address.port()
    );
    info!(%cluster_id, %namespace, %jobmanager, application = job.is_some(), "JobManager of a Kubernetes cluster started");
    // The application's job, submitted before the driver runs: its demand brings the pods.
    let (job_id, mut ended) = match &job {
        None => (None, None),
        Some(job) => match submit(&jm.shared, job).await {
            Ok(id) => {
                info!(job_id = %id, "the application's job is submitted");
                if let Err(e) = client
                    .merge_patch(&deployment_path, &job_id_patch(&id.to_string()))
                    .await
                {
                    warn!(error = %e, "cannot record the job's id on the Deployment");
                }
                (Some(id), None)
            }
            Err(end) => (None, Some(end)),
        },
    };

    let (events, mut pod_events) = mpsc::channel(1024);
    let watcher = tokio::spawn(watch_pods(
        client.clone(),
        pods_path.clone(),
        selector(&cluster_id, "taskmanager"),
        events,
    ));
    let mut driver = Driver {
        client,
        config: config.clone(),
        cluster_id,
        owner_uid,
        pods_path,
        jobmanager,
        pool: WorkerPool::new(
            "TaskManager pods",
            config.taskmanager.number_of_task_slots,
            config.yarn.taskmanager_timeout.as_millis() as u64,
            FailureLimit::PerMinute {
                rate: config.kubernetes.max_failure_rate,
                key: "resourcemanager.start-worker.max-failure-rate",
            },
        ),
        // A name prefix of this process's own: pods of an earlier JobManager still being
        // deleted never clash with new ones.
        prefix: format!("{:06x}", rand::random::<u32>() & 0xff_ffff),
        next: 0,
        created: BTreeMap::new(),
        shared: jm.shared.clone(),
        binary,
    };
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| anyhow::anyhow!("cannot watch SIGTERM: {e}"))?;
    let code = loop {
        if ended.is_some() {
            break 0;
        }
        let actions = tokio::select! {
            _ = tokio::time::sleep(TICK) => {
                ended = job_id.and_then(|id| job_end(&jm.shared, id));
                if ended.is_some() {
                    continue;
                }
                driver.pool.tick(&slot_view(&jm.shared), now_ms())
            }
            event = pod_events.recv() => match event {
                Some(event) => driver.on_event(event),
                None => {
                    error!("the pod watcher ended");
                    break 1;
                }
            },
            _ = terminate.recv() => {
                info!("SIGTERM: the JobManager pod is stopping");
                break 0;
            }
        };
        if let Some(diagnostics) = driver.execute(actions).await {
            error!(%diagnostics, "the Kubernetes resource driver gives up");
            eprintln!("error: {diagnostics}");
            if job.is_some() {
                // An application cluster's job cannot run: that is its end.
                ended = Some(JobEnd {
                    state: "FAILED".into(),
                    causes: vec![diagnostics],
                });
                continue;
            }
            break 1;
        }
    };
    watcher.abort();
    let stopped = match &ended {
        Some(end) => {
            info!(state = %end.state, causes = ?end.causes, "the application's job ended");
            if let Err(e) = driver
                .client
                .merge_patch(&deployment_path, &job_end_patch(end))
                .await
            {
                warn!(error = %e, "cannot record the job's end on the Deployment");
            }
            // The REST API keeps serving the final state meanwhile.
            tokio::select! {
                _ = tokio::time::sleep(END_GRACE) => false,
                _ = terminate.recv() => true,
            }
        }
        None => true,
    };
    // The pods are the Deployment's too (its deletion removes them), but a JobManager that
    // stops on its own takes its TaskManagers along.
    for name in driver.pool.all() {
        if let Err(e) = driver
            .client
            .delete(&format!("{}/{name}", driver.pods_path))
            .await
        {
            warn!(pod = %name, error = %e, "cannot delete a TaskManager pod");
        }
    }
    drop(jm);
    if !stopped {
        return delete_own_deployment(&driver.client, &deployment_path).await;
    }
    Ok(code)
}

/// Deletes the application cluster's Deployment (the garbage collector removes its pods,
/// Service and Secret) and waits to be stopped with the pod. A failure to delete exits 1: the
/// Deployment starts a new JobManager, which finds the end recorded and tries again.
async fn delete_own_deployment(client: &KubeClient, path: &str) -> Result<u8, KubeError> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| anyhow::anyhow!("cannot watch SIGTERM: {e}"))?;
    match client.delete(path).await {
        Ok(_) => info!("the application cluster's Deployment is deleted"),
        Err(e) => {
            error!(error = %e, "cannot delete the application cluster's Deployment");
            return Ok(1);
        }
    }
    tokio::select! {
        _ = tokio::time::sleep(DELETION_PATIENCE) => {
            warn!("not stopped {DELETION_PATIENCE:?} after deleting the Deployment; exiting");
        }
        _ = terminate.recv() => {}
    }
    Ok(0)
}

struct Driver {
    client: KubeClient,
    config: Config,
    cluster_id: String,
    owner_uid: String,
    pods_path: String,
    jobmanager: String,
    pool: WorkerPool<String>,
    prefix: String,
    next: u64,
    /// When each pod of the pool was created (ms).
    created: BTreeMap<String, u64>,
    shared: Arc<JobManagerShared>,
    /// The command TaskManager pods run.
    binary: String,
}

impl Driver {
    /// A pod event as the pool's events: a pod that cannot start or ended is deleted (a
    /// `Never` pod stays Failed otherwise) and reported.
    fn on_event(&mut self, event: PodEvent) -> Vec<Action<String>> {
        let now = now_ms();
        match event {
            PodEvent::Listed { pods, since } => {
                let present: BTreeSet<String> = pods
                    .iter()
                    .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                    .collect();
                let mut out = Vec::new();
                // A pod created after the list was asked for may be missing from it.
                let gone: Vec<String> = self
                    .pool
                    .resource_ids()
                    .into_iter()
                    .filter(|n| {
                        !present.contains(n) && self.created.get(n).is_some_and(|t| *t < since)
                    })
                    .collect();
                for name in gone {
                    out.extend(self.pool.ended(&name, &format!("pod {name} is gone"), now));
                }
                for pod in pods {
                    out.extend(self.on_event(PodEvent::Changed(pod)));
                }
                out
            }
            PodEvent::Changed(pod) => {
                let name = pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if self.pool.worker(&name).is_none() {
                    return Vec::new();
                }
                match pod_state(&pod) {
                    PodState::Pending | PodState::Running => Vec::new(),
                    PodState::CannotStart(why) => {
                        warn!(pod = %name, %why, "a TaskManager pod cannot start");
                        let mut out = vec![Action::Stop(name.clone())];
                        out.extend(self.pool.start_failed(&name, &why, now));
                        out
                    }
                    PodState::Ended(how) => {
                        info!(pod = %name, %how, "a TaskManager pod ended");
                        let mut out = vec![Action::Stop(name.clone())];
                        out.extend(self.pool.ended(&name, &how, now));
                        out
                    }
                }
            }
            PodEvent::Deleted(name) => {
                self.created.remove(&name);
                self.pool
                    .ended(&name, &format!("pod {name} was deleted"), now)
            }
        }
    }

    /// Carries out the pool's actions; returns the diagnostic when the driver gives up.
    async fn execute(&mut self, actions: Vec<Action<String>>) -> Option<String> {
        let mut queue: std::collections::VecDeque<Action<String>> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Request(n) => {
                    for _ in 0..n {
                        self.next += 1;
                        let name = format!(
                            "{}-taskmanager-{}-{}",
                            self.cluster_id, self.prefix, self.next
                        );
                        self.pool.started(name.clone(), name.clone(), now_ms());
                        self.created.insert(name.clone(), now_ms());
                        let pod = taskmanager_pod(
                            &self.config,
                            &self.cluster_id,
                            &self.owner_uid,
                            &name,
                            &self.jobmanager,
                            &self.binary,
                        );
                        match self.client.create(&self.pods_path, &pod).await {
                            Ok(_) => info!(pod = %name, "TaskManager pod created"),
                            Err(e) => {
                                warn!(pod = %name, error = %e, "cannot create a TaskManager pod");
                                queue.extend(self.pool.start_failed(
                                    &name,
                                    &format!("creating pod {name} failed: {e}"),
                                    now_ms(),
                                ));
                            }
                        }
                    }
                }
                // Pods are created at once: no request is ever outstanding to withdraw.
                Action::Withdraw(_) => {}
                Action::Stop(name) => {
                    info!(pod = %name, "deleting a TaskManager pod");
                    if let Err(e) = self
                        .client
                        .delete(&format!("{}/{name}", self.pods_path))
                        .await
                    {
                        warn!(pod = %name, error = %e, "cannot delete a TaskManager pod");
                    }
                }
                Action::Lost {
                    resource_id,
                    reason,
                } => self.shared.taskmanager_lost(&resource_id, &reason),
                Action::Fail(diagnostics) => return Some(diagnostics),
            }
        }
        None
    }
}

/// Lists and then watches the cluster's TaskManager pods, forever: a watch the server ends is
/// resumed from the last resource version, an expired one (410 Gone) starts over with a list.
async fn watch_pods(
    client: KubeClient,
    pods_path: String,
    selector: String,
    events: mpsc::Sender<PodEvent>,
) {
    let path = format!("{pods_path}?labelSelector={selector}");
    let mut version: Option<String> = None;
    let mut failures = 0u32;
    loop {
        if failures > 0 {
            tokio::time::sleep(Duration::from_millis(500 * u64::from(failures.min(10)))).await;
        }
        let asked = now_ms();
        let from = match &version {
            Some(v) => v.clone(),
            None => match client.get(&path).await {
                Ok(list) => {
                    let v = list["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("0")
                        .to_string();
                    let items = list["items"].as_array().cloned().unwrap_or_default();
                    let listed = PodEvent::Listed {
                        pods: items,
                        since: asked,
                    };
                    if events.send(listed).await.is_err() {
                        return;
                    }
                    version = Some(v.clone());
                    v
                }
                Err(e) => {
                    failures += 1;
                    warn!(error = %e, "listing TaskManager pods failed; retrying");
                    continue;
                }
            },
        };
        let mut watch = match client.watch(&path, &from, WATCH_TIMEOUT_S).await {
            Ok(w) => w,
            Err(e) => {
                failures += 1;
                warn!(error = %e, "watching TaskManager pods failed; listing again");
                version = None;
                continue;
            }
        };
        failures = 0;
        loop {
            match watch.next().await {
                Ok(Some(event)) => {
                    let object = &event["object"];
                    if let Some(v) = object["metadata"]["resourceVersion"].as_str() {
                        version = Some(v.to_string());
                    }
                    let sent = match event["type"].as_str() {
                        Some("ADDED") | Some("MODIFIED") => {
                            events.send(PodEvent::Changed(object.clone())).await
                        }
                        Some("DELETED") => {
                            let name = object["metadata"]["name"].as_str().unwrap_or_default();
                            events.send(PodEvent::Deleted(name.to_string())).await
                        }
                        Some("ERROR") => {
                            // Most often 410 Gone: the version is too old; list again.
                            warn!(status = %object, "the pod watch reported an error; listing again");
                            version = None;
                            break;
                        }
                        _ => Ok(()), // BOOKMARK
                    };
                    if sent.is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    warn!(error = %e, "the pod watch broke off; resuming");
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_application_program_is_the_one_named_or_the_only_one() {
        let bundled = crate::examples::bundled();
        assert_eq!(
            application_program(&bundled, "wordcount").as_deref(),
            Ok("wordcount")
        );
        let unknown = application_program(&bundled, "nope").unwrap_err();
        assert!(
            unknown.contains("no program 'nope'") && unknown.contains("wordcount"),
            "{unknown}"
        );
        let several = application_program(&bundled, "").unwrap_err();
        assert!(several.contains("name one with -c"), "{several}");
        let mut one = ProgramRegistry::new();
        one.register(bundled.find("counting").unwrap()).unwrap();
        assert_eq!(application_program(&one, "").as_deref(), Ok("counting"));
    }
}
