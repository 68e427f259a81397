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

use crate::api::stream_graph::InputProcessor;
use crate::api::stream_graph::{AnyBox, NodeKind, StreamGraph};
use crate::api::{
    ProcessingTimeService, RuntimeContext, SnapshotContext, SnapshotStorage, SourceHooks,
    StateInit, StreamExecutionEnvironment, TaskControl, TaskError, now_ms,
};
use crate::checkpoint::SubtaskState;
use crate::common::ids::{ExecutionId, PartitionId};
use crate::network::buffer::CheckpointBarrier;
use crate::network::buffer::IoCounters;
use crate::network::channel::RemoteChannels;
use crate::network::gate::{GateEvent, InputGate};
use crate::network::registry::{PartitionRegistry, Subpartition};
use crate::network::spill::SpillWriter;
use crate::network::valve::TimeSignal;
use crate::network::writer::{RecordWriter, RecordWriterHandle, Spill};
use crate::rpc::messages::{
    ChannelDeployment, ExecutionState, TaskDeployment, TaskMetrics, TmToJm,
};
use crate::state::StateStorage;

/// How long a task whose channel broke waits for a cancellation before it reports the failure.
const SECONDARY_FAILURE_GRACE: Duration = Duration::from_millis(500);

/// What every task of a TaskManager shares.
pub(crate) struct TaskServices {
    pub(crate) resource_id: String,
    pub(crate) registry: Arc<PartitionRegistry>,
    pub(crate) remote: Option<Arc<dyn RemoteChannels>>,
    pub(crate) segment_size: usize,
    /// How many network buffers a task's partitions and remote channels hold.
    pub(crate) buffer_shares: crate::network::budget::BufferShares,
    pub(crate) buffer_timeout: Duration,
    /// How the OS schedules task threads.
    pub(crate) scheduling_policy: crate::threads::SchedulingPolicy,
    /// The TaskManager's network memory, in buffers.
    pub(crate) budget: Arc<crate::network::budget::BufferBudget>,
    /// How long a consumer waits for a producer on this TaskManager to be deployed.
    pub(crate) partition_wait: Duration,
    /// The TaskManager's local working directory for state (RocksDB instances).
    pub(crate) local_state_dir: std::path::PathBuf,
    /// Where checkpoints are written.
    pub(crate) storage: Arc<dyn StateStorage>,
    /// How batch jobs' blocking partitions are written (their files go to a `shuffle` folder of
    /// the local state directory, removed with it).
    pub(crate) spill: crate::network::spill::SpillSettings,
    /// Per slot, the memory its subtasks' RocksDB instances share; empty without a budget.
    pub(crate) rocks_memory: Vec<Arc<crate::state::RocksMemory>>,
    /// A slot's share of managed memory: what a batch aggregation's table may fill before it
    /// spills to disk.
    pub(crate) managed_memory_per_slot: u64,
    /// The programs this TaskManager can run subtasks of.
    pub(crate) programs: Arc<crate::api::ProgramRegistry>,
}

/// A running task as the TaskManager sees it.
pub(crate) struct TaskHandle {
    pub(crate) cancelled: Arc<AtomicBool>,
    pub(crate) counters: Arc<IoCounters>,
    /// Checkpoint triggers and notifications for the task's thread.
    pub(crate) control: flume::Sender<TaskControl>,
}

/// Reports a task's end: its execution, final state, failure cause and metrics.
pub(crate) type Reporter =
    Box<dyn Fn(ExecutionId, ExecutionState, Option<String>, TaskMetrics) + Send>;

/// Sends a checkpoint acknowledgement or decline to the JobManager.
pub(crate) type Acknowledger = Box<dyn Fn(TmToJm) + Send>;

pub(crate) fn metrics_of(c: &IoCounters) -> TaskMetrics {
    let (input_queue_length, in_pool_usage_permille) = c.input_queues();
    TaskMetrics {
        records_in: c.records_in.load(Ordering::Relaxed),
        bytes_in: c.bytes_in.load(Ordering::Relaxed),
        records_out: c.records_out.load(Ordering::Relaxed),
        bytes_out: c.bytes_out.load(Ordering::Relaxed),
        back_pressured_ms: c.back_pressured_nanos.load(Ordering::Relaxed) / 1_000_000,
        idle_ms: c.idle_nanos.load(Ordering::Relaxed) / 1_000_000,
        busy_ms: busy_nanos(c) / 1_000_000,
        out_pool_usage_permille: c.out_pool_usage_permille(),
        in_pool_usage_permille,
        input_queue_length,
        current_input_watermark: c.input_watermark.get(),
        current_output_watermark: c.output_watermark.get(),
        late_records_dropped: c.late_records_dropped.load(Ordering::Relaxed),
        state_size: c.state_size.load(Ordering::Relaxed),
    }
}

/// Flink's busy time: the time since processing started less the time spent idle (waiting for
/// input) and back-pressured (waiting for room downstream).
fn busy_nanos(c: &IoCounters) -> u64 {
    c.running_nanos()
        .saturating_sub(c.idle_nanos.load(Ordering::Relaxed))
        .saturating_sub(c.back_pressured_nanos.load(Ordering::Relaxed))
}

/// A deployment with its input gates expanded into channels (from the producer groups the
/// JobManager sent).
pub(crate) struct Assignment {
    /// What to run.
    pub deployment: TaskDeployment,
    /// Per input gate, its channels.
    pub inputs: Vec<Vec<ChannelDeployment>>,
}

/// Starts a task's thread. `report` is called once with RUNNING and once with the final state.
pub(crate) fn spawn(
    assignment: Assignment,
    services: Arc<TaskServices>,
    report: Reporter,
    acknowledge: Acknowledger,
) -> std::io::Result<TaskHandle> {
    let cancelled = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(IoCounters::default());
    let (control_tx, control) = flume::unbounded();
    let handle = TaskHandle {
        cancelled: cancelled.clone(),
        counters: counters.clone(),
        control: control_tx,
    };
    let deployment = &assignment.deployment;
    let execution = deployment.execution;
    let name = format!(
        "task v{} {}/{}",
        execution.vertex, execution.subtask, execution.attempt
    );
    std::thread::Builder::new().name(name).spawn(move || {
        let deployment = &assignment.deployment;
        services.scheduling_policy.apply_to_current_thread();
        info!(%execution, slot = deployment.slot, "task started");
        let local_dir = services.local_state_dir.join(format!(
            "{}-v{}-s{}-a{}",
            deployment.execution.job,
            deployment.execution.vertex,
            deployment.execution.subtask,
            deployment.execution.attempt
        ));
        let checkpoints = Checkpoints {
            control,
            acknowledge,
            execution,
            storage: services.storage.clone(),
            file_prefix: format!(
                "sub{}-att{}",
                deployment.execution.subtask, deployment.execution.attempt
            ),
            memory_threshold: deployment.state.memory_threshold,
            enabled: deployment.state.checkpointing,
            counters: counters.clone(),
        };
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run(
                &assignment,
                &services,
                &cancelled,
                &counters,
                &report,
                checkpoints,
                &local_dir,
            )
        }));
        counters.stop_running();
        // The subtask's local state (RocksDB instances) is of no use once it ended.
        let _ = std::fs::remove_dir_all(&local_dir);
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
            Some(e) => warn!(%execution, error = %crate::common::log_text::clip(&e.to_string()), "task failed"),
            None => info!(%execution, state = state.name(), "task ended"),
        }
        report(execution, state, error, metrics_of(&counters));
    })?;
    Ok(handle)
}

/// The task's side of checkpointing: messages from the JobMaster, acknowledgements back.
struct Checkpoints {
    control: flume::Receiver<TaskControl>,
    acknowledge: Acknowledger,
    execution: ExecutionId,
    storage: Arc<dyn StateStorage>,
    file_prefix: String,
    /// `state.storage.fs.memory-threshold`.
    memory_threshold: u64,
    enabled: bool,
    /// The task's counters, for the size of its latest snapshot.
    counters: Arc<IoCounters>,
}

impl Checkpoints {
    fn snapshot_storage(&self) -> SnapshotStorage<'_> {
        SnapshotStorage {
            storage: self.storage.as_ref(),
            file_prefix: &self.file_prefix,
            memory_threshold: self.memory_threshold,
        }
    }

    fn acknowledge(&self, checkpoint_id: u64, state: Result<SubtaskState, String>) {
        let execution = self.execution;
        (self.acknowledge)(match state {
            Ok(state) => {
                self.counters
                    .state_size
                    .store(state.full_size(), Ordering::Relaxed);
                TmToJm::AcknowledgeCheckpoint {
                    execution,
                    checkpoint_id,
                    state,
                }
            }
            Err(reason) => {
                warn!(%execution, checkpoint_id, %reason, "declining a checkpoint");
                TmToJm::DeclineCheckpoint {
                    execution,
                    checkpoint_id,
                    reason,
                }
            }
        });
    }

    /// Snapshots the chain behind `processor` for `barrier` and acknowledges; a failure to
    /// snapshot declines the checkpoint and the task goes on, unless it is being torn down.
    fn snapshot(
        &self,
        processor: &mut dyn InputProcessor,
        barrier: &Arc<CheckpointBarrier>,
    ) -> Result<(), TaskError> {
        let mut snap = SnapshotContext::new(barrier, self.snapshot_storage());
        let result = processor.snapshot(&mut snap);
        match result {
            Ok(()) => {
                self.acknowledge(barrier.id(), Ok(snap.into_state()));
                Ok(())
            }
            Err(e @ (TaskError::Cancelled | TaskError::Network(_))) => Err(e),
            Err(e) => {
                self.acknowledge(barrier.id(), Err(e.to_string()));
                Ok(())
            }
        }
    }
}

struct Hooks {
    writers: Vec<RecordWriterHandle>,
    counters: Arc<IoCounters>,
    cancelled: Arc<AtomicBool>,
    timeout: Duration,
    last_flush: Instant,
    checkpoints: Checkpoints,
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
    fn control(&mut self) -> Option<TaskControl> {
        self.checkpoints.control.try_recv().ok()
    }
    fn wait_control(&mut self, timeout: Duration) -> Option<TaskControl> {
        self.checkpoints.control.recv_timeout(timeout).ok()
    }
    fn idled(&mut self, elapsed: Duration) {
        let nanos = elapsed.as_nanos().min(u64::MAX as u128) as u64;
        self.counters.idle_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
    fn acknowledge(&mut self, checkpoint_id: u64, state: Result<SubtaskState, String>) {
        self.checkpoints.acknowledge(checkpoint_id, state);
    }
    fn storage(&self) -> SnapshotStorage<'_> {
        self.checkpoints.snapshot_storage()
    }
    fn checkpointing(&self) -> bool {
        self.checkpoints.enabled
    }
}

impl Hooks {
    fn cancelled(&self) -> Result<(), TaskError> {
        if self.cancelled.load(Ordering::Relaxed) {
            Err(TaskError::Cancelled)
        } else {
            Ok(())
        }
    }

    fn until_flush(&self) -> Duration {
        self.timeout
            .saturating_sub(self.last_flush.elapsed())
            .max(Duration::from_millis(1))
    }
}

fn run(
    assignment: &Assignment,
    services: &TaskServices,
    cancelled: &Arc<AtomicBool>,
    counters: &Arc<IoCounters>,
    report: &Reporter,
    checkpoints: Checkpoints,
    local_dir: &std::path::Path,
) -> Result<(), TaskError> {
    let (d, inputs) = (&assignment.deployment, &assignment.inputs);
    let program = services.programs.find(&d.program.name).ok_or_else(|| {
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
    let mut job = graph
        .job_graph(&d.job_name, d.default_parallelism)
        .map_err(|e| TaskError::Setup(e.to_string()))?
        .resolve_mode(d.program.runtime_mode);
    if let Some(parallelism) = &d.vertex_parallelism {
        job = job
            .rescaled(parallelism)
            .map_err(|e| TaskError::Setup(e.to_string()))?;
    }
    if job.fingerprint() != d.fingerprint {
        return Err(TaskError::Setup(
            "the job graph rebuilt on this TaskManager differs from the JobManager's (different sluice versions?)".into(),
        ));
    }
    let vertex = job
        .vertices
        .get(d.execution.vertex as usize)
        .ok_or_else(|| TaskError::Setup(format!("the job has no vertex {}", d.execution.vertex)))?;
    if d.outputs.len() != vertex.outputs.len() || inputs.len() != vertex.inputs.len() {
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
        operator_id: vertex.nodes[0] as u32,
        state: Arc::new(StateInit {
            backend: d
                .state
                .backend
                .parse()
                .map_err(|e: crate::state::StateError| TaskError::Setup(e.to_string()))?,
            incremental: d.state.incremental,
            rocks_memory: services.rocks_memory.get(d.slot as usize).cloned(),
            managed_memory: services.managed_memory_per_slot,
            local_dir: local_dir.to_path_buf(),
            storage: services.storage.clone(),
            restore: d.state.restore.clone(),
            checkpointing: d.state.checkpointing,
            key_hash: d.state.key_hash,
        }),
        timers: Default::default(),
        auto_watermark_interval: Duration::from_millis(d.auto_watermark_interval_ms),
        counters: counters.clone(),
    };

    // Reserve every buffer this task can hold before anything is created (see network::budget).
    let shares = services.buffer_shares;
    let output_buffers: usize = d
        .outputs
        .iter()
        .map(|o| shares.partition_pool(o.subpartitions as usize))
        .sum();
    let is_remote = |c: &ChannelDeployment| c.location.resource_id != services.resource_id;
    // Per input gate, its remote channels and the credit of each.
    let remote_per_gate: Vec<usize> = inputs
        .iter()
        .map(|gate| gate.iter().filter(|c| is_remote(c)).count())
        .collect();
    let remote_credits: Vec<usize> = remote_per_gate
        .iter()
        .map(|&n| shares.remote_credit(n))
        .collect();
    let input_buffers: usize = remote_per_gate
        .iter()
        .zip(&remote_credits)
        .map(|(n, credit)| n * credit)
        .sum();
    let _reservation = services
        .budget
        .reserve(output_buffers + input_buffers)
        .map_err(TaskError::Setup)?;

    // Result partitions: one bounded queue per subpartition, registered for consumers.
    let mut writers_by_stream_edge = HashMap::new();
    let mut writers = Vec::new();
    for (k, (&edge, out)) in vertex.outputs.iter().zip(&d.outputs).enumerate() {
        let id = PartitionId {
            producer: d.execution,
            output: k as u32,
        };
        if job.batch {
            // A blocking partition: written to disk, served once the task finished.
            let file = format!(
                "{}-{}-{}-{}-out{k}",
                d.execution.job, d.execution.vertex, d.execution.subtask, d.execution.attempt
            );
            let spill = SpillWriter::create(&services.spill, &file, out.subpartitions as usize)
                .map_err(|source| TaskError::Io {
                    context: format!(
                        "creating a blocking partition in {}",
                        services.spill.dir.display()
                    ),
                    source,
                })?;
            let writer = Rc::new(RefCell::new(RecordWriter::blocking(
                Spill {
                    writer: Some(spill),
                    registry: services.registry.clone(),
                    id,
                },
                out.subpartitions as usize,
                services.segment_size,
                shares.partition_pool(out.subpartitions as usize),
                out.consumer_max_parallelism,
                cancelled.clone(),
                counters.clone(),
            )));
            writers_by_stream_edge.insert(job.edges[edge].stream_edge, writer.clone());
            writers.push(writer);
            continue;
        }
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..out.subpartitions)
            .map(|_| flume::bounded(shares.subpartition_queue(out.subpartitions as usize)))
            .unzip();
        let local_readers: Vec<_> = receivers
            .iter()
            .map(|_| Arc::new(AtomicBool::new(false)))
            .collect();
        services.registry.register(
            id,
            receivers
                .into_iter()
                .zip(&local_readers)
                .map(|(queue, local_reader)| Subpartition {
                    queue: Some(queue),
                    local_reader: local_reader.clone(),
                })
                .collect(),
        );
        let writer = Rc::new(RefCell::new(RecordWriter::new(
            senders,
            local_readers,
            services.segment_size,
            shares.partition_pool(out.subpartitions as usize),
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
    let has_network_outputs = !writers.is_empty();
    let mut hooks = Hooks {
        writers,
        counters: counters.clone(),
        cancelled: cancelled.clone(),
        // Batch jobs' buffers ship when full: nobody reads them before the task ends.
        timeout: if job.batch {
            Duration::MAX
        } else {
            services.buffer_timeout
        },
        last_flush: Instant::now(),
        checkpoints,
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
            counters.start_running();
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
            let processor = decoder(op);
            // A two-input operator: which of its inputs (0 or 1) each input gate feeds, by
            // the stream edge the gate's job edge comes from.
            let head_inputs = &graph.nodes[head].inputs;
            let two_inputs = head_inputs.len() == 2;
            let gate_inputs: Vec<usize> = vertex
                .inputs
                .iter()
                .map(|&e| {
                    let stream_edge = job.edges[e].stream_edge;
                    head_inputs
                        .iter()
                        .position(|&s| s == stream_edge)
                        .unwrap_or(0)
                })
                .collect();
            let mut channels = Vec::new();
            let mut names = Vec::new();
            let mut channel_inputs = Vec::new();
            let gates = inputs.iter().zip(&remote_credits).zip(&gate_inputs);
            let per_channel = gates.flat_map(|((gate, credit), input)| {
                gate.iter().map(move |channel| (channel, credit, *input))
            });
            for (channel, &credit, input) in per_channel {
                channel_inputs.push(input);
                names.push(format!(
                    "{} on {} ({})",
                    channel.partition, channel.location.resource_id, channel.location.data_address
                ));
                let rx = if !is_remote(channel) {
                    let is_cancelled = || cancelled.load(Ordering::Relaxed);
                    services
                        .registry
                        .take(
                            channel.partition,
                            channel.subpartition,
                            true,
                            services.partition_wait,
                            &is_cancelled,
                        )
                        .map_err(|e| TaskError::Setup(e.to_string()))?
                } else {
                    let remote = services.remote.as_ref().ok_or_else(|| {
                        TaskError::Setup("no data-plane transport for a remote channel".into())
                    })?;
                    remote.open(channel, credit, cancelled.clone())?
                };
                channels.push(rx);
            }
            let mut gate = if two_inputs {
                InputGate::two_inputs(channels, names, &channel_inputs)
            } else {
                InputGate::new(channels, names)
            };
            gate.set_exactly_once(d.state.exactly_once);
            gate.count_idle_time_in(counters.clone());
            report(
                d.execution,
                ExecutionState::Running,
                None,
                TaskMetrics::default(),
            );
            counters.start_running();
            let mut input = Input {
                gate,
                processor,
                two_inputs,
                counters,
                // Whether records arrived since the last snapshot.
                dirty: true,
                last_snapshot: None,
                last_completed: None,
            };
            if let Err(e) = input.run(&mut hooks, &ctx.timers) {
                return Err(input.ending(&mut hooks, e));
            }
            input.processor.finish()?;
            // The end of input may emit (windows of processing time fire, batch aggregates
            // go out), after the last barrier this task saw.
            input.dirty = true;
            // Waiting for the final checkpoint is neither busy nor idle on input.
            counters.stop_running();
            if hooks.checkpoints.enabled && !has_network_outputs {
                // A sink commits on checkpoint completion: stay until a checkpoint covering
                // everything this task wrote has completed (Flink's final checkpoint).
                input.await_final_checkpoint(&mut hooks)?;
            }
            Ok(())
        }
    }
}

/// The input side of a running operator task: the gate, the chain behind it, checkpoints.
struct Input<'a> {
    gate: InputGate,
    processor: Box<dyn InputProcessor>,
    /// The processor is a two-input operator's: tell it each buffer's input.
    two_inputs: bool,
    counters: &'a Arc<IoCounters>,
    /// Whether the chain may have emitted since the last snapshot (records, time, the end of
    /// input): a sink then waits for a checkpoint that covers it.
    dirty: bool,
    last_snapshot: Option<u64>,
    last_completed: Option<u64>,
}

impl Input<'_> {
    fn snapshot(
        &mut self,
        hooks: &Hooks,
        barrier: &Arc<CheckpointBarrier>,
    ) -> Result<(), TaskError> {
        hooks.checkpoints.snapshot(&mut *self.processor, barrier)?;
        self.dirty = false;
        self.last_snapshot = Some(barrier.id());
        Ok(())
    }

    /// The task ends with `error`. Cancelled (the error may also be an input its cancelled
    /// producer closed), it first commits what checkpoints that completed before the
    /// cancellation cover: a stop with a savepoint notifies the savepoint's completion just
    /// before it cancels, and the sinks' output up to the savepoint becomes visible then, not
    /// only when a job resumes from it.
    fn ending(&mut self, hooks: &mut Hooks, error: TaskError) -> TaskError {
        if hooks.cancelled().is_err() {
            while let Some(message) = hooks.control() {
                if let TaskControl::Complete(id) = message
                    && let Err(e) = self.processor.checkpoint_complete(id)
                {
                    return e;
                }
            }
        }
        error
    }

    /// Handles the checkpoint messages waiting for this task.
    fn control(
        &mut self,
        hooks: &mut Hooks,
        message: TaskControl,
    ) -> Result<Option<u64>, TaskError> {
        match message {
            TaskControl::Trigger(barrier) => {
                if let Some(GateEvent::Barrier(b)) = self.gate.inject(barrier) {
                    self.snapshot(hooks, &b)?;
                }
                Ok(None)
            }
            TaskControl::Complete(id) => {
                self.processor.checkpoint_complete(id)?;
                self.last_completed = self.last_completed.max(Some(id));
                Ok(Some(id))
            }
            TaskControl::Aborted(id) => {
                tracing::debug!(checkpoint = id, "checkpoint aborted");
                Ok(None)
            }
        }
    }

    /// Reads and processes the inputs until every channel has ended.
    fn run(&mut self, hooks: &mut Hooks, timers: &ProcessingTimeService) -> Result<(), TaskError> {
        loop {
            let mut wait = hooks.until_flush().min(Duration::from_millis(100));
            if let Some(deadline) = timers.next_deadline() {
                let until = deadline.saturating_sub(now_ms()).max(0) as u64;
                wait = wait.min(Duration::from_millis(until));
            }
            match self.gate.next(wait) {
                GateEvent::Buffer(buf) => {
                    if self.two_inputs {
                        self.processor.select_input(self.gate.last_input());
                    }
                    self.counters
                        .bytes_in
                        .fetch_add(buf.len() as u64, Ordering::Relaxed);
                    let n = self.processor.process(&buf, buf.produced_here())?;
                    self.counters.records_in.fetch_add(n, Ordering::Relaxed);
                    self.dirty = true;
                }
                GateEvent::Batch(mut batch) => {
                    if self.two_inputs {
                        self.processor.select_input(self.gate.last_input());
                    }
                    self.counters
                        .bytes_in
                        .fetch_add(batch.bytes as u64, Ordering::Relaxed);
                    let records = std::mem::replace(&mut batch.records, Box::new(()));
                    let n = self.processor.process_batch(records)?;
                    self.counters.records_in.fetch_add(n, Ordering::Relaxed);
                    self.dirty = true;
                    // Dropping the batch now gives its pool buffer back to the producer.
                    drop(batch);
                }
                GateEvent::Barrier(barrier) => self.snapshot(hooks, &barrier)?,
                GateEvent::Time(signal) => {
                    if let TimeSignal::Watermark(w) = signal {
                        self.counters.input_watermark.set(w);
                    }
                    self.processor.time(signal)?;
                    // Event-time windows and timers emit on watermarks: the final one comes
                    // after the sources' last barrier.
                    self.dirty = true;
                }
                GateEvent::Aborted(id) => {
                    hooks
                        .checkpoints
                        .acknowledge(id, Err(crate::checkpoint::overtaken_reason(id)));
                }
                GateEvent::Timeout => {}
                GateEvent::Finished => return Ok(()),
                GateEvent::Broken(i) => {
                    return Err(TaskError::Network(format!(
                        "lost the input channel from {}",
                        self.gate.channel_name(i)
                    )));
                }
            }
            hooks.tick()?;
            if timers.next_deadline().is_some() {
                let now = now_ms();
                if timers.take_due(now) {
                    self.processor.processing_time(now)?;
                    self.dirty = true;
                }
            }
            while let Some(message) = hooks.control() {
                self.control(hooks, message)?;
            }
        }
    }

    /// After the end of input: take a snapshot if records came since the last one, and wait
    /// until a checkpoint at or after that snapshot completes.
    fn await_final_checkpoint(&mut self, hooks: &mut Hooks) -> Result<(), TaskError> {
        loop {
            let covered = !self.dirty
                && self
                    .last_snapshot
                    .is_some_and(|s| self.last_completed.is_some_and(|c| c >= s));
            if covered {
                return Ok(());
            }
            if let Err(e) = hooks.cancelled() {
                return Err(self.ending(hooks, e));
            }
            if let Some(message) = hooks.wait_control(Duration::from_millis(50)) {
                self.control(hooks, message)?;
            }
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
            NodeKind::Operator(factory) => {
                let ctx = RuntimeContext {
                    operator_id: node as u32,
                    ..self.ctx.clone()
                };
                factory(&ctx, outputs)
            }
            NodeKind::Source(_) => Err(TaskError::Setup(
                "a source cannot be chained behind another operator".into(),
            )),
        }
    }
}
