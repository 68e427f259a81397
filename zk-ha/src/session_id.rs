//! The leader session id: a fresh random 128-bit token per grant of leadership.

use std::fmt;
use std::str::FromStr;

use crate::error::HaError;

/// Identifies one leadership term. Every grant creates a new one, so messages stamped with an old
/// term's id can be recognized and dropped (fencing), even when the same process is leader again.
///
/// Shown and stored as 32 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaderSessionId(u128);

impl LeaderSessionId {
    /// A new random id from the thread-local CSPRNG. 128 random bits make a collision between two
    /// terms practically impossible.
    pub fn random() -> Self {
        LeaderSessionId(rand::random::<u128>())
    }

    /// Wraps a known value (tests, decoding).
    pub const fn from_u128(value: u128) -> Self {
        LeaderSessionId(value)
    }

    /// The raw value.
    pub const fn as_u128(self) -> u128 {
        self.0
    }
}

impl fmt::Display for LeaderSessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for LeaderSessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaderSessionId({self})")
    }
}

impl FromStr for LeaderSessionId {
    type Err = HaError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Exactly 32 lower-case hex digits: one canonical spelling per id, so ids compare as text.
        if s.len() != 32
            || !s
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(HaError::invalid(
                "leader session id",
                format!("expected 32 lower-case hex digits, got {s:?}"),
            ));
        }
        u128::from_str_radix(s, 16)
            .map(LeaderSessionId)
            .map_err(|e| HaError::invalid("leader session id", e.to_string()))
    }
}

impl serde::Serialize for LeaderSessionId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for LeaderSessionId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats_as_32_hex_digits() {
        assert_eq!(
            LeaderSessionId::from_u128(0xab).to_string(),
            format!("{:0>32}", "ab")
        );
    }

    #[test]
    fn random_ids_differ() {
        assert_ne!(LeaderSessionId::random(), LeaderSessionId::random());
    }

    #[test]
    fn rejects_non_canonical_text() {
        for bad in [
            "",
            "xyz",
            &"A".repeat(32),
            &"0".repeat(31),
            &"0".repeat(33),
            "+0000000000000000000000000000000",
        ] {
            assert!(bad.parse::<LeaderSessionId>().is_err(), "{bad:?} accepted");
        }
    }

    proptest! {
        #[test]
        fn text_round_trip(v in any::<u128>()) {
            let id = LeaderSessionId::from_u128(v);
            prop_assert_eq!(id.to_string().parse::<LeaderSessionId>().ok(), Some(id));
        }
    }
}
