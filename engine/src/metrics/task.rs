//! The task scope (`taskmanager.job.task`): the I/O counters a subtask keeps, and the meters
//! and gauges derived from them when they are read.

use serde::{Deserialize, Serialize};

use super::meter::MeterView;

/// A subtask's counters as the TaskManager reads them (and reports them with heartbeats). The
/// counters are kept by the task itself, counted per buffer, never per record.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TaskMetrics {
    /// Records read from inputs.
    pub records_in: u64,
    /// Bytes read from inputs.
    pub bytes_in: u64,
    /// Records written to outputs.
    pub records_out: u64,
    /// Bytes written to outputs.
    pub bytes_out: u64,
    /// Milliseconds spent blocked on full outputs.
    pub back_pressured_ms: u64,
    /// Milliseconds spent waiting for input (an operator waiting for a buffer, a source
    /// pausing between records).
    #[serde(default)]
    pub idle_ms: u64,
    /// Milliseconds since the task started processing, less the idle and back-pressured time
    /// (Flink's definition of busy time).
    #[serde(default)]
    pub busy_ms: u64,
    /// Buffers of the task's output pools in use, in per mille of what the pools may hold
    /// (Flink's `outPoolUsage` × 1000); absent from a TaskManager that does not measure it.
    #[serde(default)]
    pub out_pool_usage_permille: u32,
    /// Buffers queued in the task's input channels, in per mille of what the channels may
    /// hold (their credits; Flink's `inPoolUsage` × 1000): near 1000 when the task cannot keep
    /// up with its input, near 0 when it waits for input.
    #[serde(default)]
    pub in_pool_usage_permille: u32,
    /// Buffers queued in the task's input channels (Flink's `inputQueueLength`).
    #[serde(default)]
    pub input_queue_length: u32,
    /// The task's input watermark (Flink's `currentInputWatermark`; `i64::MIN` before the
    /// first).
    #[serde(default = "no_watermark")]
    pub current_input_watermark: i64,
    /// The last watermark the task sent downstream (`currentOutputWatermark`).
    #[serde(default = "no_watermark")]
    pub current_output_watermark: i64,
    /// Records the task's window operators dropped because they came too late for every
    /// window, allowed lateness included, and had no late-data side output (Flink's
    /// `numLateRecordsDropped`).
    #[serde(default)]
    pub late_records_dropped: u64,
    /// Bytes of the subtask's state in its latest snapshot (a checkpoint or savepoint it
    /// acknowledged): keyed state at its full size, files shared with earlier checkpoints
    /// included, plus operator state; 0 before the first (`stateSize`).
    #[serde(default)]
    pub state_size: u64,
}

fn no_watermark() -> i64 {
    i64::MIN
}

impl Default for TaskMetrics {
    fn default() -> Self {
        TaskMetrics {
            records_in: 0,
            bytes_in: 0,
            records_out: 0,
            bytes_out: 0,
            back_pressured_ms: 0,
            idle_ms: 0,
            busy_ms: 0,
            out_pool_usage_permille: 0,
            in_pool_usage_permille: 0,
            input_queue_length: 0,
            current_input_watermark: no_watermark(),
            current_output_watermark: no_watermark(),
            late_records_dropped: 0,
            state_size: 0,
        }
    }
}

/// Flink's names of the task metrics sluice measures, in the order they are listed.
pub const TASK_METRICS: [&str; 21] = [
    "numRecordsIn",
    "numRecordsOut",
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "numBytesIn",
    "numBytesOut",
    "numBytesInPerSecond",
    "numBytesOutPerSecond",
    "busyTimeMsPerSecond",
    "idleTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "accumulatedBusyTime",
    "accumulatedIdleTime",
    "accumulatedBackPressuredTime",
    "outPoolUsage",
    "inPoolUsage",
    "inputQueueLength",
    "currentInputWatermark",
    "currentOutputWatermark",
    "numLateRecordsDropped",
    "stateSize",
];

/// The meters of one subtask: its counters sampled over time.
#[derive(Debug, Clone, Default)]
pub struct TaskMeters {
    records_in: MeterView,
    records_out: MeterView,
    bytes_in: MeterView,
    bytes_out: MeterView,
    busy: MeterView,
    idle: MeterView,
    back_pressured: MeterView,
    latest: TaskMetrics,
}

impl TaskMeters {
    /// Samples the subtask's counters, read at `now_ms`.
    pub fn update(&mut self, now_ms: u64, m: &TaskMetrics) {
        self.records_in.update(now_ms, m.records_in);
        self.records_out.update(now_ms, m.records_out);
        self.bytes_in.update(now_ms, m.bytes_in);
        self.bytes_out.update(now_ms, m.bytes_out);
        self.busy.update(now_ms, m.busy_ms);
        self.idle.update(now_ms, m.idle_ms);
        self.back_pressured.update(now_ms, m.back_pressured_ms);
        self.latest = m.clone();
    }

    /// The counters last sampled.
    pub fn latest(&self) -> &TaskMetrics {
        &self.latest
    }

    /// Milliseconds per second spent busy, idle and back-pressured over the window (each at
    /// most 1000: the three are parts of the task's time).
    pub fn time_ratios(&self) -> TimeRatios {
        let per_second = |m: &MeterView| m.rate().clamp(0.0, 1000.0);
        TimeRatios {
            busy_ms_per_second: per_second(&self.busy),
            idle_ms_per_second: per_second(&self.idle),
            back_pressured_ms_per_second: per_second(&self.back_pressured),
        }
    }

    /// Every metric of [`TASK_METRICS`] with its value, in that order.
    pub fn values(&self) -> Vec<(&'static str, f64)> {
        let m = &self.latest;
        let t = self.time_ratios();
        let values = [
            m.records_in as f64,
            m.records_out as f64,
            self.records_in.rate(),
            self.records_out.rate(),
            m.bytes_in as f64,
            m.bytes_out as f64,
            self.bytes_in.rate(),
            self.bytes_out.rate(),
            t.busy_ms_per_second,
            t.idle_ms_per_second,
            t.back_pressured_ms_per_second,
            m.busy_ms as f64,
            m.idle_ms as f64,
            m.back_pressured_ms as f64,
            m.out_pool_usage_permille as f64 / 1000.0,
            m.in_pool_usage_permille as f64 / 1000.0,
            m.input_queue_length as f64,
            m.current_input_watermark as f64,
            m.current_output_watermark as f64,
            m.late_records_dropped as f64,
            m.state_size as f64,
        ];
        TASK_METRICS.into_iter().zip(values).collect()
    }
}

/// How a subtask spent its time, in ms per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeRatios {
    /// `busyTimeMsPerSecond`.
    pub busy_ms_per_second: f64,
    /// `idleTimeMsPerSecond`.
    pub idle_ms_per_second: f64,
    /// `backPressuredTimeMsPerSecond`.
    pub back_pressured_ms_per_second: f64,
}

/// Flink's back pressure levels of the REST API (`JobVertexBackPressureInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BackPressureLevel {
    /// At most 10 % of the time back-pressured.
    Ok,
    /// At most 50 %.
    Low,
    /// More.
    High,
}

impl BackPressureLevel {
    /// The level of a back-pressured ratio (0..=1), with Flink's thresholds 0.1 and 0.5.
    pub fn of(ratio: f64) -> Self {
        if ratio <= 0.10 {
            BackPressureLevel::Ok
        } else if ratio <= 0.50 {
            BackPressureLevel::Low
        } else {
            BackPressureLevel::High
        }
    }

    /// Flink's JSON name.
    pub fn name(self) -> &'static str {
        match self {
            BackPressureLevel::Ok => "ok",
            BackPressureLevel::Low => "low",
            BackPressureLevel::High => "high",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(records: u64, busy: u64, idle: u64, bp: u64) -> TaskMetrics {
        TaskMetrics {
            records_in: records,
            records_out: records * 2,
            bytes_in: records * 8,
            busy_ms: busy,
            idle_ms: idle,
            back_pressured_ms: bp,
            ..TaskMetrics::default()
        }
    }

    #[test]
    fn rates_and_time_ratios_come_from_the_samples() {
        let mut m = TaskMeters::default();
        // Over 10 s: 1000 records/s, busy 600 ms/s, idle 100 ms/s, back-pressured 300 ms/s.
        for s in 0..=10u64 {
            m.update(s * 1000, &at(s * 1000, s * 600, s * 100, s * 300));
        }
        let v: std::collections::HashMap<_, _> = m.values().into_iter().collect();
        assert_eq!(v["numRecordsIn"], 10_000.0);
        assert!((v["numRecordsInPerSecond"] - 1000.0).abs() < 1e-9);
        assert!((v["numRecordsOutPerSecond"] - 2000.0).abs() < 1e-9);
        assert!((v["numBytesInPerSecond"] - 8000.0).abs() < 1e-9);
        assert!((v["busyTimeMsPerSecond"] - 600.0).abs() < 1e-9);
        assert!((v["idleTimeMsPerSecond"] - 100.0).abs() < 1e-9);
        assert!((v["backPressuredTimeMsPerSecond"] - 300.0).abs() < 1e-9);
        assert_eq!(v.len(), TASK_METRICS.len());
    }

    #[test]
    fn time_per_second_never_exceeds_a_second() {
        let mut m = TaskMeters::default();
        m.update(0, &at(0, 0, 0, 0));
        // Counters read a moment late can show more than the wall time between two samples.
        m.update(1000, &at(0, 1100, 0, 0));
        assert_eq!(m.time_ratios().busy_ms_per_second, 1000.0);
    }

    #[test]
    fn back_pressure_levels_use_flinks_thresholds() {
        assert_eq!(BackPressureLevel::of(0.0), BackPressureLevel::Ok);
        assert_eq!(BackPressureLevel::of(0.10), BackPressureLevel::Ok);
        assert_eq!(BackPressureLevel::of(0.11), BackPressureLevel::Low);
        assert_eq!(BackPressureLevel::of(0.5), BackPressureLevel::Low);
        assert_eq!(BackPressureLevel::of(0.51), BackPressureLevel::High);
        assert_eq!(BackPressureLevel::High.name(), "high");
    }
}
