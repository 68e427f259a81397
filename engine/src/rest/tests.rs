//! The REST API over real HTTP against a real JobManager (no TaskManagers: submitted jobs wait
//! for slots in RUNNING with their tasks SCHEDULED).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::ids::JobId;
use crate::config::Config;
use crate::jobmanager::JobManager;
use crate::rest::client::{ClientError, RestClient};
use crate::security::ClusterSecret;

struct Cluster {
    _jm: JobManager,
    base: String,
    http: reqwest::Client,
}

async fn cluster() -> Cluster {
    cluster_with(&[]).await
}

/// A cluster whose configuration has `settings` on top of the defaults.
async fn cluster_with(settings: &[(&str, &str)]) -> Cluster {
    let mut config = Config::default();
    for (key, value) in settings {
        config.set(key, value).unwrap();
    }
    config.set("rest.port", "0").unwrap();
    config.set("jobmanager.rpc.port", "0").unwrap();
    let jm = crate::rest::start_jobmanager(
        config,
        ClusterSecret::random(),
        std::sync::Arc::new(crate::examples::bundled()),
    )
    .await
    .unwrap();
    let base = format!("http://{}", jm.rest_address);
    Cluster {
        _jm: jm,
        base,
        http: reqwest::Client::new(),
    }
}

impl Cluster {
    /// Sends a request as Flink's Java client does: `{}` body and a JSON content type, always.
    async fn flink(&self, method: Method, path: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Content-Type", "application/json; charset=UTF-8")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{path} answered non-JSON ({e}): {text:?}"));
        (status, body)
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.flink(Method::GET, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        body
    }

    async fn raw(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: &'static [u8],
    ) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .body(body);
        if let Some(ct) = content_type {
            request = request.header("Content-Type", ct);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{path} answered non-JSON ({e}): {text:?}"));
        (status, body)
    }

    /// A POST of a JSON body.
    async fn post_json(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap())
    }

    /// `POST /sluice/jobs` with a JSON body.
    async fn submit_json(&self, body: Value) -> (StatusCode, Value) {
        self.post_json("/sluice/jobs", body).await
    }

    fn client(&self) -> RestClient {
        RestClient::new(&self.base).unwrap()
    }
}

/// Fails unless `value` has every field, none of them null.
#[track_caller]
fn has_fields(value: &Value, fields: &[&str]) {
    for f in fields {
        match value.get(f) {
            None => panic!("field '{f}' missing in {value}"),
            Some(Value::Null) => panic!("field '{f}' is null in {value}"),
            Some(_) => {}
        }
    }
}

#[track_caller]
fn is_error(status: StatusCode, body: &Value, expected: StatusCode, needle: &str) {
    assert_eq!(status, expected, "{body}");
    let errors = body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    assert!(
        errors
            .iter()
            .any(|e| e.as_str().is_some_and(|s| s.contains(needle))),
        "no error mentions '{needle}': {body}"
    );
}

const TASK_STATES: [&str; 11] = [
    "total",
    "created",
    "scheduled",
    "deploying",
    "running",
    "finished",
    "canceling",
    "canceled",
    "failed",
    "reconciling",
    "initializing",
];

#[tokio::test]
async fn cluster_endpoints_have_every_field() {
    let c = cluster().await;
    for prefix in ["", "/v1"] {
        let config = c.get(&format!("{prefix}/config")).await;
        has_fields(
            &config,
            &[
                "refresh-interval",
                "timezone-name",
                "timezone-offset",
                "flink-version",
                "flink-revision",
                "features",
            ],
        );
        has_fields(
            &config["features"],
            &["web-submit", "web-cancel", "web-rescale", "web-history"],
        );
        assert!(
            config["flink-version"]
                .as_str()
                .unwrap()
                .starts_with("sluice ")
        );

        let overview = c.get(&format!("{prefix}/overview")).await;
        has_fields(
            &overview,
            &[
                "taskmanagers",
                "slots-total",
                "slots-available",
                "jobs-running",
                "jobs-finished",
                "jobs-cancelled",
                "jobs-failed",
                "taskmanagers-blocked",
                "slots-free-and-blocked",
                "flink-version",
                "flink-commit",
            ],
        );
        assert_eq!(overview["taskmanagers"], 0);

        let tms = c.get(&format!("{prefix}/taskmanagers")).await;
        assert_eq!(tms, json!({ "taskmanagers": [] }));

        let config = c.get(&format!("{prefix}/jobmanager/config")).await;
        let entries = config.as_array().unwrap();
        assert!(entries.iter().any(|e| e["key"] == "rest.port"), "{config}");
        for e in entries {
            has_fields(e, &["key", "value"]);
        }

        let examples = c.get(&format!("{prefix}/sluice/examples")).await;
        let names: Vec<&str> = examples["examples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"wordcount") && names.contains(&"stream-sum"));
    }
    let (status, body) = c.flink(Method::GET, "/taskmanagers/nope").await;
    is_error(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "TaskManager nope not found",
    );
}

#[tokio::test]
async fn submitted_job_waits_for_slots_then_cancels() {
    let c = cluster().await;
    let (status, body) = c
        .raw(
            Method::POST,
            "/sluice/jobs",
            Some("application/json; charset=UTF-8"),
            br#"{"job":"stream-sum","args":["--rate","10"],"parallelism":2}"#,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let jid = body["jobid"].as_str().unwrap().to_string();
    let id: JobId = jid.parse().unwrap();

    let jobs = c.get("/jobs").await;
    assert_eq!(
        jobs,
        json!({ "jobs": [{ "id": jid, "status": "RUNNING" }] })
    );

    let overview = c.get("/v1/jobs/overview").await;
    let job = &overview["jobs"][0];
    has_fields(
        job,
        &[
            "jid",
            "name",
            "start-time",
            "end-time",
            "duration",
            "state",
            "last-modification",
            "tasks",
            "pending-operators",
        ],
    );
    has_fields(&job["tasks"], &TASK_STATES);
    assert_eq!(job["state"], "RUNNING");
    assert_eq!(job["end-time"], -1);
    let tasks = &job["tasks"];
    assert!(tasks["total"].as_u64().unwrap() >= 2, "{tasks}");
    assert_eq!(tasks["scheduled"], tasks["total"], "{tasks}");

    let details = c.get(&format!("/jobs/{jid}")).await;
    has_fields(
        &details,
        &[
            "jid",
            "name",
            "isStoppable",
            "state",
            "start-time",
            "end-time",
            "duration",
            "maxParallelism",
            "now",
            "timestamps",
            "vertices",
            "status-counts",
            "plan",
        ],
    );
    for state in [
        "INITIALIZING",
        "CREATED",
        "RUNNING",
        "FAILING",
        "FAILED",
        "CANCELLING",
        "CANCELED",
        "FINISHED",
        "RESTARTING",
        "SUSPENDED",
        "RECONCILING",
    ] {
        assert!(details["timestamps"][state].is_u64(), "{state}: {details}");
    }
    assert_eq!(details["timestamps"]["FINISHED"], 0);
    let vertices = details["vertices"].as_array().unwrap();
    assert!(!vertices.is_empty());
    for v in vertices {
        has_fields(
            v,
            &[
                "id",
                "name",
                "maxParallelism",
                "parallelism",
                "status",
                "start-time",
                "end-time",
                "duration",
                "tasks",
                "metrics",
            ],
        );
        assert_eq!(v["status"], "SCHEDULED");
        has_fields(
            &v["metrics"],
            &[
                "read-bytes",
                "read-bytes-complete",
                "write-bytes",
                "write-bytes-complete",
                "read-records",
                "read-records-complete",
                "write-records",
                "write-records-complete",
                "accumulated-backpressured-time",
            ],
        );
        has_fields(&v["tasks"], &["CREATED", "SCHEDULED", "RUNNING", "FAILED"]);
    }
    let plan = &details["plan"];
    has_fields(plan, &["jid", "name", "type", "nodes"]);
    for node in plan["nodes"].as_array().unwrap() {
        has_fields(
            node,
            &["id", "parallelism", "operator", "description", "inputs"],
        );
        for input in node["inputs"].as_array().unwrap() {
            has_fields(input, &["num", "id", "ship_strategy", "exchange"]);
        }
    }

    let exceptions = c.get(&format!("/jobs/{jid}/exceptions")).await;
    has_fields(
        &exceptions,
        &[
            "timestamp",
            "all-exceptions",
            "truncated",
            "exceptionHistory",
        ],
    );
    assert!(exceptions.get("root-exception").is_some());
    assert_eq!(exceptions["exceptionHistory"]["entries"], json!([]));

    // Cancel as Flink's client does: PATCH with `{}` and a JSON content type.
    let (status, body) = c
        .flink(Method::PATCH, &format!("/v1/jobs/{jid}?mode=cancel"))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({}));
    assert_eq!(c.client().job_state(id).await.unwrap(), "CANCELED");
    let overview = c.get("/overview").await;
    assert_eq!(overview["jobs-cancelled"], 1);
    assert_eq!(overview["jobs-running"], 0);
    let details = c.get(&format!("/jobs/{jid}")).await;
    assert!(details["end-time"].as_i64().unwrap() > 0);
    assert!(details["timestamps"]["CANCELED"].as_u64().unwrap() > 0);

    // A second cancel conflicts with the terminal state.
    let (status, body) = c
        .flink(Method::PATCH, &format!("/jobs/{jid}?mode=cancel"))
        .await;
    is_error(status, &body, StatusCode::CONFLICT, "CANCELED");
}

#[tokio::test]
async fn errors_have_flinks_shape_and_status() {
    let c = cluster().await;
    let unknown = "00000000000000000000000000000abc";
    for path in [
        format!("/jobs/{unknown}"),
        format!("/v1/jobs/{unknown}/exceptions"),
    ] {
        let (status, body) = c.flink(Method::GET, &path).await;
        is_error(
            status,
            &body,
            StatusCode::NOT_FOUND,
            &format!("Job {unknown} not found"),
        );
    }
    let (status, body) = c
        .flink(Method::PATCH, &format!("/jobs/{unknown}?mode=cancel"))
        .await;
    is_error(status, &body, StatusCode::NOT_FOUND, "not found");

    for path in ["/jobs/xyz", "/v1/jobs/xyz/exceptions", "/jobs/%ff%fe"] {
        let (status, body) = c.flink(Method::GET, path).await;
        is_error(status, &body, StatusCode::BAD_REQUEST, "jobid");
    }
    let (status, body) = c.flink(Method::PATCH, "/jobs/xyz?mode=cancel").await;
    is_error(status, &body, StatusCode::BAD_REQUEST, "jobid");

    for query in ["", "?mode=explode", "?mode=stop", "?mode=cancel&mode=stop"] {
        let (status, body) = c
            .flink(Method::PATCH, &format!("/jobs/{unknown}{query}"))
            .await;
        is_error(status, &body, StatusCode::BAD_REQUEST, "mode");
    }

    let (status, body) = c.flink(Method::GET, "/v1/taskmanagers/%ff").await;
    is_error(status, &body, StatusCode::BAD_REQUEST, "path parameter");

    let (status, body) = c.flink(Method::GET, "/no/such/path").await;
    is_error(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "Not found: /no/such/path",
    );
    let (status, body) = c.flink(Method::GET, "/v2/overview").await;
    is_error(status, &body, StatusCode::NOT_FOUND, "Not found");

    let (status, body) = c.flink(Method::DELETE, "/jobs").await;
    is_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, "DELETE");
    let (status, body) = c.flink(Method::POST, "/v1/overview").await;
    is_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, "POST");
    let (status, body) = c.flink(Method::GET, "/sluice/jobs").await;
    is_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, "GET");
}

#[tokio::test]
async fn malformed_submissions_are_refused_with_reasons() {
    let c = cluster().await;
    let json = Some("application/json");
    let cases: &[(Option<&str>, &'static [u8], &str)] = &[
        (json, b"{", "Bad request"),
        (json, b"", "Bad request"),
        (json, b"[1,2,3]", "Bad request"),
        (json, b"null", "Bad request"),
        (json, b"{}", "job"),
        (json, br#"{"job":42}"#, "job"),
        (
            json,
            br#"{"job":"wordcount","parallelism":-1}"#,
            "parallelism",
        ),
        (
            json,
            br#"{"job":"wordcount","parallelism":"x"}"#,
            "parallelism",
        ),
        (
            json,
            br#"{"job":"wordcount","parallelism":99999999999}"#,
            "parallelism",
        ),
        (
            json,
            br#"{"job":"wordcount","parallelism":4000000}"#,
            "at most",
        ),
        (
            json,
            br#"{"job":"wordcount","parallelism":0}"#,
            "parallelism",
        ),
        (json, br#"{"job":"wordcount","bogus":1}"#, "bogus"),
        (json, br#"{"job":"nope"}"#, "unknown job 'nope'"),
        (
            json,
            br#"{"job":"stream-sum","args":["--rate","x"]}"#,
            "--rate",
        ),
        (json, b"\xff\xfe\x00garbage", "Bad request"),
        (None, br#"{"job":"wordcount"}"#, "Content-Type"),
        (
            Some("text/plain"),
            br#"{"job":"wordcount"}"#,
            "Content-Type",
        ),
    ];
    for (content_type, body, needle) in cases {
        let (status, answer) = c
            .raw(Method::POST, "/v1/sluice/jobs", *content_type, body)
            .await;
        is_error(status, &answer, StatusCode::BAD_REQUEST, needle);
    }
    assert_eq!(c.get("/jobs").await, json!({ "jobs": [] }));

    // Garbage everywhere: never a 5xx, always the errors shape or a success.
    let garbage: &[&'static [u8]] = &[b"", b"{}", b"\x00\x01\x02", b"{\"a\":", b"[[[[[[[["];
    for method in [
        Method::GET,
        Method::POST,
        Method::PATCH,
        Method::PUT,
        Method::DELETE,
    ] {
        for path in [
            "/",
            "/config",
            "/jobs",
            "/jobs/overview",
            "/jobs/00000000000000000000000000000001",
            "/jobs/1/exceptions",
            "/taskmanagers/x",
            "/taskmanagers/%C3%28",
            "/sluice/jobs",
            "/v1/jobmanager/config",
            "/%00",
        ] {
            for body in garbage {
                let response = c
                    .http
                    .request(method.clone(), format!("{}{path}", c.base))
                    .header("Content-Type", "application/json")
                    .body(*body)
                    .send()
                    .await
                    .unwrap();
                assert!(
                    !response.status().is_server_error(),
                    "{method} {path}: {}",
                    response.status()
                );
            }
        }
    }
    // Still serving.
    c.get("/overview").await;
}

/// 50 submissions with 1.8 MB of arguments each used to stay in the JobManager's memory; now the
/// arguments are bounded and waiting jobs are capped, each refusal naming its key and limit.
#[tokio::test]
async fn oversized_arguments_and_too_many_waiting_jobs_are_refused() {
    let c = cluster_with(&[("jobmanager.max-pending-jobs", "2")]).await;
    let huge = "x".repeat(1_800_000);
    let (status, answer) = c
        .submit_json(json!({ "job": "stream-sum", "args": ["--rate", huge] }))
        .await;
    is_error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "web.submit.max-args-size allows (65536 bytes)",
    );
    assert_eq!(c.get("/jobs").await, json!({ "jobs": [] }));

    // No TaskManager: every accepted job waits for slots.
    for _ in 0..2 {
        let (status, answer) = c.submit_json(json!({ "job": "stream-sum" })).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    }
    let (status, answer) = c.submit_json(json!({ "job": "stream-sum" })).await;
    is_error(
        status,
        &answer,
        StatusCode::TOO_MANY_REQUESTS,
        "the limit of jobmanager.max-pending-jobs (2)",
    );
    let jobs = c.get("/jobs").await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 2, "{jobs}");
    // Cancelling a waiting job makes room for the next.
    let first = jobs["jobs"][0]["id"].as_str().unwrap().to_owned();
    let (status, _) = c
        .flink(Method::PATCH, &format!("/jobs/{first}?mode=cancel"))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, answer) = c.submit_json(json!({ "job": "stream-sum" })).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
}

/// A savepoint whose `_metadata` points a state file outside its directory is refused at
/// submission, naming the path; nothing is read from outside and no job is created.
#[tokio::test]
async fn a_savepoint_pointing_outside_itself_is_refused_naming_the_path() {
    let c = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, b"abc").unwrap();
    let savepoint = dir.path().join("savepoints/savepoint-1");
    std::fs::create_dir_all(&savepoint).unwrap();
    let mut metadata = crate::checkpoint::CheckpointMetadata::new("ab".repeat(16), 1, 1000, true);
    metadata.operators.insert(
        crate::checkpoint::OperatorKey::Id(crate::common::ids::OperatorId(0)),
        crate::checkpoint::OperatorMetadata {
            uid: None,
            parallelism: 1,
            max_parallelism: 128,
            subtasks: [(
                0,
                crate::checkpoint::OperatorSubtaskState {
                    distribution: Default::default(),
                    operator_state: Default::default(),
                    keyed: Some(crate::state::KeyedStateHandle {
                        backend: "hashmap".into(),
                        key_groups: (0, 127),
                        files: vec![crate::state::StateFile {
                            path: "../../secret".into(),
                            size: 3,
                            shared: false,
                        }],
                        checkpointed_size: 3,
                        full_size: 3,
                    }),
                },
            )]
            .into(),
        },
    );
    std::fs::write(savepoint.join("_metadata"), metadata.to_bytes().unwrap()).unwrap();
    let (status, answer) = c
        .submit_json(json!({
            "job": "stream-sum",
            "savepointPath": savepoint.display().to_string(),
        }))
        .await;
    is_error(status, &answer, StatusCode::BAD_REQUEST, "\"../../secret\"");
    assert_eq!(c.get("/jobs").await, json!({ "jobs": [] }));
}

/// A savepoint holding state of an operator the program lacks is refused at submission with
/// Flink's message, naming the operator's uid; `allowNonRestoredState` skips that state.
#[tokio::test]
async fn a_savepoint_with_state_the_program_lacks_is_refused_unless_allowed() {
    let c = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let savepoint = dir.path().join("savepoints/savepoint-2");
    std::fs::create_dir_all(&savepoint).unwrap();
    let mut metadata = crate::checkpoint::CheckpointMetadata::new("ab".repeat(16), 2, 1000, true);
    metadata.operators.insert(
        crate::checkpoint::OperatorKey::Id(crate::common::ids::OperatorId::from_uid("gone")),
        crate::checkpoint::OperatorMetadata {
            uid: Some("gone".into()),
            parallelism: 1,
            max_parallelism: 128,
            subtasks: [(
                0,
                crate::checkpoint::OperatorSubtaskState {
                    distribution: Default::default(),
                    operator_state: crate::state::OperatorStateHandle::Inline(vec![b"x".to_vec()]),
                    keyed: None,
                },
            )]
            .into(),
        },
    );
    std::fs::write(savepoint.join("_metadata"), metadata.to_bytes().unwrap()).unwrap();
    let path = savepoint.display().to_string();
    let (status, answer) = c
        .submit_json(json!({ "job": "stream-sum", "savepointPath": path }))
        .await;
    is_error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        &format!(
            "Failed to rollback to checkpoint/savepoint {path}. Cannot map checkpoint/savepoint state for operator {} (uid \"gone\") to the new program",
            crate::common::ids::OperatorId::from_uid("gone")
        ),
    );
    is_error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "--allowNonRestoredState",
    );
    assert_eq!(c.get("/jobs").await, json!({ "jobs": [] }));
    let (status, answer) = c
        .submit_json(json!({
            "job": "stream-sum",
            "savepointPath": path,
            "allowNonRestoredState": true,
        }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
}

/// A checkpoint directory no configuration resolves is refused at submission, naming the key
/// and what is missing, instead of failing every checkpoint of a running job.
#[tokio::test]
async fn a_checkpoint_directory_that_names_no_file_system_is_refused() {
    let c = cluster_with(&[]).await;
    let mut cases = vec![("hdfs://nn:bad-port/chk", "which is not a port number")];
    // `hdfs:///` needs fs.defaultFS from the Hadoop configuration of the environment.
    if std::env::var_os("HADOOP_CONF_DIR").is_none() && std::env::var_os("HADOOP_HOME").is_none() {
        cases.push((
            "hdfs:///chk",
            "execution.checkpointing.dir: 'hdfs:///chk' names no NameNode and fs.defaultFS is not set",
        ));
    }
    for (dir, needle) in cases {
        let (status, answer) = c
            .submit_json(json!({
                "job": "stream-sum",
                "config": { "execution.checkpointing.dir": dir },
            }))
            .await;
        is_error(status, &answer, StatusCode::BAD_REQUEST, needle);
    }
    assert_eq!(c.get("/jobs").await, json!({ "jobs": [] }));
}

/// An unauthenticated client used to read and write any file the daemon could (`--input
/// /path/.cluster-secret`, `--output` anywhere) and to write savepoints to `""` (the file-system
/// root) or `/etc`. Now client paths must be absolute, normalized and, with
/// `security.io.allowed-dirs`, inside the allowed directories.
#[tokio::test]
async fn client_chosen_paths_outside_the_allowed_dirs_are_refused() {
    let allowed = tempfile::tempdir().unwrap();
    let root = allowed.path().display().to_string();
    let c = cluster_with(&[("security.io.allowed-dirs", root.as_str())]).await;
    let inside = format!("{root}/counts");
    for (args, needle) in [
        (
            vec!["--input", "/etc/hostname", "--output", inside.as_str()],
            "the path of the Text File Source \"/etc/hostname\" is outside",
        ),
        (
            vec!["--output", "/tmp/sluice-elsewhere"],
            "security.io.allowed-dirs",
        ),
        (vec!["--output", "relative/out"], "not an absolute path"),
        (
            vec!["--output", &format!("{root}/../escape")],
            "'.' or '..' parts",
        ),
    ] {
        let (status, answer) = c
            .submit_json(json!({ "job": "wordcount", "args": args }))
            .await;
        is_error(status, &answer, StatusCode::BAD_REQUEST, needle);
    }
    // A job-scoped checkpoint directory is a client's path too.
    let (status, answer) = c
        .submit_json(json!({
            "job": "stream-sum",
            "config": { "execution.checkpointing.dir": "/etc/sluice-chk" },
        }))
        .await;
    is_error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "execution.checkpointing.dir \"/etc/sluice-chk\"",
    );
    // The allowed directories are local ones: no HDFS path is inside them.
    let (status, answer) = c
        .submit_json(json!({
            "job": "stream-sum",
            "config": { "execution.checkpointing.dir": "hdfs://nn:8020/chk" },
        }))
        .await;
    is_error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "\"hdfs://nn:8020/chk\" is on HDFS, and security.io.allowed-dirs allows local directories only",
    );
    assert_eq!(c.get("/jobs").await, json!({ "jobs": [] }));

    // Inside the allowed directory the job is accepted, and savepoint targets are checked.
    let (status, answer) = c
        .submit_json(json!({ "job": "wordcount", "args": ["--output", inside] }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let job = answer["jobid"].as_str().unwrap().to_owned();
    for (target, needle) in [
        ("", "empty"),
        ("/", "file-system root"),
        ("/etc", "security.io.allowed-dirs"),
        ("savepoints", "not an absolute path"),
        ("hdfs://nn:8020/sp", "is on HDFS"),
        ("hdfs://nn:8020/sp/../x", "'.' or '..' parts"),
    ] {
        let (status, answer) = c
            .post_json(
                &format!("/jobs/{job}/savepoints"),
                json!({ "target-directory": target }),
            )
            .await;
        is_error(status, &answer, StatusCode::BAD_REQUEST, needle);
    }
    let (status, answer) = c
        .post_json(
            &format!("/jobs/{job}/stop"),
            json!({ "targetDirectory": "/etc" }),
        )
        .await;
    is_error(status, &answer, StatusCode::BAD_REQUEST, "/etc");
}

/// An operator can switch submission and cancellation off (Flink's `web.submit.enable`,
/// `web.cancel.enable`); the dashboard's features say so and the calls answer 403.
#[tokio::test]
async fn submission_and_cancellation_can_be_switched_off() {
    let open = cluster().await;
    let (status, answer) = open.submit_json(json!({ "job": "stream-sum" })).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let c = cluster_with(&[
        ("web.submit.enable", "false"),
        ("web.cancel.enable", "false"),
    ])
    .await;
    let features = &c.get("/config").await["features"];
    assert_eq!(features["web-submit"], json!(false));
    assert_eq!(features["web-cancel"], json!(false));
    let (status, answer) = c.submit_json(json!({ "job": "stream-sum" })).await;
    is_error(
        status,
        &answer,
        StatusCode::FORBIDDEN,
        "web.submit.enable: false",
    );
    let job = "00000000000000000000000000000001";
    let (status, answer) = c
        .flink(Method::PATCH, &format!("/jobs/{job}?mode=cancel"))
        .await;
    is_error(
        status,
        &answer,
        StatusCode::FORBIDDEN,
        "web.cancel.enable: false",
    );
    for path in ["savepoints", "stop"] {
        let (status, answer) = c.flink(Method::POST, &format!("/jobs/{job}/{path}")).await;
        is_error(
            status,
            &answer,
            StatusCode::FORBIDDEN,
            "web.cancel.enable: false",
        );
    }
    assert_eq!(c.get("/jobs").await, json!({ "jobs": [] }));
}

/// A web page in an operator's browser must not drive a loopback JobManager: cross-site
/// requests (a foreign Origin) and DNS rebinding (a foreign Host) are refused with 403 before
/// any handler runs, while reads and the JobManager's own page keep working.
#[tokio::test]
async fn cross_site_and_rebound_requests_cannot_change_state() {
    let c = cluster().await;
    let port = c.base.rsplit(':').next().unwrap().to_owned();
    let submit = |host: String, origin: Option<String>| {
        let mut request = c
            .http
            .post(format!("{}/sluice/jobs", c.base))
            .header("Host", host)
            .json(&json!({ "job": "stream-sum" }));
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let own = format!("localhost:{port}");
    let (status, answer) = submit(own.clone(), Some("http://evil.test".into())).await;
    is_error(status, &answer, StatusCode::FORBIDDEN, "http://evil.test");
    let (status, answer) = submit(format!("rebind.evil.test:{port}"), None).await;
    is_error(status, &answer, StatusCode::FORBIDDEN, "rebind.evil.test");
    // A cancellation is refused the same way.
    let cancel = c
        .http
        .patch(format!(
            "{}/jobs/00000000000000000000000000000001?mode=cancel",
            c.base
        ))
        .header("Origin", "http://evil.test")
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), StatusCode::FORBIDDEN);
    assert_eq!(c.get("/jobs").await, json!({ "jobs": [] }));
    // Reads from anywhere, and writes from the JobManager's own origin, still work.
    let overview = c
        .http
        .get(format!("{}/overview", c.base))
        .header("Origin", "http://evil.test")
        .send()
        .await
        .unwrap();
    assert_eq!(overview.status(), StatusCode::OK);
    let (status, answer) = submit(own.clone(), Some(format!("http://{own}"))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
}

#[tokio::test]
async fn rest_client_drives_the_api() {
    let c = cluster().await;
    let client = c.client();
    let examples = client.examples().await.unwrap();
    assert!(examples.iter().any(|e| e.name == "wordcount"));
    let id = client
        .submit("stream-sum", &["--keys".into(), "3".into()], Some(1))
        .await
        .unwrap();
    let jobs = client.jobs_overview().await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].jid, id);
    assert_eq!(jobs[0].state, "RUNNING");
    assert!(jobs[0].start_time > 0);
    assert_eq!(client.exceptions(id).await.unwrap(), Vec::<String>::new());
    let overview = client.overview().await.unwrap();
    assert_eq!(overview["jobs-running"], 1);
    let details = client.job_details(id).await.unwrap();
    assert_eq!(details["jid"], id.to_string());
    client.cancel(id).await.unwrap();
    assert_eq!(client.job_state(id).await.unwrap(), "CANCELED");
    match client.cancel(id).await {
        Err(ClientError::Server {
            status: 409,
            errors,
        }) => {
            assert!(errors[0].contains("CANCELED"), "{errors:?}")
        }
        other => panic!("{other:?}"),
    }
    match client.submit("nope", &[], None).await {
        Err(ClientError::Server {
            status: 400,
            errors,
        }) => {
            assert!(errors[0].contains("unknown job 'nope'"), "{errors:?}")
        }
        other => panic!("{other:?}"),
    }
    match client.job_state(JobId(7)).await {
        Err(ClientError::Server { status: 404, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_job_short_of_slots_fails_with_no_resource_exception() {
    let mut config = Config::default();
    config.set("rest.port", "0").unwrap();
    config.set("jobmanager.rpc.port", "0").unwrap();
    config.set("slot.request.timeout", "200 ms").unwrap();
    let jm = crate::rest::start_jobmanager(
        config,
        ClusterSecret::random(),
        std::sync::Arc::new(crate::examples::bundled()),
    )
    .await
    .unwrap();
    let client = RestClient::new(&jm.rest_address.to_string()).unwrap();
    let id = client.submit("wordcount", &[], Some(99)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while client.job_state(id).await.unwrap() != "FAILED" {
        assert!(tokio::time::Instant::now() < deadline, "job never failed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let exceptions = client.exceptions(id).await.unwrap();
    assert!(
        exceptions[0].contains("Could not acquire the minimum required resources."),
        "{exceptions:?}"
    );
    let body: Value = reqwest::get(format!("http://{}/jobs/{id}/exceptions", jm.rest_address))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entry = &body["exceptionHistory"]["entries"][0];
    assert_eq!(
        entry["exceptionName"],
        "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException"
    );
    has_fields(
        entry,
        &[
            "exceptionName",
            "stacktrace",
            "timestamp",
            "failureLabels",
            "concurrentExceptions",
        ],
    );
    assert!(body["timestamp"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn plan_vertex_and_checkpoint_detail_calls_answer_or_name_what_is_wrong() {
    let c = cluster().await;
    let (status, body) = c
        .submit_json(json!({ "job": "stream-sum", "args": ["--rate", "10"], "parallelism": 2 }))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let jid = body["jobid"].as_str().unwrap().to_string();
    let config = c.get(&format!("/jobs/{jid}/config")).await;
    assert_eq!(config["jid"], jid);
    assert_eq!(
        config["execution-config"]["user-config"],
        json!({ "rate": "10" }),
        "the program's arguments, as Flink's ParameterTool reads them"
    );
    let plan = c.get(&format!("/jobs/{jid}/plan")).await;
    let nodes = plan["plan"]["nodes"].as_array().unwrap();
    assert!(nodes.len() >= 2, "{plan}");
    let vid = nodes[0]["id"].as_str().unwrap();
    let vertex = c.get(&format!("/v1/jobs/{jid}/vertices/{vid}")).await;
    assert_eq!(vertex["subtasks"].as_array().unwrap().len(), 2);
    let first = &vertex["subtasks"][0];
    assert_eq!(first["status"], "SCHEDULED", "no TaskManager: {vertex}");
    assert!(first.get("endpoint").is_none(), "runs nowhere yet: {first}");
    assert_eq!(first["start-time"], -1);

    let (status, body) = c
        .flink(
            Method::GET,
            &format!("/jobs/{jid}/vertices/{}", "0".repeat(32)),
        )
        .await;
    is_error(status, &body, StatusCode::NOT_FOUND, "no vertex");
    let (status, body) = c
        .flink(Method::GET, &format!("/jobs/{jid}/checkpoints/details/1"))
        .await;
    is_error(status, &body, StatusCode::NOT_FOUND, "checkpoint 1");
    let (status, body) = c
        .flink(Method::GET, &format!("/jobs/{jid}/checkpoints/details/x"))
        .await;
    is_error(status, &body, StatusCode::BAD_REQUEST, "checkpointid");
    let (status, body) = c
        .flink(
            Method::GET,
            &format!("/jobs/{jid}/checkpoints/details/1/subtasks/{vid}"),
        )
        .await;
    is_error(status, &body, StatusCode::NOT_FOUND, "checkpoint 1");
}

#[tokio::test]
async fn log_file_names_never_become_paths() {
    let c = cluster().await;
    // (A bare `..` segment never arrives: clients resolve it before sending.)
    for name in [
        "..secret",
        "..%2F..%2Fetc%2Fpasswd",
        "a%2Fb",
        "%2Fetc%2Fpasswd",
        "a%5Cb",
    ] {
        let (status, body) = c
            .flink(Method::GET, &format!("/jobmanager/logs/{name}"))
            .await;
        is_error(
            status,
            &body,
            StatusCode::BAD_REQUEST,
            "not a log file name",
        );
    }
}

#[tokio::test]
async fn web_ui_is_served() {
    let c = cluster().await;
    for (path, ty, needle) in [
        ("/", "text/html", "<title>sluice"),
        ("/web/app.js", "javascript", "/jobs/overview"),
        ("/web/style.css", "text/css", "body"),
    ] {
        let response = c
            .http
            .get(format!("{}{path}", c.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(content_type.contains(ty), "{path}: {content_type}");
        assert!(response.text().await.unwrap().contains(needle), "{path}");
    }
}

mod views_of_a_running_cluster {
    //! The renderings with a TaskManager and running tasks, driven through the pure cores.

    use super::has_fields;
    use crate::common::ids::{ExecutionId, JobId};
    use crate::jobmanager::dispatcher::{Dispatcher, DispatcherSettings};
    use crate::jobmanager::resourcemanager::TaskManagerInfo;
    use crate::rest::views;
    use crate::rpc::messages::{ExecutionState, Hardware, ProgramSpec, TaskMetrics};
    use serde_json::Value;

    fn dispatcher_with_running_job() -> (Dispatcher, JobId) {
        let mut d = Dispatcher::new(DispatcherSettings {
            slot_request_timeout_ms: 10_000,
            heartbeat_timeout_ms: 10_000,
            jobstore_max_capacity: 10,
            jobstore_expiration_ms: 100_000,
            max_pending_jobs: 10,
            max_args_size: 1 << 16,
            adaptive: None,
        });
        let _ = d.register_taskmanager(
            TaskManagerInfo {
                resource_id: "tm-1".into(),
                host: "localhost".into(),
                data_address: "127.0.0.1:7001".parse().unwrap(),
                rpc_address: "127.0.0.1:7002".parse().unwrap(),
                hardware: Hardware {
                    cpu_cores: 4,
                    physical_memory: 8 << 30,
                    process_memory: 1728 << 20,
                },
                network_memory: 64 << 20,
                managed_memory: 256 << 20,
                registered_at: 1_000,
                last_heartbeat: 1_500,
                slots: vec![None; 2],
            },
            1_000,
        );
        let job = JobId(42);
        let program = ProgramSpec::new("stream-sum", vec![]);
        let graph =
            crate::graph::build_job_graph(&crate::examples::bundled(), &program, 2).unwrap();
        let _ = d
            .submit(
                job,
                program,
                graph,
                2,
                crate::jobmanager::dispatcher::JobSettings::from_config(
                    &crate::config::Config::default(),
                )
                .unwrap(),
                2_000,
            )
            .unwrap();
        let vertices = d.job(job).unwrap().executions().len();
        for v in 0..vertices {
            for s in 0..2 {
                let id = ExecutionId {
                    job,
                    vertex: v as u32,
                    subtask: s,
                    attempt: 0,
                };
                let metrics = TaskMetrics {
                    records_in: 10,
                    bytes_in: 100,
                    records_out: 20,
                    bytes_out: 200,
                    back_pressured_ms: 5,
                    idle_ms: 30,
                    busy_ms: 65,
                    out_pool_usage_permille: 250,
                    in_pool_usage_permille: 750,
                    input_queue_length: 6,
                    current_input_watermark: 1_700_000_000_000 + s as i64,
                    current_output_watermark: i64::MIN,
                    late_records_dropped: 3,
                    state_size: 4_096,
                };
                let _ = d.task_state(id, ExecutionState::Running, None, metrics, 3_000);
            }
        }
        (d, job)
    }

    #[test]
    fn running_vertices_sum_their_subtasks() {
        let (d, job) = dispatcher_with_running_job();
        let details = views::job_details(d.job(job).unwrap(), 4_000);
        assert_eq!(details["state"], "RUNNING");
        assert_eq!(details["duration"], 2_000);
        assert_eq!(details["end-time"], -1);
        for v in details["vertices"].as_array().unwrap() {
            assert_eq!(v["status"], "RUNNING", "{v}");
            assert_eq!(v["tasks"]["RUNNING"], 2, "{v}");
            assert_eq!(v["start-time"], 2_000, "deployed when the slots came: {v}");
            assert_eq!(v["end-time"], -1);
            assert_eq!(v["duration"], 2_000);
            let m = &v["metrics"];
            assert_eq!(m["read-records"], 20);
            assert_eq!(m["read-bytes"], 200);
            assert_eq!(m["write-records"], 40);
            assert_eq!(m["write-bytes"], 400);
            assert_eq!(m["accumulated-backpressured-time"], 10);
            assert_eq!(m["accumulated-idle-time"], 60, "summed from the heartbeats");
            assert_eq!(
                m["accumulated-busy-time"], 130.0,
                "summed from the heartbeats"
            );
            assert_eq!(m["read-records-complete"], false);
        }
        let summary = views::job_summary(d.job(job).unwrap(), 4_000);
        assert_eq!(summary["tasks"]["running"], summary["tasks"]["total"]);
        let overview = views::overview(&d);
        assert_eq!(overview["slots-total"], 2);
        assert_eq!(overview["slots-available"], 0);
        assert_eq!(overview["jobs-running"], 1);
    }

    #[test]
    fn the_plan_names_each_vertex_and_its_inputs_ship_strategy() {
        let (d, job) = dispatcher_with_running_job();
        let jm = d.job(job).unwrap();
        let plan = &views::job_plan(jm)["plan"];
        assert_eq!(plan["jid"], job.to_string());
        assert_eq!(plan["type"], "STREAMING");
        let nodes = plan["nodes"].as_array().unwrap();
        let graph = jm.graph();
        assert_eq!(nodes.len(), graph.vertices.len());
        assert!(nodes.len() >= 2, "stream-sum has an exchange: {plan}");
        let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
        for (node, vertex) in nodes.iter().zip(&graph.vertices) {
            assert_eq!(node["id"], vertex.id);
            assert_eq!(node["parallelism"], 2);
            assert_eq!(node["description"], vertex.name);
            assert_eq!(node["operator"], vertex.name);
            assert!(
                node.get("operator_strategy").is_none(),
                "no optimizer: {node}"
            );
            for (num, input) in node["inputs"].as_array().unwrap().iter().enumerate() {
                assert_eq!(input["num"], num);
                assert!(ids.contains(&input["id"].as_str().unwrap()), "{input}");
                let strategy = input["ship_strategy"].as_str().unwrap();
                let edge = &graph.edges[vertex.inputs[num]];
                assert_eq!(strategy, edge.strategy.to_string());
            }
        }
        let edges: usize = nodes
            .iter()
            .map(|n| n["inputs"].as_array().unwrap().len())
            .sum();
        assert_eq!(edges, graph.edges.len());
    }

    #[test]
    fn a_vertex_lists_its_subtasks_with_where_and_how_long_they_ran() {
        let (d, job) = dispatcher_with_running_job();
        let jm = d.job(job).unwrap();
        let host = |tm: &str| d.resources().taskmanager(tm).map(|t| t.host.clone());
        let v = views::vertex_subtasks(jm, 0, 4_000, &host);
        assert_eq!(v["id"], jm.graph().vertices[0].id);
        assert_eq!(v["parallelism"], 2);
        assert_eq!(v["now"], 4_000);
        let subtasks = v["subtasks"].as_array().unwrap();
        assert_eq!(subtasks.len(), 2);
        for (i, s) in subtasks.iter().enumerate() {
            assert_eq!(s["subtask"], i);
            assert_eq!(s["status"], "RUNNING");
            assert_eq!(s["attempt"], 0);
            assert_eq!(s["taskmanager-id"], "tm-1");
            assert_eq!(
                s["endpoint"], "localhost:7001",
                "the TaskManager's host: {s}"
            );
            assert_eq!(s["start-time"], 2_000, "deployed when the slots came");
            assert_eq!(s["end-time"], -1);
            assert_eq!(s["duration"], 2_000);
            assert_eq!(s["metrics"]["read-records"], 10);
            assert_eq!(s["metrics"]["write-bytes"], 200);
            assert_eq!(s["status-duration"]["DEPLOYING"], 1_000, "{s}");
            assert_eq!(s["status-duration"]["RUNNING"], 1_000, "until now: {s}");
        }
        // Once the TaskManager is gone, the slot's address stands for its host.
        let gone = views::vertex_subtasks(jm, 0, 4_000, &|_| None);
        assert_eq!(gone["subtasks"][0]["endpoint"], "127.0.0.1:7001");
    }

    #[test]
    fn checkpoint_details_break_a_checkpoint_down_by_vertex_and_subtask() {
        use crate::checkpoint::stats::{
            CheckpointEntry, CheckpointStatus, SubtaskAck, SubtaskCheckpoint,
        };
        let (d, job) = dispatcher_with_running_job();
        let graph = d.job(job).unwrap().graph();
        let sub = |vertex, subtask, ack: Option<(u64, u64, u64)>| SubtaskCheckpoint {
            vertex,
            subtask,
            ack: ack.map(|(timestamp, checkpointed_size, state_size)| SubtaskAck {
                timestamp,
                checkpointed_size,
                state_size,
            }),
        };
        let entry = CheckpointEntry {
            id: 7,
            status: CheckpointStatus::InProgress,
            is_savepoint: false,
            checkpoint_type: "CHECKPOINT",
            trigger_timestamp: 1_000,
            latest_ack_timestamp: 1_100,
            checkpointed_size: 45,
            state_size: 65,
            end_to_end_duration: 100,
            num_subtasks: 4,
            num_acknowledged_subtasks: 3,
            external_path: None,
            failure_timestamp: None,
            failure_message: None,
            subtasks: vec![
                sub(0, 0, Some((1_050, 10, 20))),
                sub(0, 1, Some((1_080, 30, 40))),
                sub(1, 0, Some((1_100, 5, 5))),
                sub(1, 1, None),
            ],
        };
        let details = views::checkpoint_details(graph, &entry, &Default::default());
        assert_eq!(details["id"], 7);
        assert_eq!(details["clazz"], "in_progress");
        let first = &details["tasks"][&graph.vertices[0].id];
        assert_eq!(first["num_subtasks"], 2);
        assert_eq!(first["num_acknowledged_subtasks"], 2);
        assert_eq!(first["checkpointed_size"], 40);
        assert_eq!(first["state_size"], 60);
        assert_eq!(first["latest_ack_timestamp"], 1_080);
        assert_eq!(first["end_to_end_duration"], 80);
        assert_eq!(first["status"], "IN_PROGRESS");
        let second = &details["tasks"][&graph.vertices[1].id];
        assert_eq!(second["num_acknowledged_subtasks"], 1);
        assert_eq!(second["end_to_end_duration"], 100);

        let subtasks = views::checkpoint_subtasks(graph, &entry, 1);
        assert_eq!(subtasks["id"], graph.vertices[1].id);
        let list = subtasks["subtasks"].as_array().unwrap();
        assert_eq!(list[0]["status"], "completed");
        assert_eq!(list[0]["ack_timestamp"], 1_100);
        assert_eq!(list[0]["end_to_end_duration"], 100);
        assert_eq!(list[0]["state_size"], 5);
        assert!(
            list[0].get("checkpoint").is_none(),
            "sync/async not timed: {subtasks}"
        );
        assert_eq!(
            list[1],
            serde_json::json!({ "index": 1, "status": "pending_or_failed" })
        );
        assert_eq!(subtasks["summary"]["state_size"]["max"], 5);
        assert_eq!(subtasks["summary"]["end_to_end_duration"]["min"], 100);
    }

    #[test]
    fn taskmanagers_have_every_field() {
        let (d, job) = dispatcher_with_running_job();
        let list = views::taskmanagers(&d);
        let tm = &list["taskmanagers"][0];
        has_fields(
            tm,
            &[
                "id",
                "path",
                "dataPort",
                "jmxPort",
                "timeSinceLastHeartbeat",
                "slotsNumber",
                "freeSlots",
                "totalResource",
                "freeResource",
                "hardware",
                "memoryConfiguration",
                "blocked",
            ],
        );
        assert_eq!(tm["id"], "tm-1");
        assert_eq!(tm["dataPort"], 7001);
        assert_eq!(tm["jmxPort"], -1);
        assert_eq!(tm["slotsNumber"], 2);
        assert_eq!(tm["freeSlots"], 0);
        assert_eq!(tm["timeSinceLastHeartbeat"], 1_500);
        assert_eq!(tm["blocked"], false);
        has_fields(
            &tm["hardware"],
            &["cpuCores", "physicalMemory", "freeMemory", "managedMemory"],
        );
        assert_eq!(tm["hardware"]["cpuCores"], 4);
        has_fields(
            &tm["totalResource"],
            &[
                "cpuCores",
                "taskHeapMemory",
                "taskOffHeapMemory",
                "managedMemory",
                "networkMemory",
                "extendedResources",
            ],
        );
        assert_eq!(tm["totalResource"]["networkMemory"], 64);
        assert_eq!(tm["freeResource"]["networkMemory"], 0);
        assert_eq!(tm["totalResource"]["managedMemory"], 256);
        assert_eq!(tm["hardware"]["managedMemory"], 256u64 << 20);
        assert_eq!(tm["memoryConfiguration"]["managedMemory"], 256u64 << 20);
        has_fields(
            &tm["memoryConfiguration"],
            &[
                "frameworkHeap",
                "taskHeap",
                "frameworkOffHeap",
                "taskOffHeap",
                "networkMemory",
                "managedMemory",
                "jvmMetaspace",
                "jvmOverhead",
                "totalFlinkMemory",
                "totalProcessMemory",
            ],
        );
        let details = views::taskmanager_details(d.resources().taskmanager("tm-1").unwrap());
        has_fields(&details, &["id", "metrics", "allocatedSlots", "blocked"]);
        assert_eq!(details["allocatedSlots"][0]["jobId"], job.to_string());
        has_fields(
            &details["metrics"],
            &["heapUsed", "nettyShuffleMemoryTotal", "garbageCollectors"],
        );
    }

    /// Fails unless `value[field]` is a JSON integer (Flink's `int`/`long`: a missing or null
    /// one makes Flink's client fail to read the whole answer).
    #[track_caller]
    fn is_integer(value: &Value, field: &str) {
        assert!(
            value.get(field).is_some_and(|v| v.is_i64() || v.is_u64()),
            "'{field}' is not an integer in {value}"
        );
    }

    #[track_caller]
    fn is_number(value: &Value, field: &str) {
        assert!(
            value.get(field).is_some_and(Value::is_number),
            "'{field}' is not a number in {value}"
        );
    }

    #[track_caller]
    fn is_bool(value: &Value, field: &str) {
        assert!(
            value.get(field).is_some_and(Value::is_boolean),
            "'{field}' is not a boolean in {value}"
        );
    }

    /// The primitive fields of Flink 2.x's response classes, each with its JSON type.
    #[test]
    fn flink2_primitive_fields_are_present_with_their_types() {
        let (d, job) = dispatcher_with_running_job();
        let jm = d.job(job).unwrap();

        // JobDetails (`/jobs/overview`) gained `pending-operators` in Flink 2.x.
        let summary = views::job_summary(jm, 4_000);
        for f in [
            "start-time",
            "end-time",
            "duration",
            "last-modification",
            "pending-operators",
        ] {
            is_integer(&summary, f);
        }
        assert_eq!(summary["pending-operators"], 0, "the job graph is complete");

        // JobDetailsInfo (`/jobs/:jobid`).
        let details = views::job_details(jm, 4_000);
        for f in [
            "start-time",
            "end-time",
            "duration",
            "maxParallelism",
            "now",
            "pending-operators",
        ] {
            is_integer(&details, f);
        }
        is_bool(&details, "isStoppable");
        for v in details["vertices"].as_array().unwrap() {
            for f in [
                "maxParallelism",
                "parallelism",
                "start-time",
                "end-time",
                "duration",
            ] {
                is_integer(v, f);
            }
            let m = &v["metrics"];
            for f in [
                "read-bytes",
                "write-bytes",
                "read-records",
                "write-records",
                "accumulated-backpressured-time",
                "accumulated-idle-time",
            ] {
                is_integer(m, f);
            }
            is_number(m, "accumulated-busy-time");
            for f in [
                "read-bytes-complete",
                "write-bytes-complete",
                "read-records-complete",
                "write-records-complete",
            ] {
                is_bool(m, f);
            }
        }

        // ClusterOverviewWithVersion (`/overview`).
        let overview = views::overview(&d);
        for f in [
            "taskmanagers",
            "slots-total",
            "slots-available",
            "jobs-running",
            "jobs-finished",
            "jobs-cancelled",
            "jobs-failed",
            "taskmanagers-blocked",
            "slots-free-and-blocked",
        ] {
            is_integer(&overview, f);
        }

        // TaskManagerInfo (`/taskmanagers`): the process size is the configured one.
        let tm = views::taskmanager(d.resources().taskmanager("tm-1").unwrap());
        for f in [
            "dataPort",
            "jmxPort",
            "timeSinceLastHeartbeat",
            "slotsNumber",
            "freeSlots",
        ] {
            is_integer(&tm, f);
        }
        is_bool(&tm, "blocked");
        for f in ["cpuCores", "physicalMemory", "freeMemory", "managedMemory"] {
            is_integer(&tm["hardware"], f);
        }
        is_number(&tm["totalResource"], "cpuCores");
        let memory = &tm["memoryConfiguration"];
        for f in [
            "frameworkHeap",
            "taskHeap",
            "frameworkOffHeap",
            "taskOffHeap",
            "networkMemory",
            "managedMemory",
            "jvmMetaspace",
            "jvmOverhead",
            "totalFlinkMemory",
            "totalProcessMemory",
        ] {
            is_integer(memory, f);
        }
        assert_eq!(memory["totalProcessMemory"], 1728u64 << 20);

        // CheckpointingStatistics and CheckpointConfigInfo (`/jobs/:jobid/checkpoints[/config]`).
        let stats = views::checkpoint_statistics(jm.checkpoints());
        for f in ["restored", "total", "in_progress", "completed", "failed"] {
            is_integer(&stats["counts"], f);
        }
        for s in ["checkpointed_size", "state_size", "end_to_end_duration"] {
            for f in ["min", "max", "avg"] {
                is_integer(&stats["summary"][s], f);
            }
            for f in ["p50", "p90", "p95", "p99", "p999"] {
                is_number(&stats["summary"][s], f);
            }
        }
        let config = views::checkpoint_config(jm.checkpoints(), "HashMapStateBackend");
        for f in [
            "interval",
            "timeout",
            "min_pause",
            "max_concurrent",
            "tolerable_failed_checkpoints",
            "aligned_checkpoint_timeout",
            "changelog_periodic_materialization_interval",
        ] {
            is_integer(&config, f);
        }
        for f in [
            "unaligned_checkpoints",
            "checkpoints_after_tasks_finish",
            "state_changelog_enabled",
        ] {
            is_bool(&config, f);
        }
        assert_eq!(config["state_backend"], "HashMapStateBackend");
    }

    #[test]
    fn checkpoint_entries_name_their_kind_for_flinks_client() {
        use crate::checkpoint::stats::{CheckpointEntry, CheckpointStatus};
        let entry = |id, status, is_savepoint| CheckpointEntry {
            id,
            status,
            is_savepoint,
            checkpoint_type: if is_savepoint {
                "SAVEPOINT"
            } else {
                "CHECKPOINT"
            },
            trigger_timestamp: 1_000,
            latest_ack_timestamp: 1_010,
            checkpointed_size: 10,
            state_size: 20,
            end_to_end_duration: 10,
            num_subtasks: 2,
            num_acknowledged_subtasks: 2,
            external_path: None,
            failure_timestamp: (status == CheckpointStatus::Failed).then_some(1_020),
            failure_message: (status == CheckpointStatus::Failed).then(|| "x".to_string()),
            subtasks: Vec::new(),
        };
        let retained = std::collections::BTreeSet::from([3]);
        let cases = [
            (
                entry(3, CheckpointStatus::Completed, false),
                "completed",
                Some(false),
            ),
            (
                entry(2, CheckpointStatus::Completed, false),
                "completed",
                Some(true),
            ),
            (
                entry(1, CheckpointStatus::Completed, true),
                "completed",
                Some(false),
            ),
            (entry(4, CheckpointStatus::Failed, false), "failed", None),
            (
                entry(5, CheckpointStatus::InProgress, false),
                "in_progress",
                None,
            ),
        ];
        for (e, clazz, discarded) in cases {
            let mut value = serde_json::to_value(&e).unwrap();
            views::flink_checkpoint_entry(&mut value, &retained);
            assert_eq!(value["clazz"], clazz, "{value}");
            assert_eq!(
                value.get("discarded").and_then(Value::as_bool),
                discarded,
                "{value}"
            );
            for f in [
                "id",
                "trigger_timestamp",
                "latest_ack_timestamp",
                "state_size",
                "end_to_end_duration",
                "alignment_buffered",
                "processed_data",
                "persisted_data",
                "num_subtasks",
                "num_acknowledged_subtasks",
            ] {
                is_integer(&value, f);
            }
            is_bool(&value, "is_savepoint");
            assert!(value["tasks"].is_object(), "{value}");
            if clazz == "failed" {
                is_integer(&value, "failure_timestamp");
            }
        }
    }

    #[test]
    fn task_failures_appear_in_both_exception_lists() {
        let (mut d, job) = dispatcher_with_running_job();
        let id = ExecutionId {
            job,
            vertex: 0,
            subtask: 1,
            attempt: 0,
        };
        let _ = d.task_state(
            id,
            ExecutionState::Failed,
            Some("boom: the operator panicked".into()),
            TaskMetrics::default(),
            5_000,
        );
        let e = views::exceptions(d.job(job).unwrap());
        assert_eq!(e["root-exception"], "boom: the operator panicked");
        assert_eq!(e["timestamp"], 5_000);
        let entry = &e["exceptionHistory"]["entries"][0];
        assert_eq!(entry["exceptionName"], "sluice.TaskFailure");
        assert_eq!(entry["location"], "tm-1");
        assert!(
            entry["taskName"].as_str().unwrap().ends_with("(2/2)"),
            "{entry}"
        );
        let task = &e["all-exceptions"][0];
        has_fields(task, &["exception", "task", "location", "timestamp"]);
    }
}

#[tokio::test]
async fn raw_garbage_on_the_rest_port_leaves_it_serving() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let c = cluster().await;
    let address = c.base.trim_start_matches("http://").to_string();
    let garbage: [&[u8]; 5] = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"GET / HTTP/9.9\r\n\r\n",
        b"POST /sluice/jobs HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n{",
        b"PATCH /jobs/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
        &[0u8; 4096],
    ];
    for bytes in garbage {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let _ = stream.write_all(bytes).await;
        let _ = stream.shutdown().await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(!text.contains(" 500 "), "{text}");
    }
    assert_eq!(c.get("/overview").await["taskmanagers"], 0);
}

/// A TaskManager announcing more slots than `taskmanager.numberOfTaskSlots` allows is refused
/// with a reason naming the key (its slot table is never allocated), and the JobManager goes on
/// serving.
#[tokio::test]
async fn a_registration_with_too_many_slots_is_refused() {
    use crate::rpc::messages::{Hardware, JmToTm, PROTOCOL_VERSION, TmToJm};
    use crate::rpc::transport;
    let mut config = Config::default();
    config.set("rest.port", "0").unwrap();
    config.set("jobmanager.rpc.port", "0").unwrap();
    let secret = ClusterSecret::random();
    let jm = crate::rest::start_jobmanager(
        config,
        secret.clone(),
        std::sync::Arc::new(crate::examples::bundled()),
    )
    .await
    .unwrap();
    let mut conn = transport::connect(jm.shared.rpc_address(), &secret)
        .await
        .unwrap();
    let register = TmToJm::Register {
        protocol_version: PROTOCOL_VERSION,
        resource_id: "greedy".into(),
        host: "localhost".into(),
        data_port: 1,
        slots: u32::MAX,
        hardware: Hardware::default(),
        network_memory: 0,
        managed_memory: 0,
        running: vec![],
        leader_session: None,
        metrics_port: None,
        worker_of: None,
    };
    transport::send(&mut conn, &register).await.unwrap();
    let answer: JmToTm = transport::recv(&mut conn).await.unwrap();
    match answer {
        JmToTm::Refused { reason } => assert!(
            reason.contains("taskmanager.numberOfTaskSlots") && reason.contains("4294967295"),
            "{reason}"
        ),
        other => panic!("registered with {} slots: {other:?}", u32::MAX),
    }
    let base = format!("http://{}", jm.rest_address);
    let overview: Value = reqwest::get(format!("{base}/overview"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(overview["taskmanagers"], 0, "{overview}");
}

/// The metric endpoints and the JobManager's Prometheus reporter, with task metrics fed into
/// the metric store as heartbeats would bring them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_endpoints_answer_in_flinks_shapes() {
    use crate::common::ids::ExecutionId;
    use crate::metrics::TaskMetrics;
    let c = cluster_with(&[
        (
            "metrics.reporter.prom.factory.class",
            "org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
        ),
        ("metrics.reporter.prom.port", "0"),
    ])
    .await;
    let ids = c.get("/jobmanager/metrics").await;
    assert!(
        ids.as_array()
            .unwrap()
            .contains(&json!({ "id": "numRegisteredTaskManagers" })),
        "{ids}"
    );
    let got = c
        .get("/jobmanager/metrics?get=numRegisteredTaskManagers,taskSlotsTotal,nonsense")
        .await;
    assert_eq!(
        got,
        json!([
            { "id": "numRegisteredTaskManagers", "value": "0" },
            { "id": "taskSlotsTotal", "value": "0" },
        ])
    );
    let rss = c
        .get("/jobmanager/metrics?get=Status.Process.Memory.RSS")
        .await;
    let rss: f64 = rss[0]["value"].as_str().unwrap().parse().unwrap();
    assert!(rss > 0.0);

    let (status, body) = c
        .submit_json(json!({"job": "stream-sum", "args": ["--rate", "10"], "parallelism": 2}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let jid = body["jobid"].as_str().unwrap().to_string();
    let job: JobId = jid.parse().unwrap();
    let restarts = c
        .get(&format!("/jobs/{jid}/metrics?get=numRestarts,uptime"))
        .await;
    assert_eq!(restarts[0], json!({ "id": "numRestarts", "value": "0" }));
    let details = c.get(&format!("/jobs/{jid}")).await;
    let vid = details["vertices"][0]["id"].as_str().unwrap().to_string();

    // Two subtasks report 10 s apart: 100 and 300 records/s in, subtask 1 back-pressured 60 %.
    for (now, factor) in [(1_000u64, 0u64), (11_000, 10)] {
        for s in 0..2u32 {
            let m = TaskMetrics {
                records_in: factor * 100 * (1 + 2 * s as u64),
                back_pressured_ms: factor * 600 * s as u64,
                busy_ms: factor * 400 * s as u64,
                idle_ms: factor * 1000 * (1 - s as u64),
                in_pool_usage_permille: 900 * s,
                input_queue_length: 7 * s,
                state_size: 1_000 + s as u64,
                ..TaskMetrics::default()
            };
            let id = ExecutionId {
                job,
                vertex: 0,
                subtask: s,
                attempt: 0,
            };
            c._jm.shared.metrics().task_update(id, now, &m);
        }
    }
    let base = format!("/jobs/{jid}/vertices/{vid}");
    let listed = c.get(&format!("{base}/metrics")).await;
    assert!(
        listed
            .as_array()
            .unwrap()
            .contains(&json!({ "id": "1.numRecordsInPerSecond" })),
        "{listed}"
    );
    let one = c
        .get(&format!("{base}/metrics?get=1.numRecordsInPerSecond"))
        .await;
    assert_eq!(
        one,
        json!([{ "id": "1.numRecordsInPerSecond", "value": "300" }])
    );
    let usage = c
        .get(&format!(
            "{base}/metrics?get=1.inPoolUsage,1.inputQueueLength,1.stateSize"
        ))
        .await;
    assert_eq!(
        usage,
        json!([{ "id": "1.inPoolUsage", "value": "0.9" }, { "id": "1.inputQueueLength", "value": "7" }, { "id": "1.stateSize", "value": "1001" }])
    );
    let agg = c
        .get(&format!(
            "{base}/subtasks/metrics?get=numRecordsInPerSecond&agg=min,max,sum,avg"
        ))
        .await;
    assert_eq!(
        agg,
        json!([{ "id": "numRecordsInPerSecond", "min": 100.0, "max": 300.0, "sum": 400.0, "avg": 200.0 }])
    );
    let (status, body) = c
        .flink(
            Method::GET,
            &format!("{base}/subtasks/metrics?get=numRecordsIn&agg=median"),
        )
        .await;
    is_error(status, &body, StatusCode::BAD_REQUEST, "'median'");
    let bp = c.get(&format!("{base}/backpressure")).await;
    assert_eq!(bp["status"], "ok");
    assert_eq!(bp["backpressure-level"], "high");
    assert_eq!(bp["subtasks"][0]["backpressure-level"], "ok");
    assert_eq!(bp["subtasks"][0]["idleRatio"], 1.0);
    assert_eq!(bp["subtasks"][1]["ratio"], 0.6);
    assert_eq!(bp["subtasks"][1]["busyRatio"], 0.4);
    has_fields(&bp, &["end-timestamp"]);
    let (status, body) = c
        .flink(
            Method::GET,
            &format!("/jobs/{jid}/vertices/{}/backpressure", "0".repeat(32)),
        )
        .await;
    is_error(status, &body, StatusCode::NOT_FOUND, "no vertex");

    // The reporter serves the same JobManager metrics to Prometheus.
    let port = c._jm.reporter_port.expect("the reporter runs");
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("# TYPE flink_jobmanager_numRegisteredTaskManagers gauge\n"),
        "{text}"
    );
    assert!(
        text.contains("flink_jobmanager_numRegisteredTaskManagers{host=\""),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "flink_jobmanager_job_numRestarts{{host=\"localhost\",job_id=\"{jid}\",job_name="
        )),
        "{text}"
    );
    c.flink(Method::PATCH, &format!("/jobs/{jid}?mode=cancel"))
        .await;
}

#[test]
fn metric_values_are_written_as_flink_writes_them() {
    use crate::rest::metrics::format_value;
    assert_eq!(format_value(12.0), "12");
    assert_eq!(format_value(0.25), "0.25");
    assert_eq!(format_value(-1.0), "-1");
    assert_eq!(format_value(f64::NAN), "NaN");
}

#[test]
fn an_unknown_reporter_factory_is_a_config_error() {
    let mut config = Config::default();
    let err = config
        .set(
            "metrics.reporter.prom.factory.class",
            "org.example.StatsdReporterFactory",
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("metrics.reporter.prom.factory.class"), "{err}");
    assert!(err.contains("PrometheusReporterFactory"), "{err}");
    let err = config
        .set("metrics.reporter.prom.port", "9300-9200")
        .unwrap_err()
        .to_string();
    assert!(err.contains("empty"), "{err}");
}
