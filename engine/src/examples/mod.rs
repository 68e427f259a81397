//! Bundled example jobs, runnable by name (`sluice run wordcount`), and the program registry
//! that maps a job's name to the code that builds it.

mod auction_bids;
mod counting;
mod kafka_wordcount;
mod latency;
pub mod nexmark;
mod shuffle;
mod stream_sum;
mod wordcount;

use std::collections::BTreeMap;
use std::sync::Arc;

#[cfg(test)]
use crate::api::StreamExecutionEnvironment;
use crate::api::{JobProgram, ProgramRegistry};

/// Flink's WordCount tokenizer, for tests that compute reference counts.
pub fn wordcount_tokens(line: &str) -> Vec<String> {
    wordcount::tokenize(line).collect()
}

pub use auction_bids::expected_lines as expected_auction_bids;
pub use counting::{
    CountPerKey, CountingReport, check_counting, check_counting_dir, check_windowed_counting,
};
pub use latency::{LatencyHistogram, warmup_records};

/// The bundled programs, as a registry to give a JobManager or TaskManager.
pub fn bundled() -> ProgramRegistry {
    let mut registry = ProgramRegistry::new();
    let programs: [Arc<dyn JobProgram>; 7] = [
        Arc::new(wordcount::WordCount),
        Arc::new(stream_sum::StreamSum),
        Arc::new(counting::Counting),
        Arc::new(shuffle::Shuffle),
        Arc::new(kafka_wordcount::KafkaWordCount),
        Arc::new(latency::Latency),
        Arc::new(auction_bids::AuctionBids),
    ];
    let queries = nexmark::Query::ALL.map(|q| Arc::new(nexmark::Nexmark(q)) as Arc<dyn JobProgram>);
    for program in programs.into_iter().chain(queries) {
        // The names differ.
        let _ = registry.register(program);
    }
    registry
}

/// `--key value` arguments as Flink's `ParameterTool` reads them; a flag without a value is "".
#[derive(Debug)]
pub(crate) struct Params {
    values: BTreeMap<String, String>,
}

impl Params {
    /// Parses `args`, refusing keys not in `known`.
    pub(crate) fn parse(args: &[String], known: &[&str]) -> Result<Self, String> {
        let mut values = BTreeMap::new();
        let mut i = 0;
        while i < args.len() {
            let Some(key) = args[i].strip_prefix("--") else {
                return Err(format!(
                    "unexpected argument '{}': arguments are --key value pairs",
                    args[i]
                ));
            };
            if !known.contains(&key) {
                return Err(format!(
                    "unknown argument --{key}; known: {}",
                    known
                        .iter()
                        .map(|k| format!("--{k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let value = match args.get(i + 1) {
                Some(v) if !v.starts_with("--") => {
                    i += 1;
                    v.clone()
                }
                _ => String::new(),
            };
            values.insert(key.to_string(), value);
            i += 1;
        }
        Ok(Params { values })
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// A path argument (a plain path or a `file:` URI), or `None` when absent; an empty one is
    /// refused.
    pub(crate) fn path(&self, key: &str) -> Result<Option<std::path::PathBuf>, String> {
        match self.get(key) {
            None => Ok(None),
            Some("") => Err(format!("--{key} needs a path")),
            Some(raw) => crate::config::local_path(raw)
                .map(Some)
                .map_err(|e| format!("--{key}: {e}")),
        }
    }

    /// A storage path argument (a plain path, a `file:` URI or an `hdfs:` URI), or `None` when
    /// absent; an empty one is refused.
    pub(crate) fn storage_path(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some("") => Err(format!("--{key} needs a path")),
            Some(raw) => crate::config::storage_path(raw)
                .map(Some)
                .map_err(|e| format!("--{key}: {e}")),
        }
    }

    /// A flag (`--key` without a value): whether it is given; a value after it is refused.
    pub(crate) fn flag(&self, key: &str) -> Result<bool, String> {
        match self.get(key) {
            None => Ok(false),
            Some("") => Ok(true),
            Some(v) => Err(format!("--{key} is a flag and takes no value, got '{v}'")),
        }
    }

    /// A numeric argument, or `default` when absent.
    pub(crate) fn number(&self, key: &str, default: u64) -> Result<u64, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{key} needs a non-negative integer, got '{v}'")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn params_parse_and_reject() {
        let p = Params::parse(&args("--rate 10 --keys 3"), &["rate", "keys"]).unwrap();
        assert_eq!(p.number("rate", 0).unwrap(), 10);
        assert_eq!(p.number("missing", 7).unwrap(), 7);
        assert!(
            Params::parse(&args("--bogus 1"), &["rate"])
                .unwrap_err()
                .contains("--bogus")
        );
        assert!(Params::parse(&args("stray"), &["rate"]).is_err());
        let p = Params::parse(&args("--rate x"), &["rate"]).unwrap();
        assert!(p.number("rate", 0).unwrap_err().contains("--rate"));
    }

    #[test]
    fn every_program_builds_with_defaults() {
        for p in bundled().iter() {
            let env = StreamExecutionEnvironment::new();
            let args: Vec<String> = match p.name() {
                "counting" => ["--records", "10", "--keys", "2", "--output", "/tmp/out"]
                    .map(String::from)
                    .to_vec(),
                "latency" => ["--output", "/tmp/out"].map(String::from).to_vec(),
                _ => Vec::new(),
            };
            let name = p.build(&env, &args).unwrap();
            assert!(!name.is_empty());
            env.into_graph().job_graph(&name, 2).unwrap();
        }
    }
}
