//! What flows through a channel: buffers of records, and control events.

use std::sync::{Arc, Mutex};

use rkyv::util::AlignedVec;

/// One unit of a channel: a buffer of record frames or an event.
#[derive(Debug)]
pub(crate) enum NetBuffer {
    /// Frames written by [`crate::record::append`].
    Data(Buffer),
    /// The producer has finished; nothing follows.
    EndOfPartition,
    /// A checkpoint barrier: everything before it belongs to the checkpoint, nothing after.
    Barrier(std::sync::Arc<CheckpointBarrier>),
}

/// What a checkpoint barrier carries from the sources through every channel of the job.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CheckpointBarrier {
    /// When the JobMaster triggered it (ms since the epoch).
    pub(crate) timestamp: u64,
    /// Where the snapshot's files go, with the checkpoint id and kind.
    pub(crate) location: crate::checkpoint::SnapshotLocation,
}

impl CheckpointBarrier {
    /// The checkpoint's id.
    pub(crate) fn id(&self) -> u64 {
        self.location.checkpoint_id
    }
}

/// Counters a task keeps about its inputs and outputs, served by the REST API.
#[derive(Debug, Default)]
pub(crate) struct IoCounters {
    pub(crate) records_in: std::sync::atomic::AtomicU64,
    pub(crate) bytes_in: std::sync::atomic::AtomicU64,
    pub(crate) records_out: std::sync::atomic::AtomicU64,
    pub(crate) bytes_out: std::sync::atomic::AtomicU64,
    /// Nanoseconds spent waiting for room downstream (backpressure).
    pub(crate) back_pressured_nanos: std::sync::atomic::AtomicU64,
}

/// A buffer of record frames. A buffer that came over the network carries a credit: dropping
/// the buffer once its records are processed gives the credit back to the producer, which may
/// then send one more buffer on that channel. A pooled buffer's memory goes back to its pool
/// when the buffer is dropped, wherever that happens (the consuming task, or the QUIC stream
/// once the peer acknowledged the bytes).
#[derive(Debug)]
pub(crate) struct Buffer {
    bytes: AlignedVec,
    pool: Option<Arc<BufferPool>>,
    _credit: Option<CreditGuard>,
}

impl Buffer {
    /// A buffer produced on this TaskManager, not pooled.
    #[cfg(test)]
    pub(crate) fn local(bytes: AlignedVec) -> Self {
        Buffer {
            bytes,
            pool: None,
            _credit: None,
        }
    }

    /// A buffer produced on this TaskManager whose memory returns to `pool`.
    pub(crate) fn pooled(bytes: AlignedVec, pool: Arc<BufferPool>) -> Self {
        Buffer {
            bytes,
            pool: Some(pool),
            _credit: None,
        }
    }

    /// A buffer received from a remote producer, returning its credit when dropped and its
    /// memory to `pool`.
    pub(crate) fn remote(bytes: AlignedVec, pool: Arc<BufferPool>, credit: CreditGuard) -> Self {
        Buffer {
            bytes,
            pool: Some(pool),
            _credit: Some(credit),
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.put(std::mem::take(&mut self.bytes));
        }
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Buffer {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Recycled buffer memory of one producer or one remote channel.
///
/// The pool keeps at most `max` buffers: the number its owner can have in use at once (its
/// share of the network memory budget), so recycling never holds more memory than the budget
/// reserved for them. Reusing buffers instead of allocating one per segment spares the
/// allocator's cross-thread frees and keeps the memory warm in the caches.
#[derive(Debug)]
pub(crate) struct BufferPool {
    free: Mutex<Vec<AlignedVec>>,
    segment_size: usize,
    max: usize,
}

impl BufferPool {
    /// A pool of up to `max` buffers of `segment_size` bytes (plus room for one record's
    /// overshoot: a buffer is shipped once it reached the segment size).
    pub(crate) fn new(segment_size: usize, max: usize) -> Arc<Self> {
        Arc::new(BufferPool {
            free: Mutex::new(Vec::with_capacity(max)),
            segment_size,
            max,
        })
    }

    fn capacity(&self) -> usize {
        self.segment_size + SEGMENT_SLACK
    }

    /// An empty buffer with room for at least `len` bytes, recycled if one is free.
    pub(crate) fn take(&self, len: usize) -> AlignedVec {
        let recycled = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut bytes = recycled.unwrap_or_else(|| AlignedVec::with_capacity(self.capacity()));
        if bytes.capacity() < len {
            bytes.reserve(len);
        }
        bytes
    }

    /// Returns a buffer's memory; dropped if the pool is full or the buffer grew far beyond a
    /// segment (an oversized record).
    pub(crate) fn put(&self, mut bytes: AlignedVec) {
        if bytes.capacity() < self.capacity() || bytes.capacity() > 2 * self.capacity() {
            return;
        }
        bytes.clear();
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.max {
            free.push(bytes);
        }
    }

    /// Buffers waiting to be reused.
    #[cfg(test)]
    pub(crate) fn pooled(&self) -> usize {
        self.free.lock().unwrap().len()
    }
}

/// Bytes a buffer has beyond its segment size: a buffer is shipped once it reaches the segment
/// size, so the last record may overshoot.
pub(crate) const SEGMENT_SLACK: usize = 256;

/// The credits a consumer has freed and not yet announced to the producer.
///
/// Freed credits are announced in batches of `batch` (about half the channel's credit), not one
/// message per buffer: each announcement costs a QUIC packet and wake-ups on both TaskManagers.
/// Batching cannot stall the channel: with fewer than `batch` credits unannounced the producer
/// still holds at least `credit - batch + 1 ≥ 1` of them (or they are in flight as buffers,
/// whose release adds to the batch); leftovers short of a batch are announced after a short
/// linger (see the transport).
#[derive(Debug)]
pub(crate) struct Credits {
    pub(crate) freed: std::sync::atomic::AtomicU32,
    pub(crate) closed: std::sync::atomic::AtomicBool,
    pub(crate) notify: tokio::sync::Notify,
    batch: u32,
}

impl Credits {
    /// Credits of a channel whose producer starts with `credit` of them.
    pub(crate) fn new(credit: u32) -> Self {
        Credits {
            freed: Default::default(),
            closed: Default::default(),
            notify: Default::default(),
            batch: (credit / 2).max(1),
        }
    }
}

/// Returns one credit when dropped.
#[derive(Debug)]
pub(crate) struct CreditGuard(pub(crate) std::sync::Arc<Credits>);

impl Drop for CreditGuard {
    fn drop(&mut self) {
        let credits = &self.0;
        let freed = credits
            .freed
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            + 1;
        // Only the drop that completes a batch wakes the announcer (which takes all freed ones).
        if freed == credits.batch {
            credits.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_buffers_come_back_up_to_the_limit() {
        let pool = BufferPool::new(1024, 2);
        let (a, b, c) = (pool.take(0), pool.take(0), pool.take(0));
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let bufs: Vec<Buffer> = [a, b, c]
            .into_iter()
            .map(|v| Buffer::pooled(v, pool.clone()))
            .collect();
        assert_eq!(pool.pooled(), 0);
        drop(bufs);
        assert_eq!(pool.pooled(), 2, "the third buffer is freed, not kept");
        let again = [pool.take(0).as_ptr(), pool.take(0).as_ptr()];
        assert!(
            again.contains(&pa) && again.contains(&pb),
            "memory is reused"
        );
        // A buffer that grew far beyond a segment is not kept.
        let mut big = pool.take(10_000);
        big.extend_from_slice(&[1; 10_000]);
        drop(Buffer::pooled(big, pool.clone()));
        assert_eq!(pool.pooled(), 0);
        let fresh = pool.take(0);
        assert!(fresh.is_empty() && fresh.capacity() >= 1024);
    }

    #[test]
    fn credits_are_announced_in_batches_of_half_the_credit() {
        use std::sync::atomic::Ordering;
        let credits = Arc::new(Credits::new(6));
        let guards: Vec<_> = (0..6).map(|_| CreditGuard(credits.clone())).collect();
        let mut guards = guards.into_iter();
        drop(guards.next());
        drop(guards.next());
        assert_eq!(credits.freed.load(Ordering::Acquire), 2);
        // Not yet a batch: no permit stored in the Notify.
        let pending = credits.notify.notified();
        tokio::pin!(pending);
        assert!(!pending.as_mut().enable());
        drop(guards.next());
        assert!(
            pending.as_mut().enable(),
            "the third credit completes a batch"
        );
        assert_eq!(Credits::new(1).batch, 1);
        assert_eq!(Credits::new(3).batch, 1);
    }
}
