//! A real Kafka broker for the tests: a single-node KRaft broker started by
//! `scripts/kafka.sh start`, one per test binary ([`broker`]), plus a small client (rdkafka,
//! the same library the connector uses) to create topics, produce input and read output.
//!
//! The broker watches the test binary's pid and stops when it ends, so the shared broker (a
//! static, never dropped) does not outlive its tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::repo_root;

/// Where the test binaries' brokers live: `<DIR_PREFIX><pid of the test binary>`.
const DIR_PREFIX: &str = "/var/tmp/sluice-kafka-";

/// A running broker.
#[derive(Debug)]
pub struct Broker {
    /// Its directory: server.properties, data, log, pid, ready.
    pub dir: PathBuf,
    /// `127.0.0.1:PORT`, the clients' `bootstrap.servers`.
    pub bootstrap: String,
}

/// The test binary's broker, started on first use.
pub fn broker() -> &'static Broker {
    static BROKER: OnceLock<Broker> = OnceLock::new();
    BROKER.get_or_init(start)
}

fn script() -> PathBuf {
    repo_root().join("scripts/kafka.sh")
}

fn start() -> Broker {
    crate::remove_stale_dirs(DIR_PREFIX, "pid");
    let me = std::process::id();
    let dir = PathBuf::from(format!("{DIR_PREFIX}{me}"));
    let out = Command::new(script())
        .arg("start")
        .arg(&dir)
        .arg("")
        .arg(me.to_string())
        .output()
        .expect("run scripts/kafka.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the Kafka broker did not start:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bootstrap = stdout
        .lines()
        .find_map(|l| l.strip_prefix("READY bootstrap="))
        .unwrap_or_else(|| panic!("no READY line in {stdout:?}"))
        .trim()
        .to_string();
    Broker { dir, bootstrap }
}

/// A record to write with [`Broker::produce_records`].
#[derive(Clone, Debug)]
pub struct Produced {
    /// Its partition; `None`: by the key's hash.
    pub partition: Option<i32>,
    /// Its timestamp (ms since the epoch); `None`: the producer's clock.
    pub timestamp: Option<i64>,
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: String,
}

impl Broker {
    /// Stops the broker and starts it again in its directory, on its port (clients reconnect).
    pub fn restart(&self) {
        let out = Command::new(script())
            .arg("stop")
            .arg(&self.dir)
            .output()
            .expect("run scripts/kafka.sh stop");
        assert!(out.status.success(), "stopping the broker failed");
        let out = Command::new(script())
            .arg("start")
            .arg(&self.dir)
            .arg("")
            .arg(std::process::id().to_string())
            .output()
            .expect("run scripts/kafka.sh start");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("READY bootstrap={}", self.bootstrap)),
            "the Kafka broker did not start again on {}:\n{stdout}\n{}",
            self.bootstrap,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates `topic` with `partitions` partitions (replication 1).
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .expect("admin client");
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        let results =
            block_on(admin.create_topics([&new], &AdminOptions::new())).expect("create topics");
        for r in results {
            r.unwrap_or_else(|(t, e)| panic!("cannot create topic {t}: {e}"));
        }
        // Metadata of a new topic reaches the broker's cache a moment later.
        crate::wait_for(Duration::from_secs(20), "the new topic's metadata", || {
            let c = self.consumer(None);
            let m = c.fetch_metadata(Some(topic), Duration::from_secs(5)).ok()?;
            let t = m.topics().iter().find(|t| t.name() == topic)?;
            (t.error().is_none() && t.partitions().len() == partitions as usize).then_some(())
        });
    }

    /// Grows `topic` to `partitions` partitions and waits until the broker's metadata shows
    /// them.
    pub fn add_partitions(&self, topic: &str, partitions: usize) {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .expect("admin client");
        let grow = NewPartitions::new(topic, partitions);
        let results = block_on(admin.create_partitions([&grow], &AdminOptions::new()))
            .expect("create partitions");
        for r in results {
            r.unwrap_or_else(|(t, e)| panic!("cannot add partitions to {t}: {e}"));
        }
        crate::wait_for(
            Duration::from_secs(20),
            "the new partitions' metadata",
            || {
                let c = self.consumer(None);
                let m = c.fetch_metadata(Some(topic), Duration::from_secs(5)).ok()?;
                let t = m.topics().iter().find(|t| t.name() == topic)?;
                (t.partitions().len() == partitions).then_some(())
            },
        );
    }

    /// Writes `(key, value)` records to `topic` (partition chosen by key hash, or
    /// `partition` when given) and waits until all are acknowledged.
    pub fn produce(&self, topic: &str, partition: Option<i32>, records: &[(String, String)]) {
        let records: Vec<_> = records
            .iter()
            .map(|(k, v)| Produced {
                partition,
                timestamp: None,
                key: k.clone(),
                value: v.clone(),
            })
            .collect();
        self.produce_records(topic, &records);
    }

    /// Writes `records` to `topic`, each to its partition (or by key hash) with its timestamp
    /// (or the producer's clock), and waits until all are acknowledged.
    pub fn produce_records(&self, topic: &str, records: &[Produced]) {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("linger.ms", "5")
            .create()
            .expect("producer");
        for r in records {
            let mut record = BaseRecord::to(topic).key(&r.key).payload(&r.value);
            if let Some(p) = r.partition {
                record = record.partition(p);
            }
            if let Some(ts) = r.timestamp {
                record = record.timestamp(ts);
            }
            let mut record = Some(record);
            while let Some(r) = record.take() {
                if let Err((e, back)) = producer.send(r) {
                    assert!(
                        matches!(
                            e,
                            rdkafka::error::KafkaError::MessageProduction(
                                rdkafka::types::RDKafkaErrorCode::QueueFull
                            )
                        ),
                        "produce: {e}"
                    );
                    producer.poll(Duration::from_millis(50));
                    record = Some(back);
                }
            }
        }
        producer
            .flush(Duration::from_secs(30))
            .expect("flush produced records");
    }

    fn consumer(&self, isolation: Option<&str>) -> BaseConsumer {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", "sluice-test-reader")
            .set("enable.auto.commit", "false");
        if let Some(level) = isolation {
            config.set("isolation.level", level);
        }
        config.create().expect("consumer")
    }

    /// Every record of `topic` up to its current end, as `(partition, key, value)` in offset
    /// order per partition; `read_committed` hides aborted and open transactions.
    pub fn read_all(&self, topic: &str, read_committed: bool) -> Vec<(i32, String, String)> {
        let consumer = self.consumer(Some(if read_committed {
            "read_committed"
        } else {
            "read_uncommitted"
        }));
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .expect("metadata");
        let partitions: Vec<i32> = metadata.topics()[0]
            .partitions()
            .iter()
            .map(|p| p.id())
            .collect();
        let mut ends = BTreeMap::new();
        let mut list = TopicPartitionList::new();
        for &p in &partitions {
            let (low, high) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .expect("watermarks");
            if high > low {
                ends.insert(p, high);
                list.add_partition_offset(topic, p, Offset::Offset(low))
                    .expect("assign");
            }
        }
        consumer.assign(&list).expect("assign");
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ends.is_empty() {
            assert!(Instant::now() < deadline, "reading {topic} timed out");
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    let text =
                        |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or(&[])).into_owned();
                    out.push((m.partition(), text(m.key()), text(m.payload())));
                    if ends
                        .get(&m.partition())
                        .is_some_and(|e| m.offset() + 1 >= *e)
                    {
                        ends.remove(&m.partition());
                    }
                }
                Some(Err(e)) => panic!("reading {topic}: {e}"),
                None => {
                    // Control records (transaction markers) end some partitions.
                    if let Ok(pos) = consumer.position() {
                        for e in pos.elements() {
                            if let (Offset::Offset(o), Some(end)) =
                                (e.offset(), ends.get(&e.partition()))
                                && o >= *end
                            {
                                ends.remove(&e.partition());
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The offsets the consumer group `group` committed for `topic`'s partitions.
    pub fn committed(&self, group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", group)
            .create()
            .expect("consumer");
        let mut list = TopicPartitionList::new();
        for p in 0..partitions {
            list.add_partition(topic, p);
        }
        let got = consumer
            .committed_offsets(list, Duration::from_secs(10))
            .expect("committed offsets");
        got.elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some((e.partition(), o)),
                _ => None,
            })
            .collect()
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}
