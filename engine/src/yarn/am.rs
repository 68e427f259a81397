//! The ApplicationMaster process: `sluice yarn-appmaster`, started by a NodeManager in the
//! application's first container. It runs a normal JobManager (Dispatcher, REST and web UI,
//! JobMasters) and the YARN resource driver: a thin loop that feeds the ResourceManager's slot
//! demand to [`TaskManagerPool`] and carries out its commands over Hadoop RPC.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};
use yarn_am::{
    AmCommand, AmRmClient, ApplicationId, Container, ContainerEnv, Credentials, FinalStatus,
    LaunchContext, NmClient,
};

use super::cluster::{HADOOP_USER_ENV, scheduler_address, taskmanager_capability, user};
use super::pool::{Command, SlotView, TASKMANAGER_PRIORITY, TaskManagerPool};
use super::{
    ApplicationJob, JOB_ENV, RESOURCES_ENV, SCHEDULER_ENV, SHIP_DIR_ENV, YarnError, staging,
};
use crate::common::ids::JobId;
use crate::config::Config;
use crate::ha::JobRecord;
use crate::jobmanager::jobmaster::JobStatus;
use crate::jobmanager::service::{JobManagerShared, now_ms};
use crate::rpc::messages::ProgramSpec;
use crate::security::ClusterSecret;

/// How often the driver looks at the slot demand. YARN is only called when the pool changed
/// something or the heartbeat interval YARN's client suggests (0.5 s / 5 s) has passed.
const TICK: Duration = Duration::from_millis(250);
/// Heartbeat interval while containers are outstanding or starting (Flink's 500 ms).
const FAST_HEARTBEAT: Duration = Duration::from_millis(500);
/// RPC timeout towards the scheduler and NodeManagers.
const RPC_TIMEOUT: Duration = Duration::from_secs(30);
/// Consecutive failed heartbeats after which the AM gives up (YARN's liveness monitor would
/// expire it anyway).
const MAX_HEARTBEAT_FAILURES: u32 = 20;

/// The container's view of what the ResourceManager (sluice's) holds.
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

/// How the TaskManagers of this AM find their JobManager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobManagerLocation {
    /// Without HA: this AM's RPC endpoint, `host:port`.
    Address(String),
    /// With ZooKeeper HA: whichever JobManager leads under this HA cluster id. A TaskManager
    /// then follows the leader through ZooKeeper, so it also finds the JobManager of a later
    /// AM attempt (new node, new ports) and is never refused for naming no leader session.
    ZooKeeper {
        /// The `high-availability.cluster-id` every attempt of the application shares.
        cluster_id: String,
    },
}

/// The command that starts a TaskManager in `container`. The resource id is the container id:
/// that is how the pool recognises the TaskManager's slots.
pub fn taskmanager_command(container: &Container, jobmanager: &JobManagerLocation) -> Vec<String> {
    let target = match jobmanager {
        JobManagerLocation::Address(address) => format!("taskmanager --jobmanager {address}"),
        // Passed explicitly, not left to the shipped config.yaml: the AM decided the id.
        JobManagerLocation::ZooKeeper { cluster_id } => {
            format!("-D high-availability.cluster-id={cluster_id} taskmanager")
        }
    };
    vec![
        format!(
            "./sluice --config-dir . -D taskmanager.resource-id={} -D taskmanager.host={} -D taskmanager.bind-host=0.0.0.0 {target}",
            container.id, container.node.host
        ),
        // YARN's names: the NodeManager quotes the tail of `stderr` in the diagnostics of a
        // container that failed, which is where a TaskManager's start-up error lands.
        "1><LOG_DIR>/stdout".into(),
        "2><LOG_DIR>/stderr".into(),
    ]
}

/// With ZooKeeper HA and no `high-availability.cluster-id` of the user's, the application id
/// becomes the cluster id (as Flink does on YARN): every AM attempt of one application then
/// shares one HA namespace (job graphs, leader, results), and two applications on the same
/// quorum never see each other's jobs. A cluster id of `default` counts as unset.
pub fn default_ha_cluster_id(config: &mut Config, application: &str) -> Result<(), YarnError> {
    if config.ha.zookeeper && config.ha.cluster_id == Config::default().ha.cluster_id {
        config.set("high-availability.cluster-id", application)?;
    }
    Ok(())
}

/// What the AM registered with, to register again when YARN asks for a resync.
#[derive(Debug)]
struct Registered {
    host: String,
    port: i32,
    tracking_url: String,
}

/// How the ApplicationMaster ended.
#[derive(Debug)]
enum Outcome {
    /// YARN asked it to stop (kill, shutdown command) or it got SIGTERM: nothing to unregister.
    Stopped(String),
    /// It gives up: unregister with FAILED and this diagnostic.
    Failed(String),
    /// Its one job ended (`run -t yarn-application`): unregister with this status.
    Finished(FinalStatus, String),
}

/// The id of a one-job application's job with ZooKeeper HA: derived from the application id,
/// so a later AM attempt recognises the job in the HA stores instead of running it twice.
pub fn application_job_id(application: &ApplicationId) -> JobId {
    JobId(
        (u128::from(application.cluster_timestamp as u64) << 64)
            | u128::from(application.id as u32),
    )
}

/// Submits the one job of a `run -t yarn-application` application, if this is one. With
/// ZooKeeper HA it first waits to lead, and a later attempt takes over the earlier attempt's
/// job (recovered from its checkpoint by the new leader) or its stored end, rather than
/// submitting it again.
async fn submit_application_job(
    shared: &Arc<JobManagerShared>,
    application: &ApplicationId,
) -> Result<Option<JobId>, Outcome> {
    let Ok(json) = std::env::var(JOB_ENV) else {
        return Ok(None);
    };
    let job = ApplicationJob::decode(JOB_ENV, &json).map_err(Outcome::Failed)?;
    let refused = |e: String| Outcome::Failed(format!("the job {} was refused: {e}", job.name));
    let program = ProgramSpec::new(job.name.clone(), job.args.clone());
    let Some(ha) = shared.ha() else {
        return shared
            .submit(
                program,
                job.parallelism,
                &job.overrides,
                job.savepoint.clone(),
            )
            .await
            .map(Some)
            .map_err(|e| refused(e.to_string()));
    };
    // A previous attempt's leadership ends only when its ZooKeeper session expires.
    let patience = shared.config().ha.session_timeout * 3 + Duration::from_secs(30);
    let waiting = Instant::now();
    while !shared.is_leader() {
        if waiting.elapsed() > patience {
            return Err(Outcome::Failed(format!(
                "this JobManager did not become the ZooKeeper leader within {patience:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let id = application_job_id(application);
    let key = id.to_string();
    let store_error = |what: &str, e: zk_ha::HaError| {
        Outcome::Failed(format!(
            "cannot read the HA {what} store for job {key}: {e}"
        ))
    };
    if let Some(result) = ha
        .services()
        .job_result_store()
        .get(&key)
        .await
        .map_err(|e| store_error("job result", e))?
    {
        // The job ended under an earlier attempt, which died before unregistering.
        let state = serde_json::from_slice::<serde_json::Value>(&result)
            .ok()
            .and_then(|v| v["state"].as_str().map(str::to_string))
            .unwrap_or_default();
        let status = match state.as_str() {
            "FINISHED" => FinalStatus::Succeeded,
            "CANCELED" => FinalStatus::Killed,
            _ => FinalStatus::Failed,
        };
        return Err(Outcome::Finished(
            status,
            format!("job {id} ({}) {state} under an earlier attempt", job.name),
        ));
    }
    if ha
        .services()
        .job_graph_store()
        .get(&key)
        .await
        .map_err(|e| store_error("job graph", e))?
        .is_some()
    {
        // Stored before this term began: the new leader's recovery submits it again.
        info!(job_id = %id, "the application's job is recovered from the HA job graph store");
        return Ok(Some(id));
    }
    let record = JobRecord {
        job_id: id,
        program,
        parallelism: job
            .parallelism
            .unwrap_or(shared.config().parallelism_default),
        overrides: job.overrides.clone(),
        savepoint: job.savepoint.clone(),
    };
    shared
        .submit_recoverable(&record)
        .await
        .map(Some)
        .map_err(refused)
}

/// The YARN outcome of a job that ended, if it did.
fn job_outcome(shared: &JobManagerShared, job: JobId) -> Option<Outcome> {
    let dispatcher = shared.view();
    let jm = dispatcher.job(job)?;
    if !jm.status().is_globally_terminal() {
        return None;
    }
    let status = match jm.status() {
        JobStatus::Finished => FinalStatus::Succeeded,
        JobStatus::Canceled => FinalStatus::Killed,
        _ => FinalStatus::Failed,
    };
    let cause = jm
        .exceptions()
        .first()
        .map(|e| format!(": {}", e.exception))
        .unwrap_or_default();
    Some(Outcome::Finished(
        status,
        format!("job {job} ({}) {}{cause}", jm.name(), jm.status().name()),
    ))
}

/// Runs the ApplicationMaster, whose JobManager knows `programs` (those of the shipped binary:
/// the bundled examples, or a job artifact's), until YARN stops it; returns the process's exit
/// code.
pub async fn run(
    mut config: Config,
    conf_dir: Option<&Path>,
    programs: Arc<crate::api::ProgramRegistry>,
) -> Result<u8, YarnError> {
    let env = ContainerEnv::from_env().map_err(|e| YarnError::Container(e.to_string()))?;
    let credentials = Credentials::from_env().map_err(|e| YarnError::Container(e.to_string()))?;
    let token = credentials
        .amrm_token()
        .map_err(|e| YarnError::Container(e.to_string()))?
        .clone();
    let scheduler = match std::env::var(SCHEDULER_ENV) {
        Ok(s) if !s.is_empty() => s,
        _ => scheduler_address(&config)?,
    };
    let host = env.nm_host.clone();
    // Ports are whatever is free on the node: several sessions may share it. Everything binds
    // all interfaces and advertises the node's host name, as YARN names the node.
    for (key, value) in [
        ("jobmanager.bind-host", "0.0.0.0"),
        ("jobmanager.rpc.port", "0"),
        ("jobmanager.rpc.address", host.as_str()),
        ("rest.bind-address", "0.0.0.0"),
        ("rest.port", "0"),
        ("rest.address", host.as_str()),
    ] {
        config.set(key, value)?;
    }
    let not_set = |name: &str| {
        YarnError::Container(format!(
            "{name} is not set: submit with `sluice yarn-session`"
        ))
    };
    let ship_dir = std::env::var(SHIP_DIR_ENV).map_err(|_| not_set(SHIP_DIR_ENV))?;
    // The files the client staged, as this container got them: every TaskManager container
    // localizes the same ones (from HDFS on a multi-host cluster).
    let resources = std::env::var(RESOURCES_ENV)
        .map_err(|_| not_set(RESOURCES_ENV))
        .and_then(|v| staging::resources_from_env(&v).map_err(YarnError::Container))?;
    let secret = ClusterSecret::resolve(&config, conf_dir)?;

    let application = env.attempt().application.to_string();
    default_ha_cluster_id(&mut config, &application)?;

    let jm = crate::rest::start_jobmanager(config.clone(), secret, programs).await?;
    let rest_port = jm.rest_address.port();
    let jobmanager = format!("{host}:{}", jm.shared.rpc_address().port());
    let location = if jm.shared.has_ha() {
        JobManagerLocation::ZooKeeper {
            cluster_id: config.ha.cluster_id.clone(),
        }
    } else {
        JobManagerLocation::Address(jobmanager.clone())
    };
    let tracking_url = format!("{}://{host}:{rest_port}", config.security.rest_ssl.scheme());
    let mut rm = AmRmClient::new(scheduler.clone(), token).with_timeout(RPC_TIMEOUT);
    let peer = format!("scheduler at {scheduler}");
    // The registered port is the REST port: clients find the web UI and REST API through the
    // application report's `amRPCAddress`, as Flink does.
    let registration = rm
        .register(&host, i32::from(rest_port), &tracking_url)
        .await
        .map_err(|cause| YarnError::Rpc {
            peer: peer.clone(),
            cause,
        })?;
    info!(
        attempt = %env.attempt(),
        %tracking_url,
        %jobmanager,
        ha_cluster_id = ?jm.shared.has_ha().then_some(config.ha.cluster_id.as_str()),
        max = ?registration.maximum_capability,
        "ApplicationMaster registered with YARN"
    );
    println!("JobManager REST endpoint: {tracking_url}");

    let capability = taskmanager_capability(&config);
    let launch = LaunchContext {
        local_resources: resources,
        // HADOOP_CONF_DIR comes from each NodeManager (YARN's environment whitelist): the
        // node's own Hadoop configuration, as for the AM.
        environment: BTreeMap::from([
            (
                "RUST_LOG".to_string(),
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            ),
            // HDFS as the application's user, who staged the files, not as the NodeManager's.
            (HADOOP_USER_ENV.to_string(), user()),
        ]),
        ..Default::default()
    };
    let mut pool = TaskManagerPool::new(
        capability,
        config.taskmanager.number_of_task_slots,
        config.yarn.taskmanager_timeout.as_millis() as u64,
        config.yarn.maximum_failed_containers,
    );
    if !registration.containers_from_previous_attempts.is_empty() {
        info!(
            containers = registration.containers_from_previous_attempts.len(),
            "taking over TaskManager containers of the previous attempt"
        );
        pool.adopt(registration.containers_from_previous_attempts, now_ms());
    }
    let me = Registered {
        host: host.clone(),
        port: i32::from(rest_port),
        tracking_url: tracking_url.clone(),
    };
    let outcome = match submit_application_job(&jm.shared, &env.attempt().application).await {
        Ok(job) => drive(&mut rm, &mut pool, &jm.shared, &launch, &location, &me, job).await,
        Err(outcome) => outcome,
    };
    let last_attempt = env
        .max_app_attempts
        .is_none_or(|max| env.attempt().attempt >= max);
    let (code, unregistered) = match outcome {
        Outcome::Stopped(why) => {
            info!(%why, "ApplicationMaster stopping");
            (0, false)
        }
        Outcome::Failed(diagnostics) => {
            warn!(%diagnostics, "ApplicationMaster failing the application");
            let done = unregister(&mut rm, FinalStatus::Failed, &diagnostics, &tracking_url).await;
            (1, done)
        }
        Outcome::Finished(status, diagnostics) => {
            info!(?status, %diagnostics, "the application's job ended; unregistering");
            let done = unregister(&mut rm, status, &diagnostics, &tracking_url).await;
            (if done { 0 } else { 1 }, done)
        }
    };
    // Once the application is over for good, nothing will localize the shipped files again.
    if unregistered || last_attempt {
        remove_ship_dir(ship_dir, &env).await;
    }
    drop(jm);
    Ok(code)
}

async fn unregister(
    rm: &mut AmRmClient,
    status: FinalStatus,
    diagnostics: &str,
    tracking_url: &str,
) -> bool {
    match rm
        .finish(
            status,
            diagnostics,
            Some(tracking_url),
            Duration::from_secs(30),
        )
        .await
    {
        Ok(()) => true,
        Err(e) => {
            warn!(error = %e, "unregistering failed");
            false
        }
    }
}

/// Removes the client's staging directory (local or on HDFS), but only one named after this
/// application: the path comes from the environment, and the AM must never delete anything
/// else.
async fn remove_ship_dir(dir: String, env: &ContainerEnv) {
    let ours = env.container_id.attempt.application.to_string();
    if !staging::belongs_to(&dir, &ours) {
        warn!(%dir, "not removing a staging directory named after another application");
        return;
    }
    let removing = dir.clone();
    // The storage blocks (HDFS's client in particular): not on a runtime worker.
    let result = tokio::task::spawn_blocking(move || {
        staging::remove(&crate::state::fs::FileSystems::new(), &removing)
    })
    .await;
    match result {
        Ok(Ok(())) => info!(%dir, "removed the shipped files"),
        Ok(Err(e)) => warn!(%dir, error = %e, "cannot remove the shipped files"),
        Err(e) => warn!(%dir, error = %e, "removing the shipped files panicked"),
    }
}

/// The resource driver's loop.
async fn drive(
    rm: &mut AmRmClient,
    pool: &mut TaskManagerPool,
    shared: &Arc<JobManagerShared>,
    launch: &LaunchContext,
    jobmanager: &JobManagerLocation,
    me: &Registered,
    job: Option<JobId>,
) -> Outcome {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => return Outcome::Failed(format!("cannot watch SIGTERM: {e}")),
        };
    let mut last_heartbeat: Option<Instant> = None;
    let mut failures = 0u32;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = terminate.recv() => return Outcome::Stopped("SIGTERM (YARN killed the application)".into()),
        }
        if let Some(outcome) = job.and_then(|j| job_outcome(shared, j)) {
            return outcome;
        }
        let commands = pool.tick(&slot_view(shared), now_ms());
        let changed = !commands.is_empty();
        if let Some(outcome) = execute(rm, pool, shared, launch, jobmanager, commands).await {
            return outcome;
        }
        // Heartbeat fast while TaskManagers are on their way: a container that fails to start
        // is then noticed (and replaced) within a second.
        let interval = if pool.starting() > 0 {
            FAST_HEARTBEAT
        } else {
            rm.suggested_interval()
        };
        let due = last_heartbeat.is_none_or(|t| t.elapsed() >= interval);
        if !changed && !due {
            continue;
        }
        last_heartbeat = Some(Instant::now());
        let allocation = match rm.allocate(0.5).await {
            Ok(a) => {
                failures = 0;
                a
            }
            Err(e) if e.is_retryable() && failures < MAX_HEARTBEAT_FAILURES => {
                failures += 1;
                warn!(error = %e, failures, "heartbeat to YARN's scheduler failed; retrying");
                continue;
            }
            Err(e) => return Outcome::Failed(format!("heartbeat to YARN's scheduler: {e}")),
        };
        match allocation.command {
            Some(AmCommand::Shutdown) => {
                return Outcome::Stopped("YARN ordered a shutdown".into());
            }
            Some(AmCommand::Resync) => {
                warn!("YARN asked for a resync; registering again");
                if let Err(e) = rm.register(&me.host, me.port, &me.tracking_url).await {
                    return Outcome::Failed(format!("re-registering after a resync: {e}"));
                }
            }
            _ => {}
        }
        if !allocation.allocated.is_empty() {
            info!(
                granted = allocation.allocated.len(),
                "YARN granted TaskManager containers"
            );
        }
        let mut commands = pool.on_allocated(allocation.allocated, now_ms());
        commands.extend(pool.on_completed(&allocation.completed));
        if let Some(outcome) = execute(rm, pool, shared, launch, jobmanager, commands).await {
            return outcome;
        }
    }
}

/// Carries out the pool's commands; a failed launch feeds back into the pool.
async fn execute(
    rm: &mut AmRmClient,
    pool: &mut TaskManagerPool,
    shared: &Arc<JobManagerShared>,
    launch: &LaunchContext,
    jobmanager: &JobManagerLocation,
    commands: Vec<Command>,
) -> Option<Outcome> {
    let mut queue: VecDeque<Command> = commands.into();
    while let Some(command) = queue.pop_front() {
        match command {
            Command::SetRequest(n) => {
                info!(containers = n, capability = ?pool.capability(), "asking YARN for TaskManager containers");
                rm.set_request(TASKMANAGER_PRIORITY, pool.capability(), n);
            }
            Command::Launch(container) => {
                let result = start_taskmanager(rm, &container, launch, jobmanager).await;
                match result {
                    Ok(()) => {
                        info!(container = %container.id, node = %container.node, "TaskManager container started")
                    }
                    Err(e) => {
                        warn!(container = %container.id, error = %e, "TaskManager container failed to start");
                        queue.extend(pool.on_launch_failed(container.id, &e.to_string()));
                    }
                }
            }
            Command::Release(id) => rm.release(id),
            Command::Stop(container) => {
                info!(container = %container.id, "releasing an idle TaskManager");
                // Releasing makes YARN kill the container; stopping it through its NodeManager
                // first makes that immediate.
                if let Some(token) = rm.nm_token(&container.node).cloned() {
                    let mut nm = NmClient::new(&container.node, token).with_timeout(RPC_TIMEOUT);
                    if let Err(e) = nm.stop_container(container.id).await {
                        warn!(container = %container.id, error = %e, "stopping through the NodeManager failed; releasing");
                    }
                }
                rm.release(container.id);
            }
            Command::Lost {
                resource_id,
                reason,
            } => {
                shared.taskmanager_lost(&resource_id, &reason);
            }
            Command::Fail(diagnostics) => return Some(Outcome::Failed(diagnostics)),
        }
    }
    None
}

async fn start_taskmanager(
    rm: &AmRmClient,
    container: &Container,
    launch: &LaunchContext,
    jobmanager: &JobManagerLocation,
) -> Result<(), YarnError> {
    let token = rm.nm_token(&container.node).cloned().ok_or_else(|| {
        YarnError::Container(format!("YARN sent no NM token for {}", container.node))
    })?;
    let mut nm = NmClient::new(&container.node, token).with_timeout(RPC_TIMEOUT);
    let mut launch = launch.clone();
    launch.commands = taskmanager_command(container, jobmanager);
    nm.start_container(container, &launch)
        .await
        .map_err(|cause| YarnError::Rpc {
            peer: format!("NodeManager {}", container.node),
            cause,
        })
}

#[cfg(test)]
mod tests {
    use yarn_am::Resource;

    use super::*;

    #[test]
    fn with_zookeeper_ha_the_application_id_is_the_default_cluster_id() {
        let app = "application_1795965764364_0006";
        let mut plain = Config::default();
        default_ha_cluster_id(&mut plain, app).unwrap();
        assert_eq!(plain.ha.cluster_id, Config::default().ha.cluster_id);

        // Loaded together: `set` one key at a time would refuse zookeeper without a quorum.
        let ha = |extra: &[&str]| {
            let keys: Vec<String> = [
                "high-availability.type=zookeeper",
                "high-availability.zookeeper.quorum=127.0.0.1:2181",
                "high-availability.storageDir=/tmp/ha",
            ]
            .iter()
            .chain(extra)
            .map(|k| k.to_string())
            .collect();
            Config::load(None, &keys).unwrap()
        };
        let mut unset = ha(&[]);
        default_ha_cluster_id(&mut unset, app).unwrap();
        assert_eq!(unset.ha.cluster_id, app);
        let mut own = ha(&["high-availability.cluster-id=mine"]);
        default_ha_cluster_id(&mut own, app).unwrap();
        assert_eq!(own.ha.cluster_id, "mine");
    }

    #[test]
    fn an_application_job_id_is_the_same_for_every_attempt_and_differs_between_applications() {
        let app = |id| ApplicationId {
            cluster_timestamp: 1_795_965_764_364,
            id,
        };
        assert_eq!(application_job_id(&app(6)), application_job_id(&app(6)));
        assert_ne!(application_job_id(&app(6)), application_job_id(&app(7)));
        assert_eq!(
            application_job_id(&app(6)).to_string(),
            "000001a227e6c30c0000000000000006"
        );
    }

    #[test]
    fn taskmanagers_follow_zookeeper_with_ha_and_the_am_address_without() {
        let container: Container = Container {
            id: "container_1795965764364_0006_02_000002".parse().unwrap(),
            node: yarn_am::NodeId {
                host: "node1".into(),
                port: 45454,
            },
            node_http_address: String::new(),
            resource: Resource::new(256, 1),
            priority: TASKMANAGER_PRIORITY,
            token: None,
        };
        let direct =
            taskmanager_command(&container, &JobManagerLocation::Address("am:6123".into()));
        assert!(
            direct[0].ends_with("taskmanager --jobmanager am:6123"),
            "{}",
            direct[0]
        );
        let ha = taskmanager_command(
            &container,
            &JobManagerLocation::ZooKeeper {
                cluster_id: "application_1795965764364_0006".into(),
            },
        );
        assert!(
            ha[0].ends_with(
                "-D high-availability.cluster-id=application_1795965764364_0006 taskmanager"
            ),
            "{}",
            ha[0]
        );
        assert!(!ha[0].contains("--jobmanager"), "{}", ha[0]);
    }
}
