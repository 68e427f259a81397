//! Nexmark's event generator, as a pure function of the event number: event `n` of a run is the
//! same whatever the parallelism and whichever subtask makes it, so each source subtask
//! generates its own share of the numbers (`generate_bounded` hands subtask `i` of `p` the
//! numbers `i, i + p, ...`) and a test can generate the same events into a `Vec`.
//!
//! The facts follow Nexmark's reference generator (Beam's and Flink's Nexmark suites): of every
//! 50 events 1 is a person, 3 are auctions and 46 are bids; ids start at 1000; bids go mostly
//! to hot auctions and come mostly from hot bidders, auctions mostly from hot sellers; prices
//! are `10^(6x)` cents for a uniform `x`; people live in six US states; an auction stays open
//! for a random time around how long it takes until 100 more auctions have opened. Event `n`
//! happens at `base + n / rate`; with an out-of-order group of `g` events, the events within
//! each group of `g` consecutive numbers come in a scrambled order, so event time goes back
//! by less than `g / rate`.

use super::model::{Auction, Bid, Event, Person};

/// Ids of people start here, as in the reference generator (so small runs still match).
pub const FIRST_PERSON_ID: u64 = 1000;
/// Ids of auctions start here.
pub const FIRST_AUCTION_ID: u64 = 1000;
/// The first of the categories.
pub const FIRST_CATEGORY_ID: u64 = 10;
/// How many categories there are.
pub const NUM_CATEGORIES: u64 = 5;
/// People among every [`TOTAL_PROPORTION`] events.
pub const PERSON_PROPORTION: u64 = 1;
/// Auctions among every [`TOTAL_PROPORTION`] events.
pub const AUCTION_PROPORTION: u64 = 3;
/// Bids among every [`TOTAL_PROPORTION`] events.
pub const BID_PROPORTION: u64 = 46;
/// The events of one round of the proportions.
pub const TOTAL_PROPORTION: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;

/// The states people live in, and their cities.
pub const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const US_CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];
const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];
const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
const HOT_URLS: [&str; 4] = [
    "https://www.nexmark.com/Google/item.htm?query=1",
    "https://www.nexmark.com/Facebook/item.htm?query=1",
    "https://www.nexmark.com/Baidu/item.htm?query=1",
    "https://www.nexmark.com/Apple/item.htm?query=1",
];
/// Channels other than the hot ones are `channel-N` for N below this.
const CHANNELS: u64 = 10_000;

/// Ids of people and auctions a bid or auction may name beyond the newest one (the reference
/// generator's lead: some bids are for auctions not yet opened).
const ID_LEAD: u64 = 10;

/// How the generator draws events: Nexmark's knobs with its default values.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorConfig {
    /// Seeds every event's random draws (with its number).
    pub seed: u64,
    /// Event-time distance between consecutive events, µs (1 000 000 / events per second).
    pub inter_event_delay_us: f64,
    /// When event 0 happens, ms since the epoch.
    pub base_time: i64,
    /// Events are scrambled within groups of this many consecutive numbers (1: in order).
    pub out_of_order_group: u64,
    /// Auctions open at a time; an auction lasts about as long as it takes this many to open.
    pub in_flight_auctions: u64,
    /// People recently registered who sell and bid.
    pub active_people: u64,
    /// 1 in this many bids goes to any open auction, the others to a hot one.
    pub hot_auction_ratio: u64,
    /// 1 in this many auctions is by any active seller, the others by a hot one.
    pub hot_sellers_ratio: u64,
    /// 1 in this many bids is by any active bidder, the others by a hot one.
    pub hot_bidders_ratio: u64,
    /// 1 in this many bids comes from any channel, the others from a hot one.
    pub hot_channels_ratio: u64,
    /// Average size of a person, bytes (the `extra` field pads to it).
    pub avg_person_bytes: usize,
    /// Average size of an auction, bytes.
    pub avg_auction_bytes: usize,
    /// Average size of a bid, bytes.
    pub avg_bid_bytes: usize,
}

impl GeneratorConfig {
    /// The reference generator's defaults for `seed`, with events `rate` per second of event
    /// time (at least 1) from `base_time`.
    pub fn new(seed: u64, rate: u64, base_time: i64) -> GeneratorConfig {
        GeneratorConfig {
            seed,
            inter_event_delay_us: 1_000_000.0 / rate.max(1) as f64,
            base_time,
            out_of_order_group: 1,
            in_flight_auctions: 100,
            active_people: 1000,
            hot_auction_ratio: 2,
            hot_sellers_ratio: 4,
            hot_bidders_ratio: 4,
            hot_channels_ratio: 2,
            avg_person_bytes: 200,
            avg_auction_bytes: 500,
            avg_bid_bytes: 100,
        }
    }

    /// When the event with id `id` happens.
    pub fn timestamp(&self, id: u64) -> i64 {
        self.base_time + (id as f64 * self.inter_event_delay_us / 1000.0) as i64
    }

    /// How far event time can go back from one event to the next of a source subtask, ms: the
    /// span of an out-of-order group.
    pub fn max_out_of_orderness_ms(&self) -> i64 {
        (self.out_of_order_group as f64 * self.inter_event_delay_us / 1000.0).ceil() as i64
    }

    /// The id of the `n`th event generated: `n` scrambled within its out-of-order group.
    pub fn event_id(&self, n: u64) -> u64 {
        let g = self.out_of_order_group.max(1);
        let base = n / g * g;
        // Stepping by 953 through the group (as the reference generator does) is a
        // permutation of it when 953, a prime, does not divide the group's size.
        if g.is_multiple_of(953) {
            return n;
        }
        base + (n % g).wrapping_mul(953) % g
    }

    /// The `n`th event generated.
    pub fn event(&self, n: u64) -> Event {
        let id = self.event_id(n);
        let mut random = Random::new(self.seed, id);
        let timestamp = self.timestamp(id);
        match id % TOTAL_PROPORTION {
            r if r < PERSON_PROPORTION => Event::Person(self.person(id, &mut random, timestamp)),
            r if r < PERSON_PROPORTION + AUCTION_PROPORTION => {
                Event::Auction(self.auction(id, &mut random, timestamp))
            }
            _ => Event::Bid(self.bid(id, &mut random, timestamp)),
        }
    }

    fn person(&self, id: u64, random: &mut Random, timestamp: i64) -> Person {
        let name = format!("{} {}", random.pick(&FIRST_NAMES), random.pick(&LAST_NAMES));
        let email_address = format!(
            "{}@{}.com",
            random.string(7, false),
            random.string(5, false)
        );
        let credit_card = (0..4)
            .map(|_| format!("{:04}", random.below(10_000)))
            .collect::<Vec<_>>()
            .join(" ");
        let city = random.pick(&US_CITIES).to_string();
        let state = random.pick(&US_STATES).to_string();
        let size = 8 + name.len() + email_address.len() + credit_card.len() + city.len() + 2;
        Person {
            id: last_person(id) + FIRST_PERSON_ID,
            name,
            email_address,
            credit_card,
            city,
            state,
            date_time: timestamp,
            extra: random.extra(size, self.avg_person_bytes),
        }
    }

    fn auction(&self, id: u64, random: &mut Random, timestamp: i64) -> Auction {
        let seller = if random.below(self.hot_sellers_ratio) > 0 {
            // A hot seller: one of every hot_sellers_ratio people.
            last_person(id) / self.hot_sellers_ratio * self.hot_sellers_ratio
        } else {
            self.any_person(id, random)
        };
        let category = FIRST_CATEGORY_ID + random.below(NUM_CATEGORIES);
        let initial_bid = random.price();
        let expires = timestamp + self.auction_length_ms(id, random, timestamp);
        let item_name = random.string(20, true);
        let description = random.string(100, true);
        let reserve = initial_bid + random.price();
        let size = 8 + item_name.len() + description.len() + 8 + 8 + 8 + 8 + 8;
        Auction {
            id: last_auction(id) + FIRST_AUCTION_ID,
            item_name,
            description,
            initial_bid,
            reserve,
            date_time: timestamp,
            expires,
            seller: seller + FIRST_PERSON_ID,
            category,
            extra: random.extra(size, self.avg_auction_bytes),
        }
    }

    fn bid(&self, id: u64, random: &mut Random, timestamp: i64) -> Bid {
        let auction = if random.below(self.hot_auction_ratio) > 0 {
            last_auction(id) / self.hot_auction_ratio * self.hot_auction_ratio
        } else {
            self.any_auction(id, random)
        };
        let bidder = if random.below(self.hot_bidders_ratio) > 0 {
            // Hot bidders are other people than hot sellers (one past them).
            last_person(id) / self.hot_bidders_ratio * self.hot_bidders_ratio + 1
        } else {
            self.any_person(id, random)
        };
        let price = random.price();
        let (channel, url) = if random.below(self.hot_channels_ratio) > 0 {
            let i = random.below(HOT_CHANNELS.len() as u64) as usize;
            (HOT_CHANNELS[i].to_string(), HOT_URLS[i].to_string())
        } else {
            let n = random.below(CHANNELS);
            (
                format!("channel-{n}"),
                format!(
                    "https://www.nexmark.com/{}/item.htm?query=1&channel_id={n}",
                    random.string(5, false)
                ),
            )
        };
        Bid {
            auction: auction + FIRST_AUCTION_ID,
            bidder: bidder + FIRST_PERSON_ID,
            price,
            channel,
            url,
            date_time: timestamp,
            extra: random.extra(32, self.avg_bid_bytes),
        }
    }

    /// One of the active people (or of the few ids just past the newest), base 0.
    fn any_person(&self, id: u64, random: &mut Random) -> u64 {
        let people = last_person(id) + 1;
        let active = people.min(self.active_people);
        people - active + random.below(active + ID_LEAD)
    }

    /// One of the auctions in flight (or of the few ids just past the newest), base 0.
    fn any_auction(&self, id: u64, random: &mut Random) -> u64 {
        let newest = last_auction(id);
        let oldest = newest.saturating_sub(self.in_flight_auctions);
        oldest + random.below(newest - oldest + 1 + ID_LEAD)
    }

    /// How long the auction opened by event `id` at `timestamp` lasts: up to twice the time
    /// until `in_flight_auctions` more have opened, so about that many are open at a time.
    fn auction_length_ms(&self, id: u64, random: &mut Random, timestamp: i64) -> i64 {
        let events_for_auctions = self.in_flight_auctions * TOTAL_PROPORTION / AUCTION_PROPORTION;
        let horizon = self.timestamp(id + events_for_auctions) - timestamp;
        1 + random.below((horizon * 2).max(1) as u64) as i64
    }
}

/// The newest person at event `id`, base 0.
pub fn last_person(id: u64) -> u64 {
    // One person per round, its first event: the newest is the round's.
    const _: () = assert!(PERSON_PROPORTION == 1);
    id / TOTAL_PROPORTION
}

/// The newest auction at event `id`, base 0 (0 before the first).
pub fn last_auction(id: u64) -> u64 {
    let epoch = id / TOTAL_PROPORTION;
    let offset = id % TOTAL_PROPORTION;
    if offset < PERSON_PROPORTION {
        // Before this round's auctions: the previous round's last.
        (epoch * AUCTION_PROPORTION).saturating_sub(1)
    } else if offset >= PERSON_PROPORTION + AUCTION_PROPORTION {
        epoch * AUCTION_PROPORTION + AUCTION_PROPORTION - 1
    } else {
        epoch * AUCTION_PROPORTION + offset - PERSON_PROPORTION
    }
}

/// The random draws of one event: SplitMix64 seeded with the run's seed and the event's id,
/// so every event's draws are independent of which subtask makes it and when.
struct Random(u64);

impl Random {
    fn new(seed: u64, id: u64) -> Random {
        let mut r = Random(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (0 for a bound of 0).
    fn below(&mut self, bound: u64) -> u64 {
        ((self.next() as u128 * bound as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }

    /// A price in cents, `10^(6x)` dollars for a uniform `x`: mostly small, a few huge.
    fn price(&mut self) -> u64 {
        (10f64.powf(self.unit() * 6.0) * 100.0).round() as u64
    }

    /// Lowercase letters, 3 up to `max_len` long; with `spaces`, some are spaces.
    fn string(&mut self, max_len: u64, spaces: bool) -> String {
        let len = 3 + self.below(max_len.saturating_sub(3).max(1));
        self.exact_string(len as usize, spaces)
    }

    fn exact_string(&mut self, len: usize, spaces: bool) -> String {
        (0..len)
            .map(|_| {
                let r = self.below(if spaces { 27 } else { 26 }) as u8;
                if r == 26 { ' ' } else { (b'a' + r) as char }
            })
            .collect()
    }

    /// Padding that brings a record of `size` bytes to `average` on average (within ±20%).
    fn extra(&mut self, size: usize, average: usize) -> String {
        if size >= average {
            return String::new();
        }
        let wanted = average - size;
        let delta = (wanted as f64 * 0.2).round() as u64;
        let len = wanted as u64 - delta + self.below(2 * delta);
        self.exact_string(len as usize, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GeneratorConfig {
        GeneratorConfig::new(7, 10_000, 1_000_000)
    }

    #[test]
    fn of_every_50_events_1_is_a_person_3_are_auctions_and_46_are_bids() {
        let c = config();
        let (mut people, mut auctions, mut bids) = (0, 0, 0);
        for n in 0..50_000 {
            match c.event(n) {
                Event::Person(_) => people += 1,
                Event::Auction(_) => auctions += 1,
                Event::Bid(_) => bids += 1,
            }
        }
        assert_eq!((people, auctions, bids), (1000, 3000, 46_000));
    }

    #[test]
    fn ids_are_consecutive_from_1000_and_time_follows_the_rate() {
        let c = config();
        let events: Vec<Event> = (0..5000).map(|n| c.event(n)).collect();
        let people: Vec<u64> = events
            .iter()
            .filter_map(|e| e.clone().into_person().map(|p| p.id))
            .collect();
        assert_eq!(people, (1000..1100).collect::<Vec<_>>());
        let auctions: Vec<u64> = events
            .iter()
            .filter_map(|e| e.clone().into_auction().map(|a| a.id))
            .collect();
        assert_eq!(auctions, (1000..1300).collect::<Vec<_>>());
        // 10 000 events/s: 10 events per ms.
        assert_eq!(events[0].date_time(), 1_000_000);
        assert_eq!(events[4999].date_time(), 1_000_499);
        assert!(
            events
                .windows(2)
                .all(|w| w[0].date_time() <= w[1].date_time())
        );
    }

    #[test]
    fn events_depend_on_the_seed_and_number_only() {
        let c = config();
        let again: Vec<Event> = (0..500).rev().map(|n| config().event(n)).collect();
        let once: Vec<Event> = (0..500).rev().map(|n| c.event(n)).collect();
        assert_eq!(once, again);
        let other = GeneratorConfig::new(8, 10_000, 1_000_000);
        let differ = (0..500).filter(|&n| other.event(n) != c.event(n)).count();
        assert!(differ > 450, "{differ}");
    }

    #[test]
    fn bids_favour_hot_auctions_and_bidders_and_prices_span_six_decades() {
        let c = config();
        let bids: Vec<Bid> = (0..100_000).filter_map(|n| c.event(n).into_bid()).collect();
        let mut per_auction = std::collections::HashMap::<u64, u64>::new();
        for b in &bids {
            *per_auction.entry(b.auction).or_default() += 1;
        }
        // Half the bids go to the hot auction of their time (every other auction id).
        let hot = bids
            .iter()
            .filter(|b| (b.auction - FIRST_AUCTION_ID).is_multiple_of(2))
            .count();
        assert!(hot * 100 > bids.len() * 70, "{hot} of {}", bids.len());
        let hot_bidders = bids
            .iter()
            .filter(|b| (b.bidder - FIRST_PERSON_ID) % 4 == 1)
            .count();
        assert!(hot_bidders * 100 > bids.len() * 75, "{hot_bidders}");
        let cheap = bids.iter().filter(|b| b.price < 10_000).count();
        let dear = bids.iter().filter(|b| b.price >= 10_000_000).count();
        // log10(price / 100) is uniform in [0, 6): a third below 100 dollars, a sixth above
        // 100 000.
        assert!((cheap as f64 / bids.len() as f64 - 1.0 / 3.0).abs() < 0.02);
        assert!((dear as f64 / bids.len() as f64 - 1.0 / 6.0).abs() < 0.02);
        assert!(bids.iter().all(|b| (100..=100_000_000).contains(&b.price)));
        let avg = bids
            .iter()
            .map(|b| 32 + b.channel.len() + b.url.len() / 4 + b.extra.len())
            .sum::<usize>() as f64
            / bids.len() as f64;
        assert!(avg > 80.0 && avg < 140.0, "{avg}");
    }

    #[test]
    fn people_live_in_six_states_and_auctions_have_five_categories() {
        let c = config();
        let events: Vec<Event> = (0..50_000).map(|n| c.event(n)).collect();
        let mut states = std::collections::BTreeSet::new();
        let mut categories = std::collections::BTreeSet::new();
        for e in events {
            match e {
                Event::Person(p) => {
                    states.insert(p.state);
                }
                Event::Auction(a) => {
                    categories.insert(a.category);
                    assert!(a.expires > a.date_time);
                    assert!(a.reserve >= a.initial_bid);
                }
                Event::Bid(_) => {}
            }
        }
        assert_eq!(states.len(), 6);
        assert_eq!(categories, (10..15).collect());
    }

    #[test]
    fn out_of_order_groups_scramble_events_within_their_span_only() {
        let mut c = config();
        c.out_of_order_group = 10;
        let ids: Vec<u64> = (0..1000).map(|n| c.event_id(n)).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(ids, sorted);
        let bound = c.max_out_of_orderness_ms();
        let mut latest = i64::MIN;
        for n in 0..1000 {
            let t = c.event(n).date_time();
            assert!(
                t >= latest.saturating_sub(bound),
                "event {n} at {t} is behind {latest} by more than {bound}"
            );
            latest = latest.max(t);
        }
    }
}
