//! WordCount between Kafka topics: lines from one topic, a running count per word to another
//! (keyed by the word, the value `word count`). Unbounded unless `--bounded`. The output is
//! written at least once, or exactly once with `--delivery-guarantee exactly-once`.

use std::time::Duration;

use super::wordcount::tokenize;
use super::{JobProgram, Params};
use crate::api::{
    DataStream, StreamExecutionEnvironment, TimeWindow, TumblingEventTimeWindows, WatermarkStrategy,
};
use crate::connectors::kafka::{
    DeliveryGuarantee, KafkaSink, KafkaSinkBuilder, KafkaSource, ProducedRecord, StartingOffsets,
};
use crate::record::Data;

/// The sink options the Kafka examples share.
pub(crate) const SINK_OPTIONS: [&str; 3] = [
    "delivery-guarantee",
    "transactional-id-prefix",
    "transaction-timeout-ms",
];

/// Applies [`SINK_OPTIONS`] to `sink`; `default_prefix` is the transactional id prefix unless
/// one is given.
pub(crate) fn sink_options<T: Data>(
    params: &Params,
    default_prefix: &str,
    mut sink: KafkaSinkBuilder<T>,
) -> Result<KafkaSinkBuilder<T>, String> {
    let guarantee: DeliveryGuarantee = params
        .get("delivery-guarantee")
        .unwrap_or("at-least-once")
        .parse()
        .map_err(|e: crate::connectors::kafka::ConfigError| format!("--delivery-guarantee: {e}"))?;
    sink = sink.delivery_guarantee(guarantee).transactional_id_prefix(
        params
            .get("transactional-id-prefix")
            .unwrap_or(default_prefix),
    );
    if let Some(ms) = params.get("transaction-timeout-ms") {
        let ms: u64 = ms
            .parse()
            .map_err(|_| format!("--transaction-timeout-ms needs milliseconds, got '{ms}'"))?;
        sink = sink.property("transaction.timeout.ms", &ms.to_string());
    }
    Ok(sink)
}

pub(crate) struct KafkaWordCount;

impl JobProgram for KafkaWordCount {
    fn name(&self) -> &'static str {
        "kafka-wordcount"
    }
    fn description(&self) -> &'static str {
        "counts the words of lines read from a Kafka topic, writing running counts to another"
    }
    fn usage(&self) -> &'static str {
        "[--bootstrap-servers HOST:PORT (default 127.0.0.1:9092)] [--input-topic T (default lines)] [--input-pattern REGEX (topics whose name matches, instead of --input-topic)] [--output-topic T (default counts)] [--group-id G (default kafka-wordcount)] [--starting-offsets earliest|latest|committed (default earliest)] [--bounded (stop at the input's end offsets at start)] [--partition-discovery-interval-ms MS (list the input's partitions again every MS while running; 0: never; default 300000)] [--window-ms MS (count per word and tumbling window of MS ms of event time, the Kafka records' timestamps with watermarks per partition; the output's key and word are WORD@WINDOW_END)] [--delivery-guarantee at-least-once|exactly-once (default at-least-once; exactly-once needs checkpointing)] [--transactional-id-prefix P (exactly-once; default kafka-wordcount-OUTPUT)] [--transaction-timeout-ms MS (the producer's transaction.timeout.ms)]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let mut known = vec![
            "bootstrap-servers",
            "input-topic",
            "input-pattern",
            "output-topic",
            "group-id",
            "starting-offsets",
            "bounded",
            "partition-discovery-interval-ms",
            "window-ms",
        ];
        known.extend(SINK_OPTIONS);
        let params = Params::parse(args, &known)?;
        let servers = params.get("bootstrap-servers").unwrap_or("127.0.0.1:9092");
        let input = params.get("input-topic").unwrap_or("lines");
        let output = params.get("output-topic").unwrap_or("counts");
        let starting = match params.get("starting-offsets").unwrap_or("earliest") {
            "earliest" => StartingOffsets::Earliest,
            "latest" => StartingOffsets::Latest,
            "committed" => StartingOffsets::Committed {
                fallback: Box::new(StartingOffsets::Earliest),
            },
            other => {
                return Err(format!(
                    "--starting-offsets is earliest, latest or committed, not '{other}'"
                ));
            }
        };
        let source = KafkaSource::<String>::builder().bootstrap_servers(servers);
        let (mut source, input) = match params.get("input-pattern") {
            Some(pattern) => (source.topic_pattern(pattern), pattern),
            None => (source.topics([input]), input),
        };
        source = source
            .group_id(params.get("group-id").unwrap_or("kafka-wordcount"))
            .starting_offsets(starting)
            .value_utf8();
        if params.get("bounded").is_some() {
            source = source.bounded();
        }
        if let Some(ms) = params.get("partition-discovery-interval-ms") {
            let ms: u64 = ms.parse().map_err(|_| {
                format!("--partition-discovery-interval-ms needs milliseconds, got '{ms}'")
            })?;
            source = source.partition_discovery_interval(Duration::from_millis(ms));
        }
        let source = source.build().map_err(|e| e.to_string())?;
        let sink = KafkaSink::<(String, u64)>::builder()
            .bootstrap_servers(servers)
            .topic(output)
            .serializer(|(word, count): &(String, u64)| ProducedRecord {
                topic: None,
                key: Some(word.as_bytes().to_vec()),
                value: format!("{word} {count}").into_bytes(),
            });
        let sink = sink_options(&params, &format!("kafka-wordcount-{output}"), sink)?
            .build()
            .map_err(|e| e.to_string())?;
        let words = |lines: DataStream<String>| {
            lines
                .flat_map(|line: String| tokenize(&line).map(|w| (w, 1u64)).collect::<Vec<_>>())
                .name("Tokenizer")
                .key_by(|pair: &(String, u64)| pair.0.clone())
        };
        let counts = match params.get("window-ms") {
            None => words(source.stream(env)).sum(),
            Some(ms) => {
                let ms: u64 =
                    ms.parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                        format!("--window-ms needs a positive number, got '{ms}'")
                    })?;
                // Each partition's timestamps only grow: its records arrive in offset order.
                let lines = source
                    .stream_with_watermarks(env, WatermarkStrategy::for_monotonous_timestamps());
                words(lines)
                    .window(TumblingEventTimeWindows::of(Duration::from_millis(ms)))
                    .reduce_with(
                        |(w, a): (String, u64), (_, b): (String, u64)| (w, a + b),
                        |word: &String, window: TimeWindow, (_, n): (String, u64)| {
                            (format!("{word}@{}", window.end), n)
                        },
                    )
            }
        };
        sink.write(&counts);
        Ok(format!("Kafka WordCount ({input} -> {output})"))
    }
}
