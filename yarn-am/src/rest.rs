//! The ResourceManager's REST API (`/ws/v1/cluster/...`): what a client needs to submit,
//! watch, list and kill applications without any Hadoop RPC.
//!
//! Parsing is deliberately lenient: Hadoop versions differ in JSON rendering (a one-element
//! list may arrive as a bare object, an empty list as `null` or not at all, numbers now and
//! then as strings), and unknown fields are ignored.

use std::time::Duration;

use serde_json::{Value, json};
use tracing::debug;

use crate::error::RestError;
use crate::types::{ApplicationId, FinalStatus, LaunchContext, Resource};

/// A client of one ResourceManager's REST API.
#[derive(Debug, Clone)]
pub struct RestClient {
    base: String,
    user: Option<String>,
    http: reqwest::Client,
}

/// The answer to `new-application`: an id to submit under, and the largest container allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApplication {
    /// The reserved application id.
    pub id: ApplicationId,
    /// The largest resource a container (including the AM's) may have.
    pub maximum_capability: Resource,
}

/// Everything `POST /ws/v1/cluster/apps` takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSubmission {
    /// The id from [`RestClient::new_application`].
    pub id: ApplicationId,
    /// Display name.
    pub name: String,
    /// Application type (shown by `yarn application -list`, used to filter listings).
    pub application_type: String,
    /// Queue; `default` on most clusters.
    pub queue: String,
    /// How many AM attempts YARN makes before failing the application.
    pub max_attempts: i32,
    /// Whether containers outlive a failed AM attempt (for AM failover).
    pub keep_containers_across_attempts: bool,
    /// The AM container's resource.
    pub am_resource: Resource,
    /// The AM container's files, environment and command.
    pub am_launch: LaunchContext,
    /// Free-form tags.
    pub tags: Vec<String>,
}

/// YARN's application states.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AppState {
    /// Just created.
    New,
    /// Being persisted.
    NewSaving,
    /// Submitted to the scheduler.
    Submitted,
    /// Accepted, waiting for an AM container.
    Accepted,
    /// The AM is running.
    Running,
    /// The AM unregistered; see the final status.
    Finished,
    /// All attempts failed (or the submission was rejected).
    Failed,
    /// Killed.
    Killed,
    /// A state this crate does not know.
    Other(String),
}

impl AppState {
    fn parse(s: &str) -> Self {
        match s {
            "NEW" => AppState::New,
            "NEW_SAVING" => AppState::NewSaving,
            "SUBMITTED" => AppState::Submitted,
            "ACCEPTED" => AppState::Accepted,
            "RUNNING" => AppState::Running,
            "FINISHED" => AppState::Finished,
            "FAILED" => AppState::Failed,
            "KILLED" => AppState::Killed,
            other => AppState::Other(other.to_string()),
        }
    }

    /// Whether the application has ended (finished, failed or killed).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            AppState::Finished | AppState::Failed | AppState::Killed
        )
    }
}

/// An application's report (`GET /ws/v1/cluster/apps/{id}`).
#[derive(Debug, Clone, PartialEq)]
pub struct AppReport {
    /// Application id as YARN prints it.
    pub id: String,
    /// Name.
    pub name: String,
    /// Type.
    pub application_type: String,
    /// Queue.
    pub queue: String,
    /// Submitting user.
    pub user: String,
    /// Lifecycle state.
    pub state: AppState,
    /// The AM's verdict (`Undefined` until it unregisters).
    pub final_status: FinalStatus,
    /// YARN's diagnostics (why it failed, was killed, waits, ...).
    pub diagnostics: String,
    /// The tracking URL the AM registered (through YARN's proxy).
    pub tracking_url: String,
    /// The AM container's NodeManager web address.
    pub am_host_http_address: String,
    /// `host:port` the ApplicationMaster registered (`amRPCAddress`; empty before it did,
    /// and `N/A` on some versions). An AM may register any port it wants clients to find.
    pub am_rpc_address: String,
    /// Containers running now (AM included).
    pub running_containers: i64,
    /// Memory allocated now, MiB.
    pub allocated_mb: i64,
    /// Start time, ms since the epoch.
    pub started_time: i64,
    /// Finish time, ms since the epoch (0 while running).
    pub finished_time: i64,
}

/// One application attempt (`/apps/{id}/appattempts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppAttempt {
    /// Attempt number.
    pub id: i64,
    /// The AM container of this attempt.
    pub container_id: String,
    /// The NodeManager that ran it.
    pub node_id: String,
    /// Link to the AM container's logs.
    pub logs_link: String,
    /// Start time, ms since the epoch.
    pub start_time: i64,
    /// Attempt state where the server reports it.
    pub state: Option<String>,
}

/// Cluster-wide numbers (`/ws/v1/cluster/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClusterMetrics {
    /// Applications submitted since start.
    pub apps_submitted: i64,
    /// Applications waiting.
    pub apps_pending: i64,
    /// Applications running.
    pub apps_running: i64,
    /// Containers allocated now.
    pub containers_allocated: i64,
    /// Memory allocated, MiB.
    pub allocated_mb: i64,
    /// Memory free, MiB.
    pub available_mb: i64,
    /// Memory total, MiB.
    pub total_mb: i64,
    /// NodeManagers in RUNNING state.
    pub active_nodes: i64,
}

/// One NodeManager (`/ws/v1/cluster/nodes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// `host:port` of its RPC endpoint.
    pub id: String,
    /// RUNNING, UNHEALTHY, LOST, ...
    pub state: String,
    /// Web address.
    pub http_address: String,
    /// Containers running on it.
    pub num_containers: i64,
    /// Memory in use, MiB.
    pub used_mb: i64,
    /// Memory free, MiB.
    pub available_mb: i64,
}

impl RestClient {
    /// A client for the ResourceManager web address, e.g. `http://rm:8088` or `rm:8088`.
    pub fn new(base_url: &str) -> Result<Self, RestError> {
        let base = if base_url.contains("://") {
            base_url.trim_end_matches('/').to_string()
        } else {
            format!("http://{}", base_url.trim_end_matches('/'))
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|source| RestError::Http {
                url: base.clone(),
                source,
            })?;
        Ok(RestClient {
            base,
            user: None,
            http,
        })
    }

    /// Acts as `user` (the `user.name` parameter of Hadoop's simple authentication; needed
    /// for submitting and killing when security is off).
    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Reserves an application id.
    pub async fn new_application(&self) -> Result<NewApplication, RestError> {
        let (url, v) = self
            .send(
                reqwest::Method::POST,
                "/ws/v1/cluster/apps/new-application",
                None,
            )
            .await?;
        let id = str_field(&v, "application-id")
            .ok_or_else(|| decode_err(&url, "no application-id"))?
            .parse::<ApplicationId>()
            .map_err(|e| decode_err(&url, &e.to_string()))?;
        let max = v
            .get("maximum-resource-capability")
            .map(resource)
            .unwrap_or_default();
        Ok(NewApplication {
            id,
            maximum_capability: max,
        })
    }

    /// Submits an application. A submission YARN refuses outright (memory or vcores over the
    /// maximum, ...) gives [`RestError::Refused`] with YARN's message; one it accepts and then
    /// rejects (unknown queue) shows as state FAILED in [`application`](Self::application).
    pub async fn submit(&self, app: &AppSubmission) -> Result<(), RestError> {
        let body = submission_json(app);
        match self
            .send(reqwest::Method::POST, "/ws/v1/cluster/apps", Some(body))
            .await
        {
            Err(RestError::Status {
                status, message, ..
            }) if (400..500).contains(&status) => Err(RestError::Refused { message }),
            other => other.map(|_| ()),
        }
    }

    /// Submits and waits until YARN has accepted the application (state ACCEPTED or later).
    /// Turns a submission that YARN takes and then rejects (unknown or stopped queue, ACLs)
    /// into [`RestError::Refused`] with YARN's diagnostics, as an outright refusal is.
    pub async fn submit_checked(
        &self,
        app: &AppSubmission,
        timeout: Duration,
    ) -> Result<AppReport, RestError> {
        self.submit(app).await?;
        let id = app.id.to_string();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let report = self.application(&id).await?;
            match report.state {
                AppState::Accepted | AppState::Running | AppState::Finished => return Ok(report),
                AppState::Failed | AppState::Killed => {
                    return Err(RestError::Refused {
                        message: report.diagnostics,
                    });
                }
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(RestError::Timeout {
                        what: format!("acceptance of {id}"),
                        timeout,
                    });
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// The report of one application.
    pub async fn application(&self, id: &str) -> Result<AppReport, RestError> {
        let (url, v) = self
            .send(
                reqwest::Method::GET,
                &format!("/ws/v1/cluster/apps/{id}"),
                None,
            )
            .await?;
        v.get("app")
            .map(app_report)
            .ok_or_else(|| decode_err(&url, "no app object"))
    }

    /// Applications, optionally of one type (e.g. `sluice`) and in the given states
    /// (e.g. `["RUNNING", "ACCEPTED"]`).
    pub async fn applications(
        &self,
        application_type: Option<&str>,
        states: &[&str],
    ) -> Result<Vec<AppReport>, RestError> {
        let mut path = "/ws/v1/cluster/apps?".to_string();
        if let Some(t) = application_type {
            path.push_str(&format!("applicationTypes={t}&"));
        }
        if !states.is_empty() {
            path.push_str(&format!("states={}&", states.join(",")));
        }
        let (_, v) = self
            .send(
                reqwest::Method::GET,
                path.trim_end_matches(['&', '?']),
                None,
            )
            .await?;
        Ok(list(&v, "apps", "app")
            .into_iter()
            .map(app_report)
            .collect())
    }

    /// The attempts of an application.
    pub async fn attempts(&self, id: &str) -> Result<Vec<AppAttempt>, RestError> {
        let (_, v) = self
            .send(
                reqwest::Method::GET,
                &format!("/ws/v1/cluster/apps/{id}/appattempts"),
                None,
            )
            .await?;
        Ok(list(&v, "appAttempts", "appAttempt")
            .into_iter()
            .map(|a| AppAttempt {
                id: int_field(a, "id").unwrap_or_default(),
                container_id: str_field(a, "containerId").unwrap_or_default(),
                node_id: str_field(a, "nodeId").unwrap_or_default(),
                logs_link: str_field(a, "logsLink").unwrap_or_default(),
                start_time: int_field(a, "startTime").unwrap_or_default(),
                state: str_field(a, "appAttemptState"),
            })
            .collect())
    }

    /// Kills an application and waits until YARN reports it ended (YARN answers 202 while
    /// the kill is in progress; the request is repeated until the state is terminal).
    /// Killing an application that already ended is not an error.
    pub async fn kill(&self, id: &str, timeout: Duration) -> Result<AppReport, RestError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let path = format!("/ws/v1/cluster/apps/{id}/state");
        loop {
            let report = self.application(id).await?;
            if report.state.is_terminal() {
                return Ok(report);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(RestError::Timeout {
                    what: format!("killing {id}"),
                    timeout,
                });
            }
            self.send(
                reqwest::Method::PUT,
                &path,
                Some(json!({"state": "KILLED"})),
            )
            .await?;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Cluster-wide metrics.
    pub async fn cluster_metrics(&self) -> Result<ClusterMetrics, RestError> {
        let (url, v) = self
            .send(reqwest::Method::GET, "/ws/v1/cluster/metrics", None)
            .await?;
        let m = v
            .get("clusterMetrics")
            .ok_or_else(|| decode_err(&url, "no clusterMetrics"))?;
        let i = |k: &str| int_field(m, k).unwrap_or_default();
        Ok(ClusterMetrics {
            apps_submitted: i("appsSubmitted"),
            apps_pending: i("appsPending"),
            apps_running: i("appsRunning"),
            containers_allocated: i("containersAllocated"),
            allocated_mb: i("allocatedMB"),
            available_mb: i("availableMB"),
            total_mb: i("totalMB"),
            active_nodes: i("activeNodes"),
        })
    }

    /// The cluster's NodeManagers.
    pub async fn nodes(&self) -> Result<Vec<NodeReport>, RestError> {
        let (_, v) = self
            .send(reqwest::Method::GET, "/ws/v1/cluster/nodes", None)
            .await?;
        Ok(list(&v, "nodes", "node")
            .into_iter()
            .map(|n| NodeReport {
                id: str_field(n, "id").unwrap_or_default(),
                state: str_field(n, "state").unwrap_or_default(),
                http_address: str_field(n, "nodeHTTPAddress").unwrap_or_default(),
                num_containers: int_field(n, "numContainers").unwrap_or_default(),
                used_mb: int_field(n, "usedMemoryMB").unwrap_or_default(),
                available_mb: int_field(n, "availMemoryMB").unwrap_or_default(),
            })
            .collect())
    }

    /// Sends one request; returns the URL (for errors) and the JSON answer (`Null` if empty).
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(String, Value), RestError> {
        let mut url = format!("{}{}", self.base, path);
        if let Some(user) = &self.user {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&format!("user.name={user}"));
        }
        debug!(%method, %url, "YARN REST");
        let mut req = self
            .http
            .request(method, &url)
            .header("Accept", "application/json");
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|source| RestError::Http {
            url: url.clone(),
            source,
        })?;
        let status = resp.status();
        let text = resp.text().await.map_err(|source| RestError::Http {
            url: url.clone(),
            source,
        })?;
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(_) if !status.is_success() => Value::String(text.clone()),
                Err(e) => {
                    return Err(decode_err(
                        &url,
                        &format!("not JSON ({e}): {}", truncate(&text)),
                    ));
                }
            }
        };
        if status.is_success() {
            return Ok((url, value));
        }
        let message = remote_message(&value).unwrap_or_else(|| truncate(&text));
        Err(if status.as_u16() == 404 {
            RestError::NotFound { url, message }
        } else {
            RestError::Status {
                url,
                status: status.as_u16(),
                message,
            }
        })
    }
}

/// The JSON body of a submission, in the shape YARN's `ApplicationSubmissionContextInfo`
/// expects: maps as `{"entry": [{"key", "value"}]}`, one command string.
fn submission_json(app: &AppSubmission) -> Value {
    let launch = &app.am_launch;
    let resources: Vec<Value> = launch
        .local_resources
        .iter()
        .map(|(name, r)| {
            json!({"key": name, "value": {
                "resource": r.url,
                "type": r.type_name(),
                "visibility": r.visibility_name(),
                "size": r.size,
                "timestamp": r.timestamp,
            }})
        })
        .collect();
    let env: Vec<Value> = launch
        .environment
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    json!({
        "application-id": app.id.to_string(),
        "application-name": app.name,
        "application-type": app.application_type,
        "queue": app.queue,
        "max-app-attempts": app.max_attempts,
        "keep-containers-across-application-attempts": app.keep_containers_across_attempts,
        "unmanaged-AM": false,
        "resource": {"memory": app.am_resource.memory_mb, "vCores": app.am_resource.vcores},
        "application-tags": {"tag": app.tags},
        "am-container-spec": {
            "local-resources": {"entry": resources},
            "environment": {"entry": env},
            "commands": {"command": launch.commands.join(" ")},
        },
    })
}

fn app_report(a: &Value) -> AppReport {
    let s = |k: &str| str_field(a, k).unwrap_or_default();
    let i = |k: &str| int_field(a, k).unwrap_or_default();
    AppReport {
        id: s("id"),
        name: s("name"),
        application_type: s("applicationType"),
        queue: s("queue"),
        user: s("user"),
        state: AppState::parse(&s("state")),
        final_status: match s("finalStatus").as_str() {
            "SUCCEEDED" => FinalStatus::Succeeded,
            "FAILED" => FinalStatus::Failed,
            "KILLED" => FinalStatus::Killed,
            _ => FinalStatus::Undefined,
        },
        diagnostics: s("diagnostics"),
        tracking_url: s("trackingUrl"),
        am_host_http_address: s("amHostHttpAddress"),
        am_rpc_address: s("amRPCAddress"),
        running_containers: i("runningContainers").max(0),
        allocated_mb: i("allocatedMB").max(0),
        started_time: i("startedTime"),
        finished_time: i("finishedTime"),
    }
}

fn resource(v: &Value) -> Resource {
    Resource {
        memory_mb: int_field(v, "memory").unwrap_or_default(),
        vcores: int_field(v, "vCores")
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or_default(),
    }
}

/// `v[outer][inner]` as a list, whether it is an array, a single object, null or missing.
fn list<'a>(v: &'a Value, outer: &str, inner: &str) -> Vec<&'a Value> {
    match v.get(outer).and_then(|o| o.get(inner)) {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(obj @ Value::Object(_)) => vec![obj],
        _ => Vec::new(),
    }
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn int_field(v: &Value, key: &str) -> Option<i64> {
    match v.get(key)? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// YARN's error body: `{"RemoteException": {"exception", "message", "javaClassName"}}`.
fn remote_message(v: &Value) -> Option<String> {
    let r = v.get("RemoteException")?;
    let msg = str_field(r, "message")?;
    Some(match str_field(r, "exception") {
        Some(ex) => format!("{ex}: {msg}"),
        None => msg,
    })
}

fn decode_err(url: &str, message: &str) -> RestError {
    RestError::Decode {
        url: url.to_string(),
        message: message.to_string(),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(500).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_lenient() {
        let one: Value = serde_json::from_str(r#"{"apps":{"app":{"id":"application_1_0001","state":"RUNNING","runningContainers":"2"}}}"#).expect("json");
        let got = list(&one, "apps", "app");
        assert_eq!(got.len(), 1);
        let r = app_report(got[0]);
        assert_eq!(r.state, AppState::Running);
        assert_eq!(r.running_containers, 2);
        let none: Value = serde_json::from_str(r#"{"apps":null}"#).expect("json");
        assert!(list(&none, "apps", "app").is_empty());
        let many: Value =
            serde_json::from_str(r#"{"nodes":{"node":[{"id":"a"},{"id":"b","extra":[1]}]}}"#)
                .expect("json");
        assert_eq!(list(&many, "nodes", "node").len(), 2);
    }

    #[test]
    fn remote_exception_message() {
        let v: Value = serde_json::from_str(
            r#"{"RemoteException":{"exception":"BadRequestException","message":"Invalid resource request","javaClassName":"x"}}"#,
        )
        .expect("json");
        assert_eq!(
            remote_message(&v).as_deref(),
            Some("BadRequestException: Invalid resource request")
        );
    }

    #[test]
    fn submission_shape() {
        let mut launch = LaunchContext {
            commands: vec!["./am".into(), "1>x".into()],
            ..Default::default()
        };
        launch.environment.insert("A".into(), "b".into());
        let app = AppSubmission {
            id: "application_5_0007".parse().expect("id"),
            name: "n".into(),
            application_type: "sluice".into(),
            queue: "default".into(),
            max_attempts: 2,
            keep_containers_across_attempts: true,
            am_resource: Resource::new(256, 1),
            am_launch: launch,
            tags: vec![],
        };
        let j = submission_json(&app);
        assert_eq!(j["application-id"], "application_5_0007");
        assert_eq!(j["am-container-spec"]["commands"]["command"], "./am 1>x");
        assert_eq!(
            j["am-container-spec"]["environment"]["entry"][0]["key"],
            "A"
        );
        assert_eq!(j["resource"]["vCores"], 1);
    }
}
