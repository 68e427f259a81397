//! Reading a vertex's inputs: all channels of all its input gates, in whatever order buffers
//! arrive, until every channel has ended.

use std::sync::Arc;
use std::time::Duration;

use super::buffer::{Buffer, CheckpointBarrier, IoCounters, LocalBatch, NetBuffer};
use super::valve::{TimeSignal, TwoInputValves, ValveOutput, WatermarkValve};

/// What the next read from the inputs gave.
#[derive(Debug)]
pub(crate) enum GateEvent {
    /// A buffer of records from one channel.
    Buffer(Buffer),
    /// A typed batch of records from a producer in this TaskManager.
    Batch(LocalBatch),
    /// A checkpoint barrier has arrived on every open channel (aligned): snapshot now.
    Barrier(Arc<CheckpointBarrier>),
    /// A newer barrier overtook the alignment of an older checkpoint, which is given up.
    Aborted(u64),
    /// Event time: the input watermark advanced, or the input became idle or active again.
    Time(TimeSignal),
    /// Every channel has ended.
    Finished,
    /// Nothing arrived within the timeout.
    Timeout,
    /// A channel's producer side vanished without ending it.
    Broken(usize),
}

/// A checkpoint whose barrier has reached some channels but not yet all.
struct Alignment {
    barrier: Arc<CheckpointBarrier>,
    /// Channels that delivered the barrier (they stay blocked until alignment, when exactly once).
    received: Vec<bool>,
}

/// How a gate combines its channels' event time.
enum Valve {
    /// One logical input: one valve over all channels.
    One(WatermarkValve),
    /// A two-input operator's inputs: a valve per input, combined.
    Two(TwoInputValves),
}

impl Valve {
    fn on_signal(&mut self, channel: usize, signal: TimeSignal) -> ValveOutput {
        match self {
            Valve::One(v) => v.on_signal(channel, signal),
            Valve::Two(v) => v.on_signal(channel, signal),
        }
    }

    fn on_end(&mut self, channel: usize) -> ValveOutput {
        match self {
            Valve::One(v) => v.on_end(channel),
            Valve::Two(v) => v.on_end(channel),
        }
    }
}

/// The union of all input channels of one subtask.
///
/// With exactly-once checkpoints a channel that delivered barrier `n` is not read again until
/// barrier `n` arrived on every other open channel (an ended channel counts as arrived), so the
/// snapshot holds exactly the records before the barrier. At least once, channels keep flowing
/// and records after an early barrier may be in the snapshot's inputs twice after a restore.
pub(crate) struct InputGate {
    channels: Vec<flume::Receiver<NetBuffer>>,
    ended: Vec<bool>,
    open: usize,
    next: usize,
    names: Vec<String>,
    exactly_once: bool,
    alignment: Option<Alignment>,
    /// The newest checkpoint a barrier or an injection started here: an older or equal one
    /// arriving later has been aligned or given up already.
    newest: u64,
    /// Events decided together with the previous one, returned by the next calls.
    queued: std::collections::VecDeque<GateEvent>,
    /// The input watermark over the channels.
    valve: Valve,
    /// The channel of the last buffer or batch returned (which input it belongs to, for a
    /// two-input operator).
    last: usize,
    /// Where the time spent blocked waiting for a buffer is added up (the task's idle time).
    idle: Option<Arc<IoCounters>>,
}

impl Drop for InputGate {
    fn drop(&mut self) {
        if let Some(counters) = &self.idle {
            counters.forget_input_queues();
        }
    }
}

impl InputGate {
    /// `names` describe each channel's producer for error messages.
    pub(crate) fn new(channels: Vec<flume::Receiver<NetBuffer>>, names: Vec<String>) -> Self {
        let n = channels.len();
        InputGate {
            channels,
            ended: vec![false; n],
            open: n,
            next: 0,
            names,
            exactly_once: true,
            alignment: None,
            newest: 0,
            queued: Default::default(),
            valve: Valve::One(WatermarkValve::new(n)),
            last: 0,
            idle: None,
        }
    }

    /// A gate for a two-input operator: `channel_inputs[c]` says which logical input (0 or 1)
    /// channel `c` belongs to. Barriers align over all channels of both inputs; event time is
    /// combined per input, then over the inputs ([`TwoInputValves`]).
    pub(crate) fn two_inputs(
        channels: Vec<flume::Receiver<NetBuffer>>,
        names: Vec<String>,
        channel_inputs: &[usize],
    ) -> Self {
        let mut gate = InputGate::new(channels, names);
        gate.valve = Valve::Two(TwoInputValves::new(channel_inputs));
        gate
    }

    /// The logical input (0 or 1) of the last buffer or batch [`next`](Self::next) returned;
    /// always 0 for a gate of one input.
    pub(crate) fn last_input(&self) -> usize {
        match &self.valve {
            Valve::One(_) => 0,
            Valve::Two(v) => v.input_of(self.last),
        }
    }

    /// Adds the time [`next`](Self::next) spends blocked (nothing readable yet) to
    /// `counters.idle_nanos`. Only the blocking wait is timed, so reading buffers that are
    /// already there costs no clock reads.
    /// Its channels' queues count in `counters`' `inPoolUsage` and `inputQueueLength` while
    /// the gate lives.
    pub(crate) fn count_idle_time_in(&mut self, counters: Arc<IoCounters>) {
        counters.watch_input_queues(&self.channels);
        self.idle = Some(counters);
    }

    /// Aligned (exactly-once, the default) or unaligned-flowing (at-least-once) barriers.
    pub(crate) fn set_exactly_once(&mut self, exactly_once: bool) {
        self.exactly_once = exactly_once;
    }

    /// Describes channel `i`'s producer for error messages.
    pub(crate) fn channel_name(&self, i: usize) -> &str {
        self.names.get(i).map(String::as_str).unwrap_or("?")
    }

    /// Starts a checkpoint that was triggered on this task directly (its producers have all
    /// finished): it completes once every channel has ended or delivered the barrier, so the
    /// records still queued before the ends are processed first.
    /// A trigger for a checkpoint this gate has seen a barrier of is ignored: the barrier
    /// takes care of it.
    pub(crate) fn inject(&mut self, barrier: Arc<CheckpointBarrier>) -> Option<GateEvent> {
        if barrier.id() <= self.newest {
            return None;
        }
        self.newest = barrier.id();
        let n = self.channels.len();
        self.alignment = Some(Alignment {
            barrier,
            received: vec![false; n],
        });
        self.complete_alignment()
    }

    fn is_blocked(&self, i: usize) -> bool {
        self.exactly_once && self.alignment.as_ref().is_some_and(|a| a.received[i])
    }

    /// The aligned barrier, if every open channel has delivered it.
    fn complete_alignment(&mut self) -> Option<GateEvent> {
        let a = self.alignment.as_ref()?;
        let done = (0..self.channels.len()).all(|i| self.ended[i] || a.received[i]);
        if done {
            self.alignment.take().map(|a| GateEvent::Barrier(a.barrier))
        } else {
            None
        }
    }

    fn on_barrier(&mut self, i: usize, barrier: Arc<CheckpointBarrier>) -> Option<GateEvent> {
        let n = self.channels.len();
        if self.alignment.is_none() && barrier.id() <= self.newest {
            // Of a checkpoint already aligned here (injected, then this channel's barrier).
            return None;
        }
        self.newest = self.newest.max(barrier.id());
        match &mut self.alignment {
            Some(a) if a.barrier.id() == barrier.id() => a.received[i] = true,
            // A late barrier of a checkpoint already aligned or given up.
            Some(a) if a.barrier.id() > barrier.id() => return None,
            Some(a) => {
                // A newer checkpoint overtook the one being aligned: give the older one up.
                let old = a.barrier.id();
                let mut received = vec![false; n];
                received[i] = true;
                self.alignment = Some(Alignment { barrier, received });
                if let Some(aligned) = self.complete_alignment() {
                    self.queued.push_back(aligned);
                }
                return Some(GateEvent::Aborted(old));
            }
            None => {
                let mut received = vec![false; n];
                received[i] = true;
                self.alignment = Some(Alignment { barrier, received });
            }
        }
        self.complete_alignment()
    }

    fn accept(&mut self, i: usize, item: Result<NetBuffer, ()>) -> Option<GateEvent> {
        match item {
            Ok(NetBuffer::Data(buf)) => {
                self.last = i;
                Some(GateEvent::Buffer(buf))
            }
            Ok(NetBuffer::Batch(batch)) => {
                self.last = i;
                Some(GateEvent::Batch(batch))
            }
            Ok(NetBuffer::Barrier(barrier)) => self.on_barrier(i, barrier),
            Ok(NetBuffer::Time(signal)) => {
                let out = self.valve.on_signal(i, signal);
                self.queue_time(out);
                self.queued.pop_front()
            }
            Ok(NetBuffer::EndOfPartition) => {
                self.ended[i] = true;
                self.open -= 1;
                // The channel's end moves time first: what it closes happened before.
                let out = self.valve.on_end(i);
                self.queue_time(out);
                if let Some(aligned) = self.complete_alignment() {
                    self.queued.push_back(aligned);
                } else if self.open == 0 {
                    self.queued.push_back(GateEvent::Finished);
                }
                self.queued.pop_front()
            }
            Err(()) => Some(GateEvent::Broken(i)),
        }
    }

    fn queue_time(&mut self, out: ValveOutput) {
        self.queued.extend(out.signals().map(GateEvent::Time));
    }

    /// The next buffer or event from any open channel, waiting at most `timeout`.
    pub(crate) fn next(&mut self, timeout: Duration) -> GateEvent {
        if let Some(event) = self.queued.pop_front() {
            return event;
        }
        if self.open == 0 {
            return GateEvent::Finished;
        }
        // Fast path: poll each readable channel once, round-robin, so no channel starves.
        let n = self.channels.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if self.ended[i] || self.is_blocked(i) {
                continue;
            }
            match self.channels[i].try_recv() {
                Ok(item) => {
                    self.next = (i + 1) % n;
                    if let Some(ev) = self.accept(i, Ok(item)) {
                        return ev;
                    }
                    return self.next(timeout);
                }
                Err(flume::TryRecvError::Empty) => {}
                Err(flume::TryRecvError::Disconnected) => return GateEvent::Broken(i),
            }
        }
        let mut selector = flume::Selector::new();
        for (i, rx) in self.channels.iter().enumerate() {
            if !self.ended[i] && !self.is_blocked(i) {
                selector = selector.recv(rx, move |r| (i, r.map_err(|_| ())));
            }
        }
        let waiting_since = self.idle.as_ref().map(|_| std::time::Instant::now());
        let result = selector.wait_timeout(timeout);
        if let (Some(counters), Some(since)) = (&self.idle, waiting_since) {
            let waited = since.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            counters
                .idle_nanos
                .fetch_add(waited, std::sync::atomic::Ordering::Relaxed);
        }
        match result {
            Ok((i, item)) => self.accept(i, item).unwrap_or(GateEvent::Timeout),
            Err(_) => GateEvent::Timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rkyv::util::AlignedVec;

    #[test]
    fn gate_reads_all_channels_until_all_end() {
        let (tx1, rx1) = flume::bounded(4);
        let (tx2, rx2) = flume::bounded(4);
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        let mut buf = AlignedVec::new();
        buf.extend_from_slice(&[1, 2, 3]);
        tx1.send(NetBuffer::Data(Buffer::local(buf.clone())))
            .unwrap();
        tx1.send(NetBuffer::EndOfPartition).unwrap();
        tx2.send(NetBuffer::Data(Buffer::local(buf))).unwrap();
        let mut buffers = 0;
        loop {
            match gate.next(Duration::from_millis(10)) {
                GateEvent::Buffer(_) => buffers += 1,
                GateEvent::Timeout => tx2.send(NetBuffer::EndOfPartition).unwrap(),
                GateEvent::Time(TimeSignal::Watermark(i64::MAX)) => {}
                GateEvent::Finished => break,
                GateEvent::Broken(i) => panic!("broken {i}"),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(buffers, 2);
    }

    #[test]
    fn in_pool_usage_follows_the_queued_input_buffers_and_ends_with_the_gate() {
        let (tx1, rx1) = flume::bounded(4);
        let (tx2, rx2) = flume::bounded(4);
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        let counters = Arc::new(IoCounters::default());
        gate.count_idle_time_in(counters.clone());
        assert_eq!(counters.input_queues(), (0, 0), "empty inputs");
        let data = || {
            let mut buf = AlignedVec::new();
            buf.extend_from_slice(&[1, 2, 3]);
            NetBuffer::Data(Buffer::local(buf))
        };
        for _ in 0..4 {
            tx1.send(data()).unwrap();
        }
        assert_eq!(
            counters.input_queues(),
            (4, 500),
            "one of two channels full"
        );
        for _ in 0..4 {
            tx2.send(data()).unwrap();
        }
        assert_eq!(counters.input_queues(), (8, 1000), "every channel full");
        for _ in 0..6 {
            assert!(matches!(
                gate.next(Duration::from_millis(10)),
                GateEvent::Buffer(_)
            ));
        }
        assert_eq!(counters.input_queues(), (2, 250), "read down");
        // The metrics keep no channel alive: once the gate is gone, producers see no reader.
        drop(gate);
        assert_eq!(counters.input_queues(), (0, 0));
        assert!(tx1.is_disconnected() && tx2.is_disconnected());
    }

    fn barrier(id: u64) -> Arc<CheckpointBarrier> {
        Arc::new(CheckpointBarrier {
            timestamp: 0,
            location: crate::state::SnapshotLocation {
                checkpoint_id: id,
                kind: crate::state::SnapshotKind::Checkpoint,
                dir: format!("/c/chk-{id}"),
                shared_dir: None,
            },
            drain: false,
        })
    }

    fn data(byte: u8) -> NetBuffer {
        let mut buf = AlignedVec::new();
        buf.extend_from_slice(&[byte]);
        NetBuffer::Data(Buffer::local(buf))
    }

    /// Reads until the gate has nothing more, naming what came: buffers by their byte.
    fn drain(gate: &mut InputGate) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match gate.next(Duration::from_millis(5)) {
                GateEvent::Buffer(b) => seen.push(format!("d{}", b[0])),
                GateEvent::Batch(b) => seen.push(format!("t{}", b.count)),
                GateEvent::Barrier(b) => seen.push(format!("B{}", b.id())),
                GateEvent::Aborted(id) => seen.push(format!("A{id}")),
                GateEvent::Time(TimeSignal::Watermark(i64::MAX)) => seen.push("wEnd".into()),
                GateEvent::Time(TimeSignal::Watermark(w)) => seen.push(format!("w{w}")),
                GateEvent::Time(TimeSignal::Idle) => seen.push("idle".into()),
                GateEvent::Time(TimeSignal::Active) => seen.push("active".into()),
                GateEvent::Finished => {
                    seen.push("end".into());
                    return seen;
                }
                GateEvent::Timeout => return seen,
                GateEvent::Broken(i) => panic!("broken {i}"),
            }
        }
    }

    #[test]
    fn exactly_once_blocks_a_channel_after_its_barrier_until_all_align() {
        let (tx1, rx1) = flume::unbounded();
        let (tx2, rx2) = flume::unbounded();
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        // Channel a: 1, barrier, 2. Channel b: 3, 4, barrier, 5.
        tx1.send(data(1)).unwrap();
        tx1.send(NetBuffer::Barrier(barrier(7))).unwrap();
        tx1.send(data(2)).unwrap();
        tx2.send(data(3)).unwrap();
        tx2.send(data(4)).unwrap();
        tx2.send(NetBuffer::Barrier(barrier(7))).unwrap();
        tx2.send(data(5)).unwrap();
        let seen = drain(&mut gate);
        let at = seen
            .iter()
            .position(|s| s == "B7")
            .expect("aligned barrier");
        let mut before: Vec<_> = seen[..at].to_vec();
        before.sort();
        assert_eq!(before, ["d1", "d3", "d4"], "{seen:?}");
        let mut after: Vec<_> = seen[at + 1..].to_vec();
        after.sort();
        assert_eq!(after, ["d2", "d5"], "{seen:?}");
    }

    #[test]
    fn at_least_once_keeps_reading_after_an_early_barrier() {
        let (tx1, rx1) = flume::unbounded();
        let (tx2, rx2) = flume::unbounded();
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        gate.set_exactly_once(false);
        tx1.send(NetBuffer::Barrier(barrier(1))).unwrap();
        tx1.send(data(2)).unwrap();
        let seen = drain(&mut gate);
        assert_eq!(seen, ["d2"], "channel a is not blocked");
        tx2.send(NetBuffer::Barrier(barrier(1))).unwrap();
        assert_eq!(drain(&mut gate), ["B1"]);
    }

    #[test]
    fn an_ended_channel_counts_as_aligned_and_injection_waits_for_ends() {
        let (tx1, rx1) = flume::unbounded();
        let (tx2, rx2) = flume::unbounded();
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        tx1.send(NetBuffer::Barrier(barrier(1))).unwrap();
        tx2.send(data(9)).unwrap();
        tx2.send(NetBuffer::EndOfPartition).unwrap();
        assert_eq!(drain(&mut gate), ["d9", "B1"]);
        // A directly triggered checkpoint completes once the other channel ends too.
        assert!(gate.inject(barrier(2)).is_none());
        tx1.send(data(8)).unwrap();
        tx1.send(NetBuffer::EndOfPartition).unwrap();
        // The last end is the end of event time, then the checkpoint it completes.
        assert_eq!(drain(&mut gate), ["d8", "wEnd", "B2", "end"]);
    }

    #[test]
    fn a_trigger_for_a_checkpoint_a_barrier_started_is_ignored() {
        let (tx1, rx1) = flume::unbounded();
        let (tx2, rx2) = flume::unbounded();
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        tx1.send(NetBuffer::Barrier(barrier(3))).unwrap();
        tx2.send(NetBuffer::Barrier(barrier(3))).unwrap();
        assert_eq!(drain(&mut gate), vec!["B3"]);
        assert!(gate.inject(barrier(3)).is_none(), "aligned already");
        assert!(gate.inject(barrier(2)).is_none(), "older");
        tx1.send(NetBuffer::EndOfPartition).unwrap();
        tx2.send(NetBuffer::EndOfPartition).unwrap();
        assert_eq!(drain(&mut gate), vec!["wEnd", "end"]);
        // A newer one, injected once its channels ended, aligns at once.
        assert!(matches!(gate.inject(barrier(4)), Some(GateEvent::Barrier(b)) if b.id() == 4));
        assert!(gate.inject(barrier(4)).is_none());
    }

    #[test]
    fn a_newer_barrier_aborts_the_older_alignment() {
        let (tx1, rx1) = flume::unbounded();
        let (tx2, rx2) = flume::unbounded();
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        tx1.send(NetBuffer::Barrier(barrier(1))).unwrap();
        tx2.send(NetBuffer::Barrier(barrier(2))).unwrap();
        tx1.send(NetBuffer::Barrier(barrier(2))).unwrap();
        tx2.send(NetBuffer::Barrier(barrier(1))).unwrap();
        assert_eq!(drain(&mut gate), ["A1", "B2"]);
    }

    fn time(signal: TimeSignal) -> NetBuffer {
        NetBuffer::Time(signal)
    }

    #[test]
    fn watermarks_combine_over_channels_and_wait_behind_an_aligning_barrier() {
        use TimeSignal::{Idle, Watermark};
        let (tx1, rx1) = flume::unbounded();
        let (tx2, rx2) = flume::unbounded();
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        tx1.send(time(Watermark(10))).unwrap();
        tx2.send(time(Watermark(7))).unwrap();
        assert_eq!(drain(&mut gate), ["w7"]);
        // Channel a delivers its barrier: its later watermark waits until b aligns.
        tx1.send(NetBuffer::Barrier(barrier(1))).unwrap();
        tx1.send(time(Watermark(30))).unwrap();
        tx2.send(time(Watermark(20))).unwrap();
        assert_eq!(drain(&mut gate), ["w10"]);
        tx2.send(NetBuffer::Barrier(barrier(1))).unwrap();
        assert_eq!(drain(&mut gate), ["B1", "w20"]);
        // An idle channel stops holding time back; all idle is passed on.
        tx2.send(time(Idle)).unwrap();
        assert_eq!(drain(&mut gate), ["w30"]);
        tx1.send(time(Idle)).unwrap();
        assert_eq!(drain(&mut gate), ["idle"]);
        tx1.send(NetBuffer::EndOfPartition).unwrap();
        tx2.send(NetBuffer::EndOfPartition).unwrap();
        assert_eq!(drain(&mut gate), ["active", "wEnd", "end"]);
    }

    #[test]
    fn vanished_producer_is_reported() {
        let (tx, rx) = flume::bounded::<NetBuffer>(1);
        let mut gate = InputGate::new(vec![rx], vec!["p".into()]);
        drop(tx);
        assert!(matches!(
            gate.next(Duration::from_millis(10)),
            GateEvent::Broken(0)
        ));
    }
    #[test]
    fn a_two_input_gate_names_each_buffers_input_aligns_over_both_and_combines_time() {
        use TimeSignal::Watermark;
        let (tx1, rx1) = flume::unbounded();
        let (tx2, rx2) = flume::unbounded();
        let (tx3, rx3) = flume::unbounded();
        // Channels a and c are input 0, b is input 1.
        let names = vec!["a".into(), "b".into(), "c".into()];
        let mut gate = InputGate::two_inputs(vec![rx1, rx2, rx3], names, &[0, 1, 0]);
        tx2.send(data(2)).unwrap();
        match gate.next(Duration::from_millis(5)) {
            GateEvent::Buffer(b) => assert_eq!((b[0], gate.last_input()), (2, 1)),
            other => panic!("unexpected {other:?}"),
        }
        tx3.send(data(3)).unwrap();
        match gate.next(Duration::from_millis(5)) {
            GateEvent::Buffer(b) => assert_eq!((b[0], gate.last_input()), (3, 0)),
            other => panic!("unexpected {other:?}"),
        }
        tx1.send(time(Watermark(10))).unwrap();
        tx3.send(time(Watermark(20))).unwrap();
        assert_eq!(
            drain(&mut gate),
            Vec::<String>::new(),
            "input 1 has no watermark"
        );
        tx2.send(time(Watermark(15))).unwrap();
        assert_eq!(drain(&mut gate), ["w10"]);
        // A barrier on input 0 blocks its channels until input 1 delivers it too.
        tx1.send(NetBuffer::Barrier(barrier(1))).unwrap();
        tx3.send(NetBuffer::Barrier(barrier(1))).unwrap();
        tx1.send(data(5)).unwrap();
        assert_eq!(drain(&mut gate), Vec::<String>::new());
        tx2.send(NetBuffer::Barrier(barrier(1))).unwrap();
        assert_eq!(drain(&mut gate), ["B1", "d5"]);
        for tx in [tx1, tx2, tx3] {
            tx.send(NetBuffer::EndOfPartition).unwrap();
        }
        let seen = drain(&mut gate);
        assert!(seen.ends_with(&["wEnd".into(), "end".into()]), "{seen:?}");
    }
}
