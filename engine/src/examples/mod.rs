//! Bundled example jobs, runnable by name (`sluice run wordcount`), and the program registry
//! that maps a job's name to the code that builds it.

mod counting;
mod shuffle;
mod stream_sum;
mod wordcount;

use std::collections::BTreeMap;

use crate::api::StreamExecutionEnvironment;

/// A job program: builds its dataflow from its arguments. The JobManager runs `build` to derive
/// the job graph and every TaskManager runs it again to instantiate the operators it hosts, so
/// it must be deterministic.
pub trait JobProgram: Send + Sync {
    /// The name `sluice run` knows it by.
    fn name(&self) -> &'static str;
    /// One line on what it does.
    fn description(&self) -> &'static str;
    /// Its arguments, as shown by `sluice examples`.
    fn usage(&self) -> &'static str;
    /// Builds the dataflow; returns the job's display name. Bad arguments give an error naming
    /// the argument.
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String>;
}

/// Flink's WordCount tokenizer, for tests that compute reference counts.
pub fn wordcount_tokens(line: &str) -> Vec<String> {
    wordcount::tokenize(line).collect()
}

pub use counting::{CountingReport, check_counting, check_counting_dir};

/// Every program this binary can run.
pub fn programs() -> Vec<&'static dyn JobProgram> {
    vec![
        &wordcount::WordCount,
        &stream_sum::StreamSum,
        &counting::Counting,
        &shuffle::Shuffle,
    ]
}

/// The program called `name`.
pub fn find(name: &str) -> Option<&'static dyn JobProgram> {
    programs().into_iter().find(|p| p.name() == name)
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
        for p in programs() {
            let env = StreamExecutionEnvironment::new();
            let args: Vec<String> = match p.name() {
                "counting" => ["--records", "10", "--keys", "2", "--output", "/tmp/out"]
                    .map(String::from)
                    .to_vec(),
                _ => Vec::new(),
            };
            let name = p.build(&env, &args).unwrap();
            assert!(!name.is_empty());
            env.into_graph().job_graph(&name, 2).unwrap();
        }
    }
}
