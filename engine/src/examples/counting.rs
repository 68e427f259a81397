//! `counting`: the workload that proves (or disproves) exactly-once results.
//!
//! The sources together emit every integer `0..N-1` once; `key_by(seq % K)` sends each to an
//! operator that counts, per key, how many records it has seen (this one included) and emits
//! `seq key count`; the sink writes one such line per record. Exactly-once output means: every
//! seq appears in exactly one line, and for each key the counts are exactly `1, 2, ..., n_key`.
//! `sluice check-counting` verifies that and says what is missing or duplicated.
//!
//! With `--window-ms W` each seq is also its event time in ms, and per key and tumbling
//! event-time window of `W` ms the job writes one line `start key n sum` instead: the
//! window's start, its key, how many seqs it holds and their sum. Exactly-once output then
//! means one line per key and window with exactly the window's seqs: a lost or replayed record
//! changes `n` or `sum`, a window fired twice shows as two lines.
//!
//! With `--input PATH` the seqs are the lines of a text file or directory (a local path or an
//! `hdfs://` URI; `--rate` then limits each reading subtask), and `--output` may name an
//! `hdfs://` directory too: the exactly-once file sink commits there by renames.
//!
//! With `--input-topic` the seqs come from a Kafka topic (each record's value is a seq) instead
//! of the generator, and with `--output-topic` the lines go to a Kafka topic (keyed by the key)
//! instead of a directory, at least or exactly once: Kafka → counting → Kafka.

use std::collections::BTreeMap;
use std::path::Path;

use super::kafka_wordcount::{SINK_OPTIONS, sink_options};
use super::{JobProgram, Params};
use std::time::Duration;

use crate::api::{
    AggregateFunction, Collector, Context, DataStream, KeyedProcessFunction, ProcessContext,
    ProcessFunction, StreamExecutionEnvironment, TaskError, TimeWindow, TumblingEventTimeWindows,
    WatermarkStrategy,
};
use crate::connectors::kafka::{KafkaSink, KafkaSource, ProducedRecord};
use crate::state::{StateStorage, ValueState};

pub(crate) struct Counting;

impl JobProgram for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn description(&self) -> &'static str {
        "emits 0..N-1 once, counts per key (seq % K) and writes 'seq key count' lines; check the output with `sluice check-counting`"
    }
    fn usage(&self) -> &'static str {
        "--records N --keys K --output DIR (a local path or hdfs:// URI) [--rate R (records/s over all sources; default unlimited)] [--input PATH (seqs as lines of a text file or directory, local or hdfs://, instead of the generator; --rate is then per reading subtask)] [--window-ms W (per key and event-time window of W ms: 'start key n sum' lines)] | Kafka instead of the generator or the directory: [--bootstrap-servers HOST:PORT (default 127.0.0.1:9092)] [--input-topic T (seqs as UTF-8 values, instead of --records/--rate)] [--output-topic T (instead of --output)] [--delivery-guarantee at-least-once|exactly-once] [--transactional-id-prefix P (default counting-OUTPUT)] [--transaction-timeout-ms MS]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let mut known = vec![
            "records",
            "keys",
            "output",
            "rate",
            "bootstrap-servers",
            "input-topic",
            "input",
            "output-topic",
            "window-ms",
        ];
        known.extend(SINK_OPTIONS);
        let params = Params::parse(args, &known)?;
        let keys = params.number("keys", 0)?;
        if keys == 0 {
            return Err("--keys K (at least 1) is required".into());
        }
        let servers = params.get("bootstrap-servers").unwrap_or("127.0.0.1:9092");
        let (seqs, input) = match (params.get("input-topic"), params.storage_path("input")?) {
            (None, Some(path)) => {
                let rate = params.number("rate", 0)?;
                let seqs = env
                    .read_text_file(path.clone())
                    .process(Throttle::new(rate))
                    .map(move |line: String| {
                        // A line that is no seq becomes u64::MAX, which check-counting calls
                        // malformed.
                        let seq = line.trim().parse::<u64>().unwrap_or(u64::MAX);
                        (seq, seq % keys)
                    });
                (seqs, format!("text input {path}"))
            }
            (Some(topic), _) => {
                let source = KafkaSource::<String>::builder()
                    .bootstrap_servers(servers)
                    .topics([topic])
                    .group_id(&format!("counting-{topic}"))
                    .value_utf8()
                    .build()
                    .map_err(|e| e.to_string())?;
                // A value that is no seq becomes u64::MAX, which check-counting calls malformed.
                let seqs = source.stream(env).map(move |v: String| {
                    let seq = v.trim().parse::<u64>().unwrap_or(u64::MAX);
                    (seq, seq % keys)
                });
                (seqs, format!("Kafka topic {topic}"))
            }
            (None, None) => {
                let records = params
                    .get("records")
                    .ok_or("--records (or --input-topic) is required")?
                    .parse::<u64>()
                    .map_err(|_| "--records needs a number")?;
                let rate = params.number("rate", 0)?;
                let seqs = env
                    .generate_bounded(records, rate, move |seq| (seq, seq % keys))
                    .name("Sequence Source");
                (seqs, format!("{records} records"))
            }
        };
        let window = params.number("window-ms", 0)?;
        if window > 0 {
            let lines = count_windows(&seqs, window);
            let output = write_lines(&params, servers, &lines)?;
            return Ok(format!(
                "Counting ({input}, {keys} keys, windows of {window} ms) -> {output}"
            ));
        }
        let lines = seqs
            .key_by(|r: &(u64, u64)| r.1)
            .process(|state| {
                Ok(CountPerKey {
                    count: state.value_state("count")?,
                })
            })
            .name("Count per Key");
        let output = write_lines(&params, servers, &lines)?;
        Ok(format!("Counting ({input}, {keys} keys) -> {output}"))
    }
}

/// Per key and tumbling window of `window` ms of event time (a seq's time is the seq):
/// `(start, key, n, sum)`. Each source subtask emits its seqs in order, so their times only
/// grow.
fn count_windows(seqs: &DataStream<(u64, u64)>, window: u64) -> DataStream<(u64, u64, u64, u64)> {
    seqs.assign_timestamps_and_watermarks(
        WatermarkStrategy::for_monotonous_timestamps()
            .with_timestamp_assigner(|r: &(u64, u64), _| r.0.min(i64::MAX as u64) as i64),
    )
    .key_by(|r: &(u64, u64)| r.1)
    .window(TumblingEventTimeWindows::of(Duration::from_millis(window)))
    .aggregate_with(
        CountAndSum,
        |key: &u64, window: TimeWindow, (n, sum): (u64, u64)| (window.start as u64, *key, n, sum),
    )
    .name("Count per Key and Window")
}

/// How many seqs a window holds, and their sum.
struct CountAndSum;

impl AggregateFunction<(u64, u64), (u64, u64), (u64, u64)> for CountAndSum {
    fn create_accumulator(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add(&self, (seq, _): (u64, u64), (n, sum): (u64, u64)) -> (u64, u64) {
        (n + 1, sum.wrapping_add(seq))
    }
    fn get_result(&self, acc: (u64, u64)) -> (u64, u64) {
        acc
    }
    fn merge(&self, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
        (a.0 + b.0, a.1.wrapping_add(b.1))
    }
}

/// Writes `seq key count` lines (or a window's `start key n sum`) to the output directory or
/// topic; names it.
fn write_lines<L: Line>(
    params: &Params,
    servers: &str,
    lines: &DataStream<L>,
) -> Result<String, String> {
    if let Some(topic) = params.get("output-topic") {
        let sink = KafkaSink::<L>::builder()
            .bootstrap_servers(servers)
            .topic(topic)
            .serializer(|line: &L| ProducedRecord {
                topic: None,
                key: Some(line.key().to_string().into_bytes()),
                value: line.text().into_bytes(),
            });
        let sink = sink_options(params, &format!("counting-{topic}"), sink)?
            .build()
            .map_err(|e| e.to_string())?;
        sink.write(lines);
        return Ok(format!("Kafka topic {topic}"));
    }
    let output = match params.storage_path("output")? {
        Some(dir) => dir,
        None => return Err("--output DIR (or --output-topic) is required".into()),
    };
    lines
        .map(|line: L| line.text())
        .sink_to_directory(output.clone());
    Ok(output)
}

/// A line of `counting`'s output: its key and its text.
trait Line: crate::record::Data {
    fn key(&self) -> u64;
    fn text(&self) -> String;
}

/// `seq key count`.
impl Line for (u64, u64, u64) {
    fn key(&self) -> u64 {
        self.1
    }
    fn text(&self) -> String {
        format!("{} {} {}", self.0, self.1, self.2)
    }
}

/// A window's `start key n sum`.
impl Line for (u64, u64, u64, u64) {
    fn key(&self) -> u64 {
        self.1
    }
    fn text(&self) -> String {
        format!("{} {} {} {}", self.0, self.1, self.2, self.3)
    }
}

/// Passes records on at most `rate` per second per subtask (0: unlimited), so that a job over a
/// small input runs long enough to be checkpointed and failed while it runs.
#[derive(Clone)]
struct Throttle {
    rate: u64,
    started: Option<std::time::Instant>,
    passed: u64,
}

impl Throttle {
    fn new(rate: u64) -> Self {
        Throttle {
            rate,
            started: None,
            passed: 0,
        }
    }
}

impl<T: 'static> ProcessFunction<T, T> for Throttle {
    fn process_element(
        &mut self,
        value: T,
        _ctx: &mut ProcessContext<'_>,
        out: &mut Collector<'_, T>,
    ) -> Result<(), TaskError> {
        if self.rate > 0 {
            let started = *self.started.get_or_insert_with(std::time::Instant::now);
            let due = Duration::from_secs_f64(self.passed as f64 / self.rate as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
            self.passed += 1;
        }
        out.collect(value)
    }
}

/// Counts the records of each key in keyed state and emits `(seq, key, count)`: `counting`'s
/// stateful step, for other programs that count the same way.
pub struct CountPerKey {
    count: ValueState<u64>,
}

impl CountPerKey {
    /// Counting in `count` (the key's value state).
    pub fn new(count: ValueState<u64>) -> Self {
        CountPerKey { count }
    }
}

impl KeyedProcessFunction<u64, (u64, u64), (u64, u64, u64)> for CountPerKey {
    fn process(
        &mut self,
        key: &u64,
        (seq, _): (u64, u64),
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, (u64, u64, u64)>,
    ) -> Result<(), TaskError> {
        let count = self.count.value()?.unwrap_or(0) + 1;
        self.count.update(count)?;
        out.collect((seq, *key, count))
    }
}

/// What `check-counting` found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CountingReport {
    /// Lines read.
    pub lines: u64,
    /// Seqs in `0..N` that no line has.
    pub missing: Vec<u64>,
    /// Seqs that appear in more than one line, with how often.
    pub duplicated: Vec<(u64, u64)>,
    /// Lines that do not parse, or whose key is not `seq % K`, or whose seq is not below N.
    pub malformed: Vec<String>,
    /// Keys whose counts are not exactly `1..=n_key`: (key, what is wrong).
    pub bad_counts: Vec<(u64, String)>,
}

impl CountingReport {
    /// Whether the output is exactly once.
    pub fn is_exactly_once(&self) -> bool {
        self.missing.is_empty()
            && self.duplicated.is_empty()
            && self.malformed.is_empty()
            && self.bad_counts.is_empty()
    }
}

impl std::fmt::Display for CountingReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn some<T: std::fmt::Debug>(items: &[T]) -> String {
            let shown: Vec<String> = items.iter().take(10).map(|i| format!("{i:?}")).collect();
            let more = if items.len() > 10 {
                format!(" and {} more", items.len() - 10)
            } else {
                String::new()
            };
            format!("{}{more}", shown.join(", "))
        }
        if self.is_exactly_once() {
            return writeln!(
                f,
                "OK: {} lines, every record counted exactly once",
                self.lines
            );
        }
        writeln!(f, "NOT exactly once ({} lines read)", self.lines)?;
        if !self.missing.is_empty() {
            writeln!(
                f,
                "missing {} records: {}",
                self.missing.len(),
                some(&self.missing)
            )?;
        }
        if !self.duplicated.is_empty() {
            writeln!(
                f,
                "duplicated {} records (seq, times): {}",
                self.duplicated.len(),
                some(&self.duplicated)
            )?;
        }
        if !self.malformed.is_empty() {
            writeln!(
                f,
                "malformed {} lines: {}",
                self.malformed.len(),
                some(&self.malformed)
            )?;
        }
        if !self.bad_counts.is_empty() {
            writeln!(
                f,
                "wrong counts for {} keys: {}",
                self.bad_counts.len(),
                some(&self.bad_counts)
            )?;
        }
        Ok(())
    }
}

/// Checks `counting`'s output lines against `records` and `keys`.
pub fn check_counting<'a>(
    records: u64,
    keys: u64,
    lines: impl IntoIterator<Item = &'a str>,
) -> CountingReport {
    let mut report = CountingReport::default();
    let mut seen = vec![0u32; records as usize];
    let mut counts: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for line in lines {
        report.lines += 1;
        let parts: Vec<Option<u64>> = line.split_whitespace().map(|p| p.parse().ok()).collect();
        let [Some(seq), Some(key), Some(count)] = parts[..] else {
            report.malformed.push(line.to_string());
            continue;
        };
        if seq >= records || keys == 0 || key != seq % keys {
            report.malformed.push(line.to_string());
            continue;
        }
        seen[seq as usize] += 1;
        counts.entry(key).or_default().push(count);
    }
    for (seq, times) in seen.iter().enumerate() {
        match times {
            0 => report.missing.push(seq as u64),
            1 => {}
            n => report.duplicated.push((seq as u64, *n as u64)),
        }
    }
    for key in 0..keys.min(records) {
        let expected = records / keys + u64::from(key < records % keys);
        let mut got = counts.remove(&key).unwrap_or_default();
        got.sort_unstable();
        if got.len() as u64 != expected || got.iter().enumerate().any(|(i, c)| *c != i as u64 + 1) {
            let first_bad = got
                .iter()
                .enumerate()
                .find(|(i, c)| **c != *i as u64 + 1)
                .map(|(i, c)| format!(", at position {} found {c}", i + 1));
            report.bad_counts.push((
                key,
                format!(
                    "{} counts for {expected} records{}",
                    got.len(),
                    first_bad.unwrap_or_default()
                ),
            ));
        }
    }
    report
}

/// Checks the lines of `counting --window-ms window` against `records` and `keys`: one line
/// per key and window, holding exactly its seqs. A window without a line has its seqs
/// missing; a window with two, its seqs duplicated; a line with other counts or sums is a
/// wrong count for its key.
pub fn check_windowed_counting<'a>(
    records: u64,
    keys: u64,
    window: u64,
    lines: impl IntoIterator<Item = &'a str>,
) -> CountingReport {
    let mut report = CountingReport::default();
    if keys == 0 || window == 0 {
        report.malformed.push("no keys or no window length".into());
        return report;
    }
    // (start, key) -> (n, sum) of the seqs of the window.
    let mut expected: BTreeMap<(u64, u64), (u64, u64)> = BTreeMap::new();
    for seq in 0..records {
        let w = expected
            .entry((seq - seq % window, seq % keys))
            .or_default();
        *w = (w.0 + 1, w.1.wrapping_add(seq));
    }
    let mut got: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
    for line in lines {
        report.lines += 1;
        let parts: Vec<Option<u64>> = line.split_whitespace().map(|p| p.parse().ok()).collect();
        match parts[..] {
            [Some(start), Some(key), Some(n), Some(sum)]
                if expected.contains_key(&(start, key)) =>
            {
                got.entry((start, key)).or_default().push((n, sum));
            }
            _ => report.malformed.push(line.to_string()),
        }
    }
    for ((start, key), (n, sum)) in expected {
        let seqs = (start..(start + window).min(records)).filter(|s| s % keys == key);
        match got.remove(&(start, key)).as_deref() {
            None => report.missing.extend(seqs),
            Some([one]) if *one == (n, sum) => {}
            Some([(got_n, got_sum)]) => report.bad_counts.push((
                key,
                format!(
                    "window {start}: {got_n} records summing to {got_sum}, expected {n} summing to {sum}"
                ),
            )),
            Some(many) => report
                .duplicated
                .extend(seqs.map(|seq| (seq, many.len() as u64))),
        }
    }
    report
}

/// Reads the visible files of an output directory (hidden `.`-files are in progress or
/// pending; only committed files count) and checks them: `counting`'s lines, or with `window`
/// those of `counting --window-ms window`. The directory may be an `hdfs://` URI, read with the
/// Hadoop configuration of the environment (`HADOOP_CONF_DIR`).
pub fn check_counting_dir(
    records: u64,
    keys: u64,
    window: Option<u64>,
    dir: &Path,
) -> std::io::Result<CountingReport> {
    let text = match dir
        .to_str()
        .filter(|d| crate::config::HdfsUri::parse(d).is_some())
    {
        Some(uri) => read_visible_files(&crate::state::FileSystems::new(), uri)?,
        None => read_visible_local_files(dir)?,
    };
    Ok(match window {
        Some(window) => check_windowed_counting(records, keys, window, text.lines()),
        None => check_counting(records, keys, text.lines()),
    })
}

/// The visible files of a local directory, concatenated in name order, each ending in a newline.
fn read_visible_local_files(dir: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if entry.file_name().to_string_lossy().starts_with('.') || !entry.file_type()?.is_file() {
            continue;
        }
        push_file(&mut text, &std::fs::read_to_string(entry.path())?);
    }
    Ok(text)
}

/// The visible files of a directory on `storage`, concatenated in name order, each ending in a
/// newline.
fn read_visible_files(storage: &dyn StateStorage, dir: &str) -> std::io::Result<String> {
    let mut text = String::new();
    for name in storage.list(dir)? {
        let path = format!("{}/{name}", dir.trim_end_matches('/'));
        if name.starts_with('.') || storage.status(&path)?.is_none_or(|info| info.is_dir) {
            continue;
        }
        let bytes = storage.read(&path)?;
        let content = String::from_utf8(bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{path} is not UTF-8: {e}"),
            )
        })?;
        push_file(&mut text, &content);
    }
    Ok(text)
}

/// Appends one file's content to `text`, ending it with a newline.
fn push_file(text: &mut String, content: &str) {
    text.push_str(content);
    if !text.ends_with('\n') && !text.is_empty() {
        text.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perfect(records: u64, keys: u64) -> Vec<String> {
        let mut per_key = vec![0u64; keys as usize];
        (0..records)
            .map(|seq| {
                let key = seq % keys;
                per_key[key as usize] += 1;
                format!("{seq} {key} {}", per_key[key as usize])
            })
            .collect()
    }

    #[test]
    fn exact_output_passes_and_every_defect_is_named() {
        let lines = perfect(100, 7);
        let report = check_counting(100, 7, lines.iter().map(String::as_str));
        assert!(report.is_exactly_once(), "{report}");

        let mut dup = lines.clone();
        dup.push(lines[10].clone());
        let r = check_counting(100, 7, dup.iter().map(String::as_str));
        assert_eq!(r.duplicated, vec![(10, 2)]);
        assert!(
            !r.bad_counts.is_empty(),
            "a duplicate also breaks its key's counts"
        );

        let missing: Vec<&str> = lines
            .iter()
            .map(String::as_str)
            .filter(|l| !l.starts_with("42 "))
            .collect();
        let r = check_counting(100, 7, missing);
        assert_eq!(r.missing, vec![42]);
        assert!(r.to_string().contains("missing 1 records: 42"), "{r}");

        let r = check_counting(100, 7, ["1 2 1", "garbage", "5 5"]);
        assert_eq!(r.malformed.len(), 3);
    }

    #[test]
    fn windowed_output_is_checked_window_by_window() {
        // 10 seqs, 2 keys, windows of 4: [0, 4) [4, 8) [8, 10).
        let exact = [
            "0 0 2 2", "0 1 2 4", "4 0 2 10", "4 1 2 12", "8 0 1 8", "8 1 1 9",
        ];
        let r = check_windowed_counting(10, 2, 4, exact);
        assert!(r.is_exactly_once(), "{r}");
        let r =
            check_windowed_counting(10, 2, 4, exact.iter().copied().filter(|l| *l != "4 1 2 12"));
        assert_eq!(r.missing, vec![5, 7], "{r}");
        let twice = exact.iter().copied().chain(["8 1 1 9"]);
        assert_eq!(
            check_windowed_counting(10, 2, 4, twice).duplicated,
            vec![(9, 2)]
        );
        let short = exact.map(|l| if l == "0 1 2 4" { "0 1 1 3" } else { l });
        let r = check_windowed_counting(10, 2, 4, short);
        assert_eq!(r.bad_counts.len(), 1, "{r}");
        assert!(
            r.to_string()
                .contains("window 0: 1 records summing to 3, expected 2 summing to 4"),
            "{r}"
        );
        let r = check_windowed_counting(10, 2, 4, ["1 0 2 2", "0 0 2"]);
        assert_eq!(r.malformed.len(), 2, "{r}");
    }

    #[test]
    fn a_replayed_count_is_caught_even_if_seqs_are_unique() {
        // Records reprocessed after a restart without restored state: seqs once, counts restart at 1.
        let lines = ["0 0 1", "2 0 1", "1 1 1"];
        let r = check_counting(3, 2, lines);
        assert!(r.missing.is_empty() && r.duplicated.is_empty());
        assert_eq!(r.bad_counts.len(), 1, "{r}");
    }
}
