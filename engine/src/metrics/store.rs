//! The JobManager's metric store (Flink's `MetricStore`): what the TaskManagers reported with
//! their heartbeats, sampled into meters as it arrives, for the REST API and the JobManager's
//! reporter to read. A pure data structure: time comes in with every update.

use std::collections::HashMap;

use super::process::ProcessMetrics;
use super::task::{TaskMeters, TaskMetrics};
use crate::common::ids::{ExecutionId, JobId, ResourceId};

/// How long the metrics of an execution no TaskManager reports any more are kept (an ended
/// subtask's last values stay visible this long).
pub const RETENTION_MS: u64 = 10 * 60 * 1000;

/// What the store knows of one TaskManager.
#[derive(Debug, Clone, Default)]
pub struct TaskManagerMetrics {
    /// The port of its Prometheus reporter, if it runs one.
    pub reporter_port: Option<u16>,
    /// Its process metrics, as of its last heartbeat.
    pub process: Option<ProcessMetrics>,
}

#[derive(Debug, Clone)]
struct TaskEntry {
    meters: TaskMeters,
    updated: u64,
}

/// Task and TaskManager metrics by execution and resource id.
#[derive(Debug, Default)]
pub struct MetricStore {
    tasks: HashMap<ExecutionId, TaskEntry>,
    taskmanagers: HashMap<ResourceId, TaskManagerMetrics>,
}

impl MetricStore {
    /// A TaskManager registered, with its reporter's port.
    pub fn register_taskmanager(&mut self, id: &str, reporter_port: Option<u16>) {
        self.taskmanagers.insert(
            id.to_owned(),
            TaskManagerMetrics {
                reporter_port,
                process: None,
            },
        );
    }

    /// A TaskManager is gone.
    pub fn remove_taskmanager(&mut self, id: &str) {
        self.taskmanagers.remove(id);
    }

    /// A heartbeat of `tm` at `now_ms` with its tasks' counters and its process metrics.
    pub fn heartbeat(
        &mut self,
        tm: &str,
        now_ms: u64,
        tasks: &[(ExecutionId, TaskMetrics)],
        process: Option<ProcessMetrics>,
    ) {
        if let Some(entry) = self.taskmanagers.get_mut(tm)
            && process.is_some()
        {
            entry.process = process;
        }
        for (id, m) in tasks {
            self.task_update(*id, now_ms, m);
        }
        self.tasks
            .retain(|_, e| now_ms.saturating_sub(e.updated) <= RETENTION_MS);
    }

    /// A subtask's counters (with a heartbeat, or its final ones when it ended).
    pub fn task_update(&mut self, id: ExecutionId, now_ms: u64, metrics: &TaskMetrics) {
        let entry = self.tasks.entry(id).or_insert_with(|| TaskEntry {
            meters: TaskMeters::default(),
            updated: now_ms,
        });
        entry.meters.update(now_ms, metrics);
        entry.updated = now_ms;
    }

    /// The meters of one execution.
    pub fn task(&self, id: &ExecutionId) -> Option<&TaskMeters> {
        self.tasks.get(id).map(|e| &e.meters)
    }

    /// The newest attempt of each subtask of `job`'s `vertex` that the store has, by subtask.
    pub fn subtasks(&self, job: JobId, vertex: u32) -> Vec<(u32, &TaskMeters)> {
        let mut newest: HashMap<u32, (u32, &TaskMeters)> = HashMap::new();
        for (id, e) in &self.tasks {
            if id.job == job && id.vertex == vertex {
                let slot = newest.entry(id.subtask).or_insert((id.attempt, &e.meters));
                if id.attempt >= slot.0 {
                    *slot = (id.attempt, &e.meters);
                }
            }
        }
        let mut out: Vec<(u32, &TaskMeters)> =
            newest.into_iter().map(|(s, (_, m))| (s, m)).collect();
        out.sort_by_key(|(s, _)| *s);
        out
    }

    /// What the store knows of a TaskManager.
    pub fn taskmanager(&self, id: &str) -> Option<&TaskManagerMetrics> {
        self.taskmanagers.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(subtask: u32, attempt: u32) -> ExecutionId {
        ExecutionId {
            job: JobId(7),
            vertex: 1,
            subtask,
            attempt,
        }
    }

    fn records(n: u64) -> TaskMetrics {
        TaskMetrics {
            records_in: n,
            ..TaskMetrics::default()
        }
    }

    #[test]
    fn heartbeats_feed_meters_and_old_executions_expire() {
        let mut s = MetricStore::default();
        s.register_taskmanager("tm-1", Some(9250));
        s.heartbeat("tm-1", 0, &[(exec(0, 0), records(0))], None);
        let process = ProcessMetrics {
            threads: 12,
            ..ProcessMetrics::default()
        };
        s.heartbeat(
            "tm-1",
            10_000,
            &[(exec(0, 0), records(5000)), (exec(1, 0), records(1))],
            Some(process.clone()),
        );
        let m = s.task(&exec(0, 0)).unwrap();
        let v: HashMap<_, _> = m.values().into_iter().collect();
        assert_eq!(v["numRecordsInPerSecond"], 500.0);
        let tm = s.taskmanager("tm-1").unwrap();
        assert_eq!(tm.reporter_port, Some(9250));
        assert_eq!(tm.process, Some(process));
        // A restart: attempt 1 of subtask 0 replaces attempt 0 in the vertex's view.
        s.heartbeat("tm-1", 20_000, &[(exec(0, 1), records(3))], None);
        let subtasks = s.subtasks(JobId(7), 1);
        assert_eq!(subtasks.len(), 2);
        assert_eq!(subtasks[0].1.latest().records_in, 3);
        // Ten minutes later only what is still reported remains.
        s.heartbeat("tm-1", 20_000 + RETENTION_MS + 1, &[], None);
        assert!(s.task(&exec(0, 1)).is_none());
        s.remove_taskmanager("tm-1");
        assert!(s.taskmanager("tm-1").is_none());
    }
}
