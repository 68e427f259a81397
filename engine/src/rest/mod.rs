//! The Dispatcher's REST API (Flink-compatible paths and fields) and the web UI.
//!
//! Every API path is served with and without the `/v1` prefix. Every non-2xx answer is Flink's
//! `{"errors": ["..."]}`: the extractors in `error` turn malformed paths, queries and bodies
//! into 4xx answers with a reason, so no request can produce a 500. Handlers hold the
//! Dispatcher's lock only while rendering (never across an await). `docs/rest.md` lists the
//! calls.

pub mod client;
mod error;
mod guard;
mod jars;
mod logs;
mod metrics;
mod ui;
mod views;

#[cfg(test)]
mod tests;

use crate::checkpoint::AfterSavepoint;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::jobmanager::dispatcher::{CancelError, SavepointError, SubmitError};
use crate::jobmanager::service::{JobManagerShared, now_ms};
use crate::rpc::messages::{LogQuery, ProgramSpec};
use error::{ApiError, ApiJson, ApiPath, ApiQuery, JobIdParam};

type Shared = Arc<JobManagerShared>;
type ApiResult = Result<Json<Value>, ApiError>;

// The largest parallelism a submission may ask for (Flink's upper bound of key groups): larger
// values could never be scheduled and would only cost memory.
use crate::config::MAX_PARALLELISM;

/// Starts a JobManager serving this REST API.
pub async fn start_jobmanager(
    config: crate::config::Config,
    secret: crate::security::ClusterSecret,
    programs: Arc<crate::api::ProgramRegistry>,
) -> Result<crate::jobmanager::JobManager, crate::jobmanager::StartError> {
    crate::jobmanager::JobManager::start(config, secret, programs, router).await
}

/// All REST routes, with and without the `/v1` prefix, and the web UI at `/`.
pub fn router(shared: Arc<JobManagerShared>) -> Router {
    let api: Vec<(&str, MethodRouter<Shared>)> = vec![
        ("/config", get(config)),
        ("/overview", get(overview)),
        ("/jobs", get(jobs)),
        ("/jobs/overview", get(jobs_overview)),
        ("/jobs/{jobid}", get(job_details).patch(terminate_job)),
        ("/jobs/{jobid}/plan", get(job_plan)),
        ("/jobs/{jobid}/config", get(job_config)),
        ("/jobs/{jobid}/exceptions", get(job_exceptions)),
        ("/jobs/{jobid}/checkpoints", get(job_checkpoints)),
        (
            "/jobs/{jobid}/checkpoints/config",
            get(job_checkpoints_config),
        ),
        (
            "/jobs/{jobid}/checkpoints/details/{checkpointid}",
            get(checkpoint_details),
        ),
        (
            "/jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}",
            get(checkpoint_subtasks),
        ),
        ("/jobs/{jobid}/savepoints", post(trigger_savepoint)),
        (
            "/jobs/{jobid}/savepoints/{triggerid}",
            get(savepoint_status),
        ),
        ("/jobs/{jobid}/stop", post(stop_job)),
        (
            "/jobs/{jobid}/resource-requirements",
            get(resource_requirements).put(set_resource_requirements),
        ),
        ("/taskmanagers", get(taskmanagers)),
        ("/taskmanagers/{taskmanagerid}", get(taskmanager)),
        (
            "/taskmanagers/{taskmanagerid}/metrics",
            get(taskmanager_metrics),
        ),
        ("/taskmanagers/{taskmanagerid}/logs", get(taskmanager_logs)),
        (
            "/taskmanagers/{taskmanagerid}/logs/{logname}",
            get(taskmanager_log_file),
        ),
        ("/taskmanagers/{taskmanagerid}/log", get(taskmanager_log)),
        (
            "/taskmanagers/{taskmanagerid}/stdout",
            get(taskmanager_stdout),
        ),
        ("/jobmanager/config", get(jobmanager_config)),
        ("/jobmanager/metrics", get(jobmanager_metrics)),
        ("/jobmanager/logs", get(jobmanager_logs)),
        ("/jobmanager/logs/{logname}", get(jobmanager_log_file)),
        ("/jobmanager/log", get(jobmanager_log)),
        ("/jobs/{jobid}/metrics", get(job_metrics)),
        ("/jobs/{jobid}/vertices/{vertexid}", get(vertex_details)),
        (
            "/jobs/{jobid}/vertices/{vertexid}/metrics",
            get(vertex_metrics),
        ),
        (
            "/jobs/{jobid}/vertices/{vertexid}/subtasks/metrics",
            get(subtask_metrics),
        ),
        (
            "/jobs/{jobid}/vertices/{vertexid}/backpressure",
            get(vertex_backpressure),
        ),
        (
            "/jobs/{jobid}/vertices/{vertexid}/watermarks",
            get(vertex_watermarks),
        ),
        ("/sluice/jobs", post(submit)),
        ("/jars", get(jars::list)),
        ("/jars/upload", post(jars::upload)),
        ("/jars/{jarid}", axum::routing::delete(jars::delete)),
        ("/jars/{jarid}/run", post(jars::run)),
        ("/sluice/examples", get(examples)),
    ];
    let mut router = Router::new();
    for (path, route) in api {
        router = router
            .route(path, route.clone())
            .route(&format!("/v1{path}"), route);
    }
    ui::routes(router)
        .layer(axum::extract::DefaultBodyLimit::max(
            shared.config().rest.max_content_length as usize,
        ))
        .method_not_allowed_fallback(error::method_not_allowed)
        .fallback(error::not_found)
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            standby_guard,
        ))
        // Outermost: a forged request is refused before a standby would redirect it.
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            guard::cross_site_guard,
        ))
        .with_state(shared)
}

/// With HA, only the leader answers: a standby redirects to the leader's REST address (307, so
/// a POST stays a POST) or, while no leader is known, answers 503. It never serves its own,
/// possibly stale, view.
async fn standby_guard(
    State(shared): State<Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if shared.is_leader() {
        return next.run(request).await;
    }
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    match shared.leader_rest() {
        Some(leader) => {
            let location = format!("{}{path}", leader.trim_end_matches('/'));
            (
                StatusCode::TEMPORARY_REDIRECT,
                [(axum::http::header::LOCATION, location.clone())],
                Json(json!({ "errors": [format!(
                    "This JobManager is a standby; the leader's REST API is at {leader}"
                )] })),
            )
                .into_response()
        }
        None => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "This JobManager is a standby and no leader is known yet; retry shortly",
        )
        .into_response(),
    }
}

async fn config(State(shared): State<Shared>) -> Json<Value> {
    let rest = &shared.config().rest;
    Json(views::dashboard_config(
        now_ms(),
        rest.submit_enabled,
        rest.cancel_enabled,
    ))
}

/// 403 unless `enabled`: the operator switched the call off with `key: false`.
fn switched_on(enabled: bool, key: &str) -> Result<(), ApiError> {
    if enabled {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("Forbidden: this JobManager is configured with {key}: false"),
        ))
    }
}

async fn overview(State(shared): State<Shared>) -> Json<Value> {
    Json(views::overview(&shared.view()))
}

async fn jobs(State(shared): State<Shared>) -> Json<Value> {
    Json(views::job_ids(&shared.view()))
}

async fn jobs_overview(State(shared): State<Shared>) -> Json<Value> {
    Json(views::jobs_overview(&shared.view(), now_ms()))
}

async fn job_details(State(shared): State<Shared>, JobIdParam(id): JobIdParam) -> ApiResult {
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    Ok(Json(views::job_details(jm, now_ms())))
}

async fn job_plan(State(shared): State<Shared>, JobIdParam(id): JobIdParam) -> ApiResult {
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    Ok(Json(views::job_plan(jm)))
}

async fn job_config(State(shared): State<Shared>, JobIdParam(id): JobIdParam) -> ApiResult {
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    Ok(Json(views::job_config(jm)))
}

async fn vertex_details(
    State(shared): State<Shared>,
    ApiPath((job, vertex)): ApiPath<(String, String)>,
) -> ApiResult {
    let (id, v) = find_vertex(&shared, &job, &vertex)?;
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    let host = |tm: &str| {
        dispatcher
            .resources()
            .taskmanager(tm)
            .map(|t| t.host.clone())
    };
    Ok(Json(views::vertex_subtasks(
        jm,
        v as usize,
        now_ms(),
        &host,
    )))
}

/// The checkpoint `checkpoint` of job `job` from its coordinator's history, rendered by
/// `render` with the job's graph and the ids of the retained checkpoints.
fn with_checkpoint(
    shared: &Shared,
    job: &str,
    checkpoint: &str,
    render: impl FnOnce(
        &crate::graph::JobGraph,
        &crate::checkpoint::stats::CheckpointEntry,
        &std::collections::BTreeSet<u64>,
    ) -> Result<Value, ApiError>,
) -> ApiResult {
    let id: crate::common::ids::JobId = job.parse().map_err(|reason| {
        ApiError::bad_request(format!(
            "Bad request: invalid path parameter jobid: {reason}"
        ))
    })?;
    let cid: u64 = checkpoint.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "Bad request: invalid path parameter checkpointid: '{checkpoint}' is not a number"
        ))
    })?;
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    let coordinator = jm.checkpoints();
    let entry = coordinator.checkpoint(cid).ok_or_else(|| {
        ApiError::not_found(format!(
            "Could not find checkpointing statistics for checkpoint {cid} of job {id} \
             (only the latest {} are kept)",
            crate::checkpoint::stats::HISTORY_SIZE
        ))
    })?;
    let retained = coordinator.retained().map(|c| c.id).collect();
    render(jm.graph(), &entry, &retained).map(Json)
}

async fn checkpoint_details(
    State(shared): State<Shared>,
    ApiPath((job, checkpoint)): ApiPath<(String, String)>,
) -> ApiResult {
    with_checkpoint(&shared, &job, &checkpoint, |graph, entry, retained| {
        Ok(views::checkpoint_details(graph, entry, retained))
    })
}

async fn checkpoint_subtasks(
    State(shared): State<Shared>,
    ApiPath((job, checkpoint, vertex)): ApiPath<(String, String, String)>,
) -> ApiResult {
    with_checkpoint(&shared, &job, &checkpoint, |graph, entry, _| {
        let v = graph
            .vertices
            .iter()
            .position(|v| v.id == vertex)
            .ok_or_else(|| {
                ApiError::not_found(format!("The job has no vertex with id {vertex}"))
            })?;
        Ok(views::checkpoint_subtasks(graph, entry, v))
    })
}

async fn jobmanager_logs() -> ApiResult {
    let current = logs::current()?;
    let files = tokio::task::spawn_blocking(move || logs::list(&current))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(Json(logs::list_json(&files)))
}

async fn jobmanager_log_file(ApiPath(name): ApiPath<String>) -> Result<Response, ApiError> {
    logs::check_name(&name)?;
    let current = logs::current()?;
    let path = tokio::task::spawn_blocking(move || logs::resolve(&current, &name))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(logs::text(&path).await)
}

async fn jobmanager_log() -> Result<Response, ApiError> {
    Ok(logs::text(&logs::current()?).await)
}

async fn taskmanager_logs(
    State(shared): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    logs::from_taskmanager(&shared, &id, LogQuery::List).await
}

async fn taskmanager_log_file(
    State(shared): State<Shared>,
    ApiPath((id, name)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    // Refused here already: a bad name never travels.
    crate::logdir::check_name(&name)
        .map_err(|e| logs::api_error(&format!("TaskManager {id}"), e))?;
    logs::from_taskmanager(&shared, &id, LogQuery::File { name }).await
}

async fn taskmanager_log(
    State(shared): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    logs::from_taskmanager(&shared, &id, LogQuery::Current).await
}

async fn taskmanager_stdout(
    State(shared): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    logs::from_taskmanager(&shared, &id, LogQuery::Stdout).await
}

async fn job_exceptions(State(shared): State<Shared>, JobIdParam(id): JobIdParam) -> ApiResult {
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    Ok(Json(views::exceptions(jm)))
}

async fn job_checkpoints(State(shared): State<Shared>, JobIdParam(id): JobIdParam) -> ApiResult {
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    Ok(Json(views::checkpoint_statistics(jm.checkpoints())))
}

async fn job_checkpoints_config(
    State(shared): State<Shared>,
    JobIdParam(id): JobIdParam,
) -> ApiResult {
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    let backend = match jm.state_config().backend.as_str() {
        "rocksdb" => "EmbeddedRocksDBStateBackend",
        _ => "HashMapStateBackend",
    };
    Ok(Json(views::checkpoint_config(jm.checkpoints(), backend)))
}

/// Body of `POST /jobs/:jobid/savepoints` (Flink's `SavepointTriggerRequestBody`).
#[derive(Debug, Deserialize)]
struct SavepointTrigger {
    #[serde(default, rename = "target-directory")]
    target_directory: Option<String>,
    #[serde(default, rename = "cancel-job")]
    cancel_job: bool,
}

/// `GET /jobs/:jobid/resource-requirements`: each vertex's bounds of parallelism (Flink's
/// `JobResourceRequirements`).
async fn resource_requirements(
    State(shared): State<Shared>,
    JobIdParam(id): JobIdParam,
) -> ApiResult {
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    Ok(Json(views::resource_requirements(jm)))
}

/// One vertex's entry of a `PUT /jobs/:jobid/resource-requirements` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VertexRequirements {
    parallelism: ParallelismBounds,
}

/// `{"lowerBound": 1, "upperBound": 4}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ParallelismBounds {
    lower_bound: u32,
    upper_bound: u32,
}

/// `PUT /jobs/:jobid/resource-requirements`: new bounds for every vertex of a job of the
/// adaptive scheduler, which rescales it at once if its parallelism changes.
async fn set_resource_requirements(
    State(shared): State<Shared>,
    JobIdParam(id): JobIdParam,
    ApiJson(body): ApiJson<std::collections::BTreeMap<String, VertexRequirements>>,
) -> ApiResult {
    use crate::jobmanager::jobmaster::RequirementsError;
    let bounds = body
        .into_iter()
        .map(|(vertex, r)| {
            let b = crate::jobmanager::adaptive::Bounds {
                lower: r.parallelism.lower_bound,
                upper: r.parallelism.upper_bound,
            };
            (vertex, b)
        })
        .collect();
    shared.set_requirements(id, &bounds).map_err(|e| {
        let status = match e {
            RequirementsError::UnknownJob(_) => StatusCode::NOT_FOUND,
            RequirementsError::NotAdaptive | RequirementsError::Ended(_) => StatusCode::CONFLICT,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, e.to_string())
    })?;
    Ok(Json(json!({})))
}

/// Body of `POST /jobs/:jobid/stop` (Flink's `StopWithSavepointRequestBody`).
#[derive(Debug, Deserialize)]
struct StopRequest {
    #[serde(default, rename = "targetDirectory")]
    target_directory: Option<String>,
    #[serde(default)]
    drain: bool,
}

fn savepoint_answer(
    shared: &Shared,
    id: crate::common::ids::JobId,
    target: Option<String>,
    after: AfterSavepoint,
) -> Result<Response, ApiError> {
    switched_on(shared.config().rest.cancel_enabled, "web.cancel.enable")?;
    match shared.trigger_savepoint(id, target, after) {
        Ok(request_id) => Ok((
            StatusCode::ACCEPTED,
            Json(json!({ "request-id": request_id })),
        )
            .into_response()),
        Err(SavepointError::NotFound(id)) => Err(ApiError::job_not_found(id)),
        Err(e @ SavepointError::BadTarget(_)) => Err(ApiError::bad_request(format!(
            "Savepoint triggering failed: {e}"
        ))),
        Err(e @ SavepointError::Refused(_)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("Savepoint triggering failed: {e}"),
        )),
    }
}

async fn trigger_savepoint(
    State(shared): State<Shared>,
    JobIdParam(id): JobIdParam,
    ApiJson(request): ApiJson<SavepointTrigger>,
) -> Result<Response, ApiError> {
    let after = if request.cancel_job {
        AfterSavepoint::Stop
    } else {
        AfterSavepoint::Run
    };
    savepoint_answer(&shared, id, request.target_directory, after)
}

async fn stop_job(
    State(shared): State<Shared>,
    JobIdParam(id): JobIdParam,
    ApiJson(request): ApiJson<StopRequest>,
) -> Result<Response, ApiError> {
    let after = if request.drain {
        AfterSavepoint::Drain
    } else {
        AfterSavepoint::Stop
    };
    savepoint_answer(&shared, id, request.target_directory, after)
}

async fn savepoint_status(
    State(shared): State<Shared>,
    ApiPath((job, trigger)): ApiPath<(String, String)>,
) -> ApiResult {
    let id: crate::common::ids::JobId = job.parse().map_err(|reason| {
        ApiError::bad_request(format!(
            "Bad request: invalid path parameter jobid: {reason}"
        ))
    })?;
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    let request = jm.savepoint(&trigger).ok_or_else(|| {
        ApiError::not_found(format!(
            "There is no savepoint operation with triggerId={trigger} for job {id}."
        ))
    })?;
    Ok(Json(match &request.result {
        None => json!({ "status": { "id": "IN_PROGRESS" }, "operation": null }),
        Some(Ok(location)) => json!({
            "status": { "id": "COMPLETED" },
            "operation": { "location": location },
        }),
        Some(Err(cause)) => json!({
            "status": { "id": "COMPLETED" },
            "operation": { "failure-cause": {
                "class": "org.apache.flink.runtime.checkpoint.CheckpointException",
                "stack-trace": cause,
                "serialized-throwable": null,
            } },
        }),
    }))
}

async fn taskmanagers(State(shared): State<Shared>) -> Json<Value> {
    let mut value = views::taskmanagers(&shared.view());
    let store = shared.metrics();
    if let Some(list) = value.get_mut("taskmanagers").and_then(Value::as_array_mut) {
        for entry in list {
            let id = entry.get("id").and_then(Value::as_str).unwrap_or_default();
            let port = store.taskmanager(id).and_then(|t| t.reporter_port);
            metrics::add_reporter_port(entry, port);
        }
    }
    Json(value)
}

async fn taskmanager(State(shared): State<Shared>, ApiPath(id): ApiPath<String>) -> ApiResult {
    let dispatcher = shared.view();
    let tm = dispatcher
        .resources()
        .taskmanager(&id)
        .ok_or_else(|| ApiError::not_found(format!("TaskManager {id} not found")))?;
    let mut value = views::taskmanager_details(tm);
    let port = shared
        .metrics()
        .taskmanager(&id)
        .and_then(|t| t.reporter_port);
    metrics::add_reporter_port(&mut value, port);
    Ok(Json(value))
}

/// Query of the metric endpoints: `get=a,b` (the metrics to read) and `agg=min,max,avg,sum`.
#[derive(Debug, Default, Deserialize)]
struct MetricsQuery {
    get: Option<String>,
    agg: Option<String>,
}

async fn jobmanager_metrics(
    State(shared): State<Shared>,
    ApiQuery(q): ApiQuery<MetricsQuery>,
) -> Json<Value> {
    let process = shared.process_metrics();
    let values = named(crate::jobmanager::metrics::jobmanager_values(
        &shared.view(),
        &process,
    ));
    Json(metrics::metric_list(&values, q.get.as_deref()))
}

async fn taskmanager_metrics(
    State(shared): State<Shared>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<MetricsQuery>,
) -> ApiResult {
    if shared.view().resources().taskmanager(&id).is_none() {
        return Err(ApiError::not_found(format!("TaskManager {id} not found")));
    }
    let process = shared
        .metrics()
        .taskmanager(&id)
        .and_then(|t| t.process.clone());
    let values = process.map(|p| named(p.values())).unwrap_or_default();
    Ok(Json(metrics::metric_list(&values, q.get.as_deref())))
}

async fn job_metrics(
    State(shared): State<Shared>,
    JobIdParam(id): JobIdParam,
    ApiQuery(q): ApiQuery<MetricsQuery>,
) -> ApiResult {
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    let values = named(crate::jobmanager::metrics::job_values(jm, now_ms()));
    Ok(Json(metrics::metric_list(&values, q.get.as_deref())))
}

/// The job and the index of its vertex `vertex_id` (Flink's 32-hex-digit vertex id).
fn find_vertex(
    shared: &Shared,
    job: &str,
    vertex_id: &str,
) -> Result<(crate::common::ids::JobId, u32), ApiError> {
    let id: crate::common::ids::JobId = job.parse().map_err(ApiError::bad_request)?;
    let dispatcher = shared.view();
    let jm = dispatcher
        .job(id)
        .ok_or_else(|| ApiError::job_not_found(id))?;
    let v = jm
        .graph()
        .vertices
        .iter()
        .position(|v| v.id == vertex_id)
        .ok_or_else(|| {
            ApiError::not_found(format!("Job {id} has no vertex with id {vertex_id}"))
        })?;
    Ok((id, v as u32))
}

fn named(values: Vec<(&'static str, f64)>) -> Vec<(String, f64)> {
    values.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

async fn vertex_metrics(
    State(shared): State<Shared>,
    ApiPath((job, vertex)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<MetricsQuery>,
) -> ApiResult {
    let (id, v) = find_vertex(&shared, &job, &vertex)?;
    let store = shared.metrics();
    // As Flink: each subtask's metrics, prefixed with the subtask's index.
    let values: Vec<(String, f64)> = store
        .subtasks(id, v)
        .into_iter()
        .flat_map(|(s, meters)| {
            meters
                .values()
                .into_iter()
                .map(move |(name, value)| (format!("{s}.{name}"), value))
        })
        .collect();
    Ok(Json(metrics::metric_list(&values, q.get.as_deref())))
}

/// Flink's `GET /jobs/:id/vertices/:vid/watermarks`: each subtask's input watermark.
async fn vertex_watermarks(
    State(shared): State<Shared>,
    ApiPath((job, vertex)): ApiPath<(String, String)>,
) -> ApiResult {
    let (id, v) = find_vertex(&shared, &job, &vertex)?;
    let store = shared.metrics();
    let values: Vec<Value> = store
        .subtasks(id, v)
        .into_iter()
        .map(|(s, meters)| {
            json!({
                "id": format!("{s}.currentInputWatermark"),
                "value": meters.latest().current_input_watermark.to_string(),
            })
        })
        .collect();
    Ok(Json(Value::Array(values)))
}

async fn subtask_metrics(
    State(shared): State<Shared>,
    ApiPath((job, vertex)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<MetricsQuery>,
) -> ApiResult {
    let (id, v) = find_vertex(&shared, &job, &vertex)?;
    let store = shared.metrics();
    let subtasks: Vec<_> = store
        .subtasks(id, v)
        .into_iter()
        .map(|(_, meters)| meters.values())
        .collect();
    metrics::aggregated(&subtasks, q.get.as_deref(), q.agg.as_deref())
        .map(Json)
        .map_err(ApiError::bad_request)
}

async fn vertex_backpressure(
    State(shared): State<Shared>,
    ApiPath((job, vertex)): ApiPath<(String, String)>,
) -> ApiResult {
    let (id, v) = find_vertex(&shared, &job, &vertex)?;
    let store = shared.metrics();
    let subtasks: Vec<_> = store
        .subtasks(id, v)
        .into_iter()
        .map(|(s, meters)| (s, meters.time_ratios()))
        .collect();
    Ok(Json(metrics::backpressure(&subtasks, now_ms())))
}

async fn jobmanager_config(State(shared): State<Shared>) -> Json<Value> {
    Json(views::jobmanager_config(shared.config()))
}

async fn examples(State(shared): State<Shared>) -> Json<Value> {
    Json(views::examples(shared.programs()))
}

/// Query of `PATCH /jobs/:jobid`.
#[derive(Debug, Deserialize)]
struct TerminationQuery {
    mode: Option<String>,
}

async fn terminate_job(
    State(shared): State<Shared>,
    JobIdParam(id): JobIdParam,
    ApiQuery(query): ApiQuery<TerminationQuery>,
) -> Result<Response, ApiError> {
    match query
        .mode
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("cancel") => {}
        Some("stop") => {
            return Err(ApiError::bad_request(
                "Bad request: query parameter mode=stop is not supported: use mode=cancel",
            ));
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Bad request: query parameter mode must be 'cancel', not '{other}'"
            )));
        }
        None => {
            return Err(ApiError::bad_request(
                "Bad request: query parameter mode is required (mode=cancel)",
            ));
        }
    }
    switched_on(shared.config().rest.cancel_enabled, "web.cancel.enable")?;
    match shared.cancel(id) {
        Ok(()) => Ok((StatusCode::ACCEPTED, Json(json!({}))).into_response()),
        Err(CancelError::NotFound(id)) => Err(ApiError::job_not_found(id)),
        Err(e @ CancelError::Ended(..)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("Job cancellation failed: {e}"),
        )),
    }
}

/// Body of sluice's own submission call, `POST /sluice/jobs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitRequest {
    /// The bundled program's name.
    job: String,
    /// Its arguments.
    #[serde(default)]
    args: Vec<String>,
    /// Parallelism; `parallelism.default` when absent.
    #[serde(default)]
    parallelism: Option<u32>,
    /// Job-scoped configuration (checkpointing, state backend, restart strategy).
    #[serde(default)]
    config: std::collections::BTreeMap<String, String>,
    /// A savepoint or retained checkpoint to start from (Flink's `savepointPath`).
    #[serde(default, rename = "savepointPath")]
    savepoint_path: Option<String>,
    /// Skip the state of operators the program no longer has (Flink's
    /// `allowNonRestoredState`).
    #[serde(default, rename = "allowNonRestoredState")]
    allow_non_restored_state: Option<bool>,
}

async fn submit(
    State(shared): State<Shared>,
    ApiJson(request): ApiJson<SubmitRequest>,
) -> Result<Response, ApiError> {
    switched_on(shared.config().rest.submit_enabled, "web.submit.enable")?;
    let program = ProgramSpec::new(request.job, request.args);
    let mut overrides: Vec<(String, String)> = request.config.into_iter().collect();
    allow_non_restored_state(&mut overrides, request.allow_non_restored_state);
    submit_program(
        &shared,
        program,
        request.parallelism,
        overrides,
        request.savepoint_path,
    )
    .await
}

/// Flink's `allowNonRestoredState` of a submission, as the job-scoped key it stands for (after
/// the body's configuration, so the flag wins).
fn allow_non_restored_state(overrides: &mut Vec<(String, String)>, allow: Option<bool>) {
    if let Some(allow) = allow {
        overrides.push((
            crate::jobmanager::service::ALLOW_NON_RESTORED_STATE_KEY.to_string(),
            allow.to_string(),
        ));
    }
}

/// Submits `program` as a REST call does (the job kept in the HA job store) and answers with
/// its id; shared by the bundled programs' call and the artifacts' `/jars/:id/run`.
async fn submit_program(
    shared: &Shared,
    program: ProgramSpec,
    parallelism: Option<u32>,
    overrides: Vec<(String, String)>,
    savepoint_path: Option<String>,
) -> Result<Response, ApiError> {
    if parallelism.is_some_and(|p| p > MAX_PARALLELISM) {
        return Err(ApiError::bad_request(format!(
            "Bad request: parallelism must be at most {MAX_PARALLELISM}"
        )));
    }
    let record = |job_id| crate::ha::JobRecord {
        job_id,
        program: program.clone(),
        parallelism: parallelism.unwrap_or(shared.config().parallelism_default),
        overrides: overrides.clone(),
        savepoint: savepoint_path.clone(),
    };
    let submitted = shared
        .submit(
            program.clone(),
            parallelism,
            &overrides,
            savepoint_path.clone(),
        )
        .await;
    if let Ok(id) = submitted
        && let Err(e) = shared.persist_job(&record(id)).await
    {
        // A job the next leader would not know must not run.
        let _ = shared.cancel(id);
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Job submission failed: {e}"),
        ));
    }
    match submitted {
        Ok(id) => Ok((
            StatusCode::ACCEPTED,
            Json(json!({ "jobid": id.to_string(), "jobUrl": format!("/jobs/{id}") })),
        )
            .into_response()),
        Err(e @ SubmitError::Duplicate(_)) => {
            Err(ApiError::new(StatusCode::CONFLICT, e.to_string()))
        }
        Err(e) if e.is_retryable() => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("Job submission failed: {e}"),
        )),
        Err(e) => Err(ApiError::bad_request(format!("Job submission failed: {e}"))),
    }
}
