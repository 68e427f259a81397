//! An unbounded keyed running sum, for long-running tests and throughput measurements.

use super::{JobProgram, Params};
use std::time::Duration;

use crate::api::{StreamExecutionEnvironment, WatermarkStrategy};

pub(crate) struct StreamSum;

impl JobProgram for StreamSum {
    fn name(&self) -> &'static str {
        "stream-sum"
    }
    fn description(&self) -> &'static str {
        "unbounded generator -> key_by -> running sum per key (runs until cancelled)"
    }
    fn usage(&self) -> &'static str {
        "[--rate R (records/s over all sources, 0 = as fast as possible; default 1000)] [--keys K (default 1000)] [--records N (stop after N; default unbounded)] [--output PATH (default: discard)] [--poison-at I (the keyed operator panics on record I: a job whose code fails, for failure-handling tests)] [--stages S (S pass-through vertices, each after a rebalance, between the generator and the sum: a job of S + 2 vertices; default 0)] [--event-time (each record's index is its event time in ms: timestamps and watermarks bounded by 1 s of out-of-orderness travel with the records, to measure what event time costs)]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let params = Params::parse(
            args,
            &[
                "rate",
                "keys",
                "records",
                "output",
                "poison-at",
                "stages",
                "event-time",
            ],
        )?;
        let rate = params.number("rate", 1000)?;
        let keys = params.number("keys", 1000)?;
        if keys == 0 {
            return Err("--keys must be at least 1".into());
        }
        // With event time the generator's records are (index, 1): the index is the timestamp,
        // and a chained map turns it into the key after the timestamps are assigned.
        let event_time = params.flag("event-time")?;
        let by_index = move |i: u64| (if event_time { i } else { i % keys }, 1u64);
        let source = match params.get("records") {
            Some(_) => env.generate_bounded(params.number("records", 0)?, rate, by_index),
            None => env.generate(rate, by_index),
        };
        let stages = params.number("stages", 0)?;
        if stages > 64 {
            return Err(format!("--stages is at most 64, got {stages}"));
        }
        let mut source = source;
        if event_time {
            source = source
                .assign_timestamps_and_watermarks(
                    WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_secs(1))
                        .with_timestamp_assigner(|r: &(u64, u64), _| {
                            r.0.min(i64::MAX as u64) as i64
                        }),
                )
                .map(move |(i, v): (u64, u64)| (i % keys, v));
        }
        for _ in 0..stages {
            source = source.rebalance().map(|r: (u64, u64)| r).name("Pass");
        }
        // The keyed operator panics when record I (key I % K, its (I / K + 1)-th record) arrives.
        let poison = params
            .get("poison-at")
            .map(|_| params.number("poison-at", 0))
            .transpose()?;
        let sums = source
            .key_by(|r: &(u64, u64)| r.0)
            .reduce(move |(k, a): (u64, u64), (_, b): (u64, u64)| {
                let total = a + b;
                if let Some(p) = poison
                    && total > p / keys
                    && k == p % keys
                {
                    panic!("poisoned record: key {k} reached {total}");
                }
                (k, total)
            })
            .name("Keyed Sum");
        match params.path("output")? {
            Some(path) => sums
                .map(|(k, s): (u64, u64)| format!("{k} {s}"))
                .write_as_text(path),
            None => sums.discard(),
        };
        Ok(format!("StreamSum (rate {rate}/s, {keys} keys)"))
    }
}
