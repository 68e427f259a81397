//! Three versions of one job, for the upgrade tests: stop version 1 with a savepoint, resume a
//! later version from it. Each writes `counting`'s `seq key count` lines (checked with
//! `sluice check-counting`); the stateful operators have uids, so their state is found again
//! whatever changed around them.
//!
//! - `upgrade-v1`: sequence source -> count per key -> directory sink, and from the source a
//!   second keyed branch that keeps the largest seq per key (keyed state) and discards it.
//! - `upgrade-v2`: version 1 with a stateless filter added between the source and the count,
//!   chained behind the source: every stateful operator restores.
//! - `upgrade-v3`: version 2 without the largest-seq branch: its state has no operator to go
//!   to, so a restore is refused unless it allows non-restored state.

use sluice::api::StreamExecutionEnvironment;

use crate::{arg, number};

/// Which version of the job a program builds.
pub(crate) struct Upgrade {
    name: &'static str,
    version: u32,
}

/// Every version, as programs.
pub(crate) fn versions() -> [Upgrade; 3] {
    [
        Upgrade {
            name: "upgrade-v1",
            version: 1,
        },
        Upgrade {
            name: "upgrade-v2",
            version: 2,
        },
        Upgrade {
            name: "upgrade-v3",
            version: 3,
        },
    ]
}

impl sluice::api::JobProgram for Upgrade {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        match self.version {
            1 => "counting with uids, and a keyed branch keeping the largest seq per key",
            2 => "version 1 with a stateless filter chained behind the source",
            _ => "version 2 without the largest-seq branch",
        }
    }
    fn usage(&self) -> &str {
        "--records N --keys K --output DIR [--rate R]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let records = number(args, "--records", 1000)?;
        let keys = number(args, "--keys", 10)?.max(1);
        let rate = number(args, "--rate", 0)?;
        let output = arg(args, "--output").ok_or("--output DIR is required")?;
        let seqs = env
            .generate_bounded(records, rate, move |seq| (seq, seq % keys))
            .name("Sequence Source")
            .uid("sequence-source");
        if self.version < 3 {
            seqs.key_by(|r: &(u64, u64)| r.1)
                .reduce(|a: (u64, u64), b: (u64, u64)| if a.0 >= b.0 { a } else { b })
                .name("Largest Seq")
                .uid("largest-seq")
                .discard();
        }
        let counted = if self.version >= 2 {
            seqs.filter(|r: &(u64, u64)| r.0 != u64::MAX)
                .name("Valid Seqs")
        } else {
            seqs
        };
        counted
            .key_by(|r: &(u64, u64)| r.1)
            .process(|state| {
                Ok(sluice::examples::CountPerKey::new(
                    state.value_state("count")?,
                ))
            })
            .name("Count per Key")
            .uid("count-per-key")
            .map(|(seq, key, count): (u64, u64, u64)| format!("{seq} {key} {count}"))
            .sink_to_directory(output)
            .uid("directory-sink");
        Ok(format!(
            "Upgrade v{} ({records} records, {keys} keys)",
            self.version
        ))
    }
}
