//! Checkpoint statistics for the REST API, with Flink's field names
//! (`CheckpointingStatistics` for `GET /jobs/:id/checkpoints`, `CheckpointConfigInfo` for
//! `GET /jobs/:id/checkpoints/config`), so Flink's web UI and scripts read them unchanged.

use serde::Serialize;

/// How many checkpoints the history keeps (Flink's `web.checkpoints.history` default).
pub const HISTORY_SIZE: usize = 10;

/// A checkpoint's status in the statistics.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CheckpointStatus {
    /// Triggered, waiting for acknowledgements.
    InProgress,
    /// `_metadata` written.
    Completed,
    /// Expired, declined, aborted or not written.
    Failed,
}

/// Flink's `counts`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Restores since the coordinator started.
    pub restored: u64,
    /// Triggered checkpoints and savepoints.
    pub total: u64,
    /// Pending ones.
    pub in_progress: u64,
    /// Completed ones.
    pub completed: u64,
    /// Failed ones.
    pub failed: u64,
}

/// Flink's `StatsSummaryDto`: min, max and mean over all completed checkpoints, percentiles
/// over the most recent [`PERCENTILE_WINDOW`] of them (as Flink's histogram window).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MinMaxAvg {
    /// Smallest value (0 when none).
    pub min: u64,
    /// Largest value.
    pub max: u64,
    /// Mean, rounded down.
    pub avg: u64,
    /// Median (0 when none).
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

// The percentiles come from integers, so they are never NaN and equality is total.
impl Eq for MinMaxAvg {}

/// How many recent values the percentiles are taken over (Flink's histogram window).
pub const PERCENTILE_WINDOW: usize = 10_000;

/// Running min/max/sum over completed checkpoints, and a window of recent values.
#[derive(Clone, Debug, Default)]
pub(crate) struct Summarizer {
    min: u64,
    max: u64,
    sum: u128,
    count: u64,
    recent: std::collections::VecDeque<u64>,
}

/// The `q`-quantile (0 < q < 1) of sorted `values` by the estimate Flink's histograms use
/// (position `q * (n + 1)`, interpolated between neighbours, clamped to the ends).
fn quantile(sorted: &[u64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let pos = q * (n as f64 + 1.0);
    if pos < 1.0 {
        return sorted[0] as f64;
    }
    if pos >= n as f64 {
        return sorted[n - 1] as f64;
    }
    let below = pos.floor();
    let lower = sorted[below as usize - 1] as f64;
    let upper = sorted[below as usize] as f64;
    lower + (pos - below) * (upper - lower)
}

impl Summarizer {
    pub(crate) fn add(&mut self, value: u64) {
        self.min = if self.count == 0 {
            value
        } else {
            self.min.min(value)
        };
        self.max = self.max.max(value);
        self.sum += u128::from(value);
        self.count += 1;
        if self.recent.len() == PERCENTILE_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(value);
    }

    pub(crate) fn view(&self) -> MinMaxAvg {
        let mut sorted: Vec<u64> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        MinMaxAvg {
            p50: quantile(&sorted, 0.5),
            p90: quantile(&sorted, 0.9),
            p95: quantile(&sorted, 0.95),
            p99: quantile(&sorted, 0.99),
            p999: quantile(&sorted, 0.999),
            min: self.min,
            max: self.max,
            avg: if self.count == 0 {
                0
            } else {
                (self.sum / u128::from(self.count)) as u64
            },
        }
    }
}

/// Flink's `summary`, over completed checkpoints and savepoints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Bytes written per checkpoint.
    pub checkpointed_size: MinMaxAvg,
    /// Bytes of the whole state per checkpoint.
    pub state_size: MinMaxAvg,
    /// Trigger to completion, in ms.
    pub end_to_end_duration: MinMaxAvg,
}

/// One checkpoint of the history (Flink's `CheckpointStatistics`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointEntry {
    /// The checkpoint's id.
    pub id: u64,
    /// Its status.
    pub status: CheckpointStatus,
    /// Whether it is a savepoint.
    pub is_savepoint: bool,
    /// `CHECKPOINT` or `SAVEPOINT`.
    pub checkpoint_type: &'static str,
    /// When it was triggered (ms since the epoch).
    pub trigger_timestamp: u64,
    /// When the last acknowledgement arrived (0 if none did).
    pub latest_ack_timestamp: u64,
    /// Bytes written for it so far.
    pub checkpointed_size: u64,
    /// Bytes of state it covers so far.
    pub state_size: u64,
    /// Trigger to the latest acknowledgement (or completion), in ms.
    pub end_to_end_duration: u64,
    /// Subtasks expected to acknowledge.
    pub num_subtasks: u64,
    /// Subtasks that did.
    pub num_acknowledged_subtasks: u64,
    /// Where its `_metadata` is (completed ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_path: Option<String>,
    /// When it failed (failed ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_timestamp: Option<u64>,
    /// Why it failed (failed ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Every expected subtask and its acknowledgement, by vertex and subtask: the per-vertex
    /// details of one checkpoint (`GET /jobs/:id/checkpoints/details/:cid`), left out of the
    /// list as Flink leaves its `tasks` empty there.
    #[serde(skip)]
    pub subtasks: Vec<SubtaskCheckpoint>,
}

/// One subtask's part of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubtaskCheckpoint {
    /// The vertex's index in the job graph.
    pub vertex: u32,
    /// The subtask's index.
    pub subtask: u32,
    /// Its acknowledgement; `None` while (or because) it has not acknowledged.
    pub ack: Option<SubtaskAck>,
}

/// A subtask's acknowledgement of a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubtaskAck {
    /// When the JobManager received it (ms since the epoch).
    pub timestamp: u64,
    /// Bytes the subtask wrote for the checkpoint.
    pub checkpointed_size: u64,
    /// Bytes of the subtask's whole state.
    pub state_size: u64,
}

/// Flink's `latest.restored`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RestoredEntry {
    /// The restored checkpoint's id.
    pub id: u64,
    /// When the restore was planned (ms since the epoch).
    pub restore_timestamp: u64,
    /// Whether it was a savepoint.
    pub is_savepoint: bool,
    /// Its directory.
    pub external_path: String,
}

/// Flink's `latest`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Latest {
    /// The newest completed checkpoint.
    pub completed: Option<CheckpointEntry>,
    /// The newest completed savepoint.
    pub savepoint: Option<CheckpointEntry>,
    /// The newest failed one.
    pub failed: Option<CheckpointEntry>,
    /// The latest restore.
    pub restored: Option<RestoredEntry>,
}

/// `GET /jobs/:id/checkpoints` (Flink's `CheckpointingStatistics`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckpointingStatistics {
    /// Counts.
    pub counts: Counts,
    /// Size and duration summary.
    pub summary: Summary,
    /// The latest of each kind.
    pub latest: Latest,
    /// Most recent first, at most [`HISTORY_SIZE`].
    pub history: Vec<CheckpointEntry>,
}

/// Flink's `externalization`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Externalization {
    /// Whether checkpoints outlive a cancelled job.
    pub enabled: bool,
    /// Whether cancelling deletes them.
    pub delete_on_cancellation: bool,
}

/// `GET /jobs/:id/checkpoints/config` (Flink's `CheckpointConfigInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointConfigInfo {
    /// `exactly_once` or `at_least_once`.
    pub mode: &'static str,
    /// Periodic interval in ms; `i64::MAX` when periodic checkpoints are off, as in Flink.
    pub interval: u64,
    /// Timeout in ms.
    pub timeout: u64,
    /// Minimum pause in ms.
    pub min_pause: u64,
    /// Maximum concurrent checkpoints.
    pub max_concurrent: u32,
    /// Retention after the job ends.
    pub externalization: Externalization,
    /// Where checkpoints go (`FileSystemCheckpointStorage` with a directory).
    pub checkpoint_storage: &'static str,
    /// Unaligned checkpoints (not supported: always false).
    pub unaligned_checkpoints: bool,
    /// Consecutive failures tolerated.
    pub tolerable_failed_checkpoints: u32,
    /// Timeout before an aligned checkpoint turns unaligned (0: never; not supported).
    pub aligned_checkpoint_timeout: u64,
    /// Checkpoints continue after some tasks finished (always, as in Flink 1.15+).
    pub checkpoints_after_tasks_finish: bool,
    /// The changelog state backend (not supported: always false).
    pub state_changelog_enabled: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_has_flinks_percentiles() {
        let mut s = Summarizer::default();
        assert_eq!(s.view(), MinMaxAvg::default());
        for v in 1..=10 {
            s.add(v * 10);
        }
        let view = s.view();
        assert_eq!((view.min, view.max, view.avg), (10, 100, 55));
        // Position 0.5 * 11 = 5.5: halfway between the 5th and 6th value.
        assert_eq!(view.p50, 55.0);
        // Position 0.9 * 11 = 9.9: 90% of the way from the 9th to the 10th.
        assert!((view.p90 - 99.0).abs() < 1e-9, "{}", view.p90);
        // Beyond the last position: the largest value.
        assert_eq!(view.p99, 100.0);
        assert_eq!(view.p999, 100.0);
    }

    #[test]
    fn percentiles_cover_a_bounded_window() {
        let mut s = Summarizer::default();
        for _ in 0..PERCENTILE_WINDOW {
            s.add(1_000);
        }
        for _ in 0..PERCENTILE_WINDOW {
            s.add(1);
        }
        let view = s.view();
        assert_eq!(view.max, 1_000, "max is over every value");
        assert_eq!(view.p999, 1.0, "percentiles only over the recent window");
    }
}
