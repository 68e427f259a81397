//! `auction-bids`: bids joined to the auctions they were made in, Nexmark-like, with the
//! interval join. Auction `a` opens at event time `a * 10` ms and stays open `--duration` ms;
//! bids come in event-time order, each naming an auction opened shortly before it. A bid meets
//! its auction if it came while the auction was open (`auction.time ..= auction.time +
//! duration`); the job writes one line per such pair:
//! `auction A seller S bid B bidder D price P at T`.
//!
//! [`auction`] and [`bid`] make the records, so a test can join them by brute force and
//! compare ([`expected_lines`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{JobProgram, Params};
use crate::api::{StreamExecutionEnvironment, WatermarkStrategy};

pub(crate) struct AuctionBids;

/// An auction: its id, seller and opening time (ms of event time).
#[derive(
    Clone,
    Debug,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub struct Auction {
    /// The auction's id.
    pub id: u64,
    /// Who sells.
    pub seller: u64,
    /// When it opened.
    pub time: i64,
}

/// A bid: its number, the auction it names, bidder, price and time (ms of event time).
#[derive(
    Clone,
    Debug,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub struct Bid {
    /// The bid's number.
    pub id: u64,
    /// The auction it is for.
    pub auction: u64,
    /// Who bids.
    pub bidder: u64,
    /// How much.
    pub price: u64,
    /// When.
    pub time: i64,
}

/// The `i`th auction.
pub fn auction(i: u64) -> Auction {
    Auction {
        id: i,
        seller: i % 13,
        time: i as i64 * 10,
    }
}

/// The `j`th of `bids` bids over `auctions` auctions: bids spread evenly over the time the
/// auctions open in, each naming one of the five auctions opened last before it.
pub fn bid(j: u64, bids: u64, auctions: u64) -> Bid {
    let span = auctions.max(1) * 10;
    let time = (j * span / bids.max(1)) as i64;
    let latest = (time / 10) as u64;
    Bid {
        id: j,
        auction: latest.saturating_sub(j % 5).min(auctions.saturating_sub(1)),
        bidder: j % 31,
        price: 100 + (j * 37) % 900,
        time,
    }
}

/// The output line of a bid that met its auction.
pub fn line(a: &Auction, b: &Bid) -> String {
    format!(
        "auction {} seller {} bid {} bidder {} price {} at {}",
        a.id, a.seller, b.id, b.bidder, b.price, b.time
    )
}

/// What the job writes, by brute force over every auction and bid, sorted.
pub fn expected_lines(auctions: u64, bids: u64, duration: i64) -> Vec<String> {
    let all: Vec<Auction> = (0..auctions).map(auction).collect();
    let mut lines = Vec::new();
    for j in 0..bids {
        let b = bid(j, bids, auctions);
        for a in &all {
            if a.id == b.auction && a.time <= b.time && b.time <= a.time + duration {
                lines.push(line(a, &b));
            }
        }
    }
    lines.sort();
    lines
}

impl JobProgram for AuctionBids {
    fn name(&self) -> &str {
        "auction-bids"
    }
    fn description(&self) -> &str {
        "joins bids to the auctions they were made in while open (interval join on event time); writes 'auction A seller S bid B bidder D price P at T' lines"
    }
    fn usage(&self) -> &str {
        "[--auctions N (default 1000)] [--bids M (default 5000)] [--duration MS (how long an auction stays open, default 30)] [--rate R (records/s of each source, default unlimited)] [--output DIR (default: print)]"
    }
    fn build(&self, env: &StreamExecutionEnvironment, args: &[String]) -> Result<String, String> {
        let params = Params::parse(args, &["auctions", "bids", "duration", "rate", "output"])?;
        let auctions = params.number("auctions", 1000)?;
        let bids = params.number("bids", 5000)?;
        let duration = params.number("duration", 30)?.min(i64::MAX as u64) as i64;
        let rate = params.number("rate", 0)?;
        let out_of_order = Duration::from_millis(5);
        let auction_stream = env
            .generate_bounded(auctions, rate, auction)
            .name("Auctions")
            .assign_timestamps_and_watermarks(
                WatermarkStrategy::for_bounded_out_of_orderness(out_of_order)
                    .with_timestamp_assigner(|a: &Auction, _| a.time),
            )
            .key_by(|a: &Auction| a.id);
        let bid_stream = env
            .generate_bounded(bids, rate, move |j| bid(j, bids, auctions))
            .name("Bids")
            .assign_timestamps_and_watermarks(
                WatermarkStrategy::for_bounded_out_of_orderness(out_of_order)
                    .with_timestamp_assigner(|b: &Bid, _| b.time),
            )
            .key_by(|b: &Bid| b.auction);
        let joined = auction_stream
            .interval_join(&bid_stream)
            .between(0, duration)
            .process(|a: Auction, b: Bid| line(&a, &b));
        match params.path("output")? {
            Some(dir) => joined.write_as_text(dir),
            None => joined.print(),
        };
        Ok(format!("Auction Bids ({auctions} auctions, {bids} bids)"))
    }
}
