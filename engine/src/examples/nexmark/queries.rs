//! The Nexmark queries over the generator's event stream, with the semantics of Flink's Nexmark
//! SQL queries, and their result records (one text line each).

use std::fmt;
use std::time::Duration;

use super::model::{Bid, Event};
use crate::api::{
    AggregateFunction, Collector, Context, DataStream, EventTimeSessionWindows,
    KeyedCoProcessFunction, KeyedProcessFunction, SlidingEventTimeWindows, TaskError, TimeWindow,
    TumblingEventTimeWindows, TumblingProcessingTimeWindows,
};
use crate::record::Data;
use crate::state::{KeyedStateStore, ListState, ValueState};

/// The window of q5, q7 and q8.
pub const WINDOW: Duration = Duration::from_secs(10);
/// How often q5's sliding window starts.
pub const SLIDE: Duration = Duration::from_secs(2);
/// The gap that closes a bidder's session in q11.
pub const SESSION_GAP: Duration = Duration::from_secs(10);
/// q2 keeps the bids of auctions whose id is a multiple of this.
pub const AUCTION_SKIP: u64 = 123;
/// The states q3's sellers live in.
pub const Q3_STATES: [&str; 3] = ["OR", "ID", "CA"];
/// The category q3's auctions are of.
pub const Q3_CATEGORY: u64 = 10;

record!(
    /// q1's result: a bid with its price in euros, in thousandths of a cent (× 908).
    EuroBid {
        /// The auction.
        auction: u64,
        /// The bidder.
        bidder: u64,
        /// The price × 908: euros with five decimals.
        price_milli_cents: u64,
        /// When.
        date_time: i64,
    }
);

record!(
    /// q2's result.
    AuctionPrice {
        /// The auction.
        auction: u64,
        /// The bid's price.
        price: u64,
    }
);

record!(
    /// q3's result: an auction and its seller.
    LocalItem {
        /// The seller's name.
        name: String,
        /// The seller's city.
        city: String,
        /// The seller's state.
        state: String,
        /// The auction.
        auction: u64,
    }
);

record!(
    /// q4's result: the average closing price of a category so far (integer, as Flink's `AVG`
    /// of a `BIGINT`).
    CategoryPrice {
        /// The category.
        category: u64,
        /// The average of its auctions' winning bids.
        average: u64,
    }
);

record!(
    /// q5's result: an auction with the most bids in a window.
    HotItem {
        /// The window's start.
        start: i64,
        /// The auction.
        auction: u64,
        /// Its bids in the window.
        bids: u64,
    }
);

record!(
    /// q8's result: a person who opened an auction in the window they registered in.
    NewUser {
        /// The person.
        id: u64,
        /// Their name.
        name: String,
        /// The window's start.
        start: i64,
    }
);

record!(
    /// q11's and q12's result: a bidder's bids in a window.
    BidderWindow {
        /// The bidder.
        bidder: u64,
        /// Their bids in the window.
        bids: u64,
        /// The window's start.
        start: i64,
        /// The window's end.
        end: i64,
    }
);

impl fmt::Display for BidderWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{},{}",
            self.bidder, self.bids, self.start, self.end
        )
    }
}

impl fmt::Display for EuroBid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cents = self.price_milli_cents;
        write!(
            f,
            "{},{},{}.{:05},{}",
            self.auction,
            self.bidder,
            cents / 100_000,
            cents % 100_000,
            self.date_time
        )
    }
}

impl fmt::Display for AuctionPrice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.auction, self.price)
    }
}

impl fmt::Display for LocalItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{},{}",
            self.name, self.city, self.state, self.auction
        )
    }
}

impl fmt::Display for CategoryPrice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.category, self.average)
    }
}

impl fmt::Display for HotItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{}", self.start, self.auction, self.bids)
    }
}

impl fmt::Display for NewUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{}", self.id, self.name, self.start)
    }
}

/// q1's conversion of a bid.
pub fn euro_bid(bid: &Bid) -> EuroBid {
    EuroBid {
        auction: bid.auction,
        bidder: bid.bidder,
        price_milli_cents: bid.price * 908,
        date_time: bid.date_time,
    }
}

fn bids(events: &DataStream<Event>) -> DataStream<Bid> {
    events.flat_map(Event::into_bid).name("Bids")
}

/// q0: every bid.
pub fn q0(events: &DataStream<Event>) -> DataStream<Bid> {
    bids(events)
}

/// q1: every bid, its price in euros.
pub fn q1(events: &DataStream<Event>) -> DataStream<EuroBid> {
    events
        .flat_map(|e: Event| e.into_bid().map(|b| euro_bid(&b)))
        .name("Euro Bids")
}

/// q2: the bids of every 123rd auction.
pub fn q2(events: &DataStream<Event>) -> DataStream<AuctionPrice> {
    events
        .flat_map(|e: Event| {
            e.into_bid()
                .filter(|b| b.auction.is_multiple_of(AUCTION_SKIP))
                .map(|b| AuctionPrice {
                    auction: b.auction,
                    price: b.price,
                })
        })
        .name("Selection")
}

/// q3: auctions of category 10 joined with their sellers from OR, ID or CA, by seller (a
/// regular join: each side is kept until it can meet nothing more).
pub fn q3(events: &DataStream<Event>) -> DataStream<LocalItem> {
    let people = events
        .flat_map(|e: Event| {
            e.into_person()
                .filter(|p| Q3_STATES.contains(&p.state.as_str()))
                .map(|p| (p.id, p.name, p.city, p.state))
        })
        .name("Local People")
        .key_by(|p: &(u64, String, String, String)| p.0);
    let auctions = events
        .flat_map(|e: Event| {
            e.into_auction()
                .filter(|a| a.category == Q3_CATEGORY)
                .map(|a| (a.seller, a.id))
        })
        .name("Category Auctions")
        .key_by(|a: &(u64, u64)| a.0);
    people
        .connect(&auctions)
        .process(|store: &KeyedStateStore| {
            Ok(SellerJoin {
                seller: store.value_state("q3-seller")?,
                waiting: store.list_state("q3-auctions")?,
            })
        })
        .name("Seller Join")
}

/// q3's join per seller: the seller once registered, and the auctions that came before them.
/// People register once, so an auction that met its seller need not be kept.
struct SellerJoin {
    seller: ValueState<(String, String, String)>,
    waiting: ListState<u64>,
}

impl KeyedCoProcessFunction<u64, (u64, String, String, String), (u64, u64), LocalItem>
    for SellerJoin
{
    fn process_element1(
        &mut self,
        _key: &u64,
        (_, name, city, state): (u64, String, String, String),
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, LocalItem>,
    ) -> Result<(), TaskError> {
        for auction in self.waiting.get()? {
            out.collect(LocalItem {
                name: name.clone(),
                city: city.clone(),
                state: state.clone(),
                auction,
            })?;
        }
        self.waiting.clear()?;
        self.seller.update((name, city, state))?;
        Ok(())
    }

    fn process_element2(
        &mut self,
        _key: &u64,
        (_, auction): (u64, u64),
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, LocalItem>,
    ) -> Result<(), TaskError> {
        match self.seller.value()? {
            Some((name, city, state)) => out.collect(LocalItem {
                name,
                city,
                state,
                auction,
            }),
            None => Ok(self.waiting.add(auction)?),
        }
    }
}

/// What q4 keeps of an auction: when it opened and closes, and its category.
type Lifetime = (i64, i64, u64);

/// q4: each auction's winning bid (the highest within its lifetime, `date_time ..= expires`),
/// when it closes; then the running average of the winning prices per category, updated with
/// every auction that closes with a bid.
pub fn q4(events: &DataStream<Event>) -> DataStream<CategoryPrice> {
    let auctions = events
        .flat_map(|e: Event| {
            e.into_auction()
                .map(|a| (a.id, (a.date_time, a.expires, a.category)))
        })
        .name("Auctions")
        .key_by(|a: &(u64, Lifetime)| a.0);
    let bids = events
        .flat_map(|e: Event| e.into_bid().map(|b| (b.auction, b.date_time, b.price)))
        .name("Bids")
        .key_by(|b: &(u64, i64, u64)| b.0);
    auctions
        .connect(&bids)
        .process(|store: &KeyedStateStore| {
            Ok(WinningBid {
                lifetime: store.value_state("q4-auction")?,
                best: store.value_state("q4-best")?,
                early: store.list_state("q4-early-bids")?,
            })
        })
        .name("Winning Bids")
        .key_by(|w: &(u64, u64)| w.0)
        .process(|store: &KeyedStateStore| {
            Ok(CategoryAverage {
                totals: store.value_state("q4-category")?,
            })
        })
        .name("Average Per Category")
}

/// q4's winning bid of an auction: the highest bid within its lifetime, emitted as `(category,
/// price)` when the watermark passes its expiry. Bids that come before their auction (from
/// another source subtask) wait for it until the watermark passes their time: an auction
/// opened after that cannot have them in its lifetime.
struct WinningBid {
    lifetime: ValueState<Lifetime>,
    best: ValueState<u64>,
    early: ListState<(i64, u64)>,
}

impl WinningBid {
    fn offer(
        &self,
        (opened, expires, _): Lifetime,
        time: i64,
        price: u64,
    ) -> Result<(), TaskError> {
        if opened <= time && time <= expires {
            self.best.update_with(|best| best.unwrap_or(0).max(price))?;
        }
        Ok(())
    }
}

impl KeyedCoProcessFunction<u64, (u64, Lifetime), (u64, i64, u64), (u64, u64)> for WinningBid {
    fn process_element1(
        &mut self,
        _key: &u64,
        (_, lifetime): (u64, Lifetime),
        ctx: &mut Context<'_>,
        _out: &mut Collector<'_, (u64, u64)>,
    ) -> Result<(), TaskError> {
        self.lifetime.update(lifetime)?;
        for (time, price) in self.early.get()? {
            self.offer(lifetime, time, price)?;
        }
        self.early.clear()?;
        ctx.register_event_time_timer(lifetime.1)
    }

    fn process_element2(
        &mut self,
        _key: &u64,
        (_, time, price): (u64, i64, u64),
        ctx: &mut Context<'_>,
        _out: &mut Collector<'_, (u64, u64)>,
    ) -> Result<(), TaskError> {
        match self.lifetime.value()? {
            Some(lifetime) => self.offer(lifetime, time, price),
            None => {
                self.early.add((time, price))?;
                ctx.register_event_time_timer(time)
            }
        }
    }

    fn on_timer(
        &mut self,
        _key: &u64,
        timestamp: i64,
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, (u64, u64)>,
    ) -> Result<(), TaskError> {
        match self.lifetime.value()? {
            Some((_, expires, category)) if expires == timestamp => {
                if let Some(price) = self.best.value()? {
                    out.collect((category, price))?;
                }
                self.lifetime.clear()?;
                self.best.clear()?;
                Ok(())
            }
            Some(_) => Ok(()),
            None => {
                let early = self.early.get()?;
                let keep: Vec<(i64, u64)> =
                    early.into_iter().filter(|(t, _)| *t > timestamp).collect();
                Ok(self.early.update(keep)?)
            }
        }
    }
}

/// q4's running average per category: the sum and count of the winning prices so far.
struct CategoryAverage {
    totals: ValueState<(u64, u64)>,
}

impl KeyedProcessFunction<u64, (u64, u64), CategoryPrice> for CategoryAverage {
    fn process(
        &mut self,
        _key: &u64,
        (category, price): (u64, u64),
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, CategoryPrice>,
    ) -> Result<(), TaskError> {
        let (sum, count) = self
            .totals
            .update_with(|t| t.map_or((price, 1), |(s, c)| (s + price, c + 1)))?;
        out.collect(CategoryPrice {
            category,
            average: sum / count,
        })
    }
}

/// q5: the bids per auction in 10 s windows sliding by 2 s, then per window the auctions with
/// the most.
pub fn q5(events: &DataStream<Event>) -> DataStream<HotItem> {
    let windows = SlidingEventTimeWindows::of(WINDOW, SLIDE);
    events
        .flat_map(|e: Event| e.into_bid().map(|b| (b.auction, 1u64)))
        .name("Bid Auctions")
        .key_by(|b: &(u64, u64)| b.0)
        .window(windows)
        .reduce_with(
            |(auction, a), (_, b)| (auction, a + b),
            |auction: &u64, window, (_, bids)| {
                let item = HotItem {
                    start: window.start,
                    auction: *auction,
                    bids,
                };
                (window.start, bids, vec![item])
            },
        )
        .key_by(|c: &Top<HotItem>| c.0)
        .process(|store: &KeyedStateStore| TopPerWindow::open(store))
        .name("Hottest Per Window")
}

/// q7: per 10 s tumbling window, the bids with the highest price (the highest of each auction
/// first, then of all).
pub fn q7(events: &DataStream<Event>) -> DataStream<Bid> {
    events
        .flat_map(|e: Event| e.into_bid().map(|b| (b.auction, b.price, vec![b])))
        .name("Priced Bids")
        .key_by(|b: &(u64, u64, Vec<Bid>)| b.0)
        .window(TumblingEventTimeWindows::of(WINDOW))
        .reduce_with(
            |(auction, a, xs), (_, b, ys)| {
                let (price, bids) = higher(a, xs, b, ys);
                (auction, price, bids)
            },
            |_: &u64, window, (_, price, bids)| (window.start, price, bids),
        )
        .key_by(|c: &Top<Bid>| c.0)
        .process(|store: &KeyedStateStore| TopPerWindow::open(store))
        .name("Highest Per Window")
}

/// The higher scored of two groups, both merged when they tie.
fn higher<T>(a: u64, mut xs: Vec<T>, b: u64, ys: Vec<T>) -> (u64, Vec<T>) {
    match a.cmp(&b) {
        std::cmp::Ordering::Greater => (a, xs),
        std::cmp::Ordering::Less => (b, ys),
        std::cmp::Ordering::Equal => {
            xs.extend(ys);
            (a, xs)
        }
    }
}

/// A window's candidates: `(window start, score, items)`.
pub type Top<T> = (i64, u64, Vec<T>);

/// The items with the highest score per window, the window being the key: candidates come
/// stamped with the window's end - 1 from a window operator before, and when the watermark
/// passes that, every candidate of the window has come.
struct TopPerWindow<T> {
    best: ValueState<(u64, Vec<T>)>,
}

impl<T: Data> TopPerWindow<T> {
    fn open(store: &KeyedStateStore) -> Result<Self, TaskError> {
        Ok(TopPerWindow {
            best: store.value_state("top-per-window")?,
        })
    }
}

impl<T: Data> KeyedProcessFunction<i64, Top<T>, T> for TopPerWindow<T> {
    fn process(
        &mut self,
        _key: &i64,
        (_, score, items): Top<T>,
        ctx: &mut Context<'_>,
        _out: &mut Collector<'_, T>,
    ) -> Result<(), TaskError> {
        let best = match self.best.value()? {
            Some((top, kept)) => higher(top, kept, score, items),
            None => (score, items),
        };
        self.best.update(best)?;
        match ctx.timestamp() {
            Some(ts) => ctx.register_event_time_timer(ts),
            None => Err(TaskError::User(
                "the top per window needs timestamps".into(),
            )),
        }
    }

    fn on_timer(
        &mut self,
        _key: &i64,
        _timestamp: i64,
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, T>,
    ) -> Result<(), TaskError> {
        if let Some((_, items)) = self.best.value()? {
            for item in items {
                out.collect(item)?;
            }
        }
        Ok(self.best.clear()?)
    }
}

/// q8: people who opened an auction in the 10 s tumbling window they registered in (a window
/// join of people and auctions by person id = seller; one result per person and window).
pub fn q8(events: &DataStream<Event>) -> DataStream<NewUser> {
    let people = events
        .flat_map(|e: Event| e.into_person().map(|p| (p.id, p.name)))
        .name("People");
    let sellers = events
        .flat_map(|e: Event| e.into_auction().map(|a| a.seller))
        .name("Sellers");
    people
        .join(&sellers)
        .where_key(|p: &(u64, String)| p.0)
        .equal_to(|s: &u64| *s)
        .window(TumblingEventTimeWindows::of(WINDOW))
        .co_group(
            |id: &u64, window, people: Vec<(u64, String)>, auctions: Vec<u64>| {
                let person = people.into_iter().next().filter(|_| !auctions.is_empty());
                person.map(|(_, name)| NewUser {
                    id: *id,
                    name,
                    start: window.start,
                })
            },
        )
}

/// Counts what it is given (SQL's `COUNT(*)`).
#[derive(Clone, Copy)]
struct Count;

impl<T> AggregateFunction<T, u64, u64> for Count {
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _value: T, count: u64) -> u64 {
        count + 1
    }
    fn get_result(&self, count: u64) -> u64 {
        count
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

fn bidder_window(bidder: &u64, window: TimeWindow, bids: u64) -> BidderWindow {
    BidderWindow {
        bidder: *bidder,
        bids,
        start: window.start,
        end: window.end,
    }
}

/// q11: the bids of each bidder per session of activity, a session closing after 10 s without
/// a bid (event-time session windows, counted incrementally).
pub fn q11(events: &DataStream<Event>) -> DataStream<BidderWindow> {
    bids(events)
        .key_by(|b: &Bid| b.bidder)
        .window(EventTimeSessionWindows::with_gap(SESSION_GAP))
        .aggregate_with(Count, bidder_window)
        .name("User Sessions")
}

/// q12: the bids of each bidder per 10 s tumbling window of processing time.
pub fn q12(events: &DataStream<Event>) -> DataStream<BidderWindow> {
    bids(events)
        .key_by(|b: &Bid| b.bidder)
        .window(TumblingProcessingTimeWindows::of(WINDOW))
        .aggregate_with(Count, bidder_window)
        .name("Processing Time Windows")
}
