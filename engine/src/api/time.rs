//! Event time: how records get their timestamps and how watermarks are made (Flink's
//! `WatermarkStrategy`, `WatermarkGenerator` and the operator behind
//! `assignTimestampsAndWatermarks`).
//!
//! A stream whose timestamps were assigned carries each record as `(timestamp, record)`
//! ([`Stamped`]); the operators after it keep the timestamp with the record (a map's output has
//! its input's timestamp) while user functions see only the record. Watermarks travel the data
//! plane between records, like checkpoint barriers (`crate::network::valve`).

use std::sync::Arc;
use std::time::Duration;

use super::checkpointing::SnapshotContext;
use super::context::{ProcessingTimeService, RuntimeContext};
use super::operators::{BoxOutput, Output};
use crate::common::error::TaskError;
use crate::network::valve::TimeSignal;

/// A record with its event timestamp (ms since the epoch), as it travels a stream whose
/// timestamps were assigned.
pub type Stamped<T> = (i64, T);

/// Where a [`WatermarkGenerator`] emits watermarks and marks its input idle or active (Flink's
/// `WatermarkOutput`).
#[derive(Debug, Default)]
pub struct WatermarkOutput {
    watermark: Option<i64>,
    idle: Option<bool>,
}

impl WatermarkOutput {
    /// Emits a watermark: no record with a timestamp at or below `watermark` follows. One
    /// that does not advance on the last is dropped.
    pub fn emit_watermark(&mut self, watermark: i64) {
        self.watermark = Some(self.watermark.map_or(watermark, |w| w.max(watermark)));
    }
    /// Marks this input idle: its watermarks stop holding downstream time back.
    pub fn mark_idle(&mut self) {
        self.idle = Some(true);
    }
    /// Marks this input active again.
    pub fn mark_active(&mut self) {
        self.idle = Some(false);
    }
}

/// Makes watermarks from the records' timestamps (Flink's `WatermarkGenerator`): called for
/// every record, and periodically every `pipeline.auto-watermark-interval`.
pub trait WatermarkGenerator<T>: Send + 'static {
    /// A record with its assigned timestamp; may emit a watermark at once (punctuated).
    fn on_event(&mut self, record: &T, timestamp: i64, out: &mut WatermarkOutput);
    /// Called periodically; emits the current watermark (periodic).
    fn on_periodic_emit(&mut self, out: &mut WatermarkOutput);
}

/// Watermarks that trail the largest timestamp seen by a fixed bound: records may come up to
/// `bound` out of order (Flink's `BoundedOutOfOrdernessWatermarks`). With a zero bound: for
/// timestamps that never decrease.
#[derive(Clone, Debug)]
pub struct BoundedOutOfOrderness {
    max_timestamp: i64,
    bound: i64,
}

impl BoundedOutOfOrderness {
    /// Allows records `bound` behind the latest one.
    pub fn new(bound: Duration) -> Self {
        let bound = bound.as_millis().min(i64::MAX as u128 / 2) as i64;
        BoundedOutOfOrderness {
            // So that the first watermark, before any record, is the least possible.
            max_timestamp: i64::MIN + bound + 1,
            bound,
        }
    }
}

impl<T> WatermarkGenerator<T> for BoundedOutOfOrderness {
    fn on_event(&mut self, _record: &T, timestamp: i64, _out: &mut WatermarkOutput) {
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }
    fn on_periodic_emit(&mut self, out: &mut WatermarkOutput) {
        out.emit_watermark(self.max_timestamp - self.bound - 1);
    }
}

type MakeGenerator<T> = Arc<dyn Fn() -> Box<dyn WatermarkGenerator<T>> + Send + Sync>;
type Assigner<T> = Arc<dyn Fn(&T, i64) -> i64 + Send + Sync>;

/// How a stream gets timestamps and watermarks (Flink's `WatermarkStrategy`): a watermark
/// generator per subtask, a timestamp assigner, and optionally an idleness timeout.
pub struct WatermarkStrategy<T> {
    generator: MakeGenerator<T>,
    assigner: Option<Assigner<T>>,
    idleness: Option<Duration>,
}

impl<T> Clone for WatermarkStrategy<T> {
    fn clone(&self) -> Self {
        WatermarkStrategy {
            generator: self.generator.clone(),
            assigner: self.assigner.clone(),
            idleness: self.idleness,
        }
    }
}

impl<T: 'static> WatermarkStrategy<T> {
    /// Records arrive at most `bound` out of order: the watermark trails the largest timestamp
    /// seen by `bound`.
    pub fn for_bounded_out_of_orderness(bound: Duration) -> Self {
        Self::for_generator(move || BoundedOutOfOrderness::new(bound))
    }

    /// Timestamps never decrease: the watermark is the largest timestamp seen.
    pub fn for_monotonous_timestamps() -> Self {
        Self::for_bounded_out_of_orderness(Duration::ZERO)
    }

    /// Watermarks from a generator of the user's; `make` creates one per subtask.
    pub fn for_generator<G: WatermarkGenerator<T>>(
        make: impl Fn() -> G + Send + Sync + 'static,
    ) -> Self {
        WatermarkStrategy {
            generator: Arc::new(move || Box::new(make())),
            assigner: None,
            idleness: None,
        }
    }

    /// Timestamps only, no watermarks.
    pub fn no_watermarks() -> Self {
        struct NoWatermarks;
        impl<T> WatermarkGenerator<T> for NoWatermarks {
            fn on_event(&mut self, _: &T, _: i64, _: &mut WatermarkOutput) {}
            fn on_periodic_emit(&mut self, _: &mut WatermarkOutput) {}
        }
        Self::for_generator(|| NoWatermarks)
    }

    /// How a record's timestamp is found: `assigner(record, previous)`, where `previous` is the
    /// timestamp the record had before (`i64::MIN` if none). Without an assigner, records
    /// keep the timestamps they have.
    pub fn with_timestamp_assigner(
        self,
        assigner: impl Fn(&T, i64) -> i64 + Send + Sync + 'static,
    ) -> Self {
        WatermarkStrategy {
            assigner: Some(Arc::new(assigner)),
            ..self
        }
    }

    /// A subtask that sees no record for `timeout` (processing time) marks itself idle, so it
    /// does not hold back the watermark of the operators after it; its next record makes it
    /// active again. Noticed at the periodic watermark calls, so only with a
    /// `pipeline.auto-watermark-interval` above zero.
    pub fn with_idleness(self, timeout: Duration) -> Self {
        WatermarkStrategy {
            idleness: Some(timeout),
            ..self
        }
    }

    /// The operator that applies this strategy to one subtask's records; `split` takes an input
    /// record apart into its previous timestamp and the record.
    pub(crate) fn operator<I>(
        &self,
        ctx: &RuntimeContext,
        split: fn(I) -> Stamped<T>,
        next: BoxOutput<Stamped<T>>,
    ) -> TimestampsAndWatermarks<I, T> {
        let interval = ctx
            .auto_watermark_interval
            .as_millis()
            .min(i64::MAX as u128) as i64;
        let timers = ctx.timers.clone();
        if interval > 0 {
            // At once: the first call starts the periodic schedule.
            timers.request(i64::MIN);
        }
        TimestampsAndWatermarks {
            split,
            assigner: self.assigner.clone(),
            generator: (self.generator)(),
            interval,
            idleness: self
                .idleness
                .map(|d| d.as_millis().min(i64::MAX as u128) as i64),
            timers,
            next_emit: i64::MIN,
            last_active: None,
            saw_records: false,
            emitted: i64::MIN,
            idle: false,
            pending: WatermarkOutput::default(),
            out: Vec::new(),
            next,
        }
    }
}

/// Assigns timestamps and makes watermarks for one subtask (Flink's
/// `TimestampsAndWatermarksOperator`). Watermarks from upstream are dropped — this operator
/// makes the stream's watermarks now — except the final one at the end of input.
pub(crate) struct TimestampsAndWatermarks<I, T> {
    split: fn(I) -> Stamped<T>,
    assigner: Option<Assigner<T>>,
    generator: Box<dyn WatermarkGenerator<T>>,
    /// Periodic emission interval in ms (0: none).
    interval: i64,
    /// Idleness timeout in ms.
    idleness: Option<i64>,
    timers: ProcessingTimeService,
    /// When the generator is asked for its watermark next.
    next_emit: i64,
    /// When records were last seen (processing time, as noticed at a periodic call).
    last_active: Option<i64>,
    /// Records came since the last periodic call.
    saw_records: bool,
    /// The last watermark passed on.
    emitted: i64,
    /// Whether this subtask told downstream it is idle.
    idle: bool,
    /// What the generator emitted and was not yet passed on.
    pending: WatermarkOutput,
    /// The stamped batch, reused.
    out: Vec<Stamped<T>>,
    next: BoxOutput<Stamped<T>>,
}

impl<I, T: 'static> TimestampsAndWatermarks<I, T> {
    /// Passes on what the generator emitted: a watermark that advances, an idleness change.
    fn emit_pending(&mut self) -> Result<(), TaskError> {
        let WatermarkOutput { watermark, idle } = std::mem::take(&mut self.pending);
        if let Some(w) = watermark
            && w > self.emitted
        {
            if self.idle {
                self.idle = false;
                self.next.time(TimeSignal::Active)?;
            }
            self.emitted = w;
            self.next.time(TimeSignal::Watermark(w))?;
        }
        match idle {
            Some(true) if !self.idle => {
                self.idle = true;
                self.next.time(TimeSignal::Idle)
            }
            Some(false) if self.idle => {
                self.idle = false;
                self.next.time(TimeSignal::Active)
            }
            _ => Ok(()),
        }
    }
}

impl<I, T: 'static> Output<I> for TimestampsAndWatermarks<I, T> {
    fn push(&mut self, record: I) -> Result<(), TaskError> {
        let mut batch = vec![record];
        self.push_batch(&mut batch)
    }
    fn push_batch(&mut self, batch: &mut Vec<I>) -> Result<(), TaskError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.saw_records = true;
        if self.idle {
            self.pending.mark_active();
            self.emit_pending()?;
        }
        let (split, assigner, generator, pending) = (
            self.split,
            &self.assigner,
            &mut self.generator,
            &mut self.pending,
        );
        self.out.extend(batch.drain(..).map(|record| {
            let (previous, record) = split(record);
            let timestamp = match assigner {
                Some(assign) => assign(&record, previous),
                None => previous,
            };
            generator.on_event(&record, timestamp, pending);
            (timestamp, record)
        }));
        self.next.push_batch(&mut self.out)?;
        // Watermarks emitted per record go after the batch they follow.
        self.emit_pending()
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        // The end of input is the end of event time: every timer downstream may fire.
        if self.idle {
            self.idle = false;
            self.next.time(TimeSignal::Active)?;
        }
        if self.emitted < i64::MAX {
            self.emitted = i64::MAX;
            self.next.time(TimeSignal::Watermark(i64::MAX))?;
        }
        self.next.finish()
    }
    fn snapshot(&mut self, snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
        self.next.snapshot(snap)
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        self.next.checkpoint_complete(checkpoint_id)
    }
    fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
        // Upstream event time is replaced by this operator's, except the end of time.
        if signal == TimeSignal::Watermark(i64::MAX) && self.emitted < i64::MAX {
            self.emitted = i64::MAX;
            return self.next.time(signal);
        }
        Ok(())
    }
    fn processing_time(&mut self, now: i64) -> Result<(), TaskError> {
        // Periodic work every interval (none at all with interval 0, as in Flink: idleness is
        // noticed at the periodic calls too).
        if self.interval > 0 {
            if now >= self.next_emit {
                if self.saw_records || self.last_active.is_none() {
                    self.last_active = Some(now);
                    self.saw_records = false;
                }
                let idle_now = match (self.idleness, self.last_active) {
                    (Some(timeout), Some(since)) => now.saturating_sub(since) >= timeout,
                    _ => false,
                };
                if idle_now {
                    self.pending.mark_idle();
                } else {
                    self.generator.on_periodic_emit(&mut self.pending);
                }
                self.next_emit = now.saturating_add(self.interval);
                self.emit_pending()?;
            }
            self.timers.request(self.next_emit);
        }
        self.next.processing_time(now)
    }
}

/// Per-split watermarks for a source that reads several splits (Kafka partitions, files)
/// in one subtask (Flink's per-split watermark generation in `SourceOperator`, combined by its
/// `WatermarkOutputMultiplexer`): every split has a generator of its own, made by the
/// strategy, and idles on its own; the subtask's watermark is the least watermark of its
/// active splits, so a split that lags holds the others' time back instead of making their
/// records late. Pure: the caller gives it records, splits and the time, and sends the
/// signals it answers.
pub(crate) struct SplitWatermarks<K, T> {
    strategy: WatermarkStrategy<T>,
    splits: std::collections::BTreeMap<K, SplitClock<T>>,
    /// Periodic emission interval in ms (0: no periodic emission).
    interval: i64,
    idleness: Option<i64>,
    next_emit: i64,
    /// The last watermark sent.
    emitted: i64,
    /// Whether the subtask told downstream it is idle.
    idle: bool,
    /// A generator emitted on an event since the signals were last taken.
    dirty: bool,
}

/// One split's generator and idleness.
struct SplitClock<T> {
    generator: Box<dyn WatermarkGenerator<T>>,
    out: WatermarkOutput,
    /// The split's latest watermark (`i64::MIN` before its first).
    watermark: i64,
    idle: bool,
    saw_records: bool,
    last_active: Option<i64>,
}

impl<K: Ord + Clone, T: 'static> SplitWatermarks<K, T> {
    /// Watermarks made by `strategy` per split, emitted every `interval` (Flink's
    /// `pipeline.auto-watermark-interval`).
    pub(crate) fn new(strategy: WatermarkStrategy<T>, interval: Duration) -> Self {
        SplitWatermarks {
            idleness: strategy
                .idleness
                .map(|d| d.as_millis().min(i64::MAX as u128) as i64),
            strategy,
            splits: Default::default(),
            interval: interval.as_millis().min(i64::MAX as u128) as i64,
            next_emit: i64::MIN,
            emitted: i64::MIN,
            idle: false,
            dirty: false,
        }
    }

    /// The subtask reads `split` from now on (nothing changes if it already did).
    pub(crate) fn add_split(&mut self, split: &K) {
        if !self.splits.contains_key(split) {
            let clock = SplitClock {
                generator: (self.strategy.generator)(),
                out: WatermarkOutput::default(),
                watermark: i64::MIN,
                idle: false,
                saw_records: false,
                last_active: None,
            };
            self.splits.insert(split.clone(), clock);
        }
    }

    /// A record of `split` whose source gave it the timestamp `previous` (`i64::MIN` if none):
    /// returns its timestamp, the strategy's assigner's answer or `previous`.
    pub(crate) fn on_event(&mut self, split: &K, record: &T, previous: i64) -> i64 {
        let timestamp = match &self.strategy.assigner {
            Some(assign) => assign(record, previous),
            None => previous,
        };
        if !self.splits.contains_key(split) {
            self.add_split(split);
        }
        let clock = self.splits.get_mut(split).expect("added");
        clock.saw_records = true;
        if clock.idle {
            clock.idle = false;
            self.dirty = true;
        }
        clock.generator.on_event(record, timestamp, &mut clock.out);
        if clock.out.watermark.is_some() {
            self.dirty = true;
        }
        timestamp
    }

    /// The time is `now` (ms): if the periodic emission is due, every split's generator emits
    /// and splits without records for the idleness timeout go idle. Returns the signals to
    /// send, in order, as [`SplitWatermarks::take_signals`].
    pub(crate) fn on_time(&mut self, now: i64) -> Vec<TimeSignal> {
        if self.interval > 0 && now >= self.next_emit {
            self.next_emit = now.saturating_add(self.interval);
            for clock in self.splits.values_mut() {
                if clock.saw_records || clock.last_active.is_none() {
                    clock.last_active = Some(now);
                    clock.saw_records = false;
                }
                let idle_now = match (self.idleness, clock.last_active) {
                    (Some(timeout), Some(since)) => now.saturating_sub(since) >= timeout,
                    _ => false,
                };
                if idle_now {
                    clock.idle = true;
                } else {
                    clock.generator.on_periodic_emit(&mut clock.out);
                }
            }
            self.dirty = true;
        }
        self.take_signals()
    }

    /// What the splits' watermarks and idleness mean downstream since the last call: a
    /// watermark when the least of the active splits' watermarks advanced; idle when every
    /// split is idle or there is none (a subtask without splits does not hold time back);
    /// active again when a split is. Empty when nothing changed.
    pub(crate) fn take_signals(&mut self) -> Vec<TimeSignal> {
        if !std::mem::take(&mut self.dirty) {
            return Vec::new();
        }
        let mut low: Option<i64> = None;
        for clock in self.splits.values_mut() {
            let WatermarkOutput { watermark, idle } = std::mem::take(&mut clock.out);
            if let Some(w) = watermark {
                clock.watermark = clock.watermark.max(w);
            }
            match idle {
                Some(true) => clock.idle = true,
                Some(false) => clock.idle = false,
                None => {}
            }
            if !clock.idle {
                low = Some(low.map_or(clock.watermark, |l| l.min(clock.watermark)));
            }
        }
        let mut out = Vec::new();
        match low {
            None => {
                if !self.idle {
                    self.idle = true;
                    out.push(TimeSignal::Idle);
                }
            }
            Some(w) => {
                if self.idle {
                    self.idle = false;
                    out.push(TimeSignal::Active);
                }
                if w > self.emitted {
                    self.emitted = w;
                    out.push(TimeSignal::Watermark(w));
                }
            }
        }
        out
    }
}

/// Takes a record without a timestamp apart: it has none yet.
pub(crate) fn unstamped<T>(record: T) -> Stamped<T> {
    (i64::MIN, record)
}

/// Takes a stamped record apart.
pub(crate) fn restamped<T>(record: Stamped<T>) -> Stamped<T> {
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// What reached the end of a chain, in order: records and time signals.
    #[derive(Debug, PartialEq)]
    pub(crate) enum Seen<T> {
        Record(T),
        Time(TimeSignal),
        End,
    }

    pub(crate) struct Record<T>(pub(crate) Rc<RefCell<Vec<Seen<T>>>>);

    impl<T> Output<T> for Record<T> {
        fn push(&mut self, record: T) -> Result<(), TaskError> {
            self.0.borrow_mut().push(Seen::Record(record));
            Ok(())
        }
        fn finish(&mut self) -> Result<(), TaskError> {
            self.0.borrow_mut().push(Seen::End);
            Ok(())
        }
        fn snapshot(&mut self, _snap: &mut SnapshotContext<'_>) -> Result<(), TaskError> {
            Ok(())
        }
        fn checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<(), TaskError> {
            Ok(())
        }
        fn time(&mut self, signal: TimeSignal) -> Result<(), TaskError> {
            self.0.borrow_mut().push(Seen::Time(signal));
            Ok(())
        }
        fn processing_time(&mut self, _now: i64) -> Result<(), TaskError> {
            Ok(())
        }
    }

    fn wm(w: i64) -> Seen<Stamped<u32>> {
        Seen::Time(TimeSignal::Watermark(w))
    }

    type Log = Rc<RefCell<Vec<Seen<Stamped<u32>>>>>;

    fn assigner(
        strategy: WatermarkStrategy<u32>,
        interval_ms: u64,
    ) -> (TimestampsAndWatermarks<u32, u32>, Log, RuntimeContext) {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let mut ctx = RuntimeContext::standalone(0, 1);
        ctx.auto_watermark_interval = Duration::from_millis(interval_ms);
        let op = strategy.operator(&ctx, unstamped, Box::new(Record(seen.clone())));
        (op, seen, ctx)
    }

    #[test]
    fn bounded_out_of_orderness_trails_the_largest_timestamp_and_emits_periodically() {
        let strategy = WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(5))
            .with_timestamp_assigner(|r: &u32, _| *r as i64 * 10);
        let (mut op, seen, ctx) = assigner(strategy, 200);
        assert_eq!(ctx.timers.next_deadline(), Some(i64::MIN), "asks at once");
        assert!(ctx.timers.take_due(1_000));
        op.processing_time(1_000).unwrap();
        assert_eq!(ctx.timers.next_deadline(), Some(1_200));
        op.push_batch(&mut vec![3, 1, 7]).unwrap();
        assert!(!ctx.timers.take_due(1_100));
        assert!(ctx.timers.take_due(1_200));
        op.processing_time(1_200).unwrap();
        op.push_batch(&mut vec![5]).unwrap();
        assert!(ctx.timers.take_due(1_400));
        op.processing_time(1_400).unwrap();
        op.finish().unwrap();
        let got = std::mem::take(&mut *seen.borrow_mut());
        // Before any record the generator's watermark is the least possible: not passed on.
        assert_eq!(
            got,
            [
                Seen::Record((30, 3)),
                Seen::Record((10, 1)),
                Seen::Record((70, 7)),
                wm(64),
                Seen::Record((50, 5)),
                // 64 again does not advance: nothing at 1400.
                wm(i64::MAX),
                Seen::End,
            ]
        );
    }

    #[test]
    fn a_generator_may_emit_per_record_after_the_batch_and_upstream_time_is_replaced() {
        struct Punctuated;
        impl WatermarkGenerator<u32> for Punctuated {
            fn on_event(&mut self, r: &u32, ts: i64, out: &mut WatermarkOutput) {
                if r.is_multiple_of(2) {
                    out.emit_watermark(ts);
                }
            }
            fn on_periodic_emit(&mut self, _out: &mut WatermarkOutput) {}
        }
        let strategy = WatermarkStrategy::for_generator(|| Punctuated)
            .with_timestamp_assigner(|r: &u32, _| *r as i64);
        let (mut op, seen, _ctx) = assigner(strategy, 0);
        op.push_batch(&mut vec![2, 3, 4, 5]).unwrap();
        op.time(TimeSignal::Watermark(100)).unwrap();
        op.time(TimeSignal::Idle).unwrap();
        op.push_batch(&mut vec![1]).unwrap();
        let got = std::mem::take(&mut *seen.borrow_mut());
        assert_eq!(
            got,
            [
                Seen::Record((2, 2)),
                Seen::Record((3, 3)),
                Seen::Record((4, 4)),
                Seen::Record((5, 5)),
                wm(4),
                Seen::Record((1, 1)),
            ]
        );
    }

    #[test]
    fn a_subtask_without_records_goes_idle_and_its_next_record_makes_it_active() {
        let strategy = WatermarkStrategy::for_monotonous_timestamps()
            .with_timestamp_assigner(|r: &u32, _| *r as i64)
            .with_idleness(Duration::from_millis(1_000));
        let (mut op, seen, ctx) = assigner(strategy, 200);
        op.processing_time(0).unwrap();
        op.push_batch(&mut vec![10]).unwrap();
        let mut now = 0;
        while now < 3_000 {
            now = ctx.timers.next_deadline().unwrap().max(now);
            assert!(ctx.timers.take_due(now));
            op.processing_time(now).unwrap();
        }
        op.push_batch(&mut vec![20]).unwrap();
        let got = std::mem::take(&mut *seen.borrow_mut());
        let got: Vec<_> = got
            .into_iter()
            .filter(|s| !matches!(s, Seen::Time(TimeSignal::Watermark(w)) if *w < 0))
            .collect();
        assert_eq!(
            got,
            [
                Seen::Record((10, 10)),
                wm(9),
                Seen::Time(TimeSignal::Idle),
                Seen::Time(TimeSignal::Active),
                Seen::Record((20, 20)),
            ]
        );
    }

    fn split_marks(idleness: Option<u64>) -> SplitWatermarks<&'static str, u32> {
        let mut strategy =
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(5))
                .with_timestamp_assigner(|r: &u32, _| *r as i64);
        if let Some(ms) = idleness {
            strategy = strategy.with_idleness(Duration::from_millis(ms));
        }
        SplitWatermarks::new(strategy, Duration::from_millis(100))
    }

    /// The subtask's watermark is the least of its splits': a lagging split holds the others
    /// back, and advancing it lets the watermark go on; it never goes back.
    #[test]
    fn split_watermarks_are_the_least_of_the_splits() {
        let mut m = split_marks(None);
        m.add_split(&"a");
        m.add_split(&"b");
        assert_eq!(m.on_event(&"a", &1000, i64::MIN), 1000);
        m.on_event(&"b", &200, i64::MIN);
        assert_eq!(m.on_time(0), [TimeSignal::Watermark(194)]);
        assert!(m.on_time(50).is_empty(), "not due");
        m.on_event(&"b", &600, i64::MIN);
        assert_eq!(m.on_time(100), [TimeSignal::Watermark(594)]);
        // b overtakes a: a holds the watermark now.
        m.on_event(&"b", &5000, i64::MIN);
        assert_eq!(m.on_time(200), [TimeSignal::Watermark(994)]);
        // A new split without records holds time back until it has some; never backwards.
        m.add_split(&"c");
        assert!(m.on_time(300).is_empty());
        m.on_event(&"c", &7000, i64::MIN);
        m.on_event(&"a", &8000, i64::MIN);
        assert_eq!(m.on_time(400), [TimeSignal::Watermark(4994)]);
    }

    /// Without an assigner a record keeps the timestamp its source gave it.
    #[test]
    fn split_watermarks_keep_the_sources_timestamp_without_an_assigner() {
        let mut m: SplitWatermarks<u8, u32> = SplitWatermarks::new(
            WatermarkStrategy::for_monotonous_timestamps(),
            Duration::from_millis(100),
        );
        assert_eq!(m.on_event(&0, &7, 1234), 1234);
        assert_eq!(m.on_time(0), [TimeSignal::Watermark(1233)]);
    }

    /// A split without records for the idleness timeout stops holding time back; when all are
    /// idle (or there is none) the subtask is idle; a record makes its split active again.
    #[test]
    fn idle_splits_stop_holding_the_watermark_back() {
        let mut m = split_marks(Some(250));
        assert_eq!(m.on_time(0), [TimeSignal::Idle], "no split: idle");
        m.add_split(&"a");
        m.add_split(&"b");
        m.on_event(&"a", &1000, i64::MIN);
        m.on_event(&"b", &100, i64::MIN);
        assert_eq!(
            m.on_time(100),
            [TimeSignal::Active, TimeSignal::Watermark(94)]
        );
        let mut t = 100;
        let mut seen = Vec::new();
        for _ in 0..4 {
            t += 100;
            m.on_event(&"a", &(1000 + t as u32), i64::MIN);
            seen.extend(m.on_time(t));
        }
        assert!(
            seen.contains(&TimeSignal::Watermark(1000 + 400 - 6)),
            "b went idle, a alone decides: {seen:?}"
        );
        t += 400;
        assert_eq!(m.on_time(t), [TimeSignal::Idle], "both idle");
        m.on_event(&"b", &200, i64::MIN);
        assert_eq!(m.take_signals(), [TimeSignal::Active]);
    }
}
