//! Apache Kafka: a source that reads topics with its offsets in checkpoints and savepoints
//! (Flink's `KafkaSource`), and a sink that writes records at least once or exactly once (Flink's
//! `KafkaSink`).
//! Both use librdkafka through the `rdkafka` crate; see docs/kafka.md.
//!
//! ```no_run
//! use sluice::api::StreamExecutionEnvironment;
//! use sluice::connectors::kafka::{KafkaSink, KafkaSource, StartingOffsets};
//! let env = StreamExecutionEnvironment::new();
//! let source = KafkaSource::<String>::builder()
//!     .bootstrap_servers("127.0.0.1:9092")
//!     .topics(["lines"])
//!     .group_id("my-job")
//!     .starting_offsets(StartingOffsets::Earliest)
//!     .value_utf8()
//!     .build()
//!     .unwrap();
//! let sink = KafkaSink::<String>::builder()
//!     .bootstrap_servers("127.0.0.1:9092")
//!     .topic("upper")
//!     .value(|s: &String| s.as_bytes().to_vec())
//!     .build()
//!     .unwrap();
//! sink.write(&source.stream(&env).map(|s: String| s.to_uppercase()));
//! ```

mod assign;
mod sink;
mod source;
mod txn;

pub use assign::{StartingOffsets, TopicPartition, owner};
pub use sink::{DeliveryGuarantee, KafkaSink, KafkaSinkBuilder, ProducedRecord};
pub use source::{ConsumedRecord, KafkaSource, KafkaSourceBuilder};

/// A Kafka source or sink was configured wrongly; the message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Kafka connector configuration: {0}")]
pub struct ConfigError(String);

/// Client properties sluice sets itself; a user value for one of them is refused rather than
/// silently overridden.
const MANAGED_PROPERTIES: [&str; 4] = [
    "bootstrap.servers",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "transactional.id",
];

/// Checks user-given client properties against [`MANAGED_PROPERTIES`].
fn check_properties<'a>(
    properties: impl IntoIterator<Item = &'a String>,
) -> Result<(), ConfigError> {
    for key in properties {
        if MANAGED_PROPERTIES.contains(&key.as_str()) {
            return Err(ConfigError(format!(
                "the client property '{key}' is set by the connector (use the builder's method)"
            )));
        }
    }
    Ok(())
}
