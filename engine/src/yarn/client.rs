//! The client side of a sluice session on YARN, over the ResourceManager's REST API:
//! submitting the ApplicationMaster (with the files it ships), waiting until its JobManager
//! answers, attaching to a running session, listing and killing applications.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use yarn_am::{AppState, AppSubmission, LaunchContext, Resource, RestClient};

use super::cluster::{
    container_mb, scheduler_address, shipped_resources, taskmanager_capability, user,
    webapp_address,
};
use super::properties::{parse_properties, properties_file, read_properties, write_private};
use super::{
    APPLICATION_TYPE, ApplicationJob, JOB_ENV, SCHEDULER_ENV, SHIP_DIR_ENV, Session, YarnError,
};
use crate::config::Config;

/// How long YARN may take to accept a submission.
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the JobManager may take from submission until its REST API answers.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a kill may take.
const KILL_TIMEOUT: Duration = Duration::from_secs(60);

fn rest_client(address: &str) -> Result<RestClient, YarnError> {
    RestClient::new(address)
        .map(|c| c.with_user(user()))
        .map_err(|e| YarnError::rest(address, None, e))
}

/// The ResourceManager's REST API, for a client that watches one application.
pub struct ResourceManager {
    web: String,
    rest: RestClient,
}

impl ResourceManager {
    /// The configured ResourceManager's REST API.
    pub fn connect(config: &Config) -> Result<Self, YarnError> {
        let web = webapp_address(config)?;
        let rest = rest_client(&web)?;
        Ok(ResourceManager { web, rest })
    }

    /// Waits until the application ends; returns its final report.
    pub async fn wait_until_ended(&self, id: &str) -> Result<yarn_am::AppReport, YarnError> {
        wait_until_ended(&self.rest, &self.web, id).await
    }

    /// Why the application ended, if it has (a report that cannot be read counts as running).
    pub async fn ended(&self, id: &str) -> Option<YarnError> {
        match self.rest.application(id).await {
            Ok(report) if report.state.is_terminal() => Some(ended(&report)),
            _ => None,
        }
    }
}

/// The session named in the properties file; checked with YARN when it is reachable, so a
/// session that ended is reported instead of a connection error to a dead JobManager.
pub async fn find_session(config: &Config) -> Result<Session, YarnError> {
    let path = properties_file();
    let text = std::fs::read_to_string(&path).map_err(|_| {
        YarnError::NoSession(format!(
            "{} does not exist: start one with `sluice yarn-session -d`",
            path.display()
        ))
    })?;
    let (application_id, recorded) = parse_properties(&text).ok_or_else(|| {
        YarnError::NoSession(format!("{} names no applicationID", path.display()))
    })?;
    let rest_address = match webapp_address(config) {
        Ok(web) => {
            let rest = rest_client(&web)?;
            let report = rest
                .application(&application_id)
                .await
                .map_err(|e| YarnError::rest(&web, Some(&application_id), e))?;
            if report.state != AppState::Running {
                return Err(ended(&report));
            }
            registered_address(&report).unwrap_or(recorded)
        }
        // Without a configured ResourceManager, trust the file.
        Err(_) => recorded,
    };
    if rest_address.is_empty() {
        return Err(YarnError::NoSession(format!(
            "{} names no REST address",
            path.display()
        )));
    }
    Ok(Session {
        application_id,
        rest_address,
        startup: Duration::ZERO,
    })
}

fn ended(report: &yarn_am::AppReport) -> YarnError {
    YarnError::Ended {
        id: report.id.clone(),
        state: format!("{:?}", report.state).to_uppercase(),
        final_status: format!("{:?}", report.final_status).to_uppercase(),
        diagnostics: report.diagnostics.clone(),
    }
}

/// The JobManager's REST address from the report: the AM registers its REST port.
fn registered_address(report: &yarn_am::AppReport) -> Option<String> {
    let a = report.am_rpc_address.trim();
    let (host, port) = a.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    (!host.is_empty() && port != 0).then(|| format!("{host}:{port}"))
}

/// Writes the files every container gets into `dir`: the binary, the configuration (without
/// secrets, and with the cluster's own generated secret file next to it).
fn stage(config: &Config, dir: &Path) -> Result<(), YarnError> {
    let io = |what: &'static str, path: &Path| {
        let path = path.display().to_string();
        move |cause| YarnError::Io { what, path, cause }
    };
    std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    let exe = std::env::current_exe().map_err(io("cannot find the running binary", dir))?;
    // A copy, not the build output itself: YARN refuses to localize a file whose size or
    // modification time changed after submission, and a rebuild would do exactly that.
    let binary = dir.join("sluice");
    std::fs::copy(&exe, &binary).map_err(io("cannot copy the sluice binary to", &binary))?;
    let mut yaml = String::from("# Generated by sluice yarn-session for the containers.\n");
    for line in config.to_overrides() {
        if let Some((key, value)) = line.split_once('=')
            && !key.starts_with("security.")
        {
            // JSON strings are YAML strings: quoting keeps values like "10 s" intact.
            yaml.push_str(&format!(
                "{key}: {}\n",
                serde_json::Value::String(value.to_string())
            ));
        }
    }
    let conf = dir.join("config.yaml");
    std::fs::write(&conf, yaml).map_err(io("cannot write", &conf))?;
    let secret: [u8; 32] = rand::random();
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let secret_path = dir.join(crate::security::SECRET_FILE_NAME);
    write_private(&secret_path, &hex).map_err(io("cannot write", &secret_path))?;
    Ok(())
}

/// The directory a session's shipped files live in while it runs.
fn staging_dir(application_id: &str) -> PathBuf {
    std::env::temp_dir()
        .join(format!("sluice-yarn-{}", user()))
        .join(application_id)
}

/// Submits a session cluster and waits until its JobManager's REST API answers. On any
/// failure after the application id was reserved, the application is killed and its staging
/// directory removed, so nothing is left behind.
///
/// With `job`, the application is a one-job cluster (`run -t yarn-application`): the AM
/// submits the job itself and the application ends with it; this returns as soon as the AM
/// registered (its REST address may then be empty if the job already ended).
pub async fn deploy(config: &Config, job: Option<&ApplicationJob>) -> Result<Session, YarnError> {
    let web = webapp_address(config)?;
    let scheduler = scheduler_address(config)?;
    let rest = rest_client(&web)?;
    let started = Instant::now();
    let app = rest
        .new_application()
        .await
        .map_err(|e| YarnError::rest(&web, None, e))?;
    let id = app.id.to_string();
    let staging = staging_dir(&id);
    let result = submit_and_wait(config, &rest, &web, &scheduler, app, &staging, job)
        .await
        .map(|session| Session {
            startup: started.elapsed(),
            ..session
        });
    if result.is_err() {
        let _ = rest.kill(&id, KILL_TIMEOUT).await;
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}

async fn submit_and_wait(
    config: &Config,
    rest: &RestClient,
    web: &str,
    scheduler: &str,
    app: yarn_am::NewApplication,
    staging: &Path,
    job: Option<&ApplicationJob>,
) -> Result<Session, YarnError> {
    let id = app.id.to_string();
    let am_resource = Resource::new(container_mb(config.yarn.jobmanager_memory), 1);
    let tm = taskmanager_capability(config);
    let max = app.maximum_capability;
    // YARN would accept the AM and then never grant a TaskManager: say so now.
    if max.memory_mb > 0 && (tm.memory_mb > max.memory_mb || am_resource.memory_mb > max.memory_mb)
    {
        return Err(YarnError::Refused {
            id,
            message: format!(
                "a container may have at most {} MB; the JobManager asks {} MB (jobmanager.memory.process.size), a TaskManager {} MB (taskmanager.memory.process.size)",
                max.memory_mb, am_resource.memory_mb, tm.memory_mb
            ),
        });
    }
    stage(config, staging)?;
    let mut launch = LaunchContext {
        local_resources: shipped_resources(staging)?,
        ..Default::default()
    };
    launch
        .environment
        .insert(SCHEDULER_ENV.into(), scheduler.to_string());
    launch
        .environment
        .insert(SHIP_DIR_ENV.into(), staging.display().to_string());
    if let Some(job) = job {
        launch.environment.insert(JOB_ENV.into(), job.to_env());
    }
    launch.environment.insert(
        "RUST_LOG".into(),
        std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
    );
    launch.commands = vec![
        "./sluice --config-dir . yarn-appmaster".into(),
        // YARN's names, so its diagnostics quote the JobManager's last words on failure.
        "1><LOG_DIR>/stdout".into(),
        "2><LOG_DIR>/stderr".into(),
    ];
    let submission = AppSubmission {
        id: app.id,
        name: config.yarn.application_name.clone(),
        application_type: APPLICATION_TYPE.into(),
        queue: config.yarn.queue.clone(),
        max_attempts: config.yarn.application_attempts as i32,
        // With ZooKeeper HA the TaskManagers follow the leader, so they serve the next AM
        // attempt too and need not be restarted; without it they are bound to this attempt's
        // address and would only linger.
        keep_containers_across_attempts: config.ha.zookeeper,
        am_resource,
        am_launch: launch,
        tags: vec![],
    };
    rest.submit_checked(&submission, ACCEPT_TIMEOUT)
        .await
        .map_err(|e| YarnError::rest(web, Some(&id), e))?;
    let rest_address = match job {
        None => wait_until_serving(rest, web, &id).await?,
        Some(_) => wait_until_registered(rest, web, &id).await?,
    };
    Ok(Session {
        application_id: id,
        rest_address,
        // The caller, which started the clock, fills this in.
        startup: Duration::ZERO,
    })
}

/// Waits until the application runs, its AM registered its REST port, and sluice's REST API
/// answers there.
async fn wait_until_serving(rest: &RestClient, web: &str, id: &str) -> Result<String, YarnError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| YarnError::Container(e.to_string()))?;
    loop {
        let report = rest
            .application(id)
            .await
            .map_err(|e| YarnError::rest(web, Some(id), e))?;
        if report.state.is_terminal() {
            return Err(ended(&report));
        }
        if report.state == AppState::Running
            && let Some(address) = registered_address(&report)
            && http
                .get(format!("http://{address}/overview"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        {
            return Ok(address);
        }
        if Instant::now() >= deadline {
            return Err(YarnError::Timeout {
                what: format!(
                    "the JobManager of {id} to answer (state {:?}: {})",
                    report.state, report.diagnostics
                ),
                seconds: START_TIMEOUT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the AM registered its REST address (returned) or the application ended
/// (empty address): a one-job application may end before a client would see its REST API.
async fn wait_until_registered(
    rest: &RestClient,
    web: &str,
    id: &str,
) -> Result<String, YarnError> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let report = rest
            .application(id)
            .await
            .map_err(|e| YarnError::rest(web, Some(id), e))?;
        if report.state.is_terminal() {
            return Ok(String::new());
        }
        if report.state == AppState::Running
            && let Some(address) = registered_address(&report)
        {
            return Ok(address);
        }
        if Instant::now() >= deadline {
            return Err(YarnError::Timeout {
                what: format!(
                    "the ApplicationMaster of {id} to register (state {:?}: {})",
                    report.state, report.diagnostics
                ),
                seconds: START_TIMEOUT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the application ends; returns its final report.
async fn wait_until_ended(
    rest: &RestClient,
    web: &str,
    id: &str,
) -> Result<yarn_am::AppReport, YarnError> {
    loop {
        let report = rest
            .application(id)
            .await
            .map_err(|e| YarnError::rest(web, Some(id), e))?;
        if report.state.is_terminal() {
            return Ok(report);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Removes an application's staging directory (the files shipped to its containers).
pub fn remove_staging_dir(application_id: &str) {
    let _ = std::fs::remove_dir_all(staging_dir(application_id));
}

/// Attaches to a running session by application id.
pub async fn attach(config: &Config, application_id: &str) -> Result<Session, YarnError> {
    let web = webapp_address(config)?;
    let rest = rest_client(&web)?;
    let report = rest
        .application(application_id)
        .await
        .map_err(|e| YarnError::rest(&web, Some(application_id), e))?;
    if report.application_type != APPLICATION_TYPE {
        return Err(YarnError::NoSession(format!(
            "{application_id} is a {:?} application, not a sluice session",
            report.application_type
        )));
    }
    if report.state.is_terminal() {
        return Err(ended(&report));
    }
    let rest_address = wait_until_serving(&rest, &web, application_id).await?;
    Ok(Session {
        application_id: application_id.to_string(),
        rest_address,
        startup: Duration::ZERO,
    })
}

/// Kills a session's application, waits until YARN reports it ended, and removes its staging
/// directory and (if it names this application) the properties file.
pub async fn kill(config: &Config, application_id: &str) -> Result<(), YarnError> {
    let web = webapp_address(config)?;
    let rest = rest_client(&web)?;
    rest.kill(application_id, KILL_TIMEOUT)
        .await
        .map_err(|e| YarnError::rest(&web, Some(application_id), e))?;
    let _ = std::fs::remove_dir_all(staging_dir(application_id));
    if read_properties().is_some_and(|(id, _)| id == application_id) {
        let _ = std::fs::remove_file(properties_file());
    }
    Ok(())
}

/// Sluice applications YARN knows that have not ended.
pub async fn list(config: &Config) -> Result<Vec<yarn_am::AppReport>, YarnError> {
    let web = webapp_address(config)?;
    let rest = rest_client(&web)?;
    rest.applications(
        Some(APPLICATION_TYPE),
        &["NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"],
    )
    .await
    .map_err(|e| YarnError::rest(&web, None, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_address_comes_from_the_registered_am_address() {
        let mut report = yarn_am::AppReport {
            id: "a".into(),
            name: String::new(),
            application_type: "sluice".into(),
            queue: String::new(),
            user: String::new(),
            state: AppState::Running,
            final_status: yarn_am::FinalStatus::Undefined,
            diagnostics: String::new(),
            tracking_url: String::new(),
            am_host_http_address: String::new(),
            am_rpc_address: "127.0.0.1:4242".into(),
            running_containers: 1,
            allocated_mb: 0,
            started_time: 0,
            finished_time: 0,
        };
        assert_eq!(registered_address(&report), Some("127.0.0.1:4242".into()));
        for unusable in ["", "N/A", "host:0", ":80", "host:x"] {
            report.am_rpc_address = unusable.into();
            assert_eq!(registered_address(&report), None, "{unusable}");
        }
    }
}
