//! The Kafka source's I/O: a librdkafka consumer per subtask, assigned (not subscribed) the
//! partitions the core (`assign.rs`) gives the subtask, its positions taken into every
//! checkpoint and committed to the consumer group when the checkpoint completes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::assign::{
    Discovery, PendingCommits, Positions, Restored, Start, StartingOffsets, TopicPartition,
    decode_positions, plan,
};
use super::{ConfigError, check_properties};
use crate::api::time::SplitWatermarks;
use crate::api::{
    DataStream, SourceContext, SourceFunction, Stamped, StateDistribution,
    StreamExecutionEnvironment, TaskError, WatermarkStrategy,
};
use crate::network::valve::TimeSignal;
use crate::record::Data;

/// One record as read from Kafka, for the deserializer.
#[derive(Debug)]
pub struct ConsumedRecord<'a> {
    /// The topic it was read from.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its key, if it has one.
    pub key: Option<&'a [u8]>,
    /// Its value (`None` for a tombstone).
    pub value: Option<&'a [u8]>,
    /// Its timestamp in milliseconds since the epoch, if the broker gave one.
    pub timestamp: Option<i64>,
}

/// Turns a consumed record into the stream's type: `Ok(None)` skips it, `Err` fails the task
/// with the message.
type Deserializer<T> = Arc<dyn Fn(&ConsumedRecord<'_>) -> Result<Option<T>, String> + Send + Sync>;

/// What every subtask of the source needs to know.
struct Spec<T> {
    servers: String,
    topics: Vec<String>,
    pattern: Option<regex::Regex>,
    group_id: Option<String>,
    properties: BTreeMap<String, String>,
    starting: StartingOffsets,
    bounded: bool,
    commit_on_checkpoint: bool,
    timeout: Duration,
    /// How often to list the topics for new partitions; `None`: only at the start.
    discovery: Option<Duration>,
    deserializer: Deserializer<T>,
}

/// Flink's default `partition.discovery.interval.ms`: five minutes.
const DEFAULT_DISCOVERY_INTERVAL: Duration = Duration::from_secs(300);
/// The consumer property that sets the discovery interval, as Flink's builder takes it; the
/// connector reads it and does not pass it to librdkafka.
const DISCOVERY_PROPERTY: &str = "partition.discovery.interval.ms";

/// A Kafka source (Flink's `KafkaSource`): reads a list of topics, each partition by exactly
/// one subtask, with the partitions' offsets in checkpoints and savepoints — exactly-once
/// input: a restored job resumes each partition where its checkpoint stood, whatever the
/// starting offsets say. Built with [`KafkaSource::builder`].
pub struct KafkaSource<T> {
    spec: Arc<Spec<T>>,
}

impl<T: Data> KafkaSource<T> {
    /// A builder; bootstrap servers, topics and a value format are required.
    pub fn builder() -> KafkaSourceBuilder<T> {
        KafkaSourceBuilder {
            servers: None,
            topics: Vec::new(),
            pattern: None,
            group_id: None,
            properties: BTreeMap::new(),
            starting: StartingOffsets::Earliest,
            bounded: false,
            commit_on_checkpoint: true,
            timeout: Duration::from_secs(30),
            discovery: Some(DEFAULT_DISCOVERY_INTERVAL),
            deserializer: None,
        }
    }

    /// The source as the first stream of a job on `env` (Flink's `env.fromSource`).
    pub fn stream(&self, env: &StreamExecutionEnvironment) -> DataStream<T> {
        let spec = self.spec.clone();
        env.add_source("Kafka Source", move |_ctx| KafkaReader {
            spec: spec.clone(),
        })
    }

    /// The source as the first stream of a job on `env`, with event time (Flink's
    /// `env.fromSource(source, watermarkStrategy, name)`): a record's timestamp is the Kafka
    /// record's (its create or log-append time), or what the strategy's timestamp assigner makes
    /// of the record and that timestamp. Watermarks are made **per partition**: each partition
    /// a subtask reads has a generator of its own and idles on its own (the strategy's
    /// idleness), and the subtask's watermark is the least of its active partitions', so one
    /// partition that lags behind holds time back instead of making its records late.
    pub fn stream_with_watermarks(
        &self,
        env: &StreamExecutionEnvironment,
        strategy: WatermarkStrategy<T>,
    ) -> DataStream<T> {
        let spec = self.spec.clone();
        env.add_stamped_source("Kafka Source", move |_ctx| StampedKafkaReader {
            reader: KafkaReader { spec: spec.clone() },
            strategy: strategy.clone(),
        })
    }
}

/// Configures a [`KafkaSource`].
pub struct KafkaSourceBuilder<T> {
    servers: Option<String>,
    topics: Vec<String>,
    pattern: Option<String>,
    group_id: Option<String>,
    properties: BTreeMap<String, String>,
    starting: StartingOffsets,
    bounded: bool,
    commit_on_checkpoint: bool,
    timeout: Duration,
    discovery: Option<Duration>,
    deserializer: Option<Deserializer<T>>,
}

impl<T: Data> KafkaSourceBuilder<T> {
    /// The brokers to bootstrap from, `host:port[,host:port...]`.
    pub fn bootstrap_servers(mut self, servers: &str) -> Self {
        self.servers = Some(servers.to_string());
        self
    }

    /// The topics to read (all their partitions).
    pub fn topics<I: IntoIterator<Item = S>, S: Into<String>>(mut self, topics: I) -> Self {
        self.topics.extend(topics.into_iter().map(Into::into));
        self
    }

    /// Read every topic whose whole name matches the regular expression `pattern` (Flink's
    /// `setTopicPattern`), instead of or besides a list. Topics are matched when the job first
    /// starts; internal topics (`__consumer_offsets`, ...) never match.
    pub fn topic_pattern(mut self, pattern: &str) -> Self {
        self.pattern = Some(pattern.to_string());
        self
    }

    /// The consumer group: where offsets are committed when checkpoints complete, and where
    /// [`StartingOffsets::Committed`] reads them. Without one nothing is committed.
    pub fn group_id(mut self, group: &str) -> Self {
        self.group_id = Some(group.to_string());
        self
    }

    /// A librdkafka consumer property, passed through (e.g. `isolation.level`,
    /// `fetch.max.bytes`, security settings).
    pub fn property(mut self, key: &str, value: &str) -> Self {
        self.properties.insert(key.to_string(), value.to_string());
        self
    }

    /// Where partitions start when the job does not restore a checkpoint (default: earliest).
    pub fn starting_offsets(mut self, starting: StartingOffsets) -> Self {
        self.starting = starting;
        self
    }

    /// Bounded mode: each subtask stops at the end offsets its partitions had when it started,
    /// and the job ends once all have (Flink's `setBounded(OffsetsInitializer.latest())`).
    pub fn bounded(mut self) -> Self {
        self.bounded = true;
        self
    }

    /// Whether offsets are committed to the group when a checkpoint completes (default: yes,
    /// when a group is set). They are for monitoring and for `Committed` starts; the source's
    /// own position lives in checkpoints.
    pub fn commit_offsets_on_checkpoint(mut self, commit: bool) -> Self {
        self.commit_on_checkpoint = commit;
        self
    }

    /// How often each subtask lists its topics (or the topics matching its pattern) for new
    /// partitions while it runs (Flink's `partition.discovery.interval.ms`, also accepted as
    /// that property in milliseconds; default five minutes). A new partition is read by its
    /// owner from its earliest offset. `Duration::ZERO` turns periodic discovery off: the
    /// partitions are then those listed when a subtask starts. A bounded source never
    /// discovers (as in Flink).
    pub fn partition_discovery_interval(mut self, interval: Duration) -> Self {
        self.discovery = (!interval.is_zero()).then_some(interval);
        self
    }

    /// How long to wait for metadata and offset look-ups before failing with an error that
    /// names the brokers (default 30 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Records become `f(record)`; `Ok(None)` skips one, `Err` fails the task.
    pub fn deserializer(
        mut self,
        f: impl Fn(&ConsumedRecord<'_>) -> Result<Option<T>, String> + Send + Sync + 'static,
    ) -> Self {
        self.deserializer = Some(Arc::new(f));
        self
    }

    /// Builds the source.
    pub fn build(self) -> Result<KafkaSource<T>, ConfigError> {
        let servers = self
            .servers
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| ConfigError("bootstrap servers are required".into()))?;
        if (self.topics.is_empty() && self.pattern.is_none())
            || self.topics.iter().any(|t| t.is_empty())
        {
            return Err(ConfigError(
                "topics or a topic pattern are required, and topic names are not empty".into(),
            ));
        }
        let pattern = self
            .pattern
            .map(|p| {
                regex::Regex::new(&format!("^(?:{p})$"))
                    .map_err(|e| ConfigError(format!("the topic pattern '{p}' is invalid: {e}")))
            })
            .transpose()?;
        let deserializer = self.deserializer.ok_or_else(|| {
            ConfigError(
                "a value format is required (value_utf8, value_bytes, value_json or deserializer)"
                    .into(),
            )
        })?;
        check_properties(self.properties.keys())?;
        let mut properties = self.properties;
        let mut discovery = self.discovery;
        if let Some(ms) = properties.remove(DISCOVERY_PROPERTY) {
            let ms: i64 = ms.trim().parse().map_err(|_| {
                ConfigError(format!(
                    "the property '{DISCOVERY_PROPERTY}' must be a number of milliseconds, not '{ms}'"
                ))
            })?;
            // As Flink's: zero or a negative interval turns discovery off.
            discovery = (ms > 0).then(|| Duration::from_millis(ms as u64));
        }
        if self.bounded {
            discovery = None;
        }
        let group_id = self
            .group_id
            .or_else(|| properties.get("group.id").cloned());
        if group_id.is_none() && uses_committed(&self.starting) {
            return Err(ConfigError(
                "starting from committed offsets needs a group id".into(),
            ));
        }
        Ok(KafkaSource {
            spec: Arc::new(Spec {
                servers,
                topics: self.topics,
                pattern,
                group_id,
                properties,
                starting: self.starting,
                bounded: self.bounded,
                commit_on_checkpoint: self.commit_on_checkpoint,
                timeout: self.timeout,
                discovery,
                deserializer,
            }),
        })
    }
}

impl KafkaSourceBuilder<Vec<u8>> {
    /// Values as raw bytes (a tombstone is skipped).
    pub fn value_bytes(self) -> Self {
        self.deserializer(|r| Ok(r.value.map(<[u8]>::to_vec)))
    }
}

impl KafkaSourceBuilder<String> {
    /// Values as UTF-8 text; a value that is not UTF-8 fails the task naming its offset (a
    /// tombstone is skipped).
    pub fn value_utf8(self) -> Self {
        self.deserializer(|r| match r.value {
            None => Ok(None),
            Some(v) => String::from_utf8(v.to_vec()).map(Some).map_err(|e| {
                format!(
                    "the value at {}-{} offset {} is not UTF-8: {e}",
                    r.topic, r.partition, r.offset
                )
            }),
        })
    }
}

impl<T: Data + serde::de::DeserializeOwned> KafkaSourceBuilder<T> {
    /// Values as JSON documents of `T`; one that does not parse fails the task naming its
    /// offset (a tombstone is skipped).
    pub fn value_json(self) -> Self {
        self.deserializer(|r| match r.value {
            None => Ok(None),
            Some(v) => serde_json::from_slice(v).map(Some).map_err(|e| {
                format!(
                    "the value at {}-{} offset {} is not the expected JSON: {e}",
                    r.topic, r.partition, r.offset
                )
            }),
        })
    }
}

fn uses_committed(s: &StartingOffsets) -> bool {
    matches!(s, StartingOffsets::Committed { .. })
}

/// One subtask's reader.
struct KafkaReader<T> {
    spec: Arc<Spec<T>>,
}

impl<T> KafkaReader<T> {
    fn consumer(&self) -> Result<BaseConsumer, TaskError> {
        let spec = &self.spec;
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &spec.servers)
            // The source assigns partitions itself and keeps its position in checkpoints.
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            // A checkpointed offset the broker no longer keeps (retention) resumes at the
            // earliest one it does, as Flink's source does; a property may say otherwise.
            .set("auto.offset.reset", "earliest");
        // librdkafka needs a group id for any consumer; one that never commits is harmless.
        config.set(
            "group.id",
            spec.group_id.as_deref().unwrap_or("sluice-kafka-source"),
        );
        for (k, v) in &spec.properties {
            config.set(k, v);
        }
        config.create().map_err(|e| {
            TaskError::Setup(format!(
                "cannot create a Kafka consumer for {}: {e}",
                spec.servers
            ))
        })
    }

    /// Every partition of the source's topics, or an error naming the missing topic or the
    /// unreachable brokers.
    fn discover(&self, consumer: &BaseConsumer) -> Result<Vec<TopicPartition>, TaskError> {
        let spec = &self.spec;
        let mut out = Vec::new();
        if let Some(pattern) = &spec.pattern {
            let metadata = consumer.fetch_metadata(None, spec.timeout).map_err(|e| {
                TaskError::Setup(format!(
                    "cannot reach the Kafka brokers {} to list the topics matching '{}' (waited {:?}): {e}",
                    spec.servers,
                    pattern.as_str(),
                    spec.timeout
                ))
            })?;
            let names: Vec<&str> = metadata.topics().iter().map(|t| t.name()).collect();
            let matched = matching_topics(&names, pattern);
            if matched.is_empty() {
                tracing::warn!(pattern = pattern.as_str(), servers = %spec.servers, "no Kafka topic matches the source's pattern");
            }
            for t in metadata.topics() {
                if matched.contains(&t.name()) && !spec.topics.iter().any(|l| l == t.name()) {
                    out.extend(
                        t.partitions()
                            .iter()
                            .map(|p| TopicPartition::new(t.name(), p.id())),
                    );
                }
            }
        }
        for topic in &spec.topics {
            let metadata = consumer
                .fetch_metadata(Some(topic), spec.timeout)
                .map_err(|e| {
                    TaskError::Setup(format!(
                        "cannot reach the Kafka brokers {} to read topic '{topic}' (waited {:?}): {e}",
                        spec.servers, spec.timeout
                    ))
                })?;
            let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
                return Err(missing_topic(topic, &spec.servers));
            };
            if t.error().is_some() || t.partitions().is_empty() {
                return Err(missing_topic(topic, &spec.servers));
            }
            out.extend(
                t.partitions()
                    .iter()
                    .map(|p| TopicPartition::new(topic.as_str(), p.id())),
            );
        }
        Ok(out)
    }

    /// The concrete offset each planned partition starts at.
    fn resolve(
        &self,
        consumer: &BaseConsumer,
        plan: &BTreeMap<TopicPartition, Start>,
    ) -> Result<BTreeMap<TopicPartition, i64>, TaskError> {
        let mut out = BTreeMap::new();
        for (tp, start) in plan {
            let offset = match start {
                Start::Offset(o) => *o,
                Start::Initial(initial) => self.initial(consumer, tp, initial)?,
            };
            out.insert(tp.clone(), offset);
        }
        Ok(out)
    }

    fn initial(
        &self,
        consumer: &BaseConsumer,
        tp: &TopicPartition,
        initial: &StartingOffsets,
    ) -> Result<i64, TaskError> {
        let spec = &self.spec;
        let failed = |what: &str, e: rdkafka::error::KafkaError| {
            TaskError::Setup(format!(
                "cannot read the {what} of Kafka partition {tp} from {} (waited {:?}): {e}",
                spec.servers, spec.timeout
            ))
        };
        let watermarks = || {
            consumer
                .fetch_watermarks(&tp.topic, tp.partition, spec.timeout)
                .map_err(|e| failed("offsets", e))
        };
        match initial {
            StartingOffsets::Earliest => Ok(watermarks()?.0),
            StartingOffsets::Latest => Ok(watermarks()?.1),
            StartingOffsets::Committed { fallback } => {
                let mut list = TopicPartitionList::new();
                list.add_partition(&tp.topic, tp.partition);
                let committed = consumer
                    .committed_offsets(list, spec.timeout)
                    .map_err(|e| failed("committed offset", e))?;
                match committed
                    .find_partition(&tp.topic, tp.partition)
                    .map(|e| e.offset())
                {
                    Some(Offset::Offset(o)) => Ok(o),
                    _ => self.initial(consumer, tp, fallback),
                }
            }
            StartingOffsets::Timestamp(ms) => {
                let mut list = TopicPartitionList::new();
                list.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(*ms))
                    .map_err(|e| failed("offset for a timestamp", e))?;
                let found = consumer
                    .offsets_for_times(list, spec.timeout)
                    .map_err(|e| failed("offset for a timestamp", e))?;
                match found
                    .find_partition(&tp.topic, tp.partition)
                    .map(|e| e.offset())
                {
                    Some(Offset::Offset(o)) => Ok(o),
                    // No record at or after the timestamp: the end.
                    _ => Ok(watermarks()?.1),
                }
            }
        }
    }

    fn commit(&self, consumer: &BaseConsumer, offsets: &BTreeMap<TopicPartition, i64>) {
        let mut list = TopicPartitionList::new();
        for (tp, offset) in offsets {
            if list
                .add_partition_offset(&tp.topic, tp.partition, Offset::Offset(*offset))
                .is_err()
            {
                return;
            }
        }
        // Asynchronous, as Flink's: a failed commit only delays what monitoring sees.
        if let Err(e) = consumer.commit(&list, CommitMode::Async) {
            tracing::warn!(error = %e, "committing Kafka offsets failed");
        }
    }
}

/// The topics among `names` whose whole name matches `pattern` (anchored when built), without
/// Kafka's internal topics, in name order.
fn matching_topics<'a>(names: &[&'a str], pattern: &regex::Regex) -> Vec<&'a str> {
    let mut out: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !n.starts_with("__") && pattern.is_match(n))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn missing_topic(topic: &str, servers: &str) -> TaskError {
    TaskError::Setup(format!(
        "Kafka topic '{topic}' does not exist on the brokers {servers}"
    ))
}

fn to_task_error(e: rdkafka::error::KafkaError, servers: &str) -> TaskError {
    TaskError::User(format!("reading from Kafka at {servers} failed: {e}"))
}

/// What the reader does with its records and with the time: a plain stream collects the
/// records; a stream with event time stamps them and makes watermarks per partition.
trait Emitter<T, O> {
    /// A deserialized record of `tp` with the Kafka record's timestamp.
    fn record(
        &mut self,
        ctx: &mut SourceContext<'_, O>,
        tp: &TopicPartition,
        value: T,
        timestamp: Option<i64>,
    ) -> Result<(), TaskError>;
    /// The subtask reads `tp` from now on.
    fn partition(&mut self, tp: &TopicPartition);
    /// The clock says `now` (ms).
    fn time(&mut self, ctx: &mut SourceContext<'_, O>, now: i64) -> Result<(), TaskError>;
    /// A bounded read reached its end.
    fn finish(&mut self, ctx: &mut SourceContext<'_, O>) -> Result<(), TaskError>;
}

/// The records as they are.
struct Plain;

impl<T> Emitter<T, T> for Plain {
    fn record(
        &mut self,
        ctx: &mut SourceContext<'_, T>,
        _tp: &TopicPartition,
        value: T,
        _timestamp: Option<i64>,
    ) -> Result<(), TaskError> {
        ctx.collect(value)
    }
    fn partition(&mut self, _tp: &TopicPartition) {}
    fn time(&mut self, _ctx: &mut SourceContext<'_, T>, _now: i64) -> Result<(), TaskError> {
        Ok(())
    }
    fn finish(&mut self, _ctx: &mut SourceContext<'_, T>) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Records with timestamps, and watermarks per partition.
struct PerPartition<T> {
    marks: SplitWatermarks<TopicPartition, T>,
}

impl<T: 'static> PerPartition<T> {
    fn send(
        ctx: &mut SourceContext<'_, Stamped<T>>,
        signals: Vec<TimeSignal>,
    ) -> Result<(), TaskError> {
        for signal in signals {
            ctx.emit_time(signal)?;
        }
        Ok(())
    }
}

impl<T: 'static> Emitter<T, Stamped<T>> for PerPartition<T> {
    fn record(
        &mut self,
        ctx: &mut SourceContext<'_, Stamped<T>>,
        tp: &TopicPartition,
        value: T,
        timestamp: Option<i64>,
    ) -> Result<(), TaskError> {
        let ts = self
            .marks
            .on_event(tp, &value, timestamp.unwrap_or(i64::MIN));
        ctx.collect((ts, value))?;
        // Punctuated watermarks go right after their record.
        let signals = self.marks.take_signals();
        Self::send(ctx, signals)
    }
    fn partition(&mut self, tp: &TopicPartition) {
        self.marks.add_split(tp);
    }
    fn time(&mut self, ctx: &mut SourceContext<'_, Stamped<T>>, now: i64) -> Result<(), TaskError> {
        let signals = self.marks.on_time(now);
        Self::send(ctx, signals)
    }
    fn finish(&mut self, ctx: &mut SourceContext<'_, Stamped<T>>) -> Result<(), TaskError> {
        // The end of a bounded input is the end of its event time.
        ctx.emit_time(TimeSignal::Watermark(i64::MAX))
    }
}

/// A reader whose records carry timestamps ([`KafkaSource::stream_with_watermarks`]).
struct StampedKafkaReader<T> {
    reader: KafkaReader<T>,
    strategy: WatermarkStrategy<T>,
}

impl<T: Data> SourceFunction<Stamped<T>> for StampedKafkaReader<T> {
    fn run(&mut self, ctx: &mut SourceContext<'_, Stamped<T>>) -> Result<(), TaskError> {
        let interval = ctx.runtime().auto_watermark_interval();
        let mut emitter = PerPartition {
            marks: SplitWatermarks::new(self.strategy.clone(), interval),
        };
        self.reader.read(ctx, &mut emitter)
    }
}

impl<T: Data> SourceFunction<T> for KafkaReader<T> {
    fn run(&mut self, ctx: &mut SourceContext<'_, T>) -> Result<(), TaskError> {
        self.read(ctx, &mut Plain)
    }
}

impl<T: Data> KafkaReader<T> {
    /// The subtask's reading, whatever its output.
    fn read<O>(
        &mut self,
        ctx: &mut SourceContext<'_, O>,
        emitter: &mut dyn Emitter<T, O>,
    ) -> Result<(), TaskError> {
        let (index, parallelism) = (ctx.runtime().subtask_index(), ctx.runtime().parallelism());
        // Every subtask of a restore gets every partition's position and keeps those it owns:
        // what partition discovery needs to tell a new partition from one another subtask
        // read (see `Discovery`).
        ctx.use_union_state();
        let restored = ctx
            .restored_state()?
            .map(|elements| decode_positions(&elements))
            .transpose()
            .map_err(|e| TaskError::State(e.to_string()))?;
        let union = ctx.restored_distribution() == Some(StateDistribution::Union);
        let consumer = self.consumer()?;
        let mut discovery_interval = self.spec.discovery;
        let known = match &restored {
            None => self.discover(&consumer)?,
            Some(_) if self.spec.bounded => Vec::new(),
            // Restored, a failed listing is not fatal: the restored partitions are read, and
            // discovery lists again later.
            Some(_) => self.discover(&consumer).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot list the Kafka partitions at the restore; discovery will try again");
                if !union {
                    // A split share knows only its own partitions; without the listing at
                    // the restore, later listings cannot tell which are new.
                    discovery_interval = None;
                }
                Vec::new()
            }),
        };
        let plan = plan(
            &known,
            restored.as_ref().map(|r| {
                if union {
                    Restored::Union(&r.next)
                } else {
                    Restored::Split(&r.next)
                }
            }),
            &self.spec.starting,
            index,
            parallelism,
        );
        let clock = std::time::Instant::now();
        let now_ms = || clock.elapsed().as_millis() as i64;
        let accounted = known
            .iter()
            .cloned()
            .chain(restored.iter().flat_map(|r| r.next.keys().cloned()));
        let mut discovery =
            Discovery::new(accounted, index, parallelism, discovery_interval, now_ms());
        let starts = self.resolve(&consumer, &plan)?;
        let mut positions = Positions::new(&plan);
        for (tp, offset) in &starts {
            positions.resolved(tp, *offset);
        }
        if self.spec.bounded {
            let mut ends = BTreeMap::new();
            for tp in starts.keys() {
                // A restored bounded read keeps the end of its first start.
                if let Some(stop) = restored.as_ref().and_then(|r| r.stops.get(tp)) {
                    ends.insert(tp.clone(), *stop);
                    continue;
                }
                let (_, high) = consumer
                    .fetch_watermarks(&tp.topic, tp.partition, self.spec.timeout)
                    .map_err(|e| {
                        TaskError::Setup(format!(
                            "cannot read the end offset of Kafka partition {tp} from {}: {e}",
                            self.spec.servers
                        ))
                    })?;
                ends.insert(tp.clone(), high);
            }
            positions.bound(ends);
        }
        tracing::info!(
            subtask = index,
            partitions = ?starts,
            bounded = self.spec.bounded,
            "Kafka source assigned"
        );
        let mut assignment = TopicPartitionList::new();
        for (tp, offset) in &starts {
            emitter.partition(tp);
            if !positions.partition_done(tp) {
                assignment
                    .add_partition_offset(&tp.topic, tp.partition, Offset::Offset(*offset))
                    .map_err(|e| to_task_error(e, &self.spec.servers))?;
            }
        }
        consumer
            .incremental_assign(&assignment)
            .map_err(|e| to_task_error(e, &self.spec.servers))?;
        let commit = self.spec.commit_on_checkpoint && self.spec.group_id.is_some();
        let mut commits = PendingCommits::default();
        let deserializer = self.spec.deserializer.clone();
        // Polls since the clock was last read (see `CLOCK_CHECK_POLLS`).
        let mut polls = 0u32;
        loop {
            polls += 1;
            if polls >= CLOCK_CHECK_POLLS {
                polls = 0;
                let now = now_ms();
                emitter.time(ctx, now)?;
                if discovery.due(now) {
                    match self.discover(&consumer) {
                        Ok(listed) => {
                            let new = discovery.listed(&listed, now);
                            for tp in &new {
                                emitter.partition(tp);
                            }
                            self.add_partitions(&consumer, &new, &mut positions)?;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "Kafka partition discovery failed; trying again at the next interval");
                            discovery.failed(now);
                        }
                    }
                }
            }
            if let Some(id) = ctx.take_completed_checkpoint()
                && let Some(offsets) = commits.completed(id).filter(|_| commit)
            {
                self.commit(&consumer, &offsets);
            }
            let pending = ctx.pending_checkpoint_id();
            ctx.snapshot_point(|| {
                if let Some(id) = pending {
                    commits.snapshotted(id, positions.committable());
                }
                positions.snapshot()
            })?;
            if positions.finished() {
                return emitter.finish(ctx);
            }
            // What the client has at hand comes without waiting; before waiting for more, the
            // records collected so far go downstream (a source's batch is passed on when it
            // waits), so a trickle of input is not held for a batch to fill.
            let polled = match consumer.poll(Duration::ZERO) {
                None => {
                    // Waiting for input: a good moment to look at the clock.
                    polls = CLOCK_CHECK_POLLS;
                    ctx.idle(Duration::ZERO)?;
                    consumer.poll(Duration::from_millis(100))
                }
                some => some,
            };
            match polled {
                None => {
                    if self.spec.bounded {
                        // Transaction markers at a partition's end hold no record: the
                        // consumer's position moves past them all the same.
                        if let Ok(now) = consumer.position() {
                            for e in now.elements() {
                                if let Offset::Offset(o) = e.offset() {
                                    positions.resolved(
                                        &TopicPartition::new(e.topic(), e.partition()),
                                        o,
                                    );
                                }
                            }
                        }
                    }
                    ctx.idle(Duration::ZERO)?;
                }
                Some(Err(e)) => {
                    if is_fatal(&e) {
                        return Err(to_task_error(e, &self.spec.servers));
                    }
                    tracing::warn!(error = %e, servers = %self.spec.servers, "Kafka consumer error");
                    ctx.idle(Duration::from_millis(100))?;
                }
                Some(Ok(message)) => {
                    let tp = TopicPartition::new(message.topic(), message.partition());
                    if positions.record(&tp, message.offset()) {
                        let record = ConsumedRecord {
                            topic: message.topic(),
                            partition: message.partition(),
                            offset: message.offset(),
                            key: message.key(),
                            value: message.payload(),
                            timestamp: message.timestamp().to_millis(),
                        };
                        if let Some(value) = deserializer(&record).map_err(TaskError::User)? {
                            emitter.record(ctx, &tp, value, record.timestamp)?;
                        }
                    }
                }
            }
        }
    }
}

/// Records polled between two looks at the clock, for periodic watermarks and partition
/// discovery (an empty poll looks at once): reading it on every record would cost more than
/// the checks are worth.
const CLOCK_CHECK_POLLS: u32 = 64;

impl<T> KafkaReader<T> {
    /// Starts reading the partitions discovery found, each from its earliest offset. Their
    /// position is unknown until a record arrives, so a checkpoint before that does not hold
    /// them, and a restore finds them new again: read from the earliest offset once more,
    /// which is where nothing had been read from.
    fn add_partitions(
        &self,
        consumer: &BaseConsumer,
        new: &[TopicPartition],
        positions: &mut Positions,
    ) -> Result<(), TaskError> {
        if new.is_empty() {
            return Ok(());
        }
        let mut list = TopicPartitionList::new();
        for tp in new {
            positions.add(tp);
            list.add_partition_offset(&tp.topic, tp.partition, Offset::Beginning)
                .map_err(|e| to_task_error(e, &self.spec.servers))?;
        }
        consumer
            .incremental_assign(&list)
            .map_err(|e| to_task_error(e, &self.spec.servers))?;
        tracing::info!(partitions = ?new, "Kafka source discovered new partitions");
        Ok(())
    }
}

/// Errors after which the consumer cannot go on (librdkafka retries transport errors itself).
fn is_fatal(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    matches!(
        e.rdkafka_error_code(),
        Some(
            C::UnknownTopicOrPartition
                | C::UnknownTopic
                | C::UnknownPartition
                | C::TopicAuthorizationFailed
                | C::GroupAuthorizationFailed
                | C::OffsetOutOfRange
                | C::Fatal
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_whole_names_and_never_internal_topics() {
        let source = KafkaSource::<String>::builder()
            .bootstrap_servers("127.0.0.1:1")
            .topic_pattern("orders-.*|audit")
            .value_utf8()
            .build()
            .unwrap();
        let pattern = source.spec.pattern.as_ref().unwrap();
        let names = [
            "orders-eu",
            "audit",
            "audit-old",
            "x-orders-us",
            "__consumer_offsets",
            "orders-us",
        ];
        assert_eq!(
            matching_topics(&names, pattern),
            ["audit", "orders-eu", "orders-us"]
        );
        let err = KafkaSource::<String>::builder()
            .bootstrap_servers("127.0.0.1:1")
            .topic_pattern("(unclosed")
            .value_utf8()
            .build()
            .err()
            .unwrap();
        assert!(err.to_string().contains("(unclosed"), "{err}");
    }

    #[test]
    fn builders_name_what_is_missing_or_refused() {
        let err = |b: KafkaSourceBuilder<String>| b.build().err().unwrap().to_string();
        let base = || KafkaSource::<String>::builder().bootstrap_servers("h:1");
        assert!(err(base().value_utf8()).contains("topic"));
        assert!(err(base().topics(["t"])).contains("value format"));
        assert!(
            err(KafkaSource::<String>::builder().topics(["t"]).value_utf8()).contains("bootstrap")
        );
        assert!(
            err(base()
                .topics(["t"])
                .value_utf8()
                .property("enable.auto.commit", "true"))
            .contains("enable.auto.commit")
        );
        assert!(
            err(base()
                .topics(["t"])
                .value_utf8()
                .starting_offsets(StartingOffsets::Committed {
                    fallback: Box::new(StartingOffsets::Earliest)
                }))
            .contains("group id")
        );
    }
}
