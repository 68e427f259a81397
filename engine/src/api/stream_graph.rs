//! The stream graph a job program records on its environment: one node per operator, holding
//! the operators' typed factories behind type-erased closures, and the edges between them with
//! how records are distributed. `crate::graph` derives the job graph from it; a TaskManager
//! instantiates the operators of its subtasks from it.

use std::any::Any;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::operators::ChainRest;
use super::side::AnySideBuffer;
use super::{RuntimeContext, SnapshotContext, SourceHooks};
use crate::common::error::TaskError;
use crate::network::writer::RecordWriterHandle;

/// A type-erased box holding a `BoxOutput<T>` for the record type at that point of the graph.
pub(crate) type AnyBox = Box<dyn Any>;

/// Builds an operator instance: takes the downstream `BoxOutput<Out>`, returns the operator as a
/// `BoxOutput<In>`.
pub(crate) type OperatorFactory = Box<dyn Fn(&RuntimeContext, AnyBox) -> Result<AnyBox, TaskError>>;
/// Builds a source instance around its downstream `BoxOutput<Out>`.
pub(crate) type SourceFactory =
    Box<dyn Fn(&RuntimeContext, AnyBox) -> Result<Box<dyn SourceTask>, TaskError>>;
/// Combines the `BoxOutput<Out>`s of a node's consumers into one (copying records if several).
pub(crate) type FanoutFactory = Box<dyn Fn(Vec<AnyBox>) -> AnyBox>;
/// Wraps a node's `BoxOutput<In>` so it can be fed with network buffers.
pub(crate) type DecoderFactory = Box<dyn Fn(AnyBox) -> Box<dyn InputProcessor>>;
/// Builds the typed network output of an edge, as a `BoxOutput<T>`.
pub(crate) type WriterFactory = Box<dyn Fn(&RuntimeContext, RecordWriterHandle) -> AnyBox>;

/// A running source: emits until its input ends, then finishes its outputs.
pub(crate) trait SourceTask {
    fn run(&mut self, hooks: &mut dyn SourceHooks) -> Result<(), TaskError>;
}

/// Feeds records from received network buffers into the head operator of a chain.
pub(crate) trait InputProcessor {
    /// Decodes every record of a buffer and pushes it through the chain. `written_here`: a
    /// record writer of this process filled the buffer (`Buffer::produced_here`), so its
    /// archives need no validation.
    fn process(&mut self, buffer: &[u8], written_here: bool) -> Result<u64, TaskError>;
    /// Pushes a typed batch from a producer in this TaskManager (a `Vec` of the input's
    /// record type) through the chain.
    fn process_batch(&mut self, records: Box<dyn std::any::Any + Send>) -> Result<u64, TaskError>;
    /// All inputs ended.
    fn finish(&mut self) -> Result<(), TaskError>;
    /// A checkpoint barrier was aligned: snapshot the chain and pass the barrier downstream.
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError>;
    /// A checkpoint completed.
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError>;
    /// The input's event time advanced or its idle status changed.
    fn time(&mut self, signal: crate::network::valve::TimeSignal) -> Result<(), TaskError>;
    /// Processing time reached a deadline an operator asked for.
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError>;
    /// The next buffers or batches come from logical input `input` (0 or 1) of a two-input
    /// operator, until the next call; a processor of one input is never told.
    fn select_input(&mut self, _input: usize) {}
}

/// How records of an edge are distributed over the consumer's parallel subtasks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ShipStrategy {
    /// Subtask `i` sends to subtask `i` (equal parallelism; such edges chain).
    Forward,
    /// Round-robin over all consumers.
    Rebalance,
    /// By key: the key's key group decides the consumer.
    Hash,
    /// Every record to every consumer.
    Broadcast,
}

impl ShipStrategy {
    /// Whether every producer talks to every consumer.
    pub fn is_all_to_all(self) -> bool {
        self != ShipStrategy::Forward
    }
}

impl fmt::Display for ShipStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShipStrategy::Forward => "FORWARD",
            ShipStrategy::Rebalance => "REBALANCE",
            ShipStrategy::Hash => "HASH",
            ShipStrategy::Broadcast => "BROADCAST",
        })
    }
}

pub(crate) enum NodeKind {
    Source(SourceFactory),
    Operator(OperatorFactory),
}

/// Makes a side output's typed buffer and the events part of its combined consumers' output,
/// from those consumers' `BoxOutput`s.
pub(crate) type SideFactory = fn(Vec<AnyBox>) -> (Box<dyn AnySideBuffer>, Box<dyn ChainRest>);

/// A side output of a node that some stream reads (`get_side_output`).
pub(crate) struct SideOutputSpec {
    pub(crate) tag: String,
    /// The type of the tag's records (before stamping).
    pub(crate) record_type: std::any::TypeId,
    /// Its records travel with timestamps.
    pub(crate) stamped: bool,
    pub(crate) make: SideFactory,
}

/// One operator of the stream graph.
pub(crate) struct StreamNode {
    pub(crate) name: String,
    /// The uid the program gave the operator (`DataStream::uid`): its state's stable address
    /// in checkpoints and savepoints across versions of the program.
    pub(crate) uid: Option<String>,
    pub(crate) parallelism: Option<u32>,
    pub(crate) kind: NodeKind,
    /// Combines the consumers of the node's outputs: those of the main output into one, and,
    /// if the node has side outputs, those of each side output (see `side_outputs`).
    pub(crate) fanout: FanoutFactory,
    /// Combines the consumers of the main output (of the node's record type).
    pub(crate) main_fanout: fn(Vec<AnyBox>) -> AnyBox,
    /// Its side outputs; edges name theirs by index (`StreamEdge::side`).
    pub(crate) side_outputs: Vec<SideOutputSpec>,
    pub(crate) decoder: Option<DecoderFactory>,
    pub(crate) inputs: Vec<usize>,
    pub(crate) outputs: Vec<usize>,
    /// Reads its input in place from network buffers, so it always heads a chain.
    pub(crate) in_place: bool,
}

/// A connection between two operators.
pub(crate) struct StreamEdge {
    pub(crate) source: usize,
    pub(crate) target: usize,
    /// `None`: forward if the parallelisms match, else rebalance (Flink's default).
    pub(crate) strategy: Option<ShipStrategy>,
    pub(crate) writer: WriterFactory,
    /// The source's side output this edge reads (`None`: its main output).
    pub(crate) side: Option<usize>,
}

/// A file or directory a built-in source or sink of the job reads or writes, recorded when the
/// program builds its graph so that the JobManager can check it before anything runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFile {
    /// The operator's name, e.g. "Text File Source".
    pub operator: String,
    /// The path as the program gave it.
    pub path: std::path::PathBuf,
    /// Whether the operator writes there (a sink) rather than reads.
    pub writes: bool,
}

/// What a job program built.
#[derive(Default)]
pub(crate) struct StreamGraph {
    pub(crate) nodes: Vec<StreamNode>,
    pub(crate) edges: Vec<StreamEdge>,
    pub(crate) parallelism: Option<u32>,
    pub(crate) max_parallelism: Option<u32>,
    /// The execution mode the program chose, if it did (else `execution.runtime-mode`).
    pub(crate) mode: Option<crate::config::RuntimeMode>,
    /// Whether some source may run forever (so `AUTOMATIC` means streaming).
    pub(crate) unbounded_sources: bool,
    pub(crate) files: Vec<JobFile>,
}
