//! Connectors to external systems, built on the public source and sink API
//! ([`crate::api::SourceFunction`], [`crate::api::SinkFunction`]) as Flink's connectors are
//! built on its API.

pub mod kafka;
