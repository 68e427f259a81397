//! The CLI's client of the JobManager's REST API (`sluice run/list/cancel -m host:port`), and
//! the pure formatting of `sluice list` in Flink's words.

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
}

/// One job as `sluice list` shows it (from `GET /jobs/overview`).
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

/// A client of one JobManager's REST API.
#[derive(Debug, Clone)]
pub struct RestClient {
    base: String,
    http: reqwest::Client,
}

impl RestClient {
    /// A client for `host:port` or `http://host:port` (a trailing `/` is ignored).
    pub fn new(address: &str) -> Result<Self, ClientError> {
        let trimmed = address.trim().trim_end_matches('/');
        if trimmed.is_empty() {
            return Err(ClientError::Malformed(
                "an empty JobManager address".to_string(),
            ));
        }
        let base = if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
            trimmed.to_string()
        } else {
            format!("http://{trimmed}")
        };
        reqwest::Url::parse(&base).map_err(|e| {
            ClientError::Malformed(format!("bad JobManager address '{address}': {e}"))
        })?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
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
        let response = request.send().await.map_err(|e| ClientError::Unreachable {
            address: self.base.clone(),
            reason: error_chain(&e),
        })?;
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
        if let Some(p) = parallelism {
            body["parallelism"] = json!(p);
        }
        if !config.is_empty() {
            let map: serde_json::Map<String, Value> = config
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            body["config"] = Value::Object(map);
        }
        if let Some(path) = savepoint {
            body["savepointPath"] = json!(path);
        }
        let answer = self
            .call(reqwest::Method::POST, "/v1/sluice/jobs", Some(body))
            .await?;
        field_str(&answer, "jobid")?
            .parse()
            .map_err(ClientError::Malformed)
    }

    /// Triggers a savepoint (`POST /jobs/:id/savepoints`) or a stop with savepoint
    /// (`POST /jobs/:id/stop`); returns the request id.
    pub async fn trigger_savepoint(
        &self,
        id: JobId,
        target: Option<&str>,
        stop: bool,
    ) -> Result<String, ClientError> {
        let (path, body) = if stop {
            (
                format!("/v1/jobs/{id}/stop"),
                json!({ "targetDirectory": target, "drain": false }),
            )
        } else {
            (
                format!("/v1/jobs/{id}/savepoints"),
                json!({ "target-directory": target, "cancel-job": false }),
            )
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

const RULE: &str = "--------------------------------------------------------------";

/// `sluice list` output exactly as Flink's `flink list` prints it: running/restarting jobs,
/// then scheduled (CREATED, INITIALIZING) jobs, and with `all` also terminated jobs; each line
/// `dd.MM.yyyy HH:mm:ss : <jid> : <name> (<STATE>)`, sorted by start time. Times are shown at
/// `utc_offset_seconds` from UTC: 0 for UTC, or [`local_utc_offset_seconds`] for the local
/// zone as Flink (the JVM's zone) does.
pub fn format_list(jobs: &[JobSummary], all: bool, utc_offset_seconds: i64) -> String {
    let mut running = Vec::new();
    let mut scheduled = Vec::new();
    let mut terminated = Vec::new();
    for job in jobs {
        match job.state.as_str() {
            "CREATED" | "INITIALIZING" => scheduled.push(job),
            "FINISHED" | "CANCELED" | "FAILED" => terminated.push(job),
            _ => running.push(job),
        }
    }
    let mut out = String::new();
    let mut section = |jobs: &mut Vec<&JobSummary>, heading: &str, none: Option<&str>| {
        if jobs.is_empty() {
            if let Some(none) = none {
                out.push_str(none);
                out.push('\n');
            }
            return;
        }
        // Flink groups by state name, then sorts stably by start time.
        jobs.sort_by(|a, b| {
            (a.start_time, a.state.to_ascii_lowercase())
                .cmp(&(b.start_time, b.state.to_ascii_lowercase()))
        });
        out.push_str(heading);
        out.push('\n');
        for job in jobs.iter() {
            out.push_str(&format!(
                "{} : {} : {} ({})\n",
                format_time(job.start_time, utc_offset_seconds),
                job.jid,
                job.name,
                job.state
            ));
        }
        out.push_str(RULE);
        out.push('\n');
    };
    section(
        &mut running,
        "------------------ Running/Restarting Jobs -------------------",
        Some("No running jobs."),
    );
    section(
        &mut scheduled,
        "----------------------- Scheduled Jobs -----------------------",
        Some("No scheduled jobs."),
    );
    if all {
        section(
            &mut terminated,
            "---------------------- Terminated Jobs -----------------------",
            None,
        );
    }
    out
}

/// `dd.MM.yyyy HH:mm:ss` of a time in ms since the epoch, shifted by `offset` seconds.
pub fn format_time(epoch_ms: u64, offset: i64) -> String {
    let secs = (epoch_ms / 1000) as i64 + offset;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{day:02}.{month:02}.{year:04} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The local time zone's offset from UTC at `epoch_ms`, in seconds, for [`format_list`]: read
/// from the TZif file named by `TZ` (a zone name under `/usr/share/zoneinfo` or an absolute
/// path) or else `/etc/localtime`. 0 (UTC) when `TZ` is empty or the zone cannot be read.
pub fn local_utc_offset_seconds(epoch_ms: u64) -> i64 {
    let path = match std::env::var("TZ") {
        Ok(tz) => {
            let name = tz.strip_prefix(':').unwrap_or(&tz);
            if name.is_empty() {
                return 0;
            }
            if name.starts_with('/') {
                std::path::PathBuf::from(name)
            } else {
                std::path::Path::new("/usr/share/zoneinfo").join(name)
            }
        }
        Err(_) => std::path::PathBuf::from("/etc/localtime"),
    };
    std::fs::read(path)
        .ok()
        .and_then(|data| tzif_offset(&data, (epoch_ms / 1000) as i64))
        .unwrap_or(0)
}

/// The UTC offset in force at `t` (seconds since the epoch) by a TZif file's transition table
/// (RFC 8536; the 64-bit table of version 2+ files when present). Times after the last
/// transition keep its offset (the footer's rule is not read: distributions ship tables
/// through 2037).
fn tzif_offset(data: &[u8], t: i64) -> Option<i64> {
    fn u32_at(d: &[u8], at: usize) -> Option<usize> {
        Some(u32::from_be_bytes(d.get(at..at + 4)?.try_into().ok()?) as usize)
    }
    // Parses the block at `start` with `size`-byte times; returns the offset and the block's end.
    fn block(d: &[u8], start: usize, size: usize, t: i64) -> Option<(i64, usize)> {
        if d.get(start..start + 4)? != b"TZif" {
            return None;
        }
        let count = |i: usize| u32_at(d, start + 20 + 4 * i);
        let (isut, isstd, leap, times, types, chars) = (
            count(0)?,
            count(1)?,
            count(2)?,
            count(3)?,
            count(4)?,
            count(5)?,
        );
        let times_at = start + 44;
        let index_at = times_at.checked_add(times.checked_mul(size)?)?;
        let types_at = index_at.checked_add(times)?;
        let end = types_at
            .checked_add(types.checked_mul(6)?)?
            .checked_add(chars)?
            .checked_add(leap.checked_mul(size + 4)?)?
            .checked_add(isstd)?
            .checked_add(isut)?;
        let transition = |i: usize| -> Option<i64> {
            let at = times_at + i * size;
            let bytes = d.get(at..at + size)?;
            Some(match size {
                8 => i64::from_be_bytes(bytes.try_into().ok()?),
                _ => i64::from(i32::from_be_bytes(bytes.try_into().ok()?)),
            })
        };
        let mut kind = 0usize;
        for i in 0..times {
            if transition(i)? > t {
                break;
            }
            kind = *d.get(index_at + i)? as usize;
        }
        let at = types_at + 6 * kind;
        let offset = i32::from_be_bytes(d.get(at..at + 4)?.try_into().ok()?);
        Some((i64::from(offset), end))
    }
    let (v1_offset, v1_end) = block(data, 0, 4, t)?;
    if *data.get(4)? >= b'2'
        && let Some((offset, _)) = block(data, v1_end, 8, t)
    {
        return Some(offset);
    }
    Some(v1_offset)
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u128, name: &str, state: &str, start: u64) -> JobSummary {
        JobSummary {
            jid: JobId(id),
            name: name.into(),
            state: state.into(),
            start_time: start,
        }
    }

    #[test]
    fn times_format_as_flink_does() {
        assert_eq!(format_time(0, 0), "01.01.1970 00:00:00");
        // 2024-02-29T23:59:58.999Z, a leap day.
        assert_eq!(format_time(1_709_251_198_999, 0), "29.02.2024 23:59:58");
        assert_eq!(format_time(1_709_251_198_999, 3600), "01.03.2024 00:59:58");
        assert_eq!(format_time(951_782_400_000, 0), "29.02.2000 00:00:00");
    }

    #[test]
    fn empty_list_says_no_jobs() {
        assert_eq!(
            format_list(&[], false, 0),
            "No running jobs.\nNo scheduled jobs.\n"
        );
        assert_eq!(
            format_list(&[], true, 0),
            "No running jobs.\nNo scheduled jobs.\n"
        );
    }

    #[test]
    fn list_matches_flink_output() {
        let jobs = vec![
            job(2, "Stream Sum", "RUNNING", 1_700_000_060_000),
            job(1, "WordCount", "RESTARTING", 1_700_000_000_000),
            job(3, "Waiting", "CREATED", 1_700_000_120_000),
            job(4, "Old", "FINISHED", 1_600_000_000_000),
            job(5, "Gone", "CANCELED", 1_600_000_001_000),
        ];
        let expected_running = "\
------------------ Running/Restarting Jobs -------------------
14.11.2023 22:13:20 : 00000000000000000000000000000001 : WordCount (RESTARTING)
14.11.2023 22:14:20 : 00000000000000000000000000000002 : Stream Sum (RUNNING)
--------------------------------------------------------------
----------------------- Scheduled Jobs -----------------------
14.11.2023 22:15:20 : 00000000000000000000000000000003 : Waiting (CREATED)
--------------------------------------------------------------
";
        assert_eq!(format_list(&jobs, false, 0), expected_running);
        let expected_all = format!(
            "{expected_running}\
---------------------- Terminated Jobs -----------------------
13.09.2020 12:26:40 : 00000000000000000000000000000004 : Old (FINISHED)
13.09.2020 12:26:41 : 00000000000000000000000000000005 : Gone (CANCELED)
--------------------------------------------------------------
"
        );
        assert_eq!(format_list(&jobs, true, 0), expected_all);
    }

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

    #[test]
    fn tzif_offsets_follow_daylight_saving() {
        // Debian's tzdata ships this zone; skip where it does not exist.
        let Ok(data) = std::fs::read("/usr/share/zoneinfo/Europe/Berlin") else {
            return;
        };
        // 15.01.2024 and 15.07.2024, 12:00 UTC.
        assert_eq!(tzif_offset(&data, 1_705_320_000), Some(3600));
        assert_eq!(tzif_offset(&data, 1_721_044_800), Some(7200));
        assert_eq!(tzif_offset(b"not a zone file", 0), None);
        assert_eq!(tzif_offset(&data[..60], 0), None, "truncated");
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
