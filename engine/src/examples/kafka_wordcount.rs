//! WordCount between Kafka topics: lines from one topic, a running count per word to another
//! (keyed by the word, the value `word count`). Unbounded unless `--bounded`.

use super::wordcount::tokenize;
use super::{JobProgram, Params};
use crate::api::StreamExecutionEnvironment;
use crate::connectors::kafka::{KafkaSink, KafkaSource, ProducedRecord, StartingOffsets};

pub(crate) struct KafkaWordCount;

impl JobProgram for KafkaWordCount {
    fn name(&self) -> &'static str {
        "kafka-wordcount"
    }
    fn description(&self) -> &'static str {
        "counts the words of lines read from a Kafka topic, writing running counts to another"
    }
    fn usage(&self) -> &'static str {
        "[--bootstrap-servers HOST:PORT (default 127.0.0.1:9092)] [--input-topic T (default lines)] [--input-pattern REGEX (topics whose name matches, instead of --input-topic)] [--output-topic T (default counts)] [--group-id G (default kafka-wordcount)] [--starting-offsets earliest|latest|committed (default earliest)] [--bounded (stop at the input's end offsets at start)]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let params = Params::parse(
            args,
            &[
                "bootstrap-servers",
                "input-topic",
                "input-pattern",
                "output-topic",
                "group-id",
                "starting-offsets",
                "bounded",
            ],
        )?;
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
        let source = source.build().map_err(|e| e.to_string())?;
        let sink = KafkaSink::<(String, u64)>::builder()
            .bootstrap_servers(servers)
            .topic(output)
            .serializer(|(word, count): &(String, u64)| ProducedRecord {
                topic: None,
                key: Some(word.as_bytes().to_vec()),
                value: format!("{word} {count}").into_bytes(),
            })
            .build()
            .map_err(|e| e.to_string())?;
        let counts = source
            .stream(env)
            .flat_map(|line: String| tokenize(&line).map(|w| (w, 1u64)).collect::<Vec<_>>())
            .name("Tokenizer")
            .key_by(|pair: &(String, u64)| pair.0.clone())
            .sum();
        sink.write(&counts);
        Ok(format!("Kafka WordCount ({input} -> {output})"))
    }
}
