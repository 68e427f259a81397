//! Nexmark's records: people who sell and bid, the auctions they open and the bids they make
//! (the model of the Nexmark benchmark, as Flink's and Beam's Nexmark suites define it). Times
//! are ms of event time since the epoch; prices are in cents.

use std::fmt;

use serde::{Deserialize, Serialize};

record!(
    /// A person registering with the auction site.
    Person {
        /// The person's id (from 1000 up, one per person event).
        id: u64,
        /// First and last name.
        name: String,
        /// E-mail address.
        email_address: String,
        /// Credit card number, four groups of four digits.
        credit_card: String,
        /// A US city.
        city: String,
        /// A US state, two letters.
        state: String,
        /// When the person registered.
        date_time: i64,
        /// Padding to Nexmark's average person size.
        extra: String,
    }
);

record!(
    /// An auction of one item.
    Auction {
        /// The auction's id (from 1000 up, one per auction event).
        id: u64,
        /// The item's name.
        item_name: String,
        /// The item's description.
        description: String,
        /// The opening price.
        initial_bid: u64,
        /// The least price the seller accepts.
        reserve: u64,
        /// When the auction opened.
        date_time: i64,
        /// When it closes.
        expires: i64,
        /// The id of the person selling.
        seller: u64,
        /// The item's category (10 to 14).
        category: u64,
        /// Padding to Nexmark's average auction size.
        extra: String,
    }
);

record!(
    /// A bid in an auction.
    Bid {
        /// The auction bid in.
        auction: u64,
        /// The id of the person bidding.
        bidder: u64,
        /// The price offered.
        price: u64,
        /// Where the bid came from (a hot channel's name or `channel-N`).
        channel: String,
        /// The page the bid was made on.
        url: String,
        /// When the bid was made.
        date_time: i64,
        /// Padding to Nexmark's average bid size.
        extra: String,
    }
);

/// One Nexmark event: a new person, a new auction or a bid.
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
pub enum Event {
    /// A person registered.
    Person(Person),
    /// An auction opened.
    Auction(Auction),
    /// A bid was made.
    Bid(Bid),
}

impl Event {
    /// When the event happened (its event time).
    pub fn date_time(&self) -> i64 {
        match self {
            Event::Person(p) => p.date_time,
            Event::Auction(a) => a.date_time,
            Event::Bid(b) => b.date_time,
        }
    }

    /// The bid, if this event is one.
    pub fn into_bid(self) -> Option<Bid> {
        match self {
            Event::Bid(b) => Some(b),
            _ => None,
        }
    }

    /// The auction, if this event is one.
    pub fn into_auction(self) -> Option<Auction> {
        match self {
            Event::Auction(a) => Some(a),
            _ => None,
        }
    }

    /// The person, if this event is one.
    pub fn into_person(self) -> Option<Person> {
        match self {
            Event::Person(p) => Some(p),
            _ => None,
        }
    }
}

impl fmt::Display for Bid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{},{},{},{},{}",
            self.auction,
            self.bidder,
            self.price,
            self.channel,
            self.url,
            self.date_time,
            self.extra
        )
    }
}
