//! Event-time windows over a keyed stream: tumbling, sliding and session windows with an
//! incremental reduce (Flink's `window(...).reduce(f)`).
//!
//! Sliding windows do not keep one copy of each record per window, as Flink's window operator
//! does: time is cut into slices of the greatest common divisor of size and slide, each key
//! keeps one partial aggregate per slice (map state: slice end → aggregate), and a window's
//! result combines the size/slice partial aggregates of its slices when it fires. A record
//! updates one aggregate however many windows it belongs to.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::operators::{Collector, Context, KeyedProcessFunction};
use super::side::OutputTag;
use super::time::Stamped;
use crate::common::error::TaskError;
use crate::network::buffer::IoCounters;
use crate::record::Data;
use crate::state::{KeyedStateStore, MapState};

/// A window of event time: `[start, end)` in ms since the epoch (Flink's `TimeWindow`).
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

/// Which event-time windows a record belongs to: made by [`TumblingEventTimeWindows`],
/// [`SlidingEventTimeWindows`] or [`EventTimeSessionWindows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventTimeWindows {
    kind: Kind,
}

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

/// Windows of activity per key, closed by a gap without records (Flink's
/// `EventTimeSessionWindows`): each record opens `[t, t + gap)`, and windows of a key that
/// overlap or touch merge into one.
pub struct EventTimeSessionWindows;

impl EventTimeSessionWindows {
    /// Sessions that end `gap` (at least 1 ms) after their last record.
    pub fn with_gap(gap: Duration) -> EventTimeWindows {
        EventTimeWindows {
            kind: Kind::Session { gap: millis(gap) },
        }
    }
}

/// Windows of a fixed size that do not overlap (Flink's `TumblingEventTimeWindows`).
pub struct TumblingEventTimeWindows;

impl TumblingEventTimeWindows {
    /// Windows of `size` (at least 1 ms), aligned to the epoch.
    #[allow(clippy::new_ret_no_self)]
    pub fn of(size: Duration) -> EventTimeWindows {
        let size = millis(size);
        EventTimeWindows {
            kind: Kind::Sliding(Sliding { size, slide: size }),
        }
    }
}

/// Windows of a fixed size that start every `slide` (Flink's `SlidingEventTimeWindows`).
pub struct SlidingEventTimeWindows;

impl SlidingEventTimeWindows {
    /// Windows of `size` starting every `slide` (each at least 1 ms), aligned to the epoch.
    pub fn of(size: Duration, slide: Duration) -> EventTimeWindows {
        EventTimeWindows {
            kind: Kind::Sliding(Sliding {
                size: millis(size),
                slide: millis(slide),
            }),
        }
    }
}

fn millis(d: Duration) -> i64 {
    (d.as_millis().min(i64::MAX as u128 / 4) as i64).max(1)
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl EventTimeWindows {
    /// The windows if they are tumbling or sliding (fixed windows a record's time alone
    /// assigns); `None` for session windows, which merge.
    pub(super) fn fixed(&self) -> Option<Sliding> {
        match self.kind {
            Kind::Sliding(windows) => Some(windows),
            Kind::Session { .. } => None,
        }
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

    /// The slice ends that make up the window ending at `end`, earliest first.
    fn slices_of(&self, end: i64) -> impl Iterator<Item = i64> + use<> {
        let slice = self.slice();
        let start = end - self.size;
        (1..=self.size / slice).map(move |i| start + i * slice)
    }
}

/// A window reduce for one subtask: partial aggregates per key and slice (sliding windows) or
/// per key and session, a timer per window end and, with allowed lateness, one per window end
/// plus lateness, when the window's state is dropped. It reads the records with their
/// timestamps and emits each window's result with the timestamp `end - 1`.
///
/// As Flink's window operator with its default event-time trigger: a window fires when the
/// watermark reaches `end - 1`, and keeps its state until the watermark reaches `end - 1 +
/// lateness`; a record that comes in between updates the window and fires it again at once (a
/// late firing, the updated result). A record that comes when the watermark has passed that
/// point for every window it belongs to is too late: it goes to the late-data side output if
/// there is one, else it is dropped and counted (`numLateRecordsDropped`).
pub(crate) struct WindowReduce<T, F, E> {
    windows: EventTimeWindows,
    /// Allowed lateness in ms (0: state goes when the window fires).
    lateness: i64,
    /// Where records too late for every window go, if not dropped.
    late_data: Option<OutputTag<T>>,
    reduce: F,
    emit: E,
    /// Sliding windows: each key's partial aggregates by slice end.
    slices: MapState<i64, T>,
    /// Session windows: each key's sessions, start → (end, aggregate).
    sessions: MapState<i64, (i64, T)>,
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

impl<T: Data, F: Fn(T, T) -> T + 'static, E> WindowReduce<T, F, E> {
    pub(crate) fn new(
        windows: EventTimeWindows,
        lateness: Lateness<T>,
        reduce: F,
        emit: E,
        store: &KeyedStateStore,
        counters: Arc<IoCounters>,
    ) -> Result<Self, TaskError> {
        Ok(WindowReduce {
            windows,
            lateness: lateness.allowed.max(0),
            late_data: lateness.side_output,
            reduce,
            emit,
            slices: store.map_state("window-slices")?,
            sessions: store.map_state("window-sessions")?,
            counters,
        })
    }
}

impl<T: Data, F: Fn(T, T) -> T, E> WindowReduce<T, F, E> {
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

    /// Opens `[timestamp, timestamp + gap)` for the current key and merges it with the key's
    /// sessions it overlaps or touches; too late if even the merged session's state is gone
    /// (the watermark passed its end - 1 + lateness). A merged session that already fired
    /// fires again at once with its updated result.
    fn add_to_session<K, O>(
        &mut self,
        key: &K,
        timestamp: i64,
        gap: i64,
        record: T,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError>
    where
        E: Fn(&K, TimeWindow, T) -> O,
    {
        let mut merged = TimeWindow {
            start: timestamp,
            end: timestamp.saturating_add(gap),
        };
        let mut parts: Vec<(i64, i64, T)> = Vec::new();
        for (start, (end, value)) in self.sessions.entries()? {
            if start <= merged.end && end >= merged.start {
                parts.push((start, end, value));
            }
        }
        for (start, end, _) in &parts {
            merged.start = merged.start.min(*start);
            merged.end = merged.end.max(*end);
        }
        let watermark = ctx.current_watermark();
        if self.cleanup_time(merged.max_timestamp()) <= watermark {
            return self.too_late(record, ctx);
        }
        for (start, end, _) in &parts {
            self.sessions.remove(start)?;
            // Without lateness a timer serves one session: the merged-away ones' go. With
            // lateness a timer's time may also be another session's cleanup time, so stale
            // ones stay and find nothing to do.
            if self.lateness == 0 && *end != merged.end {
                ctx.delete_event_time_timer(end - 1)?;
            }
        }
        // Combined in time order, the new record where its timestamp puts it.
        parts.push((timestamp, timestamp, record));
        parts.sort_by_key(|p| p.0);
        let value = parts
            .into_iter()
            .map(|(_, _, value)| value)
            .reduce(|a, b| (self.reduce)(a, b));
        let Some(value) = value else {
            return Ok(());
        };
        let fire_at = merged.max_timestamp();
        if self.lateness > 0 {
            ctx.register_event_time_timer(self.cleanup_time(fire_at))?;
        }
        if fire_at > watermark {
            self.sessions.put(merged.start, (merged.end, value))?;
            ctx.register_event_time_timer(fire_at)
        } else {
            // A late firing: the session fired already and is kept for its lateness.
            self.sessions
                .put(merged.start, (merged.end, value.clone()))?;
            out.collect((fire_at, (self.emit)(key, merged, value)))
        }
    }

    /// The timer at `time` of the current key: fires the session that ends at `time + 1`, and
    /// drops the one whose state is kept until `time` (the same one without lateness).
    fn session_timer<K, O>(
        &mut self,
        key: &K,
        time: i64,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError>
    where
        E: Fn(&K, TimeWindow, T) -> O,
    {
        let end = time.saturating_add(1);
        let cleanup_end = end.saturating_sub(self.lateness);
        for (start, (e, value)) in self.sessions.entries()? {
            if e == end {
                let window = TimeWindow { start, end };
                out.collect((window.max_timestamp(), (self.emit)(key, window, value)))?;
            }
            if e == cleanup_end {
                self.sessions.remove(&start)?;
            }
        }
        Ok(())
    }

    /// The result of the current key's window ending at `end`, if it holds any record.
    fn window_result(&self, windows: Sliding, end: i64) -> Result<Option<T>, TaskError> {
        let mut result: Option<T> = None;
        for slice in windows.slices_of(end) {
            if let Some(part) = self.slices.get(&slice)? {
                result = Some(match result {
                    Some(acc) => (self.reduce)(acc, part),
                    None => part,
                });
            }
        }
        Ok(result)
    }

    /// Emits the current key's window ending at `end`, if it holds any record.
    fn fire_window<K, O>(
        &self,
        windows: Sliding,
        key: &K,
        end: i64,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError>
    where
        E: Fn(&K, TimeWindow, T) -> O,
    {
        let window = TimeWindow {
            start: end - windows.size,
            end,
        };
        match self.window_result(windows, end)? {
            Some(value) => out.collect((window.max_timestamp(), (self.emit)(key, window, value))),
            None => Ok(()),
        }
    }
}

impl<K, T: Data, O, F: Fn(T, T) -> T + 'static, E: Fn(&K, TimeWindow, T) -> O + 'static>
    KeyedProcessFunction<K, Stamped<T>, Stamped<O>> for WindowReduce<T, F, E>
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
        let windows = match self.windows.kind {
            Kind::Sliding(windows) => windows,
            Kind::Session { gap } => {
                return self.add_to_session(key, timestamp, gap, record, ctx, out);
            }
        };
        let watermark = ctx.current_watermark();
        let mut open = false;
        let mut fired = false;
        for end in windows.window_ends(timestamp) {
            // A window fires when the watermark reaches its last instant, end - 1, and keeps
            // its state until the watermark reaches end - 1 + lateness.
            let fire_at = end - 1;
            let cleanup = self.cleanup_time(fire_at);
            if cleanup > watermark {
                open = true;
                if fire_at > watermark {
                    ctx.register_event_time_timer(fire_at)?;
                } else {
                    fired = true;
                }
                if self.lateness > 0 {
                    ctx.register_event_time_timer(cleanup)?;
                }
            }
        }
        if !open {
            return self.too_late(record, ctx);
        }
        let slice = windows.slice_end(timestamp);
        let value = match self.slices.get(&slice)? {
            Some(acc) => (self.reduce)(acc, record),
            None => record,
        };
        self.slices.put(slice, value)?;
        if fired {
            // Late firings: each window that fired already and still keeps its state emits
            // its updated result, earliest first.
            let mut ends: Vec<i64> = windows
                .window_ends(timestamp)
                .filter(|end| end - 1 <= watermark && self.cleanup_time(end - 1) > watermark)
                .collect();
            ends.reverse();
            for end in ends {
                self.fire_window(windows, key, end, out)?;
            }
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        key: &K,
        timestamp: i64,
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        let windows = match self.windows.kind {
            Kind::Sliding(windows) => windows,
            Kind::Session { .. } => return self.session_timer(key, timestamp, out),
        };
        // The timer may be a window's firing time (its end - 1), another's cleanup time (end -
        // 1 + lateness), or both: a timer serves every purpose its time has.
        let end = timestamp.saturating_add(1);
        if windows.is_window_end(end) {
            self.fire_window(windows, key, end, out)?;
        }
        let cleanup_end = end.saturating_sub(self.lateness);
        if windows.is_window_end(cleanup_end) {
            // The next window starts one slide later: the slices before that are done.
            let start = cleanup_end - windows.size;
            for slice in windows.slices_of(cleanup_end) {
                if slice <= start + windows.slide {
                    self.slices.remove(&slice)?;
                }
            }
        }
        Ok(())
    }
}

/// What a window becomes on a stream without timestamps: an error at the first record.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operators::testing::Collect;
    use crate::api::operators::{BoxOutput, KeyedProcess};
    use crate::api::side::{Side, SideBuffer, SideOutputs};
    use crate::network::valve::TimeSignal;
    use std::cell::RefCell;
    use std::rc::Rc;

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
    }

    impl Harness {
        fn new(windows: EventTimeWindows, lateness_ms: i64, side_output: bool) -> Harness {
            let ctx = crate::api::RuntimeContext::standalone(0, 1);
            let store = ctx.keyed_state_store().unwrap();
            Harness::on(store, windows, lateness_ms, side_output)
        }

        /// The window over `store` (restored or fresh).
        fn on(
            store: KeyedStateStore,
            windows: EventTimeWindows,
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
            let reduce =
                WindowReduce::new(windows, lateness, sum, start, &store, counters.clone()).unwrap();
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
            let key = Arc::new(|_: &(i64, u64)| 0u8);
            let op = KeyedProcess::new(
                key,
                reduce,
                store.clone(),
                ctx.timers.clone(),
                0,
                next,
                sides,
            )
            .unwrap();
            Harness {
                op: Box::new(op),
                got,
                late,
                counters,
                store,
            }
        }

        /// Pushes records of value 1 at these timestamps, as one batch.
        fn ones(&mut self, timestamps: &[i64]) {
            let mut batch = timestamps.iter().map(|&t| (t, 1)).collect();
            self.op.push_batch(&mut batch).unwrap();
        }

        fn watermark(&mut self, w: i64) {
            self.op.time(TimeSignal::Watermark(w)).unwrap();
        }

        fn emitted(&self) -> Vec<Firing> {
            self.got.borrow().clone()
        }

        fn dropped(&self) -> u64 {
            self.counters.late_records_dropped.load(Ordering::Relaxed)
        }

        /// Entries of the window state `name` (timers not counted).
        fn state_entries(&self, name: &str) -> usize {
            let entries = self.store.entries().unwrap();
            entries.iter().filter(|e| e.state == name).count()
        }
    }

    #[test]
    fn sessions_merge_when_they_overlap_or_touch_and_fire_once_their_gap_has_passed() {
        let windows = EventTimeSessionWindows::with_gap(Duration::from_millis(10));
        let mut h = Harness::new(windows, 0, false);
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
        assert_eq!(h.state_entries("window-sessions"), 0);
    }

    #[test]
    fn sliding_windows_fire_in_time_order_and_drop_records_too_late_for_all_of_theirs() {
        let windows =
            SlidingEventTimeWindows::of(Duration::from_millis(10), Duration::from_millis(5));
        let mut h = Harness::new(windows, 0, false);
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
        assert_eq!(h.state_entries("window-slices"), 0);
    }

    #[test]
    fn within_allowed_lateness_a_record_fires_its_window_again_and_beyond_it_goes_to_the_side_output()
     {
        for side_output in [false, true] {
            let windows = TumblingEventTimeWindows::of(Duration::from_millis(10));
            let mut h = Harness::new(windows, 5, side_output);
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
            assert_eq!(h.state_entries("window-slices"), 1, "only [10, 20)'s slice");
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
            assert_eq!(h.state_entries("window-slices"), 0);
        }
    }

    #[test]
    fn sliding_windows_with_lateness_fire_late_only_the_windows_still_kept() {
        let windows =
            SlidingEventTimeWindows::of(Duration::from_millis(10), Duration::from_millis(5));
        let mut h = Harness::new(windows, 5, true);
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
        assert_eq!(h.state_entries("window-slices"), 0);
    }

    #[test]
    fn sessions_with_lateness_fire_again_when_a_late_record_joins_and_are_dropped_after_it() {
        let windows = EventTimeSessionWindows::with_gap(Duration::from_millis(10));
        let mut h = Harness::new(windows, 5, true);
        h.ones(&[1]);
        h.watermark(10);
        assert_eq!(h.emitted(), [(10, (1, 1))]);
        // 0 joins [1, 11) (kept until watermark 15): [0, 11) fires again at once.
        h.ones(&[0]);
        assert_eq!(h.emitted(), [(10, (1, 1)), (10, (0, 2))]);
        h.watermark(15);
        assert_eq!(h.state_entries("window-sessions"), 0);
        // [2, 12) would be kept until 16: a session of its own that fires at once. [-10, 0)
        // was gone at watermark 4: too late.
        h.ones(&[2, -10]);
        assert_eq!(h.emitted(), [(10, (1, 1)), (10, (0, 2)), (11, (2, 1))]);
        assert_eq!(*h.late.borrow(), [(-10, 1)]);
        h.watermark(i64::MAX);
        assert_eq!(h.emitted().len(), 3);
        assert_eq!(h.state_entries("window-sessions"), 0);
    }

    #[test]
    fn window_state_and_its_lateness_timers_survive_a_checkpoint_and_restore_in_both_backends() {
        use crate::common::keys::KeyHash;
        use crate::state::{
            BackendKind, BackendSettings, KeyGroupRange, LocalFileStorage, SnapshotKind,
            SnapshotLocation,
        };
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_string_lossy().into_owned();
        for kind in [BackendKind::HashMap, BackendKind::RocksDb] {
            let open = |name: &str, restore: &[crate::state::KeyedStateHandle], meta: &str| {
                let settings = BackendSettings {
                    kind,
                    local_dir: dir.path().join("local").join(format!("{kind}-{name}")),
                    incremental: false,
                    rocks_memory: None,
                    key_hash: KeyHash::CURRENT,
                };
                let range = KeyGroupRange::new(0, 127);
                KeyedStateStore::open(&settings, 128, range, restore, &LocalFileStorage, meta)
                    .unwrap()
            };
            let windows = || TumblingEventTimeWindows::of(Duration::from_millis(10));
            let mut before = Harness::on(open("before", &[], ""), windows(), 5, true);
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
            let mut after = Harness::on(store, windows(), 5, true);
            after.watermark(9);
            after.ones(&[3]);
            assert_eq!(after.emitted(), [(9, (0, 3))], "{kind}: a late firing");
            after.watermark(14);
            after.ones(&[4]);
            assert_eq!(*after.late.borrow(), [(4, 1)], "{kind}: cleaned up");
            after.watermark(i64::MAX);
            assert_eq!(after.emitted(), [(9, (0, 3)), (19, (10, 1))], "{kind}");
            assert_eq!(after.state_entries("window-slices"), 0, "{kind}");
        }
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
        assert_eq!(w.slices_of(14).collect::<Vec<_>>(), [6, 8, 10, 12, 14]);
        let t = sliding(TumblingEventTimeWindows::of(Duration::from_millis(5)));
        assert_eq!(t.window_ends(-1).collect::<Vec<_>>(), [0]);
        assert_eq!(t.window_ends(5).collect::<Vec<_>>(), [10]);
        assert_eq!(t.slices_of(10).collect::<Vec<_>>(), [10]);
    }
}
