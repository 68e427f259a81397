//! The operators behind the `DataStream` methods. Each one is an [`Output`] of its input type
//! that pushes into the next operator's `Output`, so a chain of operators is a chain of direct
//! calls inside one thread. Records travel a chain in batches (all records of a received
//! buffer, or of a source's few dozen collects): one dynamic call per operator and batch, and a
//! tight loop inside each operator (docs/architecture.md, "The operator interface").

use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

use super::checkpointing::SnapshotContext;
use super::context::ProcessingTimeService;
use super::side::{OutputTag, SideOutputs};
use super::sinks::SinkFunction;
use super::sort_spill::SortSpill;
use crate::checkpoint::StateDistribution;
use crate::common::error::TaskError;
use crate::network::valve::TimeSignal;
use crate::network::writer::NetworkOutput;
use crate::record::Data;
use crate::state::{KeyedStateStore, TimeDomain, Timers, ValueState};

/// Where an operator sends its results: the next operator of the chain, several of them, or a
/// network writer.
pub(crate) trait Output<T> {
    /// Takes one record.
    fn push(&mut self, record: T) -> Result<(), TaskError>;
    /// Takes the records of `batch` in order, leaving it empty with its capacity kept, so the
    /// caller fills it again without allocating. What `push` of each record would do; an
    /// operator overrides it to run its loop without a dynamic call per record.
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        for record in batch.drain(..) {
            self.push(record)?;
        }
        Ok(())
    }
    /// The input has ended: emit what is held back, then pass the end on.
    fn finish(&mut self) -> Result<(), TaskError>;
    /// A checkpoint barrier reached this operator: snapshot its state, then pass the barrier on.
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError>;
    /// A checkpoint completed: commit what it covers, then tell the next operators.
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError>;
    /// Event time reached this operator, after every record that came before it: a
    /// watermark (fire the event-time timers it passes) or a change of the input's idle status;
    /// then pass it on.
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError>;
    /// Processing time reached `now` (ms since the epoch), and some operator of the chain had
    /// asked to be called by then ([`ProcessingTimeService::request`]): act if due, then pass
    /// it on.
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError>;
}

/// The checkpoint and time methods of an operator without state or timers of its own: pass
/// on to `self.next`.
macro_rules! forward_events {
    () => {
        fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
            self.next.snapshot(snap)
        }
        fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
            self.next.checkpoint_complete(checkpoint_id)
        }
        fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
            self.next.time(signal)
        }
        fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
            self.next.processing_time(now)
        }
    };
}

/// A boxed output of records of type `T`.
pub(crate) type BoxOutput<T> = Box<dyn Output<T>>;

/// The end of a chain at a vertex boundary: records go to the network's record writer, a
/// barrier to every subpartition; nothing to commit.
impl<T: Data> Output<T> for NetworkOutput<T> {
    #[inline]
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        NetworkOutput::push(self, record)
    }
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        NetworkOutput::push_batch(self, batch)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        NetworkOutput::finish(self)
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        self.broadcast_barrier(snap.barrier())
    }
    fn checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<(), TaskError> {
        Ok(())
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        self.broadcast_time(signal)
    }
    fn processing_time(&mut self, _now: i64) -> Result<(), TaskError> {
        Ok(())
    }
}

pub(crate) struct Map<F, O> {
    f: Arc<F>,
    /// The mapped batch, reused.
    out: Vec<O>,
    next: BoxOutput<O>,
}

impl<F, O> Map<F, O> {
    pub(crate) fn new(f: Arc<F>, next: BoxOutput<O>) -> Self {
        Map {
            f,
            out: Vec::new(),
            next,
        }
    }
}

impl<I, O, F: Fn(I) -> O> Output<I> for Map<F, O> {
    fn push(&mut self, record: I) -> Result<(), TaskError> {
        self.next.push((self.f)(record))
    }
    fn push_batch(&mut self, batch: &mut Vec<I>) -> Result<(), TaskError> {
        self.out.extend(batch.drain(..).map(&*self.f));
        self.next.push_batch(&mut self.out)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.next.finish()
    }
    forward_events!();
}

pub(crate) struct Filter<F, T> {
    pub(crate) f: Arc<F>,
    pub(crate) next: BoxOutput<T>,
}

impl<T, F: Fn(&T) -> bool> Output<T> for Filter<F, T> {
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        if (self.f)(&record) {
            self.next.push(record)
        } else {
            Ok(())
        }
    }
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        batch.retain(|record| (self.f)(record));
        self.next.push_batch(batch)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.next.finish()
    }
    forward_events!();
}

pub(crate) struct FlatMap<F, O> {
    f: Arc<F>,
    /// The records made from a batch, reused.
    out: Vec<O>,
    next: BoxOutput<O>,
}

impl<F, O> FlatMap<F, O> {
    pub(crate) fn new(f: Arc<F>, next: BoxOutput<O>) -> Self {
        FlatMap {
            f,
            out: Vec::new(),
            next,
        }
    }
}

/// How many records an operator that makes several of one record (a flat map, a process
/// function) gathers before passing them on, so that an exploding input does not build one
/// huge batch.
pub(crate) const MAX_BATCH: usize = 4096;

impl<I, O, It: IntoIterator<Item = O>, F: Fn(I) -> It> Output<I> for FlatMap<F, O> {
    fn push(&mut self, record: I) -> Result<(), TaskError> {
        self.out.extend((self.f)(record));
        self.next.push_batch(&mut self.out)
    }
    fn push_batch(&mut self, batch: &mut Vec<I>) -> Result<(), TaskError> {
        for record in batch.drain(..) {
            self.out.extend((self.f)(record));
            if self.out.len() >= MAX_BATCH {
                self.next.push_batch(&mut self.out)?;
            }
        }
        self.next.push_batch(&mut self.out)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.next.finish()
    }
    forward_events!();
}

/// A keyed reduce in streaming mode: each key's aggregate lives in keyed state (so it is
/// checkpointed and restored) and every input emits its key's new aggregate.
pub(crate) struct KeyedReduce<T: Data, K, KF: ?Sized, RF: ?Sized> {
    pub(crate) key: Arc<KF>,
    pub(crate) reduce: Arc<RF>,
    pub(crate) store: KeyedStateStore,
    pub(crate) value: ValueState<T>,
    pub(crate) operator_id: u32,
    /// The new aggregates of a batch, reused.
    pub(crate) out: Vec<T>,
    pub(crate) next: BoxOutput<T>,
    pub(crate) _k: std::marker::PhantomData<fn() -> K>,
}

impl<T: Data, K: Data + Hash, KF: Fn(&T) -> K + ?Sized, RF: Fn(T, T) -> T + ?Sized>
    KeyedReduce<T, K, KF, RF>
{
    #[inline]
    fn aggregate(&self, record: T) -> Result<T, TaskError> {
        self.store.set_current_key(&(self.key)(&record))?;
        Ok(self.value.update_with(|acc| match acc {
            Some(acc) => (self.reduce)(acc, record),
            None => record,
        })?)
    }
}

impl<T: Data, K: Data + Hash, KF: Fn(&T) -> K + ?Sized, RF: Fn(T, T) -> T + ?Sized> Output<T>
    for KeyedReduce<T, K, KF, RF>
{
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        let value = self.aggregate(record)?;
        self.next.push(value)
    }
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        let (key, reduce, out) = (&self.key, &self.reduce, &mut self.out);
        self.value.update_each(
            batch.drain(..),
            |record| key(record),
            |record, acc| match acc {
                Some(acc) => reduce(acc, record),
                None => record,
            },
            |value| out.push(value),
        )?;
        self.next.push_batch(&mut self.out)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.next.finish()
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        snap.snapshot_keyed(self.operator_id, &self.store)?;
        self.next.snapshot(snap)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.store.notify_checkpoint_complete(checkpoint_id);
        self.next.checkpoint_complete(checkpoint_id)
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        self.next.time(signal)
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        self.next.processing_time(now)
    }
}

/// A keyed reduce in batch mode: aggregates in a hash table, emitted once when the input has
/// ended. A table that outgrows its memory is spilled to disk as a run sorted by key hash, and
/// the end of input merges the runs ([`SortSpill`]). Batch jobs are not checkpointed (a failed
/// batch job reruns), so this state is not either.
pub(crate) struct BatchKeyedReduce<T, K, KF: ?Sized, RF: ?Sized> {
    pub(crate) key: Arc<KF>,
    pub(crate) reduce: Arc<RF>,
    /// Each key's aggregate so far (`None` only while it is being replaced). One hash and one
    /// probe per record, with a hasher seeded per process (keys come from input data).
    pub(crate) state: hashbrown::HashMap<K, Option<T>>,
    /// Where the table goes when it is full.
    pub(crate) spill: SortSpill<T>,
    pub(crate) next: BoxOutput<T>,
}

impl<T: Data, K: Hash + Eq, KF: Fn(&T) -> K + ?Sized, RF: Fn(T, T) -> T + ?Sized>
    BatchKeyedReduce<T, K, KF, RF>
{
    /// A reduce whose table may hold `memory` bytes before it spills to `dir`.
    pub(crate) fn new(
        key: Arc<KF>,
        reduce: Arc<RF>,
        (dir, memory): (std::path::PathBuf, u64),
        next: BoxOutput<T>,
    ) -> Self {
        BatchKeyedReduce {
            key,
            reduce,
            state: Default::default(),
            spill: SortSpill::new(dir, usize::try_from(memory).unwrap_or(usize::MAX)),
            next,
        }
    }

    /// Writes the table as a run sorted by key hash and empties it.
    fn spill_table(&mut self) -> Result<(), TaskError> {
        let hasher = self.state.hasher().clone();
        let mut entries: Vec<(u64, T)> = self
            .state
            .drain()
            .filter_map(|(key, value)| value.map(|v| (hasher.hash_one(&key), v)))
            .collect();
        entries.sort_unstable_by_key(|e| e.0);
        self.spill.write_run(entries)
    }
}

impl<T: Data, K: Hash + Eq, KF: Fn(&T) -> K + ?Sized, RF: Fn(T, T) -> T + ?Sized> Output<T>
    for BatchKeyedReduce<T, K, KF, RF>
{
    #[inline]
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        match self.state.entry((self.key)(&record)) {
            hashbrown::hash_map::Entry::Occupied(mut e) => {
                let slot = e.get_mut();
                *slot = Some(match slot.take() {
                    Some(acc) => (self.reduce)(acc, record),
                    None => record,
                });
            }
            hashbrown::hash_map::Entry::Vacant(e) => {
                let full = self
                    .spill
                    .admit(std::mem::size_of::<(K, Option<T>)>(), &record)?;
                e.insert(Some(record));
                if full {
                    self.spill_table()?;
                }
            }
        }
        Ok(())
    }
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        for record in batch.drain(..) {
            self.push(record)?;
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        if self.spill.has_runs() {
            let mut batch = Vec::with_capacity(1024);
            if !self.state.is_empty() {
                self.spill_table()?;
            }
            let spill = std::mem::replace(&mut self.spill, SortSpill::new(Default::default(), 0));
            let (key, next) = (&self.key, &mut self.next);
            let (runs, spilled) = (spill.runs(), spill.spilled_bytes());
            spill.merge(
                &|a, b| (self.reduce)(a, b),
                &|a, b| key(a) == key(b),
                &mut |value| {
                    batch.push(value);
                    if batch.len() == batch.capacity() {
                        next.push_batch(&mut batch)?;
                    }
                    Ok(())
                },
            )?;
            tracing::info!(
                runs,
                spilled_bytes = spilled,
                "a batch aggregation outgrew its memory, spilled sorted runs and merged them"
            );
            self.next.push_batch(&mut batch)?;
        } else {
            let mut batch = Vec::with_capacity(self.state.len().min(1024));
            for value in self.state.drain().filter_map(|(_, value)| value) {
                batch.push(value);
                if batch.len() == batch.capacity() {
                    self.next.push_batch(&mut batch)?;
                }
            }
            self.next.push_batch(&mut batch)?;
        }
        self.next.finish()
    }
    forward_events!();
}

/// Runs a user's keyed process function: sets the current key of the keyed state before each
/// record, so the function's state handles read and write that key's state, and calls it back
/// for its timers: event-time ones when a watermark passes them, processing-time ones when the
/// clock does — always between records, never beside one.
pub(crate) struct KeyedProcess<T, O, K, KF: ?Sized, F> {
    pub(crate) key: Arc<KF>,
    pub(crate) function: F,
    pub(crate) store: KeyedStateStore,
    pub(crate) timers: Timers,
    /// The input watermark.
    pub(crate) watermark: i64,
    pub(crate) processing: ProcessingTimeService,
    pub(crate) operator_id: u32,
    /// What the function emitted for a batch, reused.
    pub(crate) out: Vec<O>,
    pub(crate) next: BoxOutput<O>,
    /// What it emitted to side outputs, handed on with `out`.
    pub(crate) sides: SideOutputs,
    /// Whether the end of input fires every processing-time timer left (processing-time
    /// windows do, as Flink's: a bounded input's last windows are emitted).
    pub(crate) fire_processing_timers_at_end: bool,
    pub(crate) _t: std::marker::PhantomData<fn(T) -> K>,
}

impl<T, O, K: Data + Hash, KF: Fn(&T) -> K + ?Sized, F: KeyedProcessFunction<K, T, O>>
    KeyedProcess<T, O, K, KF, F>
{
    /// Opens the timers of `store` (restored with it); overdue processing-time timers fire at
    /// the first call.
    pub(crate) fn new(
        key: Arc<KF>,
        function: F,
        store: KeyedStateStore,
        processing: ProcessingTimeService,
        operator_id: u32,
        next: BoxOutput<O>,
        sides: SideOutputs,
    ) -> Result<Self, TaskError> {
        let timers = Timers::open(&store)?;
        if let Some(first) = timers.next(TimeDomain::ProcessingTime) {
            processing.request(first);
        }
        Ok(KeyedProcess {
            key,
            function,
            store,
            timers,
            watermark: i64::MIN,
            processing,
            operator_id,
            out: Vec::new(),
            next,
            sides,
            fire_processing_timers_at_end: false,
            _t: std::marker::PhantomData,
        })
    }

    /// Makes the end of input fire the processing-time timers left, in time order.
    pub(crate) fn firing_processing_timers_at_end(mut self) -> Self {
        self.fire_processing_timers_at_end = true;
        self
    }

    /// Hands on what the function emitted, to the main and the side outputs.
    fn hand_on(&mut self) -> Result<(), TaskError> {
        self.next.push_batch(&mut self.out)?;
        self.sides.flush()
    }

    fn process(&mut self, record: T) -> Result<(), TaskError> {
        let key = (self.key)(&record);
        self.store.set_current_key(&key)?;
        let mut ctx = Context {
            timestamp: None,
            watermark: self.watermark,
            timers: &mut self.timers,
            processing: &self.processing,
            firing: None,
            ending: false,
            sides: &mut self.sides,
        };
        let mut out = Collector { out: &mut self.out };
        self.function.process(&key, record, &mut ctx, &mut out)
    }

    /// Fires every timer of `domain` due at `time`, earliest first.
    fn fire(&mut self, domain: TimeDomain, time: i64) -> Result<(), TaskError> {
        while let Some(timestamp) = self.timers.pop(domain, time)? {
            let key: K = self.store.current_key()?;
            let mut ctx = Context {
                timestamp: Some(timestamp),
                watermark: self.watermark,
                timers: &mut self.timers,
                processing: &self.processing,
                firing: Some(domain),
                // Only the end of input fires timers up to the end of time (a final
                // watermark, or the processing-time timers left).
                ending: time == i64::MAX,
                sides: &mut self.sides,
            };
            let mut out = Collector { out: &mut self.out };
            self.function
                .on_timer(&key, timestamp, &mut ctx, &mut out)?;
            if self.out.len() >= MAX_BATCH {
                self.hand_on()?;
            }
        }
        self.hand_on()
    }
}

impl<T, O, K: Data + Hash, KF: Fn(&T) -> K + ?Sized, F: KeyedProcessFunction<K, T, O>> Output<T>
    for KeyedProcess<T, O, K, KF, F>
{
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        self.process(record)?;
        self.hand_on()
    }
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        for record in batch.drain(..) {
            self.process(record)?;
            if self.out.len() >= MAX_BATCH {
                self.hand_on()?;
            }
        }
        self.hand_on()
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        if self.fire_processing_timers_at_end {
            self.fire(TimeDomain::ProcessingTime, i64::MAX)?;
        }
        self.next.finish()
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        snap.snapshot_keyed(self.operator_id, &self.store)?;
        self.next.snapshot(snap)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.store.notify_checkpoint_complete(checkpoint_id);
        self.next.checkpoint_complete(checkpoint_id)
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        if let TimeSignal::Watermark(w) = signal {
            self.watermark = self.watermark.max(w);
            self.fire(TimeDomain::EventTime, w)?;
        }
        self.next.time(signal)
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        self.fire(TimeDomain::ProcessingTime, now)?;
        if let Some(next) = self.timers.next(TimeDomain::ProcessingTime) {
            self.processing.request(next);
        }
        self.next.processing_time(now)
    }
}

/// What a keyed process function knows besides the record, and its timers (Flink's `Context`
/// and `TimerService`).
pub struct Context<'a> {
    pub(crate) timestamp: Option<i64>,
    pub(crate) watermark: i64,
    pub(crate) timers: &'a mut Timers,
    pub(crate) processing: &'a ProcessingTimeService,
    pub(crate) firing: Option<TimeDomain>,
    /// The timers fire because the input ended, whether or not their time has come.
    pub(crate) ending: bool,
    pub(crate) sides: &'a mut SideOutputs,
}

impl Context<'_> {
    /// The record's event timestamp (in `on_timer`: the timer's), if the stream has
    /// timestamps.
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }
    /// The operator's input watermark (`i64::MIN` before the first).
    pub fn current_watermark(&self) -> i64 {
        self.watermark
    }
    /// The wall clock, ms since the epoch.
    pub fn current_processing_time(&self) -> i64 {
        self.processing.now()
    }
    /// In `on_timer`: which clock the firing timer follows.
    pub fn time_domain(&self) -> Option<TimeDomain> {
        self.firing
    }
    /// Emits `value` to the side output `tag` (read with `get_side_output(&tag)`), with the
    /// timestamp of the record or timer being processed.
    pub fn output<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) -> Result<(), TaskError> {
        self.sides.emit(tag, self.timestamp, value)
    }
    /// Calls `on_timer` for the current key once the watermark reaches `timestamp` (one timer
    /// per key and timestamp: setting it again changes nothing).
    pub fn register_event_time_timer(&mut self, timestamp: i64) -> Result<(), TaskError> {
        Ok(self.timers.register(TimeDomain::EventTime, timestamp)?)
    }
    /// Calls `on_timer` for the current key once the wall clock reaches `timestamp`.
    pub fn register_processing_time_timer(&mut self, timestamp: i64) -> Result<(), TaskError> {
        self.timers
            .register(TimeDomain::ProcessingTime, timestamp)?;
        self.processing.request(timestamp);
        Ok(())
    }
    /// Removes the current key's event-time timer at `timestamp`, if set.
    pub fn delete_event_time_timer(&mut self, timestamp: i64) -> Result<(), TaskError> {
        Ok(self.timers.delete(TimeDomain::EventTime, timestamp)?)
    }
    /// Removes the current key's processing-time timer at `timestamp`, if set.
    pub fn delete_processing_time_timer(&mut self, timestamp: i64) -> Result<(), TaskError> {
        Ok(self.timers.delete(TimeDomain::ProcessingTime, timestamp)?)
    }
}

/// Where a process function emits its results: they go downstream together when the
/// function has seen the batch its input came in.
pub struct Collector<'a, O> {
    out: &'a mut Vec<O>,
}

impl<'a, O> Collector<'a, O> {
    /// A collector that appends to `out`.
    pub(crate) fn new(out: &'a mut Vec<O>) -> Self {
        Collector { out }
    }

    /// Emits one record downstream.
    pub fn collect(&mut self, record: O) -> Result<(), TaskError> {
        self.out.push(record);
        Ok(())
    }
}

/// A function over a keyed stream with keyed state and timers (Flink's
/// `KeyedProcessFunction`). It is made once per subtask from the subtask's
/// [`KeyedStateStore`], where it takes its state handles; `process` sees each record with the
/// current key set, so the handles read and write that key's state, which is checkpointed and
/// restored with the job. Timers set through the [`Context`] call `on_timer` with their key
/// current; they are checkpointed with the state too.
pub trait KeyedProcessFunction<K, I, O>: 'static {
    /// Handles one record of `key`.
    fn process(
        &mut self,
        key: &K,
        record: I,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>;

    /// A timer of `key` set for `timestamp` fired ([`Context::time_domain`] says which kind).
    fn on_timer(
        &mut self,
        _key: &K,
        _timestamp: i64,
        _ctx: &mut Context<'_>,
        _out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Hands records to a user sink; the end of the chain.
pub(crate) struct Sink<S> {
    pub(crate) sink: S,
    pub(crate) operator_id: u32,
}

impl<T, S: SinkFunction<T>> Output<T> for Sink<S> {
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        self.sink.invoke(record)
    }
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        self.sink.invoke_batch(batch)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.sink.finish()
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        let elements = self.sink.snapshot_state(snap.checkpoint_id())?;
        snap.set_operator_state(self.operator_id, elements, StateDistribution::Split)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.sink.checkpoint_complete(checkpoint_id)
    }
    fn time(&mut self, _signal: TimeSignal) -> Result<(), TaskError> {
        Ok(())
    }
    fn processing_time(&mut self, _now: i64) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Copies each record to several outputs (an operator with more than one consumer).
pub(crate) struct Fanout<T> {
    pub(crate) outputs: Vec<BoxOutput<T>>,
    /// A batch's copy for one output, reused.
    pub(crate) copy: Vec<T>,
}

impl<T: Clone> Output<T> for Fanout<T> {
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        if let Some((last, rest)) = self.outputs.split_last_mut() {
            for out in rest {
                out.push(record.clone())?;
            }
            last.push(record)?;
        }
        Ok(())
    }
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        if let Some((last, rest)) = self.outputs.split_last_mut() {
            for out in rest {
                self.copy.extend_from_slice(batch);
                out.push_batch(&mut self.copy)?;
            }
            last.push_batch(batch)?;
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        for out in &mut self.outputs {
            out.finish()?;
        }
        Ok(())
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        for out in &mut self.outputs {
            out.snapshot(snap)?;
        }
        Ok(())
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        for out in &mut self.outputs {
            out.checkpoint_complete(checkpoint_id)?;
        }
        Ok(())
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        for out in &mut self.outputs {
            out.time(signal)?;
        }
        Ok(())
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        for out in &mut self.outputs {
            out.processing_time(now)?;
        }
        Ok(())
    }
}

/// What an operator passes to the rest of a chain besides records (the chain's record type
/// erased): the end of input, checkpoints and time.
pub(crate) trait ChainRest {
    fn finish(&mut self) -> Result<(), TaskError>;
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError>;
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError>;
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError>;
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError>;
}

impl<O> ChainRest for std::rc::Rc<std::cell::RefCell<BoxOutput<O>>> {
    fn finish(&mut self) -> Result<(), TaskError> {
        self.borrow_mut().finish()
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        self.borrow_mut().snapshot(snap)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.borrow_mut().checkpoint_complete(checkpoint_id)
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        self.borrow_mut().time(signal)
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        self.borrow_mut().processing_time(now)
    }
}

/// The main output of an operator that has side outputs: records go to the main output only
/// (side records are pushed by the operator itself, `super::side`), while the end of input,
/// barriers, watermarks and processing time go to every output, the main one first.
pub(crate) struct MultiOutput<O> {
    pub(crate) main: BoxOutput<O>,
    pub(crate) sides: Vec<Box<dyn ChainRest>>,
}

impl<O> Output<O> for MultiOutput<O> {
    fn push(&mut self, record: O) -> Result<(), TaskError> {
        self.main.push(record)
    }
    fn push_batch(&mut self, batch: &mut Vec<O>) -> Result<(), TaskError> {
        self.main.push_batch(batch)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.main.finish()?;
        self.sides.iter_mut().try_for_each(|s| s.finish())
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        self.main.snapshot(snap)?;
        self.sides.iter_mut().try_for_each(|s| s.snapshot(snap))
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.main.checkpoint_complete(checkpoint_id)?;
        self.sides
            .iter_mut()
            .try_for_each(|s| s.checkpoint_complete(checkpoint_id))
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        self.main.time(signal)?;
        self.sides.iter_mut().try_for_each(|s| s.time(signal))
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        self.main.processing_time(now)?;
        self.sides
            .iter_mut()
            .try_for_each(|s| s.processing_time(now))
    }
}

/// Drops everything: the output of a sink.
pub(crate) struct Discard;

impl<T> Output<T> for Discard {
    fn push(&mut self, _record: T) -> Result<(), TaskError> {
        Ok(())
    }
    fn push_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        batch.clear();
        Ok(())
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        Ok(())
    }
    fn snapshot(&mut self, _snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        Ok(())
    }
    fn checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<(), TaskError> {
        Ok(())
    }
    fn time(&mut self, _signal: TimeSignal) -> Result<(), TaskError> {
        Ok(())
    }
    fn processing_time(&mut self, _now: i64) -> Result<(), TaskError> {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Collects what reaches it, for operator tests.
    pub(crate) struct Collect<T>(pub(crate) Rc<RefCell<Vec<T>>>, pub(crate) Rc<RefCell<bool>>);

    impl<T> Output<T> for Collect<T> {
        fn push(&mut self, record: T) -> Result<(), TaskError> {
            self.0.borrow_mut().push(record);
            Ok(())
        }
        fn finish(&mut self) -> Result<(), TaskError> {
            *self.1.borrow_mut() = true;
            Ok(())
        }
        fn snapshot(&mut self, _snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
            Ok(())
        }
        fn checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<(), TaskError> {
            Ok(())
        }
        fn time(&mut self, _signal: TimeSignal) -> Result<(), TaskError> {
            Ok(())
        }
        fn processing_time(&mut self, _now: i64) -> Result<(), TaskError> {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Collect;
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A batch reduce whose table is far smaller than its keys spills runs and still emits
    /// each key's total once, its records combined in their order, leaving no file behind.
    #[test]
    fn a_batch_reduce_beyond_its_memory_spills_sorted_runs_and_merges_them_exactly() {
        let dir = tempfile::tempdir().unwrap();
        // Key i % 5000 of (key, word, count): the word is the key's first and its records
        // append their counts in order, so the order of a key's records across runs shows.
        type R = (u32, String, Vec<u32>);
        let reduce = Arc::new(|mut a: R, b: R| {
            a.2.extend(b.2);
            a
        });
        let key = Arc::new(|t: &R| t.0);
        let got = Rc::new(RefCell::new(Vec::new()));
        let next: BoxOutput<R> = Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
        // 64 KiB: a few hundred keys of the 5000 fit.
        let spill = (dir.path().to_path_buf(), 64 << 10);
        let mut op = BatchKeyedReduce::new(key, reduce, spill, next);
        for i in 0..40_000u32 {
            op.push((i % 5000, format!("word-{}", i % 5000), vec![i / 5000]))
                .unwrap();
        }
        let runs = op.spill.runs();
        assert!(runs > 8, "{runs} runs");
        Output::finish(&mut op).unwrap();
        let mut out = got.borrow().clone();
        out.sort();
        let want: Vec<R> = (0..5000)
            .map(|k| (k, format!("word-{k}"), (0..8).collect()))
            .collect();
        assert_eq!(out, want);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no file left"
        );
    }

    #[test]
    fn keyed_reduce_streams_running_values_or_final_ones_in_batch() {
        let reduce = Arc::new(|a: (char, u64), b: (char, u64)| (a.0, a.1 + b.1));
        let key = Arc::new(|t: &(char, u64)| t.0 as u32);
        for batch in [false, true] {
            let got = Rc::new(RefCell::new(Vec::new()));
            let done = Rc::new(RefCell::new(false));
            let next: BoxOutput<(char, u64)> = Box::new(Collect(got.clone(), done.clone()));
            let mut op: BoxOutput<(char, u64)> = if batch {
                let spill = (std::env::temp_dir(), 1 << 20);
                Box::new(BatchKeyedReduce::new(
                    key.clone(),
                    reduce.clone(),
                    spill,
                    next,
                ))
            } else {
                let ctx = crate::api::RuntimeContext::standalone(0, 1);
                let store = ctx.keyed_state_store().unwrap();
                Box::new(KeyedReduce {
                    key: key.clone(),
                    reduce: reduce.clone(),
                    value: store.value_state("reduce").unwrap(),
                    store,
                    operator_id: 0,
                    out: Vec::new(),
                    next,
                    _k: std::marker::PhantomData,
                })
            };
            for r in [('a', 1), ('b', 1), ('a', 2)] {
                op.push(r).unwrap();
            }
            op.finish().unwrap();
            let mut out = got.borrow().clone();
            out.sort();
            if batch {
                assert_eq!(out, vec![('a', 3), ('b', 1)]);
            } else {
                assert_eq!(out, vec![('a', 1), ('a', 3), ('b', 1)]);
            }
            assert!(*done.borrow());
        }
    }

    #[test]
    fn chain_of_map_filter_flat_map() {
        let got = Rc::new(RefCell::new(Vec::new()));
        let done = Rc::new(RefCell::new(false));
        let sink: BoxOutput<u32> = Box::new(Collect(got.clone(), done));
        let filter: BoxOutput<u32> = Box::new(Filter {
            f: Arc::new(|x: &u32| x.is_multiple_of(2)),
            next: sink,
        });
        let flat: BoxOutput<u32> =
            Box::new(FlatMap::new(Arc::new(|x: u32| vec![x, x + 1]), filter));
        let mut map: BoxOutput<u32> = Box::new(Map::new(Arc::new(|x: u32| x * 10), flat));
        for x in 0..3 {
            map.push(x).unwrap();
        }
        assert_eq!(*got.borrow(), vec![0, 10, 20]);
    }
}
