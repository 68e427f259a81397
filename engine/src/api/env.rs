//! The execution environment and the typed stream handles a job program builds with.

use std::cell::RefCell;
use std::fmt::Display;
use std::hash::Hash;
use std::marker::PhantomData;
use std::ops::Add;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use super::checkpointing::SnapshotContext;
use super::context::RuntimeContext;
use super::count_windows::{CountOperator, CountWindow, CountWindows};
use super::operators::{
    BatchKeyedReduce, BoxOutput, ChainRest, Collector, Context, Discard, Fanout, Filter, FlatMap,
    KeyedProcess, KeyedProcessFunction, KeyedReduce, Map, MultiOutput, Sink,
};
use super::process::{Process, ProcessFunction, StampedProcessFunction};
use super::side::{AnySideBuffer, OutputTag, Side, SideBuffer, SideOutputs};
use super::sinks::{DiscardSink, PrintSink, SinkFunction, TextFileSink, TransactionalFileSink};
use super::sources::{
    CollectionSource, GeneratorSource, SequenceSource, SourceContext, SourceFunction, SourceHooks,
    TextFileSource,
};
use super::stream_graph::{
    AnyBox, InputProcessor, NodeKind, ShipStrategy, SideOutputSpec, SourceTask, StreamEdge,
    StreamGraph, StreamNode,
};
use super::time::{Stamped, WatermarkStrategy, restamped, unstamped};
use super::triggers::Trigger;
#[allow(unused_imports)] // named in the docs of `KeyedStream::window`
use super::windows::TumblingEventTimeWindows;
use super::windows::{
    Aggregate, Lateness, NoTimestamps, Process as ProcessWindow, ProcessWindowFunction, Reduce,
    TimeWindow, Unstamped, WindowAssigner, WindowFunction, WindowOperator,
};
use crate::common::error::TaskError;
use crate::config::RuntimeMode;
use crate::network::partitioner::ChannelSelector;
use crate::network::valve::TimeSignal;
use crate::network::writer::{NetworkOutput, RecordWriterHandle};
use crate::record::{self, Data};
use crate::state::{AggregateFunction, KeyedStateStore};

/// Where a job program builds its dataflow (Flink's `StreamExecutionEnvironment`).
#[derive(Clone, Default)]
pub struct StreamExecutionEnvironment {
    graph: Rc<RefCell<StreamGraph>>,
}

/// A stream of records of type `T`.
pub struct DataStream<T> {
    pub(super) env: StreamExecutionEnvironment,
    pub(super) node: usize,
    /// The ship strategy of the next edge out of this stream (set by `rebalance()` etc.).
    pub(super) strategy: Option<ShipStrategy>,
    /// Records carry event timestamps: they travel as [`Stamped<T>`], and the operators after
    /// them keep each record's timestamp (`super::time`).
    pub(super) timestamped: bool,
    /// This stream is the node's side output of that index (`get_side_output`), not its main
    /// output.
    pub(super) side: Option<usize>,
    pub(super) _t: PhantomData<fn() -> T>,
}

impl<T> Clone for DataStream<T> {
    fn clone(&self) -> Self {
        DataStream {
            env: self.env.clone(),
            node: self.node,
            strategy: self.strategy,
            timestamped: self.timestamped,
            side: self.side,
            _t: PhantomData,
        }
    }
}

/// A stream partitioned by key: records with equal keys go to the same subtask.
pub struct KeyedStream<T, K> {
    pub(super) stream: DataStream<T>,
    pub(super) key: Arc<dyn Fn(&T) -> K + Send + Sync>,
}

fn downcast<T: 'static>(any: AnyBox) -> Result<BoxOutput<T>, TaskError> {
    any.downcast::<BoxOutput<T>>().map(|b| *b).map_err(|_| {
        TaskError::Setup(
            "operator chain type mismatch (the job program is not deterministic?)".into(),
        )
    })
}

/// The outputs of a node with side outputs, as its fanout combines them.
struct NodeOutputs {
    /// The main output's `BoxOutput`.
    main: AnyBox,
    /// Each side output that has consumers: the buffer the operator emits into, and the
    /// events part of its consumers' output.
    sides: Vec<(Side, Box<dyn ChainRest>)>,
}

/// An operator's outputs: the main one (which passes events on to the side outputs too, if
/// there are any) and the side outputs it emits records into.
pub(super) fn split_outputs<T: 'static>(
    any: AnyBox,
) -> Result<(BoxOutput<T>, SideOutputs), TaskError> {
    let any = match any.downcast::<NodeOutputs>() {
        Ok(node) => {
            let main = downcast::<T>(node.main)?;
            let (sides, events): (Vec<Side>, Vec<Box<dyn ChainRest>>) =
                node.sides.into_iter().unzip();
            let main: BoxOutput<T> = Box::new(MultiOutput {
                main,
                sides: events,
            });
            return Ok((main, SideOutputs::new(sides)));
        }
        Err(any) => any,
    };
    Ok((downcast::<T>(any)?, SideOutputs::default()))
}

/// A side output's buffer of records travelling as `Y`, and its consumers' events.
fn side_channel<Y: Data>(outputs: Vec<AnyBox>) -> (Box<dyn AnySideBuffer>, Box<dyn ChainRest>) {
    let out = match downcast::<Y>(fanout::<Y>(outputs)) {
        Ok(out) => out,
        // Unreachable: `fanout::<Y>` makes a `BoxOutput<Y>`.
        Err(_) => Box::new(Discard),
    };
    let out = Rc::new(RefCell::new(out));
    let records = out.clone();
    let buffer = SideBuffer::<Y> {
        records: Vec::new(),
        push: Box::new(move |batch| records.borrow_mut().push_batch(batch)),
    };
    (Box::new(buffer), Box::new(out))
}

/// The fanout of a node with side outputs: `routes` says for each of the node's outputs, in
/// order, which side output it reads (`None`: the main output).
fn routed_fanout(
    main: fn(Vec<AnyBox>) -> AnyBox,
    sides: Vec<(
        String,
        std::any::TypeId,
        bool,
        super::stream_graph::SideFactory,
    )>,
    routes: Vec<Option<usize>>,
) -> super::stream_graph::FanoutFactory {
    Box::new(move |outputs: Vec<AnyBox>| -> AnyBox {
        let mut main_outs = Vec::new();
        let mut side_outs: Vec<Vec<AnyBox>> = sides.iter().map(|_| Vec::new()).collect();
        for (out, route) in outputs.into_iter().zip(&routes) {
            match route {
                Some(i) => side_outs[*i].push(out),
                None => main_outs.push(out),
            }
        }
        let mut made = Vec::new();
        for ((tag, record_type, stamped, make), outs) in sides.iter().zip(side_outs) {
            if outs.is_empty() {
                continue;
            }
            let (buffer, events) = make(outs);
            let side = Side {
                tag: tag.clone(),
                record_type: *record_type,
                stamped: *stamped,
                buffer,
            };
            made.push((side, events));
        }
        Box::new(NodeOutputs {
            main: main(main_outs),
            sides: made,
        })
    })
}

struct RunSource<T, S> {
    source: S,
    out: BoxOutput<T>,
    runtime: RuntimeContext,
}

impl<T, S: SourceFunction<T>> SourceTask for RunSource<T, S> {
    fn run(&mut self, hooks: &mut dyn SourceHooks) -> Result<(), TaskError> {
        let mut ctx = SourceContext::new(&mut *self.out, &self.runtime, hooks);
        self.source.run(&mut ctx)?;
        ctx.final_checkpoint()?;
        self.out.finish()
    }
}

pub(super) struct Decoder<T> {
    next: BoxOutput<T>,
    /// A buffer's records, reused.
    batch: Vec<T>,
}

impl<T> Decoder<T> {
    pub(super) fn new(next: BoxOutput<T>) -> Self {
        Decoder {
            next,
            batch: Vec::new(),
        }
    }
}

impl<T: Data> InputProcessor for Decoder<T> {
    fn process(&mut self, buffer: &[u8], written_here: bool) -> Result<u64, TaskError> {
        let mut pool = record::Pool::new();
        self.batch.clear();
        for frame in record::Frames::new(buffer) {
            let (offset, bytes) = frame?;
            let record = if written_here {
                // SAFETY: a writer of this process filled the buffer with records of `T`
                // (the channel's producer is built from the same program, for this edge), and
                // the frames are the archives it wrote, where it wrote them.
                unsafe { record::decode_written::<T>(&mut pool, offset, bytes)? }
            } else {
                record::decode_in::<T>(&mut pool, offset, bytes)?
            };
            self.batch.push(record);
        }
        let n = self.batch.len() as u64;
        self.next.push_batch(&mut self.batch)?;
        Ok(n)
    }
    fn process_batch(&mut self, records: Box<dyn std::any::Any + Send>) -> Result<u64, TaskError> {
        let mut records = typed_batch::<T>(records)?;
        let n = records.len() as u64;
        self.next.push_batch(&mut records)?;
        Ok(n)
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
        self.next.time(signal)
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        self.next.processing_time(now)
    }
}

/// The `Vec<T>` in a typed batch from a local producer.
fn typed_batch<T: 'static>(records: Box<dyn std::any::Any + Send>) -> Result<Vec<T>, TaskError> {
    records.downcast::<Vec<T>>().map(|b| *b).map_err(|_| {
        TaskError::Setup(format!(
            "a local producer sent records of another type than {} (the job program is not \
             deterministic?)",
            std::any::type_name::<T>()
        ))
    })
}

/// Handles one archived record in place.
type OnArchived<T> = Box<dyn FnMut(&<T as rkyv::Archive>::Archived) -> Result<(), TaskError>>;

/// An operator that takes archived records in place.
pub(crate) struct InPlace<T: Data> {
    on_record: OnArchived<T>,
    /// The rest of the chain (its record type erased), for the end of input and checkpoints.
    rest: Box<dyn ChainRest>,
}

/// Validates each frame of a buffer and hands the archived record to an in-place operator.
struct InPlaceDecoder<T: Data> {
    op: InPlace<T>,
    /// Where a typed record is archived for the operator.
    scratch: rkyv::util::AlignedVec,
    appender: record::Appender,
}

impl<T: Data> InputProcessor for InPlaceDecoder<T> {
    fn process(&mut self, buffer: &[u8], written_here: bool) -> Result<u64, TaskError> {
        let mut n = 0;
        for frame in record::Frames::new(buffer) {
            let (offset, bytes) = frame?;
            let archived = if written_here {
                // SAFETY: as in `Decoder::process`.
                unsafe { record::access_written::<T>(bytes) }
            } else {
                record::access::<T>(offset, bytes)?
            };
            (self.op.on_record)(archived)?;
            n += 1;
        }
        Ok(n)
    }
    fn process_batch(&mut self, records: Box<dyn std::any::Any + Send>) -> Result<u64, TaskError> {
        // A typed batch for an operator that reads archives: archive each record here (the
        // producer does not know what its consumer reads).
        let records = typed_batch::<T>(records)?;
        let n = records.len() as u64;
        for record in &records {
            self.scratch.clear();
            self.appender
                .encode(&mut self.scratch, record)
                .map_err(TaskError::from)?;
            // SAFETY: the scratch holds the bare archive of a `T` just written by this process.
            let archived = unsafe { record::access_written::<T>(&self.scratch) };
            (self.op.on_record)(archived)?;
        }
        Ok(n)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.op.rest.finish()
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        self.op.rest.snapshot(snap)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.op.rest.checkpoint_complete(checkpoint_id)
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        self.op.rest.time(signal)
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        self.op.rest.processing_time(now)
    }
}

fn fanout<T: Data>(outputs: Vec<AnyBox>) -> AnyBox {
    let mut outs: Vec<BoxOutput<T>> = Vec::with_capacity(outputs.len());
    for o in outputs {
        match o.downcast::<BoxOutput<T>>() {
            Ok(b) => outs.push(*b),
            // Unreachable by construction: every consumer of a node is built for its type.
            Err(_) => continue,
        }
    }
    let out: BoxOutput<T> = match outs.len() {
        0 => Box::new(Discard),
        1 => outs.pop().unwrap_or_else(|| Box::new(Discard)),
        _ => Box::new(Fanout {
            outputs: outs,
            copy: Vec::new(),
        }),
    };
    Box::new(out)
}

impl StreamExecutionEnvironment {
    /// A new, empty environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// The default parallelism of this job's operators (otherwise `-p` or `parallelism.default`).
    pub fn set_parallelism(&self, parallelism: u32) -> &Self {
        self.graph.borrow_mut().parallelism = Some(parallelism);
        self
    }

    /// The number of key groups (the most parallelism keyed state can ever be rescaled to).
    pub fn set_max_parallelism(&self, max_parallelism: u32) -> &Self {
        self.graph.borrow_mut().max_parallelism = Some(max_parallelism);
        self
    }

    /// How the job executes, whatever `execution.runtime-mode` says (Flink's
    /// `setRuntimeMode`): streaming, batch (keyed aggregations emit only final results,
    /// exchanges are blocking and stage by stage), or automatic (batch when every source is
    /// bounded).
    pub fn set_runtime_mode(&self, mode: RuntimeMode) -> &Self {
        self.graph.borrow_mut().mode = Some(mode);
        self
    }

    /// Records a file the job's built-in source or sink `operator` uses.
    pub(crate) fn uses_file(&self, operator: &str, path: &std::path::Path, writes: bool) {
        self.graph.borrow_mut().files.push(super::JobFile {
            operator: operator.to_string(),
            path: path.to_path_buf(),
            writes,
        });
    }

    pub(crate) fn into_graph(self) -> StreamGraph {
        match Rc::try_unwrap(self.graph) {
            Ok(cell) => cell.into_inner(),
            Err(rc) => std::mem::take(&mut *rc.borrow_mut()),
        }
    }

    pub(super) fn add_node<Out: Data>(
        &self,
        name: &str,
        kind: NodeKind,
        decoder: Option<super::stream_graph::DecoderFactory>,
    ) -> usize {
        let mut g = self.graph.borrow_mut();
        g.nodes.push(StreamNode {
            name: name.to_string(),
            uid: None,
            parallelism: None,
            kind,
            fanout: Box::new(fanout::<Out>),
            main_fanout: fanout::<Out>,
            side_outputs: Vec::new(),
            decoder,
            inputs: Vec::new(),
            outputs: Vec::new(),
            in_place: false,
        });
        g.nodes.len() - 1
    }

    pub(super) fn connect<T: Data>(
        &self,
        from: usize,
        side: Option<usize>,
        to: usize,
        strategy: Option<ShipStrategy>,
        selector: ChannelSelector<T>,
    ) {
        let mut g = self.graph.borrow_mut();
        let selector = Arc::new(selector);
        let writer = Box::new(
            move |ctx: &RuntimeContext, handle: RecordWriterHandle| -> AnyBox {
                let out: BoxOutput<T> = Box::new(NetworkOutput::new(
                    handle,
                    (*selector).clone(),
                    ctx.subtask_index() as usize,
                    ctx.state.key_hash,
                ));
                Box::new(out)
            },
        );
        g.edges.push(StreamEdge {
            source: from,
            target: to,
            strategy,
            writer,
            side,
        });
        let e = g.edges.len() - 1;
        g.nodes[from].outputs.push(e);
        g.nodes[to].inputs.push(e);
        // A node gets the fanout of several outputs once a stream reads one of its side
        // outputs; until then it keeps the plain one.
        let routes: Vec<Option<usize>> = g.nodes[from]
            .outputs
            .iter()
            .map(|&e| g.edges[e].side)
            .collect();
        if routes.iter().any(Option::is_some) {
            let node = &g.nodes[from];
            let sides = node.side_outputs.iter();
            let sides = sides
                .map(|s| (s.tag.clone(), s.record_type, s.stamped, s.make))
                .collect();
            let fanout = routed_fanout(node.main_fanout, sides, routes);
            g.nodes[from].fanout = fanout;
        }
    }

    /// Adds a user-defined source, unbounded (it may run forever); `factory` makes one
    /// instance per parallel subtask.
    pub fn add_source<T: Data, S: SourceFunction<T>>(
        &self,
        name: &str,
        factory: impl Fn(&RuntimeContext) -> S + Send + Sync + 'static,
    ) -> DataStream<T> {
        self.graph.borrow_mut().unbounded_sources = true;
        self.source_node(name, factory)
    }

    /// Adds a source that stamps its records with event timestamps and makes the stream's
    /// watermarks itself (Flink's `fromSource` with a watermark strategy, where the source
    /// applies the strategy per split): its records travel as `(timestamp, record)` and the
    /// stream has timestamps, as after `assign_timestamps_and_watermarks`.
    pub(crate) fn add_stamped_source<T: Data, S: SourceFunction<Stamped<T>>>(
        &self,
        name: &str,
        factory: impl Fn(&RuntimeContext) -> S + Send + Sync + 'static,
    ) -> DataStream<T> {
        self.add_source::<Stamped<T>, S>(name, factory)
            .into_timestamped()
    }

    /// Adds a user-defined source whose `run` returns once its input is exhausted (Flink's
    /// `Boundedness.BOUNDED`): a job of bounded sources runs in batch mode under
    /// `execution.runtime-mode: AUTOMATIC`.
    pub fn add_bounded_source<T: Data, S: SourceFunction<T>>(
        &self,
        name: &str,
        factory: impl Fn(&RuntimeContext) -> S + Send + Sync + 'static,
    ) -> DataStream<T> {
        self.source_node(name, factory)
    }

    fn source_node<T: Data, S: SourceFunction<T>>(
        &self,
        name: &str,
        factory: impl Fn(&RuntimeContext) -> S + Send + Sync + 'static,
    ) -> DataStream<T> {
        let kind = NodeKind::Source(Box::new(move |ctx: &RuntimeContext, out: AnyBox| {
            let task: Box<dyn SourceTask> = Box::new(RunSource {
                source: factory(ctx),
                out: split_outputs::<T>(out)?.0,
                runtime: ctx.clone(),
            });
            Ok(task)
        }));
        let node = self.add_node::<T>(name, kind, None);
        DataStream {
            env: self.clone(),
            node,
            strategy: None,
            timestamped: false,
            side: None,
            _t: PhantomData,
        }
    }

    /// The elements of a collection, split round-robin over the source's subtasks.
    pub fn from_collection<T: Data + Sync>(&self, items: Vec<T>) -> DataStream<T> {
        let items = Arc::new(items);
        self.add_bounded_source("Collection Source", move |_| CollectionSource {
            items: items.clone(),
        })
    }

    /// The numbers `from..=to` (Flink's `fromSequence`).
    pub fn from_sequence(&self, from: u64, to: u64) -> DataStream<u64> {
        self.add_bounded_source("Sequence Source", move |_| SequenceSource { from, to })
    }

    /// The lines of a text file, or of every visible file in a directory: a local path or an
    /// `hdfs://` URI (kept as written: a `PathBuf` holds the URI's text unchanged), read by the
    /// TaskManagers' file systems.
    pub fn read_text_file(&self, path: impl Into<PathBuf>) -> DataStream<String> {
        let path = path.into();
        self.uses_file("Text File Source", &path, false);
        self.add_bounded_source("Text File Source", move |_| TextFileSource {
            path: path.clone(),
        })
    }

    /// An unbounded stream `f(0), f(1), ...` at `rate` records per second over all subtasks
    /// (0: as fast as possible).
    pub fn generate<T: Data>(
        &self,
        rate: u64,
        f: impl Fn(u64) -> T + Send + Sync + 'static,
    ) -> DataStream<T> {
        let f = Arc::new(f);
        self.add_source("Generator Source", move |_| GeneratorSource {
            rate,
            count: None,
            f: f.clone(),
        })
    }

    /// Like [`generate`](Self::generate) but stops after `count` records.
    pub fn generate_bounded<T: Data>(
        &self,
        count: u64,
        rate: u64,
        f: impl Fn(u64) -> T + Send + Sync + 'static,
    ) -> DataStream<T> {
        let f = Arc::new(f);
        self.add_bounded_source("Generator Source", move |_| GeneratorSource {
            rate,
            count: Some(count),
            f: f.clone(),
        })
    }
}

impl<T: Data> DataStream<T> {
    /// Adds an operator node fed by this stream. `make` builds the operator around its
    /// downstream output as some `Op`; `decode` turns that `Op` into what reads network
    /// buffers. `in_place` operators read archived records and always head their chain.
    fn add_operator<O: Data, Op: 'static>(
        &self,
        name: &str,
        strategy: Option<ShipStrategy>,
        selector: ChannelSelector<T>,
        in_place: bool,
        make: impl Fn(&RuntimeContext, BoxOutput<O>, SideOutputs) -> Result<Op, TaskError> + 'static,
        decode: fn(Op) -> Box<dyn InputProcessor>,
    ) -> DataStream<O> {
        let kind = NodeKind::Operator(Box::new(move |ctx: &RuntimeContext, next: AnyBox| {
            let (next, sides) = split_outputs::<O>(next)?;
            let op = make(ctx, next, sides)?;
            Ok(Box::new(op) as AnyBox)
        }));
        let decoder: super::stream_graph::DecoderFactory =
            Box::new(move |any: AnyBox| -> Box<dyn InputProcessor> {
                match any.downcast::<Op>() {
                    Ok(op) => decode(*op),
                    // Unreachable by construction: the node's own factory made the box.
                    Err(_) => Box::new(Decoder::<T>::new(Box::new(Discard))),
                }
            });
        let node = self.env.add_node::<O>(name, kind, Some(decoder));
        self.env.graph.borrow_mut().nodes[node].in_place = in_place;
        self.env.connect::<T>(
            self.node,
            self.side,
            node,
            strategy.or(self.strategy),
            selector,
        );
        DataStream {
            env: self.env.clone(),
            node,
            strategy: None,
            timestamped: false,
            side: None,
            _t: PhantomData,
        }
    }

    fn then<O: Data>(
        &self,
        name: &str,
        strategy: Option<ShipStrategy>,
        selector: ChannelSelector<T>,
        make: impl Fn(&RuntimeContext, BoxOutput<O>) -> Result<BoxOutput<T>, TaskError> + 'static,
    ) -> DataStream<O> {
        self.then_with_sides(name, strategy, selector, move |ctx, next, _| {
            make(ctx, next)
        })
    }

    /// Like `then`, for an operator that emits to side outputs.
    fn then_with_sides<O: Data>(
        &self,
        name: &str,
        strategy: Option<ShipStrategy>,
        selector: ChannelSelector<T>,
        make: impl Fn(&RuntimeContext, BoxOutput<O>, SideOutputs) -> Result<BoxOutput<T>, TaskError>
        + 'static,
    ) -> DataStream<O> {
        self.add_operator(
            name,
            strategy,
            selector,
            false,
            make,
            |next: BoxOutput<T>| Box::new(Decoder::new(next)),
        )
    }

    /// Adds an operator that reads its input records in place from the received buffers
    /// (`InPlace`), without deserializing them first; it always heads its chain.
    fn then_in_place<O: Data>(
        &self,
        name: &str,
        strategy: Option<ShipStrategy>,
        selector: ChannelSelector<T>,
        make: impl Fn(&RuntimeContext, BoxOutput<O>) -> Result<InPlace<T>, TaskError> + 'static,
    ) -> DataStream<O> {
        let make = move |ctx: &RuntimeContext, next, _| make(ctx, next);
        self.add_operator(name, strategy, selector, true, make, |op: InPlace<T>| {
            Box::new(InPlaceDecoder {
                op,
                scratch: Default::default(),
                appender: Default::default(),
            })
        })
    }

    /// Keeps the records for which `f` is true, deciding on the archived record as it lies in
    /// the received network buffer: records that are dropped are never deserialized. The
    /// operator reads from the network, so it starts a new chain.
    pub fn filter_in_place(
        &self,
        f: impl Fn(&T::Archived) -> bool + Send + Sync + 'static,
    ) -> DataStream<T> {
        if self.timestamped {
            let raw = self.stamped();
            return raw
                .in_place_filter(None, raw.selector(), move |r| f(&r.1))
                .into_timestamped();
        }
        self.in_place_filter(None, self.selector(), f)
    }

    fn in_place_filter(
        &self,
        strategy: Option<ShipStrategy>,
        selector: ChannelSelector<T>,
        f: impl Fn(&T::Archived) -> bool + Send + Sync + 'static,
    ) -> DataStream<T> {
        // Only the records that pass are deserialized.
        self.in_place_op(
            "Filter (in place)",
            strategy,
            selector,
            move |archived: &T::Archived| {
                if f(archived) {
                    record::deserialize_archived::<T>(archived)
                        .map(Some)
                        .map_err(TaskError::from)
                } else {
                    Ok(None)
                }
            },
        )
    }

    /// Maps each archived record, as it lies in the received network buffer, to a new record
    /// (or drops it with `None`); the input is never deserialized. Starts a new chain.
    pub fn filter_map_in_place<O: Data>(
        &self,
        f: impl Fn(&T::Archived) -> Option<O> + Send + Sync + 'static,
    ) -> DataStream<O> {
        if self.timestamped {
            return self
                .stamped()
                .filter_map_in_place_raw(move |r| f(&r.1).map(|out| (r.0.to_native(), out)))
                .into_timestamped();
        }
        self.filter_map_in_place_raw(f)
    }

    fn filter_map_in_place_raw<O: Data>(
        &self,
        f: impl Fn(&T::Archived) -> Option<O> + Send + Sync + 'static,
    ) -> DataStream<O> {
        let selector = self.selector();
        self.in_place_op(
            "Filter Map (in place)",
            None,
            selector,
            move |archived: &T::Archived| Ok(f(archived)),
        )
    }

    /// An in-place operator that turns each archived record into at most one output record.
    fn in_place_op<O: Data>(
        &self,
        name: &str,
        strategy: Option<ShipStrategy>,
        selector: ChannelSelector<T>,
        step: impl Fn(&T::Archived) -> Result<Option<O>, TaskError> + Send + Sync + 'static,
    ) -> DataStream<O> {
        let step = Arc::new(step);
        self.then_in_place(name, strategy, selector, move |_, next: BoxOutput<O>| {
            let step = step.clone();
            let next = Rc::new(RefCell::new(next));
            let rest = next.clone();
            Ok(InPlace {
                on_record: Box::new(move |archived: &T::Archived| match step(archived)? {
                    Some(out) => next.borrow_mut().push(out),
                    None => Ok(()),
                }),
                rest: Box::new(rest),
            })
        })
    }

    fn plain<O: Data>(
        &self,
        name: &str,
        make: impl Fn(&RuntimeContext, BoxOutput<O>) -> Result<BoxOutput<T>, TaskError> + 'static,
    ) -> DataStream<O> {
        let selector = self.selector();
        self.then(name, None, selector, make)
    }

    fn selector(&self) -> ChannelSelector<T> {
        match self.strategy {
            Some(ShipStrategy::Broadcast) => ChannelSelector::Broadcast,
            _ => ChannelSelector::RoundRobin,
        }
    }

    /// Sets this operator's parallelism.
    pub fn set_parallelism(self, parallelism: u32) -> Self {
        self.env.graph.borrow_mut().nodes[self.node].parallelism = Some(parallelism);
        self
    }

    /// Renames this operator (shown in the web UI and REST API).
    pub fn name(self, name: &str) -> Self {
        self.env.graph.borrow_mut().nodes[self.node].name = name.to_string();
        self
    }

    /// Gives this operator a uid (Flink's `uid`): checkpoints and savepoints address its state
    /// by the uid's hash, so a new version of the program finds the state again however its
    /// dataflow changed around the operator. Without one, the operator's id is derived from its
    /// place in the dataflow and changes when operators upstream of it change. Uids must be
    /// unique within a job; a job with two operators of one uid is refused naming it.
    pub fn uid(self, uid: &str) -> Self {
        self.env.graph.borrow_mut().nodes[self.node].uid = Some(uid.to_string());
        self
    }

    /// This stream as it travels when its records carry timestamps: `(timestamp, record)`.
    pub(super) fn stamped(&self) -> DataStream<Stamped<T>> {
        DataStream {
            env: self.env.clone(),
            node: self.node,
            strategy: self.strategy,
            timestamped: false,
            side: self.side,
            _t: PhantomData,
        }
    }

    /// Applies `f` to every record; a record's timestamp stays with what `f` makes of it.
    pub fn map<O: Data>(&self, f: impl Fn(T) -> O + Send + Sync + 'static) -> DataStream<O> {
        if self.timestamped {
            return self
                .stamped()
                .map_raw(move |(ts, record)| (ts, f(record)))
                .into_timestamped();
        }
        self.map_raw(f)
    }

    fn map_raw<O: Data>(&self, f: impl Fn(T) -> O + Send + Sync + 'static) -> DataStream<O> {
        let f = Arc::new(f);
        self.plain("Map", move |_, next| {
            Ok(Box::new(Map::new(f.clone(), next)))
        })
    }

    /// Keeps the records for which `f` is true.
    pub fn filter(&self, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> DataStream<T> {
        if self.timestamped {
            return self
                .stamped()
                .filter_raw(move |r: &Stamped<T>| f(&r.1))
                .into_timestamped();
        }
        self.filter_raw(f)
    }

    fn filter_raw(&self, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> DataStream<T> {
        let f = Arc::new(f);
        self.plain("Filter", move |_, next| {
            Ok(Box::new(Filter { f: f.clone(), next }))
        })
    }

    /// Replaces every record by the records `f` returns for it, each with the timestamp of
    /// the record it came from.
    pub fn flat_map<O: Data, I: IntoIterator<Item = O>>(
        &self,
        f: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> DataStream<O> {
        if self.timestamped {
            return self
                .stamped()
                .flat_map_raw(move |(ts, record)| f(record).into_iter().map(move |out| (ts, out)))
                .into_timestamped();
        }
        self.flat_map_raw(f)
    }

    fn flat_map_raw<O: Data, I: IntoIterator<Item = O>>(
        &self,
        f: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> DataStream<O> {
        let f = Arc::new(f);
        self.plain("Flat Map", move |_, next| {
            Ok(Box::new(FlatMap::new(f.clone(), next)))
        })
    }

    /// Gives every record a timestamp and makes the stream's watermarks (Flink's
    /// `assignTimestampsAndWatermarks`): each subtask runs the strategy's timestamp assigner on
    /// every record and its watermark generator, emitting watermarks every
    /// `pipeline.auto-watermark-interval`. Watermarks that came from upstream are replaced by
    /// the ones made here. Without a timestamp assigner records keep the timestamps they have
    /// (none: `i64::MIN`, if they had none).
    pub fn assign_timestamps_and_watermarks(
        &self,
        strategy: WatermarkStrategy<T>,
    ) -> DataStream<T> {
        const NAME: &str = "Timestamps/Watermarks";
        if self.timestamped {
            return self
                .stamped()
                .plain(NAME, move |ctx, next| {
                    Ok(Box::new(strategy.operator(ctx, restamped, next)))
                })
                .into_timestamped();
        }
        self.plain(NAME, move |ctx, next| {
            Ok(Box::new(strategy.operator(ctx, unstamped, next)))
        })
        .into_timestamped()
    }

    /// The records the operator that makes this stream emitted to the side output `tag`
    /// (Flink's `getSideOutput`), with their timestamps if this stream has timestamps. Its
    /// consumers are connected like those of any stream (chained, or across the network with
    /// their own partitioning), and watermarks, barriers and the end of input reach them as
    /// they reach the main output's. Empty if the operator emits nothing there (only process
    /// functions and windows do). The stream's operator is still the one that makes it:
    /// `name` and `set_parallelism` on it change that operator.
    pub fn get_side_output<X: Data>(&self, tag: &OutputTag<X>) -> DataStream<X> {
        let record_type = std::any::TypeId::of::<X>();
        let mut g = self.env.graph.borrow_mut();
        let sides = &mut g.nodes[self.node].side_outputs;
        let found = sides
            .iter()
            .position(|s| s.tag == tag.id() && s.record_type == record_type);
        let index = found.unwrap_or_else(|| {
            sides.push(SideOutputSpec {
                tag: tag.id().to_string(),
                record_type,
                stamped: self.timestamped,
                make: if self.timestamped {
                    side_channel::<Stamped<X>>
                } else {
                    side_channel::<X>
                },
            });
            sides.len() - 1
        });
        drop(g);
        DataStream {
            env: self.env.clone(),
            node: self.node,
            strategy: None,
            timestamped: self.timestamped,
            side: Some(index),
            _t: PhantomData,
        }
    }

    /// Runs a process function on every record (Flink's `process` on a `DataStream`): it sees
    /// the record's timestamp, the watermark and processing time, and may emit to the main
    /// output and to side outputs ([`ProcessContext::output`](super::ProcessContext::output)).
    /// Each parallel subtask runs its own clone of `function`. What it emits has the timestamp
    /// of the record it came from.
    pub fn process<O: Data, F: ProcessFunction<T, O> + Clone>(&self, function: F) -> DataStream<O> {
        if self.timestamped {
            return self
                .stamped()
                .process_raw(StampedProcessFunction {
                    function,
                    out: Vec::new(),
                })
                .into_timestamped();
        }
        self.process_raw(function)
    }

    fn process_raw<O: Data, F: ProcessFunction<T, O> + Clone>(&self, function: F) -> DataStream<O> {
        let selector = self.selector();
        self.then_with_sides("Process", None, selector, move |_, next, sides| {
            Ok(Box::new(Process::new(function.clone(), next, sides)))
        })
    }

    /// Distributes records round-robin to the next operator's subtasks.
    pub fn rebalance(&self) -> DataStream<T> {
        DataStream {
            strategy: Some(ShipStrategy::Rebalance),
            ..self.clone()
        }
    }

    /// Sends every record to every subtask of the next operator.
    pub fn broadcast(&self) -> DataStream<T> {
        DataStream {
            strategy: Some(ShipStrategy::Broadcast),
            ..self.clone()
        }
    }

    /// Keeps records in the same subtask for the next operator (needs equal parallelism).
    pub fn forward(&self) -> DataStream<T> {
        DataStream {
            strategy: Some(ShipStrategy::Forward),
            ..self.clone()
        }
    }

    /// Partitions the stream by the key `key` extracts.
    pub fn key_by<K: Data + Hash + Eq>(
        &self,
        key: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> KeyedStream<T, K> {
        KeyedStream {
            stream: self.clone(),
            key: Arc::new(key),
        }
    }

    /// Sends records to a user-defined sink; `factory` makes one instance per subtask.
    pub fn add_sink<S: SinkFunction<T>>(
        &self,
        name: &str,
        factory: impl Fn(&RuntimeContext) -> Result<S, TaskError> + 'static,
    ) -> DataStream<()> {
        if self.timestamped {
            return self.stamped().add_sink_raw(name, move |ctx| {
                Ok(UnstampedSink {
                    sink: factory(ctx)?,
                    batch: Vec::new(),
                })
            });
        }
        self.add_sink_raw(name, factory)
    }

    fn add_sink_raw<S: SinkFunction<T>>(
        &self,
        name: &str,
        factory: impl Fn(&RuntimeContext) -> Result<S, TaskError> + 'static,
    ) -> DataStream<()> {
        self.plain(name, move |ctx, _next: BoxOutput<()>| {
            Ok(Box::new(Sink {
                sink: factory(ctx)?,
                operator_id: ctx.operator_id,
            }))
        })
    }

    /// Drops every record (for throughput tests).
    pub fn discard(&self) -> DataStream<()> {
        self.add_sink("Discard Sink", |_| Ok(DiscardSink))
    }
}

impl<T: Data + Display> DataStream<T> {
    /// Prints every record to standard output.
    pub fn print(&self) -> DataStream<()> {
        self.add_sink("Print to Std. Out", |ctx| Ok(PrintSink::new(ctx)))
    }

    /// Writes one line per record into the directory `dir`, exactly once: files are hidden
    /// while in progress and become visible (`part-<subtask>-<attempt>-<token>-<n>`) when the
    /// checkpoint covering them completes, or at the end of input without checkpointing. `dir`
    /// may be an `hdfs://` URI: files are written whole and renamed, never appended to.
    pub fn sink_to_directory(&self, dir: impl Into<PathBuf>) -> DataStream<()> {
        let dir = dir.into();
        self.env.uses_file("Directory Sink", &dir, true);
        self.add_sink("Directory Sink", move |ctx| {
            TransactionalFileSink::open(&dir, ctx)
        })
    }

    /// Writes one line per record: to `path` with parallelism 1, else to files `1`, `2`, ... in
    /// the directory `path`. `path` may be an `hdfs://` URI.
    pub fn write_as_text(&self, path: impl Into<PathBuf>) -> DataStream<()> {
        let path = path.into();
        self.env.uses_file("Text File Sink", &path, true);
        self.add_sink("Text File Sink", move |ctx| TextFileSink::open(&path, ctx))
    }
}

impl<T: Data, K: Data + Hash + Eq> KeyedStream<T, K> {
    /// This keyed stream as it travels when its records carry timestamps.
    fn stamped(&self) -> KeyedStream<Stamped<T>, K> {
        let key = self.key.clone();
        KeyedStream {
            stream: self.stream.stamped(),
            key: Arc::new(move |r: &Stamped<T>| key(&r.1)),
        }
    }

    fn keyed<O: Data>(
        &self,
        name: &str,
        make: impl Fn(&RuntimeContext, BoxOutput<O>) -> Result<BoxOutput<T>, TaskError> + 'static,
    ) -> DataStream<O> {
        self.keyed_with_sides(name, move |ctx, next, _| make(ctx, next))
    }

    fn keyed_with_sides<O: Data>(
        &self,
        name: &str,
        make: impl Fn(&RuntimeContext, BoxOutput<O>, SideOutputs) -> Result<BoxOutput<T>, TaskError>
        + 'static,
    ) -> DataStream<O> {
        let selector = ChannelSelector::by_key(self.key.clone());
        self.stream
            .then_with_sides(name, Some(ShipStrategy::Hash), selector, make)
    }

    /// Applies `f` to every record, after partitioning by key.
    pub fn map<O: Data>(&self, f: impl Fn(T) -> O + Send + Sync + 'static) -> DataStream<O> {
        if self.stream.timestamped {
            return self
                .stamped()
                .map_raw(move |(ts, record)| (ts, f(record)))
                .into_timestamped();
        }
        self.map_raw(f)
    }

    fn map_raw<O: Data>(&self, f: impl Fn(T) -> O + Send + Sync + 'static) -> DataStream<O> {
        let f = Arc::new(f);
        self.keyed("Map", move |_, next| {
            Ok(Box::new(Map::new(f.clone(), next)))
        })
    }

    /// Keeps the records for which `f` is true, after partitioning by key, deciding on the
    /// archived record in the received buffer (see [`DataStream::filter_in_place`]).
    pub fn filter_in_place(
        &self,
        f: impl Fn(&T::Archived) -> bool + Send + Sync + 'static,
    ) -> DataStream<T> {
        if self.stream.timestamped {
            let raw = self.stamped();
            return raw
                .stream
                .in_place_filter(
                    Some(ShipStrategy::Hash),
                    ChannelSelector::by_key(raw.key.clone()),
                    move |r| f(&r.1),
                )
                .into_timestamped();
        }
        self.stream.in_place_filter(
            Some(ShipStrategy::Hash),
            ChannelSelector::by_key(self.key.clone()),
            f,
        )
    }

    /// Keeps the records for which `f` is true, after partitioning by key.
    pub fn filter(&self, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> DataStream<T> {
        if self.stream.timestamped {
            return self
                .stamped()
                .filter_raw(move |r: &Stamped<T>| f(&r.1))
                .into_timestamped();
        }
        self.filter_raw(f)
    }

    fn filter_raw(&self, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> DataStream<T> {
        let f = Arc::new(f);
        self.keyed("Filter", move |_, next| {
            Ok(Box::new(Filter { f: f.clone(), next }))
        })
    }

    /// Combines each record with its key's previous aggregate. Streaming mode emits every new
    /// aggregate; batch mode emits each key's final aggregate when the input ends. An
    /// aggregate has the timestamp of the latest record in it.
    pub fn reduce(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> DataStream<T> {
        if self.stream.timestamped {
            return self
                .stamped()
                .reduce_raw(move |(_, acc), (ts, record)| (ts, f(acc, record)))
                .into_timestamped();
        }
        self.reduce_raw(f)
    }

    fn reduce_raw(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> DataStream<T> {
        let f = Arc::new(f);
        let key = self.key.clone();
        self.keyed("Keyed Reduce", move |ctx, next| {
            if ctx.is_batch() {
                let spill = ctx.state.local_dir.join("batch-aggregation");
                return Ok(Box::new(BatchKeyedReduce::new(
                    key.clone(),
                    f.clone(),
                    (spill, ctx.state.managed_memory),
                    next,
                )));
            }
            let store = ctx.keyed_state_store()?;
            Ok(Box::new(KeyedReduce {
                key: key.clone(),
                reduce: f.clone(),
                value: store.value_state("reduce")?,
                store,
                operator_id: ctx.operator_id,
                out: Vec::new(),
                next,
                _k: PhantomData,
            }))
        })
    }

    /// Runs a keyed process function with keyed state (Flink's `process` on a `KeyedStream`):
    /// `make` creates one function per subtask from its keyed state store, taking its state
    /// handles there; the state is checkpointed and restored with the job, redistributed by key
    /// groups when the parallelism changes.
    pub fn process<O: Data, F: KeyedProcessFunction<K, T, O>>(
        &self,
        make: impl Fn(&KeyedStateStore) -> Result<F, TaskError> + Send + Sync + 'static,
    ) -> DataStream<O> {
        self.process_in(move |_, store| make(store))
    }

    /// `process` with a function made from the subtask's context too.
    fn process_in<O: Data, F: KeyedProcessFunction<K, T, O>>(
        &self,
        make: impl Fn(&RuntimeContext, &KeyedStateStore) -> Result<F, TaskError> + 'static,
    ) -> DataStream<O> {
        if self.stream.timestamped {
            return self
                .stamped()
                .process_raw(move |ctx, store| {
                    Ok(StampedProcess {
                        function: make(ctx, store)?,
                        out: Vec::new(),
                    })
                })
                .into_timestamped();
        }
        self.process_raw(make)
    }

    fn process_raw<O: Data, F: KeyedProcessFunction<K, T, O>>(
        &self,
        make: impl Fn(&RuntimeContext, &KeyedStateStore) -> Result<F, TaskError> + 'static,
    ) -> DataStream<O> {
        let key = self.key.clone();
        self.keyed_with_sides("Keyed Process", move |ctx, next, sides| {
            let store = ctx.keyed_state_store()?;
            let function = make(ctx, &store)?;
            Ok(Box::new(KeyedProcess::new(
                key.clone(),
                function,
                store,
                ctx.timers.clone(),
                ctx.operator_id,
                next,
                sides,
            )?))
        })
    }
}

/// A keyed stream cut into windows of event or processing time (Flink's `WindowedStream`);
/// see [`KeyedStream::window`].
pub struct WindowedStream<T, K> {
    stream: KeyedStream<T, K>,
    windows: WindowAssigner,
    trigger: Trigger,
    lateness: Lateness<T>,
}

/// A keyed stream cut into windows of a number of records per key (Flink's count windows);
/// see [`KeyedStream::count_window`].
pub struct CountWindowedStream<T, K> {
    stream: KeyedStream<T, K>,
    windows: CountWindows,
}

impl<T: Data, K: Data + Hash + Eq> KeyedStream<T, K> {
    /// Cuts each key's records into windows: of event time ([`TumblingEventTimeWindows`],
    /// [`SlidingEventTimeWindows`](super::SlidingEventTimeWindows),
    /// [`EventTimeSessionWindows`](super::EventTimeSessionWindows)), which need timestamps
    /// (`assign_timestamps_and_watermarks`) and fire when the watermark passes their end, or of
    /// processing time ([`TumblingProcessingTimeWindows`](super::TumblingProcessingTimeWindows),
    /// [`SlidingProcessingTimeWindows`](super::SlidingProcessingTimeWindows),
    /// [`ProcessingTimeSessionWindows`](super::ProcessingTimeSessionWindows)), which fire when the
    /// clock does. A window's results have the timestamp `end - 1` on a stream with timestamps.
    pub fn window(&self, windows: WindowAssigner) -> WindowedStream<T, K> {
        WindowedStream {
            stream: self.clone_keyed(),
            windows,
            trigger: Trigger::DEFAULT,
            lateness: Lateness::default(),
        }
    }

    /// Tumbling count windows: each key's records in groups of `size` (at least 1), each
    /// group emitted when its last record comes (Flink's `countWindow(size)`). A group not
    /// full when the input ends is not emitted, as in Flink.
    pub fn count_window(&self, size: u64) -> CountWindowedStream<T, K> {
        self.count_window_sliding(size, size)
    }

    /// Sliding count windows: every `slide` records of a key, the last `size` of them (fewer
    /// at first) are emitted (Flink's `countWindow(size, slide)`).
    pub fn count_window_sliding(&self, size: u64, slide: u64) -> CountWindowedStream<T, K> {
        CountWindowedStream {
            stream: self.clone_keyed(),
            windows: CountWindows::new(size, slide),
        }
    }

    /// The keyed process operator that runs a window; `processing`: the end of input fires
    /// its processing-time timers (the last processing-time windows of a bounded input).
    fn window_operator<O: Data, F: KeyedProcessFunction<K, T, O>>(
        &self,
        name: &str,
        processing: bool,
        make: impl Fn(&RuntimeContext, &KeyedStateStore) -> Result<F, TaskError> + 'static,
    ) -> DataStream<O> {
        let key = self.key.clone();
        self.keyed_with_sides(name, move |ctx, next, sides| {
            let store = ctx.keyed_state_store()?;
            let function = make(ctx, &store)?;
            let op = KeyedProcess::new(
                key.clone(),
                function,
                store,
                ctx.timers.clone(),
                ctx.operator_id,
                next,
                sides,
            )?;
            Ok(Box::new(if processing {
                op.firing_processing_timers_at_end()
            } else {
                op
            }))
        })
    }
}

impl<T: Data, K: Data + Hash + Eq> WindowedStream<T, K> {
    /// When the windows emit their results (Flink's `trigger`): by default once, at their
    /// end; or [`CountTrigger`](super::CountTrigger),
    /// [`ContinuousEventTimeTrigger`](super::ContinuousEventTimeTrigger),
    /// [`ContinuousProcessingTimeTrigger`](super::ContinuousProcessingTimeTrigger), any of
    /// them in [`PurgingTrigger`](super::PurgingTrigger). A trigger that cannot serve these
    /// windows (a purging one on overlapping windows, an event-time one on processing-time
    /// windows) fails the job when it starts, saying why.
    pub fn trigger(mut self, trigger: Trigger) -> Self {
        self.trigger = trigger;
        self
    }

    /// Keeps each window's state until the watermark passes its end by `lateness` (Flink's
    /// `allowedLateness`; none by default): a record that comes after the window fired but
    /// within that time updates the window, which fires again at once with the updated result
    /// (a late firing, as Flink's event-time trigger does). Processing-time windows have no
    /// late records: it does not apply to them.
    pub fn allowed_lateness(mut self, lateness: std::time::Duration) -> Self {
        self.lateness.allowed = lateness.as_millis().min(i64::MAX as u128 / 4) as i64;
        self
    }

    /// Sends records that come too late for every window they belong to (allowed lateness
    /// included) to the side output `tag` instead of dropping them (Flink's
    /// `sideOutputLateData`): read them with `get_side_output(&tag)` on the window's result,
    /// each with its own timestamp. Dropped records are counted in the task metric
    /// `numLateRecordsDropped`.
    pub fn side_output_late_data(mut self, tag: &OutputTag<T>) -> Self {
        self.lateness.side_output = Some(tag.clone());
        self
    }

    /// Each window's records of a key combined with `f`, incrementally: one aggregate per key
    /// and slice of the window is kept, never the records.
    pub fn reduce(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> DataStream<T> {
        self.reduce_with(f, |_: &K, _: TimeWindow, result: T| result)
    }

    /// Like [`reduce`](Self::reduce), then `apply(key, window, result)` makes each window's
    /// output: the window's bounds are known here (Flink's `reduce` with a
    /// `ProcessWindowFunction`).
    pub fn reduce_with<O: Data>(
        &self,
        f: impl Fn(T, T) -> T + Send + Sync + 'static,
        apply: impl Fn(&K, TimeWindow, T) -> O + Send + Sync + 'static,
    ) -> DataStream<O> {
        let (f, apply) = (Arc::new(f), Arc::new(apply));
        self.apply("Window Reduce", move || {
            reduce_function(f.clone(), apply.clone())
        })
    }

    /// Each window's records of a key aggregated with `f` (Flink's
    /// `aggregate(AggregateFunction)`), incrementally: one accumulator per key and slice of the
    /// window is kept, never the records; a window's result merges its slices' accumulators.
    pub fn aggregate<ACC: Data, R: Data>(
        &self,
        f: impl AggregateFunction<T, ACC, R> + Send + Sync,
    ) -> DataStream<R> {
        self.aggregate_with(f, |_: &K, _: TimeWindow, result: R| result)
    }

    /// Like [`aggregate`](Self::aggregate), then `apply(key, window, result)` makes each
    /// window's output (Flink's `aggregate` with a window function).
    pub fn aggregate_with<ACC: Data, R: Data, O: Data>(
        &self,
        f: impl AggregateFunction<T, ACC, R> + Send + Sync,
        apply: impl Fn(&K, TimeWindow, R) -> O + Send + Sync + 'static,
    ) -> DataStream<O> {
        let (f, apply) = (Arc::new(f), Arc::new(apply));
        self.apply("Window Aggregate", move || {
            aggregate_function(f.clone(), apply.clone())
        })
    }

    /// Hands all of each window's records of a key to `f` with the key and the window's
    /// metadata (Flink's `process(ProcessWindowFunction)`); `f` emits any number of results.
    /// The window's records are kept in keyed state (a list per key and slice or session), in
    /// either backend, checkpointed and rescaled with the job. One clone of `f` per subtask.
    pub fn process<O: Data, P: ProcessWindowFunction<K, T, O> + Clone + Send + Sync>(
        &self,
        f: P,
    ) -> DataStream<O> {
        self.apply("Window Process", move || ProcessWindow {
            function: f.clone(),
        })
    }

    /// The window operator with the function `make` gives, on this stream as its records
    /// travel.
    fn apply<O: Data, F: WindowFunction<K, T, TimeWindow, O>>(
        &self,
        name: &str,
        make: impl Fn() -> F + 'static,
    ) -> DataStream<O> {
        let (windows, trigger, lateness) = (self.windows, self.trigger, self.lateness.clone());
        let processing = windows.time_domain() == crate::state::TimeDomain::ProcessingTime;
        let operator = move |ctx: &RuntimeContext, store: &KeyedStateStore| {
            WindowOperator::<T, F::Acc, F>::new(
                windows,
                trigger,
                lateness.clone(),
                make(),
                store,
                ctx.counters.clone(),
            )
        };
        let keyed = &self.stream;
        if keyed.stream.timestamped {
            return keyed
                .stamped()
                .window_operator(name, processing, operator)
                .into_timestamped()
                .name(name);
        }
        if !processing {
            return keyed.process(|_| Ok(NoTimestamps)).name(name);
        }
        keyed.window_operator(name, processing, move |ctx, store| {
            Ok(Unstamped {
                function: operator(ctx, store)?,
                out: Vec::new(),
            })
        })
    }
}

/// The window function of `reduce_with(f, apply)`, made per subtask.
fn reduce_function<K: 'static, T: Data, W: Copy + 'static, O: 'static, F, E>(
    f: Arc<F>,
    apply: Arc<E>,
) -> impl WindowFunction<K, T, W, O>
where
    F: Fn(T, T) -> T + Send + Sync + 'static,
    E: Fn(&K, W, T) -> O + Send + Sync + 'static,
{
    Reduce {
        reduce: move |a, b| f(a, b),
        emit: move |key: &K, window: W, result: T| apply(key, window, result),
    }
}

/// The window function of `aggregate_with(f, apply)`, made per subtask.
fn aggregate_function<
    K: 'static,
    T: 'static,
    W: Copy + 'static,
    ACC: Data,
    R: 'static,
    O: 'static,
    F,
    E,
>(
    f: Arc<F>,
    apply: Arc<E>,
) -> impl WindowFunction<K, T, W, O>
where
    F: AggregateFunction<T, ACC, R> + Send + Sync,
    E: Fn(&K, W, R) -> O + Send + Sync + 'static,
{
    Aggregate {
        function: SharedAggregate(f),
        emit: move |key: &K, window: W, result: R| apply(key, window, result),
        _t: PhantomData,
    }
}

/// An aggregate function shared by the subtasks of a process.
struct SharedAggregate<F>(Arc<F>);

impl<IN, ACC, OUT, F: AggregateFunction<IN, ACC, OUT>> AggregateFunction<IN, ACC, OUT>
    for SharedAggregate<F>
{
    fn create_accumulator(&self) -> ACC {
        self.0.create_accumulator()
    }
    fn add(&self, value: IN, accumulator: ACC) -> ACC {
        self.0.add(value, accumulator)
    }
    fn get_result(&self, accumulator: ACC) -> OUT {
        self.0.get_result(accumulator)
    }
    fn merge(&self, a: ACC, b: ACC) -> ACC {
        self.0.merge(a, b)
    }
}

impl<T: Data, K: Data + Hash + Eq> CountWindowedStream<T, K> {
    /// Each window's records of a key combined with `f`, incrementally.
    pub fn reduce(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> DataStream<T> {
        self.reduce_with(f, |_: &K, _: CountWindow, result: T| result)
    }

    /// Like [`reduce`](Self::reduce), then `apply(key, window, result)` makes each window's
    /// output.
    pub fn reduce_with<O: Data>(
        &self,
        f: impl Fn(T, T) -> T + Send + Sync + 'static,
        apply: impl Fn(&K, CountWindow, T) -> O + Send + Sync + 'static,
    ) -> DataStream<O> {
        let (f, apply) = (Arc::new(f), Arc::new(apply));
        self.apply("Count Window Reduce", move || {
            reduce_function(f.clone(), apply.clone())
        })
    }

    /// Each window's records of a key aggregated with `f`, incrementally.
    pub fn aggregate<ACC: Data, R: Data>(
        &self,
        f: impl AggregateFunction<T, ACC, R> + Send + Sync,
    ) -> DataStream<R> {
        self.aggregate_with(f, |_: &K, _: CountWindow, result: R| result)
    }

    /// Like [`aggregate`](Self::aggregate), then `apply(key, window, result)` makes each
    /// window's output.
    pub fn aggregate_with<ACC: Data, R: Data, O: Data>(
        &self,
        f: impl AggregateFunction<T, ACC, R> + Send + Sync,
        apply: impl Fn(&K, CountWindow, R) -> O + Send + Sync + 'static,
    ) -> DataStream<O> {
        let (f, apply) = (Arc::new(f), Arc::new(apply));
        self.apply("Count Window Aggregate", move || {
            aggregate_function(f.clone(), apply.clone())
        })
    }

    /// Hands all of each window's records of a key to `f` with the key and the window.
    pub fn process<
        O: Data,
        P: ProcessWindowFunction<K, T, O, CountWindow> + Clone + Send + Sync,
    >(
        &self,
        f: P,
    ) -> DataStream<O> {
        self.apply("Count Window Process", move || ProcessWindow {
            function: f.clone(),
        })
    }

    fn apply<O: Data, F: WindowFunction<K, T, CountWindow, O>>(
        &self,
        name: &str,
        make: impl Fn() -> F + 'static,
    ) -> DataStream<O> {
        let windows = self.windows;
        let operator = move |_: &RuntimeContext, store: &KeyedStateStore| {
            CountOperator::<F::Acc, F>::new(windows, make(), store)
        };
        let keyed = &self.stream;
        if keyed.stream.timestamped {
            return keyed
                .stamped()
                .window_operator(name, false, operator)
                .into_timestamped()
                .name(name);
        }
        keyed.window_operator(name, false, move |ctx, store| {
            Ok(Unstamped {
                function: operator(ctx, store)?,
                out: Vec::new(),
            })
        })
    }
}

impl<A: Data, N: Data + Add<Output = N>, K: Data + Hash + Eq> KeyedStream<(A, N), K> {
    /// Sums the second field of each key's pairs (Flink's `sum(1)`), keeping the first field.
    pub fn sum(&self) -> DataStream<(A, N)> {
        self.reduce(|(a, x), (_, y)| (a, x + y)).name("Keyed Sum")
    }
}

impl<T> DataStream<Stamped<T>> {
    /// The stream of records these stamped ones carry.
    pub(super) fn into_timestamped(self) -> DataStream<T> {
        DataStream {
            env: self.env,
            node: self.node,
            strategy: self.strategy,
            timestamped: true,
            side: self.side,
            _t: PhantomData,
        }
    }
}

/// A user's sink behind a stream with timestamps: it sees the records only.
struct UnstampedSink<S, T> {
    sink: S,
    /// A batch's records, reused.
    batch: Vec<T>,
}

impl<T: 'static, S: SinkFunction<T>> SinkFunction<Stamped<T>> for UnstampedSink<S, T> {
    fn invoke(&mut self, record: Stamped<T>) -> Result<(), TaskError> {
        self.sink.invoke(record.1)
    }
    fn invoke_batch(&mut self, batch: &mut Vec<Stamped<T>>) -> Result<(), TaskError> {
        self.batch.extend(batch.drain(..).map(|(_, record)| record));
        self.sink.invoke_batch(&mut self.batch)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.sink.finish()
    }
    fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<Vec<Vec<u8>>, TaskError> {
        self.sink.snapshot_state(checkpoint_id)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.sink.checkpoint_complete(checkpoint_id)
    }
}

/// A user's keyed process function behind a stream with timestamps: it sees each record's
/// timestamp in its context, and what it emits has the timestamp of the record (or timer) it
/// was called for.
struct StampedProcess<F, O> {
    function: F,
    /// What the function emitted for one call, reused.
    out: Vec<O>,
}

impl<F, O> StampedProcess<F, O> {
    fn stamp(&mut self, ts: i64, out: &mut Collector<'_, Stamped<O>>) -> Result<(), TaskError> {
        for emitted in self.out.drain(..) {
            out.collect((ts, emitted))?;
        }
        Ok(())
    }
}

impl<K, T, O: 'static, F: KeyedProcessFunction<K, T, O>>
    KeyedProcessFunction<K, Stamped<T>, Stamped<O>> for StampedProcess<F, O>
{
    fn process(
        &mut self,
        key: &K,
        (ts, record): Stamped<T>,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        ctx.timestamp = Some(ts);
        self.function
            .process(key, record, ctx, &mut Collector::new(&mut self.out))?;
        self.stamp(ts, out)
    }

    fn on_timer(
        &mut self,
        key: &K,
        timestamp: i64,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        self.function
            .on_timer(key, timestamp, ctx, &mut Collector::new(&mut self.out))?;
        self.stamp(timestamp, out)
    }
}
