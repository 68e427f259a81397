//! Flink's WordCount: counts the words of a text (a file, a directory, or a bundled text).

use super::{JobProgram, Params};
use crate::api::{RuntimeMode, StreamExecutionEnvironment};

pub(crate) struct WordCount;

/// The text counted when no `--input` is given: the opening of Hamlet's soliloquy (public
/// domain), as in Flink's example.
const BUNDLED_TEXT: &str = include_str!("hamlet.txt");

/// Lower-cased runs of letters and digits (Flink's tokenizer splits on `\W+`).
pub(crate) fn tokenize(line: &str) -> impl Iterator<Item = String> + '_ {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

impl JobProgram for WordCount {
    fn name(&self) -> &'static str {
        "wordcount"
    }
    fn description(&self) -> &'static str {
        "counts the words of a text (bounded; final counts, one 'word count' line each)"
    }
    fn usage(&self) -> &'static str {
        "[--input PATH (file or directory; default: a bundled text)] [--output PATH (default: print)] [--discard (count, then drop the counts instead of printing them: for benchmarks)] [--execution-mode BATCH|STREAMING|AUTOMATIC (default BATCH: final counts; STREAMING emits every updated count)]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let params = Params::parse(args, &["input", "output", "discard", "execution-mode"])?;
        let mode = match params.get("execution-mode") {
            None => RuntimeMode::Batch,
            Some(m) if m.eq_ignore_ascii_case("batch") => RuntimeMode::Batch,
            Some(m) if m.eq_ignore_ascii_case("streaming") => RuntimeMode::Streaming,
            Some(m) if m.eq_ignore_ascii_case("automatic") => RuntimeMode::Automatic,
            Some(other) => {
                return Err(format!(
                    "--execution-mode {other}: expected BATCH, STREAMING or AUTOMATIC"
                ));
            }
        };
        env.set_runtime_mode(mode);
        let lines = match params.path("input")? {
            Some(path) => env.read_text_file(path),
            None => env
                .from_collection(BUNDLED_TEXT.lines().map(String::from).collect())
                .set_parallelism(1),
        };
        let counts = lines
            .flat_map(|line: String| tokenize(&line).map(|w| (w, 1u64)).collect::<Vec<_>>())
            .name("Tokenizer")
            .key_by(|pair: &(String, u64)| pair.0.clone())
            .sum()
            .map(|(word, count): (String, u64)| format!("{word} {count}"))
            .name("Format");
        match (params.path("output")?, params.flag("discard")?) {
            (Some(_), true) => return Err("--output and --discard exclude each other".into()),
            (Some(path), false) => counts.write_as_text(path),
            (None, true) => counts.discard(),
            (None, false) => counts.print(),
        };
        Ok("WordCount".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_matches_flinks() {
        let words: Vec<String> = tokenize("To be, or not to be:--that is the Question!").collect();
        assert_eq!(
            words,
            [
                "to", "be", "or", "not", "to", "be", "that", "is", "the", "question"
            ]
        );
    }
}
