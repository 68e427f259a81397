//! Windows over a keyed stream: tumbling, sliding and session windows in event time or in
//! processing time, with one operator ([`WindowOperator`]) that every window function shares:
//! an incremental reduce (Flink's `window(...).reduce(f)`), an incremental aggregate
//! (`aggregate(AggregateFunction)`) and a process window function that sees all of a window's
//! records (`process(ProcessWindowFunction)`). A [`WindowFunction`] says what is kept per key and
//! slice or session (an aggregate, or the records themselves), how a record goes into it, how two
//! combine, and what a window emits; the operator does the rest (assignment, timers, lateness,
//! state).
//!
//! Sliding windows do not keep one copy of each record (or aggregate) per window, as Flink's
//! window operator does: time is cut into slices of the greatest common divisor of size and
//! slide, each key keeps one accumulator per slice (map state: slice end → accumulator), and a
//! window's result combines the size/slice accumulators of its slices when it fires. A record
//! goes into one accumulator however many windows it belongs to (for a process function the
//! accumulator is the slice's list of records: each record is kept once).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::operators::{Collector, Context, KeyedProcessFunction};
use super::side::OutputTag;
use super::time::Stamped;
use super::triggers::{Fires, Trigger};
use crate::common::error::TaskError;
use crate::network::buffer::IoCounters;
use crate::record::Data;
use crate::state::{AggregateFunction, KeyedStateStore, MapState, TimeDomain, ValueState};

/// A window of time: `[start, end)` in ms since the epoch (Flink's `TimeWindow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimeWindow {
    /// The first instant in the window.
    pub start: i64,
    /// The first instant after it.
    pub end: i64,
}

impl TimeWindow {
    /// The last instant in the window, the timestamp of its result: `end - 1`.
    pub fn max_timestamp(&self) -> i64 {
        self.end - 1
    }
}

/// Which windows a record belongs to, and which clock closes them: made by
/// [`TumblingEventTimeWindows`], [`SlidingEventTimeWindows`], [`EventTimeSessionWindows`] and
/// their processing-time counterparts [`TumblingProcessingTimeWindows`],
/// [`SlidingProcessingTimeWindows`] and [`ProcessingTimeSessionWindows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowAssigner {
    kind: Kind,
    /// Event time: a record's timestamp places it, the watermark fires windows. Processing
    /// time: the clock when the record arrives places it, the clock fires windows.
    domain: TimeDomain,
}

/// The windows of event time, as the window API named them first.
pub type EventTimeWindows = WindowAssigner;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Sliding(Sliding),
    /// Windows `[t, t + gap)` around each record, merged while they overlap or touch.
    Session {
        gap: i64,
    },
}

/// The windows `[start, start + size)` whose starts are multiples of `slide` (ms since the
/// epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sliding {
    /// The windows' length, ms.
    pub(super) size: i64,
    /// How far apart their starts are, ms.
    slide: i64,
}

impl Sliding {
    fn of(size: Duration, slide: Duration) -> Kind {
        Kind::Sliding(Sliding {
            size: millis(size),
            slide: millis(slide),
        })
    }
}

/// Windows of activity per key, closed by a gap without records (Flink's
/// `EventTimeSessionWindows`): each record opens `[t, t + gap)`, and windows of a key that
/// overlap or touch merge into one.
pub struct EventTimeSessionWindows;

impl EventTimeSessionWindows {
    /// Sessions that end `gap` (at least 1 ms) after their last record.
    pub fn with_gap(gap: Duration) -> WindowAssigner {
        WindowAssigner {
            kind: Kind::Session { gap: millis(gap) },
            domain: TimeDomain::EventTime,
        }
    }
}

/// Windows of a fixed size that do not overlap (Flink's `TumblingEventTimeWindows`).
pub struct TumblingEventTimeWindows;

impl TumblingEventTimeWindows {
    /// Windows of `size` (at least 1 ms), aligned to the epoch.
    #[allow(clippy::new_ret_no_self)]
    pub fn of(size: Duration) -> WindowAssigner {
        WindowAssigner {
            kind: Sliding::of(size, size),
            domain: TimeDomain::EventTime,
        }
    }
}

/// Windows of a fixed size that start every `slide` (Flink's `SlidingEventTimeWindows`).
pub struct SlidingEventTimeWindows;

impl SlidingEventTimeWindows {
    /// Windows of `size` starting every `slide` (each at least 1 ms), aligned to the epoch.
    pub fn of(size: Duration, slide: Duration) -> WindowAssigner {
        WindowAssigner {
            kind: Sliding::of(size, slide),
            domain: TimeDomain::EventTime,
        }
    }
}

/// Sessions of processing time (Flink's `ProcessingTimeSessionWindows`): a record opens
/// `[now, now + gap)` by the clock of the machine handling it.
pub struct ProcessingTimeSessionWindows;

impl ProcessingTimeSessionWindows {
    /// Sessions that end `gap` (at least 1 ms) after their last record arrived.
    pub fn with_gap(gap: Duration) -> WindowAssigner {
        WindowAssigner {
            kind: Kind::Session { gap: millis(gap) },
            domain: TimeDomain::ProcessingTime,
        }
    }
}

/// Tumbling windows of processing time (Flink's `TumblingProcessingTimeWindows`).
pub struct TumblingProcessingTimeWindows;

impl TumblingProcessingTimeWindows {
    /// Windows of `size` (at least 1 ms) of the wall clock, aligned to the epoch.
    #[allow(clippy::new_ret_no_self)]
    pub fn of(size: Duration) -> WindowAssigner {
        WindowAssigner {
            kind: Sliding::of(size, size),
            domain: TimeDomain::ProcessingTime,
        }
    }
}

/// Sliding windows of processing time (Flink's `SlidingProcessingTimeWindows`).
pub struct SlidingProcessingTimeWindows;

impl SlidingProcessingTimeWindows {
    /// Windows of `size` of the wall clock starting every `slide`, aligned to the epoch.
    pub fn of(size: Duration, slide: Duration) -> WindowAssigner {
        WindowAssigner {
            kind: Sliding::of(size, slide),
            domain: TimeDomain::ProcessingTime,
        }
    }
}

fn millis(d: Duration) -> i64 {
    (d.as_millis().min(i64::MAX as u128 / 4) as i64).max(1)
}

pub(super) fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl WindowAssigner {
    /// The windows if they are tumbling or sliding event-time windows (fixed windows a
    /// record's timestamp alone assigns); `None` for session windows, which merge, and for
    /// processing-time windows.
    pub(super) fn fixed(&self) -> Option<Sliding> {
        match (self.kind, self.domain) {
            (Kind::Sliding(windows), TimeDomain::EventTime) => Some(windows),
            _ => None,
        }
    }

    /// Which clock fires these windows.
    pub fn time_domain(&self) -> TimeDomain {
        self.domain
    }
}

impl Sliding {
    /// The length of the slices partial aggregates are kept for.
    fn slice(&self) -> i64 {
        gcd(self.size, self.slide)
    }

    /// The end (exclusive) of the slice `timestamp` falls in.
    fn slice_end(&self, timestamp: i64) -> i64 {
        let slice = self.slice();
        timestamp - timestamp.rem_euclid(slice) + slice
    }

    /// The ends (exclusive) of the windows `timestamp` belongs to, latest first.
    pub(super) fn window_ends(&self, timestamp: i64) -> impl Iterator<Item = i64> + use<> {
        let last_start = timestamp - timestamp.rem_euclid(self.slide);
        let (size, slide) = (self.size, self.slide);
        (0..)
            .map(move |i| last_start - i * slide)
            .take_while(move |start| *start > timestamp - size)
            .map(move |start| start + size)
    }

    /// Whether a window ends at `end`: windows start at multiples of the slide.
    fn is_window_end(&self, end: i64) -> bool {
        (end - self.size).rem_euclid(self.slide) == 0
    }

    /// Whether the slice ending at `slice` is part of the window ending at `end`.
    fn in_window(&self, end: i64, slice: i64) -> bool {
        slice > end - self.size && slice <= end
    }
}

/// What a process window function knows of the window it is called for (Flink's
/// `ProcessWindowFunction.Context`): the window (a [`TimeWindow`], or a
/// [`CountWindow`](super::CountWindow) for count windows) and the operator's clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowContext<W = TimeWindow> {
    pub(crate) window: W,
    pub(crate) watermark: i64,
    pub(crate) processing_time: i64,
}

impl<W: Copy> WindowContext<W> {
    /// The window being emitted.
    pub fn window(&self) -> W {
        self.window
    }
    /// The operator's input watermark (`i64::MIN` before the first).
    pub fn current_watermark(&self) -> i64 {
        self.watermark
    }
    /// The operator's processing time, ms since the epoch.
    pub fn current_processing_time(&self) -> i64 {
        self.processing_time
    }
}

/// A function that sees all of a window's records at once, the key and the window (Flink's
/// `ProcessWindowFunction`), and emits any number of results. Cloned once per subtask. A
/// closure `|key, ctx, records, out| ...` is one.
pub trait ProcessWindowFunction<K, T, O, W = TimeWindow>: 'static {
    /// Called once per firing of a window of `key` that holds records (each firing, late
    /// firings included, sees all the records the window holds then, in arrival order per
    /// slice and the slices in time order).
    fn process(
        &mut self,
        key: &K,
        ctx: &WindowContext<W>,
        records: Vec<T>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>;
}

impl<K, T, O, W, F> ProcessWindowFunction<K, T, O, W> for F
where
    F: FnMut(&K, &WindowContext<W>, Vec<T>, &mut Collector<'_, O>) -> Result<(), TaskError>
        + 'static,
{
    fn process(
        &mut self,
        key: &K,
        ctx: &WindowContext<W>,
        records: Vec<T>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        self(key, ctx, records, out)
    }
}

/// What the window operator keeps per key and slice (or session, or count slice) and what a
/// window emits: the one thing that differs between `reduce`, `aggregate` and `process`.
pub(crate) trait WindowFunction<K, T, W, O>: 'static {
    /// What is kept per slice.
    type Acc: Data;
    /// `record` added to a slice's accumulator (`None`: the slice is new).
    fn add(&self, acc: Option<Self::Acc>, record: T) -> Self::Acc;
    /// Two accumulators combined, `a` the earlier.
    fn merge(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// A window's results from its accumulator.
    fn emit(
        &mut self,
        key: &K,
        ctx: &WindowContext<W>,
        acc: Self::Acc,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>;
}

/// `reduce(f)` then `emit(key, window, result)`.
pub(crate) struct Reduce<F, E> {
    pub(crate) reduce: F,
    pub(crate) emit: E,
}

impl<K, T: Data, W: Copy, O, F, E> WindowFunction<K, T, W, O> for Reduce<F, E>
where
    F: Fn(T, T) -> T + 'static,
    E: Fn(&K, W, T) -> O + 'static,
{
    type Acc = T;
    fn add(&self, acc: Option<T>, record: T) -> T {
        match acc {
            Some(acc) => (self.reduce)(acc, record),
            None => record,
        }
    }
    fn merge(&self, a: T, b: T) -> T {
        (self.reduce)(a, b)
    }
    fn emit(
        &mut self,
        key: &K,
        ctx: &WindowContext<W>,
        acc: T,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        out.collect((self.emit)(key, ctx.window, acc))
    }
}

/// An [`AggregateFunction`]'s accumulator per slice, then `emit(key, window, result)`.
pub(crate) struct Aggregate<F, E, ACC, R> {
    pub(crate) function: F,
    pub(crate) emit: E,
    pub(crate) _t: std::marker::PhantomData<fn() -> (ACC, R)>,
}

impl<K, T, W: Copy, O, ACC: Data, R: 'static, F, E> WindowFunction<K, T, W, O>
    for Aggregate<F, E, ACC, R>
where
    F: AggregateFunction<T, ACC, R>,
    E: Fn(&K, W, R) -> O + 'static,
{
    type Acc = ACC;
    fn add(&self, acc: Option<ACC>, record: T) -> ACC {
        let acc = acc.unwrap_or_else(|| self.function.create_accumulator());
        self.function.add(record, acc)
    }
    fn merge(&self, a: ACC, b: ACC) -> ACC {
        self.function.merge(a, b)
    }
    fn emit(
        &mut self,
        key: &K,
        ctx: &WindowContext<W>,
        acc: ACC,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        out.collect((self.emit)(key, ctx.window, self.function.get_result(acc)))
    }
}

/// The records themselves per slice, handed to a [`ProcessWindowFunction`].
pub(crate) struct Process<P> {
    pub(crate) function: P,
}

impl<K, T: Data, W, O, P: ProcessWindowFunction<K, T, O, W>> WindowFunction<K, T, W, O>
    for Process<P>
{
    type Acc = Vec<T>;
    fn add(&self, acc: Option<Vec<T>>, record: T) -> Vec<T> {
        let mut records = acc.unwrap_or_default();
        records.push(record);
        records
    }
    fn merge(&self, mut a: Vec<T>, mut b: Vec<T>) -> Vec<T> {
        a.append(&mut b);
        a
    }
    fn emit(
        &mut self,
        key: &K,
        ctx: &WindowContext<W>,
        acc: Vec<T>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        self.function.process(key, ctx, acc, out)
    }
}

/// The window operator of one subtask, whatever its function: accumulators per key and slice
/// (sliding windows) or per key and session, a timer per window end and, with allowed
/// lateness, one per window end plus lateness, when the window's state is dropped. It reads
/// the records with their timestamps and emits each window's results with the timestamp
/// `end - 1`.
///
/// As Flink's window operator with its default trigger: an event-time window fires when the
/// watermark reaches `end - 1`, and keeps its state until the watermark reaches `end - 1 +
/// lateness`; a record that comes in between updates the window and fires it again at once (a
/// late firing, the updated result). A record that comes when the watermark has passed that
/// point for every window it belongs to is too late: it goes to the late-data side output if
/// there is one, else it is dropped and counted (`numLateRecordsDropped`). A processing-time
/// window takes each record at the operator's clock and fires on a processing-time timer when
/// the clock reaches `end` (its results still have the timestamp `end - 1`); nothing is late in
/// processing time.
pub(crate) struct WindowOperator<T, A, F> {
    windows: WindowAssigner,
    /// Allowed lateness in ms (0: state goes when the window fires).
    lateness: i64,
    /// Where records too late for every window go, if not dropped.
    late_data: Option<OutputTag<T>>,
    function: F,
    /// Sliding windows: each key's accumulators as (slice end, accumulator), in the order of
    /// the ends, one value per key: a record reads and writes one entry (on RocksDB through the
    /// write-back cache) instead of a map entry per slice.
    slices: ValueState<Vec<(i64, A)>>,
    /// Session windows: each key's sessions as (start, end, accumulator), in the order of their
    /// starts, one value per key: a record reads and writes one entry (on RocksDB through the
    /// write-back cache) instead of scanning the key's sessions.
    sessions: ValueState<Vec<(i64, i64, A)>>,
    /// When windows fire.
    trigger: Trigger,
    /// A count trigger's records per window since it last fired: each key's by window end
    /// (sliding windows) or session start.
    counts: MapState<i64, u64>,
    /// The subtask's counters (`late_records_dropped`).
    counters: Arc<IoCounters>,
}

/// How a window operator treats records that come after their windows fired.
#[derive(Clone)]
pub(crate) struct Lateness<T> {
    /// Allowed lateness in ms.
    pub(crate) allowed: i64,
    /// The late-data side output.
    pub(crate) side_output: Option<OutputTag<T>>,
}

impl<T> Default for Lateness<T> {
    fn default() -> Self {
        Lateness {
            allowed: 0,
            side_output: None,
        }
    }
}

impl<T: Data, A: Data, F> WindowOperator<T, A, F> {
    /// The operator of `windows` fired by `trigger`; an error naming the mismatch if the
    /// trigger cannot serve these windows.
    pub(crate) fn new(
        windows: WindowAssigner,
        trigger: Trigger,
        lateness: Lateness<T>,
        function: F,
        store: &KeyedStateStore,
        counters: Arc<IoCounters>,
    ) -> Result<Self, TaskError> {
        let apart = matches!(windows.kind, Kind::Sliding(s) if s.size <= s.slide);
        if let Some(why) = trigger.unfit_for(windows.domain, apart) {
            return Err(TaskError::User(why));
        }
        // Nothing is late in processing time: a record lands in the windows open now.
        let (allowed, late_data) = match windows.domain {
            TimeDomain::EventTime => (lateness.allowed.max(0), lateness.side_output),
            TimeDomain::ProcessingTime => (0, None),
        };
        let sessions = store.value_state(SESSIONS)?;
        let slices = store.value_state(SLICES)?;
        match windows.kind {
            Kind::Session { .. } => {
                let element = |start, (end, acc): &(i64, A)| (start, *end, acc.clone());
                convert_earlier(store, "window-sessions", &sessions, element)?
            }
            Kind::Sliding(_) => {
                let element = |end, acc: &A| (end, acc.clone());
                convert_earlier(store, "window-slices", &slices, element)?
            }
        }
        Ok(WindowOperator {
            windows,
            lateness: allowed,
            late_data,
            function,
            slices,
            sessions,
            trigger,
            counts: store.map_state("window-counts")?,
            counters,
        })
    }

    /// When the state of a window that fires at `fire_at` (its `end - 1`) is dropped.
    fn cleanup_time(&self, fire_at: i64) -> i64 {
        fire_at.saturating_add(self.lateness)
    }

    /// A record too late for every window it belongs to: to the late-data side output, or
    /// dropped and counted.
    fn too_late(&mut self, record: T, ctx: &mut Context<'_>) -> Result<(), TaskError> {
        match &self.late_data {
            Some(tag) => ctx.output(tag, record),
            None => {
                self.counters
                    .late_records_dropped
                    .fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// The time of the timer that fires the window ending at `end`: its last instant, `end -
    /// 1`, in event time (the watermark promises nothing at or before it follows); `end` in
    /// processing time, so that once it fired the clock has left the window and no record can
    /// land in it again.
    fn timer_of(&self, end: i64) -> i64 {
        match self.windows.domain {
            TimeDomain::EventTime => end - 1,
            TimeDomain::ProcessingTime => end,
        }
    }

    /// The end of the window the timer at `time` fires ([`timer_of`](Self::timer_of) undone).
    fn end_of(&self, time: i64) -> i64 {
        match self.windows.domain {
            TimeDomain::EventTime => time.saturating_add(1),
            TimeDomain::ProcessingTime => time,
        }
    }

    fn register_timer(&self, ctx: &mut Context<'_>, time: i64) -> Result<(), TaskError> {
        register(ctx, self.windows.domain, time)
    }

    fn delete_timer(&self, ctx: &mut Context<'_>, time: i64) -> Result<(), TaskError> {
        match self.windows.domain {
            TimeDomain::EventTime => ctx.delete_event_time_timer(time),
            TimeDomain::ProcessingTime => ctx.delete_processing_time_timer(time),
        }
    }
}

/// The session windows' state: each key's sessions in one value.
const SESSIONS: &str = "window-session-list";

/// The sliding windows' state: each key's slices in one value.
const SLICES: &str = "window-slice-list";

/// Moves window state kept as an earlier sluice kept it, one map entry per session or slice
/// (`earlier`: session start or slice end → value), from a restored snapshot into `into`: one
/// list per key in the order of the map's keys, each element `element(time, value)`. A
/// savepoint taken before the change so resumes with its open windows.
fn convert_earlier<V: Data, E: Data>(
    store: &KeyedStateStore,
    earlier: &str,
    into: &ValueState<Vec<E>>,
    element: impl Fn(i64, &V) -> E,
) -> Result<(), TaskError> {
    let mut entries = store.take_map_state::<i64, V>(earlier)?;
    if entries.is_empty() {
        return Ok(());
    }
    entries.sort_by(|a, b| (a.0, &a.1, a.2).cmp(&(b.0, &b.1, b.2)));
    let mut rest = entries.as_slice();
    while let Some((kg, key, _, _)) = rest.first() {
        let n = rest
            .iter()
            .take_while(|e| e.0 == *kg && e.1 == *key)
            .count();
        let (of_key, more) = rest.split_at(n);
        store.set_current_key_bytes(*kg, key)?;
        let list = of_key
            .iter()
            .map(|(_, _, time, value)| element(*time, value))
            .collect();
        into.update(list)?;
        rest = more;
    }
    Ok(())
}

/// Drops the slices whose end `drop` picks from the current key's list.
fn drop_slices<A: Data>(
    slices: &ValueState<Vec<(i64, A)>>,
    drop: impl Fn(i64) -> bool,
) -> Result<(), TaskError> {
    let Some(mut list) = slices.value()? else {
        return Ok(());
    };
    let before = list.len();
    list.retain(|(end, _)| !drop(*end));
    if list.len() == before {
        return Ok(());
    }
    if list.is_empty() {
        slices.clear()?;
    } else {
        slices.update(list)?;
    }
    Ok(())
}

/// Sets a timer of the current key at `time` of `domain`.
fn register(ctx: &mut Context<'_>, domain: TimeDomain, time: i64) -> Result<(), TaskError> {
    match domain {
        TimeDomain::EventTime => ctx.register_event_time_timer(time),
        TimeDomain::ProcessingTime => ctx.register_processing_time_timer(time),
    }
}

impl<T: Data, A: Data, F> WindowOperator<T, A, F> {
    /// Emits `acc` as the result of `window` of `key`, with the timestamp `end - 1`.
    fn emit<K, O>(
        &mut self,
        key: &K,
        window: TimeWindow,
        acc: A,
        ctx: &Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError>
    where
        F: WindowFunction<K, T, TimeWindow, O, Acc = A>,
    {
        let info = WindowContext {
            window,
            watermark: ctx.current_watermark(),
            processing_time: ctx.current_processing_time(),
        };
        let mut results = Vec::new();
        self.function
            .emit(key, &info, acc, &mut Collector::new(&mut results))?;
        for result in results {
            out.collect((window.max_timestamp(), result))?;
        }
        Ok(())
    }

    /// Opens `[timestamp, timestamp + gap)` for the current key and merges it with the key's
    /// sessions it overlaps or touches; too late if even the merged session's state is gone
    /// (`current`, the time windows have fired up to, passed its end - 1 + lateness). A merged
    /// session that already fired fires again at once with its updated result, as does one
    /// whose count trigger reaches its count.
    #[allow(clippy::too_many_arguments)]
    fn add_to_session<K, O>(
        &mut self,
        key: &K,
        (timestamp, current): (i64, i64),
        gap: i64,
        record: T,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError>
    where
        F: WindowFunction<K, T, TimeWindow, O, Acc = A>,
    {
        let mut merged = TimeWindow {
            start: timestamp,
            end: timestamp.saturating_add(gap),
        };
        let (mut parts, mut sessions): (Vec<_>, Vec<_>) = self
            .sessions
            .value()?
            .unwrap_or_default()
            .into_iter()
            .partition(|(start, end, _)| *start <= merged.end && *end >= merged.start);
        for (start, end, _) in &parts {
            merged.start = merged.start.min(*start);
            merged.end = merged.end.max(*end);
        }
        if self.cleanup_time(merged.max_timestamp()) <= current {
            return self.too_late(record, ctx);
        }
        // A count trigger's counts merge with their sessions.
        let mut count = 1;
        for (start, end, _) in &parts {
            if let Fires::Count(_) = self.trigger.fires {
                count += self.counts.get(start)?.unwrap_or(0);
                self.counts.remove(start)?;
            }
            // Without lateness a timer serves one session: the merged-away ones' go. With
            // lateness a timer's time may also be another session's cleanup time, so stale
            // ones stay and find nothing to do.
            if self.lateness == 0 && *end != merged.end {
                self.delete_timer(ctx, self.timer_of(*end))?;
            }
        }
        // Combined in time order, the new record where its timestamp puts it.
        parts.push((timestamp, timestamp, self.function.add(None, record)));
        parts.sort_by_key(|p| p.0);
        let value = parts
            .into_iter()
            .map(|(_, _, value)| value)
            .reduce(|a, b| self.function.merge(a, b));
        let Some(value) = value else {
            return Ok(());
        };
        let fire_at = merged.max_timestamp();
        if self.lateness > 0 {
            self.register_timer(ctx, self.cleanup_time(fire_at))?;
        }
        let ended = fire_at <= current;
        if !ended {
            // The session's end: it fires then (or, with a count trigger, only goes).
            self.register_timer(ctx, self.timer_of(merged.end))?;
        }
        self.continue_later(ctx, (timestamp, current), self.timer_of(merged.end))?;
        let fire_now = match self.trigger.fires {
            Fires::Count(n) => {
                if count < n {
                    self.counts.put(merged.start, count)?;
                }
                count >= n
            }
            // A late firing: the session fired already and is kept for its lateness.
            _ => ended,
        };
        let at = sessions.partition_point(|(start, _, _)| *start < merged.start);
        if fire_now {
            sessions.insert(at, (merged.start, merged.end, value.clone()));
            self.sessions.update(sessions)?;
            self.emit(key, merged, value, ctx, out)
        } else {
            sessions.insert(at, (merged.start, merged.end, value));
            Ok(self.sessions.update(sessions)?)
        }
    }

    /// The timer at `time` of `domain` of the current key: fires the session that ends there
    /// (unless a count trigger fires it), drops the one whose state is kept until then (the
    /// same one without lateness), and fires the open sessions early if a continuous trigger
    /// has a tick then.
    fn session_timer<K, O>(
        &mut self,
        key: &K,
        (time, domain): (i64, TimeDomain),
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError>
    where
        F: WindowFunction<K, T, TimeWindow, O, Acc = A>,
    {
        let mut sessions = self.sessions.value()?.unwrap_or_default();
        if domain == self.windows.domain {
            let end = self.end_of(time);
            let cleanup_end = end.saturating_sub(self.lateness);
            let before = sessions.len();
            let mut kept = Vec::with_capacity(before);
            for (start, e, value) in sessions {
                let window = TimeWindow { start, end: e };
                let fire = e == end && self.trigger.fires_at_end();
                if e == cleanup_end {
                    if let Fires::Count(_) = self.trigger.fires {
                        self.counts.remove(&start)?;
                    }
                    if fire {
                        self.emit(key, window, value, ctx, out)?;
                    }
                } else {
                    if fire {
                        self.emit(key, window, value.clone(), ctx, out)?;
                    }
                    kept.push((start, e, value));
                }
            }
            if kept.len() != before {
                if kept.is_empty() {
                    self.sessions.clear()?;
                } else {
                    self.sessions.update(kept.clone())?;
                }
            }
            sessions = kept;
        }
        if !self.is_tick(domain, time) {
            return Ok(());
        }
        let mut latest = None;
        for (start, end, value) in sessions {
            let window = TimeWindow { start, end };
            if self.fires_early(window, (time, domain), ctx) {
                self.emit(key, window, value, ctx, out)?;
                latest = latest.max(Some(self.timer_of(end)));
            }
        }
        match latest {
            Some(latest) => self.continue_after(ctx, (time, domain), latest),
            None => Ok(()),
        }
    }

    /// The accumulator of the current key's window ending at `end`, if it holds any record.
    fn window_result<K, O>(&self, windows: Sliding, end: i64) -> Result<Option<A>, TaskError>
    where
        F: WindowFunction<K, T, TimeWindow, O, Acc = A>,
    {
        let Some(list) = self.slices.value()? else {
            return Ok(None);
        };
        let mut result: Option<A> = None;
        // The list is in the order of the ends: the window's slices merge earliest first.
        for (_, part) in list.into_iter().filter(|(s, _)| windows.in_window(end, *s)) {
            result = Some(match result {
                Some(acc) => self.function.merge(acc, part),
                None => part,
            });
        }
        Ok(result)
    }

    /// Emits the current key's window ending at `end`, if it holds any record, and empties it
    /// if the trigger purges; whether it held any.
    fn fire_window<K, O>(
        &mut self,
        windows: Sliding,
        key: &K,
        end: i64,
        ctx: &Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<bool, TaskError>
    where
        F: WindowFunction<K, T, TimeWindow, O, Acc = A>,
    {
        let window = TimeWindow {
            start: end - windows.size,
            end,
        };
        let Some(acc) = self.window_result::<K, O>(windows, end)? else {
            return Ok(false);
        };
        self.emit(key, window, acc, ctx, out)?;
        if self.trigger.purging {
            // Only windows that do not overlap purge (checked when the operator was made):
            // their slices are theirs alone.
            drop_slices(&self.slices, |slice| windows.in_window(end, slice))?;
            self.counts.remove(&end)?;
        }
        Ok(true)
    }

    /// Fires early every window of the current key that holds records and a continuous
    /// trigger's tick at `time` falls in, and sets the next tick while any did.
    fn fire_ticked<K, O>(
        &mut self,
        windows: Sliding,
        key: &K,
        (time, domain): (i64, TimeDomain),
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError>
    where
        F: WindowFunction<K, T, TimeWindow, O, Acc = A>,
    {
        // The windows that hold records: those of the slices kept.
        let mut ends = std::collections::BTreeSet::new();
        for (slice, _) in self.slices.value()?.unwrap_or_default() {
            ends.extend(windows.window_ends(slice - 1));
        }
        let mut latest = None;
        for end in ends {
            let window = TimeWindow {
                start: end - windows.size,
                end,
            };
            if self.fires_early(window, (time, domain), ctx)
                && self.fire_window(windows, key, end, ctx, out)?
            {
                latest = latest.max(Some(self.timer_of(end)));
            }
        }
        match latest {
            Some(latest) => self.continue_after(ctx, (time, domain), latest),
            None => Ok(()),
        }
    }

    /// The ends of the windows a record at `timestamp` went into whose state is kept when
    /// windows have fired up to `current`, earliest first (only count triggers and late
    /// records need them: not collected for every record).
    fn kept_windows(&self, windows: Sliding, timestamp: i64, current: i64) -> Vec<i64> {
        let mut kept: Vec<i64> = windows
            .window_ends(timestamp)
            .filter(|end| self.cleanup_time(end - 1) > current)
            .collect();
        kept.reverse();
        kept
    }

    /// Whether `time` of `domain` is a tick of the continuous trigger, if there is one.
    fn is_tick(&self, domain: TimeDomain, time: i64) -> bool {
        matches!(self.trigger.fires, Fires::Continuous { domain: d, interval }
            if d == domain && time.rem_euclid(interval) == 0)
    }

    /// Whether a tick at `time` of `domain` fires `window` early. A tick of the windows' own
    /// clock fires the windows it falls inside, before their end: ticks are only ever set
    /// after the time windows have fired up to, and timers fire in time order, so a window a
    /// tick falls inside has not fired at its end yet (one that did, kept for its lateness,
    /// ends before the tick). A processing-time tick fires every event-time window the
    /// watermark has not closed. At the end of input no window fires early: each is about to
    /// fire its final result.
    fn fires_early(
        &self,
        window: TimeWindow,
        (time, domain): (i64, TimeDomain),
        ctx: &Context<'_>,
    ) -> bool {
        if ctx.ending {
            false
        } else if domain == self.windows.domain {
            window.start < time && time < self.timer_of(window.end)
        } else {
            window.max_timestamp() > ctx.current_watermark()
        }
    }

    /// A continuous trigger's first tick after a record placed at `at` in the windows' time,
    /// `current` being the time they have fired up to: set if it comes before `last`, the
    /// latest end firing of the record's windows (a processing-time tick on event-time
    /// windows: the clock's next tick, unbounded).
    fn continue_later(
        &self,
        ctx: &mut Context<'_>,
        (at, current): (i64, i64),
        last: i64,
    ) -> Result<(), TaskError> {
        let Fires::Continuous { domain, interval } = self.trigger.fires else {
            return Ok(());
        };
        // Never a tick at or before `current`: it would fire at once, beside windows that
        // fired already.
        let from = if domain == self.windows.domain {
            at.max(current)
        } else {
            ctx.current_processing_time()
        };
        let floor = from - from.rem_euclid(interval);
        self.continue_after(ctx, (floor, domain), last)
    }

    /// Sets the continuous trigger's tick after the one at `time` of `domain`, if it comes
    /// before `last` (in the windows' own time; across clocks, always).
    fn continue_after(
        &self,
        ctx: &mut Context<'_>,
        (time, domain): (i64, TimeDomain),
        last: i64,
    ) -> Result<(), TaskError> {
        let Fires::Continuous { interval, .. } = self.trigger.fires else {
            return Ok(());
        };
        let next = time.saturating_add(interval);
        if domain != self.windows.domain || next < last {
            register(ctx, domain, next)?;
        }
        Ok(())
    }
}

impl<K, T: Data, A: Data, O, F: WindowFunction<K, T, TimeWindow, O, Acc = A>>
    KeyedProcessFunction<K, Stamped<T>, Stamped<O>> for WindowOperator<T, A, F>
{
    fn process(
        &mut self,
        key: &K,
        (timestamp, record): Stamped<T>,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        // What goes to the late-data side output keeps its timestamp.
        ctx.timestamp = Some(timestamp);
        // Where the record lands (its timestamp, or the clock now) and how far windows have
        // fired: the watermark, or the clock less 1 ms (a timer at the clock's time has yet to
        // fire). The clock is read once: read again, it may have passed the end of the window
        // the record was placed in, which would then count as fired and drop the record.
        let (timestamp, current) = match self.windows.domain {
            TimeDomain::EventTime => (timestamp, ctx.current_watermark()),
            TimeDomain::ProcessingTime => {
                let now = ctx.current_processing_time();
                (now, now.saturating_sub(1))
            }
        };
        let windows = match self.windows.kind {
            Kind::Sliding(windows) => windows,
            Kind::Session { gap } => {
                return self.add_to_session(key, (timestamp, current), gap, record, ctx, out);
            }
        };
        let mut open = false;
        let mut fired = false;
        for end in windows.window_ends(timestamp) {
            // A window fires when time reaches its last instant, end - 1, and keeps its state
            // until time reaches end - 1 + lateness.
            let fire_at = end - 1;
            let cleanup = self.cleanup_time(fire_at);
            if cleanup > current {
                open = true;
                if fire_at > current {
                    self.register_timer(ctx, self.timer_of(end))?;
                } else {
                    fired = true;
                }
                if self.lateness > 0 {
                    self.register_timer(ctx, cleanup)?;
                }
            }
        }
        if !open {
            return self.too_late(record, ctx);
        }
        let slice = windows.slice_end(timestamp);
        let function = &self.function;
        self.slices.update_with(|list| {
            let mut list = list.unwrap_or_default();
            match list.binary_search_by_key(&slice, |(end, _)| *end) {
                Ok(i) => {
                    let (_, acc) = list.remove(i);
                    list.insert(i, (slice, function.add(Some(acc), record)));
                }
                Err(i) => list.insert(i, (slice, function.add(None, record))),
            }
            list
        })?;
        match self.trigger.fires {
            Fires::Count(n) => {
                for end in self.kept_windows(windows, timestamp, current) {
                    let count = self.counts.get(&end)?.unwrap_or(0) + 1;
                    if count >= n {
                        self.counts.remove(&end)?;
                        self.fire_window(windows, key, end, ctx, out)?;
                    } else {
                        self.counts.put(end, count)?;
                    }
                }
            }
            _ => {
                if fired {
                    // Late firings: each window that fired already and still keeps its state
                    // emits its updated result.
                    let kept = self.kept_windows(windows, timestamp, current);
                    for end in kept.into_iter().filter(|end| end - 1 <= current) {
                        self.fire_window(windows, key, end, ctx, out)?;
                    }
                }
                if let Some(last) = windows.window_ends(timestamp).next() {
                    self.continue_later(ctx, (timestamp, current), self.timer_of(last))?;
                }
            }
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        key: &K,
        timestamp: i64,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        let Some(domain) = ctx.time_domain() else {
            return Ok(());
        };
        let windows = match self.windows.kind {
            Kind::Sliding(windows) => windows,
            Kind::Session { .. } => {
                return self.session_timer(key, (timestamp, domain), ctx, out);
            }
        };
        if domain == self.windows.domain {
            // The timer may be a window's end firing, another's cleanup time (end - 1 +
            // lateness), or both: a timer serves every purpose its time has.
            let end = self.end_of(timestamp);
            if windows.is_window_end(end) && self.trigger.fires_at_end() {
                self.fire_window(windows, key, end, ctx, out)?;
            }
            let cleanup_end = end.saturating_sub(self.lateness);
            if windows.is_window_end(cleanup_end) {
                // The next window starts one slide later: the slices before that are done.
                let start = cleanup_end - windows.size;
                drop_slices(&self.slices, |slice| {
                    windows.in_window(cleanup_end, slice) && slice <= start + windows.slide
                })?;
                self.counts.remove(&cleanup_end)?;
            }
        }
        // And a continuous trigger's tick.
        if self.is_tick(domain, timestamp) {
            self.fire_ticked(windows, key, (timestamp, domain), ctx, out)?;
        }
        Ok(())
    }
}

/// What an event-time window becomes on a stream without timestamps: an error at the first
/// record.
pub(crate) struct NoTimestamps;

impl<K, T, O> KeyedProcessFunction<K, T, O> for NoTimestamps {
    fn process(
        &mut self,
        _key: &K,
        _record: T,
        _ctx: &mut Context<'_>,
        _out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        Err(TaskError::User(
            "an event-time window got a record without a timestamp: assign timestamps \
             (assign_timestamps_and_watermarks) before the window"
                .into(),
        ))
    }
}

/// A function over stamped records run on a stream without timestamps (processing-time and
/// count windows need none): each record goes in with the timestamp `i64::MIN`, and what the
/// function emits goes on without its timestamp, as the stream's records travel.
pub(crate) struct Unstamped<F, O> {
    pub(crate) function: F,
    /// What the function emitted for one call, reused.
    pub(crate) out: Vec<Stamped<O>>,
}

impl<K, T, O: 'static, F: KeyedProcessFunction<K, Stamped<T>, Stamped<O>>>
    KeyedProcessFunction<K, T, O> for Unstamped<F, O>
{
    fn process(
        &mut self,
        key: &K,
        record: T,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        self.function.process(
            key,
            (i64::MIN, record),
            ctx,
            &mut Collector::new(&mut self.out),
        )?;
        for (_, record) in self.out.drain(..) {
            out.collect(record)?;
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        key: &K,
        timestamp: i64,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        self.function
            .on_timer(key, timestamp, ctx, &mut Collector::new(&mut self.out))?;
        for (_, record) in self.out.drain(..) {
            out.collect(record)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operators::testing::Collect;
    use crate::api::operators::{BoxOutput, KeyedProcess};
    use crate::api::side::{Side, SideBuffer, SideOutputs};
    use crate::api::{
        ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountTrigger,
        EventTimeTrigger, ProcessingTimeTrigger, PurgingTrigger,
    };
    use crate::network::valve::TimeSignal;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::atomic::AtomicI64;

    /// `(timestamp, (window start, sum))`.
    type Firing = (i64, (i64, u64));

    /// A window sum over `(timestamp, value)` records of one key, emitting `(timestamp,
    /// (window start, sum))`, run by the keyed process operator as in a job, with simulated
    /// watermarks.
    struct Harness {
        op: BoxOutput<Stamped<u64>>,
        /// What the window emitted.
        got: Rc<RefCell<Vec<Firing>>>,
        /// What reached the late-data side output, with timestamps.
        late: Rc<RefCell<Vec<(i64, u64)>>>,
        counters: Arc<IoCounters>,
        store: KeyedStateStore,
        /// The operator's processing time.
        clock: Arc<AtomicI64>,
        fun: Fun,
    }

    /// The slices the sliding windows of `store` keep over all keys, their accumulators being
    /// `A`s.
    fn slice_count<A: Data>(store: &KeyedStateStore) -> usize {
        store
            .entries()
            .unwrap()
            .iter()
            .filter(|e| e.state == SLICES)
            .map(|e| {
                let mut aligned = rkyv::util::AlignedVec::<16>::new();
                aligned.extend_from_slice(&e.value);
                rkyv::from_bytes::<Vec<(i64, A)>, rkyv::rancor::Error>(&aligned)
                    .unwrap()
                    .len()
            })
            .sum()
    }

    /// A store of all 128 key groups in `dir/local/<kind>-<name>`, restored from `restore`
    /// (file paths relative to `meta`).
    fn open_store(
        dir: &std::path::Path,
        kind: crate::state::BackendKind,
        name: &str,
        restore: &[crate::state::KeyedStateHandle],
        meta: &str,
    ) -> KeyedStateStore {
        let settings = crate::state::BackendSettings {
            kind,
            local_dir: dir.join("local").join(format!("{kind}-{name}")),
            incremental: false,
            rocks_memory: None,
            key_hash: crate::common::keys::KeyHash::CURRENT,
        };
        let range = crate::state::KeyGroupRange::new(0, 127);
        let storage = crate::state::LocalFileStorage;
        KeyedStateStore::open(&settings, 128, range, restore, &storage, meta).unwrap()
    }

    /// A subtask's keyed state store, empty.
    fn fresh_store() -> KeyedStateStore {
        let ctx = crate::api::RuntimeContext::standalone(0, 1);
        ctx.keyed_state_store().unwrap()
    }

    /// `function` run by the keyed process operator, as in a job, all records under one key.
    fn keyed<F: KeyedProcessFunction<u8, Stamped<u64>, Firing>>(
        function: F,
        store: &KeyedStateStore,
        processing: crate::api::ProcessingTimeService,
        next: BoxOutput<Firing>,
        sides: SideOutputs,
    ) -> BoxOutput<Stamped<u64>> {
        let key = Arc::new(|_: &(i64, u64)| 0u8);
        let op = KeyedProcess::new(key, function, store.clone(), processing, 0, next, sides)
            .unwrap()
            .firing_processing_timers_at_end();
        Box::new(op)
    }

    /// The window functions every rule is checked with: they all sum the values.
    #[derive(Clone, Copy, Debug)]
    enum Fun {
        Reduce,
        Aggregate,
        Process,
    }

    const FUNCTIONS: [Fun; 3] = [Fun::Reduce, Fun::Aggregate, Fun::Process];

    /// A sum through an accumulator of (sum, count).
    struct Sum;

    impl AggregateFunction<u64, (u64, u64), u64> for Sum {
        fn create_accumulator(&self) -> (u64, u64) {
            (0, 0)
        }
        fn add(&self, value: u64, (sum, n): (u64, u64)) -> (u64, u64) {
            (sum + value, n + 1)
        }
        fn get_result(&self, (sum, n): (u64, u64)) -> u64 {
            assert!(n > 0, "a window without records fired");
            sum
        }
        fn merge(&self, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
            (a.0 + b.0, a.1 + b.1)
        }
    }

    /// A process window function that sums the window's records.
    fn sum_of_records(
        _: &u8,
        ctx: &WindowContext,
        records: Vec<u64>,
        out: &mut Collector<'_, (i64, u64)>,
    ) -> Result<(), TaskError> {
        out.collect((ctx.window().start, records.iter().sum()))
    }

    impl Harness {
        fn new(fun: Fun, windows: WindowAssigner, lateness_ms: i64, side_output: bool) -> Harness {
            let store = fresh_store();
            Harness::on(
                fun,
                store,
                (windows, Trigger::DEFAULT),
                lateness_ms,
                side_output,
            )
        }

        /// The windows fired by `trigger`, without a late-data side output.
        fn triggered(
            fun: Fun,
            windows: WindowAssigner,
            trigger: Trigger,
            lateness_ms: i64,
        ) -> Harness {
            Harness::on(fun, fresh_store(), (windows, trigger), lateness_ms, false)
        }

        /// The window over `store` (restored or fresh).
        fn on(
            fun: Fun,
            store: KeyedStateStore,
            (windows, trigger): (WindowAssigner, Trigger),
            lateness_ms: i64,
            side_output: bool,
        ) -> Harness {
            let ctx = crate::api::RuntimeContext::standalone(0, 1);
            let sum: fn(u64, u64) -> u64 = |a, b| a + b;
            let start: fn(&u8, TimeWindow, u64) -> (i64, u64) = |_, w, sum| (w.start, sum);
            let tag = OutputTag::<u64>::new("late");
            let lateness = Lateness {
                allowed: lateness_ms,
                side_output: side_output.then(|| tag.clone()),
            };
            let counters = ctx.counters.clone();
            let clock = Arc::new(AtomicI64::new(0));
            let processing = crate::api::ProcessingTimeService::with_manual_clock(clock.clone());
            let got = Rc::new(RefCell::new(Vec::new()));
            let next: BoxOutput<Firing> =
                Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
            let late = Rc::new(RefCell::new(Vec::new()));
            let sink = late.clone();
            let sides = SideOutputs::new(vec![Side {
                tag: "late".into(),
                record_type: std::any::TypeId::of::<u64>(),
                stamped: true,
                buffer: Box::new(SideBuffer::<(i64, u64)> {
                    records: Vec::new(),
                    push: Box::new(move |batch| {
                        sink.borrow_mut().append(batch);
                        Ok(())
                    }),
                }),
            }]);
            let (w, l, c) = (windows, lateness, counters.clone());
            let op = match fun {
                Fun::Reduce => {
                    let f = Reduce {
                        reduce: sum,
                        emit: start,
                    };
                    keyed(
                        WindowOperator::new(w, trigger, l, f, &store, c).unwrap(),
                        &store,
                        processing,
                        next,
                        sides,
                    )
                }
                Fun::Aggregate => {
                    let f = Aggregate {
                        function: Sum,
                        emit: start,
                        _t: std::marker::PhantomData,
                    };
                    keyed(
                        WindowOperator::new(w, trigger, l, f, &store, c).unwrap(),
                        &store,
                        processing,
                        next,
                        sides,
                    )
                }
                Fun::Process => {
                    let f = Process {
                        function: sum_of_records,
                    };
                    keyed(
                        WindowOperator::new(w, trigger, l, f, &store, c).unwrap(),
                        &store,
                        processing,
                        next,
                        sides,
                    )
                }
            };
            Harness {
                op,
                clock,
                got,
                late,
                counters,
                store,
                fun,
            }
        }

        /// Pushes records of value 1 at these timestamps, as one batch.
        fn ones(&mut self, timestamps: &[i64]) {
            let mut batch = timestamps.iter().map(|&t| (t, 1)).collect();
            self.op.push_batch(&mut batch).unwrap();
        }

        /// Sets the clock to `now` and lets the operator fire what is due.
        fn clock(&mut self, now: i64) {
            self.clock.store(now, Ordering::Relaxed);
            self.op.processing_time(now).unwrap();
        }

        fn watermark(&mut self, w: i64) {
            self.op.time(TimeSignal::Watermark(w)).unwrap();
        }

        fn finish(&mut self) {
            self.op.finish().unwrap();
        }

        fn emitted(&self) -> Vec<Firing> {
            self.got.borrow().clone()
        }

        fn dropped(&self) -> u64 {
            self.counters.late_records_dropped.load(Ordering::Relaxed)
        }

        /// The slices the sliding windows keep over all keys.
        fn slices(&self) -> usize {
            match self.fun {
                Fun::Reduce => slice_count::<u64>(&self.store),
                Fun::Aggregate => slice_count::<(u64, u64)>(&self.store),
                Fun::Process => slice_count::<Vec<u64>>(&self.store),
            }
        }

        /// Entries of the window state `name` (timers not counted).
        fn state_entries(&self, name: &str) -> usize {
            let entries = self.store.entries().unwrap();
            entries.iter().filter(|e| e.state == name).count()
        }
    }

    #[test]
    fn sessions_merge_when_they_overlap_or_touch_and_fire_once_their_gap_has_passed() {
        for fun in FUNCTIONS {
            let windows = EventTimeSessionWindows::with_gap(Duration::from_millis(10));
            let mut h = Harness::new(fun, windows, 0, false);
            // [1, 11) and [5, 15) merge; [30, 40) stands apart.
            h.ones(&[1, 5, 30]);
            h.watermark(20);
            assert_eq!(h.emitted(), [(14, (1, 2))]);
            // [3, 13) has ended at watermark 20 (had [12, 22) been open, 3 would have joined it):
            // late. 25 joins [30, 40); then 22 touches [12, 22) and overlaps [25, 40): one
            // session [12, 40).
            h.ones(&[3, 12, 25, 22]);
            assert_eq!(h.dropped(), 1);
            h.watermark(i64::MAX);
            assert_eq!(h.emitted(), [(14, (1, 2)), (39, (12, 4))]);
            assert_eq!(h.state_entries(SESSIONS), 0);
        }
    }

    #[test]
    fn sliding_windows_fire_in_time_order_and_drop_records_too_late_for_all_of_theirs() {
        for fun in FUNCTIONS {
            let windows =
                SlidingEventTimeWindows::of(Duration::from_millis(10), Duration::from_millis(5));
            let mut h = Harness::new(fun, windows, 0, false);
            h.ones(&[1, 3, 6]);
            h.watermark(9);
            // [-5, 5) holds 1 and 3; [0, 10) holds 1, 3 and 6.
            assert_eq!(h.emitted(), [(4, (-5, 2)), (9, (0, 3))]);
            // 2 belongs only to windows that fired: late. 7 still counts for [5, 15).
            h.ones(&[12, 2, 7]);
            assert_eq!(h.dropped(), 1);
            h.watermark(i64::MAX);
            // [5, 15): 6, 7, 12; [10, 20): 12.
            assert_eq!(
                h.emitted(),
                [(4, (-5, 2)), (9, (0, 3)), (14, (5, 3)), (19, (10, 1))]
            );
            assert_eq!(h.slices(), 0);
        }
    }

    #[test]
    fn within_allowed_lateness_a_record_fires_its_window_again_and_beyond_it_goes_to_the_side_output()
     {
        for fun in FUNCTIONS {
            for side_output in [false, true] {
                let windows = TumblingEventTimeWindows::of(Duration::from_millis(10));
                let mut h = Harness::new(fun, windows, 5, side_output);
                h.ones(&[1, 5]);
                h.watermark(9);
                assert_eq!(h.emitted(), [(9, (0, 2))]);
                // After the firing, within the lateness (the state is kept until watermark 14):
                // each late record updates the window and fires it at once.
                h.ones(&[3]);
                assert_eq!(h.emitted(), [(9, (0, 2)), (9, (0, 3))]);
                h.watermark(13);
                h.ones(&[0, 12]);
                assert_eq!(h.emitted(), [(9, (0, 2)), (9, (0, 3)), (9, (0, 4))]);
                assert_eq!(h.dropped(), 0);
                // At watermark 14 the window's state goes (the cleanup timer at 9 + 5): a record
                // for it now is too late.
                h.watermark(14);
                assert_eq!(h.slices(), 1, "only [10, 20)'s slice");
                h.ones(&[4, 15]);
                if side_output {
                    assert_eq!(*h.late.borrow(), [(4, 1)], "with its timestamp");
                    assert_eq!(h.dropped(), 0);
                } else {
                    assert!(h.late.borrow().is_empty());
                    assert_eq!(h.dropped(), 1);
                }
                h.watermark(i64::MAX);
                assert_eq!(
                    h.emitted(),
                    [(9, (0, 2)), (9, (0, 3)), (9, (0, 4)), (19, (10, 2))]
                );
                assert_eq!(h.slices(), 0);
            }
        }
    }

    #[test]
    fn sliding_windows_with_lateness_fire_late_only_the_windows_still_kept() {
        for fun in FUNCTIONS {
            let windows =
                SlidingEventTimeWindows::of(Duration::from_millis(10), Duration::from_millis(5));
            let mut h = Harness::new(fun, windows, 5, true);
            h.ones(&[1, 6]);
            h.watermark(9);
            assert_eq!(h.emitted(), [(4, (-5, 1)), (9, (0, 2))]);
            // 3 is in [-5, 5), kept until watermark 9 (gone), and [0, 10), kept until 14: only
            // the latter fires again. Its slice [0, 5) stayed for it.
            h.ones(&[3]);
            assert_eq!(h.emitted(), [(4, (-5, 1)), (9, (0, 2)), (9, (0, 3))]);
            h.watermark(14);
            // 4 now is too late for both of its windows.
            h.ones(&[4]);
            assert_eq!(*h.late.borrow(), [(4, 1)]);
            h.watermark(i64::MAX);
            assert_eq!(
                h.emitted(),
                [(4, (-5, 1)), (9, (0, 2)), (9, (0, 3)), (14, (5, 1))]
            );
            assert_eq!(h.slices(), 0);
        }
    }

    #[test]
    fn sessions_with_lateness_fire_again_when_a_late_record_joins_and_are_dropped_after_it() {
        for fun in FUNCTIONS {
            let windows = EventTimeSessionWindows::with_gap(Duration::from_millis(10));
            let mut h = Harness::new(fun, windows, 5, true);
            h.ones(&[1]);
            h.watermark(10);
            assert_eq!(h.emitted(), [(10, (1, 1))]);
            // 0 joins [1, 11) (kept until watermark 15): [0, 11) fires again at once.
            h.ones(&[0]);
            assert_eq!(h.emitted(), [(10, (1, 1)), (10, (0, 2))]);
            h.watermark(15);
            assert_eq!(h.state_entries(SESSIONS), 0);
            // [2, 12) would be kept until 16: a session of its own that fires at once. [-10, 0)
            // was gone at watermark 4: too late.
            h.ones(&[2, -10]);
            assert_eq!(h.emitted(), [(10, (1, 1)), (10, (0, 2)), (11, (2, 1))]);
            assert_eq!(*h.late.borrow(), [(-10, 1)]);
            h.watermark(i64::MAX);
            assert_eq!(h.emitted().len(), 3);
            assert_eq!(h.state_entries(SESSIONS), 0);
        }
    }

    #[test]
    fn window_state_and_its_lateness_timers_survive_a_checkpoint_and_restore_in_both_backends() {
        for fun in FUNCTIONS {
            use crate::state::{BackendKind, LocalFileStorage, SnapshotKind, SnapshotLocation};
            let dir = tempfile::tempdir().unwrap();
            let base = dir.path().to_string_lossy().into_owned();
            for kind in [BackendKind::HashMap, BackendKind::RocksDb] {
                let open = |name: &str, restore: &[crate::state::KeyedStateHandle], meta: &str| {
                    open_store(dir.path(), kind, name, restore, meta)
                };
                let windows = || TumblingEventTimeWindows::of(Duration::from_millis(10));
                let mut before = Harness::on(
                    fun,
                    open("before", &[], ""),
                    (windows(), Trigger::DEFAULT),
                    5,
                    true,
                );
                before.ones(&[1, 5, 12]);
                before.watermark(9);
                assert_eq!(before.emitted(), [(9, (0, 2))]);
                let location = SnapshotLocation {
                    checkpoint_id: 1,
                    kind: SnapshotKind::Checkpoint,
                    dir: format!("{base}/{kind}/chk-1"),
                    shared_dir: Some(format!("{base}/{kind}/shared")),
                };
                let handle = before
                    .store
                    .snapshot(&location, &LocalFileStorage, "window")
                    .unwrap();
                drop(before);
                // Restored: [0, 10) fired but is kept until watermark 14, [10, 20) is open, and
                // their timers came back with the state.
                let store = open("after", std::slice::from_ref(&handle), &location.dir);
                let mut after = Harness::on(fun, store, (windows(), Trigger::DEFAULT), 5, true);
                after.watermark(9);
                after.ones(&[3]);
                assert_eq!(after.emitted(), [(9, (0, 3))], "{kind}: a late firing");
                after.watermark(14);
                after.ones(&[4]);
                assert_eq!(*after.late.borrow(), [(4, 1)], "{kind}: cleaned up");
                after.watermark(i64::MAX);
                assert_eq!(after.emitted(), [(9, (0, 3)), (19, (10, 1))], "{kind}");
                assert_eq!(after.slices(), 0, "{kind}");
            }
        }
    }

    /// Sessions as an earlier sluice kept them: one map entry per session, start → (end,
    /// sum), with a timer at each session's last instant.
    struct EarlierSessions(MapState<i64, (i64, u64)>);

    impl KeyedProcessFunction<u8, Stamped<u64>, Firing> for EarlierSessions {
        fn process(
            &mut self,
            _: &u8,
            (timestamp, value): Stamped<u64>,
            ctx: &mut Context<'_>,
            _: &mut Collector<'_, Firing>,
        ) -> Result<(), TaskError> {
            // One record per session here: [timestamp, timestamp + 10).
            self.0.put(timestamp, (timestamp + 10, value))?;
            ctx.register_event_time_timer(timestamp + 9)
        }
    }

    #[test]
    fn sessions_of_a_snapshot_in_the_earlier_one_entry_per_session_layout_resume_in_both_backends()
    {
        use crate::state::{BackendKind, LocalFileStorage, SnapshotKind, SnapshotLocation};
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_string_lossy().into_owned();
        for kind in [BackendKind::HashMap, BackendKind::RocksDb] {
            let open = |name: &str, restore: &[crate::state::KeyedStateHandle], meta: &str| {
                open_store(dir.path(), kind, name, restore, meta)
            };
            let store = open("before", &[], "");
            let earlier = EarlierSessions(store.map_state("window-sessions").unwrap());
            let got = Rc::new(RefCell::new(Vec::new()));
            let next: BoxOutput<Firing> =
                Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
            let clock = Arc::new(AtomicI64::new(0));
            let processing = crate::api::ProcessingTimeService::with_manual_clock(clock);
            let mut op = keyed(earlier, &store, processing, next, SideOutputs::new(vec![]));
            op.push_batch(&mut vec![(0, 2), (30, 5)]).unwrap();
            let location = SnapshotLocation {
                checkpoint_id: 1,
                kind: SnapshotKind::Savepoint,
                dir: format!("{base}/{kind}/sp-1"),
                shared_dir: None,
            };
            let handle = store
                .snapshot(&location, &LocalFileStorage, "sessions")
                .unwrap();
            drop(op);
            drop(store);
            let store = open("after", std::slice::from_ref(&handle), &location.dir);
            let windows = EventTimeSessionWindows::with_gap(Duration::from_millis(10));
            let mut after = Harness::on(Fun::Reduce, store, (windows, Trigger::DEFAULT), 0, false);
            assert_eq!(
                after.state_entries("window-sessions"),
                0,
                "{kind}: converted"
            );
            assert_eq!(
                after.state_entries(SESSIONS),
                1,
                "{kind}: one value per key"
            );
            // A record joins the second session; both fire by their timers as before.
            after.ones(&[35]);
            after.watermark(9);
            assert_eq!(after.emitted(), [(9, (0, 2))], "{kind}");
            after.watermark(i64::MAX);
            assert_eq!(after.emitted(), [(9, (0, 2)), (44, (30, 6))], "{kind}");
            assert_eq!(after.state_entries(SESSIONS), 0, "{kind}");
        }
    }

    /// Slices as an earlier sluice kept them: one map entry per slice, end → sum, with a timer
    /// at the last instant of each 10 ms tumbling window (one slice each).
    struct EarlierSlices(MapState<i64, u64>);

    impl KeyedProcessFunction<u8, Stamped<u64>, Firing> for EarlierSlices {
        fn process(
            &mut self,
            _: &u8,
            (timestamp, value): Stamped<u64>,
            ctx: &mut Context<'_>,
            _: &mut Collector<'_, Firing>,
        ) -> Result<(), TaskError> {
            let end = timestamp - timestamp.rem_euclid(10) + 10;
            let sum = self.0.get(&end)?.unwrap_or(0) + value;
            self.0.put(end, sum)?;
            ctx.register_event_time_timer(end - 1)
        }
    }

    #[test]
    fn slices_of_a_snapshot_in_the_earlier_one_entry_per_slice_layout_resume_in_both_backends() {
        use crate::state::{BackendKind, LocalFileStorage, SnapshotKind, SnapshotLocation};
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_string_lossy().into_owned();
        for kind in [BackendKind::HashMap, BackendKind::RocksDb] {
            let open = |name: &str, restore: &[crate::state::KeyedStateHandle], meta: &str| {
                open_store(dir.path(), kind, name, restore, meta)
            };
            let store = open("before", &[], "");
            let earlier = EarlierSlices(store.map_state("window-slices").unwrap());
            let got = Rc::new(RefCell::new(Vec::new()));
            let next: BoxOutput<Firing> =
                Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
            let clock = Arc::new(AtomicI64::new(0));
            let processing = crate::api::ProcessingTimeService::with_manual_clock(clock);
            let mut op = keyed(earlier, &store, processing, next, SideOutputs::new(vec![]));
            // Key 0 (even values): slices [0, 10) with 2 + 4 and [20, 30) with 6.
            op.push_batch(&mut vec![(1, 2), (5, 4), (21, 6)]).unwrap();
            let location = SnapshotLocation {
                checkpoint_id: 1,
                kind: SnapshotKind::Savepoint,
                dir: format!("{base}/{kind}/sp-slices"),
                shared_dir: None,
            };
            let handle = store
                .snapshot(&location, &LocalFileStorage, "slices")
                .unwrap();
            drop(op);
            drop(store);
            let store = open("after", std::slice::from_ref(&handle), &location.dir);
            let windows = TumblingEventTimeWindows::of(Duration::from_millis(10));
            let mut after = Harness::on(Fun::Reduce, store, (windows, Trigger::DEFAULT), 0, false);
            assert_eq!(after.state_entries("window-slices"), 0, "{kind}: converted");
            assert_eq!(after.state_entries(SLICES), 1, "{kind}: one value per key");
            assert_eq!(after.slices(), 2, "{kind}");
            // A record joins the first window; both fire by their timers as before.
            after.ones(&[7]);
            after.watermark(9);
            assert_eq!(after.emitted(), [(9, (0, 7))], "{kind}");
            after.watermark(i64::MAX);
            assert_eq!(after.emitted(), [(9, (0, 7)), (29, (20, 6))], "{kind}");
            assert_eq!(after.slices(), 0, "{kind}");
        }
    }

    #[test]
    fn processing_time_windows_take_records_at_the_clock_and_fire_on_it_never_on_watermarks() {
        for fun in FUNCTIONS {
            let ms = Duration::from_millis;
            let mut h = Harness::new(fun, TumblingProcessingTimeWindows::of(ms(10)), 0, false);
            // The records' own timestamps do not matter, nor does the watermark.
            h.clock(3);
            h.ones(&[100]);
            h.clock(7);
            h.ones(&[-50]);
            h.watermark(i64::MAX);
            assert_eq!(h.emitted(), []);
            // A record at 9 (the window's last instant) still belongs to [0, 10), which fires
            // when the clock reaches its end: after that, no record can land in it.
            h.clock(9);
            h.ones(&[i64::MIN]);
            assert_eq!(h.emitted(), []);
            h.clock(10);
            assert_eq!(h.emitted(), [(9, (0, 3))], "{fun:?}");
            h.ones(&[0]);
            h.clock(20);
            assert_eq!(h.emitted(), [(9, (0, 3)), (19, (10, 1))], "{fun:?}");
            assert_eq!(h.dropped(), 0);
            // The end of input fires what is left: [20, 30).
            h.clock(25);
            h.ones(&[0, 0, 0]);
            h.finish();
            assert_eq!(
                h.emitted(),
                [(9, (0, 3)), (19, (10, 1)), (29, (20, 3))],
                "{fun:?}"
            );
            assert_eq!(h.slices(), 0);
        }
    }

    #[test]
    fn sliding_processing_time_windows_fire_each_window_a_record_arrived_in() {
        for fun in FUNCTIONS {
            let ms = Duration::from_millis;
            let windows = SlidingProcessingTimeWindows::of(ms(10), ms(5));
            let mut h = Harness::new(fun, windows, 0, false);
            h.clock(6);
            h.ones(&[0]);
            h.clock(9);
            assert_eq!(h.emitted(), []);
            h.clock(10);
            assert_eq!(h.emitted(), [(9, (0, 1))]);
            h.clock(12);
            h.ones(&[0]);
            h.clock(20);
            // [5, 15) holds both; [10, 20) the second.
            assert_eq!(h.emitted(), [(9, (0, 1)), (14, (5, 2)), (19, (10, 1))]);
            assert_eq!(h.slices(), 0, "{fun:?}");
        }
    }

    #[test]
    fn processing_time_sessions_merge_by_arrival_and_the_last_fires_at_end_of_input() {
        for fun in FUNCTIONS {
            let windows = ProcessingTimeSessionWindows::with_gap(Duration::from_millis(10));
            let mut h = Harness::new(fun, windows, 0, false);
            h.clock(1);
            h.ones(&[500]);
            h.clock(5);
            h.ones(&[-500]);
            // [1, 11) and [5, 15): one session, whose timer is at 15 (the one at 11 is gone).
            h.clock(14);
            assert_eq!(h.emitted(), []);
            h.clock(15);
            assert_eq!(h.emitted(), [(14, (1, 2))], "{fun:?}");
            h.clock(30);
            h.ones(&[0]);
            h.finish();
            assert_eq!(h.emitted(), [(14, (1, 2)), (39, (30, 1))], "{fun:?}");
            assert_eq!(h.state_entries(SESSIONS), 0);
        }
    }

    #[test]
    fn a_count_trigger_fires_every_nth_record_of_a_window_and_never_at_its_end() {
        let ms = Duration::from_millis;
        for fun in FUNCTIONS {
            let tumbling = TumblingEventTimeWindows::of(ms(10));
            let mut h = Harness::triggered(fun, tumbling, CountTrigger::of(3), 0);
            h.ones(&[1, 2]);
            assert_eq!(h.emitted(), []);
            h.ones(&[3, 4]);
            assert_eq!(h.emitted(), [(9, (0, 3))], "{fun:?}");
            // The window's end fires nothing; its state (one record past the count) goes.
            h.watermark(20);
            assert_eq!(h.emitted(), [(9, (0, 3))], "{fun:?}");
            assert_eq!(h.slices(), 0, "{fun:?}");
            assert_eq!(h.state_entries("window-counts"), 0, "{fun:?}");
            h.ones(&[21, 22, 23, 24, 25, 26]);
            // Not purging: each firing covers every record so far.
            assert_eq!(h.emitted()[1..], [(29, (20, 3)), (29, (20, 6))], "{fun:?}");

            let purging = PurgingTrigger::of(CountTrigger::of(2));
            let mut h = Harness::triggered(fun, tumbling, purging, 0);
            h.ones(&[1, 2, 3, 4, 5]);
            assert_eq!(h.emitted(), [(9, (0, 2)), (9, (0, 2))], "{fun:?}");
            h.watermark(9);
            assert_eq!(h.emitted().len(), 2, "{fun:?}");
            assert_eq!(h.slices(), 0, "{fun:?}");

            // Sliding windows count apart: a record counts in each of its windows.
            let sliding = SlidingEventTimeWindows::of(ms(10), ms(5));
            let mut h = Harness::triggered(fun, sliding, CountTrigger::of(2), 0);
            h.ones(&[6]);
            h.ones(&[7]);
            assert_eq!(h.emitted(), [(9, (0, 2)), (14, (5, 2))], "{fun:?}");
            h.ones(&[12]);
            assert_eq!(h.emitted().len(), 2, "{fun:?}");
            // [5, 15) has 6, 7, 12 and 13, two since it fired; [10, 20) has 12 and 13.
            h.ones(&[13]);
            assert_eq!(h.emitted()[2..], [(14, (5, 4)), (19, (10, 2))], "{fun:?}");
        }
    }

    #[test]
    fn a_count_trigger_counts_across_merged_sessions() {
        for fun in FUNCTIONS {
            let sessions = EventTimeSessionWindows::with_gap(Duration::from_millis(10));
            let mut h = Harness::triggered(fun, sessions, CountTrigger::of(3), 0);
            h.ones(&[1]);
            h.ones(&[8]);
            h.ones(&[40]);
            assert_eq!(h.emitted(), []);
            // [1, 18) and [12, 22) merge into [1, 22) with three records.
            h.ones(&[12]);
            assert_eq!(h.emitted(), [(21, (1, 3))], "{fun:?}");
            h.watermark(100);
            assert_eq!(h.emitted().len(), 1, "{fun:?}");
            assert_eq!(h.state_entries(SESSIONS), 0, "{fun:?}");
            assert_eq!(h.state_entries("window-counts"), 0, "{fun:?}");
        }
    }

    #[test]
    fn a_continuous_event_time_trigger_fires_at_each_interval_inside_the_window_and_at_its_end() {
        let ms = Duration::from_millis;
        for fun in FUNCTIONS {
            let tumbling = TumblingEventTimeWindows::of(ms(100));
            let every_20 = ContinuousEventTimeTrigger::of(ms(20));
            let mut h = Harness::triggered(fun, tumbling, every_20, 0);
            h.ones(&[5]);
            h.watermark(19);
            assert_eq!(h.emitted(), []);
            h.watermark(20);
            assert_eq!(h.emitted(), [(99, (0, 1))], "{fun:?}");
            h.ones(&[25]);
            // Ticks at 40, 60 and 80 (each fires the window as it is), then its end.
            h.watermark(50);
            assert_eq!(h.emitted().len(), 2, "{fun:?}");
            h.watermark(99);
            assert_eq!(
                h.emitted(),
                [
                    (99, (0, 1)),
                    (99, (0, 2)),
                    (99, (0, 2)),
                    (99, (0, 2)),
                    (99, (0, 2))
                ],
                "{fun:?}"
            );
            h.watermark(1_000);
            assert_eq!(h.emitted().len(), 5, "{fun:?}");
            assert_eq!(h.slices(), 0, "{fun:?}");

            // A late record fires the window once, at once, and sets no tick.
            let mut h = Harness::triggered(fun, tumbling, every_20, 50);
            h.ones(&[5]);
            h.watermark(120);
            assert_eq!(h.emitted(), [(99, (0, 1)); 5], "{fun:?}");
            h.ones(&[30]);
            h.watermark(140);
            assert_eq!(h.emitted()[5..], [(99, (0, 2))], "{fun:?}");

            // The end of input fires each window's final result once, no tick before it.
            let mut h = Harness::triggered(fun, tumbling, every_20, 0);
            h.ones(&[5, 150]);
            h.watermark(i64::MAX);
            assert_eq!(h.emitted(), [(99, (0, 1)), (199, (100, 1))], "{fun:?}");

            // Sessions: ticks inside the session as it grows.
            let sessions = EventTimeSessionWindows::with_gap(ms(50));
            let mut h = Harness::triggered(fun, sessions, every_20, 0);
            h.ones(&[5]);
            h.watermark(20);
            assert_eq!(h.emitted(), [(54, (5, 1))], "{fun:?}");
            h.ones(&[30]);
            h.watermark(40);
            h.watermark(79);
            assert_eq!(
                h.emitted(),
                [(54, (5, 1)), (79, (5, 2)), (79, (5, 2)), (79, (5, 2))],
                "{fun:?}"
            );
            assert_eq!(h.state_entries(SESSIONS), 0, "{fun:?}");
        }
    }

    #[test]
    fn a_continuous_processing_time_trigger_fires_event_time_and_processing_time_windows_early() {
        let ms = Duration::from_millis;
        for fun in FUNCTIONS {
            let every_10 = ContinuousProcessingTimeTrigger::of(ms(10));
            // Event-time windows: every 10 ms of the clock while open, and at the watermark.
            let mut h = Harness::triggered(fun, TumblingEventTimeWindows::of(ms(100)), every_10, 0);
            h.clock(3);
            h.ones(&[5]);
            h.clock(10);
            assert_eq!(h.emitted(), [(99, (0, 1))], "{fun:?}");
            h.ones(&[50]);
            h.clock(20);
            h.watermark(99);
            assert_eq!(
                h.emitted(),
                [(99, (0, 1)), (99, (0, 2)), (99, (0, 2))],
                "{fun:?}"
            );
            // The window is gone: the ticks stop.
            h.clock(30);
            h.clock(40);
            assert_eq!(h.emitted().len(), 3, "{fun:?}");

            // Processing-time windows, ending at the end of input: no early tick then.
            let every_30 = ContinuousProcessingTimeTrigger::of(ms(30));
            let windows = TumblingProcessingTimeWindows::of(ms(100));
            let mut h = Harness::triggered(fun, windows, every_30, 0);
            h.clock(5);
            h.ones(&[0]);
            h.clock(30);
            assert_eq!(h.emitted(), [(99, (0, 1))], "{fun:?}");
            h.clock(40);
            h.ones(&[0]);
            h.clock(60);
            h.clock(100);
            assert_eq!(
                h.emitted(),
                [(99, (0, 1)), (99, (0, 2)), (99, (0, 2)), (99, (0, 2))],
                "{fun:?}"
            );
            h.clock(105);
            h.ones(&[0]);
            h.finish();
            assert_eq!(h.emitted()[4..], [(199, (100, 1))], "{fun:?}");
        }
    }

    #[test]
    fn a_purging_trigger_empties_a_tumbling_window_at_each_firing() {
        let ms = Duration::from_millis;
        for fun in FUNCTIONS {
            let tumbling = TumblingEventTimeWindows::of(ms(100));
            let trigger = PurgingTrigger::of(ContinuousEventTimeTrigger::of(ms(50)));
            let mut h = Harness::triggered(fun, tumbling, trigger, 0);
            h.ones(&[1, 2]);
            h.watermark(50);
            h.ones(&[60]);
            h.watermark(99);
            // Each firing emits what came since the one before.
            assert_eq!(h.emitted(), [(99, (0, 2)), (99, (0, 1))], "{fun:?}");
            // With lateness, a late record fires alone.
            let purging = PurgingTrigger::of(EventTimeTrigger::create());
            let mut h = Harness::triggered(fun, tumbling, purging, 50);
            h.ones(&[1, 2]);
            h.watermark(120);
            h.ones(&[3]);
            assert_eq!(h.emitted(), [(99, (0, 2)), (99, (0, 1))], "{fun:?}");
        }
    }

    #[test]
    fn a_trigger_that_cannot_serve_the_windows_fails_the_operator_saying_why() {
        let ms = Duration::from_millis;
        let cases = [
            (
                SlidingEventTimeWindows::of(ms(10), ms(5)),
                PurgingTrigger::of(CountTrigger::of(2)),
                "PurgingTrigger on sliding or session windows",
            ),
            (
                EventTimeSessionWindows::with_gap(ms(5)),
                PurgingTrigger::of(EventTimeTrigger::create()),
                "PurgingTrigger on sliding or session windows",
            ),
            (
                TumblingProcessingTimeWindows::of(ms(10)),
                EventTimeTrigger::create(),
                "EventTimeTrigger on processing-time windows",
            ),
            (
                TumblingEventTimeWindows::of(ms(10)),
                ProcessingTimeTrigger::create(),
                "ProcessingTimeTrigger on event-time windows",
            ),
            (
                TumblingProcessingTimeWindows::of(ms(10)),
                ContinuousEventTimeTrigger::of(ms(5)),
                "ContinuousEventTimeTrigger on processing-time windows",
            ),
        ];
        for (windows, trigger, why) in cases {
            let store = fresh_store();
            let counters = Arc::new(IoCounters::default());
            let function = Reduce {
                reduce: |a: u64, b: u64| a + b,
                emit: |_: &u8, _: TimeWindow, sum: u64| sum,
            };
            let made = WindowOperator::<u64, u64, _>::new(
                windows,
                trigger,
                Lateness::default(),
                function,
                &store,
                counters,
            );
            match made {
                Err(TaskError::User(message)) => assert!(message.starts_with(why), "{message}"),
                Err(other) => panic!("{other:?}"),
                Ok(_) => panic!("{windows:?} with {trigger:?} was accepted"),
            }
        }
        // Windows that do not overlap can purge, whatever their clock.
        let gaps = SlidingProcessingTimeWindows::of(ms(5), ms(10));
        let function = Reduce {
            reduce: |a: u64, b: u64| a + b,
            emit: |_: &u8, _: TimeWindow, sum: u64| sum,
        };
        let purging = PurgingTrigger::of(ProcessingTimeTrigger::create());
        let made = WindowOperator::<u64, u64, _>::new(
            gaps,
            purging,
            Lateness::default(),
            function,
            &fresh_store(),
            Default::default(),
        );
        assert!(made.is_ok());
    }

    #[test]
    fn a_processing_time_window_places_a_record_by_one_reading_of_the_clock() {
        // A clock that moves 2 ms at every reading: read twice for one record, it would place
        // the record taken at 8 in [0, 10) and then say that window fired at 10 - 1, so the
        // record would be dropped as late. Each window kind, records one at a time.
        let ms = Duration::from_millis;
        let kinds = [
            TumblingProcessingTimeWindows::of(ms(10)),
            SlidingProcessingTimeWindows::of(ms(10), ms(5)),
            ProcessingTimeSessionWindows::with_gap(ms(5)),
        ];
        for windows in kinds {
            let ctx = crate::api::RuntimeContext::standalone(0, 1);
            let store = ctx.keyed_state_store().unwrap();
            let clock = Arc::new(AtomicI64::new(0));
            let processing =
                crate::api::ProcessingTimeService::with_ticking_clock(clock.clone(), 2);
            let function = Aggregate {
                function: Sum,
                emit: |_: &u8, w: TimeWindow, sum: u64| (w.start, sum),
                _t: std::marker::PhantomData,
            };
            let op = WindowOperator::new(
                windows,
                Trigger::DEFAULT,
                Lateness::default(),
                function,
                &store,
                ctx.counters.clone(),
            )
            .unwrap();
            let got = Rc::new(RefCell::new(Vec::new()));
            let next: BoxOutput<Firing> =
                Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
            let mut op = keyed(op, &store, processing, next, SideOutputs::new(Vec::new()));
            for _ in 0..100 {
                op.push((0, 1)).unwrap();
            }
            op.finish().unwrap();
            assert_eq!(
                ctx.counters.late_records_dropped.load(Ordering::Relaxed),
                0,
                "{windows:?}"
            );
            let size = match windows.kind {
                Kind::Sliding(s) => s.size / s.slide,
                Kind::Session { .. } => 1,
            } as u64;
            let counted: u64 = got.borrow().iter().map(|(_, (_, n))| n).sum();
            assert_eq!(counted, 100 * size, "{windows:?}");
        }
    }

    #[test]
    fn a_process_window_function_sees_the_records_slices_in_time_order_kept_once() {
        use crate::api::operators::Output;
        let ctx = crate::api::RuntimeContext::standalone(0, 1);
        let store = ctx.keyed_state_store().unwrap();
        let windows =
            SlidingEventTimeWindows::of(Duration::from_millis(10), Duration::from_millis(5));
        let seen = Rc::new(RefCell::new(Vec::new()));
        let log = seen.clone();
        let function =
            move |_: &u8, ctx: &WindowContext, records: Vec<u64>, _: &mut Collector<'_, ()>| {
                log.borrow_mut()
                    .push((ctx.window(), ctx.current_watermark(), records));
                Ok(())
            };
        let op = WindowOperator::new(
            windows,
            Trigger::DEFAULT,
            Lateness::default(),
            Process { function },
            &store,
            ctx.counters.clone(),
        )
        .unwrap();
        let key = Arc::new(|r: &(i64, u64)| (r.1 % 2) as u8);
        let got = Rc::new(RefCell::new(Vec::new()));
        let next: BoxOutput<Stamped<()>> =
            Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
        let mut op = KeyedProcess::new(
            key,
            op,
            store.clone(),
            ctx.timers.clone(),
            0,
            next,
            SideOutputs::new(Vec::new()),
        )
        .unwrap();
        // Key 0 gets 8 then 2 (slices [5, 10) and [0, 5)), key 1 gets 7.
        op.push_batch(&mut vec![(8, 8), (7, 7), (2, 2)]).unwrap();
        // Each record is in one slice: three entries, not one per window.
        assert_eq!(slice_count::<Vec<u64>>(&store), 3);
        op.time(TimeSignal::Watermark(9)).unwrap();
        let w = |start| TimeWindow {
            start,
            end: start + 10,
        };
        let mut seen = seen.borrow().clone();
        seen.sort_by_key(|(window, _, records)| (*window, records.clone()));
        assert_eq!(
            seen,
            [
                (w(-5), 9, vec![2]),
                (w(0), 9, vec![2, 8]),
                (w(0), 9, vec![7]),
            ]
        );
    }

    #[test]
    fn a_record_belongs_to_size_over_slide_windows_and_one_slice() {
        let sliding = |w: EventTimeWindows| match w.kind {
            Kind::Sliding(s) => s,
            Kind::Session { .. } => unreachable!(),
        };
        let w = sliding(SlidingEventTimeWindows::of(
            Duration::from_millis(10),
            Duration::from_millis(4),
        ));
        assert_eq!(w.slice(), 2);
        // Windows start at multiples of 4 and last 10: 13 is in [4,14), [8,18), [12,22).
        assert_eq!(w.window_ends(13).collect::<Vec<_>>(), [22, 18, 14]);
        assert_eq!(w.slice_end(13), 14);
        let slices_of = |w: &Sliding, end| {
            (-20..=20)
                .filter(|s| s % w.slice() == 0 && w.in_window(end, *s))
                .collect::<Vec<i64>>()
        };
        assert_eq!(slices_of(&w, 14), [6, 8, 10, 12, 14]);
        let t = sliding(TumblingEventTimeWindows::of(Duration::from_millis(5)));
        assert_eq!(t.window_ends(-1).collect::<Vec<_>>(), [0]);
        assert_eq!(t.window_ends(5).collect::<Vec<_>>(), [10]);
        assert_eq!(slices_of(&t, 10), [10]);
    }
}
