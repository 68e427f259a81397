//! A task: one parallel subtask of one vertex, running its operator chain in its own thread.
//!
//! The thread rebuilds the job's stream graph from the program and its arguments, checks that
//! the job graph it derives is the one the JobManager scheduled, creates the result partitions it
//! writes, connects its input channels (in memory for producers on this TaskManager, over QUIC
//! for the others), and then runs the chain until its input ends or it is cancelled.

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::api::{RuntimeContext, SourceHooks, StreamExecutionEnvironment, TaskError};
use crate::examples;
use crate::graph::{AnyBox, NodeKind, StreamGraph};
use crate::ids::{ExecutionId, PartitionId};
use crate::network::buffer::{IoCounters, NetBuffer};
use crate::network::gate::{GateEvent, InputGate};
use crate::network::registry::PartitionRegistry;
use crate::network::writer::{RecordWriter, RecordWriterHandle};
use crate::rpc::messages::{ExecutionState, TaskDeployment, TaskMetrics};

/// Fetches a subpartition from another TaskManager (the QUIC client).
pub(crate) trait RemoteChannels: Send + Sync {
    /// Starts reading `channel` and returns the queue its buffers arrive in.
    fn open(
        &self,
        channel: &crate::rpc::messages::ChannelDeployment,
        capacity: usize,
        cancelled: Arc<AtomicBool>,
    ) -> Result<flume::Receiver<NetBuffer>, TaskError>;
}

/// How long a task whose channel broke waits for a cancellation before it reports the failure.
const SECONDARY_FAILURE_GRACE: Duration = Duration::from_millis(500);

/// What every task of a TaskManager shares.
pub(crate) struct TaskServices {
    pub(crate) resource_id: String,
    pub(crate) registry: Arc<PartitionRegistry>,
    pub(crate) remote: Option<Arc<dyn RemoteChannels>>,
    pub(crate) segment_size: usize,
    pub(crate) buffers_per_channel: usize,
    pub(crate) floating_buffers_per_gate: usize,
    pub(crate) buffer_timeout: Duration,
    /// The TaskManager's network memory, in buffers.
    pub(crate) budget: Arc<crate::network::budget::BufferBudget>,
    /// How long a consumer waits for a producer on this TaskManager to be deployed.
    pub(crate) partition_wait: Duration,
}

/// A running task as the TaskManager sees it.
pub(crate) struct TaskHandle {
    pub(crate) cancelled: Arc<AtomicBool>,
    pub(crate) counters: Arc<IoCounters>,
}

/// Reports a task's end: its execution, final state, failure cause and metrics.
pub(crate) type Reporter =
    Box<dyn Fn(ExecutionId, ExecutionState, Option<String>, TaskMetrics) + Send>;

pub(crate) fn metrics_of(c: &IoCounters) -> TaskMetrics {
    TaskMetrics {
        records_in: c.records_in.load(Ordering::Relaxed),
        bytes_in: c.bytes_in.load(Ordering::Relaxed),
        records_out: c.records_out.load(Ordering::Relaxed),
        bytes_out: c.bytes_out.load(Ordering::Relaxed),
        back_pressured_ms: c.back_pressured_nanos.load(Ordering::Relaxed) / 1_000_000,
    }
}

/// Starts a task's thread. `report` is called once with RUNNING and once with the final state.
pub(crate) fn spawn(
    deployment: TaskDeployment,
    services: Arc<TaskServices>,
    report: Reporter,
) -> std::io::Result<TaskHandle> {
    let cancelled = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(IoCounters::default());
    let handle = TaskHandle {
        cancelled: cancelled.clone(),
        counters: counters.clone(),
    };
    let execution = deployment.execution;
    let name = format!(
        "task v{} {}/{}",
        execution.vertex, execution.subtask, execution.attempt
    );
    std::thread::Builder::new().name(name).spawn(move || {
        info!(%execution, slot = deployment.slot, "task started");
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run(&deployment, &services, &cancelled, &counters, &report)
        }));
        if let Ok(Err(e)) = &outcome
            && e.is_secondary()
        {
            // A broken channel is usually the echo of a failure elsewhere (a peer task failed,
            // a TaskManager died). Give the JobMaster a moment to hear the cause first and
            // cancel this task, so the job's exception shows the root cause, not the echo.
            let until = Instant::now() + SECONDARY_FAILURE_GRACE;
            while Instant::now() < until && !cancelled.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let (state, error) = match outcome {
            Ok(Ok(())) => (ExecutionState::Finished, None),
            Ok(Err(TaskError::Cancelled)) => (ExecutionState::Canceled, None),
            Ok(Err(_)) | Err(_) if cancelled.load(Ordering::Relaxed) => {
                (ExecutionState::Canceled, None)
            }
            Ok(Err(e)) => (ExecutionState::Failed, Some(e.to_string())),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic without a message".into());
                (
                    ExecutionState::Failed,
                    Some(format!("user code panicked: {msg}")),
                )
            }
        };
        if state != ExecutionState::Finished {
            // Unclaimed subpartitions of a failed or cancelled producer must not linger.
            services.registry.release_producer(execution);
        }
        match &error {
            Some(e) => warn!(%execution, error = %e, "task failed"),
            None => info!(%execution, state = state.name(), "task ended"),
        }
        report(execution, state, error, metrics_of(&counters));
    })?;
    Ok(handle)
}

struct Hooks {
    writers: Vec<RecordWriterHandle>,
    cancelled: Arc<AtomicBool>,
    timeout: Duration,
    last_flush: Instant,
}

impl SourceHooks for Hooks {
    fn tick(&mut self) -> Result<(), TaskError> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(TaskError::Cancelled);
        }
        let now = Instant::now();
        if now.duration_since(self.last_flush) >= self.timeout {
            self.last_flush = now;
            for w in &self.writers {
                w.borrow_mut().flush_all()?;
            }
        }
        Ok(())
    }
}

impl Hooks {
    fn until_flush(&self) -> Duration {
        self.timeout
            .saturating_sub(self.last_flush.elapsed())
            .max(Duration::from_millis(1))
    }
}

fn run(
    d: &TaskDeployment,
    services: &TaskServices,
    cancelled: &Arc<AtomicBool>,
    counters: &Arc<IoCounters>,
    report: &Reporter,
) -> Result<(), TaskError> {
    let program = examples::find(&d.program.name).ok_or_else(|| {
        TaskError::Setup(format!(
            "this TaskManager does not know the program '{}'",
            d.program.name
        ))
    })?;
    let env = StreamExecutionEnvironment::new();
    program
        .build(&env, &d.program.args)
        .map_err(TaskError::Setup)?;
    let graph = env.into_graph();
    let job = graph
        .job_graph(&d.job_name, d.default_parallelism)
        .map_err(|e| TaskError::Setup(e.to_string()))?;
    if job.fingerprint() != d.fingerprint {
        return Err(TaskError::Setup(
            "the job graph rebuilt on this TaskManager differs from the JobManager's (different sluice versions?)".into(),
        ));
    }
    let vertex = job
        .vertices
        .get(d.execution.vertex as usize)
        .ok_or_else(|| TaskError::Setup(format!("the job has no vertex {}", d.execution.vertex)))?;
    if d.outputs.len() != vertex.outputs.len() || d.inputs.len() != vertex.inputs.len() {
        return Err(TaskError::Setup(
            "the deployment's inputs or outputs do not match the job graph".into(),
        ));
    }
    let ctx = RuntimeContext {
        task_name: format!(
            "{} ({}/{})",
            vertex.name,
            d.execution.subtask + 1,
            vertex.parallelism
        ),
        subtask_index: d.execution.subtask,
        parallelism: vertex.parallelism,
        max_parallelism: vertex.max_parallelism,
        attempt: d.execution.attempt,
        batch: job.batch,
        cancelled: cancelled.clone(),
    };

    // Reserve every buffer this task can hold before anything is created (see network::budget).
    let per_channel = services.buffers_per_channel.max(1);
    let total_channels = d.inputs.iter().map(Vec::len).sum::<usize>().max(1);
    // A remote channel's queue: its exclusive buffers plus a fair share of the gate's floating ones.
    let remote_capacity = per_channel + services.floating_buffers_per_gate.div_ceil(total_channels);
    // Per subpartition: its queue, the buffer being filled, and one a sender holds while it
    // waits for credit.
    let output_buffers: usize = d
        .outputs
        .iter()
        .map(|o| o.subpartitions as usize * (per_channel + 2))
        .sum();
    let remote_channels = d
        .inputs
        .iter()
        .flatten()
        .filter(|c| c.location.resource_id != services.resource_id)
        .count();
    let _reservation = services
        .budget
        .reserve(output_buffers + remote_channels * remote_capacity)
        .map_err(TaskError::Setup)?;

    // Result partitions: one bounded queue per subpartition, registered for consumers.
    let mut writers_by_stream_edge = HashMap::new();
    let mut writers = Vec::new();
    for (k, (&edge, out)) in vertex.outputs.iter().zip(&d.outputs).enumerate() {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..out.subpartitions)
            .map(|_| flume::bounded(services.buffers_per_channel.max(1)))
            .unzip();
        services.registry.register(
            PartitionId {
                producer: d.execution,
                output: k as u32,
            },
            receivers,
        );
        let writer = Rc::new(RefCell::new(RecordWriter::new(
            senders,
            services.segment_size,
            out.consumer_max_parallelism,
            cancelled.clone(),
            counters.clone(),
        )));
        writers_by_stream_edge.insert(job.edges[edge].stream_edge, writer.clone());
        writers.push(writer);
    }

    let head = vertex.nodes[0];
    let chain = Chain {
        graph: &graph,
        ctx: &ctx,
        writers: &writers_by_stream_edge,
    };
    let outputs = chain.outputs_of(head)?;
    let mut hooks = Hooks {
        writers,
        cancelled: cancelled.clone(),
        timeout: services.buffer_timeout,
        last_flush: Instant::now(),
    };

    match &graph.nodes[head].kind {
        NodeKind::Source(factory) => {
            let mut source = factory(&ctx, outputs)?;
            report(
                d.execution,
                ExecutionState::Running,
                None,
                TaskMetrics::default(),
            );
            source.run(&mut hooks)
        }
        NodeKind::Operator(factory) => {
            let op = factory(&ctx, outputs)?;
            let decoder = graph.nodes[head].decoder.as_ref().ok_or_else(|| {
                TaskError::Setup(format!(
                    "operator {} cannot read network input",
                    graph.nodes[head].name
                ))
            })?;
            let mut processor = decoder(op);
            let mut channels = Vec::new();
            let mut names = Vec::new();
            for channel in d.inputs.iter().flatten() {
                names.push(format!(
                    "{} on {} ({})",
                    channel.partition, channel.location.resource_id, channel.location.data_address
                ));
                let rx = if channel.location.resource_id == services.resource_id {
                    let is_cancelled = || cancelled.load(Ordering::Relaxed);
                    services
                        .registry
                        .take(
                            channel.partition,
                            channel.subpartition,
                            services.partition_wait,
                            &is_cancelled,
                        )
                        .map_err(|e| TaskError::Setup(e.to_string()))?
                } else {
                    let remote = services.remote.as_ref().ok_or_else(|| {
                        TaskError::Setup("no data-plane transport for a remote channel".into())
                    })?;
                    remote.open(channel, remote_capacity, cancelled.clone())?
                };
                channels.push(rx);
            }
            let mut gate = InputGate::new(channels, names);
            report(
                d.execution,
                ExecutionState::Running,
                None,
                TaskMetrics::default(),
            );
            loop {
                match gate.next(hooks.until_flush().min(Duration::from_millis(100))) {
                    GateEvent::Buffer(buf) => {
                        counters
                            .bytes_in
                            .fetch_add(buf.len() as u64, Ordering::Relaxed);
                        let n = processor.process(&buf)?;
                        counters.records_in.fetch_add(n, Ordering::Relaxed);
                    }
                    GateEvent::Timeout => {}
                    GateEvent::Finished => break,
                    GateEvent::Broken(i) => {
                        return Err(TaskError::Network(format!(
                            "lost the input channel from {}",
                            gate.channel_name(i)
                        )));
                    }
                }
                hooks.tick()?;
            }
            processor.finish()
        }
    }
}

/// Builds the operators of one vertex's chain, from its head downstream.
struct Chain<'a> {
    graph: &'a StreamGraph,
    ctx: &'a RuntimeContext,
    writers: &'a HashMap<usize, RecordWriterHandle>,
}

impl Chain<'_> {
    /// The combined output of `node`: chained successors and network writers.
    fn outputs_of(&self, node: usize) -> Result<AnyBox, TaskError> {
        let mut outs = Vec::new();
        for &e in &self.graph.nodes[node].outputs {
            let edge = &self.graph.edges[e];
            match self.writers.get(&e) {
                Some(writer) => outs.push((edge.writer)(self.ctx, writer.clone())),
                None => outs.push(self.operator(edge.target)?),
            }
        }
        Ok((self.graph.nodes[node].fanout)(outs))
    }

    /// A chained operator, built around its own outputs.
    fn operator(&self, node: usize) -> Result<AnyBox, TaskError> {
        let outputs = self.outputs_of(node)?;
        match &self.graph.nodes[node].kind {
            NodeKind::Operator(factory) => factory(self.ctx, outputs),
            NodeKind::Source(_) => Err(TaskError::Setup(
                "a source cannot be chained behind another operator".into(),
            )),
        }
    }
}
