//! The Kafka sink's I/O: a librdkafka producer per subtask. At least once: every checkpoint
//! barrier waits until the broker acknowledged all records sent before it, so a checkpoint never
//! covers a record that could still be lost. Exactly once: the records of a checkpoint interval
//! wait in the checkpointed write-ahead log (`txn.rs`) and are written in one transaction when
//! the checkpoint completes, with a marker in a consumer group that makes recovery exact.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::util::Timeout;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::txn::{self, IntervalId, OutRecord, Pending, Recovery, WriteAhead};
use super::{ConfigError, check_properties};
use crate::api::{DataStream, RuntimeContext, SinkFunction, TaskError};
use crate::record::Data;

/// What the sink writes for one stream record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducedRecord {
    /// The topic; `None` means the sink's fixed topic.
    pub topic: Option<String>,
    /// The key (Kafka's default partitioner hashes it to pick the partition).
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
}

type Serializer<T> = Arc<dyn Fn(&T) -> ProducedRecord + Send + Sync>;

struct Spec<T> {
    servers: String,
    topic: Option<String>,
    properties: BTreeMap<String, String>,
    serializer: Serializer<T>,
    guarantee: DeliveryGuarantee,
    transactional_id_prefix: Option<String>,
}

/// What the sink promises about records reaching Kafka (Flink's `DeliveryGuarantee`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeliveryGuarantee {
    /// Every checkpoint barrier waits for the broker's acknowledgements: nothing is lost, a
    /// failure may write the records since the last checkpoint again.
    #[default]
    AtLeastOnce,
    /// A `read_committed` consumer sees every record once: the records of a checkpoint
    /// interval are written in one transaction after the checkpoint completed. Needs
    /// checkpointing, a fixed topic and a transactional id prefix.
    ExactlyOnce,
}

impl std::str::FromStr for DeliveryGuarantee {
    type Err = ConfigError;
    /// `at-least-once` or `exactly-once` (Flink's names, any case, `_` for `-`).
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "at-least-once" => Ok(DeliveryGuarantee::AtLeastOnce),
            "exactly-once" => Ok(DeliveryGuarantee::ExactlyOnce),
            _ => Err(ConfigError(format!(
                "the delivery guarantee is at-least-once or exactly-once, not '{s}'"
            ))),
        }
    }
}

/// A Kafka sink (Flink's `KafkaSink`): records go to a fixed topic or to one per record, keys
/// and values serialized from the stream's type, at least once or exactly once
/// ([`DeliveryGuarantee`]). Built with [`KafkaSink::builder`].
pub struct KafkaSink<T> {
    spec: Arc<Spec<T>>,
}

impl<T: Data> KafkaSink<T> {
    /// A builder; bootstrap servers and a serializer are required.
    pub fn builder() -> KafkaSinkBuilder<T> {
        KafkaSinkBuilder {
            servers: None,
            topic: None,
            properties: BTreeMap::new(),
            serializer: None,
            guarantee: DeliveryGuarantee::AtLeastOnce,
            transactional_id_prefix: None,
        }
    }

    /// Writes `stream` to Kafka (Flink's `stream.sinkTo(sink)`).
    pub fn write(&self, stream: &DataStream<T>) -> DataStream<()> {
        let spec = self.spec.clone();
        stream.add_sink("Kafka Sink", move |ctx| match spec.guarantee {
            DeliveryGuarantee::AtLeastOnce => {
                KafkaWriter::open(spec.clone(), ctx).map(Writer::AtLeastOnce)
            }
            DeliveryGuarantee::ExactlyOnce => {
                TransactionalWriter::open(spec.clone(), ctx).map(Writer::ExactlyOnce)
            }
        })
    }
}

/// Configures a [`KafkaSink`].
pub struct KafkaSinkBuilder<T> {
    servers: Option<String>,
    topic: Option<String>,
    properties: BTreeMap<String, String>,
    serializer: Option<Serializer<T>>,
    guarantee: DeliveryGuarantee,
    transactional_id_prefix: Option<String>,
}

impl<T: Data> KafkaSinkBuilder<T> {
    /// The brokers to bootstrap from, `host:port[,host:port...]`.
    pub fn bootstrap_servers(mut self, servers: &str) -> Self {
        self.servers = Some(servers.to_string());
        self
    }

    /// The topic records go to unless the serializer names one.
    pub fn topic(mut self, topic: &str) -> Self {
        self.topic = Some(topic.to_string());
        self
    }

    /// A librdkafka producer property, passed through (e.g. `compression.type`, `linger.ms`,
    /// `message.timeout.ms`).
    pub fn property(mut self, key: &str, value: &str) -> Self {
        self.properties.insert(key.to_string(), value.to_string());
        self
    }

    /// Each record becomes `f(record)`: topic (or the fixed one), key and value.
    pub fn serializer(mut self, f: impl Fn(&T) -> ProducedRecord + Send + Sync + 'static) -> Self {
        self.serializer = Some(Arc::new(f));
        self
    }

    /// Each record becomes a keyless value `f(record)` on the fixed topic.
    pub fn value(self, f: impl Fn(&T) -> Vec<u8> + Send + Sync + 'static) -> Self {
        self.serializer(move |r| ProducedRecord {
            topic: None,
            key: None,
            value: f(r),
        })
    }

    /// At least once (the default) or exactly once (Flink's `setDeliveryGuarantee`).
    pub fn delivery_guarantee(mut self, guarantee: DeliveryGuarantee) -> Self {
        self.guarantee = guarantee;
        self
    }

    /// Exactly once: subtask `i` uses the transactional id and consumer group `PREFIX-i`
    /// (Flink's `setTransactionalIdPrefix`). Unique per job writing to the same cluster: two
    /// jobs with one prefix fence each other.
    pub fn transactional_id_prefix(mut self, prefix: &str) -> Self {
        self.transactional_id_prefix = Some(prefix.to_string());
        self
    }

    /// Builds the sink.
    pub fn build(self) -> Result<KafkaSink<T>, ConfigError> {
        let servers = self
            .servers
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| ConfigError("bootstrap servers are required".into()))?;
        let serializer = self
            .serializer
            .ok_or_else(|| ConfigError("a serializer is required (value or serializer)".into()))?;
        check_properties(self.properties.keys())?;
        if self.topic.as_deref() == Some("") {
            return Err(ConfigError("the topic name is empty".into()));
        }
        let prefix = self
            .transactional_id_prefix
            .filter(|p| !p.trim().is_empty());
        if self.guarantee == DeliveryGuarantee::ExactlyOnce {
            if prefix.is_none() {
                return Err(ConfigError(
                    "exactly-once needs a transactional id prefix (transactional_id_prefix)".into(),
                ));
            }
            if self.topic.is_none() {
                return Err(ConfigError(
                    "exactly-once needs a fixed topic (topic): its partition 0 keeps the commit markers"
                        .into(),
                ));
            }
            if let Some(v) = self.properties.get("transaction.timeout.ms")
                && v.parse::<u64>().is_err()
            {
                return Err(ConfigError(format!(
                    "transaction.timeout.ms is a number of milliseconds, not '{v}'"
                )));
            }
        }
        Ok(KafkaSink {
            spec: Arc::new(Spec {
                servers,
                topic: self.topic,
                properties: self.properties,
                serializer,
                guarantee: self.guarantee,
                transactional_id_prefix: prefix,
            }),
        })
    }
}

/// Keeps the first delivery failure until the task looks at it.
#[derive(Default)]
struct Deliveries {
    failed: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, message)) = result {
            use rdkafka::message::Message;
            let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            failed.get_or_insert_with(|| {
                format!(
                    "Kafka did not accept a record for topic '{}': {e}",
                    message.topic()
                )
            });
        }
    }
}

/// One subtask's writer.
struct KafkaWriter<T> {
    spec: Arc<Spec<T>>,
    producer: BaseProducer<Deliveries>,
    since_poll: u32,
}

impl<T> KafkaWriter<T> {
    fn open(spec: Arc<Spec<T>>, _ctx: &RuntimeContext) -> Result<Self, TaskError> {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &spec.servers);
        for (k, v) in &spec.properties {
            config.set(k, v);
        }
        let producer = config
            .create_with_context(Deliveries::default())
            .map_err(|e| {
                TaskError::Setup(format!(
                    "cannot create a Kafka producer for {}: {e}",
                    spec.servers
                ))
            })?;
        Ok(KafkaWriter {
            spec,
            producer,
            since_poll: 0,
        })
    }

    /// Fails the task with the first delivery failure, if any.
    fn check(&self) -> Result<(), TaskError> {
        let failed = self
            .producer
            .context()
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match failed {
            Some(message) => Err(TaskError::User(format!(
                "{message} (brokers {})",
                self.spec.servers
            ))),
            None => Ok(()),
        }
    }

    /// Waits until the broker acknowledged (or refused) every record sent so far.
    fn flush(&self) -> Result<(), TaskError> {
        self.producer.flush(Timeout::Never).map_err(|e| {
            TaskError::User(format!(
                "cannot flush records to Kafka at {}: {e}",
                self.spec.servers
            ))
        })?;
        self.check()
    }
}

impl<T: Data> SinkFunction<T> for KafkaWriter<T> {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        let out = (self.spec.serializer)(&record);
        let topic = resolve_topic(&self.spec, &out)?;
        send(
            &self.producer,
            topic,
            out.key.as_deref(),
            &out.value,
            &self.spec.servers,
        )?;
        self.since_poll += 1;
        if self.since_poll >= 1024 {
            self.since_poll = 0;
            self.producer.poll(Duration::ZERO);
            self.check()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), TaskError> {
        self.flush()
    }

    /// At least once: nothing sent before the barrier may be lost once the checkpoint holds.
    fn snapshot_state(&mut self, _checkpoint_id: u64) -> Result<Vec<Vec<u8>>, TaskError> {
        self.flush()?;
        Ok(Vec::new())
    }
}

/// The record's topic: the serializer's or the sink's fixed one.
fn resolve_topic<'a, T>(spec: &'a Spec<T>, out: &'a ProducedRecord) -> Result<&'a str, TaskError> {
    out.topic
        .as_deref()
        .or(spec.topic.as_deref())
        .ok_or_else(|| {
            TaskError::User(
                "the Kafka sink has no fixed topic and the serializer named none".into(),
            )
        })
}

/// Hands one record to librdkafka, waiting (and serving deliveries) while its queue is full.
fn send(
    producer: &BaseProducer<Deliveries>,
    topic: &str,
    key: Option<&[u8]>,
    value: &[u8],
    servers: &str,
) -> Result<(), TaskError> {
    let mut base = BaseRecord::to(topic).payload(value);
    if let Some(key) = key {
        base = base.key(key);
    }
    loop {
        match producer.send(base) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                // Backpressure from librdkafka's queue: serve deliveries, then retry.
                base = back;
                producer.poll(Duration::from_millis(50));
                if let Some(message) = producer
                    .context()
                    .failed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                {
                    return Err(TaskError::User(format!("{message} (brokers {servers})")));
                }
            }
            Err((e, _)) => {
                return Err(TaskError::User(format!(
                    "cannot send a record to Kafka topic '{topic}' at {servers}: {e}"
                )));
            }
        }
    }
}

/// The sink's writer for either guarantee.
enum Writer<T> {
    AtLeastOnce(KafkaWriter<T>),
    ExactlyOnce(TransactionalWriter<T>),
}

impl<T: Data> SinkFunction<T> for Writer<T> {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        match self {
            Writer::AtLeastOnce(w) => w.invoke(record),
            Writer::ExactlyOnce(w) => w.invoke(record),
        }
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        match self {
            Writer::AtLeastOnce(w) => w.finish(),
            Writer::ExactlyOnce(w) => w.finish(),
        }
    }
    fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<Vec<Vec<u8>>, TaskError> {
        match self {
            Writer::AtLeastOnce(w) => w.snapshot_state(checkpoint_id),
            Writer::ExactlyOnce(w) => w.snapshot_state(checkpoint_id),
        }
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        match self {
            Writer::AtLeastOnce(w) => w.checkpoint_complete(checkpoint_id),
            Writer::ExactlyOnce(w) => w.checkpoint_complete(checkpoint_id),
        }
    }
}

/// librdkafka's default `transaction.timeout.ms`.
const DEFAULT_TRANSACTION_TIMEOUT_MS: u64 = 60_000;

/// How long one transactional call (init, send offsets, commit) may take before the task fails.
const TRANSACTION_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the check at start may wait for the broker's config before it gives up (the first
/// transaction checks again).
const CONFIG_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// The transactional producer of one origin subtask and the consumer group its markers go to.
struct Transactor {
    /// `PREFIX-origin`: the transactional id and the consumer group.
    name: String,
    producer: BaseProducer<Deliveries>,
    /// A consumer of the group that is never assigned anything: it reads the group's marker
    /// (`read_committed`, so a marker of an unfinished transaction is waited for) and provides
    /// the group metadata for `send_offsets_to_transaction`.
    group: BaseConsumer,
}

impl Transactor {
    /// Creates the producer of `PREFIX-origin` and initializes its transactions, which fences
    /// an earlier producer with that id and aborts its open transaction.
    fn open<T>(spec: &Spec<T>, origin: u32) -> Result<Self, TaskError> {
        let prefix = spec.transactional_id_prefix.as_deref().unwrap_or_default();
        let name = format!("{prefix}-{origin}");
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &spec.servers);
        for (k, v) in &spec.properties {
            config.set(k, v);
        }
        config.set("transactional.id", &name);
        let producer: BaseProducer<Deliveries> = config
            .create_with_context(Deliveries::default())
            .map_err(|e| {
                TaskError::Setup(format!(
                    "cannot create a transactional Kafka producer for {}: {e}",
                    spec.servers
                ))
            })?;
        if let Err(e) = producer.init_transactions(TRANSACTION_CALL_TIMEOUT) {
            if e.rdkafka_error_code() == Some(RDKafkaErrorCode::InvalidTransactionTimeout) {
                return Err(TaskError::User(timeout_too_large(spec)));
            }
            return Err(TaskError::User(format!(
                "cannot initialize Kafka transactions of '{name}' at {}: {e}",
                spec.servers
            )));
        }
        let group: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &spec.servers)
            .set("group.id", &name)
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .create()
            .map_err(|e| {
                TaskError::Setup(format!(
                    "cannot create a Kafka consumer for group '{name}' at {}: {e}",
                    spec.servers
                ))
            })?;
        Ok(Transactor {
            name,
            producer,
            group,
        })
    }

    /// The marker the group holds on `topic`'s partition 0, if any.
    fn marker(&self, topic: &str, servers: &str) -> Result<Option<IntervalId>, TaskError> {
        let mut list = TopicPartitionList::new();
        list.add_partition(topic, 0);
        let got = self
            .group
            .committed_offsets(list, TRANSACTION_CALL_TIMEOUT)
            .map_err(|e| {
                TaskError::User(format!(
                    "cannot read the commit marker of consumer group '{}' at {servers}: {e}",
                    self.name
                ))
            })?;
        Ok(got
            .find_partition(topic, 0)
            .and_then(|e| IntervalId::parse_marker(e.metadata())))
    }

    /// Writes `records` and the marker in one transaction and commits it.
    fn write<'a>(
        &self,
        records: impl Iterator<Item = &'a OutRecord>,
        marker_topic: &str,
        marker: IntervalId,
        servers: &str,
    ) -> Result<(), TaskError> {
        let fail = |what: &str, e: KafkaError| {
            TaskError::User(format!(
                "Kafka transaction of '{}' at {servers}: cannot {what}: {e}",
                self.name
            ))
        };
        self.producer
            .begin_transaction()
            .map_err(|e| fail("begin", e))?;
        let mut n = 0u32;
        for r in records {
            send(
                &self.producer,
                &r.topic,
                r.key.as_deref(),
                &r.value,
                servers,
            )?;
            n = n.wrapping_add(1);
            if n.is_multiple_of(1024) {
                self.producer.poll(Duration::ZERO);
            }
        }
        let mut offsets = TopicPartitionList::new();
        let mut element = offsets.add_partition(marker_topic, 0);
        element
            .set_offset(Offset::Offset(marker.checkpoint as i64))
            .map_err(|e| fail("set the marker offset", e))?;
        element.set_metadata(marker.marker());
        let metadata = self.group.group_metadata().ok_or_else(|| {
            TaskError::State(format!(
                "no group metadata for consumer group '{}'",
                self.name
            ))
        })?;
        self.producer
            .send_offsets_to_transaction(&offsets, &metadata, TRANSACTION_CALL_TIMEOUT)
            .map_err(|e| fail("add the commit marker", e))?;
        if let Err(e) = self.producer.commit_transaction(TRANSACTION_CALL_TIMEOUT) {
            // The restored subtask's marker check decides whether it took effect.
            let _ = self.producer.abort_transaction(TRANSACTION_CALL_TIMEOUT);
            return Err(fail("commit", e));
        }
        let failed = self
            .producer
            .context()
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match failed {
            // Not reached after a successful commit, kept as a guard.
            Some(message) => Err(TaskError::User(format!("{message} (brokers {servers})"))),
            None => Ok(()),
        }
    }
}

/// The error for a `transaction.timeout.ms` the broker refuses, naming both values.
fn timeout_too_large<T>(spec: &Spec<T>) -> String {
    let ours = configured_transaction_timeout(spec);
    let max = broker_transaction_max_timeout(&spec.servers)
        .map(|m| m.to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    format!(
        "the Kafka sink's transaction.timeout.ms={ours} is larger than the broker's transaction.max.timeout.ms={max} (brokers {}): lower the sink's property or raise the broker's setting",
        spec.servers
    )
}

fn configured_transaction_timeout<T>(spec: &Spec<T>) -> u64 {
    spec.properties
        .get("transaction.timeout.ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_TRANSACTION_TIMEOUT_MS)
}

/// The broker's `transaction.max.timeout.ms` (of the first broker the metadata lists).
fn broker_transaction_max_timeout(servers: &str) -> Result<u64, String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .create()
        .map_err(|e| e.to_string())?;
    let metadata = admin
        .inner()
        .fetch_metadata(None, CONFIG_CHECK_TIMEOUT)
        .map_err(|e| format!("cannot reach the brokers: {e}"))?;
    let broker = metadata
        .brokers()
        .first()
        .map(|b| b.id())
        .ok_or("the metadata lists no broker")?;
    let resource = ResourceSpecifier::Broker(broker);
    let options = AdminOptions::new().request_timeout(Some(CONFIG_CHECK_TIMEOUT));
    // rdkafka's admin calls are futures driven by librdkafka's threads; wait for this one on a
    // thread of its own, outside any runtime the task may be in.
    let results = std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(admin.describe_configs([&resource], &options))
                .map_err(|e| e.to_string())
        })
        .join()
        .map_err(|_| "the config lookup panicked".to_string())?
    })?;
    let config = results
        .into_iter()
        .next()
        .ok_or("no answer for the broker's config")?
        .map_err(|e| format!("describing broker {broker}'s config: {e}"))?;
    config
        .get("transaction.max.timeout.ms")
        .and_then(|e| e.value.as_deref())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("broker {broker} reports no transaction.max.timeout.ms"))
}

/// One subtask's exactly-once writer: records go to the write-ahead log; a completed
/// checkpoint writes its intervals in one transaction.
struct TransactionalWriter<T> {
    spec: Arc<Spec<T>>,
    origin: u32,
    log: WriteAhead,
    /// Created at the first commit (or at the recovery of this subtask's own intervals), after
    /// every subtask has recovered what it restored: a rescaled subtask recovering another
    /// origin's intervals uses that origin's transactional id for a moment.
    transactor: Option<Transactor>,
    marker_topic: String,
}

impl<T> TransactionalWriter<T> {
    fn open(spec: Arc<Spec<T>>, ctx: &RuntimeContext) -> Result<Self, TaskError> {
        if !ctx.state.checkpointing {
            return Err(TaskError::Setup(
                "the exactly-once Kafka sink commits when checkpoints complete: enable checkpointing (execution.checkpointing.interval)"
                    .into(),
            ));
        }
        let marker_topic = spec.topic.clone().unwrap_or_default();
        // The check at start: the broker refuses a larger timeout only at the first
        // transaction, possibly long after the job started.
        let ours = configured_transaction_timeout(&spec);
        match broker_transaction_max_timeout(&spec.servers) {
            Ok(max) if ours > max => return Err(TaskError::User(timeout_too_large(&spec))),
            Ok(_) => {}
            Err(e) => tracing::warn!(
                servers = %spec.servers,
                error = %e,
                "cannot read the broker's transaction.max.timeout.ms; checked at the first transaction"
            ),
        }
        let origin = ctx.subtask_index();
        let mut writer = TransactionalWriter {
            log: WriteAhead::new(origin, rand::random()),
            origin,
            transactor: None,
            marker_topic,
            spec,
        };
        for element in ctx.restored_operator_state()?.unwrap_or_default() {
            let pending = txn::decode(&element).map_err(|e| TaskError::State(e.to_string()))?;
            writer.recover(&pending)?;
        }
        Ok(writer)
    }

    /// Commits what a restored origin had not committed, exactly once.
    fn recover(&mut self, pending: &Pending) -> Result<(), TaskError> {
        let own = pending.origin == self.origin;
        let transactor = match (own, self.transactor.take()) {
            (true, Some(t)) => t,
            _ => Transactor::open(&self.spec, pending.origin)?,
        };
        let marker = transactor.marker(&self.marker_topic, &self.spec.servers)?;
        let from = match txn::recover(pending, marker) {
            Recovery::Done => None,
            Recovery::WriteFrom(i) => Some(i),
            Recovery::MarkerLost => {
                tracing::warn!(
                    group = %transactor.name,
                    last_committed = ?pending.last_committed,
                    "the Kafka sink's commit marker is gone from its consumer group (the broker expired the group's offsets after offsets.retention.minutes): the restored intervals are written again and those that had committed appear twice"
                );
                Some(0)
            }
        };
        let mut last = marker;
        if let Some(from) = from {
            let intervals = &pending.intervals[from..];
            let newest = intervals[intervals.len() - 1].id;
            tracing::info!(
                transactional_id = %transactor.name,
                intervals = intervals.len(),
                records = intervals.iter().map(|i| i.records.len()).sum::<usize>(),
                "the Kafka sink commits the restored checkpoint's intervals"
            );
            transactor.write(
                intervals.iter().flat_map(|i| &i.records),
                &self.marker_topic,
                newest,
                &self.spec.servers,
            )?;
            last = Some(newest);
        }
        if own {
            if let Some(last) = last {
                self.log.recovered(last);
            }
            self.transactor = Some(transactor);
        }
        Ok(())
    }
}

impl<T: Data> SinkFunction<T> for TransactionalWriter<T> {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        let out = (self.spec.serializer)(&record);
        let topic = resolve_topic(&self.spec, &out)?.to_string();
        self.log.add(OutRecord {
            topic,
            key: out.key,
            value: out.value,
        });
        Ok(())
    }

    /// The task takes a final checkpoint after its input ended; its completion commits.
    fn finish(&mut self) -> Result<(), TaskError> {
        Ok(())
    }

    /// Pre-commit: the interval is sealed and, with the ones not committed yet, becomes the
    /// checkpoint's state.
    fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<Vec<Vec<u8>>, TaskError> {
        Ok(self.log.snapshot(checkpoint_id))
    }

    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        let Some((intervals, marker)) = self.log.to_commit(checkpoint_id) else {
            return Ok(());
        };
        if self.transactor.is_none() {
            self.transactor = Some(Transactor::open(&self.spec, self.origin)?);
        }
        let Some(transactor) = &self.transactor else {
            return Err(TaskError::State("no transactional producer".into()));
        };
        transactor.write(
            intervals.iter().flat_map(|i| &i.records),
            &self.marker_topic,
            marker,
            &self.spec.servers,
        )?;
        self.log.committed(marker);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> KafkaSinkBuilder<String> {
        KafkaSink::<String>::builder()
            .bootstrap_servers("127.0.0.1:9092")
            .value(|s: &String| s.as_bytes().to_vec())
    }

    fn error(b: KafkaSinkBuilder<String>) -> String {
        match b.build() {
            Ok(_) => panic!("built"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn delivery_guarantees_parse_by_flinks_names() {
        assert_eq!(
            "exactly-once".parse::<DeliveryGuarantee>(),
            Ok(DeliveryGuarantee::ExactlyOnce)
        );
        assert_eq!(
            "AT_LEAST_ONCE".parse::<DeliveryGuarantee>(),
            Ok(DeliveryGuarantee::AtLeastOnce)
        );
        let e = "twice".parse::<DeliveryGuarantee>().unwrap_err();
        assert!(e.to_string().contains("'twice'"), "{e}");
    }

    #[test]
    fn exactly_once_needs_a_prefix_a_fixed_topic_and_a_numeric_timeout() {
        let eo = || builder().delivery_guarantee(DeliveryGuarantee::ExactlyOnce);
        assert!(error(eo().topic("out")).contains("transactional id prefix"));
        assert!(error(eo().transactional_id_prefix("job")).contains("fixed topic"));
        let bad_timeout = eo()
            .topic("out")
            .transactional_id_prefix("job")
            .property("transaction.timeout.ms", "1 min");
        assert!(error(bad_timeout).contains("'1 min'"));
        assert!(
            eo().topic("out")
                .transactional_id_prefix("job")
                .property("transaction.timeout.ms", "30000")
                .build()
                .is_ok()
        );
        // At least once needs neither.
        assert!(builder().build().is_ok());
        // The connector sets the transactional id itself.
        let own_id = eo()
            .topic("out")
            .transactional_id_prefix("job")
            .property("transactional.id", "x");
        assert!(error(own_id).contains("transactional.id"));
    }
}
