//! Nexmark's records: people who sell and bid, the auctions they open and the bids they make
//! (the model of the Nexmark benchmark, as Flink's and Beam's Nexmark suites define it). Times
//! are ms of event time since the epoch; prices are in cents.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A person registering with the auction site.
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
pub struct Person {
    /// The person's id (from 1000 up, one per person event).
    pub id: u64,
    /// First and last name.
    pub name: String,
    /// E-mail address.
    pub email_address: String,
    /// Credit card number, four groups of four digits.
    pub credit_card: String,
    /// A US city.
    pub city: String,
    /// A US state, two letters.
    pub state: String,
    /// When the person registered.
    pub date_time: i64,
    /// Padding to Nexmark's average person size.
    pub extra: String,
}

/// An auction of one item.
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
    /// The auction's id (from 1000 up, one per auction event).
    pub id: u64,
    /// The item's name.
    pub item_name: String,
    /// The item's description.
    pub description: String,
    /// The opening price.
    pub initial_bid: u64,
    /// The least price the seller accepts.
    pub reserve: u64,
    /// When the auction opened.
    pub date_time: i64,
    /// When it closes.
    pub expires: i64,
    /// The id of the person selling.
    pub seller: u64,
    /// The item's category (10 to 14).
    pub category: u64,
    /// Padding to Nexmark's average auction size.
    pub extra: String,
}

/// A bid in an auction.
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
    /// The auction bid in.
    pub auction: u64,
    /// The id of the person bidding.
    pub bidder: u64,
    /// The price offered.
    pub price: u64,
    /// Where the bid came from (a hot channel's name or `channel-N`).
    pub channel: String,
    /// The page the bid was made on.
    pub url: String,
    /// When the bid was made.
    pub date_time: i64,
    /// Padding to Nexmark's average bid size.
    pub extra: String,
}

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
