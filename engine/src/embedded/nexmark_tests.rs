//! Each query run on an embedded cluster of two TaskManagers at parallelism 2, its output
//! compared with a plain computation over the same generated events in a `Vec`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::two_inputs::output_of;
use crate::config::Config;
use crate::examples::nexmark::generator::GeneratorConfig;
use crate::examples::nexmark::model::{Bid, Event};
use crate::examples::nexmark::queries::{
    AUCTION_SKIP, AuctionPrice, BidderWindow, CategoryPrice, HotItem, LocalItem, NewUser,
    Q3_CATEGORY, Q3_STATES, SESSION_GAP, euro_bid,
};
use crate::examples::nexmark::{Query, generator_config};

/// 20 s of event time at the default 10 000 events/s: two 10 s windows and a part.
const EVENTS: u64 = 200_000;
const SEED: u64 = 42;
const WINDOW_MS: i64 = 10_000;
const SLIDE_MS: i64 = 2_000;

fn events() -> Vec<Event> {
    events_out_of_order(1)
}

fn bids(events: &[Event]) -> impl Iterator<Item = &Bid> {
    events.iter().filter_map(|e| match e {
        Event::Bid(b) => Some(b),
        _ => None,
    })
}

fn sorted(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut lines: Vec<String> = lines.into_iter().collect();
    lines.sort();
    lines
}

/// Runs `query` over the events at parallelism 2 and returns its output files' lines, each
/// file's in order, the files one after the other.
async fn run(query: Query) -> Vec<String> {
    run_with(query, Config::default()).await
}

/// [`run`] on a cluster with `config`.
async fn run_with(query: Query, config: Config) -> Vec<String> {
    let args = format!("--events {EVENTS} --seed {SEED}");
    output_of(config, (2, 1), query.program(), &args, 2).await
}

/// The events with out-of-order groups of `group`.
fn events_out_of_order(group: u64) -> Vec<Event> {
    let mut config: GeneratorConfig = generator_config(SEED, 0);
    config.out_of_order_group = group;
    (0..EVENTS).map(|n| config.event(n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q0_passes_every_bid_through() {
    let events = events();
    let expected = sorted(bids(&events).map(ToString::to_string));
    assert_eq!(expected.len() as u64, EVENTS / 50 * 46);
    assert_eq!(sorted(run(Query::Q0).await), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q1_converts_every_price_to_euros() {
    let events = events();
    let expected = sorted(bids(&events).map(|b| euro_bid(b).to_string()));
    assert_eq!(sorted(run(Query::Q1).await), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q2_selects_the_bids_of_every_123rd_auction() {
    let events = events();
    let expected = sorted(
        bids(&events)
            .filter(|b| b.auction % AUCTION_SKIP == 0)
            .map(|b| {
                AuctionPrice {
                    auction: b.auction,
                    price: b.price,
                }
                .to_string()
            }),
    );
    assert!(expected.len() > 100, "{}", expected.len());
    assert_eq!(sorted(run(Query::Q2).await), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q3_joins_local_sellers_with_their_category_10_auctions() {
    let events = events();
    let mut sellers = HashMap::new();
    for e in &events {
        if let Event::Person(p) = e
            && Q3_STATES.contains(&p.state.as_str())
        {
            sellers.insert(p.id, p.clone());
        }
    }
    let mut expected = Vec::new();
    for e in &events {
        if let Event::Auction(a) = e
            && a.category == Q3_CATEGORY
            && let Some(p) = sellers.get(&a.seller)
        {
            let item = LocalItem {
                name: p.name.clone(),
                city: p.city.clone(),
                state: p.state.clone(),
                auction: a.id,
            };
            expected.push(item.to_string());
        }
    }
    let expected = sorted(expected);
    assert!(expected.len() > 50, "{}", expected.len());
    assert_eq!(sorted(run(Query::Q3).await), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q4_averages_the_winning_bids_per_category() {
    let events = events();
    let mut best: HashMap<u64, u64> = HashMap::new();
    let auctions: HashMap<u64, _> = events
        .iter()
        .filter_map(|e| match e {
            Event::Auction(a) => Some((a.id, a.clone())),
            _ => None,
        })
        .collect();
    for b in bids(&events) {
        if let Some(a) = auctions.get(&b.auction)
            && a.date_time <= b.date_time
            && b.date_time <= a.expires
        {
            let price = best.entry(a.id).or_default();
            *price = (*price).max(b.price);
        }
    }
    let mut totals: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (id, price) in &best {
        let total = totals.entry(auctions[id].category).or_default();
        total.0 += price;
        total.1 += 1;
    }
    let got = run(Query::Q4).await;
    // One update per auction closed with a bid; a category's last is its average over all.
    assert_eq!(got.len(), best.len());
    let mut last = BTreeMap::new();
    for line in &got {
        let (category, average) = line.split_once(',').unwrap();
        last.insert(category.parse::<u64>().unwrap(), average.to_string());
    }
    let expected: BTreeMap<u64, String> = totals
        .iter()
        .map(|(c, (sum, count))| {
            let average = CategoryPrice {
                category: *c,
                average: sum / count,
            };
            let line = average.to_string();
            (*c, line.split_once(',').unwrap().1.to_string())
        })
        .collect();
    assert_eq!(expected.len(), 5);
    assert_eq!(last, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q5_finds_the_auctions_with_the_most_bids_per_sliding_window() {
    assert_eq!(sorted(run(Query::Q5).await), expected_q5(&events()));
}

/// With events out of order in groups of 1234 (123.4 ms of event time, so some straddle the
/// windows' 2 s boundaries) and a watermark every
/// millisecond, the watermarks trail by the groups' span and no bid is too late for its
/// windows: the same hot items (with watermarks not trailing, bids go missing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q5_is_exact_with_events_out_of_order() {
    let args = format!("--events {EVENTS} --seed {SEED} --out-of-order-group-size 1234");
    let mut config = Config::default();
    config
        .set("pipeline.auto-watermark-interval", "1 ms")
        .unwrap();
    let got = output_of(config, (2, 1), Query::Q5.program(), &args, 2).await;
    let events = events_out_of_order(1234);
    assert_ne!(events, self::events(), "scrambled");
    assert_eq!(sorted(got), expected_q5(&events));
}

/// q5 computed directly.
fn expected_q5(events: &[Event]) -> Vec<String> {
    let mut counts: BTreeMap<i64, HashMap<u64, u64>> = BTreeMap::new();
    for b in bids(events) {
        let last_start = b.date_time - b.date_time.rem_euclid(SLIDE_MS);
        let mut start = last_start;
        while start > b.date_time - WINDOW_MS {
            *counts
                .entry(start)
                .or_default()
                .entry(b.auction)
                .or_default() += 1;
            start -= SLIDE_MS;
        }
    }
    let mut expected = Vec::new();
    for (start, per_auction) in &counts {
        let max = per_auction.values().max().copied().unwrap_or(0);
        for (auction, n) in per_auction {
            if *n == max {
                let item = HotItem {
                    start: *start,
                    auction: *auction,
                    bids: *n,
                };
                expected.push(item.to_string());
            }
        }
    }
    assert!(counts.len() >= 10, "{} windows", counts.len());
    sorted(expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q7_finds_the_highest_bids_per_tumbling_window() {
    let events = events();
    let mut highest: BTreeMap<i64, (u64, Vec<&Bid>)> = BTreeMap::new();
    for b in bids(&events) {
        let start = b.date_time - b.date_time.rem_euclid(WINDOW_MS);
        let entry = highest.entry(start).or_insert((0, Vec::new()));
        if b.price > entry.0 {
            *entry = (b.price, vec![b]);
        } else if b.price == entry.0 {
            entry.1.push(b);
        }
    }
    let expected = sorted(
        highest
            .values()
            .flat_map(|(_, bids)| bids.iter().map(|b| b.to_string())),
    );
    assert!(highest.len() >= 2);
    assert_eq!(sorted(run(Query::Q7).await), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q8_finds_people_who_opened_an_auction_in_the_window_they_registered_in() {
    assert_eq!(sorted(run(Query::Q8).await), expected_q8());
}

/// q8's window join keeps its state in RocksDB as well, through checkpoints every 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q8_window_join_gives_the_same_with_rocksdb_state_and_checkpoints() {
    let checkpoints = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.set("state.backend.type", "rocksdb").unwrap();
    config
        .set("execution.checkpointing.interval", "100 ms")
        .unwrap();
    let dir = checkpoints.path().display().to_string();
    config.set("execution.checkpointing.dir", &dir).unwrap();
    assert_eq!(sorted(run_with(Query::Q8, config).await), expected_q8());
}

/// q8 computed directly: each person whose id sold an auction in the window they registered
/// in, once.
fn expected_q8() -> Vec<String> {
    let events = events();
    let start = |t: i64| t - t.rem_euclid(WINDOW_MS);
    let mut sellers = BTreeSet::new();
    for e in &events {
        if let Event::Auction(a) = e {
            sellers.insert((a.seller, start(a.date_time)));
        }
    }
    let mut expected = Vec::new();
    for e in &events {
        if let Event::Person(p) = e
            && sellers.contains(&(p.id, start(p.date_time)))
        {
            let user = NewUser {
                id: p.id,
                name: p.name.clone(),
                start: start(p.date_time),
            };
            expected.push(user.to_string());
        }
    }
    let expected = sorted(expected);
    assert!(expected.len() > 100, "{}", expected.len());
    expected
}

/// q11 computed directly: each bidder's bid times in order, cut where the next bid comes more
/// than the gap after the last (a bid exactly `gap` after the last touches its session's end,
/// and touching sessions merge).
fn expected_q11() -> Vec<String> {
    let events = events();
    let gap = SESSION_GAP.as_millis() as i64;
    let mut times: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for b in bids(&events) {
        times.entry(b.bidder).or_default().push(b.date_time);
    }
    let mut expected = Vec::new();
    for (bidder, mut times) in times {
        times.sort();
        let mut session: Option<(i64, i64, u64)> = None;
        for t in times {
            session = match session {
                Some((start, last, n)) if t <= last + gap => Some((start, t, n + 1)),
                other => {
                    if let Some((start, last, bids)) = other {
                        expected.push((bidder, bids, start, last + gap));
                    }
                    Some((t, t, 1))
                }
            };
        }
        if let Some((start, last, bids)) = session {
            expected.push((bidder, bids, start, last + gap));
        }
    }
    assert!(
        expected.len() > 1_000,
        "{} sessions: too few to test much",
        expected.len()
    );
    let lines = expected.into_iter().map(|(bidder, bids, start, end)| {
        BidderWindow {
            bidder,
            bids,
            start,
            end,
        }
        .to_string()
    });
    sorted(lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q11_counts_the_bids_of_each_bidder_session() {
    assert_eq!(sorted(run(Query::Q11).await), expected_q11());
}

/// q11's session windows merge accumulators in RocksDB too, through checkpoints every 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q11_gives_the_same_with_rocksdb_state_and_checkpoints() {
    let checkpoints = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.set("state.backend.type", "rocksdb").unwrap();
    config
        .set("execution.checkpointing.interval", "100 ms")
        .unwrap();
    let dir = checkpoints.path().display().to_string();
    config.set("execution.checkpointing.dir", &dir).unwrap();
    assert_eq!(sorted(run_with(Query::Q11, config).await), expected_q11());
}

/// q12's windows are of processing time, so which window a bid lands in depends on when it
/// was handled; what does not: every bid is counted once (the windows left at the end of
/// input fire then), in windows of 10 s aligned to the epoch, one result per bidder and window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q12_counts_every_bid_once_in_aligned_processing_time_windows() {
    let events = events();
    let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
    for b in bids(&events) {
        *expected.entry(b.bidder).or_default() += 1;
    }
    let mut got: BTreeMap<u64, u64> = BTreeMap::new();
    let mut windows = BTreeSet::new();
    for line in run(Query::Q12).await {
        let fields: Vec<i64> = line
            .split(',')
            .map(|f| f.parse().unwrap_or_else(|_| panic!("{line}")))
            .collect();
        let [bidder, bids, start, end] = fields[..] else {
            panic!("{line}");
        };
        assert_eq!(end - start, WINDOW_MS, "{line}");
        assert_eq!(start.rem_euclid(WINDOW_MS), 0, "{line}");
        assert!(bids > 0, "{line}");
        assert!(windows.insert((bidder, start)), "emitted twice: {line}");
        *got.entry(bidder as u64).or_default() += bids as u64;
    }
    assert_eq!(got, expected);
}
