//! The window join (Flink's `join(..).where(..).equalTo(..).window(..).apply(..)`, and its
//! `coGroup`): two keyed streams on the keyed two-input operator (`super::co_process`), each
//! side's records of a key kept in keyed state by the end of each window they belong to (the
//! window operator's assignment, `super::windows`), and a timer per key and window at its end -
//! 1 that hands both sides' records to the function and drops them.

use std::hash::Hash;
use std::sync::Arc;

use super::co_process::{KeyedCoProcessFunction, KeyedConnectedStreams, buffer};
use super::env::{DataStream, KeyedStream};
use super::operators::{Collector, Context};
use super::time::Stamped;
use super::windows::{EventTimeWindows, Sliding, TimeWindow};
use crate::common::error::TaskError;
use crate::record::Data;
use crate::state::MapState;

/// Two streams to join by key within event-time windows (Flink's `JoinedStreams`); see
/// [`DataStream::join`].
pub struct JoinedStreams<A, B> {
    left: DataStream<A>,
    right: DataStream<B>,
}

/// A window join with the left side's key; [`equal_to`](Self::equal_to) names the right's.
pub struct JoinWhere<A, B, K> {
    left: KeyedStream<A, K>,
    right: DataStream<B>,
}

/// A window join with both keys; [`window`](Self::window) says which windows.
pub struct JoinEqual<A, B, K> {
    inputs: KeyedConnectedStreams<A, B, K>,
}

/// A window join ready to run: [`apply`](Self::apply) joins pairs, [`co_group`](Self::co_group)
/// sees each window's records of a key together.
pub struct WindowedJoin<A, B, K> {
    inputs: KeyedConnectedStreams<A, B, K>,
    windows: EventTimeWindows,
}

impl<A: Data> DataStream<A> {
    /// Joins this stream (the left) with `other` (the right) by key within event-time windows
    /// (Flink's `join`): `a.join(&b).where_key(ka).equal_to(kb).window(w).apply(f)` calls
    /// `f(left, right)` for every pair of records with equal keys in the same window. Both
    /// streams need timestamps; records behind the watermark when they come (too late for
    /// every window they belong to) are dropped.
    pub fn join<B: Data>(&self, other: &DataStream<B>) -> JoinedStreams<A, B> {
        JoinedStreams {
            left: self.clone(),
            right: other.clone(),
        }
    }
}

impl<A: Data, B: Data> JoinedStreams<A, B> {
    /// The left records' key (Flink's `where`).
    pub fn where_key<K: Data + Hash + Eq>(
        self,
        key: impl Fn(&A) -> K + Send + Sync + 'static,
    ) -> JoinWhere<A, B, K> {
        JoinWhere {
            left: self.left.key_by(key),
            right: self.right,
        }
    }
}

impl<A: Data, B: Data, K: Data + Hash + Eq> JoinWhere<A, B, K> {
    /// The right records' key, of the same type (Flink's `equalTo`).
    pub fn equal_to(self, key: impl Fn(&B) -> K + Send + Sync + 'static) -> JoinEqual<A, B, K> {
        JoinEqual {
            inputs: self.left.connect(&self.right.key_by(key)),
        }
    }
}

impl<A: Data, B: Data, K: Data + Hash + Eq> JoinEqual<A, B, K> {
    /// The windows records meet in: tumbling or sliding ([`TumblingEventTimeWindows`],
    /// [`SlidingEventTimeWindows`]); session windows, which merge, are refused when the job
    /// starts.
    pub fn window(self, windows: EventTimeWindows) -> WindowedJoin<A, B, K> {
        WindowedJoin {
            inputs: self.inputs,
            windows,
        }
    }
}

impl<A: Data, B: Data, K: Data + Hash + Eq> WindowedJoin<A, B, K> {
    /// `f(left, right)` for every pair of a key and window (Flink's `JoinFunction`), emitted
    /// when the watermark passes the window's end, with the timestamp `end - 1`.
    pub fn apply<O: Data>(&self, f: impl Fn(A, B) -> O + Send + Sync + 'static) -> DataStream<O> {
        let f = Arc::new(f);
        self.run("Window Join", move |_: &K, _, lefts, rights, out| {
            for left in &lefts {
                for right in &rights {
                    out.collect(f(left.clone(), right.clone()))?;
                }
            }
            Ok(())
        })
    }

    /// `f(key, window, lefts, rights)` once for every key and window with records on either
    /// side (Flink's `coGroup` with a `CoGroupFunction`): what it returns is emitted when the
    /// watermark passes the window's end, with the timestamp `end - 1`.
    pub fn co_group<O: Data, I: IntoIterator<Item = O>>(
        &self,
        f: impl Fn(&K, TimeWindow, Vec<A>, Vec<B>) -> I + Send + Sync + 'static,
    ) -> DataStream<O> {
        let f = Arc::new(f);
        self.run(
            "Window CoGroup",
            move |key: &K, window, lefts, rights, out| {
                for o in f(key, window, lefts, rights) {
                    out.collect(o)?;
                }
                Ok(())
            },
        )
    }

    fn run<O: Data>(
        &self,
        name: &str,
        group: impl Fn(&K, TimeWindow, Vec<A>, Vec<B>, &mut Collector<'_, O>) -> Result<(), TaskError>
        + Send
        + Sync
        + 'static,
    ) -> DataStream<O> {
        let problem = (!self.inputs.timestamped()).then(|| {
            "a window join needs timestamps on both streams (assign_timestamps_and_watermarks)"
                .to_string()
        });
        let fixed = self.windows.fixed();
        let group = Arc::new(group);
        self.inputs.stamped_process(name, problem, move |store| {
            let windows = fixed.ok_or_else(|| {
                TaskError::Setup(
                    "a window join takes tumbling or sliding event-time windows, not session or \
                     processing-time windows"
                        .into(),
                )
            })?;
            Ok(WindowJoinFunction {
                windows,
                left: store.map_state("window-join-left")?,
                right: store.map_state("window-join-right")?,
                group: group.clone(),
            })
        })
    }
}

/// The window join of one subtask: each side's records of a key by the end of each window
/// they belong to, and a timer per window end.
struct WindowJoinFunction<A, B, G> {
    windows: Sliding,
    left: MapState<i64, Vec<A>>,
    right: MapState<i64, Vec<B>>,
    /// What makes a key's window's results from both sides' records.
    group: Arc<G>,
}

impl<A: Data, B: Data, G> WindowJoinFunction<A, B, G> {
    /// Keeps `record` at `ts` for each of its windows the watermark has not passed.
    fn add<T: Data>(
        windows: Sliding,
        side: &MapState<i64, Vec<T>>,
        ts: i64,
        record: T,
        ctx: &mut Context<'_>,
    ) -> Result<(), TaskError> {
        let watermark = ctx.current_watermark();
        for end in windows.window_ends(ts) {
            if end - 1 > watermark {
                buffer(side, end, record.clone())?;
                ctx.register_event_time_timer(end - 1)?;
            }
        }
        Ok(())
    }
}

impl<K, A, B, O, G> KeyedCoProcessFunction<K, Stamped<A>, Stamped<B>, Stamped<O>>
    for WindowJoinFunction<A, B, G>
where
    A: Data,
    B: Data,
    O: 'static,
    G: Fn(&K, TimeWindow, Vec<A>, Vec<B>, &mut Collector<'_, O>) -> Result<(), TaskError> + 'static,
{
    fn process_element1(
        &mut self,
        _key: &K,
        (ts, left): Stamped<A>,
        ctx: &mut Context<'_>,
        _out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        Self::add(self.windows, &self.left, ts, left, ctx)
    }

    fn process_element2(
        &mut self,
        _key: &K,
        (ts, right): Stamped<B>,
        ctx: &mut Context<'_>,
        _out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        Self::add(self.windows, &self.right, ts, right, ctx)
    }

    fn on_timer(
        &mut self,
        key: &K,
        timestamp: i64,
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        let end = timestamp.saturating_add(1);
        let lefts = self.left.get(&end)?.unwrap_or_default();
        let rights = self.right.get(&end)?.unwrap_or_default();
        self.left.remove(&end)?;
        self.right.remove(&end)?;
        if lefts.is_empty() && rights.is_empty() {
            return Ok(());
        }
        let window = TimeWindow {
            start: end - self.windows.size,
            end,
        };
        let mut emitted = Vec::new();
        (self.group)(
            key,
            window,
            lefts,
            rights,
            &mut Collector::new(&mut emitted),
        )?;
        for o in emitted {
            out.collect((timestamp, o))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::co_process::tests::{Join, Joined};
    use crate::api::{SlidingEventTimeWindows, TumblingEventTimeWindows};
    use std::time::Duration;

    /// A window join of `(timestamp, value)` records keyed by `value % 2` whose group function
    /// is `group`.
    fn join(
        windows: EventTimeWindows,
        group: impl Fn(
            &u32,
            TimeWindow,
            Vec<u32>,
            Vec<u32>,
            &mut Collector<'_, String>,
        ) -> Result<(), TaskError>
        + 'static,
    ) -> Join {
        let windows = windows.fixed().unwrap();
        Join::with(move |store| {
            Ok(WindowJoinFunction {
                windows,
                left: store.map_state("window-join-left")?,
                right: store.map_state("window-join-right")?,
                group: Arc::new(group),
            })
        })
    }

    fn pairs(
        _: &u32,
        _: TimeWindow,
        l: Vec<u32>,
        r: Vec<u32>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), TaskError> {
        for a in &l {
            for b in &r {
                out.collect(format!("{a}+{b}"))?;
            }
        }
        Ok(())
    }

    fn joined(items: &[(i64, &str)]) -> Vec<Joined> {
        items.iter().map(|(t, s)| (*t, s.to_string())).collect()
    }

    #[test]
    fn sliding_window_join_pairs_records_of_a_key_in_each_window_they_share() {
        let ms = Duration::from_millis;
        let mut j = join(SlidingEventTimeWindows::of(ms(10), ms(5)), pairs);
        // Keys are value % 2. Left 2 at 7 is in [0, 10) and [5, 15); right 4 at 12 in [5, 15)
        // and [10, 20): they meet once, in [5, 15). Right 6 at 3 meets left 2 in [0, 10); 3
        // (key 1) meets nothing.
        j.left(&[(7, 2), (7, 3)]);
        j.right(&[(12, 4), (3, 6)]);
        j.watermark(9);
        assert_eq!(j.take(), joined(&[(9, "2+6")]));
        j.watermark(14);
        assert_eq!(j.take(), joined(&[(14, "2+4")]));
        j.watermark(i64::MAX);
        assert_eq!(j.take(), joined(&[]));
        assert_eq!(
            j.entries("window-join-left") + j.entries("window-join-right"),
            0
        );
    }

    #[test]
    fn records_too_late_for_all_their_windows_are_dropped_and_co_group_sees_one_side_alone() {
        let windows = TumblingEventTimeWindows::of(Duration::from_millis(10));
        let mut j = join(windows, |key, window, l, r, out| {
            out.collect(format!("{key}@{}:{}/{}", window.start, l.len(), r.len()))
        });
        j.left(&[(1, 2), (3, 4)]);
        j.right(&[(12, 3)]);
        j.watermark(10);
        assert_eq!(j.take(), joined(&[(9, "0@0:2/0")]));
        // [0, 10) has fired: a record for it now is late and kept nowhere.
        j.right(&[(5, 6)]);
        assert_eq!(j.entries("window-join-right"), 1, "only the record at 12");
        j.watermark(i64::MAX);
        assert_eq!(j.take(), joined(&[(19, "1@10:0/1")]));
    }
}
