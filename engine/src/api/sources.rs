//! Sources: where records enter a job. Bounded ones end by themselves; unbounded ones run until
//! the job is cancelled.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::checkpointing::{SnapshotContext, SnapshotStorage, TaskControl};
use super::context::RuntimeContext;
use super::operators::Output;
use crate::checkpoint::{StateDistribution, SubtaskState};
use crate::common::error::TaskError;
use crate::network::buffer::CheckpointBarrier;
use crate::network::valve::TimeSignal;
use crate::state::StateStorage;

/// How a running task lets a source flush buffers on time, notice cancellation and take part
/// in checkpoints.
pub(crate) trait SourceHooks {
    /// Called often by the source context: flush output buffers that are due and fail with
    /// [`TaskError::Cancelled`] once cancelled.
    fn tick(&mut self) -> Result<(), TaskError>;
    /// The next checkpoint message for this task, if one is waiting.
    fn control(&mut self) -> Option<TaskControl>;
    /// Waits up to `timeout` for a checkpoint message.
    fn wait_control(&mut self, timeout: Duration) -> Option<TaskControl>;
    /// Reports a snapshot (or why it failed) to the JobMaster.
    fn acknowledge(&mut self, checkpoint_id: u64, state: Result<SubtaskState, String>);
    /// Where snapshot files go, the prefix that makes this subtask attempt's names unique, and
    /// when operator state goes to a file.
    fn storage(&self) -> SnapshotStorage<'_>;
    /// Whether the job is checkpointed.
    fn checkpointing(&self) -> bool;
    /// The source paused for `elapsed` with nothing to emit (counted as idle time).
    fn idled(&mut self, _elapsed: Duration) {}
}

/// How many records a source collects before passing them on together: a batch small enough
/// that a slow source's records do not wait (they also go when the source waits, see
/// [`SourceContext::idle`]), large enough that the chain's dynamic calls are a small share.
const SOURCE_BATCH: usize = 64;

/// What a source uses to emit records and to take part in checkpoints.
pub struct SourceContext<'a, T> {
    pub(crate) out: &'a mut dyn Output<T>,
    pub(crate) runtime: &'a RuntimeContext,
    pub(crate) hooks: &'a mut dyn SourceHooks,
    /// Records collected and not yet passed on: they go downstream together, every
    /// [`SOURCE_BATCH`] records and before anything else happens (a barrier, a wait, the end).
    pub(crate) batch: Vec<T>,
    /// A triggered checkpoint the source has not yet reached a snapshot point for.
    pub(crate) pending: Option<Arc<CheckpointBarrier>>,
    /// The latest checkpoint that completed since the source last asked.
    completed: Option<u64>,
    /// How the source's operator state is dealt on restore ([`SourceContext::use_union_state`]).
    distribution: StateDistribution,
}

impl<'a, T> SourceContext<'a, T> {
    pub(crate) fn new(
        out: &'a mut dyn Output<T>,
        runtime: &'a RuntimeContext,
        hooks: &'a mut dyn SourceHooks,
    ) -> Self {
        SourceContext {
            out,
            runtime,
            hooks,
            batch: Vec::with_capacity(SOURCE_BATCH),
            pending: None,
            completed: None,
            distribution: StateDistribution::Split,
        }
    }

    /// Emits one record downstream. Blocks while downstream is backpressured.
    #[inline]
    pub fn collect(&mut self, record: T) -> Result<(), TaskError> {
        self.batch.push(record);
        if self.batch.len() >= SOURCE_BATCH {
            self.poll()?;
        }
        Ok(())
    }

    /// Passes the collected records on.
    pub(crate) fn flush(&mut self) -> Result<(), TaskError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.out.push_batch(&mut self.batch)
    }

    /// Passes the collected records on, flushes due buffers, notices cancellation, calls the
    /// chain when a processing-time deadline is due and takes in checkpoint messages.
    fn poll(&mut self) -> Result<(), TaskError> {
        self.flush()?;
        self.tick()?;
        // The clock is read only while some operator waits for a deadline.
        if self.runtime.timers.next_deadline().is_some() {
            let now = super::context::now_ms();
            if self.runtime.timers.take_due(now) {
                self.out.processing_time(now)?;
            }
        }
        while let Some(message) = self.hooks.control() {
            self.handle(message)?;
        }
        Ok(())
    }

    /// The hooks' tick. Cancelled, the chain first commits what checkpoints that completed
    /// before the cancellation cover (a stop with a savepoint notifies its completion just
    /// before it cancels: the output up to the savepoint becomes visible then).
    fn tick(&mut self) -> Result<(), TaskError> {
        match self.hooks.tick() {
            Err(TaskError::Cancelled) => {
                while let Some(message) = self.hooks.control() {
                    if let TaskControl::Complete(id) = message {
                        self.out.checkpoint_complete(id)?;
                    }
                }
                Err(TaskError::Cancelled)
            }
            other => other,
        }
    }

    fn handle(&mut self, message: TaskControl) -> Result<(), TaskError> {
        match message {
            TaskControl::Trigger(barrier) => {
                if self.pending.as_ref().is_none_or(|p| p.id() < barrier.id()) {
                    self.pending = Some(barrier);
                }
                Ok(())
            }
            TaskControl::Complete(id) => {
                self.completed = self.completed.max(Some(id));
                self.out.checkpoint_complete(id)
            }
            TaskControl::Aborted(id) => {
                tracing::debug!(checkpoint = id, "checkpoint aborted");
                Ok(())
            }
        }
    }

    /// Sends an event-time signal downstream after the records collected so far: a source
    /// that makes its own watermarks (one per split, [`super::time::SplitWatermarks`]) emits
    /// them with this.
    pub(crate) fn emit_time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        self.flush()?;
        self.out.time(signal)
    }

    /// Whether a checkpoint waits for this source to call [`SourceContext::snapshot_point`].
    pub fn checkpoint_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The id of the checkpoint waiting for [`SourceContext::snapshot_point`], if any (a source
    /// that commits something when that checkpoint completes keeps it under this id).
    pub fn pending_checkpoint_id(&self) -> Option<u64> {
        self.pending.as_ref().map(|b| b.id())
    }

    /// The latest checkpoint that completed since the last call (Flink's
    /// `notifyCheckpointComplete` for sources): a source commits what that checkpoint took,
    /// e.g. Kafka offsets to the consumer group. Earlier completions are subsumed by it.
    pub fn take_completed_checkpoint(&mut self) -> Option<u64> {
        self.completed.take()
    }

    /// A point between two records where the source's position is consistent: if a checkpoint
    /// is pending, `state` (the source's operator state, e.g. its offsets) is taken into the
    /// checkpoint and the barrier goes downstream. Checkpointed sources call this regularly,
    /// typically after every record; it costs a branch when no checkpoint is pending.
    pub fn snapshot_point(
        &mut self,
        state: impl FnOnce() -> Vec<Vec<u8>>,
    ) -> Result<(), TaskError> {
        match self.pending.take() {
            Some(barrier) => self.snapshot(&barrier, state()),
            None => Ok(()),
        }
    }

    /// Snapshots the chain with `state` as the source's operator state and acknowledges. A
    /// draining barrier (a stop with drain) first sends the watermark to the end of time, so
    /// that every event-time window and timer downstream fires before the snapshot.
    pub(crate) fn snapshot(
        &mut self,
        barrier: &Arc<CheckpointBarrier>,
        state: Vec<Vec<u8>>,
    ) -> Result<(), TaskError> {
        self.flush()?;
        if barrier.drain {
            self.out.time(TimeSignal::Watermark(i64::MAX))?;
        }
        let mut snap = SnapshotContext::new(barrier, self.hooks.storage());
        let result = snap
            .set_operator_state(self.runtime.operator_id, state, self.distribution)
            .and_then(|()| self.out.snapshot(&mut snap));
        let state = snap.into_state();
        match result {
            Ok(()) => {
                self.hooks.acknowledge(barrier.id(), Ok(state));
                Ok(())
            }
            Err(e @ (TaskError::Cancelled | TaskError::Network(_))) => Err(e),
            Err(e) => {
                // The checkpoint fails; the job goes on (up to the tolerable failures).
                self.hooks.acknowledge(barrier.id(), Err(e.to_string()));
                Ok(())
            }
        }
    }

    /// The source has emitted everything: with checkpointing, wait for the next checkpoint and
    /// take it with an empty state (nothing left to emit), so that a restore of any later
    /// checkpoint knows this source is done; then the caller ends the outputs.
    pub(crate) fn final_checkpoint(&mut self) -> Result<(), TaskError> {
        self.flush()?;
        if !self.hooks.checkpointing() {
            return Ok(());
        }
        loop {
            self.tick()?;
            if let Some(barrier) = self.pending.take() {
                return self.snapshot(&barrier, Vec::new());
            }
            if let Some(message) = self.hooks.wait_control(Duration::from_millis(50)) {
                self.handle(message)?;
            }
        }
    }

    /// The operator state this source instance was restored with: `None` on a fresh start,
    /// `Some` (possibly empty: nothing left to emit) when restored from a checkpoint. With a
    /// changed parallelism the elements of all former instances, in subtask order, are split
    /// into contiguous ranges, one per new instance. Fails when a checkpoint file holding the
    /// elements is missing or damaged.
    pub fn restored_state(&self) -> Result<Option<Vec<Vec<u8>>>, TaskError> {
        self.runtime.restored_operator_state()
    }

    /// Declares the source's operator state union list state (Flink's `getUnionListState`):
    /// the snapshots it takes from now on (the final one of a finished source too) are restored
    /// whole into every subtask, at any parallelism, instead of being split among them. The
    /// source keeps what is its own: each element should say whose it is (a Kafka position
    /// names its partition). Call it before the first snapshot point.
    pub fn use_union_state(&mut self) {
        self.distribution = StateDistribution::Union;
    }

    /// How [`SourceContext::restored_state`] was dealt: `None` on a fresh start; `Union` when
    /// the snapshot recorded union state (every subtask's elements), `Split` for a share (also
    /// every snapshot taken before the source used union state).
    pub fn restored_distribution(&self) -> Option<StateDistribution> {
        self.runtime.restored_operator_distribution()
    }

    /// Waits `duration` while keeping output flushed and cancellation noticed; a rate-limited
    /// source calls this instead of sleeping. Returns early when a checkpoint is pending, so the
    /// source can reach its snapshot point.
    pub fn idle(&mut self, duration: Duration) -> Result<(), TaskError> {
        let until = Instant::now() + duration;
        loop {
            self.poll()?;
            let now = Instant::now();
            if now >= until || self.pending.is_some() {
                return Ok(());
            }
            let pause = (until - now).min(Duration::from_millis(20));
            std::thread::sleep(pause);
            self.hooks.idled(now.elapsed());
        }
    }

    /// The subtask this source instance runs in.
    pub fn runtime(&self) -> &RuntimeContext {
        self.runtime
    }
}

/// A user-defined source. One instance runs per parallel subtask; it should read only its own
/// share of the input (see [`RuntimeContext::subtask_index`]). A checkpointed source keeps its
/// position as operator state: it starts from [`SourceContext::restored_state`] when restored
/// and calls [`SourceContext::snapshot_point`] between records.
pub trait SourceFunction<T>: 'static {
    /// Emits records; returns when a bounded input is exhausted.
    fn run(&mut self, ctx: &mut SourceContext<'_, T>) -> Result<(), TaskError>;
}

/// A source's position as operator state: the arithmetic progressions `start, start + step, ...`
/// (below `end`) it has still to emit, in order. Each progression is one state element, so a
/// restore at another parallelism deals them out to the new subtasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Progressions(std::collections::VecDeque<(u64, u64, u64)>);

impl Progressions {
    /// The restored progressions, or `fresh` on a first start. Every number the source emits
    /// lies below `total`.
    pub(crate) fn restore_or<T>(
        ctx: &SourceContext<'_, T>,
        total: u64,
        fresh: impl FnOnce() -> Vec<(u64, u64, u64)>,
    ) -> Result<Self, TaskError> {
        let list = match ctx.restored_state()? {
            None => fresh(),
            Some(elements) => elements
                .iter()
                .map(|e| Self::decode(e, total))
                .collect::<Result<_, _>>()?,
        };
        Ok(Progressions(
            list.into_iter().filter(|(s, e, _)| s < e).collect(),
        ))
    }

    /// One restored element. Only what [`Self::encode`] writes is accepted (24 bytes, a
    /// non-empty progression with a positive step, within `total`): anything else is state this
    /// source never wrote, and restoring it would skip or invent input silently.
    fn decode(element: &[u8], total: u64) -> Result<(u64, u64, u64), TaskError> {
        let b: [u8; 24] = element.try_into().map_err(|_| {
            TaskError::State(format!(
                "cannot restore the source: a position is 24 bytes, the restored one has {}",
                element.len()
            ))
        })?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        let (start, end, step) = (word(0), word(1), word(2));
        if step == 0 || start >= end || end > total {
            return Err(TaskError::State(format!(
                "cannot restore the source: the restored position (start {start}, end {end}, \
                 step {step}) is not one it writes for an input of {total}"
            )));
        }
        Ok((start, end, step))
    }

    /// The next number to emit, without consuming it.
    pub(crate) fn peek(&self) -> Option<u64> {
        self.0.front().map(|(s, _, _)| *s)
    }

    /// Consumes the next number.
    pub(crate) fn advance(&mut self) {
        if let Some((start, end, step)) = self.0.front_mut() {
            *start = start.saturating_add(*step);
            if *start >= *end {
                self.0.pop_front();
            }
        }
    }

    /// The operator state: one 24-byte element per progression.
    pub(crate) fn encode(&self) -> Vec<Vec<u8>> {
        self.0
            .iter()
            .map(|(s, e, step)| [s.to_le_bytes(), e.to_le_bytes(), step.to_le_bytes()].concat())
            .collect()
    }

    /// Emits `item(n)` for every remaining number, with a snapshot point after each.
    fn emit_all<T>(
        &mut self,
        ctx: &mut SourceContext<'_, T>,
        mut item: impl FnMut(u64) -> Option<T>,
    ) -> Result<(), TaskError> {
        while let Some(n) = self.peek() {
            self.advance();
            if let Some(record) = item(n) {
                ctx.collect(record)?;
            }
            ctx.snapshot_point(|| self.encode())?;
        }
        Ok(())
    }
}

/// Emits every `parallelism`-th element of a collection, starting at the subtask's index.
pub(crate) struct CollectionSource<T> {
    pub(crate) items: Arc<Vec<T>>,
}

impl<T: Clone + 'static> SourceFunction<T> for CollectionSource<T> {
    fn run(&mut self, ctx: &mut SourceContext<'_, T>) -> Result<(), TaskError> {
        let (index, parallelism) = (
            ctx.runtime.subtask_index as u64,
            ctx.runtime.parallelism as u64,
        );
        let len = self.items.len() as u64;
        let mut todo = Progressions::restore_or(ctx, len, || vec![(index, len, parallelism)])?;
        let items = self.items.clone();
        todo.emit_all(ctx, |i| items.get(i as usize).cloned())
    }
}

/// The part `[start, end)` of `0..total` that subtask `index` of `parallelism` owns.
pub(crate) fn split_range(total: u64, index: u32, parallelism: u32) -> (u64, u64) {
    let share = |i: u64| ((total as u128 * i as u128) / parallelism as u128) as u64;
    (share(index as u64), share(index as u64 + 1))
}

/// The numbers `from..=to`, split into contiguous ranges across subtasks.
pub(crate) struct SequenceSource {
    pub(crate) from: u64,
    pub(crate) to: u64,
}

impl SourceFunction<u64> for SequenceSource {
    fn run(&mut self, ctx: &mut SourceContext<'_, u64>) -> Result<(), TaskError> {
        if self.to < self.from {
            return Ok(());
        }
        let total = self.to - self.from + 1;
        let (start, end) = split_range(total, ctx.runtime.subtask_index, ctx.runtime.parallelism);
        let mut todo = Progressions::restore_or(ctx, total, || vec![(start, end, 1)])?;
        let from = self.from;
        todo.emit_all(ctx, |n| Some(from + n))
    }
}
/// Lines of a text file or of every visible file in a directory, on any file system the
/// subtask's storage reaches (a local path, an `hdfs://` URI). The files' bytes are split into
/// one contiguous range per subtask; a line belongs to the subtask whose range holds its first
/// byte, so every line is read exactly once whatever the parallelism.
pub(crate) struct TextFileSource {
    pub(crate) path: PathBuf,
}

/// `path` as the storage path the file-system layer takes (a local path or an `hdfs://` URI);
/// an error naming it when it is not UTF-8.
pub(crate) fn storage_path(path: &Path) -> Result<&str, TaskError> {
    path.to_str().ok_or_else(|| {
        TaskError::State(format!(
            "the path {} is not UTF-8, which the file systems cannot name",
            path.display()
        ))
    })
}

/// The files a text source reads, with their lengths: the path itself, or a directory's
/// visible files (names not starting with `.` or `_`) in name order.
pub(crate) fn list_input_files(
    storage: &dyn StateStorage,
    path: &str,
) -> Result<Vec<(String, u64)>, TaskError> {
    let status = |p: &str| {
        storage
            .status(p)
            .map_err(|e| TaskError::io(format!("cannot read input {p}"), e))
    };
    let info = status(path)?.ok_or_else(|| {
        TaskError::io(
            format!("cannot read input {path}"),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    if !info.is_dir {
        return Ok(vec![(path.to_string(), info.len)]);
    }
    let names = storage
        .list(path)
        .map_err(|e| TaskError::io(format!("cannot list input directory {path}"), e))?;
    let dir = path.trim_end_matches('/');
    let mut files = Vec::new();
    for name in names.into_iter().filter(|n| !n.starts_with(['.', '_'])) {
        let file = format!("{dir}/{name}");
        // An entry gone since the listing is no input.
        if let Some(info) = status(&file)?.filter(|i| !i.is_dir) {
            files.push((file, info.len));
        }
    }
    files.sort();
    Ok(files)
}

impl SourceFunction<String> for TextFileSource {
    fn run(&mut self, ctx: &mut SourceContext<'_, String>) -> Result<(), TaskError> {
        let storage = ctx.runtime.state.storage.clone();
        let files = list_input_files(storage.as_ref(), storage_path(&self.path)?)?;
        let total: u64 = files.iter().map(|(_, len)| len).sum();
        let (start, end) = split_range(total, ctx.runtime.subtask_index, ctx.runtime.parallelism);
        // The position: byte ranges (of all files' bytes in order) whose line starts are due.
        let mut todo = Progressions::restore_or(ctx, total, || vec![(start, end, 1)])?;
        while let Some((start, end, _)) = todo.0.pop_front() {
            let mut file_start = 0u64;
            for (path, len) in &files {
                let file_end = file_start + len;
                if file_end > start && file_start < end {
                    let from = start.saturating_sub(file_start);
                    let to = end.min(file_end) - file_start;
                    let input = LineRange { path, from, to };
                    read_lines(storage.as_ref(), input, ctx, |next_line| {
                        // After a line, the rest of this range and the ranges after it.
                        let mut rest = todo.clone();
                        rest.0.push_front((file_start + next_line, end, 1));
                        rest.0.retain(|(s, e, _)| s < e);
                        rest.encode()
                    })?;
                }
                file_start = file_end;
            }
        }
        Ok(())
    }
}

/// The lines of the file `path` whose first byte lies in `[from, to)`.
struct LineRange<'a> {
    path: &'a str,
    from: u64,
    to: u64,
}

/// Emits the lines of `input`, read as a stream from `storage`; `position(p)` is the source's
/// state when the next line starts at byte `p` of the file.
fn read_lines(
    storage: &dyn StateStorage,
    input: LineRange<'_>,
    ctx: &mut SourceContext<'_, String>,
    position: impl Fn(u64) -> Vec<Vec<u8>>,
) -> Result<(), TaskError> {
    let LineRange { path, from, to } = input;
    let err = |e| TaskError::io(format!("cannot read input {path}"), e);
    // A line that started before our range belongs to the previous subtask: start at the byte
    // before the range and skip to that line's end.
    let file = storage
        .open_read(path, from.saturating_sub(1))
        .map_err(err)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut pos = from;
    let mut line = Vec::new();
    if from > 0 {
        pos = from - 1 + reader.read_until(b'\n', &mut line).map_err(err)? as u64;
        line.clear();
    }
    while pos < to {
        let n = reader.read_until(b'\n', &mut line).map_err(err)?;
        if n == 0 {
            break;
        }
        pos += n as u64;
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        ctx.collect(String::from_utf8_lossy(&line).into_owned())?;
        line.clear();
        ctx.snapshot_point(|| position(pos))?;
    }
    Ok(())
}

/// An unbounded (or `count`-bounded) generator: subtask `i` of `p` produces the global indices
/// `i, i + p, i + 2p, ...` at `rate / p` records per second (`rate` 0: as fast as possible).
pub(crate) struct GeneratorSource<F> {
    pub(crate) rate: u64,
    pub(crate) count: Option<u64>,
    pub(crate) f: Arc<F>,
}

impl<T, F: Fn(u64) -> T + 'static> SourceFunction<T> for GeneratorSource<F> {
    fn run(&mut self, ctx: &mut SourceContext<'_, T>) -> Result<(), TaskError> {
        let (index, parallelism) = (
            ctx.runtime.subtask_index as u64,
            ctx.runtime.parallelism as u64,
        );
        let end = self.count.unwrap_or(u64::MAX);
        let mut todo = Progressions::restore_or(ctx, end, || vec![(index, end, parallelism)])?;
        let per_subtask_rate = self.rate as f64 / parallelism as f64;
        let started = Instant::now();
        let mut n = 0u64;
        while let Some(global) = todo.peek() {
            if per_subtask_rate > 0.0 {
                // Emit in small bursts, then wait until the schedule catches up.
                let due = Duration::from_secs_f64(n as f64 / per_subtask_rate);
                let elapsed = started.elapsed();
                if due > elapsed {
                    ctx.idle(due - elapsed)?;
                    ctx.snapshot_point(|| todo.encode())?;
                }
            }
            todo.advance();
            ctx.collect((self.f)(global))?;
            ctx.snapshot_point(|| todo.encode())?;
            n += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operators::testing::Collect;
    use std::cell::RefCell;
    use std::fs::File;
    use std::io::Write;
    use std::rc::Rc;

    struct NoHooks;
    impl SourceHooks for NoHooks {
        fn tick(&mut self) -> Result<(), TaskError> {
            Ok(())
        }
        fn control(&mut self) -> Option<TaskControl> {
            None
        }
        fn wait_control(&mut self, _timeout: Duration) -> Option<TaskControl> {
            None
        }
        fn acknowledge(&mut self, _id: u64, _state: Result<SubtaskState, String>) {}
        fn storage(&self) -> SnapshotStorage<'_> {
            SnapshotStorage {
                storage: &crate::state::LocalFileStorage,
                file_prefix: "test",
                memory_threshold: u64::MAX,
            }
        }
        fn checkpointing(&self) -> bool {
            false
        }
    }

    fn run_all<T: 'static>(
        make: impl Fn() -> Box<dyn SourceFunction<T>>,
        parallelism: u32,
    ) -> Vec<Vec<T>> {
        (0..parallelism)
            .map(|i| {
                let got = Rc::new(RefCell::new(Vec::new()));
                let mut out = Collect(got.clone(), Rc::new(RefCell::new(false)));
                let runtime = RuntimeContext::standalone(i, parallelism);
                let mut hooks = NoHooks;
                let mut ctx = SourceContext::new(&mut out, &runtime, &mut hooks);
                make().run(&mut ctx).unwrap();
                ctx.flush().unwrap();
                got.take()
            })
            .collect()
    }

    /// Triggers checkpoint 1 after `after` ticks and keeps what the source acknowledges.
    struct TriggerOnce {
        ticks: u32,
        after: u32,
        fired: bool,
        acked: Rc<RefCell<Option<SubtaskState>>>,
    }

    impl SourceHooks for TriggerOnce {
        fn tick(&mut self) -> Result<(), TaskError> {
            self.ticks += 1;
            Ok(())
        }
        fn control(&mut self) -> Option<TaskControl> {
            if self.ticks < self.after || self.fired {
                return None;
            }
            self.fired = true;
            Some(TaskControl::Trigger(Arc::new(CheckpointBarrier {
                timestamp: 0,
                location: crate::state::SnapshotLocation {
                    checkpoint_id: 1,
                    kind: crate::state::SnapshotKind::Checkpoint,
                    dir: "/unused".into(),
                    shared_dir: None,
                },
                drain: false,
            })))
        }
        fn wait_control(&mut self, _timeout: Duration) -> Option<TaskControl> {
            self.control()
        }
        fn acknowledge(&mut self, _id: u64, state: Result<SubtaskState, String>) {
            *self.acked.borrow_mut() = Some(state.unwrap());
        }
        fn storage(&self) -> SnapshotStorage<'_> {
            SnapshotStorage {
                storage: &crate::state::LocalFileStorage,
                file_prefix: "test",
                memory_threshold: u64::MAX,
            }
        }
        fn checkpointing(&self) -> bool {
            true
        }
    }

    /// Collects records until the barrier passes; what follows is lost in the "failure".
    struct UntilBarrier<T>(Rc<RefCell<Vec<T>>>, bool);

    impl<T> Output<T> for UntilBarrier<T> {
        fn push(&mut self, record: T) -> Result<(), TaskError> {
            if !self.1 {
                self.0.borrow_mut().push(record);
            }
            Ok(())
        }
        fn finish(&mut self) -> Result<(), TaskError> {
            Ok(())
        }
        fn snapshot(&mut self, _snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
            self.1 = true;
            Ok(())
        }
        fn checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<(), TaskError> {
            Ok(())
        }
        fn time(&mut self, _signal: crate::network::valve::TimeSignal) -> Result<(), TaskError> {
            Ok(())
        }
        fn processing_time(&mut self, _now: i64) -> Result<(), TaskError> {
            Ok(())
        }
    }

    /// Runs `p1` instances until a checkpoint after `after` ticks, then restores the snapshot
    /// into `p2` instances that run to the end; everything emitted before the barriers and
    /// after the restore, together.
    fn run_restored<T: 'static>(
        make: impl Fn() -> Box<dyn SourceFunction<T>>,
        p1: u32,
        p2: u32,
        after: u32,
    ) -> Vec<T> {
        let mut emitted = Vec::new();
        let mut states = Vec::new();
        for i in 0..p1 {
            let got = Rc::new(RefCell::new(Vec::new()));
            let acked = Rc::new(RefCell::new(None));
            let mut out = UntilBarrier(got.clone(), false);
            let runtime = RuntimeContext::standalone(i, p1);
            let mut hooks = TriggerOnce {
                ticks: 0,
                after,
                fired: false,
                acked: acked.clone(),
            };
            let mut ctx = SourceContext::new(&mut out, &runtime, &mut hooks);
            make().run(&mut ctx).unwrap();
            ctx.flush().unwrap();
            if acked.borrow().is_none() {
                // The source ended before the trigger: its final checkpoint takes it.
                ctx.final_checkpoint().unwrap();
            }
            emitted.extend(got.take());
            let mut state = acked.take().expect("the source took the checkpoint");
            states.push(state.operators.remove(&0).expect("the source's state"));
        }
        // Split as a restore does.
        let shares = crate::checkpoint::assign::split_operator_state(states.iter(), p2);
        for (i, share) in shares.into_iter().enumerate() {
            let mine: Vec<Vec<u8>> = share
                .into_iter()
                .flat_map(|slice| match slice {
                    crate::checkpoint::OperatorStateSlice::Inline(inline) => inline,
                    other => panic!("the test's hooks keep operator state inline: {other:?}"),
                })
                .collect();
            emitted.extend(run_with_restored_state(&mut *make(), mine, i as u32, p2).unwrap());
        }
        emitted
    }

    /// Runs `source` as subtask `subtask` of `parallelism` restored with `elements` as its
    /// operator state.
    fn run_with_restored_state<T: 'static>(
        source: &mut (impl SourceFunction<T> + ?Sized),
        elements: Vec<Vec<u8>>,
        subtask: u32,
        parallelism: u32,
    ) -> Result<Vec<T>, TaskError> {
        let got = Rc::new(RefCell::new(Vec::new()));
        let mut out = Collect(got.clone(), Rc::new(RefCell::new(false)));
        let mut runtime = RuntimeContext::standalone(subtask, parallelism);
        runtime.state = Arc::new(crate::api::StateInit {
            restore: Some(crate::checkpoint::TaskRestore {
                checkpoint_id: 1,
                metadata_dir: "/unused".into(),
                operators: [(
                    0,
                    crate::checkpoint::OperatorRestore {
                        distribution: Default::default(),
                        operator_state: vec![crate::checkpoint::OperatorStateSlice::Inline(
                            elements,
                        )],
                        keyed: Vec::new(),
                    },
                )]
                .into(),
            }),
            ..crate::api::StateInit::in_memory()
        });
        let mut hooks = NoHooks;
        let mut ctx = SourceContext::new(&mut out, &runtime, &mut hooks);
        source.run(&mut ctx)?;
        ctx.flush()?;
        Ok(got.take())
    }

    /// Operator state a source never wrote used to be accepted (a step of 0 became 1, an empty
    /// or out-of-input range was dropped), so the job finished without its input.
    #[test]
    fn garbage_source_state_fails_the_restore_instead_of_finishing_silently() {
        let position = |s: u64, e: u64, step: u64| {
            [s.to_le_bytes(), e.to_le_bytes(), step.to_le_bytes()].concat()
        };
        let sequence = || SequenceSource { from: 1, to: 100 };
        // What the source writes restores.
        assert_eq!(
            run_with_restored_state(&mut sequence(), vec![position(97, 100, 1)], 0, 1).unwrap(),
            vec![98, 99, 100]
        );
        for garbage in [
            vec![b"garbage".to_vec()],
            vec![position(5, 10, 0)],
            vec![position(10, 5, 1)],
            vec![position(0, 1_000_000, 1)],
            vec![position(97, 100, 1), vec![0xff; 24]],
        ] {
            let err = run_with_restored_state(&mut sequence(), garbage.clone(), 0, 1).unwrap_err();
            assert!(
                matches!(&err, TaskError::State(m) if m.contains("cannot restore the source")),
                "{garbage:?}: {err}"
            );
        }
    }

    #[test]
    fn sources_resume_from_their_snapshot_at_another_parallelism_without_loss_or_repeat() {
        for (p1, p2, after) in [(2, 3, 3), (3, 1, 1), (1, 2, 10), (4, 4, 2)] {
            let mut got = run_restored(
                || {
                    Box::new(GeneratorSource {
                        rate: 0,
                        count: Some(5_000),
                        f: Arc::new(|i| i),
                    })
                },
                p1,
                p2,
                after,
            );
            got.sort();
            assert_eq!(got, (0..5_000).collect::<Vec<_>>(), "generator {p1}->{p2}");
            let mut got = run_restored(
                || Box::new(SequenceSource { from: 1, to: 3_000 }),
                p1,
                p2,
                after,
            );
            got.sort();
            assert_eq!(got, (1..=3_000).collect::<Vec<_>>(), "sequence {p1}->{p2}");
            let items = Arc::new((0..2_000u32).collect::<Vec<_>>());
            let mut got = run_restored(
                move || {
                    Box::new(CollectionSource {
                        items: items.clone(),
                    })
                },
                p1,
                p2,
                after,
            );
            got.sort();
            assert_eq!(got, (0..2_000).collect::<Vec<_>>(), "collection {p1}->{p2}");
        }
        let dir = tempfile::tempdir().unwrap();
        let mut expected = Vec::new();
        for f in 0..2 {
            let mut file = File::create(dir.path().join(format!("f{f}"))).unwrap();
            for l in 0..700 {
                let line = format!("f{f} l{l}");
                writeln!(file, "{line}").unwrap();
                expected.push(line);
            }
        }
        expected.sort();
        for (p1, p2) in [(2, 3), (3, 2), (1, 1)] {
            let path = dir.path().to_path_buf();
            let mut got = run_restored(
                move || Box::new(TextFileSource { path: path.clone() }),
                p1,
                p2,
                4,
            );
            got.sort();
            assert_eq!(got, expected, "text {p1}->{p2}");
        }
    }

    #[test]
    fn text_files_split_into_every_line_exactly_once_at_any_parallelism() {
        let dir = tempfile::tempdir().unwrap();
        let mut expected = Vec::new();
        for f in 0..3 {
            let mut file = File::create(dir.path().join(format!("part-{f}"))).unwrap();
            for l in 0..(50 + f * 37) {
                let line = format!("file {f} line {l} {}", "x".repeat(l % 13));
                writeln!(file, "{line}").unwrap();
                expected.push(line);
            }
        }
        // No trailing newline on a last line is still a line.
        std::fs::write(dir.path().join("part-9"), "last\r\nno newline").unwrap();
        expected.extend(["last".to_string(), "no newline".to_string()]);
        std::fs::write(dir.path().join(".hidden"), "ignored\n").unwrap();
        expected.sort();
        for p in [1, 2, 3, 7, 64] {
            let path = dir.path().to_path_buf();
            let mut all: Vec<String> =
                run_all(move || Box::new(TextFileSource { path: path.clone() }), p).concat();
            all.sort();
            assert_eq!(all, expected, "parallelism {p}");
        }
    }

    #[test]
    fn sequence_and_collection_split_without_loss() {
        for p in [1, 3, 8] {
            let mut all = run_all(|| Box::new(SequenceSource { from: 5, to: 104 }), p).concat();
            all.sort();
            assert_eq!(all, (5..=104).collect::<Vec<_>>());
            let items = Arc::new((0..10).collect::<Vec<u32>>());
            let mut all = run_all(
                move || {
                    Box::new(CollectionSource {
                        items: items.clone(),
                    })
                },
                p,
            )
            .concat();
            all.sort();
            assert_eq!(all, (0..10).collect::<Vec<_>>());
        }
    }

    #[test]
    fn bounded_generator_emits_each_index_once() {
        let mut all = run_all(
            || {
                Box::new(GeneratorSource {
                    rate: 0,
                    count: Some(100),
                    f: Arc::new(|i| i),
                })
            },
            3,
        )
        .concat();
        all.sort();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn missing_input_names_the_path() {
        let err = list_input_files(&crate::state::LocalFileStorage, "/no/such/input").unwrap_err();
        assert!(err.to_string().contains("/no/such/input"), "{err}");
    }
}
