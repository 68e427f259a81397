//! Writing records into a result partition: one buffer per subpartition, shipped when full,
//! when the buffer timeout expires, or at the end.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rkyv::util::AlignedVec;

use super::buffer::{Buffer, BufferPool, IoCounters, NetBuffer};
use super::partitioner::ChannelSelector;
use crate::common::error::TaskError;
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
        segment_size: usize,
        max_buffers: usize,
        consumer_max_parallelism: u32,
        cancelled: Arc<AtomicBool>,
        counters: Arc<IoCounters>,
    ) -> Self {
        let pool = BufferPool::new(segment_size, max_buffers);
        counters.watch_out_pool(&pool);
        let buffers = subpartitions.iter().map(|_| pool.take(0)).collect();
        let runs = subpartitions.iter().map(|_| None).collect();
        let channels = subpartitions.len().max(1) as u32;
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
        }
    }

    fn channels(&self) -> usize {
        self.subpartitions.len()
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

    fn send(&self, channel: usize, mut item: NetBuffer) -> Result<(), TaskError> {
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
        if self.buffers[channel].is_empty() {
            return Ok(());
        }
        self.appender.trim();
        self.close_run(channel);
        let full = std::mem::take(&mut self.buffers[channel]);
        self.counters
            .bytes_out
            .fetch_add(full.len() as u64, Ordering::Relaxed);
        self.send(
            channel,
            NetBuffer::Data(Buffer::pooled(full, self.pool.clone())),
        )?;
        let (next, waited) = self
            .pool
            .take_within(&self.cancelled)
            .ok_or(TaskError::Cancelled)?;
        self.buffers[channel] = next;
        self.count_back_pressure(waited);
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

    /// Ships what is left and ends every subpartition.
    pub(crate) fn finish(&mut self) -> Result<(), TaskError> {
        if self.finished {
            return Ok(());
        }
        self.flush_all()?;
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
        let channels = writer.borrow().channels().max(1);
        // Start round-robin at our own index so that parallel producers do not all hit channel 0.
        let next_channel = subtask_index % channels;
        NetworkOutput {
            writer,
            selector,
            key_hash,
            next_channel,
            scratch: AlignedVec::new(),
        }
    }

    /// Writes one record to the channel (or channels) its selector picks.
    #[inline]
    pub(crate) fn push(&mut self, record: T) -> Result<(), TaskError> {
        let mut w = self.writer.borrow_mut();
        w.unpublished_records += 1;
        let channels = w.channels();
        match &self.selector {
            ChannelSelector::RoundRobin => {
                let channel = self.next_channel;
                self.next_channel = if channel + 1 == channels {
                    0
                } else {
                    channel + 1
                };
                w.write(channel, &record)
            }
            ChannelSelector::Key(hash) => {
                let group = w.key_groups.of(hash(&record, self.key_hash));
                let channel = w.key_group_owner[group as usize] as usize;
                w.write(channel, &record)
            }
            ChannelSelector::Broadcast => {
                // Serialize once, copy the frame to every channel.
                self.scratch.clear();
                record::append(&mut self.scratch, &record)?;
                for channel in 0..channels {
                    w.write_bytes(channel, &self.scratch)?;
                }
                Ok(())
            }
        }
    }

    /// Ships what is left and ends every subpartition.
    pub(crate) fn finish(&mut self) -> Result<(), TaskError> {
        self.writer.borrow_mut().finish()
    }

    /// Ships what is buffered, then the barrier, on every subpartition.
    pub(crate) fn broadcast_barrier(
        &mut self,
        barrier: &Arc<super::buffer::CheckpointBarrier>,
    ) -> Result<(), TaskError> {
        self.writer.borrow_mut().broadcast_barrier(barrier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::keys::key_group;
    use crate::record::Frames;

    fn writer(channels: usize) -> (RecordWriterHandle, Vec<flume::Receiver<NetBuffer>>) {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..channels).map(|_| flume::unbounded()).unzip();
        let w = RecordWriter::new(
            txs,
            1024,
            64 * channels,
            128,
            Arc::new(AtomicBool::new(false)),
            Arc::new(IoCounters::default()),
        );
        (Rc::new(RefCell::new(w)), rxs)
    }

    fn drain(rx: &flume::Receiver<NetBuffer>) -> (Vec<u64>, bool) {
        let (mut records, mut ended) = (Vec::new(), false);
        while let Ok(item) = rx.try_recv() {
            match item {
                NetBuffer::Data(buf) => {
                    for frame in Frames::new(&buf) {
                        let (offset, bytes) = frame.unwrap();
                        records.push(crate::record::decode::<u64>(offset, bytes).unwrap());
                    }
                }
                NetBuffer::EndOfPartition => ended = true,
                NetBuffer::Barrier(_) => {}
            }
        }
        (records, ended)
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
}
