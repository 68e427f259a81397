//! From the dataflow a job program builds (the stream graph: one node per operator) to the job
//! graph (one vertex per chain of operators that run in one thread), as Flink does it.
//!
//! The stream graph holds the operators' typed factories behind type-erased closures; the job
//! graph is plain data that travels to the REST API and, as a fingerprint, to the TaskManagers,
//! which rebuild the same stream graph from the same program and arguments.

use std::any::Any;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::api::{RuntimeContext, TaskError};
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
    fn run(&mut self, hooks: &mut dyn crate::api::SourceHooks) -> Result<(), TaskError>;
}

/// Feeds records from received network buffers into the head operator of a chain.
pub(crate) trait InputProcessor {
    /// Decodes every record of a buffer and pushes it through the chain.
    fn process(&mut self, buffer: &[u8]) -> Result<u64, TaskError>;
    /// All inputs ended.
    fn finish(&mut self) -> Result<(), TaskError>;
    /// A checkpoint barrier was aligned: snapshot the chain and pass the barrier downstream.
    fn snapshot(&mut self, snap: &mut crate::api::SnapshotContext<'_>) -> Result<(), TaskError>;
    /// A checkpoint completed.
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError>;
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

/// One operator of the stream graph.
pub(crate) struct StreamNode {
    pub(crate) name: String,
    pub(crate) parallelism: Option<u32>,
    pub(crate) kind: NodeKind,
    pub(crate) fanout: FanoutFactory,
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
}

/// What a job program built.
#[derive(Default)]
pub(crate) struct StreamGraph {
    pub(crate) nodes: Vec<StreamNode>,
    pub(crate) edges: Vec<StreamEdge>,
    pub(crate) parallelism: Option<u32>,
    pub(crate) max_parallelism: Option<u32>,
    pub(crate) batch: bool,
}

/// Flink's default number of key groups for an operator of the given parallelism: 1.5 × the
/// parallelism rounded up to a power of two, at least 128 and at most 32768.
pub fn default_max_parallelism(parallelism: u32) -> u32 {
    let p = parallelism as u64;
    (p + p / 2).next_power_of_two().clamp(128, 32768) as u32
}

/// Why a stream graph cannot become a job graph.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The program created no operator at all.
    #[error("the job has no operators: a job needs at least one source")]
    Empty,
    /// A forward edge connects operators of different parallelism.
    #[error(
        "forward partitioning does not allow a change of parallelism: {from} (parallelism {from_p}) -> {to} (parallelism {to_p}); use rebalance()"
    )]
    ForwardParallelism {
        /// Upstream operator.
        from: String,
        /// Its parallelism.
        from_p: u32,
        /// Downstream operator.
        to: String,
        /// Its parallelism.
        to_p: u32,
    },
    /// A parallelism outside 1..=max parallelism.
    #[error("operator {name}: parallelism {parallelism} is not in 1..={max}")]
    BadParallelism {
        /// The operator.
        name: String,
        /// Its parallelism.
        parallelism: u32,
        /// The largest allowed.
        max: u32,
    },
    /// An operator that is not a source has no input (cannot happen through the public API).
    #[error("operator {0} has no input")]
    Unconnected(String),
}

/// A vertex of the job graph: a chain of operators run by one thread per parallel subtask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobVertex {
    /// A stable id, 32 hex digits as in Flink.
    pub id: String,
    /// The chained operators' names joined by " -> ".
    pub name: String,
    /// Parallel subtasks.
    pub parallelism: u32,
    /// Key groups of keyed state.
    pub max_parallelism: u32,
    /// Stream-graph node ids of the chain, head first.
    pub nodes: Vec<usize>,
    /// Whether the head is a source.
    pub is_source: bool,
    /// Indices into [`JobGraph::edges`] of this vertex's inputs, in input order.
    pub inputs: Vec<usize>,
    /// Indices into [`JobGraph::edges`] of this vertex's outputs, in output order.
    pub outputs: Vec<usize>,
}

/// A data exchange between two vertices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEdge {
    /// Producing vertex index.
    pub source: usize,
    /// Consuming vertex index.
    pub target: usize,
    /// Stream-graph edge this exchange implements.
    pub stream_edge: usize,
    /// How records are distributed.
    pub strategy: ShipStrategy,
}

/// The job graph: vertices in topological order and the edges between them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobGraph {
    /// The job's name.
    pub name: String,
    /// Vertices, sources first.
    pub vertices: Vec<JobVertex>,
    /// Exchanges.
    pub edges: Vec<JobEdge>,
    /// Whether keyed aggregations emit only final results.
    pub batch: bool,
}

impl JobGraph {
    /// A short digest of the structure, compared by TaskManagers against the graph they rebuild.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        format!(
            "{:016x}",
            crate::network::partitioner::stable_hash_bytes(text.as_bytes())
        )
    }

    /// The most slots the job needs with slot sharing: the largest vertex parallelism.
    pub fn max_vertex_parallelism(&self) -> u32 {
        self.vertices
            .iter()
            .map(|v| v.parallelism)
            .max()
            .unwrap_or(0)
    }

    /// Parallel subtasks over all vertices.
    pub fn total_subtasks(&self) -> u32 {
        self.vertices.iter().map(|v| v.parallelism).sum()
    }
}

impl StreamGraph {
    /// Chains operators and derives the job graph; `default_parallelism` applies to operators
    /// (and an environment) that set none.
    pub fn job_graph(&self, name: &str, default_parallelism: u32) -> Result<JobGraph, GraphError> {
        if self.nodes.is_empty() {
            return Err(GraphError::Empty);
        }
        let env_default = self.parallelism.unwrap_or(default_parallelism);
        let parallelism: Vec<u32> = self
            .nodes
            .iter()
            .map(|n| n.parallelism.unwrap_or(env_default))
            .collect();
        for (node, &p) in self.nodes.iter().zip(&parallelism) {
            let max = self.max_parallelism.unwrap_or(32768);
            if p == 0 || p > max {
                return Err(GraphError::BadParallelism {
                    name: node.name.clone(),
                    parallelism: p,
                    max,
                });
            }
            if node.inputs.is_empty() && !matches!(node.kind, NodeKind::Source(_)) {
                return Err(GraphError::Unconnected(node.name.clone()));
            }
        }
        let strategy = |e: &StreamEdge| -> Result<ShipStrategy, GraphError> {
            let (ps, pt) = (parallelism[e.source], parallelism[e.target]);
            match e.strategy {
                None if ps == pt => Ok(ShipStrategy::Forward),
                None => Ok(ShipStrategy::Rebalance),
                Some(ShipStrategy::Forward) if ps != pt => Err(GraphError::ForwardParallelism {
                    from: self.nodes[e.source].name.clone(),
                    from_p: ps,
                    to: self.nodes[e.target].name.clone(),
                    to_p: pt,
                }),
                Some(s) => Ok(s),
            }
        };
        let strategies = self
            .edges
            .iter()
            .map(strategy)
            .collect::<Result<Vec<_>, _>>()?;
        let chained = |edge: usize| {
            let e = &self.edges[edge];
            strategies[edge] == ShipStrategy::Forward
                && self.nodes[e.target].inputs.len() == 1
                && !self.nodes[e.target].in_place
        };
        // Node ids grow along every edge, so visiting nodes in id order visits heads in
        // topological order and each chain member after its head.
        let mut vertex_of = vec![usize::MAX; self.nodes.len()];
        let mut vertices: Vec<JobVertex> = Vec::new();
        for (id, node) in self.nodes.iter().enumerate() {
            let chained_input = node.inputs.iter().copied().find(|&e| chained(e));
            let v = match chained_input {
                Some(e) => vertex_of[self.edges[e].source],
                None => {
                    vertices.push(JobVertex {
                        id: String::new(),
                        name: String::new(),
                        parallelism: parallelism[id],
                        max_parallelism: self
                            .max_parallelism
                            .unwrap_or_else(|| default_max_parallelism(parallelism[id])),
                        nodes: Vec::new(),
                        is_source: matches!(node.kind, NodeKind::Source(_)),
                        inputs: Vec::new(),
                        outputs: Vec::new(),
                    });
                    vertices.len() - 1
                }
            };
            vertex_of[id] = v;
            vertices[v].nodes.push(id);
        }
        let mut edges = Vec::new();
        for (id, e) in self.edges.iter().enumerate() {
            if chained(id) {
                continue;
            }
            let (s, t) = (vertex_of[e.source], vertex_of[e.target]);
            vertices[s].outputs.push(edges.len());
            vertices[t].inputs.push(edges.len());
            edges.push(JobEdge {
                source: s,
                target: t,
                stream_edge: id,
                strategy: strategies[id],
            });
        }
        for (index, v) in vertices.iter_mut().enumerate() {
            v.name = v
                .nodes
                .iter()
                .map(|&n| self.nodes[n].name.as_str())
                .collect::<Vec<_>>()
                .join(" -> ");
            let seed = format!("{name}/{index}/{}", v.name);
            let hi = crate::network::partitioner::stable_hash_bytes(seed.as_bytes());
            let lo =
                crate::network::partitioner::stable_hash_bytes(format!("{seed}/lo").as_bytes());
            v.id = format!("{hi:016x}{lo:016x}");
        }
        Ok(JobGraph {
            name: name.to_string(),
            vertices,
            edges,
            batch: self.batch,
        })
    }
}
