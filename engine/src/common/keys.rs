//! Keys and key groups: the process-independent key hash, key groups (`maxParallelism` of
//! them) and which subtask owns a key group.
//!
//! Keys are hashed with a hasher that is the same in every process (unlike std's `RandomState`),
//! so every TaskManager sends a key to the same consumer and finds its state in the same key
//! group. The network's partitioner, the state backends and the checkpoint metadata all use
//! these functions.

use std::hash::{Hash, Hasher};

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
        fmix64(self.0)
    }
}

/// Which function hashes keys into key groups.
///
/// A key's key group decides which subtask owns it and where its state is kept, so a job keeps
/// the function its state was written with: every checkpoint's metadata records it and a
/// restored job hashes with the recorded one. New jobs use [`KeyHash::CURRENT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyHash {
    /// [`stable_hash`]: FNV-1a, one multiply per byte of the key, finished with murmur3's mix.
    /// What checkpoints written before the hash was recorded used.
    Fnv1a,
    /// [`WordHasher`]: one multiply per eight bytes (one per integer field), finished with
    /// murmur3's mix; about a tenth of FNV-1a's latency for a `u64` key.
    Words,
}

impl KeyHash {
    /// What new jobs use.
    pub const CURRENT: KeyHash = KeyHash::Words;

    /// What metadata that names no function was written with.
    pub fn legacy() -> KeyHash {
        KeyHash::Fnv1a
    }

    /// The process-independent hash of `key`.
    #[inline]
    pub fn hash<K: Hash + ?Sized>(self, key: &K) -> u64 {
        match self {
            KeyHash::Fnv1a => stable_hash(key),
            KeyHash::Words => {
                let mut h = WordHasher::default();
                key.hash(&mut h);
                h.finish()
            }
        }
    }
}

impl Default for KeyHash {
    fn default() -> Self {
        KeyHash::CURRENT
    }
}

/// A key hasher that takes eight bytes per step: integers whole, byte strings in little-endian
/// words (the last one padded and marked with its length, so `"ab"` and `"ab\0"` differ),
/// finished with murmur3's 64-bit mix so that key groups spread evenly. The same in every
/// process and on every platform.
pub(crate) struct WordHasher(u64);

impl Default for WordHasher {
    fn default() -> Self {
        WordHasher(0x2545_f491_4f6c_dd1d)
    }
}

impl WordHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(23) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Feeds `bytes` to `add` as little-endian 8-byte words, the last one zero-padded and marked
/// with its length in the top byte (so `"ab"` and `"ab\0"` differ): the byte loop of the
/// word-at-a-time hashers (this module's stable one, the state tables' in-memory one).
#[inline]
pub(crate) fn for_each_word(bytes: &[u8], mut add: impl FnMut(u64)) {
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        add(u64::from_le_bytes(word));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        add(u64::from_le_bytes(word) | (rest.len() as u64) << 56);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for_each_word(bytes, |word| self.add(word));
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_u128(&mut self, n: u128) {
        self.add(n as u64);
        self.add((n >> 64) as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        fmix64(self.0)
    }
}

/// murmur3's 64-bit finalizer: every input bit affects every output bit.
#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The process-independent hash of a key with [`KeyHash::Fnv1a`].
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

/// Flink's default number of key groups for an operator of the given parallelism: 1.5 × the
/// parallelism rounded up to a power of two, at least 128 and at most 32768.
pub fn default_max_parallelism(parallelism: u32) -> u32 {
    let p = parallelism as u64;
    (p + p / 2).next_power_of_two().clamp(128, 32768) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_fixed_across_processes() {
        assert_eq!(stable_hash("word"), stable_hash(&"word".to_string()));
        assert_eq!(stable_hash_bytes(b""), stable_hash_bytes(b""));
        assert_ne!(stable_hash("a"), stable_hash("b"));
        // Pinned values: a change here would send the keys of checkpointed state to other
        // key groups than the ones they were written to (see `KeyHash`).
        for (hash, expected) in [
            (KeyHash::Fnv1a, PINNED_FNV1A),
            (KeyHash::Words, PINNED_WORDS),
        ] {
            let got = [
                hash.hash(&42u64),
                hash.hash("word"),
                hash.hash(&("user-17".to_string(), 3u32)),
                hash.hash(&-1i64),
            ];
            assert_eq!(got, expected, "{hash:?}");
        }
    }

    const PINNED_FNV1A: [u64; 4] = [
        11971793068411553624,
        5847679373952889743,
        16297045795278700816,
        7679411569137598510,
    ];
    const PINNED_WORDS: [u64; 4] = [
        14354099193389535820,
        15707818120703981187,
        11233593999920913697,
        15182942627421096123,
    ];

    #[test]
    fn word_hash_tells_padded_tails_apart_and_spreads_keys() {
        let bytes = |b: &[u8]| {
            let mut h = WordHasher::default();
            h.write(b);
            h.finish()
        };
        assert_ne!(bytes(b"ab"), bytes(b"ab\0"));
        assert_ne!(bytes(b""), bytes(b"\0"));
        assert_ne!(bytes(b"12345678"), bytes(b"12345678\0"));
        let (maxp, p) = (128, 3);
        for keys in [
            (0..30_000u64)
                .map(|i| KeyHash::Words.hash(&i))
                .collect::<Vec<_>>(),
            (0..30_000u64)
                .map(|i| KeyHash::Words.hash(&format!("key-{i}")))
                .collect(),
        ] {
            let mut per_subtask = [0u32; 3];
            for h in keys {
                per_subtask[operator_index_for_key_group(maxp, p, key_group(h, maxp)) as usize] +=
                    1;
            }
            assert!(per_subtask.iter().all(|&c| c > 9_000), "{per_subtask:?}");
        }
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
