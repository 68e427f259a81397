//! The JobManager's metrics (scopes `jobmanager` and `jobmanager.job`), read from the
//! Dispatcher's state when they are asked for, and its Prometheus reporter's exposition.

use super::dispatcher::Dispatcher;
use super::jobmaster::{JobMaster, JobStatus};
use super::service::{JobManagerShared, now_ms};
use crate::metrics::{Exposition, ProcessMetrics};

/// The `jobmanager` scope: cluster gauges and this process's metrics.
pub fn jobmanager_values(d: &Dispatcher, process: &ProcessMetrics) -> Vec<(&'static str, f64)> {
    let resources = d.resources();
    let running = d
        .jobs()
        .filter(|j| j.status() == JobStatus::Running)
        .count();
    let mut values = vec![
        (
            "numRegisteredTaskManagers",
            resources.taskmanagers().count() as f64,
        ),
        ("taskSlotsTotal", resources.total_slots() as f64),
        ("taskSlotsAvailable", resources.free_slots() as f64),
        ("numRunningJobs", running as f64),
    ];
    values.extend(process.values());
    values
}

/// The `jobmanager.job` scope of one job at `now` (ms since the epoch).
pub fn job_values(jm: &JobMaster, now: u64) -> Vec<(&'static str, f64)> {
    // As Flink's uptime gauge: the time since the job switched to RUNNING, 0 before, -1 once
    // it ended.
    let uptime = match jm.status() {
        JobStatus::Running => jm
            .timestamps()
            .get(&JobStatus::Running)
            .map_or(0.0, |&t| now.saturating_sub(t) as f64),
        s if s.is_globally_terminal() => -1.0,
        _ => 0.0,
    };
    let stats = jm.checkpoints().stats();
    let last = stats.latest.completed.as_ref();
    vec![
        ("uptime", uptime),
        ("numRestarts", jm.restarts() as f64),
        (
            "lastCheckpointDuration",
            last.map_or(-1.0, |c| c.end_to_end_duration as f64),
        ),
        (
            "lastCheckpointSize",
            last.map_or(-1.0, |c| c.checkpointed_size as f64),
        ),
        (
            "numberOfCompletedCheckpoints",
            stats.counts.completed as f64,
        ),
        ("numberOfFailedCheckpoints", stats.counts.failed as f64),
        (
            "numberOfInProgressCheckpoints",
            stats.counts.in_progress as f64,
        ),
        ("totalNumberOfCheckpoints", stats.counts.total as f64),
    ]
}

/// What the JobManager's Prometheus reporter answers a scrape with.
pub fn exposition(shared: &JobManagerShared, host: &str) -> String {
    let process = shared.process_metrics();
    let now = now_ms();
    let d = shared.view();
    let mut e = Exposition::default();
    for (name, value) in jobmanager_values(&d, &process) {
        e.add("jobmanager", name, vec![("host", host.to_owned())], value);
    }
    for jm in d.jobs() {
        for (name, value) in job_values(jm, now) {
            let labels = vec![
                ("host", host.to_owned()),
                ("job_id", jm.job_id().to_string()),
                ("job_name", jm.name().to_owned()),
            ];
            e.add("jobmanager_job", name, labels, value);
        }
    }
    e.render()
}
