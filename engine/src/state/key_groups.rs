//! Key-group ranges: which key groups a subtask owns, and which subtask owns a key.

use std::fmt;
use std::hash::Hash;

use crate::common::keys::{KeyHash, key_group, operator_index_for_key_group};

/// The largest supported max parallelism (Flink's limit): key groups are stored as 16 bits.
pub const MAX_MAX_PARALLELISM: u32 = 1 << 15;

/// A range of key groups, `[first, last]` inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyGroupRange {
    /// First key group of the range.
    pub first: u32,
    /// Last key group of the range (inclusive).
    pub last: u32,
}

impl KeyGroupRange {
    /// The range `[first, last]`.
    pub fn new(first: u32, last: u32) -> Self {
        KeyGroupRange { first, last }
    }

    /// The key groups owned by subtask `index` of `parallelism` (Flink's
    /// `computeKeyGroupRangeForOperatorIndex`): the inverse of
    /// [`operator_index_for_key_group`].
    pub fn for_subtask(max_parallelism: u32, parallelism: u32, index: u32) -> Self {
        let (max_p, p, i) = (max_parallelism as u64, parallelism as u64, index as u64);
        KeyGroupRange {
            first: (i * max_p).div_ceil(p) as u32,
            last: (((i + 1) * max_p - 1) / p) as u32,
        }
    }

    /// Whether `key_group` lies in the range.
    pub fn contains(&self, key_group: u32) -> bool {
        self.first <= key_group && key_group <= self.last
    }

    /// Whether the two ranges share a key group.
    pub fn intersects(&self, other: &KeyGroupRange) -> bool {
        self.first <= other.last && other.first <= self.last && !self.is_empty()
    }

    /// The key groups in both ranges, if any.
    pub fn intersection(&self, other: &KeyGroupRange) -> Option<KeyGroupRange> {
        let r = KeyGroupRange::new(self.first.max(other.first), self.last.min(other.last));
        (!r.is_empty()).then_some(r)
    }

    /// Whether the range has no key group (a subtask of a parallelism above max parallelism).
    pub fn is_empty(&self) -> bool {
        self.first > self.last
    }

    /// The number of key groups.
    pub fn len(&self) -> u32 {
        if self.is_empty() {
            0
        } else {
            self.last - self.first + 1
        }
    }

    /// As stored in a [`KeyedStateHandle`](super::KeyedStateHandle).
    pub fn as_tuple(&self) -> (u32, u32) {
        (self.first, self.last)
    }

    /// From a [`KeyedStateHandle`](super::KeyedStateHandle)'s `key_groups`.
    pub fn from_tuple((first, last): (u32, u32)) -> Self {
        KeyGroupRange { first, last }
    }
}

impl fmt::Display for KeyGroupRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.first, self.last)
    }
}

/// The subtask (of `parallelism`) whose key groups hold `key` in a new job (for tests and
/// tools).
pub fn subtask_for_key<K: Hash + ?Sized>(key: &K, max_parallelism: u32, parallelism: u32) -> u32 {
    operator_index_for_key_group(
        max_parallelism,
        parallelism,
        key_group(KeyHash::CURRENT.hash(key), max_parallelism),
    )
}
