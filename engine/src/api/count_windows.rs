//! Count windows over a keyed stream (Flink's `countWindow(size)` and
//! `countWindow(size, slide)`): every `slide` records of a key, the window of its last `size`
//! records is emitted.
//!
//! As for sliding time windows, records are not kept once per window: each key's records are
//! numbered (a counter in keyed state), cut into slices of the greatest common divisor of size
//! and slide, and each slice keeps one accumulator of the window function (for a process
//! function, the slice's records, each once). A window merges its slices when its last record
//! comes, and the slices no later window needs are dropped then.

use super::operators::{Collector, Context, KeyedProcessFunction};
use super::time::Stamped;
use super::windows::{WindowContext, WindowFunction, gcd};
use crate::common::error::TaskError;
use crate::record::Data;
use crate::state::{KeyedStateStore, MapState, ValueState};

/// A window of a key's records by their number: the records `first..end` in the order the key's
/// records came (0 for its first record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountWindow {
    /// The number of the window's first record.
    pub first: u64,
    /// One past the number of its last record.
    pub end: u64,
}

/// The windows of `size` records that end every `slide` records of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CountWindows {
    size: u64,
    slide: u64,
}

impl CountWindows {
    /// Windows of `size` records every `slide` (each at least 1).
    pub(crate) fn new(size: u64, slide: u64) -> Self {
        CountWindows {
            size: size.max(1),
            slide: slide.max(1),
        }
    }

    /// The number of records per slice: every window starts and ends at a slice boundary.
    fn slice(&self) -> u64 {
        gcd(self.size as i64, self.slide as i64) as u64
    }

    /// The first record of the window that ends at `end`.
    fn first(&self, end: u64) -> u64 {
        end.saturating_sub(self.size)
    }

    /// Whether record `n` belongs to some window (with a slide larger than the size some
    /// records fall between windows).
    fn in_a_window(&self, n: u64) -> bool {
        let end = (n / self.slide + 1) * self.slide;
        n >= self.first(end)
    }
}

/// The count window operator of one subtask: a counter per key, accumulators per key and
/// slice. What a window emits has the timestamp of the record that completed it.
pub(crate) struct CountOperator<A, F> {
    windows: CountWindows,
    function: F,
    /// Each key's number of records so far.
    count: ValueState<u64>,
    /// Each key's accumulators by slice number.
    slices: MapState<u64, A>,
}

impl<A: Data, F> CountOperator<A, F> {
    pub(crate) fn new(
        windows: CountWindows,
        function: F,
        store: &KeyedStateStore,
    ) -> Result<Self, TaskError> {
        Ok(CountOperator {
            windows,
            function,
            count: store.value_state("count-window-count")?,
            slices: store.map_state("count-window-slices")?,
        })
    }
}

impl<K, T: Data, A: Data, O, F: WindowFunction<K, T, CountWindow, O, Acc = A>>
    KeyedProcessFunction<K, Stamped<T>, Stamped<O>> for CountOperator<A, F>
{
    fn process(
        &mut self,
        key: &K,
        (timestamp, record): Stamped<T>,
        ctx: &mut Context<'_>,
        out: &mut Collector<'_, Stamped<O>>,
    ) -> Result<(), TaskError> {
        let n = self.count.value()?.unwrap_or(0);
        let end = n + 1;
        self.count.update(end)?;
        let slice = self.windows.slice();
        if self.windows.in_a_window(n) {
            let acc = self.function.add(self.slices.get(&(n / slice))?, record);
            self.slices.put(n / slice, acc)?;
        }
        if !end.is_multiple_of(self.windows.slide) {
            return Ok(());
        }
        let first = self.windows.first(end);
        let mut result: Option<A> = None;
        for s in first / slice..end / slice {
            if let Some(part) = self.slices.get(&s)? {
                result = Some(match result {
                    Some(acc) => self.function.merge(acc, part),
                    None => part,
                });
            }
        }
        // The next window starts at `first(end + slide)`: the slices before it are done.
        for s in first / slice..self.windows.first(end + self.windows.slide) / slice {
            self.slices.remove(&s)?;
        }
        let Some(acc) = result else {
            return Ok(());
        };
        let info = WindowContext {
            window: CountWindow { first, end },
            watermark: ctx.current_watermark(),
            processing_time: ctx.current_processing_time(),
        };
        let mut results = Vec::new();
        self.function
            .emit(key, &info, acc, &mut Collector::new(&mut results))?;
        for result in results {
            out.collect((timestamp, result))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operators::testing::Collect;
    use crate::api::operators::{BoxOutput, KeyedProcess};
    use crate::api::side::SideOutputs;
    use crate::api::windows::{Process, Reduce};
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;

    /// Runs a count window over `(key, value)` records keyed by the first field, as in a job.
    fn run<F: WindowFunction<u8, (u8, u64), CountWindow, O>, O: Clone + 'static>(
        windows: CountWindows,
        function: F,
        store: &KeyedStateStore,
        records: &[(u8, u64)],
    ) -> Vec<Stamped<O>>
    where
        F::Acc: Data,
    {
        let ctx = crate::api::RuntimeContext::standalone(0, 1);
        let op = CountOperator::new(windows, function, store).unwrap();
        let got = Rc::new(RefCell::new(Vec::new()));
        let next: BoxOutput<Stamped<O>> =
            Box::new(Collect(got.clone(), Rc::new(RefCell::new(false))));
        let key = Arc::new(|r: &Stamped<(u8, u64)>| r.1.0);
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
        use crate::api::operators::Output;
        let mut batch: Vec<_> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (i as i64, *r))
            .collect();
        op.push_batch(&mut batch).unwrap();
        op.finish().unwrap();
        got.borrow().clone()
    }

    fn sum()
    -> impl WindowFunction<u8, (u8, u64), CountWindow, (u8, CountWindow, u64), Acc = (u8, u64)>
    {
        Reduce {
            reduce: |a: (u8, u64), b: (u8, u64)| (a.0, a.1 + b.1),
            emit: |k: &u8, w: CountWindow, r: (u8, u64)| (*k, w, r.1),
        }
    }

    fn store() -> KeyedStateStore {
        crate::api::RuntimeContext::standalone(0, 1)
            .keyed_state_store()
            .unwrap()
    }

    fn w(first: u64, end: u64) -> CountWindow {
        CountWindow { first, end }
    }

    #[test]
    fn tumbling_count_windows_fire_per_key_every_size_records_and_not_at_the_end() {
        let records = [(1, 1), (2, 10), (1, 2), (1, 3), (2, 20), (1, 4), (1, 5)];
        let got = run(CountWindows::new(2, 2), sum(), &store(), &records);
        // Key 1: 1+2 (its records 0, 1), 3+4; key 2: 10+20; key 1's fifth waits for a sixth.
        assert_eq!(
            got,
            [
                (2, (1, w(0, 2), 3)),
                (4, (2, w(0, 2), 30)),
                (5, (1, w(2, 4), 7)),
            ]
        );
    }

    #[test]
    fn sliding_count_windows_fire_every_slide_over_the_last_size_and_drop_old_slices() {
        let records: Vec<(u8, u64)> = (1..=7).map(|v| (0, v)).collect();
        let s = store();
        let got = run(CountWindows::new(4, 2), sum(), &s, &records);
        // Every 2 records, the last 4 (fewer at first): 1+2, 1..4, 3..6.
        assert_eq!(
            got,
            [
                (1, (0, w(0, 2), 3)),
                (3, (0, w(0, 4), 10)),
                (5, (0, w(2, 6), 18)),
            ]
        );
        // Slices of 2 records: after the window ending at 6 only [4, 6) and [6, 8) remain.
        let slices = s.entries().unwrap();
        let left = slices
            .iter()
            .filter(|e| e.state == "count-window-slices")
            .count();
        assert_eq!(left, 2);
    }

    #[test]
    fn a_slide_longer_than_the_size_skips_the_records_between_windows() {
        let records: Vec<(u8, u64)> = (1..=10).map(|v| (0, v)).collect();
        let s = store();
        let got = run(CountWindows::new(2, 5), sum(), &s, &records);
        assert_eq!(got, [(4, (0, w(3, 5), 9)), (9, (0, w(8, 10), 19))]);
        let left = s.entries().unwrap();
        assert!(left.iter().all(|e| e.state != "count-window-slices"));
    }

    #[test]
    fn a_process_function_sees_each_window_records_in_order() {
        let records: Vec<(u8, u64)> = (1..=6).map(|v| (0, v)).collect();
        let process = |_: &u8,
                       ctx: &WindowContext<CountWindow>,
                       records: Vec<(u8, u64)>,
                       out: &mut Collector<'_, (CountWindow, Vec<u64>)>| {
            out.collect((ctx.window(), records.into_iter().map(|r| r.1).collect()))
        };
        let got = run(
            CountWindows::new(3, 3),
            Process { function: process },
            &store(),
            &records,
        );
        assert_eq!(
            got,
            [(2, (w(0, 3), vec![1, 2, 3])), (5, (w(3, 6), vec![4, 5, 6]))]
        );
    }
}
