//! Event-time windows over a keyed stream: tumbling, sliding and session windows with an
//! incremental reduce (Flink's `window(...).reduce(f)`).
//!
//! Sliding windows do not keep one copy of each record per window, as Flink's window operator
//! does: time is cut into slices of the greatest common divisor of size and slide, each key
//! keeps one partial aggregate per slice (map state: slice end → aggregate), and a window's
//! result combines the size/slice partial aggregates of its slices when it fires. A record
//! updates one aggregate however many windows it belongs to.

use std::time::Duration;

use super::operators::{Collector, Context, KeyedProcessFunction};
use crate::common::error::TaskError;
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
struct Sliding {
    size: i64,
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
    fn window_ends(&self, timestamp: i64) -> impl Iterator<Item = i64> + use<> {
        let last_start = timestamp - timestamp.rem_euclid(self.slide);
        let (size, slide) = (self.size, self.slide);
        (0..)
            .map(move |i| last_start - i * slide)
            .take_while(move |start| *start > timestamp - size)
            .map(move |start| start + size)
    }

    /// The slice ends that make up the window ending at `end`, earliest first.
    fn slices_of(&self, end: i64) -> impl Iterator<Item = i64> + use<> {
        let slice = self.slice();
        let start = end - self.size;
        (1..=self.size / slice).map(move |i| start + i * slice)
    }
}

/// A window reduce for one subtask: partial aggregates per key and slice, a timer per window
/// end; a record that arrives when the watermark has passed every window it belongs to is
/// late and dropped (counted in [`WindowReduce::late_records`]). `emit` makes the output of a
/// key's window from its result.
pub(crate) struct WindowReduce<T, F, E> {
    windows: EventTimeWindows,
    reduce: F,
    emit: E,
    /// Sliding windows: each key's partial aggregates by slice end.
    slices: MapState<i64, T>,
    /// Session windows: each key's sessions, start → (end, aggregate).
    sessions: MapState<i64, (i64, T)>,
    late: u64,
}

impl<T: Data, F: Fn(T, T) -> T + 'static, E> WindowReduce<T, F, E> {
    pub(crate) fn new(
        windows: EventTimeWindows,
        reduce: F,
        emit: E,
        store: &KeyedStateStore,
    ) -> Result<Self, TaskError> {
        Ok(WindowReduce {
            windows,
            reduce,
            emit,
            slices: store.map_state("window-slices")?,
            sessions: store.map_state("window-sessions")?,
            late: 0,
        })
    }

    /// Records dropped because every window they belong to had fired.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn late_records(&self) -> u64 {
        self.late
    }
}

impl<T: Data, F: Fn(T, T) -> T, E> WindowReduce<T, F, E> {
    /// Opens `[timestamp, timestamp + gap)` for the current key and merges it with the key's
    /// sessions it overlaps or touches; late if even the merged session has ended.
    fn add_to_session(
        &mut self,
        timestamp: i64,
        gap: i64,
        record: T,
        ctx: &mut Context<'_>,
    ) -> Result<(), TaskError> {
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
        if merged.max_timestamp() <= ctx.current_watermark() {
            self.late += 1;
            return Ok(());
        }
        for (start, end, _) in &parts {
            self.sessions.remove(start)?;
            if *end != merged.end {
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
        if let Some(value) = value {
            self.sessions.put(merged.start, (merged.end, value))?;
            ctx.register_event_time_timer(merged.max_timestamp())?;
        }
        Ok(())
    }

    /// Emits and forgets the current key's session that ends at `end`.
    fn close_session<K, O>(
        &mut self,
        key: &K,
        end: i64,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError>
    where
        E: Fn(&K, TimeWindow, T) -> O,
    {
        let found = self
            .sessions
            .entries()?
            .into_iter()
            .find(|(_, (e, _))| *e == end);
        match found {
            Some((start, (_, value))) => {
                self.sessions.remove(&start)?;
                out.collect((self.emit)(key, TimeWindow { start, end }, value))
            }
            None => Ok(()),
        }
    }
}

impl<K, T: Data, O, F: Fn(T, T) -> T + 'static, E: Fn(&K, TimeWindow, T) -> O + 'static>
    KeyedProcessFunction<K, T, O> for WindowReduce<T, F, E>
{
    fn process(
        &mut self,
        _key: &K,
        record: T,
        ctx: &mut Context<'_>,
        _out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        let Some(timestamp) = ctx.timestamp() else {
            return Err(TaskError::User(
                "an event-time window got a record without a timestamp: assign timestamps \
                 (assign_timestamps_and_watermarks) before the window"
                    .into(),
            ));
        };
        let windows = match self.windows.kind {
            Kind::Sliding(windows) => windows,
            Kind::Session { gap } => return self.add_to_session(timestamp, gap, record, ctx),
        };
        let watermark = ctx.current_watermark();
        let mut open = false;
        for end in windows.window_ends(timestamp) {
            // A window fires when the watermark reaches its last instant, end - 1.
            if end - 1 > watermark {
                ctx.register_event_time_timer(end - 1)?;
                open = true;
            }
        }
        if !open {
            self.late += 1;
            return Ok(());
        }
        let slice = windows.slice_end(timestamp);
        let value = match self.slices.get(&slice)? {
            Some(acc) => (self.reduce)(acc, record),
            None => record,
        };
        Ok(self.slices.put(slice, value)?)
    }

    fn on_timer(
        &mut self,
        key: &K,
        timestamp: i64,
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), TaskError> {
        let end = timestamp + 1;
        let windows = match self.windows.kind {
            Kind::Sliding(windows) => windows,
            Kind::Session { .. } => return self.close_session(key, end, out),
        };
        let mut result: Option<T> = None;
        for slice in windows.slices_of(end) {
            if let Some(part) = self.slices.get(&slice)? {
                result = Some(match result {
                    Some(acc) => (self.reduce)(acc, part),
                    None => part,
                });
            }
        }
        // The next window starts one slide later: the slices before that are done.
        let start = end - windows.size;
        for slice in windows.slices_of(end) {
            if slice <= start + windows.slide {
                self.slices.remove(&slice)?;
            }
        }
        match result {
            Some(value) => out.collect((self.emit)(key, TimeWindow { start, end }, value)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operators::testing::Collect;
    use crate::api::operators::{BoxOutput, KeyedProcess, Output};
    use crate::network::valve::TimeSignal;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;

    /// Gives the window its records' timestamps, as a stream with timestamps does, and counts
    /// late ones where the test can see them.
    type Window = fn(&u8, TimeWindow, u64) -> (i64, u64);
    struct Stamping(
        WindowReduce<u64, fn(u64, u64) -> u64, Window>,
        Rc<RefCell<u64>>,
    );

    impl KeyedProcessFunction<u8, (i64, u64), (i64, u64)> for Stamping {
        fn process(
            &mut self,
            key: &u8,
            (ts, value): (i64, u64),
            ctx: &mut Context<'_>,
            out: &mut Collector<'_, (i64, u64)>,
        ) -> Result<(), TaskError> {
            ctx.timestamp = Some(ts);
            self.0.process(key, value, ctx, out)?;
            *self.1.borrow_mut() = self.0.late_records();
            Ok(())
        }
        fn on_timer(
            &mut self,
            key: &u8,
            ts: i64,
            ctx: &mut Context<'_>,
            out: &mut Collector<'_, (i64, u64)>,
        ) -> Result<(), TaskError> {
            self.0.on_timer(key, ts, ctx, out)
        }
    }

    #[test]
    fn sessions_merge_when_they_overlap_or_touch_and_fire_once_their_gap_has_passed() {
        let ctx = crate::api::RuntimeContext::standalone(0, 1);
        let store = ctx.keyed_state_store().unwrap();
        let windows = EventTimeSessionWindows::with_gap(Duration::from_millis(10));
        let sum: fn(u64, u64) -> u64 = |a, b| a + b;
        let late = Rc::new(RefCell::new(0));
        let start: Window = |_, window, sum| (window.start, sum);
        let reduce = WindowReduce::new(windows, sum, start, &store).unwrap();
        let got = Rc::new(RefCell::new(Vec::new()));
        let next: BoxOutput<(i64, u64)> =
            Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
        let key = Arc::new(|_: &(i64, u64)| 0u8);
        let function = Stamping(reduce, late.clone());
        let mut op = KeyedProcess::new(key, function, store, ctx.timers.clone(), 0, next).unwrap();
        // [1, 11) and [5, 15) merge; [30, 40) stands apart.
        op.push_batch(&mut vec![(1, 1), (5, 1), (30, 1)]).unwrap();
        op.time(TimeSignal::Watermark(20)).unwrap();
        assert_eq!(*got.borrow(), [(1, 2)]);
        // [3, 13) has ended at watermark 20 (had [12, 22) been open, 3 would have joined it):
        // late. 25 joins [30, 40); then 22 touches [12, 22) and overlaps [25, 40): one
        // session [12, 40).
        op.push_batch(&mut vec![(3, 1), (12, 1), (25, 1), (22, 1)])
            .unwrap();
        assert_eq!(*late.borrow(), 1);
        op.time(TimeSignal::Watermark(i64::MAX)).unwrap();
        assert_eq!(*got.borrow(), [(1, 2), (12, 4)]);
    }

    #[test]
    fn sliding_windows_fire_in_time_order_and_drop_records_too_late_for_all_of_theirs() {
        let ctx = crate::api::RuntimeContext::standalone(0, 1);
        let store = ctx.keyed_state_store().unwrap();
        let windows =
            SlidingEventTimeWindows::of(Duration::from_millis(10), Duration::from_millis(5));
        let sum: fn(u64, u64) -> u64 = |a, b| a + b;
        let late = Rc::new(RefCell::new(0));
        let start: Window = |_, window, sum| (window.start, sum);
        let reduce = WindowReduce::new(windows, sum, start, &store).unwrap();
        let function = Stamping(reduce, late.clone());
        let got = Rc::new(RefCell::new(Vec::new()));
        let next: BoxOutput<(i64, u64)> =
            Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
        let key = Arc::new(|_: &(i64, u64)| 0u8);
        let mut op = KeyedProcess::new(key, function, store, ctx.timers.clone(), 0, next).unwrap();
        op.push_batch(&mut vec![(1, 1), (3, 1), (6, 1)]).unwrap();
        op.time(TimeSignal::Watermark(9)).unwrap();
        // [-5, 5) holds 1 and 3; [0, 10) holds 1, 3 and 6.
        assert_eq!(*got.borrow(), [(-5, 2), (0, 3)]);
        // 2 belongs only to windows that fired: late. 7 still counts for [5, 15).
        op.push_batch(&mut vec![(12, 1), (2, 1), (7, 1)]).unwrap();
        assert_eq!(*late.borrow(), 1);
        op.time(TimeSignal::Watermark(i64::MAX)).unwrap();
        // [5, 15): 6, 7, 12; [10, 20): 12.
        assert_eq!(*got.borrow(), [(-5, 2), (0, 3), (5, 3), (10, 1)]);
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
