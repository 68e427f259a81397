//! What the state backends do with the archives they keep: hash them in memory and decode them.

use std::hash::Hasher;

use rkyv::rancor;
use rkyv::util::AlignedVec;

use super::StateError;
use crate::record::Data;

/// A fast hasher for the per-record path (SipHash costs more than the rest of a lookup).
/// Multiply-rotate over 8-byte words, then a mix so that hashbrown's low bucket bits and high
/// tag bits both depend on every input bit.
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        crate::common::keys::for_each_word(bytes, |word| self.add(word));
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 32;
        h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
        h ^ (h >> 32)
    }
}

/// Validates and deserializes an archive. rkyv needs the archive aligned; bytes from RocksDB or
/// from inside a snapshot file may not be, and are copied first.
pub(super) fn decode<T: Data>(bytes: &[u8], state: &str) -> Result<T, StateError> {
    let err = |e: rancor::Error| StateError::Codec {
        state: state.to_string(),
        reason: e.to_string(),
    };
    if (bytes.as_ptr() as usize).is_multiple_of(16) {
        rkyv::from_bytes::<T, rancor::Error>(bytes).map_err(err)
    } else {
        let mut aligned = AlignedVec::<16>::with_capacity(bytes.len());
        aligned.extend_from_slice(bytes);
        rkyv::from_bytes::<T, rancor::Error>(&aligned).map_err(err)
    }
}
