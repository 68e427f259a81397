//! What flows through a channel: buffers of records, and control events.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rkyv::util::AlignedVec;

/// One unit of a channel: a buffer of record frames or an event.
#[derive(Debug)]
pub(crate) enum NetBuffer {
    /// Frames written by [`crate::record::append`].
    Data(Buffer),
    /// Records handed to a consumer in the same TaskManager as they are, without serializing.
    Batch(LocalBatch),
    /// The producer has finished; nothing follows.
    EndOfPartition,
    /// A checkpoint barrier: everything before it belongs to the checkpoint, nothing after.
    Barrier(std::sync::Arc<CheckpointBarrier>),
    /// Event time: a watermark or a change of the producer's idle status.
    Time(super::valve::TimeSignal),
}

/// A batch of records for a consumer in the same TaskManager: a `Vec` of the edge's record
/// type, moved from producer to consumer instead of serialized and decoded. Only records that
/// own no heap memory go this way (their `size_of` is all they take), so a batch holds at most a
/// segment's worth of bytes, and it holds one of the producer's pool buffers while it exists:
/// typed batches count against network memory, and backpressure, as the serialized buffers they
/// replace.
pub(crate) struct LocalBatch {
    /// A `Vec<T>` of the edge's record type.
    pub(crate) records: Box<dyn std::any::Any + Send>,
    /// How many records.
    pub(crate) count: usize,
    /// The records' bytes (`count` times their size), for the byte counters.
    pub(crate) bytes: usize,
    /// The producer's pool buffer this batch stands for; returned when the batch is dropped.
    pub(crate) _memory: Buffer,
}

impl std::fmt::Debug for LocalBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalBatch({} records)", self.count)
    }
}

/// What a checkpoint barrier carries from the sources through every channel of the job.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CheckpointBarrier {
    /// When the JobMaster triggered it (ms since the epoch).
    pub(crate) timestamp: u64,
    /// Where the snapshot's files go, with the checkpoint id and kind.
    pub(crate) location: crate::state::SnapshotLocation,
    /// A source sends the watermark to the end of time before it takes this snapshot, so that
    /// every event-time window and timer downstream fires into it (a stop with drain). Only
    /// sources see it: barriers between tasks do not carry it.
    #[serde(skip)]
    pub(crate) drain: bool,
}

impl CheckpointBarrier {
    /// The checkpoint's id.
    pub(crate) fn id(&self) -> u64 {
        self.location.checkpoint_id
    }
}

/// A watermark read by the metrics while the task moves it: `i64::MIN` until the first.
#[derive(Debug)]
pub(crate) struct WatermarkGauge(std::sync::atomic::AtomicI64);

impl Default for WatermarkGauge {
    fn default() -> Self {
        WatermarkGauge(std::sync::atomic::AtomicI64::new(i64::MIN))
    }
}

impl WatermarkGauge {
    pub(crate) fn set(&self, watermark: i64) {
        self.0.store(watermark, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
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
    /// Nanoseconds spent waiting for input: measured around the blocking wait for a buffer
    /// (and a source's pauses), never per record.
    pub(crate) idle_nanos: std::sync::atomic::AtomicU64,
    /// When the task began processing records.
    pub(crate) running_since: std::sync::OnceLock<std::time::Instant>,
    /// How long it processed, once it stopped (0 while it runs).
    pub(crate) ran_nanos: std::sync::atomic::AtomicU64,
    /// The task's input watermark (`currentInputWatermark`).
    pub(crate) input_watermark: WatermarkGauge,
    /// The last watermark the task sent downstream (`currentOutputWatermark`).
    pub(crate) output_watermark: WatermarkGauge,
    /// Records its window operators dropped because they came too late for every window
    /// (`numLateRecordsDropped`; counted per such record, never on the main path).
    pub(crate) late_records_dropped: std::sync::atomic::AtomicU64,
    /// Bytes of the task's state in its latest snapshot (`stateSize`), set when it
    /// acknowledges a checkpoint or savepoint.
    pub(crate) state_size: std::sync::atomic::AtomicU64,
    /// The task's output buffer pools, for `outPoolUsage` (locked only when a writer is made
    /// and when the metrics are read).
    out_pools: Mutex<Vec<std::sync::Weak<BufferPool>>>,
    /// The task's input channels while its input gate reads them, for `inPoolUsage` and
    /// `inputQueueLength` (locked only when the gate is made or dropped and when the metrics
    /// are read; the gate forgets them when dropped, so they never outlive it).
    in_queues: Mutex<Vec<flume::Receiver<NetBuffer>>>,
}

impl IoCounters {
    /// Marks the start of processing (later calls keep the first time).
    pub(crate) fn start_running(&self) {
        let _ = self.running_since.get_or_init(std::time::Instant::now);
    }

    /// Freezes the running time when processing stops, so an ended task's busy time stays put.
    pub(crate) fn stop_running(&self) {
        if let Some(since) = self.running_since.get() {
            let ran = since.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            let _ = self.ran_nanos.compare_exchange(
                0,
                ran.max(1),
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }

    /// Counts `pool`'s buffers in the task's `outPoolUsage`.
    pub(crate) fn watch_out_pool(&self, pool: &Arc<BufferPool>) {
        self.out_pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(pool));
    }

    /// Flink's `outPoolUsage` in per mille: the buffers of the output pools in use (being
    /// filled or queued for consumers) over the most they may hold together.
    pub(crate) fn out_pool_usage_permille(&self) -> u32 {
        let pools = self.out_pools.lock().unwrap_or_else(|e| e.into_inner());
        let (lent, max) = pools
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .map(|p| (p.lock().lent.min(p.max), p.max))
            .fold((0, 0), |(l, m), (pl, pm)| (l + pl, m + pm));
        (lent * 1000).checked_div(max).unwrap_or(0) as u32
    }

    /// Counts `channels` in the task's `inPoolUsage` and `inputQueueLength`.
    pub(crate) fn watch_input_queues(&self, channels: &[flume::Receiver<NetBuffer>]) {
        self.in_queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(channels.iter().cloned());
    }

    /// Stops counting the input channels: the gate reading them is gone, and a receiver kept
    /// here must not make its producers believe someone still reads.
    pub(crate) fn forget_input_queues(&self) {
        self.in_queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Buffers queued in the input channels and Flink's `inPoolUsage` in per mille: those
    /// buffers over the most the bounded channels may hold (their credits). Read when the
    /// metrics are read; the record path keeps no count for it.
    pub(crate) fn input_queues(&self) -> (u32, u32) {
        let queues = self.in_queues.lock().unwrap_or_else(|e| e.into_inner());
        let (mut queued, mut used, mut capacity) = (0usize, 0usize, 0usize);
        for q in queues.iter() {
            let len = q.len();
            queued += len;
            if let Some(cap) = q.capacity() {
                used += len.min(cap);
                capacity += cap;
            }
        }
        let permille = (used * 1000).checked_div(capacity).unwrap_or(0);
        (queued.min(u32::MAX as usize) as u32, permille as u32)
    }

    /// Nanoseconds of processing so far: since the start, or until the stop once stopped.
    pub(crate) fn running_nanos(&self) -> u64 {
        match self.ran_nanos.load(std::sync::atomic::Ordering::Relaxed) {
            0 => self
                .running_since
                .get()
                .map_or(0, |s| s.elapsed().as_nanos().min(u64::MAX as u128) as u64),
            ran => ran,
        }
    }
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
    /// Whether the buffer counts against its pool's limit (until dropped or handed to QUIC).
    on_loan: bool,
    /// Whether a writer of this process filled it (rather than a peer's bytes off the wire).
    produced_here: bool,
    _credit: Option<CreditGuard>,
}

impl Buffer {
    /// A buffer produced on this TaskManager, not pooled.
    #[cfg(test)]
    pub(crate) fn local(bytes: AlignedVec) -> Self {
        Buffer {
            bytes,
            pool: None,
            on_loan: false,
            produced_here: true,
            _credit: None,
        }
    }

    /// A buffer produced on this TaskManager whose memory returns to `pool`.
    pub(crate) fn pooled(bytes: AlignedVec, pool: Arc<BufferPool>) -> Self {
        Buffer {
            bytes,
            pool: Some(pool),
            on_loan: true,
            produced_here: true,
            _credit: None,
        }
    }

    /// Whether a record writer of this process filled the buffer: its records are archives
    /// this process wrote, of the type the consumer reads (the same program built both ends of
    /// the channel), so the consumer need not validate them. Bytes received from a peer are
    /// validated.
    pub(crate) fn produced_here(&self) -> bool {
        self.produced_here
    }

    /// The buffer was handed to the transport: it no longer counts against its pool's limit,
    /// as a Flink buffer is recycled once written to the socket (its memory still returns to
    /// the pool when QUIC drops it, acknowledged). What QUIC holds meanwhile is bounded by the
    /// consumer's credit.
    pub(crate) fn end_loan(&mut self) {
        if std::mem::take(&mut self.on_loan)
            && let Some(pool) = &self.pool
        {
            pool.end_loan();
        }
    }

    /// A buffer received from a remote producer, returning its credit when dropped and its
    /// memory to `pool`.
    pub(crate) fn remote(bytes: AlignedVec, pool: Arc<BufferPool>, credit: CreditGuard) -> Self {
        Buffer {
            bytes,
            pool: Some(pool),
            on_loan: true,
            produced_here: false,
            _credit: Some(credit),
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.put(std::mem::take(&mut self.bytes), self.on_loan);
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

/// The buffer memory of one result partition or one remote channel, recycled.
///
/// The pool lends out at most `max` buffers: what its owner reserved in the network budget. A
/// result partition's writer takes its buffers with [`take_within`](Self::take_within), which
/// waits while all `max` are lent out, being filled, queued or in flight to a consumer, so a
/// slow consumer holds its producer to the partition's pool (Flink's `LocalBufferPool`). A
/// remote channel's receiver takes with [`take`](Self::take): the producer's credit already
/// bounds what it receives. Reusing buffers instead of allocating one per segment spares the
/// allocator's cross-thread frees and keeps the memory warm in the caches.
#[derive(Debug)]
pub(crate) struct BufferPool {
    state: Mutex<PoolState>,
    /// Signalled when a buffer comes back while the writer waits for one.
    returned: Condvar,
    segment_size: usize,
    max: usize,
}

#[derive(Debug)]
struct PoolState {
    free: Vec<AlignedVec>,
    /// Buffers taken and not yet put back.
    lent: usize,
    /// Whether a writer waits in `take_within` (so returns wake it only then).
    waiting: bool,
}

impl BufferPool {
    /// A pool of up to `max` buffers of `segment_size` bytes (plus room for one record's
    /// overshoot: a buffer is shipped once it reached the segment size).
    pub(crate) fn new(segment_size: usize, max: usize) -> Arc<Self> {
        Arc::new(BufferPool {
            state: Mutex::new(PoolState {
                free: Vec::with_capacity(max),
                lent: 0,
                waiting: false,
            }),
            returned: Condvar::new(),
            segment_size,
            max,
        })
    }

    fn capacity(&self) -> usize {
        self.segment_size + SEGMENT_SLACK
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A recycled buffer, or a new one.
    fn lend(&self, state: &mut PoolState) -> AlignedVec {
        state.lent += 1;
        state
            .free
            .pop()
            .unwrap_or_else(|| AlignedVec::with_capacity(self.capacity()))
    }

    /// An empty buffer with room for at least `len` bytes, recycled if one is free; never waits.
    pub(crate) fn take(&self, len: usize) -> AlignedVec {
        let mut bytes = self.lend(&mut self.lock());
        if bytes.capacity() < len {
            bytes.reserve(len);
        }
        bytes
    }

    /// An empty buffer once fewer than `max` are lent out, waiting for one to come back;
    /// `None` if `cancelled` was set meanwhile. Returns how long it waited, too.
    pub(crate) fn take_within(&self, cancelled: &AtomicBool) -> Option<(AlignedVec, Duration)> {
        let mut state = self.lock();
        if state.lent < self.max {
            return Some((self.lend(&mut state), Duration::ZERO));
        }
        let started = Instant::now();
        while state.lent >= self.max {
            if cancelled.load(Ordering::Relaxed) {
                return None;
            }
            state.waiting = true;
            state = self
                .returned
                .wait_timeout(state, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state.waiting = false;
        Some((self.lend(&mut state), started.elapsed()))
    }

    /// Returns a buffer's memory (and its loan, if it still has one); the memory is kept unless
    /// the pool is full or the buffer grew far beyond a segment (an oversized record).
    pub(crate) fn put(&self, mut bytes: AlignedVec, on_loan: bool) {
        let keep = (self.capacity()..=2 * self.capacity()).contains(&bytes.capacity());
        if keep {
            bytes.clear();
        }
        let mut state = self.lock();
        if keep && state.free.len() < self.max {
            state.free.push(bytes);
        }
        if on_loan {
            self.returned_loan(&mut state);
        }
    }

    /// Ends a loan whose buffer lives on elsewhere (see [`Buffer::end_loan`]).
    fn end_loan(&self) {
        self.returned_loan(&mut self.lock());
    }

    fn returned_loan(&self, state: &mut PoolState) {
        state.lent = state.lent.saturating_sub(1);
        if state.waiting {
            state.waiting = false;
            self.returned.notify_one();
        }
    }

    /// Buffers waiting to be reused.
    #[cfg(test)]
    pub(crate) fn pooled(&self) -> usize {
        self.lock().free.len()
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
    fn a_writer_waits_while_its_pool_is_lent_out() {
        let pool = BufferPool::new(1024, 2);
        let cancelled = AtomicBool::new(false);
        let a = pool.take_within(&cancelled).unwrap().0;
        let _b = pool.take_within(&cancelled).unwrap().0;
        // Both are lent: the third take waits until the consumer drops one.
        let consumer = {
            let pool = pool.clone();
            let shipped = Buffer::pooled(a, pool.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                drop(shipped);
            })
        };
        let (c, waited) = pool.take_within(&cancelled).unwrap();
        assert!(waited >= Duration::from_millis(50), "waited {waited:?}");
        consumer.join().unwrap();
        // All lent again: a cancelled task stops waiting.
        cancelled.store(true, Ordering::Relaxed);
        assert!(pool.take_within(&cancelled).is_none());
        // An oversized buffer is not kept, but its loan ends.
        let mut big = pool.take(10_000);
        big.extend_from_slice(&[1; 10_000]);
        drop(Buffer::pooled(big, pool.clone()));
        cancelled.store(false, Ordering::Relaxed);
        drop(Buffer::pooled(c, pool.clone()));
        assert!(pool.take_within(&cancelled).is_some());
    }

    #[test]
    fn credits_are_announced_in_batches_of_half_the_credit() {
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
