//! The Kafka sink's I/O: a librdkafka producer per subtask. At least once: every checkpoint
//! barrier waits until the broker acknowledged all records sent before it, so a checkpoint never
//! covers a record that could still be lost.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::util::Timeout;

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
}

/// A Kafka sink (Flink's `KafkaSink` with `DeliveryGuarantee.AT_LEAST_ONCE`): records go to a
/// fixed topic or to one per record, keys and values serialized from the stream's type. Built
/// with [`KafkaSink::builder`].
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
        }
    }

    /// Writes `stream` to Kafka (Flink's `stream.sinkTo(sink)`).
    pub fn write(&self, stream: &DataStream<T>) -> DataStream<()> {
        let spec = self.spec.clone();
        stream.add_sink("Kafka Sink", move |ctx| {
            KafkaWriter::open(spec.clone(), ctx)
        })
    }
}

/// Configures a [`KafkaSink`].
pub struct KafkaSinkBuilder<T> {
    servers: Option<String>,
    topic: Option<String>,
    properties: BTreeMap<String, String>,
    serializer: Option<Serializer<T>>,
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
        Ok(KafkaSink {
            spec: Arc::new(Spec {
                servers,
                topic: self.topic,
                properties: self.properties,
                serializer,
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
        let Some(topic) = out.topic.as_deref().or(self.spec.topic.as_deref()) else {
            return Err(TaskError::User(
                "the Kafka sink has no fixed topic and the serializer named none".into(),
            ));
        };
        let mut base = BaseRecord::to(topic).payload(&out.value);
        if let Some(key) = &out.key {
            base = base.key(key);
        }
        loop {
            match self.producer.send(base) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    // Backpressure from librdkafka's queue: serve deliveries, then retry.
                    base = back;
                    self.producer.poll(Duration::from_millis(50));
                    self.check()?;
                }
                Err((e, _)) => {
                    return Err(TaskError::User(format!(
                        "cannot send a record to Kafka topic '{topic}' at {}: {e}",
                        self.spec.servers
                    )));
                }
            }
        }
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
