//! A key_by exchange of fixed-size records as fast as the sources can make them: the
//! workload of the shuffle benchmark (`bench/`).

use super::{JobProgram, Params};
use crate::api::StreamExecutionEnvironment;

pub(crate) struct Shuffle;

/// A record of `8 + PAYLOAD` bytes: a key and an opaque payload.
pub(crate) const PAYLOAD: usize = 92;

impl JobProgram for Shuffle {
    fn name(&self) -> &'static str {
        "shuffle"
    }
    fn description(&self) -> &'static str {
        "N records of 100 bytes -> key_by -> a sink that counts (bounded; for throughput measurements)"
    }
    fn usage(&self) -> &'static str {
        "[--records N (default 10000000)] [--keys K (default 1024)] [--sink-delay-us D (the sink sleeps D µs per record: a deliberately slow consumer; default 0)]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let params = Params::parse(args, &["records", "keys", "sink-delay-us"])?;
        let records = params.number("records", 10_000_000)?;
        let keys = params.number("keys", 1024)?.max(1);
        let delay = std::time::Duration::from_micros(params.number("sink-delay-us", 0)?);
        env.generate_bounded(records, 0, move |i| (i % keys, [(i & 0xff) as u8; PAYLOAD]))
            .key_by(|r: &(u64, [u8; PAYLOAD])| r.0)
            // The sink side reads each record in place from the received buffer: no copy.
            .filter_in_place(
                move |r: &<(u64, [u8; PAYLOAD]) as rkyv::Archive>::Archived| {
                    if !delay.is_zero() {
                        std::thread::sleep(delay);
                    }
                    // Touch the payload so the exchange cannot be optimized away; keeps nothing.
                    r.1[0] == 0xff && r.1[PAYLOAD - 1] == 0xff && r.0.to_native() == u64::MAX
                },
            )
            .name("Count")
            .discard();
        Ok(format!(
            "Shuffle ({records} records of {} bytes)",
            8 + PAYLOAD
        ))
    }
}
