//! The engine's one configuration tree: `conf/config.yaml` with Flink's keys, plus `-D` overrides.

mod units;

pub use units::{format_duration, format_memory_size, parse_duration, parse_memory_size};
