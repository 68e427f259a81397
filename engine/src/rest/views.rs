//! Pure renderings of the JobManager's state into Flink's REST JSON. Each takes the state and
//! `now` and returns a value, so handlers only lock, render and unlock.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::checkpoint::CheckpointCoordinator;
use crate::checkpoint::stats::{CheckpointEntry, CheckpointStatus, Summarizer};
use crate::config::Config;
use crate::graph::JobGraph;
use crate::jobmanager::dispatcher::Dispatcher;
use crate::jobmanager::jobmaster::{Execution, JobMaster, JobStatus};
use crate::jobmanager::resourcemanager::TaskManagerInfo;
use crate::rpc::messages::{ExecutionState, TaskMetrics};

/// What sluice reports where Flink reports its version.
pub fn version() -> String {
    format!("sluice {}", env!("CARGO_PKG_VERSION"))
}

/// What sluice reports where Flink reports its commit.
const COMMIT: &str = "unknown";

/// Every job state, in Flink's order (for `timestamps`).
const JOB_STATES: [JobStatus; 11] = [
    JobStatus::Initializing,
    JobStatus::Created,
    JobStatus::Running,
    JobStatus::Failing,
    JobStatus::Failed,
    JobStatus::Cancelling,
    JobStatus::Canceled,
    JobStatus::Finished,
    JobStatus::Restarting,
    JobStatus::Suspended,
    JobStatus::Reconciling,
];

const MB: u64 = 1024 * 1024;

/// The local zone's name: `TZ`, else the zone `/etc/localtime` links to, else `UTC`.
fn timezone_name() -> String {
    let from_env = std::env::var("TZ")
        .ok()
        .map(|tz| tz.trim_start_matches(':').to_string())
        .filter(|tz| !tz.is_empty());
    from_env
        .or_else(|| {
            let target = std::fs::read_link("/etc/localtime").ok()?;
            let text = target.to_string_lossy().into_owned();
            text.split_once("zoneinfo/")
                .map(|(_, zone)| zone.to_string())
        })
        .unwrap_or_else(|| "UTC".to_string())
}

/// `GET /config`: what Flink's dashboard reads first; the time zone is the JobManager's, the
/// features what `web.submit.enable` and `web.cancel.enable` allow.
pub fn dashboard_config(now: u64, submit: bool, cancel: bool) -> Value {
    json!({
        "refresh-interval": 2000,
        "timezone-name": timezone_name(),
        "timezone-offset": crate::timezone::local_utc_offset_seconds(now) * 1000,
        "flink-version": version(),
        "flink-revision": COMMIT,
        "features": {
            "web-submit": submit,
            "web-cancel": cancel,
            "web-rescale": false,
            "web-history": false,
        },
    })
}

/// `GET /overview`: the cluster at a glance.
pub fn overview(d: &Dispatcher) -> Value {
    let count = |pred: &dyn Fn(JobStatus) -> bool| d.jobs().filter(|j| pred(j.status())).count();
    json!({
        "taskmanagers": d.resources().taskmanagers().count(),
        "slots-total": d.resources().total_slots(),
        "slots-available": d.resources().free_slots(),
        "jobs-running": count(&|s| !s.is_globally_terminal()),
        "jobs-finished": count(&|s| s == JobStatus::Finished),
        "jobs-cancelled": count(&|s| s == JobStatus::Canceled),
        "jobs-failed": count(&|s| s == JobStatus::Failed),
        // Flink 2.x's blocklist counts: sluice never blocks a TaskManager (each reports
        // `blocked: false`), so none of them or their free slots is blocked.
        "taskmanagers-blocked": 0,
        "slots-free-and-blocked": 0,
        "flink-version": version(),
        "flink-commit": COMMIT,
    })
}

/// `GET /jobs`: ids and states.
pub fn job_ids(d: &Dispatcher) -> Value {
    let jobs: Vec<Value> = d
        .jobs()
        .map(|j| json!({ "id": j.job_id().to_string(), "status": j.status().name() }))
        .collect();
    json!({ "jobs": jobs })
}

/// End time (-1 while running) and duration of a job.
fn times(jm: &JobMaster, now: u64) -> (i64, u64) {
    match jm.end_time() {
        Some(end) => (end as i64, end.saturating_sub(jm.start_time())),
        None => (-1, now.saturating_sub(jm.start_time())),
    }
}

/// When the job last changed state.
fn last_modification(jm: &JobMaster) -> u64 {
    jm.timestamps()
        .get(&jm.status())
        .copied()
        .unwrap_or(jm.start_time())
}

/// Execution-state counts keyed by Flink's names, upper case (`status-counts`, vertex `tasks`)
/// or lower case (`/jobs/overview` `tasks`).
fn counts(counts: &BTreeMap<ExecutionState, u32>, lower: bool) -> Map<String, Value> {
    ExecutionState::ALL
        .iter()
        .map(|s| {
            let name = if lower {
                s.name().to_ascii_lowercase()
            } else {
                s.name().to_string()
            };
            (name, json!(counts.get(s).copied().unwrap_or(0)))
        })
        .collect()
}

/// Flink 2.x's `pending-operators`: operators of the job not yet turned into job vertices (Flink
/// can generate a batch job's graph step by step). sluice derives the whole job graph from the
/// program before it schedules anything, so no operator of a job is ever pending.
fn pending_operators(_jm: &JobMaster) -> u32 {
    0
}

/// One job of `GET /jobs/overview`.
pub fn job_summary(jm: &JobMaster, now: u64) -> Value {
    let (end, duration) = times(jm, now);
    let state_counts = jm.state_counts();
    let mut tasks = counts(&state_counts, true);
    tasks.insert("total".into(), json!(state_counts.values().sum::<u32>()));
    json!({
        "jid": jm.job_id().to_string(),
        "name": jm.name(),
        "start-time": jm.start_time(),
        "end-time": end,
        "duration": duration,
        "state": jm.status().name(),
        "last-modification": last_modification(jm),
        "tasks": tasks,
        "pending-operators": pending_operators(jm),
    })
}

/// `GET /jobs/overview`.
pub fn jobs_overview(d: &Dispatcher, now: u64) -> Value {
    let jobs: Vec<Value> = d.jobs().map(|jm| job_summary(jm, now)).collect();
    json!({ "jobs": jobs })
}

fn sum_metrics<'a>(metrics: impl Iterator<Item = &'a TaskMetrics>) -> TaskMetrics {
    metrics.fold(TaskMetrics::default(), |mut acc, m| {
        acc.records_in += m.records_in;
        acc.bytes_in += m.bytes_in;
        acc.records_out += m.records_out;
        acc.bytes_out += m.bytes_out;
        acc.back_pressured_ms += m.back_pressured_ms;
        acc.idle_ms += m.idle_ms;
        acc.busy_ms += m.busy_ms;
        acc
    })
}

/// Flink's `IOMetricsInfo` with the accumulated times Flink 1.16+ adds: back-pressured, idle
/// (waiting for input) and busy (the rest of the time since processing started), in ms summed
/// over the subtasks, as the TaskManagers measured them at their last heartbeat.
fn io_metrics(m: &TaskMetrics, complete: bool) -> Value {
    json!({
        "read-bytes": m.bytes_in,
        "read-bytes-complete": complete,
        "write-bytes": m.bytes_out,
        "write-bytes-complete": complete,
        "read-records": m.records_in,
        "read-records-complete": complete,
        "write-records": m.records_out,
        "write-records-complete": complete,
        "accumulated-backpressured-time": m.back_pressured_ms,
        "accumulated-idle-time": m.idle_ms,
        "accumulated-busy-time": m.busy_ms as f64,
    })
}

fn vertex_details(jm: &JobMaster, v: usize, now: u64) -> Value {
    let vertex = &jm.graph().vertices[v];
    let executions = &jm.executions()[v];
    let mut per_state: BTreeMap<ExecutionState, u32> = BTreeMap::new();
    let mut start = u64::MAX;
    let mut end = 0u64;
    let mut all_terminal = true;
    for e in executions {
        *per_state.entry(e.state).or_default() += 1;
        if let Some(&t) = e.timestamps.get(&ExecutionState::Deploying) {
            start = start.min(t);
        }
        all_terminal &= e.state.is_terminal();
        if let Some(&t) = e.timestamps.get(&e.state) {
            end = end.max(t);
        }
    }
    // As Flink: -1 until a subtask was deployed, -1 end until every subtask has ended.
    let (start_time, end_time, duration) = match (start, all_terminal) {
        (u64::MAX, _) => (-1, if all_terminal { end as i64 } else { -1 }, -1),
        (s, true) => (s as i64, end as i64, end.saturating_sub(s) as i64),
        (s, false) => (s as i64, -1, now.saturating_sub(s) as i64),
    };
    let metrics = sum_metrics(executions.iter().map(|e| &e.metrics));
    json!({
        "id": vertex.id,
        "name": vertex.name,
        "maxParallelism": vertex.max_parallelism,
        "parallelism": vertex.parallelism,
        "status": jm.vertex_state(v).name(),
        "start-time": start_time,
        "end-time": end_time,
        "duration": duration,
        "tasks": counts(&per_state, false),
        "metrics": io_metrics(&metrics, all_terminal),
    })
}

/// Flink's JSON plan: one node per job vertex with its inputs.
pub fn plan(jid: &str, graph: &JobGraph) -> Value {
    let nodes: Vec<Value> = graph
        .vertices
        .iter()
        .map(|vertex| {
            let inputs: Vec<Value> = vertex
                .inputs
                .iter()
                .enumerate()
                .map(|(num, &e)| {
                    let edge = &graph.edges[e];
                    json!({
                        "num": num,
                        "id": graph.vertices[edge.source].id,
                        "ship_strategy": edge.strategy.to_string(),
                        "exchange": "pipelined_bounded",
                    })
                })
                .collect();
            // Flink's operator strategy and optimizer properties belong to its batch
            // optimizer, which sluice does not have: they are left out.
            json!({
                "id": vertex.id,
                "parallelism": vertex.parallelism,
                "operator": vertex.name,
                "description": vertex.name,
                "inputs": inputs,
            })
        })
        .collect();
    json!({
        "jid": jid,
        "name": graph.name,
        "type": if graph.batch { "BATCH" } else { "STREAMING" },
        "nodes": nodes,
    })
}

/// `GET /jobs/:jobid/plan` (Flink's `JobPlanInfo`).
pub fn job_plan(jm: &JobMaster) -> Value {
    json!({ "plan": plan(&jm.job_id().to_string(), jm.graph()) })
}

/// Start (deployment), end (-1 until terminal) and duration (-1 until deployed) of a subtask.
fn execution_times(e: &Execution, now: u64) -> (i64, i64, i64) {
    let start = e.timestamps.get(&ExecutionState::Deploying).copied();
    let end = e
        .state
        .is_terminal()
        .then(|| e.timestamps.get(&e.state).copied())
        .flatten();
    match (start, end) {
        (None, _) => (-1, end.map_or(-1, |t| t as i64), -1),
        (Some(s), Some(t)) => (s as i64, t as i64, t.saturating_sub(s) as i64),
        (Some(s), None) => (s as i64, -1, now.saturating_sub(s) as i64),
    }
}

/// How long a subtask spent in each state it reached (Flink's `status-duration`): from
/// entering it to entering the next, the current one until `now`.
fn status_durations(e: &Execution, now: u64) -> Map<String, Value> {
    let mut entered: Vec<(u64, ExecutionState)> =
        e.timestamps.iter().map(|(&s, &t)| (t, s)).collect();
    entered.sort();
    let mut out = Map::new();
    for (i, (t, state)) in entered.iter().enumerate() {
        let until = match entered.get(i + 1) {
            Some((next, _)) => *next,
            None if state.is_terminal() => *t,
            None => now,
        };
        out.insert(state.name().into(), json!(until.saturating_sub(*t)));
    }
    out
}

/// `GET /jobs/:jobid/vertices/:vertexid` (Flink's `JobVertexDetailsInfo`): the vertex and each
/// subtask's current attempt with where it runs, its times and I/O. `host` names a
/// TaskManager's host by its id (`None` once it is gone: the slot's address is shown then).
pub fn vertex_subtasks(
    jm: &JobMaster,
    v: usize,
    now: u64,
    host: &dyn Fn(&str) -> Option<String>,
) -> Value {
    let vertex = &jm.graph().vertices[v];
    let subtasks: Vec<Value> = jm.executions()[v]
        .iter()
        .enumerate()
        .map(|(index, e)| {
            let (start, end, duration) = execution_times(e, now);
            let mut entry = json!({
                "subtask": index,
                "status": e.state.name(),
                "attempt": e.attempt,
                "start-time": start,
                "end-time": end,
                "duration": duration,
                "metrics": io_metrics(&e.metrics, e.state.is_terminal()),
                "status-duration": status_durations(e, now),
            });
            // A subtask not yet given a slot runs nowhere: no endpoint, no TaskManager.
            if let (Some(slot), Value::Object(map)) = (&e.slot, &mut entry) {
                let name =
                    host(&slot.resource_id).unwrap_or_else(|| slot.data_address.ip().to_string());
                map.insert(
                    "endpoint".into(),
                    json!(format!("{name}:{}", slot.data_address.port())),
                );
                map.insert("taskmanager-id".into(), json!(slot.resource_id));
            }
            entry
        })
        .collect();
    json!({
        "id": vertex.id,
        "name": vertex.name,
        "maxParallelism": vertex.max_parallelism,
        "parallelism": vertex.parallelism,
        "now": now,
        "subtasks": subtasks,
    })
}

/// The part of one checkpoint that concerns one vertex: the acknowledged subtasks' sizes and
/// the latest acknowledgement (Flink's `TaskCheckpointStatistics` fields).
fn vertex_checkpoint(entry: &CheckpointEntry, vertex: &crate::graph::JobVertex, v: u32) -> Value {
    let subtasks = entry.subtasks.iter().filter(|s| s.vertex == v);
    let (mut expected, mut acked, mut latest, mut checkpointed, mut state) = (0u64, 0u64, 0, 0, 0);
    for s in subtasks {
        expected += 1;
        if let Some(ack) = s.ack {
            acked += 1;
            latest = latest.max(ack.timestamp);
            checkpointed += ack.checkpointed_size;
            state += ack.state_size;
        }
    }
    let duration = if acked == 0 {
        0
    } else {
        latest.saturating_sub(entry.trigger_timestamp)
    };
    json!({
        "id": vertex.id,
        "status": checkpoint_status(entry.status),
        "latest_ack_timestamp": latest,
        "checkpointed_size": checkpointed,
        "state_size": state,
        "end_to_end_duration": duration,
        // Aligned checkpoints buffer and persist no in-flight data (as in the list).
        "alignment_buffered": 0,
        "processed_data": 0,
        "persisted_data": 0,
        "num_subtasks": expected,
        "num_acknowledged_subtasks": acked,
    })
}

fn checkpoint_status(status: CheckpointStatus) -> &'static str {
    match status {
        CheckpointStatus::InProgress => "IN_PROGRESS",
        CheckpointStatus::Completed => "COMPLETED",
        CheckpointStatus::Failed => "FAILED",
    }
}

/// `GET /jobs/:jobid/checkpoints/details/:checkpointid`: the history entry with `tasks`, per
/// vertex id the subtasks that acknowledged, their sizes and the vertex's end-to-end duration.
pub fn checkpoint_details(
    graph: &JobGraph,
    entry: &CheckpointEntry,
    retained: &BTreeSet<u64>,
) -> Value {
    let mut value = serde_json::to_value(entry).unwrap_or(Value::Null);
    flink_checkpoint_entry(&mut value, retained);
    let tasks: Map<String, Value> = graph
        .vertices
        .iter()
        .enumerate()
        .filter(|(v, _)| entry.subtasks.iter().any(|s| s.vertex == *v as u32))
        .map(|(v, vertex)| {
            (
                vertex.id.clone(),
                vertex_checkpoint(entry, vertex, v as u32),
            )
        })
        .collect();
    if let Value::Object(map) = &mut value {
        map.insert("tasks".into(), Value::Object(tasks));
    }
    value
}

/// `GET /jobs/:jobid/checkpoints/details/:checkpointid/subtasks/:vertexid` (Flink's
/// `TaskCheckpointStatisticsWithSubtaskDetails`): the vertex's part and each subtask's
/// acknowledgement. sluice does not time a snapshot's synchronous and asynchronous parts, the
/// alignment or the start delay, so those fields are left out.
pub fn checkpoint_subtasks(graph: &JobGraph, entry: &CheckpointEntry, v: usize) -> Value {
    let vertex = &graph.vertices[v];
    let mut value = vertex_checkpoint(entry, vertex, v as u32);
    let (mut sizes, mut states, mut durations) = (
        Summarizer::default(),
        Summarizer::default(),
        Summarizer::default(),
    );
    let subtasks: Vec<Value> = entry
        .subtasks
        .iter()
        .filter(|s| s.vertex == v as u32)
        .map(|s| match s.ack {
            Some(ack) => {
                let duration = ack.timestamp.saturating_sub(entry.trigger_timestamp);
                sizes.add(ack.checkpointed_size);
                states.add(ack.state_size);
                durations.add(duration);
                json!({
                    "index": s.subtask,
                    "status": "completed",
                    "ack_timestamp": ack.timestamp,
                    "end_to_end_duration": duration,
                    "checkpointed_size": ack.checkpointed_size,
                    "state_size": ack.state_size,
                    "unaligned_checkpoint": false,
                    "aborted": false,
                })
            }
            None => json!({ "index": s.subtask, "status": "pending_or_failed" }),
        })
        .collect();
    if let Value::Object(map) = &mut value {
        map.insert(
            "summary".into(),
            json!({
                "checkpointed_size": sizes.view(),
                "state_size": states.view(),
                "end_to_end_duration": durations.view(),
            }),
        );
        map.insert("subtasks".into(), Value::Array(subtasks));
    }
    value
}

/// A program's arguments as Flink's `ParameterTool.fromArgs` reads them: `--key value` (or
/// `-key value`) pairs, a key followed by another key or nothing has the value
/// `__NO_VALUE_KEY`; an argument that is no key's value keeps its position as its key.
fn user_config(args: &[String]) -> Map<String, Value> {
    let is_key = |a: &str| a.starts_with('-') && a.parse::<f64>().is_err() && a.len() > 1;
    let mut out = Map::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if is_key(arg) {
            let key = arg.trim_start_matches('-').to_string();
            match args.get(i + 1).filter(|next| !is_key(next)) {
                Some(value) => {
                    out.insert(key, json!(value));
                    i += 2;
                }
                None => {
                    out.insert(key, json!("__NO_VALUE_KEY"));
                    i += 1;
                }
            }
        } else {
            out.insert(i.to_string(), json!(arg));
            i += 1;
        }
    }
    out
}

/// `GET /jobs/:jobid/config` (Flink's `JobConfigInfo`): the program's arguments as its user
/// configuration. sluice has no execution config of Flink's kind (object reuse, execution mode),
/// so only what it has is reported.
pub fn job_config(jm: &JobMaster) -> Value {
    json!({
        "jid": jm.job_id().to_string(),
        "name": jm.name(),
        "execution-config": {
            "user-config": user_config(&jm.program().args),
        },
    })
}

/// `GET /jobs/:jobid`.
pub fn job_details(jm: &JobMaster, now: u64) -> Value {
    let (end, duration) = times(jm, now);
    let jid = jm.job_id().to_string();
    let timestamps: Map<String, Value> = JOB_STATES
        .iter()
        .map(|s| {
            (
                s.name().to_string(),
                json!(jm.timestamps().get(s).copied().unwrap_or(0)),
            )
        })
        .collect();
    let vertices: Vec<Value> = (0..jm.graph().vertices.len())
        .map(|v| vertex_details(jm, v, now))
        .collect();
    let max_parallelism = jm
        .graph()
        .vertices
        .iter()
        .map(|v| v.max_parallelism)
        .max()
        .unwrap_or(0);
    let mut details = json!({
        "jid": jid,
        "name": jm.name(),
        "isStoppable": false,
        "state": jm.status().name(),
        "job-type": if jm.graph().batch { "BATCH" } else { "STREAMING" },
        "start-time": jm.start_time(),
        "end-time": end,
        "duration": duration,
        "maxParallelism": max_parallelism,
        "now": now,
        "timestamps": timestamps,
        "vertices": vertices,
        "status-counts": counts(&jm.state_counts(), false),
        "plan": plan(&jid, jm.graph()),
        "pending-operators": pending_operators(jm),
    });
    if let Some((state, _)) = jm.adaptive() {
        // Not in Flink's JobDetailsInfo: the adaptive scheduler's state (WaitingForResources,
        // Executing, Restarting), which Flink shows only in its logs.
        details["adaptive-scheduler-state"] = json!(state);
    }
    details
}

/// `GET /jobs/:jobid/resource-requirements`: per vertex id, `{"parallelism": {"lowerBound",
/// "upperBound"}}`; a job of the default scheduler has its fixed parallelism as both.
pub fn resource_requirements(jm: &JobMaster) -> Value {
    let graph = jm.submitted_graph();
    let bounds: Vec<(u32, u32)> = match jm.adaptive() {
        Some((_, r)) => r.0.iter().map(|b| (b.lower, b.upper)).collect(),
        None => graph
            .vertices
            .iter()
            .map(|v| (v.parallelism, v.parallelism))
            .collect(),
    };
    let map: Map<String, Value> = graph
        .vertices
        .iter()
        .zip(bounds)
        .map(|(v, (lower, upper))| {
            (
                v.id.clone(),
                json!({"parallelism": {"lowerBound": lower, "upperBound": upper}}),
            )
        })
        .collect();
    Value::Object(map)
}

/// The exception class of `com.example.SomeException: message` (a qualified name, or one
/// ending in `Exception`/`Error`); other messages get sluice's generic failure name.
fn exception_name(text: &str) -> &str {
    let first_line = text.lines().next().unwrap_or("");
    let looks_like_class = |c: &str| {
        !c.is_empty()
            && !c.contains(char::is_whitespace)
            && (c.contains('.') || c.ends_with("Exception") || c.ends_with("Error"))
    };
    match first_line.split_once(": ") {
        Some((class, _)) if looks_like_class(class) => class,
        _ => "sluice.TaskFailure",
    }
}

/// `GET /jobs/:jobid/exceptions`, in Flink's `JobExceptionsInfoWithHistory` shape. Strings Flink
/// marks nullable (`root-exception`, `taskName`, `location`, `taskManagerId`) are `null` when
/// unknown; numbers and booleans are always present.
pub fn exceptions(jm: &JobMaster) -> Value {
    let root = jm.exceptions().last();
    let all: Vec<Value> = jm
        .exceptions()
        .iter()
        .rev()
        .filter(|e| e.task_name.is_some())
        .map(|e| {
            json!({
                "exception": e.exception,
                "task": e.task_name,
                "location": e.location,
                "taskManagerId": e.location,
                "timestamp": e.timestamp,
            })
        })
        .collect();
    let entries: Vec<Value> = jm
        .exceptions()
        .iter()
        .rev()
        .map(|e| {
            json!({
                "exceptionName": exception_name(&e.exception),
                "stacktrace": e.exception,
                "timestamp": e.timestamp,
                "taskName": e.task_name,
                "location": e.location,
                "endpoint": e.location,
                "taskManagerId": e.location,
                "failureLabels": {},
                "concurrentExceptions": e.concurrent.iter().map(|c| {
                    let (task, failure) = c.split_once(": ").unwrap_or(("", c.as_str()));
                    json!({
                        "exceptionName": exception_name(failure),
                        "stacktrace": failure,
                        "timestamp": e.timestamp,
                        "taskName": task,
                        "location": e.location,
                        "endpoint": e.location,
                        "taskManagerId": e.location,
                        "failureLabels": {},
                    })
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "root-exception": root.map(|e| e.exception.clone()),
        "timestamp": root.map(|e| e.timestamp).unwrap_or(0),
        "all-exceptions": all,
        "truncated": false,
        "exceptionHistory": { "entries": entries, "truncated": false },
    })
}

/// Flink's `ResourceProfileInfo` for `slots` of a TaskManager's slots, memory in MB.
fn resource_profile(tm: &TaskManagerInfo, slots: u32) -> Value {
    let total = tm.slots.len().max(1) as u64;
    let share = |v: u64| v * slots as u64 / total;
    json!({
        "cpuCores": share(tm.hardware.cpu_cores as u64) as f64,
        "taskHeapMemory": 0,
        "taskOffHeapMemory": 0,
        "managedMemory": share(tm.managed_memory) / MB,
        "networkMemory": share(tm.network_memory) / MB,
        "extendedResources": {},
    })
}

/// One entry of `GET /taskmanagers`. `timeSinceLastHeartbeat` is, as in Flink, the time of the
/// last heartbeat (ms since the epoch) despite its name.
pub fn taskmanager(tm: &TaskManagerInfo) -> Value {
    let slots = tm.slots.len() as u32;
    json!({
        "id": tm.resource_id,
        "path": format!("sluice://{}/taskmanager/{}", tm.rpc_address, tm.resource_id),
        "dataPort": tm.data_address.port(),
        "jmxPort": -1,
        "timeSinceLastHeartbeat": tm.last_heartbeat,
        "slotsNumber": slots,
        "freeSlots": tm.free_slots(),
        "totalResource": resource_profile(tm, slots),
        "freeResource": resource_profile(tm, tm.free_slots()),
        "hardware": {
            "cpuCores": tm.hardware.cpu_cores,
            "physicalMemory": tm.hardware.physical_memory,
            "freeMemory": 0,
            "managedMemory": tm.managed_memory,
        },
        "memoryConfiguration": {
            "frameworkHeap": 0,
            "taskHeap": 0,
            "frameworkOffHeap": 0,
            "taskOffHeap": 0,
            "networkMemory": tm.network_memory,
            "managedMemory": tm.managed_memory,
            "jvmMetaspace": 0,
            "jvmOverhead": 0,
            "totalFlinkMemory": tm.network_memory + tm.managed_memory,
            "totalProcessMemory": tm.hardware.process_memory,
        },
        "blocked": false,
    })
}

/// `GET /taskmanagers`.
pub fn taskmanagers(d: &Dispatcher) -> Value {
    let tms: Vec<Value> = d.resources().taskmanagers().map(taskmanager).collect();
    json!({ "taskmanagers": tms })
}

/// `GET /taskmanagers/:id`: the list entry plus its slots and (JVM-less) metrics.
pub fn taskmanager_details(tm: &TaskManagerInfo) -> Value {
    let mut value = taskmanager(tm);
    let allocated: Vec<Value> = tm
        .slots
        .iter()
        .enumerate()
        .filter_map(|(i, job)| {
            job.map(|job| {
                json!({ "index": i, "jobId": job.to_string(), "resource": resource_profile(tm, 1) })
            })
        })
        .collect();
    if let Value::Object(map) = &mut value {
        map.insert("allocatedSlots".into(), Value::Array(allocated));
        map.insert(
            "metrics".into(),
            json!({
                "heapUsed": 0, "heapCommitted": 0, "heapMax": 0,
                "nonHeapUsed": 0, "nonHeapCommitted": 0, "nonHeapMax": 0,
                "directCount": 0, "directUsed": 0, "directMax": 0,
                "mappedCount": 0, "mappedUsed": 0, "mappedMax": 0,
                "memorySegmentsAvailable": 0, "memorySegmentsTotal": 0,
                "nettyShuffleMemorySegmentsAvailable": 0,
                "nettyShuffleMemorySegmentsUsed": 0,
                "nettyShuffleMemorySegmentsTotal": 0,
                "nettyShuffleMemoryAvailable": 0,
                "nettyShuffleMemoryUsed": 0,
                "nettyShuffleMemoryTotal": tm.network_memory,
                "garbageCollectors": [],
            }),
        );
    }
    value
}

/// `GET /jobs/:jobid/checkpoints`: the coordinator's statistics with what Flink's client needs
/// to read them (see [`flink_checkpoint_entry`]).
pub fn checkpoint_statistics(coordinator: &CheckpointCoordinator) -> Value {
    let retained: BTreeSet<u64> = coordinator.retained().map(|c| c.id).collect();
    let mut stats = serde_json::to_value(coordinator.stats()).unwrap_or(Value::Null);
    if let Some(history) = stats.get_mut("history").and_then(Value::as_array_mut) {
        for entry in history {
            flink_checkpoint_entry(entry, &retained);
        }
    }
    if let Some(latest) = stats.get_mut("latest") {
        for kind in ["completed", "savepoint", "failed"] {
            if let Some(entry) = latest.get_mut(kind).filter(|e| !e.is_null()) {
                flink_checkpoint_entry(entry, &retained);
            }
        }
    }
    stats
}

/// Completes one checkpoint of the statistics for Flink's client. Flink's `CheckpointStatistics`
/// is polymorphic: each entry names its kind in `clazz` (`completed`, `failed`, `in_progress`),
/// and its primitive fields must be present. `retained` holds the ids of the completed
/// checkpoints whose files are still kept.
pub fn flink_checkpoint_entry(entry: &mut Value, retained: &BTreeSet<u64>) {
    let Value::Object(map) = entry else { return };
    let status = map.get("status").and_then(Value::as_str).unwrap_or("");
    let clazz = match status {
        "COMPLETED" => "completed",
        "FAILED" => "failed",
        _ => "in_progress",
    };
    if status == "COMPLETED" {
        // A completed checkpoint is discarded once it is no longer retained (its files are
        // deleted); savepoints belong to the user and are never discarded.
        let savepoint = map.get("is_savepoint").and_then(Value::as_bool) == Some(true);
        let id = map.get("id").and_then(Value::as_u64).unwrap_or(0);
        map.insert(
            "discarded".into(),
            json!(!savepoint && !retained.contains(&id)),
        );
    }
    map.insert("clazz".into(), json!(clazz));
    // Flink itself always reports 0 here.
    map.insert("alignment_buffered".into(), json!(0));
    // In-flight data of unaligned checkpoints: sluice's checkpoints are aligned, so nothing in
    // flight is persisted or processed as part of a checkpoint.
    map.insert("processed_data".into(), json!(0));
    map.insert("persisted_data".into(), json!(0));
    // Per-vertex statistics are not kept; Flink sends this empty too unless one checkpoint's
    // details are asked for.
    map.insert("tasks".into(), json!({}));
}

/// `GET /jobs/:jobid/checkpoints/config`: the coordinator's view plus the fields Flink 2.x
/// adds. sluice has no changelog state backend: its materialization interval is 0 (Flink's
/// "periodic materialization disabled").
pub fn checkpoint_config(coordinator: &CheckpointCoordinator, backend: &str) -> Value {
    let mut config = serde_json::to_value(coordinator.config_view()).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut config {
        map.insert("state_backend".into(), json!(backend));
        map.insert(
            "changelog_periodic_materialization_interval".into(),
            json!(0),
        );
    }
    config
}

/// `GET /jobmanager/config`.
pub fn jobmanager_config(config: &Config) -> Value {
    let entries: Vec<Value> = config
        .entries()
        .into_iter()
        .map(|(key, value)| json!({ "key": key, "value": value }))
        .collect();
    Value::Array(entries)
}

/// `GET /sluice/examples`: the programs this JobManager can run.
pub fn examples(programs: &crate::api::ProgramRegistry) -> Value {
    let programs: Vec<Value> = programs
        .iter()
        .map(|p| json!({ "name": p.name(), "description": p.description(), "usage": p.usage() }))
        .collect();
    json!({ "examples": programs })
}

#[cfg(test)]
mod tests {
    use super::user_config;
    use serde_json::json;

    #[test]
    fn program_arguments_read_as_flinks_parameter_tool_reads_them() {
        let args: Vec<String> = [
            "--rate", "10", "-verbose", "--offset", "-5", "extra", "--last",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            serde_json::Value::Object(user_config(&args)),
            json!({
                "rate": "10",
                "verbose": "__NO_VALUE_KEY",
                "offset": "-5",
                "5": "extra",
                "last": "__NO_VALUE_KEY",
            })
        );
    }
}
