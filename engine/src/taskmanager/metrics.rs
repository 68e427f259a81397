//! The TaskManager's metrics: its tasks' meters with Flink's `taskmanager.job.task` labels and
//! its process metrics, sampled when a scrape or a heartbeat reads them, rendered for its
//! Prometheus reporter.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::common::ids::ExecutionId;
use crate::metrics::{CpuLoad, Exposition, ProcessMetrics, TaskMeters, TaskMetrics};

/// What names a task in Flink's task-scope labels, besides its execution id.
#[derive(Debug, Clone)]
pub(crate) struct TaskLabels {
    /// The job's name.
    pub(crate) job_name: String,
    /// The vertex's name (Flink's `task_name`).
    pub(crate) task_name: String,
}

#[derive(Default)]
struct State {
    labels: HashMap<ExecutionId, TaskLabels>,
    meters: HashMap<ExecutionId, TaskMeters>,
    cpu: CpuLoad,
}

/// The TaskManager's metric registry.
pub(crate) struct TaskManagerMetrics {
    tm_id: String,
    host: String,
    state: Mutex<State>,
}

impl TaskManagerMetrics {
    pub(crate) fn new(tm_id: String, host: String) -> Self {
        TaskManagerMetrics {
            tm_id,
            host,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A task was deployed.
    pub(crate) fn task_deployed(&self, id: ExecutionId, labels: TaskLabels) {
        self.state().labels.insert(id, labels);
    }

    /// A task ended: its labels go (its meters go at the next sample).
    pub(crate) fn task_ended(&self, id: &ExecutionId) {
        self.state().labels.remove(id);
    }

    /// Samples the counters of the running tasks at `now_ms` (the meters of tasks no longer
    /// among them are dropped) and reads the process metrics. Labels stay until
    /// [`task_ended`](Self::task_ended): a task is deployed before it is among the running.
    pub(crate) fn sample(
        &self,
        now_ms: u64,
        tasks: &[(ExecutionId, TaskMetrics)],
    ) -> ProcessMetrics {
        let mut state = self.state();
        let running: std::collections::HashSet<_> = tasks.iter().map(|(id, _)| *id).collect();
        state.meters.retain(|id, _| running.contains(id));
        for (id, m) in tasks {
            state.meters.entry(*id).or_default().update(now_ms, m);
        }
        crate::metrics::read_process(now_ms, &mut state.cpu)
    }

    /// Samples and renders everything for a Prometheus scrape.
    pub(crate) fn render(&self, now_ms: u64, tasks: &[(ExecutionId, TaskMetrics)]) -> String {
        let process = self.sample(now_ms, tasks);
        let state = self.state();
        let mut e = Exposition::default();
        let tm_labels = || vec![("host", self.host.clone()), ("tm_id", self.tm_id.clone())];
        for (name, value) in process.values() {
            e.add("taskmanager", name, tm_labels(), value);
        }
        for (id, meters) in &state.meters {
            let Some(labels) = state.labels.get(id) else {
                continue;
            };
            for (name, value) in meters.values() {
                let task_labels = vec![
                    ("host", self.host.clone()),
                    ("job_id", id.job.to_string()),
                    ("job_name", labels.job_name.clone()),
                    ("subtask_index", id.subtask.to_string()),
                    ("task_attempt_num", id.attempt.to_string()),
                    ("task_name", labels.task_name.clone()),
                    ("tm_id", self.tm_id.clone()),
                ];
                e.add("taskmanager_job_task", name, task_labels, value);
            }
        }
        e.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::ids::JobId;

    #[test]
    fn renders_task_metrics_with_flinks_labels() {
        let m = TaskManagerMetrics::new("tm-1".into(), "host-a".into());
        let id = ExecutionId {
            job: JobId(1),
            vertex: 0,
            subtask: 2,
            attempt: 1,
        };
        m.task_deployed(
            id,
            TaskLabels {
                job_name: "sum".into(),
                task_name: "Source: numbers".into(),
            },
        );
        let at = |n| TaskMetrics {
            records_in: n,
            ..TaskMetrics::default()
        };
        m.sample(0, &[(id, at(0))]);
        let text = m.render(2000, &[(id, at(500))]);
        let line = text
            .lines()
            .find(|l| l.starts_with("flink_taskmanager_job_task_numRecordsInPerSecond{"))
            .expect(&text);
        assert_eq!(
            line,
            format!(
                "flink_taskmanager_job_task_numRecordsInPerSecond{{host=\"host-a\",job_id=\"{}\",job_name=\"sum\",subtask_index=\"2\",task_attempt_num=\"1\",task_name=\"Source: numbers\",tm_id=\"tm-1\"}} 250",
                JobId(1)
            )
        );
        assert!(text.contains(
            "flink_taskmanager_Status_Process_Memory_RSS{host=\"host-a\",tm_id=\"tm-1\"}"
        ));
        // An ended task leaves the exposition; one deployed but not yet running keeps its
        // labels for when it runs.
        assert!(!m.render(3000, &[]).contains("job_task"));
        assert!(m.render(4000, &[(id, at(600))]).contains("job_task"));
        m.task_ended(&id);
        assert!(!m.render(5000, &[(id, at(700))]).contains("job_task"));
    }
}
