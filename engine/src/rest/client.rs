//! A client of the JobManager's REST API, as the CLI verbs use it (`sluice run/list/cancel -m
//! host:port`). It shares nothing with the server's code but the wire format.

use crate::checkpoint::AfterSavepoint;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::common::ids::JobId;

/// Why a REST call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No connection to the JobManager (refused, timed out, bad address).
    #[error("cannot reach the JobManager at {address}: is it running? ({reason})")]
    Unreachable {
        /// The address tried.
        address: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// The JobManager answered with an error status.
    #[error("the JobManager refused the request ({status}): {}", errors.join("; "))]
    Server {
        /// The HTTP status code.
        status: u16,
        /// Flink's `errors` array (or the raw body if it was not in that shape).
        errors: Vec<String>,
    },
    /// The answer was not what the API promises.
    #[error("unexpected answer from the JobManager: {0}")]
    Malformed(String),
    /// The TLS handshake failed: the server's certificate is not trusted, or the server refused
    /// this client's (or its lack of one).
    #[error(
        "the TLS handshake with the JobManager at {address} failed: {reason} (check security.ssl.rest.enabled, security.ssl.rest.truststore and, with authentication, security.ssl.rest.cert and security.ssl.rest.key)"
    )]
    Handshake {
        /// The address tried.
        address: String,
        /// What the TLS library said.
        reason: String,
    },
    /// The client's TLS configuration cannot be used (a missing or malformed PEM file).
    #[error(transparent)]
    Tls(#[from] crate::security::SecurityError),
}

/// One job of `GET /jobs/overview`, as `sluice list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct JobSummary {
    /// The job's id.
    pub jid: JobId,
    /// The job's name.
    pub name: String,
    /// Flink's job state name, e.g. `RUNNING`.
    pub state: String,
    /// Submission time, ms since the epoch.
    #[serde(rename = "start-time")]
    pub start_time: u64,
}

/// One bundled program, from `GET /sluice/examples`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ExampleInfo {
    /// Its name, as `sluice run` takes it.
    pub name: String,
    /// One line on what it does.
    pub description: String,
    /// Its arguments.
    pub usage: String,
}

/// Adds what both submission calls take to a request `body`: the parallelism, job-scoped
/// configuration under `config_field`, and the savepoint to start from.
fn add_job_settings(
    body: &mut Value,
    parallelism: Option<u32>,
    config_field: &str,
    config: &[(String, String)],
    savepoint: Option<&str>,
) {
    if let Some(p) = parallelism {
        body["parallelism"] = json!(p);
    }
    if !config.is_empty() {
        let map: serde_json::Map<String, Value> = config
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        body[config_field] = Value::Object(map);
    }
    if let Some(path) = savepoint {
        body["savepointPath"] = json!(path);
    }
}

/// A client of one JobManager's REST API.
#[derive(Debug, Clone)]
pub struct RestClient {
    base: String,
    http: reqwest::Client,
}

impl RestClient {
    /// A plain HTTP client for `host:port` or `http(s)://host:port` (a trailing `/` is
    /// ignored), trusting the public web CAs for `https://`.
    pub fn new(address: &str) -> Result<Self, ClientError> {
        Self::with_tls(address, None)
    }

    /// A client for `address` as `config` says to reach the REST API: with
    /// `security.ssl.rest.enabled`, over `https` (unless the address names a scheme),
    /// trusting `security.ssl.rest.truststore` and presenting the client certificate when
    /// `security.ssl.rest.authentication-enabled`.
    pub fn from_config(address: &str, config: &crate::config::Config) -> Result<Self, ClientError> {
        let tls = crate::security::rest_tls::client_config(config)?;
        Self::with_tls(address, tls.as_ref())
    }

    /// A client for `address`; with `tls`, a bare `host:port` means `https://`.
    pub fn with_tls(
        address: &str,
        tls: Option<&crate::security::rest_tls::RestClientTls>,
    ) -> Result<Self, ClientError> {
        let trimmed = address.trim().trim_end_matches('/');
        if trimmed.is_empty() {
            return Err(ClientError::Malformed(
                "an empty JobManager address".to_string(),
            ));
        }
        let base = if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
            trimmed.to_string()
        } else {
            let scheme = if tls.is_some() { "https" } else { "http" };
            format!("{scheme}://{trimmed}")
        };
        if tls.is_some() && base.starts_with("http://") {
            return Err(ClientError::Malformed(format!(
                "security.ssl.rest.enabled is true, so requests go over https only: the JobManager's address '{address}' names http"
            )));
        }
        reqwest::Url::parse(&base).map_err(|e| {
            ClientError::Malformed(format!("bad JobManager address '{address}': {e}"))
        })?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            // The JobManager closes a keep-alive connection that stays idle for
            // rest.server.header-read-timeout (10 s by default): dropping ours sooner means a
            // request never goes out on a connection the server is closing.
            .pool_idle_timeout(Duration::from_secs(5));
        if let Some(tls) = tls {
            builder = tls_settings(builder, tls)?;
        }
        let http = builder
            .build()
            .map_err(|e| ClientError::Malformed(format!("cannot build an HTTP client: {e}")))?;
        Ok(RestClient { base, http })
    }

    /// The base URL requests go to, e.g. `http://localhost:8081`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        self.answer(path, request).await
    }

    /// Sends `request` and reads its JSON answer; a non-2xx answer becomes
    /// [`ClientError::Server`] with Flink's `errors`.
    async fn answer(
        &self,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, ClientError> {
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| ClientError::Unreachable {
                address: self.base.clone(),
                reason: error_chain(&e),
            })?;
        if !status.is_success() {
            let errors = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.get("errors")?.as_array().map(|a| {
                        a.iter()
                            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
                            .collect()
                    })
                })
                .unwrap_or_else(|| vec![text.trim().to_string()]);
            return Err(ClientError::Server {
                status: status.as_u16(),
                errors,
            });
        }
        serde_json::from_str(&text)
            .map_err(|e| ClientError::Malformed(format!("{path} did not answer JSON: {e}")))
    }

    /// Why a request got no answer: a failed TLS handshake, or no connection at all.
    fn unreachable(&self, e: &reqwest::Error) -> ClientError {
        let reason = error_chain(e);
        if self.base.starts_with("https://") && is_tls_failure(&reason) {
            ClientError::Handshake {
                address: self.base.clone(),
                reason,
            }
        } else {
            ClientError::Unreachable {
                address: self.base.clone(),
                reason,
            }
        }
    }

    /// Uploads a job artifact (`POST /jars/upload`); returns its id.
    pub async fn upload_artifact(&self, path: &std::path::Path) -> Result<String, ClientError> {
        let bytes = tokio::fs::read(path).await.map_err(|e| {
            ClientError::Malformed(format!("cannot read the artifact {}: {e}", path.display()))
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "artifact".into());
        let part = reqwest::multipart::Part::bytes(bytes)
            .file_name(name)
            .mime_str("application/octet-stream")
            .map_err(|e| ClientError::Malformed(e.to_string()))?;
        let form = reqwest::multipart::Form::new().part("jarfile", part);
        // With HA a standby redirects to the leader, and a multipart body is not sent twice:
        // learn where a call ends up first, and upload there.
        let probe = self
            .http
            .get(format!("{}/v1/config", self.base))
            .send()
            .await
            .map_err(|e| ClientError::Unreachable {
                address: self.base.clone(),
                reason: error_chain(&e),
            })?;
        let leader = probe.url().origin().ascii_serialization();
        let url = format!("{leader}/v1/jars/upload");
        // Large artifacts take longer than a JSON call; the JobManager also runs the artifact
        // once to learn what it holds.
        let request = self
            .http
            .post(&url)
            .multipart(form)
            .timeout(Duration::from_secs(600));
        let answer = self.answer("/v1/jars/upload", request).await?;
        let file = field_str(&answer, "filename")?;
        Ok(file.rsplit('/').next().unwrap_or(file).to_string())
    }

    /// Runs a program of an uploaded artifact (`POST /jars/:id/run`); returns the job's id.
    pub async fn run_artifact(
        &self,
        id: &str,
        entry: Option<&str>,
        args: &[String],
        parallelism: Option<u32>,
        config: &[(String, String)],
        savepoint: Option<&str>,
    ) -> Result<JobId, ClientError> {
        let mut body = json!({ "programArgsList": args });
        if let Some(entry) = entry {
            body["entryClass"] = json!(entry);
        }
        add_job_settings(
            &mut body,
            parallelism,
            "flinkConfiguration",
            config,
            savepoint,
        );
        let answer = self
            .call(
                reqwest::Method::POST,
                &format!("/v1/jars/{id}/run"),
                Some(body),
            )
            .await?;
        field_str(&answer, "jobid")?
            .parse()
            .map_err(ClientError::Malformed)
    }

    async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// Submits a bundled program (`POST /sluice/jobs`); returns the new job's id.
    pub async fn submit(
        &self,
        job: &str,
        args: &[String],
        parallelism: Option<u32>,
    ) -> Result<JobId, ClientError> {
        self.submit_with(job, args, parallelism, &[], None).await
    }

    /// Submits a job with job-scoped configuration and a savepoint to start from.
    pub async fn submit_with(
        &self,
        job: &str,
        args: &[String],
        parallelism: Option<u32>,
        config: &[(String, String)],
        savepoint: Option<&str>,
    ) -> Result<JobId, ClientError> {
        let mut body = json!({ "job": job, "args": args });
        add_job_settings(&mut body, parallelism, "config", config, savepoint);
        let answer = self
            .call(reqwest::Method::POST, "/v1/sluice/jobs", Some(body))
            .await?;
        field_str(&answer, "jobid")?
            .parse()
            .map_err(ClientError::Malformed)
    }

    /// Triggers a savepoint (`POST /jobs/:id/savepoints`) or a stop with savepoint, drained
    /// or not (`POST /jobs/:id/stop`); returns the request id.
    pub async fn trigger_savepoint(
        &self,
        id: JobId,
        target: Option<&str>,
        after: AfterSavepoint,
    ) -> Result<String, ClientError> {
        let (path, body) = match after {
            AfterSavepoint::Run => (
                format!("/v1/jobs/{id}/savepoints"),
                json!({ "target-directory": target, "cancel-job": false }),
            ),
            AfterSavepoint::Stop | AfterSavepoint::Drain => (
                format!("/v1/jobs/{id}/stop"),
                json!({ "targetDirectory": target, "drain": after == AfterSavepoint::Drain }),
            ),
        };
        let answer = self.call(reqwest::Method::POST, &path, Some(body)).await?;
        field_str(&answer, "request-id").map(str::to_string)
    }

    /// Polls a savepoint request until it is done: its path, or why it failed.
    pub async fn await_savepoint(
        &self,
        id: JobId,
        request: &str,
    ) -> Result<Result<String, String>, ClientError> {
        loop {
            let answer = self
                .get(&format!("/v1/jobs/{id}/savepoints/{request}"))
                .await?;
            if answer["status"]["id"] == "COMPLETED" {
                let op = &answer["operation"];
                return Ok(match op["location"].as_str() {
                    Some(location) => Ok(location.to_string()),
                    None => Err(op["failure-cause"]["stack-trace"]
                        .as_str()
                        .unwrap_or("the savepoint failed")
                        .to_string()),
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// `GET /jobs/:id` as it came.
    pub async fn job_details(&self, id: JobId) -> Result<Value, ClientError> {
        self.get(&format!("/v1/jobs/{id}")).await
    }

    /// The job's state name, e.g. `RUNNING` or `FINISHED`.
    pub async fn job_state(&self, id: JobId) -> Result<String, ClientError> {
        let details = self.job_details(id).await?;
        field_str(&details, "state").map(str::to_string)
    }

    /// The job's failure texts: the root exception first, then the history, newest first,
    /// without repeats.
    pub async fn exceptions(&self, id: JobId) -> Result<Vec<String>, ClientError> {
        let answer = self.get(&format!("/v1/jobs/{id}/exceptions")).await?;
        let mut out: Vec<String> = Vec::new();
        let mut push = |text: Option<&str>| {
            if let Some(text) = text.filter(|t| !t.is_empty())
                && !out.iter().any(|o| o == text)
            {
                out.push(text.to_string());
            }
        };
        push(answer.get("root-exception").and_then(Value::as_str));
        if let Some(entries) = answer
            .pointer("/exceptionHistory/entries")
            .and_then(Value::as_array)
        {
            for entry in entries {
                push(entry.get("stacktrace").and_then(Value::as_str));
            }
        }
        Ok(out)
    }

    /// Every job the JobManager knows (`GET /jobs/overview`).
    pub async fn jobs_overview(&self) -> Result<Vec<JobSummary>, ClientError> {
        let answer = self.get("/v1/jobs/overview").await?;
        let jobs = answer
            .get("jobs")
            .cloned()
            .ok_or_else(|| ClientError::Malformed("/jobs/overview has no 'jobs'".into()))?;
        serde_json::from_value(jobs)
            .map_err(|e| ClientError::Malformed(format!("/jobs/overview: {e}")))
    }

    /// Cancels a job (`PATCH /jobs/:id?mode=cancel`).
    pub async fn cancel(&self, id: JobId) -> Result<(), ClientError> {
        self.call(
            reqwest::Method::PATCH,
            &format!("/v1/jobs/{id}?mode=cancel"),
            None,
        )
        .await
        .map(|_| ())
    }

    /// The cluster overview (`GET /overview`).
    pub async fn overview(&self) -> Result<Value, ClientError> {
        self.get("/v1/overview").await
    }

    /// The bundled programs the JobManager can run (`GET /sluice/examples`).
    pub async fn examples(&self) -> Result<Vec<ExampleInfo>, ClientError> {
        let answer = self.get("/v1/sluice/examples").await?;
        let examples = answer
            .get("examples")
            .cloned()
            .ok_or_else(|| ClientError::Malformed("/sluice/examples has no 'examples'".into()))?;
        serde_json::from_value(examples)
            .map_err(|e| ClientError::Malformed(format!("/sluice/examples: {e}")))
    }
}

/// `builder` trusting `tls.roots` (alone, when there are any) and presenting `tls`'s identity.
fn tls_settings(
    mut builder: reqwest::ClientBuilder,
    tls: &crate::security::rest_tls::RestClientTls,
) -> Result<reqwest::ClientBuilder, ClientError> {
    let bad = |e: reqwest::Error| ClientError::Malformed(format!("cannot use the TLS files: {e}"));
    builder = builder
        .https_only(true)
        .danger_accept_invalid_hostnames(!tls.verify_hostname);
    if !tls.roots.is_empty() {
        // The configured CAs are the only ones: a certificate from a public CA for another
        // name is no proof of being this cluster's JobManager.
        builder = builder.tls_built_in_root_certs(false);
        for root in &tls.roots {
            builder =
                builder.add_root_certificate(reqwest::Certificate::from_der(root).map_err(bad)?);
        }
    }
    if let Some(pem) = &tls.identity_pem {
        builder = builder.identity(reqwest::Identity::from_pem(pem).map_err(bad)?);
    }
    Ok(builder)
}

/// Whether a request's error chain says its TLS handshake failed (the only place rustls's
/// reasons reach through reqwest is their text).
fn is_tls_failure(chain: &str) -> bool {
    let lower = chain.to_ascii_lowercase();
    [
        "certificate",
        "tls",
        "handshake",
        "alert",
        "corrupt message",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

fn field_str<'a>(value: &'a Value, field: &str) -> Result<&'a str, ClientError> {
    value
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| ClientError::Malformed(format!("the answer has no string '{field}'")))
}

/// reqwest's error and its causes, e.g. "error sending request: Connection refused".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_accept_both_forms() {
        assert_eq!(
            RestClient::new("localhost:8081").unwrap().base_url(),
            "http://localhost:8081"
        );
        assert_eq!(
            RestClient::new("http://127.0.0.1:9/").unwrap().base_url(),
            "http://127.0.0.1:9"
        );
        assert!(RestClient::new("").is_err());
        assert!(RestClient::new("http://[bad").is_err());
    }

    #[tokio::test]
    async fn an_absent_jobmanager_is_unreachable() {
        // Bind and drop to find a port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = RestClient::new(&format!("127.0.0.1:{port}")).unwrap();
        let err = client.overview().await.unwrap_err();
        assert!(matches!(err, ClientError::Unreachable { .. }), "{err:?}");
        assert!(err.to_string().contains("is it running?"), "{err}");
    }
}
