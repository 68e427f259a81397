//! Process functions on streams that are not keyed (Flink's `ProcessFunction`): each record
//! with its timestamp, the current watermark and processing time, and side outputs. Timers
//! belong to keys (Flink allows them on keyed streams only), so this context has none: key the
//! stream and use a `KeyedProcessFunction` for them.

use super::checkpointing::SnapshotContext;
use super::operators::{BoxOutput, Collector, MAX_BATCH, Output};
use super::side::{OutputTag, SideOutputs};
use crate::common::error::TaskError;
use crate::network::valve::TimeSignal;

/// A function over each record of a stream (Flink's `ProcessFunction`): it may emit any
/// number of records to the main output and to side outputs.
pub trait ProcessFunction<I, O>: 'static {
    /// Handles one record.
    fn process_element(
        &mut self,
        value: I,
        ctx: &mut ProcessContext<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>;
}

/// What a [`ProcessFunction`] knows besides the record (Flink's `ProcessFunction.Context`,
/// without a timer service: timers need a keyed stream).
pub struct ProcessContext<'a> {
    pub(crate) timestamp: Option<i64>,
    pub(super) watermark: i64,
    pub(super) sides: &'a mut SideOutputs,
}

impl ProcessContext<'_> {
    /// The record's event timestamp, if the stream has timestamps.
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }
    /// The operator's input watermark (`i64::MIN` before the first).
    pub fn current_watermark(&self) -> i64 {
        self.watermark
    }
    /// The wall clock, ms since the epoch.
    pub fn current_processing_time(&self) -> i64 {
        super::context::now_ms()
    }
    /// Emits `value` to the side output `tag` (read with `get_side_output(&tag)`), with the
    /// record's timestamp.
    pub fn output<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) -> Result<(), TaskError> {
        self.sides.emit(tag, self.timestamp, value)
    }
}

/// Runs a user's [`ProcessFunction`]: what it emits for a batch goes on together, to the main
/// output and each side output.
pub(crate) struct Process<O, F> {
    pub(crate) function: F,
    /// The input watermark.
    pub(crate) watermark: i64,
    /// What the function emitted for a batch, reused.
    pub(crate) out: Vec<O>,
    pub(crate) next: BoxOutput<O>,
    pub(crate) sides: SideOutputs,
}

impl<O, F> Process<O, F> {
    pub(crate) fn new(function: F, next: BoxOutput<O>, sides: SideOutputs) -> Self {
        Process {
            function,
            watermark: i64::MIN,
            out: Vec::new(),
            next,
            sides,
        }
    }

    fn hand_on(&mut self) -> Result<(), TaskError> {
        self.next.push_batch(&mut self.out)?;
        self.sides.flush()
    }
}

/// Calls `function` for one record.
#[inline]
fn process_one<I, O, F: ProcessFunction<I, O>>(
    op: &mut Process<O, F>,
    record: I,
) -> Result<(), TaskError> {
    let mut ctx = ProcessContext {
        timestamp: None,
        watermark: op.watermark,
        sides: &mut op.sides,
    };
    op.function
        .process_element(record, &mut ctx, &mut Collector::new(&mut op.out))
}

impl<I, O, F: ProcessFunction<I, O>> Output<I> for Process<O, F> {
    fn push(&mut self, record: I) -> Result<(), TaskError> {
        process_one(self, record)?;
        self.hand_on()
    }
    fn push_batch(&mut self, batch: &mut Vec<I>) -> Result<(), TaskError> {
        for record in batch.drain(..) {
            process_one(self, record)?;
            if self.out.len() >= MAX_BATCH {
                self.hand_on()?;
            }
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

/// A user's process function behind a stream with timestamps: it sees each record's
/// timestamp in its context, and what it emits keeps that timestamp.
pub(crate) struct StampedProcessFunction<F, O> {
    pub(crate) function: F,
    /// What the function emitted for one record, reused.
    pub(crate) out: Vec<O>,
}

impl<F: Clone, O> Clone for StampedProcessFunction<F, O> {
    fn clone(&self) -> Self {
        StampedProcessFunction {
            function: self.function.clone(),
            out: Vec::new(),
        }
    }
}

impl<I, O: 'static, F: ProcessFunction<I, O>> ProcessFunction<(i64, I), (i64, O)>
    for StampedProcessFunction<F, O>
{
    fn process_element(
        &mut self,
        (ts, value): (i64, I),
        ctx: &mut ProcessContext<'_>,
        out: &mut Collector<'_, (i64, O)>,
    ) -> Result<(), TaskError> {
        ctx.timestamp = Some(ts);
        self.function
            .process_element(value, ctx, &mut Collector::new(&mut self.out))?;
        for emitted in self.out.drain(..) {
            out.collect((ts, emitted))?;
        }
        Ok(())
    }
}
