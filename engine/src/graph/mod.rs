//! From the dataflow a job program builds (the stream graph: one node per operator, recorded by
//! the api in `crate::api::stream_graph`) to the job graph (one vertex per chain of operators
//! that run in one thread), as Flink does it.
//!
//! The job graph is plain data that travels to the REST API and, as a fingerprint, to the
//! TaskManagers, which rebuild the same stream graph from the same program and arguments.

mod operator_ids;

use serde::{Deserialize, Serialize};

use crate::api::stream_graph::{NodeKind, ShipStrategy, StreamEdge, StreamGraph};
use crate::common::keys::default_max_parallelism;

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
    /// A rescaled graph was given a parallelism for another number of vertices.
    #[error("{given} parallelisms given for a job of {vertices} vertices")]
    VertexCount {
        /// Parallelisms given.
        given: usize,
        /// The job's vertices.
        vertices: usize,
    },
    /// An operator that is not a source has no input (cannot happen through the public API).
    #[error("operator {0} has no input")]
    Unconnected(String),
    /// Two operators were given the same uid: checkpoints could not tell their state apart.
    #[error(
        "the uid \"{uid}\" is given to two operators ({first} and {second}); uids must be unique within a job"
    )]
    DuplicateUid {
        /// The uid.
        uid: String,
        /// The first operator that has it.
        first: String,
        /// The second.
        second: String,
    },
    /// Two operators' stable ids are equal (a uid whose hash equals a derived id).
    #[error(
        "operators {first} and {second} have the same operator id {id}; give one of them another uid"
    )]
    OperatorIdCollision {
        /// The id, 32 hex digits.
        id: String,
        /// The first operator.
        first: String,
        /// The second.
        second: String,
    },
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
    /// The chained operators' stable ids (what checkpoints address their state by), in the
    /// order of `nodes`.
    pub operators: Vec<crate::common::ids::OperatorIdentity>,
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
    /// Whether the job runs in batch mode: blocking exchanges, stage by stage, keyed
    /// aggregations emitting only final results (see [`resolve_mode`](Self::resolve_mode)).
    pub batch: bool,
    /// The execution mode the program chose, if it did.
    #[serde(default)]
    pub mode: Option<crate::config::RuntimeMode>,
    /// Whether every source is bounded.
    #[serde(default)]
    pub bounded: bool,
    /// The files and directories its built-in sources and sinks read and write.
    pub files: Vec<crate::api::JobFile>,
}

impl JobGraph {
    /// A short digest of the structure, compared by TaskManagers against the graph they rebuild.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        format!(
            "{:016x}",
            crate::common::keys::stable_hash_bytes(text.as_bytes())
        )
    }

    /// Decides whether the job runs in batch mode: as its program chose, else as `configured`
    /// (`execution.runtime-mode` of its submission; `AUTOMATIC` is batch when every source is
    /// bounded). The JobManager and every TaskManager decide alike from the same inputs.
    pub fn resolve_mode(mut self, configured: crate::config::RuntimeMode) -> Self {
        self.batch = self.mode.unwrap_or(configured).is_batch(self.bounded);
        self
    }

    /// The same job with each vertex at the parallelism `parallelism` gives it (in vertex
    /// order), as the adaptive scheduler runs it: structure, chaining and key groups (each
    /// vertex's maximum parallelism) stay, so state moves between the two by key group.
    pub fn rescaled(&self, parallelism: &[u32]) -> Result<JobGraph, GraphError> {
        let mut graph = self.clone();
        for (v, &p) in graph.vertices.iter_mut().zip(parallelism) {
            if p == 0 || p > v.max_parallelism {
                return Err(GraphError::BadParallelism {
                    name: v.name.clone(),
                    parallelism: p,
                    max: v.max_parallelism,
                });
            }
            v.parallelism = p;
        }
        if parallelism.len() != graph.vertices.len() {
            return Err(GraphError::VertexCount {
                given: parallelism.len(),
                vertices: graph.vertices.len(),
            });
        }
        for e in &graph.edges {
            let (from, to) = (&graph.vertices[e.source], &graph.vertices[e.target]);
            if e.strategy == ShipStrategy::Forward && from.parallelism != to.parallelism {
                return Err(GraphError::ForwardParallelism {
                    from: from.name.clone(),
                    from_p: from.parallelism,
                    to: to.name.clone(),
                    to_p: to.parallelism,
                });
            }
        }
        Ok(graph)
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
        let shapes: Vec<operator_ids::NodeShape> = self
            .nodes
            .iter()
            .map(|n| operator_ids::NodeShape {
                name: n.name.clone(),
                uid: n.uid.clone(),
                inputs: n.inputs.iter().map(|&e| self.edges[e].source).collect(),
                outputs: n.outputs.iter().map(|&e| self.edges[e].target).collect(),
            })
            .collect();
        let identities = operator_ids::operator_ids(&shapes)?;
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
                        operators: Vec::new(),
                        is_source: matches!(node.kind, NodeKind::Source(_)),
                        inputs: Vec::new(),
                        outputs: Vec::new(),
                    });
                    vertices.len() - 1
                }
            };
            vertex_of[id] = v;
            vertices[v].nodes.push(id);
            vertices[v].operators.push(identities[id].clone());
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
            let hi = crate::common::keys::stable_hash_bytes(seed.as_bytes());
            let lo = crate::common::keys::stable_hash_bytes(format!("{seed}/lo").as_bytes());
            v.id = format!("{hi:016x}{lo:016x}");
        }
        Ok(JobGraph {
            name: name.to_string(),
            vertices,
            edges,
            batch: false,
            mode: self.mode,
            bounded: !self.unbounded_sources,
            files: self.files.clone(),
        })
    }
}

/// Why a program's job graph could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No known program has that name.
    #[error("unknown job '{0}'")]
    UnknownProgram(String),
    /// The program refused its arguments.
    #[error("invalid arguments for {program}: {message}")]
    BadArguments {
        /// The program.
        program: String,
        /// What it said.
        message: String,
    },
    /// The dataflow cannot run.
    #[error("invalid job graph: {0}")]
    BadGraph(#[from] GraphError),
}

/// A job artifact's answer when asked for a program's job graph
/// ([`crate::rpc::artifact::PLAN`]): the graph, or why there is none.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanAnswer {
    /// The program built its dataflow.
    Graph(JobGraph),
    /// It could not: unknown program, bad arguments, an invalid graph, a panic.
    Error(String),
}

/// Builds the job graph of `program` at `parallelism` by running the program's code (user
/// code: the JobManager runs this off its lock and async runtime).
pub fn build_job_graph(
    programs: &crate::api::ProgramRegistry,
    program: &crate::rpc::messages::ProgramSpec,
    parallelism: u32,
) -> Result<JobGraph, BuildError> {
    let code = programs
        .find(&program.name)
        .ok_or_else(|| BuildError::UnknownProgram(program.name.clone()))?;
    let env = crate::api::StreamExecutionEnvironment::new();
    let name = code
        .build(&env, &program.args)
        .map_err(|message| BuildError::BadArguments {
            program: program.name.clone(),
            message,
        })?;
    Ok(env
        .into_graph()
        .job_graph(&name, parallelism)?
        .resolve_mode(program.runtime_mode))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use std::cell::RefCell;
    use std::rc::Rc;

    use crate::api::operators::{BoxOutput, Output};
    use crate::api::stream_graph::{AnyBox, NodeKind, StreamGraph};
    use crate::api::{
        Collector, OutputTag, ProcessContext, ProcessFunction, RuntimeContext, SinkFunction,
        StreamExecutionEnvironment, TaskError, WatermarkStrategy,
    };
    use crate::network::valve::TimeSignal;
    use crate::record;

    struct Collect(Arc<Mutex<Vec<(u64, String)>>>);

    impl SinkFunction<(u64, String)> for Collect {
        fn invoke(&mut self, record: (u64, String)) -> Result<(), TaskError> {
            self.0.lock().unwrap().push(record);
            Ok(())
        }
    }

    /// Emits even numbers on the main output and odd ones, as text with their timestamp and the
    /// watermark seen (at least -1), on the side output "odd".
    #[derive(Clone)]
    struct Split;

    fn odd() -> OutputTag<String> {
        OutputTag::new("odd")
    }

    impl ProcessFunction<u64, u64> for Split {
        fn process_element(
            &mut self,
            n: u64,
            ctx: &mut ProcessContext<'_>,
            out: &mut Collector<'_, u64>,
        ) -> Result<(), TaskError> {
            if n.is_multiple_of(2) {
                out.collect(n)
            } else {
                let w = ctx.current_watermark().max(-1);
                let text = format!("{n} at {:?} after {w}", ctx.timestamp());
                ctx.output(&odd(), text)
            }
        }
    }

    struct Keep<T>(Arc<Mutex<Vec<T>>>);

    impl<T: 'static> SinkFunction<T> for Keep<T> {
        fn invoke(&mut self, record: T) -> Result<(), TaskError> {
            self.0.lock().unwrap().push(record);
            Ok(())
        }
    }

    /// Stands for a network edge's writer: logs what reaches it, records and events in order.
    struct Log<T>(Rc<RefCell<Vec<String>>>, std::marker::PhantomData<T>);

    impl<T: std::fmt::Debug> Output<T> for Log<T> {
        fn push(&mut self, record: T) -> Result<(), TaskError> {
            self.0.borrow_mut().push(format!("{record:?}"));
            Ok(())
        }
        fn finish(&mut self) -> Result<(), TaskError> {
            self.0.borrow_mut().push("end".into());
            Ok(())
        }
        fn snapshot(&mut self, _: &mut crate::api::SnapshotContext<'_>) -> Result<(), TaskError> {
            Ok(())
        }
        fn checkpoint_complete(&mut self, _: u64) -> Result<(), TaskError> {
            Ok(())
        }
        fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
            self.0.borrow_mut().push(format!("{signal:?}"));
            Ok(())
        }
        fn processing_time(&mut self, _: i64) -> Result<(), TaskError> {
            Ok(())
        }
    }

    /// Builds `node` and what is chained behind it as a TaskManager does, with `network(edge)`
    /// for the outputs that cross vertices.
    fn build(
        graph: &StreamGraph,
        job: &super::JobGraph,
        node: usize,
        network: &dyn Fn(usize) -> AnyBox,
    ) -> AnyBox {
        let ctx = RuntimeContext::standalone(0, 1);
        let outs = graph.nodes[node]
            .outputs
            .iter()
            .map(|&e| {
                if job.edges.iter().any(|j| j.stream_edge == e) {
                    network(e)
                } else {
                    build(graph, job, graph.edges[e].target, network)
                }
            })
            .collect();
        let NodeKind::Operator(make) = &graph.nodes[node].kind else {
            panic!("not an operator")
        };
        make(&ctx, (graph.nodes[node].fanout)(outs)).unwrap()
    }

    #[test]
    fn side_outputs_reach_chained_and_network_consumers_with_timestamps_and_events() {
        let env = StreamExecutionEnvironment::new();
        let (main, chained) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        );
        let split = env
            .from_sequence(1, 5)
            .assign_timestamps_and_watermarks(
                WatermarkStrategy::for_monotonous_timestamps()
                    .with_timestamp_assigner(|n: &u64, _| *n as i64 * 10),
            )
            .process(Split);
        let keep = main.clone();
        split.add_sink("Main", move |_| Ok(Keep(keep.clone())));
        let odds = split.get_side_output(&odd());
        let keep = chained.clone();
        odds.add_sink("Odd (chained)", move |_| Ok(Keep(keep.clone())));
        odds.rebalance().add_sink("Odd (remote)", |_| {
            Ok(Keep(Arc::new(Mutex::new(Vec::new()))))
        });
        let graph = env.into_graph();
        let job = graph.job_graph("t", 1).unwrap();
        // Source, assigner, process and both chained sinks in one vertex; the rebalanced side
        // output crosses to a vertex of its own.
        assert_eq!(job.vertices.len(), 2);
        assert_eq!(job.vertices[0].nodes, [0, 1, 2, 3, 4]);
        assert_eq!(job.edges.len(), 1);
        let log = Rc::new(RefCell::new(Vec::new()));
        let network = |_| -> AnyBox {
            let out: BoxOutput<(i64, String)> = Box::new(Log(log.clone(), Default::default()));
            Box::new(out)
        };
        let process = *downcast_ref(build(&graph, &job, 2, &network));
        let mut process: BoxOutput<(i64, u64)> = process;
        process
            .push_batch(&mut vec![(10, 1), (20, 2), (30, 3)])
            .unwrap();
        process.time(TimeSignal::Watermark(30)).unwrap();
        process.push_batch(&mut vec![(40, 4), (50, 5)]).unwrap();
        process.finish().unwrap();
        assert_eq!(*main.lock().unwrap(), [2, 4]);
        assert_eq!(
            *chained.lock().unwrap(),
            [
                "1 at Some(10) after -1",
                "3 at Some(30) after -1",
                "5 at Some(50) after 30"
            ]
        );
        // Across the network the side records travel with their timestamps, the watermark
        // after the records that preceded it, and the end of input last.
        assert_eq!(
            *log.borrow(),
            [
                "(10, \"1 at Some(10) after -1\")",
                "(30, \"3 at Some(30) after -1\")",
                "Watermark(30)",
                "(50, \"5 at Some(50) after 30\")",
                "end"
            ]
        );
    }

    fn downcast_ref<T: 'static>(any: AnyBox) -> Box<T> {
        any.downcast::<T>().expect("the operator's input type")
    }

    #[test]
    fn in_place_filter_reads_archived_records_and_heads_its_own_chain() {
        let env = StreamExecutionEnvironment::new();
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink_store = got.clone();
        env.from_collection(vec![(0u64, String::new())])
            .filter_in_place(|r: &<(u64, String) as rkyv::Archive>::Archived| {
                r.0.to_native() % 3 == 0 && !r.1.is_empty()
            })
            .add_sink("Collect", move |_| Ok(Collect(sink_store.clone())));
        let graph = env.into_graph();
        let job = graph.job_graph("t", 1).unwrap();
        // The in-place filter does not chain behind the source even with equal parallelism.
        assert_eq!(job.vertices.len(), 2);
        let vertex = &job.vertices[1];
        assert_eq!(
            vertex.nodes.len(),
            2,
            "the sink chains behind the in-place filter"
        );
        let ctx = RuntimeContext::standalone(0, 1);
        let (filter, sink) = (vertex.nodes[0], vertex.nodes[1]);
        let NodeKind::Operator(make_sink) = &graph.nodes[sink].kind else {
            panic!()
        };
        let sink_op = make_sink(&ctx, (graph.nodes[sink].fanout)(vec![])).unwrap();
        let NodeKind::Operator(make_filter) = &graph.nodes[filter].kind else {
            panic!()
        };
        let filter_op = make_filter(&ctx, (graph.nodes[filter].fanout)(vec![sink_op])).unwrap();
        let mut input = (graph.nodes[filter].decoder.as_ref().unwrap())(filter_op);
        let mut buffer = rkyv::util::AlignedVec::new();
        let records: Vec<(u64, String)> = (0..10)
            .map(|i| {
                (
                    i,
                    if i == 6 {
                        String::new()
                    } else {
                        format!("r{i}")
                    },
                )
            })
            .collect();
        for r in &records {
            record::append(&mut buffer, r).unwrap();
        }
        // Validated (from a peer) or not (written by this process), the same records.
        assert_eq!(input.process(&buffer, false).unwrap(), 10);
        assert_eq!(input.process(&buffer, true).unwrap(), 10);
        // A typed batch from a producer of this process: archived here, the same records.
        assert_eq!(input.process_batch(Box::new(records.clone())).unwrap(), 10);
        let wrong = input
            .process_batch(Box::new(vec![1u32]))
            .unwrap_err()
            .to_string();
        assert!(wrong.contains("another type"), "{wrong}");
        input.finish().unwrap();
        let kept = vec![(0, "r0".into()), (3, "r3".into()), (9, "r9".into())];
        assert_eq!(
            *got.lock().unwrap(),
            [kept.clone(), kept.clone(), kept].concat()
        );
        // Garbage is rejected by validation, not read.
        let mut garbage = rkyv::util::AlignedVec::<16>::new();
        garbage.extend_from_slice(&[
            8, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ]);
        assert!(input.process(&garbage, false).is_err());
    }
}

#[cfg(test)]
mod rescale_tests {
    use crate::api::StreamExecutionEnvironment;

    #[test]
    fn a_rescaled_graph_keeps_its_structure_and_key_groups_and_checks_forward_edges() {
        let env = StreamExecutionEnvironment::new();
        env.from_sequence(0, 9)
            .map(|i| (i % 3, 1u64))
            .key_by(|r: &(u64, u64)| r.0)
            .sum()
            .discard();
        let job = env.into_graph().job_graph("t", 4).unwrap();
        let p: Vec<u32> = job.vertices.iter().map(|_| 2).collect();
        let small = job.rescaled(&p).unwrap();
        assert_eq!(small.vertices.len(), job.vertices.len());
        for (a, b) in small.vertices.iter().zip(&job.vertices) {
            assert_eq!(a.parallelism, 2);
            assert_eq!(a.max_parallelism, b.max_parallelism, "key groups stay");
            assert_eq!(a.operators, b.operators, "state ids stay");
        }
        assert_ne!(small.fingerprint(), job.fingerprint());
        assert!(job.rescaled(&[2]).is_err(), "one parallelism per vertex");
        let too_many: Vec<u32> = job.vertices.iter().map(|v| v.max_parallelism + 1).collect();
        assert!(job.rescaled(&too_many).is_err());
    }

    #[test]
    fn the_runtime_mode_is_the_programs_choice_else_the_configured_one_and_automatic_looks_at_the_sources()
     {
        use crate::config::RuntimeMode::{Automatic, Batch, Streaming};
        let graph = |choice: Option<crate::config::RuntimeMode>, bounded: bool| {
            let env = StreamExecutionEnvironment::new();
            if let Some(mode) = choice {
                env.set_runtime_mode(mode);
            }
            let numbers = if bounded {
                env.from_sequence(1, 10)
            } else {
                env.generate(0, |i| i)
            };
            numbers
                .key_by(|n: &u64| *n % 2)
                .reduce(|a, b| a + b)
                .discard();
            env.into_graph().job_graph("t", 2).unwrap()
        };
        assert!(!graph(None, true).resolve_mode(Streaming).batch);
        assert!(graph(None, false).resolve_mode(Batch).batch);
        assert!(graph(None, true).resolve_mode(Automatic).batch);
        assert!(!graph(None, false).resolve_mode(Automatic).batch);
        // The program's own choice wins over the configuration.
        assert!(graph(Some(Batch), true).resolve_mode(Streaming).batch);
        assert!(!graph(Some(Streaming), true).resolve_mode(Batch).batch);
        assert!(graph(Some(Automatic), true).resolve_mode(Streaming).batch);
        // A user source is unbounded unless added as bounded.
        struct One;
        impl crate::api::SourceFunction<u64> for One {
            fn run(
                &mut self,
                ctx: &mut crate::api::SourceContext<'_, u64>,
            ) -> Result<(), crate::api::TaskError> {
                ctx.collect(1)
            }
        }
        let mine = |bounded: bool| {
            let env = StreamExecutionEnvironment::new();
            let stream = if bounded {
                env.add_bounded_source("Mine", |_| One)
            } else {
                env.add_source("Mine", |_| One)
            };
            stream.discard();
            env.into_graph().job_graph("t", 1).unwrap()
        };
        assert!(mine(true).resolve_mode(Automatic).batch);
        assert!(!mine(false).resolve_mode(Automatic).batch);
    }
}
