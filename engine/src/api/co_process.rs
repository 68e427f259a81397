//! Operators with two inputs (Flink's `ConnectedStreams`): two streams of different types
//! feed one operator, which sees each record with the input it came from. Keyed, both inputs
//! are partitioned by keys of one type and share the operator's keyed state and timers per key
//! (`KeyedCoProcessFunction`), which the interval join is built on.
//!
//! The task of a two-input operator reads both inputs through one gate: barriers align over
//! the channels of both, and its watermark is the least of the two inputs' watermarks, each
//! input's combined over its channels first (`crate::network::valve::TwoInputValves`). The
//! operator always heads its chain; what follows it chains as usual.

use std::cell::RefCell;
use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use super::checkpointing::SnapshotContext;
use super::context::{ProcessingTimeService, RuntimeContext};
use super::env::{DataStream, Decoder, KeyedStream, split_outputs};
use super::operators::{BoxOutput, Collector, Context, MAX_BATCH, Output};
use super::process::ProcessContext;
use super::side::SideOutputs;
use super::stream_graph::{AnyBox, InputProcessor, NodeKind, ShipStrategy};
use super::time::Stamped;
use crate::common::error::TaskError;
use crate::network::partitioner::ChannelSelector;
use crate::network::valve::TimeSignal;
use crate::record::Data;
use crate::state::{KeyedStateStore, MapState, TimeDomain, Timers};

/// A function over two connected streams (Flink's `CoProcessFunction`): each record of the
/// first input goes to `process_element1`, each of the second to `process_element2`. Each
/// parallel subtask runs its own clone. Timers need keys: connect keyed streams and use a
/// [`KeyedCoProcessFunction`] for them.
pub trait CoProcessFunction<A, B, O>: 'static {
    /// Handles one record of the first input.
    fn process_element1(
        &mut self,
        value: A,
        ctx: &mut ProcessContext<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>;

    /// Handles one record of the second input.
    fn process_element2(
        &mut self,
        value: B,
        ctx: &mut ProcessContext<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>;
}

/// A function over two keyed streams connected by a key of one type (Flink's
/// `KeyedCoProcessFunction`). It is made once per subtask from the subtask's keyed state store;
/// the state handles it takes there hold one value per key for both inputs, so records of either
/// input see what records of the other did for their key. Timers and the [`Context`] are those
/// of a [`KeyedProcessFunction`](super::KeyedProcessFunction).
pub trait KeyedCoProcessFunction<K, A, B, O>: 'static {
    /// Handles one record of the first input, of `key`.
    fn process_element1(
        &mut self,
        key: &K,
        value: A,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>;

    /// Handles one record of the second input, of `key`.
    fn process_element2(
        &mut self,
        key: &K,
        value: B,
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

/// Two streams connected for one two-input operator (Flink's `ConnectedStreams`); see
/// [`DataStream::connect`].
pub struct ConnectedStreams<A, B> {
    first: DataStream<A>,
    second: DataStream<B>,
}

/// Two keyed streams connected for one two-input operator with keyed state (Flink's keyed
/// `ConnectedStreams`); see [`ConnectedStreams::key_by`].
pub struct KeyedConnectedStreams<A, B, K> {
    first: KeyedStream<A, K>,
    second: KeyedStream<B, K>,
}

impl<A: Data> DataStream<A> {
    /// Connects this stream with `other` for an operator that reads both (Flink's `connect`):
    /// [`ConnectedStreams::process`], [`map`](ConnectedStreams::map),
    /// [`flat_map`](ConnectedStreams::flat_map), or keyed with
    /// [`key_by`](ConnectedStreams::key_by). If either stream has timestamps, the result has
    /// them: what the operator emits has the timestamp of the record (or timer) it was called
    /// for, none (`i64::MIN`) for records of an input without timestamps.
    pub fn connect<B: Data>(&self, other: &DataStream<B>) -> ConnectedStreams<A, B> {
        ConnectedStreams {
            first: self.clone(),
            second: other.clone(),
        }
    }
}

impl<A: Data, K: Data + Hash + Eq> KeyedStream<A, K> {
    /// Connects this keyed stream with `other`, keyed by the same type of key (Flink's
    /// `connect` of two `KeyedStream`s).
    pub fn connect<B: Data>(&self, other: &KeyedStream<B, K>) -> KeyedConnectedStreams<A, B, K> {
        KeyedConnectedStreams {
            first: self.clone_keyed(),
            second: other.clone_keyed(),
        }
    }

    pub(super) fn clone_keyed(&self) -> KeyedStream<A, K> {
        KeyedStream {
            stream: self.stream.clone(),
            key: self.key.clone(),
        }
    }
}

impl<A: Data, B: Data> ConnectedStreams<A, B> {
    /// Partitions both inputs by key, `key1` extracting the first input's and `key2` the
    /// second's: records of either input with equal keys go to the same subtask.
    pub fn key_by<K: Data + Hash + Eq>(
        &self,
        key1: impl Fn(&A) -> K + Send + Sync + 'static,
        key2: impl Fn(&B) -> K + Send + Sync + 'static,
    ) -> KeyedConnectedStreams<A, B, K> {
        KeyedConnectedStreams {
            first: self.first.key_by(key1),
            second: self.second.key_by(key2),
        }
    }

    /// Runs a [`CoProcessFunction`] over both inputs (Flink's `process` on
    /// `ConnectedStreams`); each parallel subtask runs its own clone of `function`.
    pub fn process<O: Data, F: CoProcessFunction<A, B, O> + Clone>(
        &self,
        function: F,
    ) -> DataStream<O> {
        macro_rules! build {
            ($wa:ty, $wb:ty, $wo:ty) => {
                self.process_as::<$wa, $wb, $wo, O, F>(function)
            };
        }
        match (self.first.timestamped, self.second.timestamped) {
            (false, false) => build!(Plain, Plain, Plain),
            (true, false) => build!(Timed, Plain, Timed),
            (false, true) => build!(Plain, Timed, Timed),
            (true, true) => build!(Timed, Timed, Timed),
        }
    }

    fn process_as<WA: Carry<A>, WB: Carry<B>, WO: Carry<O>, O: Data, F>(
        &self,
        function: F,
    ) -> DataStream<O>
    where
        F: CoProcessFunction<A, B, O> + Clone,
    {
        let selectors = (
            plain_selector(self.first.strategy),
            plain_selector(self.second.strategy),
        );
        two_input::<WA, WB, WO, A, B, O, _>(
            (&self.first, &self.second),
            "Co-Process",
            None,
            selectors,
            move |_, next, sides| {
                Ok(CoProcess::<WA, WB, WO, A, B, O, F> {
                    function: function.clone(),
                    watermark: i64::MIN,
                    emitted: Vec::new(),
                    out: Vec::new(),
                    next,
                    sides,
                    _t: PhantomData,
                })
            },
        )
    }

    /// Applies `f1` to each record of the first input and `f2` to each of the second (Flink's
    /// `CoMapFunction`).
    pub fn map<O: Data>(
        &self,
        f1: impl Fn(A) -> O + Send + Sync + 'static,
        f2: impl Fn(B) -> O + Send + Sync + 'static,
    ) -> DataStream<O> {
        let (f1, f2) = (Arc::new(f1), Arc::new(f2));
        self.flat_map(move |a| Some(f1(a)), move |b| Some(f2(b)))
            .name("Co-Map")
    }

    /// Replaces each record of the first input by what `f1` returns for it, and each of the
    /// second by what `f2` returns (Flink's `CoFlatMapFunction`).
    pub fn flat_map<O: Data, I1: IntoIterator<Item = O>, I2: IntoIterator<Item = O>>(
        &self,
        f1: impl Fn(A) -> I1 + Send + Sync + 'static,
        f2: impl Fn(B) -> I2 + Send + Sync + 'static,
    ) -> DataStream<O> {
        self.process(CoFlatMap {
            f1: Arc::new(f1),
            f2: Arc::new(f2),
        })
        .name("Co-Flat Map")
    }
}

/// Two functions, one per input, as a [`CoProcessFunction`].
struct CoFlatMap<F1, F2> {
    f1: Arc<F1>,
    f2: Arc<F2>,
}

impl<F1, F2> Clone for CoFlatMap<F1, F2> {
    fn clone(&self) -> Self {
        CoFlatMap {
            f1: self.f1.clone(),
            f2: self.f2.clone(),
        }
    }
}

impl<A, B, O, I1, I2, F1, F2> CoProcessFunction<A, B, O> for CoFlatMap<F1, F2>
where
    I1: IntoIterator<Item = O>,
    I2: IntoIterator<Item = O>,
    F1: Fn(A) -> I1 + 'static,
    F2: Fn(B) -> I2 + 'static,
{
    fn process_element1(
        &mut self,
        value: A,
        _ctx: &mut ProcessContext<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        (self.f1)(value)
            .into_iter()
            .try_for_each(|o| out.collect(o))
    }

    fn process_element2(
        &mut self,
        value: B,
        _ctx: &mut ProcessContext<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        (self.f2)(value)
            .into_iter()
            .try_for_each(|o| out.collect(o))
    }
}

impl<A: Data, B: Data, K: Data + Hash + Eq> KeyedConnectedStreams<A, B, K> {
    /// Runs a [`KeyedCoProcessFunction`] over both inputs with keyed state and timers (Flink's
    /// `process` on keyed `ConnectedStreams`): `make` creates one function per subtask from its
    /// keyed state store, taking its state handles there; the state and the timers are
    /// checkpointed with the job and redistributed by key groups when the parallelism changes,
    /// as for a one-input keyed operator.
    pub fn process<O: Data, F: KeyedCoProcessFunction<K, A, B, O>>(
        &self,
        make: impl Fn(&KeyedStateStore) -> Result<F, TaskError> + 'static,
    ) -> DataStream<O> {
        let make = Rc::new(make);
        macro_rules! build {
            ($wa:ty, $wb:ty, $wo:ty) => {{
                let make = make.clone();
                keyed_co_process::<$wa, $wb, $wo, A, B, O, K, F>(
                    (&self.first, &self.second),
                    "Keyed Co-Process",
                    move |store| make(store),
                )
            }};
        }
        match (
            self.first.stream.timestamped,
            self.second.stream.timestamped,
        ) {
            (false, false) => build!(Plain, Plain, Plain),
            (true, false) => build!(Timed, Plain, Timed),
            (false, true) => build!(Plain, Timed, Timed),
            (true, true) => build!(Timed, Timed, Timed),
        }
    }
}

/// Adds a keyed co-process operator reading `inputs` as they travel (`WA`, `WB`), emitting as
/// `WO`.
fn keyed_co_process<WA, WB, WO, A, B, O, K, F>(
    inputs: (&KeyedStream<A, K>, &KeyedStream<B, K>),
    name: &str,
    make: impl Fn(&KeyedStateStore) -> Result<F, TaskError> + 'static,
) -> DataStream<O>
where
    WA: Carry<A>,
    WB: Carry<B>,
    WO: Carry<O>,
    A: Data,
    B: Data,
    O: Data,
    K: Data + Hash + Eq,
    F: KeyedCoProcessFunction<K, A, B, O>,
{
    let (key1, key2) = (inputs.0.key.clone(), inputs.1.key.clone());
    let selectors = (
        ChannelSelector::by_key(Arc::new({
            let key1 = key1.clone();
            move |c: &WA::Carried| key1(WA::record(c))
        }) as Arc<dyn Fn(&WA::Carried) -> K + Send + Sync>),
        ChannelSelector::by_key(Arc::new({
            let key2 = key2.clone();
            move |c: &WB::Carried| key2(WB::record(c))
        }) as Arc<dyn Fn(&WB::Carried) -> K + Send + Sync>),
    );
    two_input::<WA, WB, WO, A, B, O, _>(
        (&inputs.0.stream, &inputs.1.stream),
        name,
        Some(ShipStrategy::Hash),
        selectors,
        move |ctx, next, sides| {
            let store = ctx.keyed_state_store()?;
            let function = make(&store)?;
            KeyedCoProcess::<WA, WB, WO, A, B, O, K, F>::new(
                (key1.clone(), key2.clone()),
                function,
                store,
                ctx.timers.clone(),
                ctx.operator_id,
                next,
                sides,
            )
        },
    )
}

/// How the records of a stream travel between operators: bare ([`Plain`]) or with their
/// timestamps ([`Timed`], as [`Stamped`]).
pub(crate) trait Carry<T>: 'static {
    /// What travels.
    type Carried: Data;
    /// Whether records travel with timestamps.
    const TIMED: bool;
    /// The record and its timestamp, if it travels with one.
    fn split(carried: Self::Carried) -> (Option<i64>, T);
    /// The record in what travels.
    fn record(carried: &Self::Carried) -> &T;
    /// What travels for `record` with `timestamp` (none: `i64::MIN` if records travel stamped).
    fn join(timestamp: Option<i64>, record: T) -> Self::Carried;
}

/// Records travel bare.
pub(crate) struct Plain;
/// Records travel with their timestamps.
pub(crate) struct Timed;

impl<T: Data> Carry<T> for Plain {
    type Carried = T;
    const TIMED: bool = false;
    fn split(carried: T) -> (Option<i64>, T) {
        (None, carried)
    }
    fn record(carried: &T) -> &T {
        carried
    }
    fn join(_timestamp: Option<i64>, record: T) -> T {
        record
    }
}

impl<T: Data> Carry<T> for Timed {
    type Carried = Stamped<T>;
    const TIMED: bool = true;
    fn split((ts, record): Stamped<T>) -> (Option<i64>, T) {
        (Some(ts), record)
    }
    fn record(carried: &Stamped<T>) -> &T {
        &carried.1
    }
    fn join(timestamp: Option<i64>, record: T) -> Stamped<T> {
        (timestamp.unwrap_or(i64::MIN), record)
    }
}

/// The selector of an edge that is not keyed.
fn plain_selector<T: 'static>(strategy: Option<ShipStrategy>) -> ChannelSelector<T> {
    match strategy {
        Some(ShipStrategy::Broadcast) => ChannelSelector::Broadcast,
        _ => ChannelSelector::RoundRobin,
    }
}

/// An operator with two inputs, records of the first travelling as `A`, of the second as `B`.
pub(crate) trait TwoInputOperator<A, B> {
    /// Takes a batch of the first input's records, leaving it empty.
    fn push_first(&mut self, batch: &mut Vec<A>) -> Result<(), TaskError>;
    /// Takes a batch of the second input's records, leaving it empty.
    fn push_second(&mut self, batch: &mut Vec<B>) -> Result<(), TaskError>;
    /// Both inputs have ended.
    fn finish(&mut self) -> Result<(), TaskError>;
    /// A barrier aligned over both inputs: snapshot, then pass it on.
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError>;
    /// A checkpoint completed.
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError>;
    /// The combined event time of both inputs advanced, or their idle status changed.
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError>;
    /// Processing time reached a deadline an operator asked for.
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError>;
}

type BoxTwoInput<A, B> = Box<dyn TwoInputOperator<A, B>>;
type SharedTwoInput<A, B> = Rc<RefCell<BoxTwoInput<A, B>>>;

/// Adds a two-input operator node reading `inputs` (`selectors` distributing their records),
/// emitting as `WO`; `make` builds the operator around its outputs in each subtask. The first
/// input's edge is added first: a node's inputs in order are its logical inputs.
fn two_input<WA, WB, WO, A, B, O, Op>(
    inputs: (&DataStream<A>, &DataStream<B>),
    name: &str,
    strategy: Option<ShipStrategy>,
    selectors: (ChannelSelector<WA::Carried>, ChannelSelector<WB::Carried>),
    make: impl Fn(&RuntimeContext, BoxOutput<WO::Carried>, SideOutputs) -> Result<Op, TaskError>
    + 'static,
) -> DataStream<O>
where
    WA: Carry<A>,
    WB: Carry<B>,
    WO: Carry<O>,
    Op: TwoInputOperator<WA::Carried, WB::Carried> + 'static,
{
    let (first, second) = inputs;
    let env = &first.env;
    let kind = NodeKind::Operator(Box::new(move |ctx: &RuntimeContext, next: AnyBox| {
        let (next, sides) = split_outputs::<WO::Carried>(next)?;
        let op: BoxTwoInput<WA::Carried, WB::Carried> = Box::new(make(ctx, next, sides)?);
        Ok(Box::new(op) as AnyBox)
    }));
    let decoder: super::stream_graph::DecoderFactory =
        Box::new(|any: AnyBox| -> Box<dyn InputProcessor> {
            match any.downcast::<BoxTwoInput<WA::Carried, WB::Carried>>() {
                Ok(op) => Box::new(TwoInputDecoder::new(*op)),
                // Unreachable by construction: the node's own factory made the box.
                Err(_) => Box::new(Decoder::<WA::Carried>::new(Box::new(
                    super::operators::Discard,
                ))),
            }
        });
    let node = env.add_node::<WO::Carried>(name, kind, Some(decoder));
    let (s1, s2) = selectors;
    env.connect::<WA::Carried>(
        first.node,
        first.side,
        node,
        strategy.or(first.strategy),
        s1,
    );
    env.connect::<WB::Carried>(
        second.node,
        second.side,
        node,
        strategy.or(second.strategy),
        s2,
    );
    DataStream {
        env: env.clone(),
        node,
        strategy: None,
        timestamped: WO::TIMED,
        side: None,
        _t: PhantomData,
    }
}

/// Feeds a two-input operator from the network: buffers are decoded with the record type of
/// the input the task says they came from ([`InputProcessor::select_input`]); the end of
/// input, barriers and time reach the operator once, for both inputs.
struct TwoInputDecoder<A, B> {
    /// Decoders of the first and the second input's records, pushing into the operator.
    inputs: [Box<dyn InputProcessor>; 2],
    op: SharedTwoInput<A, B>,
    /// The input the next buffers come from.
    current: usize,
}

impl<A: Data, B: Data> TwoInputDecoder<A, B> {
    fn new(op: BoxTwoInput<A, B>) -> Self {
        let op = Rc::new(RefCell::new(op));
        TwoInputDecoder {
            inputs: [
                Box::new(Decoder::<A>::new(Box::new(FirstInput(op.clone())))),
                Box::new(Decoder::<B>::new(Box::new(SecondInput(op.clone())))),
            ],
            op,
            current: 0,
        }
    }
}

impl<A: Data, B: Data> InputProcessor for TwoInputDecoder<A, B> {
    fn process(&mut self, buffer: &[u8], written_here: bool) -> Result<u64, TaskError> {
        self.inputs[self.current].process(buffer, written_here)
    }
    fn process_batch(&mut self, records: Box<dyn std::any::Any + Send>) -> Result<u64, TaskError> {
        self.inputs[self.current].process_batch(records)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.op.borrow_mut().finish()
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        self.op.borrow_mut().snapshot(snap)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.op.borrow_mut().checkpoint_complete(checkpoint_id)
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        self.op.borrow_mut().time(signal)
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        self.op.borrow_mut().processing_time(now)
    }
    fn select_input(&mut self, input: usize) {
        self.current = input.min(1);
    }
}

/// The records of a two-input operator's first input. Only records come this way: the
/// decoder hands the end of input, barriers and time to the operator itself, once for both
/// inputs, so those calls here pass nothing on.
struct FirstInput<A, B>(SharedTwoInput<A, B>);
/// The records of a two-input operator's second input (see [`FirstInput`]).
struct SecondInput<A, B>(SharedTwoInput<A, B>);

macro_rules! records_only {
    () => {
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
    };
}

impl<A, B> Output<A> for FirstInput<A, B> {
    fn push(&mut self, record: A) -> Result<(), TaskError> {
        self.0.borrow_mut().push_first(&mut vec![record])
    }
    fn push_batch(&mut self, batch: &mut Vec<A>) -> Result<(), TaskError> {
        self.0.borrow_mut().push_first(batch)
    }
    records_only!();
}

impl<A, B> Output<B> for SecondInput<A, B> {
    fn push(&mut self, record: B) -> Result<(), TaskError> {
        self.0.borrow_mut().push_second(&mut vec![record])
    }
    fn push_batch(&mut self, batch: &mut Vec<B>) -> Result<(), TaskError> {
        self.0.borrow_mut().push_second(batch)
    }
    records_only!();
}

/// Runs a user's [`CoProcessFunction`].
struct CoProcess<WA, WB, WO: Carry<O>, A, B, O, F> {
    function: F,
    /// The combined input watermark.
    watermark: i64,
    /// What the function emitted for one record, reused.
    emitted: Vec<O>,
    /// What it emitted for a batch, as it travels, reused.
    out: Vec<WO::Carried>,
    next: BoxOutput<WO::Carried>,
    sides: SideOutputs,
    _t: PhantomData<fn(WA, WB, A, B)>,
}

impl<WA, WB, WO, A, B, O, F> CoProcess<WA, WB, WO, A, B, O, F>
where
    WO: Carry<O>,
    F: CoProcessFunction<A, B, O>,
{
    fn call(
        &mut self,
        timestamp: Option<i64>,
        body: impl FnOnce(
            &mut F,
            &mut ProcessContext<'_>,
            &mut Collector<'_, O>,
        ) -> Result<(), TaskError>,
    ) -> Result<(), TaskError> {
        let mut ctx = ProcessContext {
            timestamp,
            watermark: self.watermark,
            sides: &mut self.sides,
        };
        body(
            &mut self.function,
            &mut ctx,
            &mut Collector::new(&mut self.emitted),
        )?;
        let out = &mut self.out;
        out.extend(self.emitted.drain(..).map(|o| WO::join(timestamp, o)));
        if out.len() >= MAX_BATCH {
            self.hand_on()?;
        }
        Ok(())
    }

    fn hand_on(&mut self) -> Result<(), TaskError> {
        self.next.push_batch(&mut self.out)?;
        self.sides.flush()
    }
}

impl<WA, WB, WO, A, B, O, F> TwoInputOperator<WA::Carried, WB::Carried>
    for CoProcess<WA, WB, WO, A, B, O, F>
where
    WA: Carry<A>,
    WB: Carry<B>,
    WO: Carry<O>,
    F: CoProcessFunction<A, B, O>,
{
    fn push_first(&mut self, batch: &mut Vec<WA::Carried>) -> Result<(), TaskError> {
        for carried in batch.drain(..) {
            let (ts, record) = WA::split(carried);
            self.call(ts, |f, ctx, out| f.process_element1(record, ctx, out))?;
        }
        self.hand_on()
    }
    fn push_second(&mut self, batch: &mut Vec<WB::Carried>) -> Result<(), TaskError> {
        for carried in batch.drain(..) {
            let (ts, record) = WB::split(carried);
            self.call(ts, |f, ctx, out| f.process_element2(record, ctx, out))?;
        }
        self.hand_on()
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.next.finish()
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        self.next.snapshot(snap)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.next.checkpoint_complete(checkpoint_id)
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        if let TimeSignal::Watermark(w) = signal {
            self.watermark = self.watermark.max(w);
        }
        self.next.time(signal)
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        self.next.processing_time(now)
    }
}

/// The key extractors of a keyed two-input operator's inputs.
type Keys<A, B, K> = (
    Arc<dyn Fn(&A) -> K + Send + Sync>,
    Arc<dyn Fn(&B) -> K + Send + Sync>,
);

/// Runs a user's [`KeyedCoProcessFunction`]: sets the current key of the keyed state before
/// each record of either input, and calls the function back for its timers between records,
/// as `KeyedProcess` does for one input.
struct KeyedCoProcess<WA, WB, WO: Carry<O>, A, B, O, K, F> {
    keys: Keys<A, B, K>,
    function: F,
    store: KeyedStateStore,
    timers: Timers,
    /// The combined input watermark.
    watermark: i64,
    processing: ProcessingTimeService,
    operator_id: u32,
    /// What the function emitted for one call, reused.
    emitted: Vec<O>,
    /// What it emitted for a batch, as it travels, reused.
    out: Vec<WO::Carried>,
    next: BoxOutput<WO::Carried>,
    sides: SideOutputs,
    /// The timers firing now fire because the input ended.
    firing_to_end: bool,
    _t: PhantomData<fn(WA, WB)>,
}

impl<WA, WB, WO, A, B, O, K, F> KeyedCoProcess<WA, WB, WO, A, B, O, K, F>
where
    WO: Carry<O>,
    K: Data + Hash,
    F: KeyedCoProcessFunction<K, A, B, O>,
{
    /// Opens the timers of `store` (restored with it); overdue processing-time timers fire at
    /// the first call.
    fn new(
        keys: Keys<A, B, K>,
        function: F,
        store: KeyedStateStore,
        processing: ProcessingTimeService,
        operator_id: u32,
        next: BoxOutput<WO::Carried>,
        sides: SideOutputs,
    ) -> Result<Self, TaskError> {
        let timers = Timers::open(&store)?;
        if let Some(first) = timers.next(TimeDomain::ProcessingTime) {
            processing.request(first);
        }
        Ok(KeyedCoProcess {
            keys,
            function,
            store,
            timers,
            watermark: i64::MIN,
            processing,
            operator_id,
            emitted: Vec::new(),
            out: Vec::new(),
            next,
            sides,
            firing_to_end: false,
            _t: PhantomData,
        })
    }

    /// Calls `body` with the context of a record (or a timer firing in `firing`) of
    /// `timestamp`, the current key set; what it emits travels with that timestamp.
    fn call(
        &mut self,
        timestamp: Option<i64>,
        firing: Option<TimeDomain>,
        body: impl FnOnce(&mut F, &mut Context<'_>, &mut Collector<'_, O>) -> Result<(), TaskError>,
    ) -> Result<(), TaskError> {
        let mut ctx = Context {
            timestamp,
            watermark: self.watermark,
            timers: &mut self.timers,
            processing: &self.processing,
            firing,
            ending: firing.is_some() && self.firing_to_end,
            sides: &mut self.sides,
        };
        body(
            &mut self.function,
            &mut ctx,
            &mut Collector::new(&mut self.emitted),
        )?;
        let out = &mut self.out;
        out.extend(self.emitted.drain(..).map(|o| WO::join(timestamp, o)));
        if out.len() >= MAX_BATCH {
            self.hand_on()?;
        }
        Ok(())
    }

    fn hand_on(&mut self) -> Result<(), TaskError> {
        self.next.push_batch(&mut self.out)?;
        self.sides.flush()
    }

    /// Fires every timer of `domain` due at `time`, earliest first.
    fn fire(&mut self, domain: TimeDomain, time: i64) -> Result<(), TaskError> {
        // Only the end of input fires timers up to the end of time.
        self.firing_to_end = time == i64::MAX;
        while let Some(timestamp) = self.timers.pop(domain, time)? {
            let key: K = self.store.current_key()?;
            self.call(Some(timestamp), Some(domain), |f, ctx, out| {
                f.on_timer(&key, timestamp, ctx, out)
            })?;
        }
        self.hand_on()
    }
}

impl<WA, WB, WO, A, B, O, K, F> TwoInputOperator<WA::Carried, WB::Carried>
    for KeyedCoProcess<WA, WB, WO, A, B, O, K, F>
where
    WA: Carry<A>,
    WB: Carry<B>,
    WO: Carry<O>,
    K: Data + Hash,
    F: KeyedCoProcessFunction<K, A, B, O>,
{
    fn push_first(&mut self, batch: &mut Vec<WA::Carried>) -> Result<(), TaskError> {
        for carried in batch.drain(..) {
            let (ts, record) = WA::split(carried);
            let key = (self.keys.0)(&record);
            self.store.set_current_key(&key)?;
            self.call(ts, None, |f, ctx, out| {
                f.process_element1(&key, record, ctx, out)
            })?;
        }
        self.hand_on()
    }
    fn push_second(&mut self, batch: &mut Vec<WB::Carried>) -> Result<(), TaskError> {
        for carried in batch.drain(..) {
            let (ts, record) = WB::split(carried);
            let key = (self.keys.1)(&record);
            self.store.set_current_key(&key)?;
            self.call(ts, None, |f, ctx, out| {
                f.process_element2(&key, record, ctx, out)
            })?;
        }
        self.hand_on()
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

/// What a [`ProcessJoinFunction`] knows of a joined pair: both records' timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinContext {
    left: i64,
    right: i64,
}

impl JoinContext {
    /// The left (first) record's timestamp.
    pub fn left_timestamp(&self) -> i64 {
        self.left
    }
    /// The right (second) record's timestamp.
    pub fn right_timestamp(&self) -> i64 {
        self.right
    }
    /// The result's timestamp: the later of the two.
    pub fn timestamp(&self) -> i64 {
        self.left.max(self.right)
    }
}

/// Makes the results of an interval join from each joined pair (Flink's
/// `ProcessJoinFunction`); each parallel subtask runs its own clone.
pub trait ProcessJoinFunction<A, B, O>: 'static {
    /// Handles one pair: `left` of the first stream, `right` of the second, within the bounds.
    fn process_element(
        &mut self,
        left: A,
        right: B,
        ctx: &JoinContext,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>;
}

impl<A, B, O, F: FnMut(A, B) -> O + 'static> ProcessJoinFunction<A, B, O> for F {
    fn process_element(
        &mut self,
        left: A,
        right: B,
        _ctx: &JoinContext,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        out.collect(self(left, right))
    }
}

/// Two keyed streams to join by key and event time (Flink's `IntervalJoin`); see
/// [`KeyedStream::interval_join`].
pub struct IntervalJoin<A, B, K> {
    inputs: KeyedConnectedStreams<A, B, K>,
}

/// An interval join with its bounds; [`process`](Self::process) makes its results.
pub struct IntervalJoined<A, B, K> {
    inputs: KeyedConnectedStreams<A, B, K>,
    bounds: Bounds,
}

impl<A: Data, K: Data + Hash + Eq> KeyedStream<A, K> {
    /// Joins this keyed stream (the left) with `other` (the right) by key and event time
    /// (Flink's `intervalJoin`): a left record at `t` meets every right record of its key at
    /// `t + lower ..= t + upper` ([`between`](IntervalJoin::between)). Both streams need
    /// timestamps. Each side is kept in keyed state until the watermark passes the last time a
    /// record of the other side could meet it; records behind the watermark are dropped.
    pub fn interval_join<B: Data>(&self, other: &KeyedStream<B, K>) -> IntervalJoin<A, B, K> {
        IntervalJoin {
            inputs: self.connect(other),
        }
    }
}

impl<A: Data, B: Data, K: Data + Hash + Eq> IntervalJoin<A, B, K> {
    /// The bounds of the join, in ms relative to the left record's timestamp, both inclusive
    /// (`lower` may be negative: right records before the left one).
    pub fn between(self, lower: i64, upper: i64) -> IntervalJoined<A, B, K> {
        IntervalJoined {
            inputs: self.inputs,
            bounds: Bounds { lower, upper },
        }
    }
}

impl<A: Data, B: Data, K: Data + Hash + Eq> IntervalJoined<A, B, K> {
    /// Calls `function` for every pair that meets; what it emits has the later of the pair's
    /// timestamps. A job whose streams lack timestamps, or whose bounds are reversed, fails to
    /// start with an error saying so.
    pub fn process<O: Data, F: ProcessJoinFunction<A, B, O> + Clone>(
        &self,
        function: F,
    ) -> DataStream<O> {
        let (first, second) = (&self.inputs.first, &self.inputs.second);
        let bounds = self.bounds;
        let problem = if !first.stream.timestamped || !second.stream.timestamped {
            Some("an interval join needs timestamps on both streams (assign_timestamps_and_watermarks)".to_string())
        } else if bounds.lower > bounds.upper {
            Some(format!(
                "the interval join's lower bound {} is above its upper bound {}",
                bounds.lower, bounds.upper
            ))
        } else {
            None
        };
        self.inputs
            .stamped_process("Interval Join", problem, move |store| {
                IntervalJoinFunction::open(store, bounds, function.clone())
            })
    }
}

impl<A: Data, B: Data, K: Data + Hash + Eq> KeyedConnectedStreams<A, B, K> {
    /// Whether both inputs have timestamps.
    pub(super) fn timestamped(&self) -> bool {
        self.first.stream.timestamped && self.second.stream.timestamped
    }

    /// Runs a keyed co-process function that sees both inputs' records with their timestamps
    /// and stamps what it emits itself (the joins: interval and window). `problem`, if any,
    /// fails the job at its start with that message (a join built wrong).
    pub(super) fn stamped_process<O: Data, F>(
        &self,
        name: &str,
        problem: Option<String>,
        make: impl Fn(&KeyedStateStore) -> Result<F, TaskError> + 'static,
    ) -> DataStream<O>
    where
        F: KeyedCoProcessFunction<K, Stamped<A>, Stamped<B>, Stamped<O>>,
    {
        let (first, second) = (&self.first, &self.second);
        // Both sides as they travel, stamped; the function stamps its results itself.
        let (k1, k2) = (first.key.clone(), second.key.clone());
        let left = KeyedStream {
            stream: first.stream.stamped(),
            key: Arc::new(move |r: &Stamped<A>| k1(&r.1))
                as Arc<dyn Fn(&Stamped<A>) -> K + Send + Sync>,
        };
        let right = KeyedStream {
            stream: second.stream.stamped(),
            key: Arc::new(move |r: &Stamped<B>| k2(&r.1))
                as Arc<dyn Fn(&Stamped<B>) -> K + Send + Sync>,
        };
        keyed_co_process::<Plain, Plain, Plain, Stamped<A>, Stamped<B>, Stamped<O>, K, _>(
            (&left, &right),
            name,
            move |store| {
                if let Some(problem) = &problem {
                    return Err(TaskError::Setup(problem.clone()));
                }
                make(store)
            },
        )
        .into_timestamped()
    }
}

/// An interval join's bounds, ms relative to the left record's timestamp, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bounds {
    lower: i64,
    upper: i64,
}

impl Bounds {
    /// Whether a left record at `left` meets a right one at `right`.
    fn meet(self, left: i64, right: i64) -> bool {
        left.saturating_add(self.lower) <= right && right <= left.saturating_add(self.upper)
    }
    /// When a left record at `t` can meet no right record to come: once the watermark passes
    /// `t + upper` (at `t` if the upper bound is negative).
    fn left_cleanup(self, t: i64) -> i64 {
        t.saturating_add(self.upper.max(0))
    }
    /// When a right record at `t` can meet no left record to come: once the watermark passes
    /// `t - lower` (at `t` if the lower bound is positive).
    fn right_cleanup(self, t: i64) -> i64 {
        t.saturating_sub(self.lower.min(0))
    }
}

/// The interval join as a keyed co-process function over both stamped sides: each side's
/// records of a key in map state by timestamp, cleaned up by event-time timers.
struct IntervalJoinFunction<A, B, F> {
    bounds: Bounds,
    left: MapState<i64, Vec<A>>,
    right: MapState<i64, Vec<B>>,
    function: F,
}

impl<A: Data, B: Data, F> IntervalJoinFunction<A, B, F> {
    fn open(store: &KeyedStateStore, bounds: Bounds, function: F) -> Result<Self, TaskError> {
        Ok(IntervalJoinFunction {
            bounds,
            left: store.map_state("interval-join-left")?,
            right: store.map_state("interval-join-right")?,
            function,
        })
    }
}

/// Adds `record` under `ts` to a side's buffer (also the window join's, by window end).
pub(super) fn buffer<T: Data>(
    side: &MapState<i64, Vec<T>>,
    ts: i64,
    record: T,
) -> Result<(), TaskError> {
    let mut records = side.get(&ts)?.unwrap_or_default();
    records.push(record);
    side.put(ts, records)?;
    Ok(())
}

/// Removes a side's records whose cleanup time (`cleanup` of their timestamp) is at or before
/// `time`.
fn clean<T: Data>(
    side: &MapState<i64, Vec<T>>,
    time: i64,
    cleanup: impl Fn(i64) -> i64,
) -> Result<(), TaskError> {
    for (ts, _) in side.entries()? {
        if cleanup(ts) <= time {
            side.remove(&ts)?;
        }
    }
    Ok(())
}

/// A record behind the watermark: the other side's records it could meet may be gone.
fn is_late(ts: i64, watermark: i64) -> bool {
    watermark != i64::MIN && ts < watermark
}

impl<K, A, B, O, F> KeyedCoProcessFunction<K, Stamped<A>, Stamped<B>, Stamped<O>>
    for IntervalJoinFunction<A, B, F>
where
    A: Data,
    B: Data,
    O: 'static,
    F: ProcessJoinFunction<A, B, O>,
{
    fn process_element1(
        &mut self,
        _key: &K,
        (ts, left): Stamped<A>,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        if is_late(ts, ctx.current_watermark()) {
            return Ok(());
        }
        buffer(&self.left, ts, left.clone())?;
        let mut emitted = Vec::new();
        for (rts, rights) in self.right.entries()? {
            if !self.bounds.meet(ts, rts) {
                continue;
            }
            let join = JoinContext {
                left: ts,
                right: rts,
            };
            for right in rights {
                self.function.process_element(
                    left.clone(),
                    right,
                    &join,
                    &mut Collector::new(&mut emitted),
                )?;
                for o in emitted.drain(..) {
                    out.collect((join.timestamp(), o))?;
                }
            }
        }
        ctx.register_event_time_timer(self.bounds.left_cleanup(ts))
    }

    fn process_element2(
        &mut self,
        _key: &K,
        (ts, right): Stamped<B>,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        if is_late(ts, ctx.current_watermark()) {
            return Ok(());
        }
        buffer(&self.right, ts, right.clone())?;
        let mut emitted = Vec::new();
        for (lts, lefts) in self.left.entries()? {
            if !self.bounds.meet(lts, ts) {
                continue;
            }
            let join = JoinContext {
                left: lts,
                right: ts,
            };
            for left in lefts {
                self.function.process_element(
                    left,
                    right.clone(),
                    &join,
                    &mut Collector::new(&mut emitted),
                )?;
                for o in emitted.drain(..) {
                    out.collect((join.timestamp(), o))?;
                }
            }
        }
        ctx.register_event_time_timer(self.bounds.right_cleanup(ts))
    }

    fn on_timer(
        &mut self,
        _key: &K,
        timestamp: i64,
        _ctx: &mut Context<'_>,
        _out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        let bounds = self.bounds;
        clean(&self.left, timestamp, |t| bounds.left_cleanup(t))?;
        clean(&self.right, timestamp, |t| bounds.right_cleanup(t))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::api::operators::testing::Collect;

    /// `(timestamp, "left+right")` as the join emits.
    pub(in crate::api) type Joined = Stamped<String>;

    /// A join of `(timestamp, value)` records of keys `value % 2`, run by the keyed two-input
    /// operator as in a job, with simulated watermarks (the interval join's here, the window
    /// join's in `super::super::window_join`).
    pub(in crate::api) struct Join {
        op: BoxTwoInput<Stamped<u32>, Stamped<u32>>,
        got: Rc<RefCell<Vec<Joined>>>,
        store: KeyedStateStore,
    }

    impl Join {
        fn new(lower: i64, upper: i64) -> Join {
            Join::with(|store| {
                let bounds = Bounds { lower, upper };
                let function = |l: u32, r: u32| format!("{l}+{r}");
                IntervalJoinFunction::open(store, bounds, function)
            })
        }

        /// The join `make` opens on a fresh store.
        pub(in crate::api) fn with<F>(
            make: impl FnOnce(&KeyedStateStore) -> Result<F, TaskError>,
        ) -> Join
        where
            F: KeyedCoProcessFunction<u32, Stamped<u32>, Stamped<u32>, Joined>,
        {
            let ctx = crate::api::RuntimeContext::standalone(0, 1);
            let store = ctx.keyed_state_store().unwrap();
            let join = make(&store).unwrap();
            let got = Rc::new(RefCell::new(Vec::new()));
            let next: BoxOutput<Joined> =
                Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
            let keys: Keys<Stamped<u32>, Stamped<u32>, u32> = (
                Arc::new(|r: &Stamped<u32>| r.1 % 2),
                Arc::new(|r: &Stamped<u32>| r.1 % 2),
            );
            let op = KeyedCoProcess::<Plain, Plain, Plain, _, _, Joined, u32, _>::new(
                keys,
                join,
                store.clone(),
                ctx.timers.clone(),
                0,
                next,
                SideOutputs::default(),
            )
            .unwrap();
            Join {
                op: Box::new(op),
                got,
                store,
            }
        }

        pub(in crate::api) fn left(&mut self, records: &[(i64, u32)]) {
            self.op.push_first(&mut records.to_vec()).unwrap();
        }

        pub(in crate::api) fn right(&mut self, records: &[(i64, u32)]) {
            self.op.push_second(&mut records.to_vec()).unwrap();
        }

        pub(in crate::api) fn watermark(&mut self, w: i64) {
            self.op.time(TimeSignal::Watermark(w)).unwrap();
        }

        /// What the join emitted since the last call, sorted.
        pub(in crate::api) fn take(&self) -> Vec<Joined> {
            let mut got = std::mem::take(&mut *self.got.borrow_mut());
            got.sort();
            got
        }

        /// Timestamps buffered on a side (`"left"` or `"right"`), over all keys.
        fn buffered(&self, side: &str) -> usize {
            self.entries(&format!("interval-join-{side}"))
        }

        /// Entries of the keyed state `name`, over all keys.
        pub(in crate::api) fn entries(&self, name: &str) -> usize {
            let entries = self.store.entries().unwrap();
            entries.iter().filter(|e| e.state == name).count()
        }
    }

    #[test]
    fn the_interval_join_meets_pairs_of_a_key_within_bounds_in_either_order() {
        let mut j = Join::new(-5, 10);
        // Keys are value % 2: 2 and 4 are key 0, 3 is key 1.
        j.left(&[(100, 2), (100, 3)]);
        j.right(&[(95, 4), (110, 6), (111, 8), (94, 10)]);
        assert_eq!(
            j.take(),
            [(100, "2+4".to_string()), (110, "2+6".to_string())],
            "right at 95 and 110 meet the left at 100; 111 and 94 do not; key 1 meets nothing"
        );
        // A left record after the right ones meets those within its own bounds (99..=114:
        // not 95), each result with the later timestamp.
        j.left(&[(104, 12)]);
        assert_eq!(
            j.take(),
            [(110, "12+6".to_string()), (111, "12+8".to_string())]
        );
    }

    #[test]
    fn each_side_is_cleaned_up_once_the_watermark_passes_and_late_records_are_dropped() {
        let mut j = Join::new(-5, 10);
        j.left(&[(100, 2)]);
        j.right(&[(100, 4)]);
        assert_eq!(j.take().len(), 1);
        assert_eq!((j.buffered("left"), j.buffered("right")), (1, 1));
        // The right record at 100 can meet lefts up to 105; the left one rights up to 110.
        j.watermark(105);
        assert_eq!((j.buffered("left"), j.buffered("right")), (1, 0));
        j.right(&[(108, 6)]);
        assert_eq!(j.take(), [(108, "2+6".to_string())]);
        j.watermark(110);
        assert_eq!(j.buffered("left"), 0);
        // Behind the watermark: dropped, not buffered.
        j.left(&[(109, 8)]);
        assert_eq!(j.take(), Vec::<Joined>::new());
        assert_eq!(j.buffered("left"), 0);
        // The right record at 108 stays until 113.
        assert_eq!(j.buffered("right"), 1);
        j.watermark(113);
        assert_eq!(j.buffered("right"), 0);
    }

    #[test]
    fn bounds_meet_inclusively_and_clean_up_once_nothing_can_meet() {
        let b = Bounds {
            lower: -5,
            upper: 10,
        };
        assert!(b.meet(100, 95) && b.meet(100, 110) && b.meet(100, 100));
        assert!(!b.meet(100, 94) && !b.meet(100, 111));
        // A left record at 100 meets rights up to 110; a right at 100 meets lefts up to 105.
        assert_eq!(b.left_cleanup(100), 110);
        assert_eq!(b.right_cleanup(100), 105);
        let after = Bounds { lower: 3, upper: 7 };
        assert_eq!(after.right_cleanup(100), 100, "only earlier lefts meet it");
        let before = Bounds {
            lower: -7,
            upper: -3,
        };
        assert_eq!(before.left_cleanup(100), 100, "only earlier rights meet it");
    }
}
