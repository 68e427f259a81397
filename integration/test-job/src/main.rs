//! A user's job artifact as the integration tests submit it: a binary that links sluice,
//! registers its programs and hands over to `sluice::job_main`.
//!
//! - `sum --records N --keys K --output DIR`: N generated records, a keyed running sum, each
//!   update written as text (`key sum`); the last sum of each key is N / K.
//! - `abort --after N`: records forever, and the process aborts at record N of a subtask (a
//!   job whose code takes its process down, as a crash in a C library would).
//! - `hog --mib-per-record M --max-mib X`: records at 250 a second, each subtask keeping M MiB
//!   of written memory per record until it holds X MiB (a job whose state outgrows its
//!   TaskManager).
//! - `panic-in-build`: the program panics while building its dataflow.
//! - `upgrade-v1`, `upgrade-v2`, `upgrade-v3`: three versions of one stateful job with uids,
//!   for resuming a changed program from a savepoint (see `upgrade.rs`).
//! - the examples bundled with sluice (`stream-sum`, `shuffle`, ...), the same code the `sluice`
//!   binary runs, so a benchmark can compare a job from an artifact with the bundled one.

use std::sync::Arc;

use sluice::api::{JobProgram, StreamExecutionEnvironment};

mod upgrade;

/// `--name value` pairs into a lookup.
fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn number(args: &[String], name: &str, default: u64) -> Result<u64, String> {
    match arg(args, name) {
        Some(v) => v
            .parse()
            .map_err(|_| format!("{name} must be a number, not '{v}'")),
        None => Ok(default),
    }
}

struct Sum;

impl JobProgram for Sum {
    fn name(&self) -> &str {
        "sum"
    }
    fn description(&self) -> &str {
        "generated records -> key_by -> running sum per key -> text"
    }
    fn usage(&self) -> &str {
        "--records N [--keys K] [--rate R] --output DIR"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let records = number(args, "--records", 1000)?;
        let keys = number(args, "--keys", 10)?.max(1);
        let rate = number(args, "--rate", 0)?;
        let output = arg(args, "--output").ok_or("--output DIR is required")?;
        env.generate_bounded(records, rate, move |i| (i % keys, 1u64))
            .key_by(|r: &(u64, u64)| r.0)
            .reduce(|(k, a): (u64, u64), (_, b): (u64, u64)| (k, a + b))
            .map(|(k, s): (u64, u64)| format!("{k} {s}"))
            .write_as_text(output);
        Ok(format!("Sum of {records} records over {keys} keys"))
    }
}

struct Abort;

impl JobProgram for Abort {
    fn name(&self) -> &str {
        "abort"
    }
    fn description(&self) -> &str {
        "records forever; the process aborts at record N of a subtask"
    }
    fn usage(&self) -> &str {
        "--after N"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let after = number(args, "--after", 1000)?;
        env.generate(1000, |i| i)
            .map(move |i: u64| {
                if i == after {
                    std::process::abort();
                }
                i
            })
            .discard();
        Ok("Abort".into())
    }
}

struct Hog;

impl JobProgram for Hog {
    fn name(&self) -> &str {
        "hog"
    }
    fn description(&self) -> &str {
        "records at 250/s; each keeps M MiB of memory until the subtask holds X MiB"
    }
    fn usage(&self) -> &str {
        "--mib-per-record M --max-mib X"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let per_record = number(args, "--mib-per-record", 4)? as usize;
        let max = number(args, "--max-mib", 4096)? as usize;
        env.generate(250, |i| i)
            .map(move |i: u64| {
                thread_local! {
                    static HELD: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
                }
                HELD.with_borrow_mut(|held| {
                    if held.len() * per_record < max {
                        // Written, so that the pages are resident and not merely reserved.
                        held.push(vec![0x5a; per_record << 20]);
                    }
                });
                i
            })
            .discard();
        Ok("Hog".into())
    }
}

struct PanicInBuild;

impl JobProgram for PanicInBuild {
    fn name(&self) -> &str {
        "panic-in-build"
    }
    fn description(&self) -> &str {
        "panics while building its dataflow"
    }
    fn usage(&self) -> &str {
        ""
    }
    fn build(&self, _: &StreamExecutionEnvironment, _: &[String]) -> Result<String, String> {
        panic!("this program cannot be built");
    }
}

fn main() -> std::process::ExitCode {
    let mut programs = sluice::examples::bundled();
    for program in [
        Arc::new(Sum) as Arc<dyn JobProgram>,
        Arc::new(Abort),
        Arc::new(Hog),
        Arc::new(PanicInBuild),
    ] {
        programs.register(program).expect("distinct names");
    }
    for program in upgrade::versions() {
        programs
            .register(Arc::new(program))
            .expect("distinct names");
    }
    sluice::job_main(programs)
}
