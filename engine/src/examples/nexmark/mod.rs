//! Nexmark, the streaming benchmark of an online auction: a generator of people, auctions and
//! bids ([`generator`]) and the benchmark's queries as bundled programs `nexmark-q0` ...
//! `nexmark-q8`, `nexmark-q11`, `nexmark-q12` ([`queries`]), with the semantics of Flink's Nexmark SQL queries.
//!
//! Every program takes `--events N` (the run's events, bounded), `--rate R` (events per second
//! over all source subtasks; 0, the default, is as fast as possible), `--seed S` and
//! `--out-of-order-group-size G` (Nexmark's `outOfOrderGroupSize`: events come scrambled
//! within groups of `G` consecutive ones, the watermarks trailing by the group's span) and
//! `--output DIR` (results as text files; without it they are discarded, as Nexmark's
//! blackhole sink does). Event time advances by `1 / R` per event, by Nexmark's default 10 000
//! events per second when the rate is unlimited.

/// A public struct of public fields that travels as an rkyv record and reads as serde data,
/// as every Nexmark record does.
macro_rules! record {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(
            Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize,
            rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
        )]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }
    };
}

pub mod generator;
pub mod model;
pub mod queries;

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use super::{JobProgram, Params};
use crate::api::{DataStream, StreamExecutionEnvironment, WatermarkStrategy};
use crate::record::Data;
use generator::GeneratorConfig;
use model::Event;

/// When event 0 happens: 2026-01-01T00:00:00Z, so windows of whole seconds start at it.
pub const BASE_TIME: i64 = 1_767_225_600_000;

/// Event time per second when the rate is unlimited (Nexmark's default event rate).
pub const DEFAULT_EVENT_RATE: u64 = 10_000;

/// The generator of a run with `seed` at `rate` events per second (0: unlimited).
pub fn generator_config(seed: u64, rate: u64) -> GeneratorConfig {
    let event_rate = if rate == 0 { DEFAULT_EVENT_RATE } else { rate };
    GeneratorConfig::new(seed, event_rate, BASE_TIME)
}

/// The queries, each a bundled program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    /// Pass-through of the bids.
    Q0,
    /// Bids with their prices in euros (× 0.908).
    Q1,
    /// Bids of every 123rd auction.
    Q2,
    /// Auctions of category 10 by sellers in Oregon, Idaho or California, with the seller.
    Q3,
    /// The average winning price per category.
    Q4,
    /// The auctions with the most bids per 10 s window, every 2 s.
    Q5,
    /// The highest bids per 10 s window.
    Q7,
    /// People who opened an auction in the 10 s window they registered in.
    Q8,
    /// Bids per bidder per session (event time, 10 s gap).
    Q11,
    /// Bids per bidder per 10 s tumbling window of processing time.
    Q12,
}

impl Query {
    /// Every query.
    pub const ALL: [Query; 10] = [
        Query::Q0,
        Query::Q1,
        Query::Q2,
        Query::Q3,
        Query::Q4,
        Query::Q5,
        Query::Q7,
        Query::Q8,
        Query::Q11,
        Query::Q12,
    ];

    /// The program's name, `nexmark-qN`.
    pub fn program(self) -> &'static str {
        match self {
            Query::Q0 => "nexmark-q0",
            Query::Q1 => "nexmark-q1",
            Query::Q2 => "nexmark-q2",
            Query::Q3 => "nexmark-q3",
            Query::Q4 => "nexmark-q4",
            Query::Q5 => "nexmark-q5",
            Query::Q7 => "nexmark-q7",
            Query::Q8 => "nexmark-q8",
            Query::Q11 => "nexmark-q11",
            Query::Q12 => "nexmark-q12",
        }
    }

    /// What it computes, one line.
    pub fn description(self) -> &'static str {
        match self {
            Query::Q0 => "Nexmark q0: every bid, passed through",
            Query::Q1 => "Nexmark q1: bids with the price in euros (price × 0.908)",
            Query::Q2 => "Nexmark q2: bids of auctions whose id is a multiple of 123",
            Query::Q3 => {
                "Nexmark q3: auctions of category 10 by sellers in OR, ID or CA, with the seller's name, city and state (a keyed two-input join)"
            }
            Query::Q4 => {
                "Nexmark q4: average closing price per category (highest bid within each auction's lifetime)"
            }
            Query::Q5 => {
                "Nexmark q5: auctions with the most bids per 10 s sliding window, every 2 s"
            }
            Query::Q7 => "Nexmark q7: the highest bids per 10 s tumbling window",
            Query::Q8 => {
                "Nexmark q8: people who opened an auction in the 10 s tumbling window they registered in (window join)"
            }
            Query::Q11 => {
                "Nexmark q11: bids per bidder per session of activity (event-time session windows, 10 s gap)"
            }
            Query::Q12 => {
                "Nexmark q12: bids per bidder per 10 s tumbling window of processing time"
            }
        }
    }
}

/// A Nexmark query as a bundled program.
pub(crate) struct Nexmark(pub(crate) Query);

impl JobProgram for Nexmark {
    fn name(&self) -> &str {
        self.0.program()
    }
    fn description(&self) -> &str {
        self.0.description()
    }
    fn usage(&self) -> &str {
        "[--events N (default 1000000)] [--rate R (events/s over all sources, 0 = as fast as possible; default 0; event time advances by 1/R per event, by 1/10000 s when unlimited)] [--seed S (default 0)] [--out-of-order-group-size G (events come scrambled within groups of G consecutive ones, as Nexmark's outOfOrderGroupSize; default 1, in order)] [--output DIR (default: discard)]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let params = Params::parse(
            args,
            &[
                "events",
                "rate",
                "seed",
                "out-of-order-group-size",
                "output",
            ],
        )?;
        let events = params.number("events", 1_000_000)?;
        let rate = params.number("rate", 0)?;
        let seed = params.number("seed", 0)?;
        let group = params.number("out-of-order-group-size", 1)?;
        if group == 0 {
            return Err("--out-of-order-group-size must be at least 1".into());
        }
        let output = params.path("output")?;
        let mut config = generator_config(seed, rate);
        config.out_of_order_group = group;
        let source = source(env, config, events, rate);
        let sink = Sink { output };
        match self.0 {
            Query::Q0 => sink.add(&queries::q0(&source)),
            Query::Q1 => sink.add(&queries::q1(&source)),
            Query::Q2 => sink.add(&queries::q2(&source)),
            Query::Q3 => sink.add(&queries::q3(&source)),
            Query::Q4 => sink.add(&queries::q4(&source)),
            Query::Q5 => sink.add(&queries::q5(&source)),
            Query::Q7 => sink.add(&queries::q7(&source)),
            Query::Q8 => sink.add(&queries::q8(&source)),
            Query::Q11 => sink.add(&queries::q11(&source)),
            Query::Q12 => sink.add(&queries::q12(&source)),
        }
        Ok(format!(
            "Nexmark {} ({events} events, seed {seed})",
            self.0.program().trim_start_matches("nexmark-")
        ))
    }
}

/// The generator's events `0..events` with their timestamps and watermarks, split over the
/// source's subtasks.
fn source(
    env: &StreamExecutionEnvironment,
    config: GeneratorConfig,
    events: u64,
    rate: u64,
) -> DataStream<Event> {
    let bound = Duration::from_millis(config.max_out_of_orderness_ms() as u64);
    let config = Arc::new(config);
    env.generate_bounded(events, rate, move |n| config.event(n))
        .name("Nexmark Source")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(bound)
                .with_timestamp_assigner(|e: &Event, _| e.date_time()),
        )
}

/// Where a query's results go: text files in a directory, or nowhere.
struct Sink {
    output: Option<std::path::PathBuf>,
}

impl Sink {
    fn add<T: Data + Display>(&self, results: &DataStream<T>) {
        match &self.output {
            Some(dir) => results.write_as_text(dir.clone()),
            None => results.discard(),
        };
    }
}
