//! The metric system: Flink's metric names and scopes, counters owned by the code they
//! measure, and meters, gauges and aggregates computed when they are read (never per record).
//! See `docs/metrics.md` for every metric and where it is served.
//!
//! Scopes, as Flink names them: `jobmanager`, `jobmanager.job`, `taskmanager`,
//! `taskmanager.job.task`. The task counters live in the tasks (`network::buffer::IoCounters`),
//! are read by the TaskManager (its Prometheus reporter, its heartbeats) and reach the
//! JobManager with heartbeats, where [`MetricStore`] keeps them for the REST API.

mod aggregate;
mod meter;
mod process;
mod prometheus;
mod reporter;
mod store;
mod task;

pub use aggregate::{Aggregate, Aggregation};
pub use meter::{DEFAULT_WINDOW_MS, MeterView};
pub use process::{
    CpuLoad, ProcessMetrics, parse_stat_cpu_ticks, parse_status, read as read_process,
};
pub use prometheus::{Exposition, Sample, metric_name};
pub use reporter::{PortRange, Render, bind, router};
pub use store::{MetricStore, RETENTION_MS, TaskManagerMetrics};
pub use task::{BackPressureLevel, TASK_METRICS, TaskMeters, TaskMetrics, TimeRatios};

/// Milliseconds since the Unix epoch: the time meters are sampled at.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
