//! End-to-end latency of stream-sum's shape: a rate-limited generator stamps every record with
//! the wall-clock time it emits it, key_by, a running sum per key that carries the newest
//! stamp, and a sink that puts `now - stamp` into a histogram and writes it at the end. The
//! workload of `sluice-bench latency`, which runs the same job on Apache Flink
//! (`bench/flink/`) and merges the histograms of both engines with [`LatencyHistogram`].

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{JobProgram, Params};
use crate::api::{RuntimeContext, SinkFunction, StreamExecutionEnvironment};
use crate::common::error::TaskError;

pub(crate) struct Latency;

/// A record: key, emission time (ns since the Unix epoch), the generator's global index, and
/// the running sum (1 per record).
type Stamped = (u64, u64, u64, u64);

impl JobProgram for Latency {
    fn name(&self) -> &'static str {
        "latency"
    }
    fn description(&self) -> &'static str {
        "rate-limited generator stamping each record -> key_by -> running sum per key -> a sink writing a histogram of the end-to-end latency (bounded)"
    }
    fn usage(&self) -> &'static str {
        "--output DIR (one JSON histogram per sink subtask, DIR/<subtask from 1>.json) [--rate R (records/s over all sources, at least 1; default 10000)] [--records N (default 12 s at the rate)] [--keys K (default 1000)] [--warmup-ms W (records scheduled in the first W ms are not counted; default 2000)]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let params = Params::parse(args, &["rate", "records", "keys", "warmup-ms", "output"])?;
        let rate = params.number("rate", 10_000)?;
        if rate == 0 {
            return Err("--rate must be at least 1 record/s: latency needs a paced source".into());
        }
        let records = params.number("records", rate.saturating_mul(12))?;
        let keys = params.number("keys", 1000)?;
        if keys == 0 {
            return Err("--keys must be at least 1".into());
        }
        let warmup = warmup_records(rate, params.number("warmup-ms", 2000)?);
        let output = params
            .path("output")?
            .ok_or("--output DIR is required: where the sinks write their histograms")?;
        // Checked against `security.io.allowed-dirs` like the built-in sinks' paths.
        env.uses_file("Latency Sink", &output, true);
        // The generator paces the records (`SourceContext::idle` between them, which also
        // passes the collected records on), and calls this when it emits a record.
        env.generate_bounded(records, rate, move |i| (i % keys, now_nanos(), i, 1))
            .key_by(|r: &Stamped| r.0)
            // The newest record's stamp and index go on with the key's sum.
            .reduce(|a: Stamped, b: Stamped| (a.0, b.1, b.2, a.3 + b.3))
            .name("Keyed Sum")
            .add_sink("Latency Sink", move |ctx| {
                LatencySink::open(&output, ctx, warmup)
            });
        Ok(format!(
            "Latency (rate {rate}/s, {records} records, {keys} keys)"
        ))
    }
}

/// The records the first `warmup_ms` of the schedule hold at `rate` records/s over all sources.
pub fn warmup_records(rate: u64, warmup_ms: u64) -> u64 {
    (rate as u128 * warmup_ms as u128 / 1000).min(u64::MAX as u128) as u64
}

/// The wall clock in nanoseconds since the Unix epoch (the same clock in every process of the
/// machine; a monotonic clock is not comparable across processes).
fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One sink subtask: the latency of every record of index ≥ `warmup`, written as JSON at the end.
struct LatencySink {
    path: PathBuf,
    subtask: u32,
    warmup: u64,
    skipped: u64,
    histogram: LatencyHistogram,
}

impl LatencySink {
    fn open(dir: &std::path::Path, ctx: &RuntimeContext, warmup: u64) -> Result<Self, TaskError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            TaskError::io(
                format!("cannot create output directory {}", dir.display()),
                e,
            )
        })?;
        Ok(LatencySink {
            path: dir.join(format!("{}.json", ctx.subtask_index() + 1)),
            subtask: ctx.subtask_index() + 1,
            warmup,
            skipped: 0,
            histogram: LatencyHistogram::default(),
        })
    }
}

impl SinkFunction<Stamped> for LatencySink {
    fn invoke(&mut self, (_, stamp, index, _): Stamped) -> Result<(), TaskError> {
        let now = now_nanos();
        if index < self.warmup {
            self.skipped += 1;
        } else {
            self.histogram.record(stamp, now);
        }
        Ok(())
    }
    fn invoke_batch(&mut self, batch: &mut Vec<Stamped>) -> Result<(), TaskError> {
        // One clock read per batch would credit the batch's later records with its first
        // one's arrival; the records of one batch did arrive together, so that is their time.
        let now = now_nanos();
        for (_, stamp, index, _) in batch.drain(..) {
            if index < self.warmup {
                self.skipped += 1;
            } else {
                self.histogram.record(stamp, now);
            }
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        let mut doc = self.histogram.to_json();
        doc["subtask"] = json!(self.subtask);
        doc["skipped"] = json!(self.skipped);
        std::fs::write(&self.path, doc.to_string() + "\n")
            .map_err(|e| TaskError::io(format!("cannot write {}", self.path.display()), e))
    }
}

/// Significant bits of a bucket: values below 2^SUB_BITS ns are exact, larger ones fall into
/// buckets 1/2^SUB_BITS (0.8%) of their magnitude wide.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets for every u64.
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) << SUB_BITS;

/// A log-linear histogram of latencies in nanoseconds, with the emission times of the records
/// it counted (their span is the rate the source kept). The bucket of a value is
/// `shift · 2^7 + (v >> shift)` with `shift = max(0, ⌊log2 v⌋ − 7)`, the same in
/// `bench/flink/` (Java), so histograms of both engines merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
    first_stamp: u64,
    last_stamp: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            total: 0,
            min: u64::MAX,
            max: 0,
            first_stamp: u64::MAX,
            last_stamp: 0,
        }
    }
}

/// The bucket of `v`.
fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let shift = 63 - v.leading_zeros() - SUB_BITS;
    ((shift as u64) << SUB_BITS) as usize + (v >> shift) as usize
}

/// The largest value of bucket `i` (what a percentile in it is reported as).
fn bucket_top(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = (i >> SUB_BITS) - 1;
    let sub = i - (shift << SUB_BITS);
    (((sub + 1) as u128) << shift)
        .saturating_sub(1)
        .min(u64::MAX as u128) as u64
}

impl LatencyHistogram {
    /// Counts a record stamped at `stamp` that arrived at `now` (ns since the epoch). A record
    /// from the future (clock steps) counts as 0.
    pub fn record(&mut self, stamp: u64, now: u64) {
        let v = now.saturating_sub(stamp);
        self.counts[bucket(v)] += 1;
        self.total += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.first_stamp = self.first_stamp.min(stamp);
        self.last_stamp = self.last_stamp.max(stamp);
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.first_stamp = self.first_stamp.min(other.first_stamp);
        self.last_stamp = self.last_stamp.max(other.last_stamp);
    }

    /// Records counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest latency, exact (ns).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The latency at quantile `q` (0..=1) in ns: the top of the bucket holding the ⌈q·n⌉-th
    /// smallest value (at most 0.8% above it), never above the exact maximum; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_top(i).min(self.max);
            }
        }
        self.max
    }

    /// The first and the last counted record's emission time (ns since the epoch).
    pub fn stamps(&self) -> (u64, u64) {
        (self.first_stamp, self.last_stamp)
    }

    /// Records per second between the first and the last counted record's emission.
    pub fn emission_rate(&self) -> f64 {
        if self.total < 2 || self.last_stamp <= self.first_stamp {
            return 0.0;
        }
        (self.total - 1) as f64 * 1e9 / (self.last_stamp - self.first_stamp) as f64
    }

    /// `{"count", "min", "max", "first_stamp", "last_stamp", "buckets": [[index, count], ...]}`
    /// (non-empty buckets only).
    pub fn to_json(&self) -> Value {
        let buckets: Vec<[u64; 2]> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| [i as u64, *c])
            .collect();
        json!({
            "count": self.total,
            "min": if self.total == 0 { 0 } else { self.min },
            "max": self.max,
            "first_stamp": if self.total == 0 { 0 } else { self.first_stamp },
            "last_stamp": self.last_stamp,
            "buckets": buckets,
        })
    }

    /// Reads what [`Self::to_json`] (or the Flink job's sink) wrote; the counts must add up.
    pub fn from_json(doc: &Value) -> Result<Self, String> {
        let field = |name: &str| {
            doc[name]
                .as_u64()
                .ok_or_else(|| format!("the histogram has no integer '{name}': {doc}"))
        };
        let mut h = LatencyHistogram {
            total: field("count")?,
            min: field("min")?,
            max: field("max")?,
            first_stamp: field("first_stamp")?,
            last_stamp: field("last_stamp")?,
            ..LatencyHistogram::default()
        };
        let buckets = doc["buckets"]
            .as_array()
            .ok_or_else(|| format!("the histogram has no 'buckets' array: {doc}"))?;
        let mut sum = 0u64;
        for b in buckets {
            let (Some(i), Some(c)) = (b[0].as_u64(), b[1].as_u64()) else {
                return Err(format!("a bucket is not [index, count]: {b}"));
            };
            let slot = h
                .counts
                .get_mut(i as usize)
                .ok_or_else(|| format!("bucket index {i} is beyond the last ({BUCKETS})"))?;
            *slot += c;
            sum += c;
        }
        if sum != h.total {
            return Err(format!(
                "the buckets hold {sum} records, the histogram says {}",
                h.total
            ));
        }
        if h.total == 0 {
            h.min = u64::MAX;
            h.first_stamp = u64::MAX;
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(127), 127);
        assert_eq!(bucket(128), 128);
        assert_eq!(bucket(255), 255);
        assert_eq!(bucket(256), 256);
        assert_eq!(bucket(257), 256);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        for v in [1u64, 127, 128, 1000, 123_456, 99_999_999, 1 << 40, u64::MAX] {
            let top = bucket_top(bucket(v));
            assert!(top >= v, "{v}: top {top}");
            assert!((top - v) as f64 <= v as f64 / 128.0, "{v}: top {top}");
            assert_eq!(bucket(top), bucket(v));
            if top < u64::MAX {
                assert_eq!(bucket(top + 1), bucket(v) + 1, "{v}");
            }
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut h = LatencyHistogram::default();
        // 1..=1000 µs, once each, emitted 1 ms apart.
        for i in 1..=1000u64 {
            h.record(i * 1_000_000, i * 1_000_000 + i * 1000);
        }
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 / 100.0;
        assert!(near(h.quantile(0.5), 500_000), "{}", h.quantile(0.5));
        assert!(near(h.quantile(0.99), 990_000), "{}", h.quantile(0.99));
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert_eq!(h.max(), 1_000_000);
        assert!((h.emission_rate() - 1000.0).abs() < 1e-6);
        assert_eq!(LatencyHistogram::default().quantile(0.5), 0);
    }

    #[test]
    fn json_round_trip_and_merge() {
        let mut a = LatencyHistogram::default();
        let mut b = LatencyHistogram::default();
        for i in 0..100u64 {
            a.record(10, 10 + i * 7919);
            b.record(20, 20 + i * 104_729);
        }
        let back = LatencyHistogram::from_json(&a.to_json()).unwrap();
        assert_eq!(back, a);
        let empty = LatencyHistogram::from_json(&LatencyHistogram::default().to_json()).unwrap();
        assert_eq!(empty, LatencyHistogram::default());
        a.merge(&b);
        assert_eq!(a.count(), 200);
        assert_eq!(a.max(), 99 * 104_729);
        let mut bad = b.to_json();
        bad["count"] = json!(5);
        assert!(
            LatencyHistogram::from_json(&bad)
                .unwrap_err()
                .contains("100")
        );
    }

    #[test]
    fn arguments_are_checked() {
        let env = StreamExecutionEnvironment::new();
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert!(
            Latency
                .build(&env, &args("--rate 0 --output /tmp/x"))
                .unwrap_err()
                .contains("--rate")
        );
        assert!(
            Latency
                .build(&env, &args("--rate 10"))
                .unwrap_err()
                .contains("--output")
        );
        assert_eq!(warmup_records(1_000_000, 2000), 2_000_000);
    }
}
