//! `auction-bids`: bids joined to the auctions they were made in, Nexmark-like, with the
//! interval join. Auction `a` opens at event time `a * 10` ms and stays open `--duration` ms;
//! bids come in event-time order, each naming an auction opened shortly before it. A bid meets
//! its auction if it came while the auction was open (`date_time ..= expires`, its opening
//! time plus the duration); the job writes one line per such pair:
//! `auction A seller S bidder D price P at T`.
//!
//! [`auction`] and [`bid`] make the records, of Nexmark's model (`super::nexmark::model`), so a
//! test can join them by brute force and compare ([`expected_lines`]).

use std::time::Duration;

use super::nexmark::model::{Auction, Bid};
use super::{JobProgram, Params};
use crate::api::{StreamExecutionEnvironment, WatermarkStrategy};

pub(crate) struct AuctionBids;

/// The `i`th auction, open for `duration` ms (Nexmark's model; the fields this job does not
/// read are empty).
pub fn auction(i: u64, duration: i64) -> Auction {
    let time = i as i64 * 10;
    Auction {
        id: i,
        item_name: String::new(),
        description: String::new(),
        initial_bid: 0,
        reserve: 0,
        date_time: time,
        expires: time.saturating_add(duration),
        seller: i % 13,
        category: 0,
        extra: String::new(),
    }
}

/// The `j`th of `bids` bids over `auctions` auctions: bids spread evenly over the time the
/// auctions open in, each naming one of the five auctions opened last before it.
pub fn bid(j: u64, bids: u64, auctions: u64) -> Bid {
    let span = auctions.max(1) * 10;
    let time = (j * span / bids.max(1)) as i64;
    let latest = (time / 10) as u64;
    Bid {
        auction: latest.saturating_sub(j % 5).min(auctions.saturating_sub(1)),
        bidder: j % 31,
        price: 100 + (j * 37) % 900,
        channel: String::new(),
        url: String::new(),
        date_time: time,
        extra: String::new(),
    }
}

/// The output line of a bid that met its auction.
pub fn line(a: &Auction, b: &Bid) -> String {
    format!(
        "auction {} seller {} bidder {} price {} at {}",
        a.id, a.seller, b.bidder, b.price, b.date_time
    )
}

/// What the job writes, by brute force over every auction and bid, sorted.
pub fn expected_lines(auctions: u64, bids: u64, duration: i64) -> Vec<String> {
    let all: Vec<Auction> = (0..auctions).map(|i| auction(i, duration)).collect();
    let mut lines = Vec::new();
    for j in 0..bids {
        let b = bid(j, bids, auctions);
        for a in &all {
            if a.id == b.auction && a.date_time <= b.date_time && b.date_time <= a.expires {
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
        "joins bids to the auctions they were made in while open (interval join on event time); writes 'auction A seller S bidder D price P at T' lines"
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
            .generate_bounded(auctions, rate, move |i| auction(i, duration))
            .name("Auctions")
            .assign_timestamps_and_watermarks(
                WatermarkStrategy::for_bounded_out_of_orderness(out_of_order)
                    .with_timestamp_assigner(|a: &Auction, _| a.date_time),
            )
            .key_by(|a: &Auction| a.id);
        let bid_stream = env
            .generate_bounded(bids, rate, move |j| bid(j, bids, auctions))
            .name("Bids")
            .assign_timestamps_and_watermarks(
                WatermarkStrategy::for_bounded_out_of_orderness(out_of_order)
                    .with_timestamp_assigner(|b: &Bid, _| b.date_time),
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
