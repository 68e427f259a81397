//! Writing records into a result partition: one buffer per subpartition, shipped when full,
//! when the buffer timeout expires, or at the end.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rkyv::util::AlignedVec;

use super::buffer::{Buffer, BufferPool, IoCounters, LocalBatch, NetBuffer};
use super::partitioner::ChannelSelector;
use super::registry::PartitionRegistry;
use super::spill::SpillWriter;
use crate::common::error::TaskError;
use crate::common::ids::PartitionId;
use crate::common::keys::{KeyGroups, KeyHash, operator_index_for_key_group};
use crate::record::{self, Data};

/// The untyped part of a network output: buffers and the queues of the subpartitions.
pub(crate) struct RecordWriter {
    subpartitions: Vec<flume::Sender<NetBuffer>>,
    buffers: Vec<AlignedVec>,
    /// The last run of records in each buffer (see [`record::Run`]).
    runs: Vec<Option<record::Run>>,
    /// Where shipped buffers' memory comes back to once consumed.
    pool: Arc<BufferPool>,
    appender: record::Appender,
    segment_size: usize,
    key_groups: KeyGroups,
    /// Which subpartition owns each key group (the consumer's max parallelism of them).
    key_group_owner: Vec<u32>,
    cancelled: Arc<AtomicBool>,
    counters: Arc<IoCounters>,
    /// Records written since the counters were last brought up to date (they are published
    /// whenever a buffer ships, not per record).
    unpublished_records: u64,
    finished: bool,
    /// Per subpartition: set once a consumer in this TaskManager took its queue.
    local_readers: Vec<Arc<AtomicBool>>,
    /// Per subpartition: whether its records go as a typed batch (its consumer is local and the
    /// record type owns no heap memory) rather than serialized into `buffers`. Decided when the
    /// subpartition's buffer is empty, so the two never interleave out of order.
    typed: Vec<bool>,
    /// The typed batches being filled, installed by the typed output when its records can go
    /// typed (`None` keeps every subpartition serialized; the output takes it out while it
    /// writes).
    stage: Option<Box<dyn Stage>>,
    /// Whether a stage was installed.
    can_type: bool,
    /// A blocking partition (batch execution): what would go to the subpartitions' queues is
    /// written to a file instead, registered for consumers once the partition is complete.
    spill: Option<Spill>,
}

/// Where a blocking partition goes.
pub(crate) struct Spill {
    /// The file being written (`None` once finished).
    pub(crate) writer: Option<SpillWriter>,
    /// Where the finished partition is registered.
    pub(crate) registry: Arc<PartitionRegistry>,
    /// Its id.
    pub(crate) id: PartitionId,
}

/// The typed batches of a network output, one per subpartition, behind a type-erased face so
/// that the untyped writer can ship them (on a timeout, before a barrier, at the end).
pub(crate) trait Stage {
    /// Takes the batch of `channel` if it holds records: the `Vec<T>`, its length and bytes.
    fn take(&mut self, channel: usize) -> Option<(Box<dyn std::any::Any + Send>, usize, usize)>;
    fn as_any(&mut self) -> &mut dyn std::any::Any;
}

/// The typed batches of records of type `T`.
struct TypedStage<T> {
    batches: Vec<Vec<T>>,
    /// Records per batch: a segment's worth of bytes.
    capacity: usize,
}

impl<T: Send + 'static> Stage for TypedStage<T> {
    fn take(&mut self, channel: usize) -> Option<(Box<dyn std::any::Any + Send>, usize, usize)> {
        let batch = &mut self.batches[channel];
        if batch.is_empty() {
            return None;
        }
        let full = std::mem::replace(batch, Vec::with_capacity(self.capacity));
        let count = full.len();
        Some((Box::new(full), count, count * std::mem::size_of::<T>()))
    }
    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// Shared between the typed output in the chain and the task loop that flushes on time.
pub(crate) type RecordWriterHandle = Rc<RefCell<RecordWriter>>;

impl RecordWriter {
    /// `max_buffers` is the partition's pool: how many buffers the writer may have in use at
    /// once, being filled or queued for consumers (what the task reserved for it in the network
    /// budget; a buffer handed to QUIC no longer counts); at least one more than the
    /// subpartitions.
    pub(crate) fn new(
        subpartitions: Vec<flume::Sender<NetBuffer>>,
        local_readers: Vec<Arc<AtomicBool>>,
        segment_size: usize,
        max_buffers: usize,
        consumer_max_parallelism: u32,
        cancelled: Arc<AtomicBool>,
        counters: Arc<IoCounters>,
    ) -> Self {
        let pool = BufferPool::new(segment_size, max_buffers);
        counters.watch_out_pool(&pool);
        let buffers = local_readers.iter().map(|_| pool.take(0)).collect();
        let runs = local_readers.iter().map(|_| None).collect();
        let channels = local_readers.len().max(1) as u32;
        let key_group_owner = (0..consumer_max_parallelism)
            .map(|group| operator_index_for_key_group(consumer_max_parallelism, channels, group))
            .collect();
        RecordWriter {
            subpartitions,
            buffers,
            runs,
            pool,
            appender: record::Appender::default(),
            segment_size,
            key_groups: KeyGroups::new(consumer_max_parallelism),
            key_group_owner,
            cancelled,
            counters,
            unpublished_records: 0,
            finished: false,
            typed: vec![false; local_readers.len()],
            local_readers,
            stage: None,
            can_type: false,
            spill: None,
        }
    }

    /// A writer of a blocking partition of `channels` subpartitions: everything goes to
    /// `spill`, nothing waits for a consumer.
    pub(crate) fn blocking(
        spill: Spill,
        channels: usize,
        segment_size: usize,
        max_buffers: usize,
        consumer_max_parallelism: u32,
        cancelled: Arc<AtomicBool>,
        counters: Arc<IoCounters>,
    ) -> Self {
        let mut writer = RecordWriter::new(
            Vec::new(),
            (0..channels)
                .map(|_| Arc::new(AtomicBool::new(false)))
                .collect(),
            segment_size,
            max_buffers,
            consumer_max_parallelism,
            cancelled,
            counters,
        );
        writer.spill = Some(spill);
        writer
    }

    fn channels(&self) -> usize {
        self.local_readers.len()
    }

    /// Lets records of type `T` go to local consumers as typed batches, if `T` owns no heap
    /// memory (no drop glue): then a record's `size_of` is all the memory it holds and a batch
    /// of a segment's size in records is bounded as a serialized buffer is. Records with
    /// strings, vectors or boxes stay serialized.
    fn install_stage<T: Send + 'static>(&mut self) {
        if std::mem::needs_drop::<T>() || self.can_type {
            return;
        }
        self.can_type = true;
        let capacity = (self.segment_size / std::mem::size_of::<T>().max(1)).max(1);
        self.stage = Some(Box::new(TypedStage::<T> {
            batches: (0..self.channels())
                .map(|_| Vec::with_capacity(capacity))
                .collect(),
            capacity,
        }));
    }

    /// Whether `channel`'s next records go typed: decided while its buffer is empty.
    fn refresh_typed(&mut self, channel: usize) {
        if self.can_type && !self.typed[channel] && self.buffers[channel].is_empty() {
            self.typed[channel] = self.local_readers[channel].load(Ordering::Acquire);
        }
    }

    /// Ships `channel`'s typed batch, if it holds records, with the channel's pool buffer as
    /// its memory; takes the next buffer from the pool (waiting while all are lent out).
    fn ship_batch(&mut self, channel: usize, stage: &mut dyn Stage) -> Result<(), TaskError> {
        let Some((records, count, bytes)) = stage.take(channel) else {
            return Ok(());
        };
        self.counters
            .bytes_out
            .fetch_add(bytes as u64, Ordering::Relaxed);
        let memory = Buffer::pooled(
            std::mem::take(&mut self.buffers[channel]),
            self.pool.clone(),
        );
        self.ship(
            channel,
            NetBuffer::Batch(LocalBatch {
                records,
                count,
                bytes,
                _memory: memory,
            }),
        )
    }

    /// Sends what `channel`'s buffer became (the buffer itself, or the memory of a typed
    /// batch) and takes the channel's next buffer from the pool, waiting while all are lent out
    /// (backpressure).
    fn ship(&mut self, channel: usize, item: NetBuffer) -> Result<(), TaskError> {
        self.send(channel, item)?;
        let (next, waited) = self
            .pool
            .take_within(&self.cancelled)
            .ok_or(TaskError::Cancelled)?;
        self.buffers[channel] = next;
        self.count_back_pressure(waited);
        Ok(())
    }

    fn write<T: Data>(&mut self, channel: usize, record: &T) -> Result<(), TaskError> {
        self.appender
            .append_to_run(&mut self.buffers[channel], &mut self.runs[channel], record)?;
        if self.buffers[channel].len() >= self.segment_size {
            self.flush(channel)?;
        }
        Ok(())
    }

    /// Ends the open run of a buffer: before the buffer ships, or before anything but a record
    /// of the run is appended.
    fn close_run(&mut self, channel: usize) {
        record::close_run(&mut self.buffers[channel], &mut self.runs[channel]);
    }

    /// Appends a record already framed as a run of its own.
    fn write_bytes(&mut self, channel: usize, frame: &[u8]) -> Result<(), TaskError> {
        self.close_run(channel);
        self.buffers[channel].extend_from_slice(frame);
        if self.buffers[channel].len() >= self.segment_size {
            self.flush(channel)?;
        }
        Ok(())
    }

    fn send(&mut self, channel: usize, mut item: NetBuffer) -> Result<(), TaskError> {
        if let Some(spill) = &mut self.spill {
            if let Some(writer) = &mut spill.writer {
                writer.add(channel, &item).map_err(|source| TaskError::Io {
                    context: format!("writing blocking partition {}", spill.id),
                    source,
                })?;
            }
            return Ok(());
        }
        let queue = &self.subpartitions[channel];
        item = match queue.try_send(item) {
            Ok(()) => return Ok(()),
            Err(flume::TrySendError::Full(back)) => back,
            Err(flume::TrySendError::Disconnected(back)) => back,
        };
        let started = Instant::now();
        loop {
            match self.subpartitions[channel].send_timeout(item, Duration::from_millis(50)) {
                Ok(()) => break,
                Err(flume::SendTimeoutError::Timeout(back)) => {
                    if self.cancelled.load(Ordering::Relaxed) {
                        return Err(TaskError::Cancelled);
                    }
                    item = back;
                }
                Err(flume::SendTimeoutError::Disconnected(_)) => {
                    if self.cancelled.load(Ordering::Relaxed) {
                        return Err(TaskError::Cancelled);
                    }
                    return Err(TaskError::Network(format!(
                        "the consumer of subpartition {channel} went away"
                    )));
                }
            }
        }
        self.count_back_pressure(started.elapsed());
        Ok(())
    }

    /// Brings the record counter up to date.
    fn publish_records(&mut self) {
        if self.unpublished_records > 0 {
            self.counters
                .records_out
                .fetch_add(self.unpublished_records, Ordering::Relaxed);
            self.unpublished_records = 0;
        }
    }

    /// Ships the buffer of one subpartition if it holds anything, and takes the next one from
    /// the pool (waiting while all are lent out: backpressure).
    pub(crate) fn flush(&mut self, channel: usize) -> Result<(), TaskError> {
        self.publish_records();
        if self.typed[channel] {
            if let Some(mut stage) = self.stage.take() {
                let shipped = self.ship_batch(channel, &mut *stage);
                self.stage = Some(stage);
                shipped?;
            }
            return Ok(());
        }
        if self.buffers[channel].is_empty() {
            self.refresh_typed(channel);
            return Ok(());
        }
        self.appender.trim();
        self.close_run(channel);
        let full = std::mem::take(&mut self.buffers[channel]);
        self.counters
            .bytes_out
            .fetch_add(full.len() as u64, Ordering::Relaxed);
        let shipped = Buffer::pooled(full, self.pool.clone());
        self.ship(channel, NetBuffer::Data(shipped))?;
        self.refresh_typed(channel);
        Ok(())
    }

    /// Counts a wait for room downstream (short waits are scheduling noise, not backpressure).
    fn count_back_pressure(&self, waited: Duration) {
        if waited > Duration::from_micros(50) {
            self.counters
                .back_pressured_nanos
                .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Ships every non-empty buffer (the buffer timeout expired).
    pub(crate) fn flush_all(&mut self) -> Result<(), TaskError> {
        self.publish_records();
        for channel in 0..self.channels() {
            self.flush(channel)?;
        }
        Ok(())
    }

    /// Ships what is buffered, then the barrier on every subpartition: a barrier overtakes no
    /// record.
    pub(crate) fn broadcast_barrier(
        &mut self,
        barrier: &Arc<super::buffer::CheckpointBarrier>,
    ) -> Result<(), TaskError> {
        if self.finished {
            return Ok(());
        }
        self.flush_all()?;
        for channel in 0..self.channels() {
            self.send(channel, NetBuffer::Barrier(barrier.clone()))?;
        }
        Ok(())
    }

    /// Ships what is buffered, then the event time signal, on every subpartition: records
    /// before a watermark reach each consumer before it.
    pub(crate) fn broadcast_time(
        &mut self,
        signal: super::valve::TimeSignal,
    ) -> Result<(), TaskError> {
        if self.finished {
            return Ok(());
        }
        self.flush_all()?;
        for channel in 0..self.channels() {
            self.send(channel, NetBuffer::Time(signal))?;
        }
        if let super::valve::TimeSignal::Watermark(w) = signal {
            self.counters.output_watermark.set(w);
        }
        Ok(())
    }

    /// Ships what is left and ends every subpartition.
    pub(crate) fn finish(&mut self) -> Result<(), TaskError> {
        if self.finished {
            return Ok(());
        }
        self.flush_all()?;
        if let Some(spill) = &mut self.spill {
            if let Some(writer) = spill.writer.take() {
                let partition = writer.finish().map_err(|source| TaskError::Io {
                    context: format!("writing blocking partition {}", spill.id),
                    source,
                })?;
                tracing::info!(
                    partition = %spill.id,
                    file = %partition.path().display(),
                    bytes = partition.file_bytes(),
                    uncompressed = partition.raw_bytes(),
                    "blocking partition written"
                );
                spill.registry.register_blocking(spill.id, partition);
            }
            self.finished = true;
            return Ok(());
        }
        for channel in 0..self.channels() {
            self.send(channel, NetBuffer::EndOfPartition)?;
        }
        self.finished = true;
        Ok(())
    }
}

/// The typed end of a chain that writes into a result partition (the api makes it an operator
/// output).
pub(crate) struct NetworkOutput<T> {
    writer: RecordWriterHandle,
    route: Route<T>,
}

/// How a network output picks the channels of its records.
struct Route<T> {
    selector: ChannelSelector<T>,
    /// The job's key hash (for a key selector).
    key_hash: KeyHash,
    next_channel: usize,
    scratch: AlignedVec,
}

impl<T: Data> NetworkOutput<T> {
    pub(crate) fn new(
        writer: RecordWriterHandle,
        selector: ChannelSelector<T>,
        subtask_index: usize,
        key_hash: KeyHash,
    ) -> Self {
        let channels = {
            let mut w = writer.borrow_mut();
            w.install_stage::<T>();
            w.channels().max(1)
        };
        // Start round-robin at our own index so that parallel producers do not all hit channel 0.
        let next_channel = subtask_index % channels;
        NetworkOutput {
            writer,
            route: Route {
                selector,
                key_hash,
                next_channel,
                scratch: AlignedVec::new(),
            },
        }
    }

    /// Writes one record to the channel (or channels) its selector picks.
    #[inline]
    pub(crate) fn push(&mut self, record: T) -> Result<(), TaskError> {
        self.write(std::iter::once(record))
    }

    /// Writes a batch of records, leaving it empty.
    pub(crate) fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        self.write(batch.drain(..))
    }

    /// Writes records with the writer borrowed, and its typed batches taken out and given
    /// their type, once for all of them.
    #[inline]
    fn write(&mut self, records: impl ExactSizeIterator<Item = T>) -> Result<(), TaskError> {
        let mut guard = self.writer.borrow_mut();
        let w = &mut *guard;
        w.unpublished_records += records.len() as u64;
        let mut stage = w.stage.take();
        let mut typed: Option<&mut TypedStage<T>> =
            stage.as_deref_mut().and_then(|s| s.as_any().downcast_mut());
        let mut result = Ok(());
        for record in records {
            result = self.route.write(w, &mut typed, record);
            if result.is_err() {
                break;
            }
        }
        w.stage = stage;
        result
    }

    /// Ships what is left and ends every subpartition.
    pub(crate) fn finish(&mut self) -> Result<(), TaskError> {
        self.writer.borrow_mut().finish()
    }

    /// Ships what is buffered, then the event time signal, on every subpartition.
    pub(crate) fn broadcast_time(
        &mut self,
        signal: super::valve::TimeSignal,
    ) -> Result<(), TaskError> {
        self.writer.borrow_mut().broadcast_time(signal)
    }

    /// Ships what is buffered, then the barrier, on every subpartition.
    pub(crate) fn broadcast_barrier(
        &mut self,
        barrier: &Arc<super::buffer::CheckpointBarrier>,
    ) -> Result<(), TaskError> {
        self.writer.borrow_mut().broadcast_barrier(barrier)
    }
}

impl<T: Data> Route<T> {
    #[inline]
    fn write(
        &mut self,
        w: &mut RecordWriter,
        typed: &mut Option<&mut TypedStage<T>>,
        record: T,
    ) -> Result<(), TaskError> {
        let channels = w.channels();
        match &self.selector {
            ChannelSelector::RoundRobin => {
                let channel = self.next_channel;
                self.next_channel = if channel + 1 == channels {
                    0
                } else {
                    channel + 1
                };
                write_to(w, typed, channel, record)
            }
            ChannelSelector::Key(hash) => {
                let group = w.key_groups.of(hash(&record, self.key_hash));
                let channel = w.key_group_owner[group as usize] as usize;
                write_to(w, typed, channel, record)
            }
            ChannelSelector::Broadcast => {
                // Serialize once (if any channel takes bytes), copy the frame to every channel.
                self.scratch.clear();
                for channel in 0..channels {
                    if w.typed[channel] {
                        write_to(w, typed, channel, record.clone())?;
                    } else {
                        if self.scratch.is_empty() {
                            record::append(&mut self.scratch, &record)?;
                        }
                        w.write_bytes(channel, &self.scratch)?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Appends `record` to `channel`'s typed batch or serializes it into its buffer.
#[inline]
fn write_to<T: Data>(
    w: &mut RecordWriter,
    typed: &mut Option<&mut TypedStage<T>>,
    channel: usize,
    record: T,
) -> Result<(), TaskError> {
    if w.typed[channel]
        && let Some(stage) = typed
    {
        let batch = &mut stage.batches[channel];
        batch.push(record);
        if batch.len() >= stage.capacity {
            w.ship_batch(channel, &mut **stage)?;
        }
        return Ok(());
    }
    w.write(channel, &record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::keys::key_group;
    use crate::record::Frames;

    fn writer(channels: usize) -> (RecordWriterHandle, Vec<flume::Receiver<NetBuffer>>) {
        writer_with(channels, 64 * channels, &[])
    }

    /// A writer of `max_buffers` whose subpartitions in `local` have a local reader.
    fn writer_with(
        channels: usize,
        max_buffers: usize,
        local: &[usize],
    ) -> (RecordWriterHandle, Vec<flume::Receiver<NetBuffer>>) {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..channels).map(|_| flume::unbounded()).unzip();
        let readers = (0..channels)
            .map(|c| Arc::new(AtomicBool::new(local.contains(&c))))
            .collect();
        let w = RecordWriter::new(
            txs,
            readers,
            1024,
            max_buffers,
            128,
            Arc::new(AtomicBool::new(false)),
            Arc::new(IoCounters::default()),
        );
        (Rc::new(RefCell::new(w)), rxs)
    }

    /// What a channel received: its records in order, and what came as typed batches.
    #[derive(Default, Debug)]
    struct Received<T> {
        records: Vec<T>,
        typed: usize,
        barriers: Vec<usize>,
        ended: bool,
    }

    fn drain_any<T: Data>(rx: &flume::Receiver<NetBuffer>) -> Received<T> {
        let mut got = Received {
            records: Vec::new(),
            typed: 0,
            barriers: Vec::new(),
            ended: false,
        };
        while let Ok(item) = rx.try_recv() {
            assert!(!got.ended, "nothing follows the end");
            match item {
                NetBuffer::Data(buf) => {
                    for frame in Frames::new(&buf) {
                        let (offset, bytes) = frame.unwrap();
                        got.records
                            .push(crate::record::decode::<T>(offset, bytes).unwrap());
                    }
                }
                NetBuffer::Batch(batch) => {
                    assert_eq!(batch.bytes, batch.count * std::mem::size_of::<T>());
                    let records = batch.records.downcast::<Vec<T>>().unwrap();
                    assert_eq!(records.len(), batch.count);
                    got.typed += records.len();
                    got.records.extend(*records);
                }
                NetBuffer::EndOfPartition => got.ended = true,
                NetBuffer::Barrier(_) => got.barriers.push(got.records.len()),
                NetBuffer::Time(_) => {}
            }
        }
        got
    }

    fn drain(rx: &flume::Receiver<NetBuffer>) -> (Vec<u64>, bool) {
        let got = drain_any::<u64>(rx);
        (got.records, got.ended)
    }

    fn run(selector: ChannelSelector<u64>, channels: usize, records: u64) -> Vec<Vec<u64>> {
        let (handle, rxs) = writer(channels);
        let mut out = NetworkOutput::new(handle, selector, 0, KeyHash::CURRENT);
        for r in 0..records {
            out.push(r).unwrap();
        }
        out.finish().unwrap();
        rxs.iter()
            .map(|rx| {
                let (records, ended) = drain(rx);
                assert!(ended, "every channel ends");
                records
            })
            .collect()
    }

    #[test]
    fn broadcast_sends_every_record_to_every_channel() {
        for got in run(ChannelSelector::Broadcast, 3, 500) {
            assert_eq!(got, (0..500).collect::<Vec<_>>());
        }
    }

    #[test]
    fn rebalance_spreads_round_robin() {
        let got = run(ChannelSelector::RoundRobin, 4, 400);
        for (c, records) in got.iter().enumerate() {
            assert_eq!(records.len(), 100);
            assert!(records.iter().all(|r| r % 4 == c as u64));
        }
    }

    #[test]
    fn hash_sends_each_key_to_its_key_groups_subtask() {
        let key: Arc<dyn Fn(&u64) -> u64 + Send + Sync> = Arc::new(|r: &u64| r % 10);
        let got = run(ChannelSelector::by_key(key), 3, 1000);
        for (c, records) in got.iter().enumerate() {
            for r in records {
                let group = key_group(KeyHash::CURRENT.hash(&(r % 10)), 128);
                assert_eq!(operator_index_for_key_group(128, 3, group) as usize, c);
            }
        }
        assert_eq!(got.iter().map(Vec::len).sum::<usize>(), 1000);
    }

    fn barrier() -> Arc<super::super::buffer::CheckpointBarrier> {
        Arc::new(super::super::buffer::CheckpointBarrier {
            timestamp: 0,
            location: crate::state::SnapshotLocation {
                checkpoint_id: 1,
                kind: crate::state::SnapshotKind::Checkpoint,
                dir: "/unused".into(),
                shared_dir: None,
            },
            drain: false,
        })
    }

    /// Records for a local reader go as typed batches once the channel's first buffer has
    /// shipped; a remote reader's channel stays serialized; per channel the order holds across
    /// the switch, and a barrier follows exactly the records written before it.
    #[test]
    fn local_readers_get_typed_batches_in_order_with_barriers_after_their_records() {
        let (handle, rxs) = writer_with(2, 64, &[0]);
        let mut out = NetworkOutput::new(
            handle.clone(),
            ChannelSelector::RoundRobin,
            0,
            KeyHash::CURRENT,
        );
        let mut batch: Vec<u64> = (0..3000).collect();
        out.push_batch(&mut batch).unwrap();
        assert!(batch.is_empty());
        out.broadcast_barrier(&barrier()).unwrap();
        for r in 3000..3100 {
            out.push(r).unwrap();
        }
        // A timeout's flush ships the partial typed batch.
        handle.borrow_mut().flush_all().unwrap();
        out.push(3100).unwrap();
        out.finish().unwrap();
        let local = drain_any::<u64>(&rxs[0]);
        let remote = drain_any::<u64>(&rxs[1]);
        assert_eq!(local.records, (0..=3100).step_by(2).collect::<Vec<_>>());
        assert_eq!(remote.records, (1..3100).step_by(2).collect::<Vec<_>>());
        assert!(local.typed > 1000, "local: {} typed", local.typed);
        assert_eq!(remote.typed, 0);
        assert_eq!(local.barriers, vec![1500]);
        assert_eq!(remote.barriers, vec![1500]);
        assert!(local.ended && remote.ended);
    }

    /// Records that own heap memory (a `String`) stay serialized even for a local reader: a
    /// batch of them would hold memory the network budget does not count.
    #[test]
    fn records_owning_heap_memory_stay_serialized() {
        let (handle, rxs) = writer_with(1, 64, &[0]);
        let mut out = NetworkOutput::new(handle, ChannelSelector::RoundRobin, 0, KeyHash::CURRENT);
        let mut batch: Vec<String> = (0..2000).map(|i| i.to_string()).collect();
        out.push_batch(&mut batch).unwrap();
        out.finish().unwrap();
        let got = drain_any::<String>(&rxs[0]);
        assert_eq!(got.typed, 0);
        assert_eq!(got.records.len(), 2000);
    }

    /// A typed batch holds one of the partition's pool buffers until the consumer drops it:
    /// with every buffer lent out the writer waits (backpressure), as for serialized buffers.
    #[test]
    fn typed_batches_hold_pool_buffers_until_consumed() {
        let (handle, mut rxs) = writer_with(1, 3, &[0]);
        let rx = rxs.remove(0);
        let mut out = NetworkOutput::new(
            handle.clone(),
            ChannelSelector::RoundRobin,
            0,
            KeyHash::CURRENT,
        );
        // The first buffer goes serialized; once it has shipped the channel turns typed.
        out.push(0u64).unwrap();
        handle.borrow_mut().flush_all().unwrap();
        assert!(matches!(rx.try_recv(), Ok(NetBuffer::Data(_))));
        // Batches of 128 records (1024-byte segments, 8-byte records). Of the 3 buffers, two
        // go with the first two batches and one is being filled: the third batch's shipment
        // waits until the consumer drops a batch.
        let consumed = Arc::new(AtomicBool::new(false));
        let consumer = {
            let consumed = consumed.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                let first = rx.recv_timeout(Duration::from_secs(10));
                assert!(matches!(first, Ok(NetBuffer::Batch(_))));
                consumed.store(true, Ordering::SeqCst);
                drop(first);
                rx
            })
        };
        for r in 1..=3 * 128 {
            out.push(r).unwrap();
        }
        assert!(
            consumed.load(Ordering::SeqCst),
            "the third batch shipped while two batches and a buffer held the whole pool"
        );
        let rx = consumer.join().unwrap();
        out.finish().unwrap();
        let rest = drain_any::<u64>(&rx);
        assert_eq!(rest.records, (129..=3 * 128).collect::<Vec<_>>());
        assert!(rest.ended);
    }
}
