//! Flink's `MeterView`: the rate of a counter over a sliding time window, computed from samples
//! of the counter when it is read, never per event.

use std::collections::VecDeque;

/// Flink's default window of a `...PerSecond` meter.
pub const DEFAULT_WINDOW_MS: u64 = 60_000;

/// Samples closer together than this replace the newest one instead of adding another, so a
/// meter read often (every scrape, every REST request) holds at most window / this samples.
const MIN_SAMPLE_GAP_MS: u64 = 1_000;

/// A counter's samples over the last window; its rate is the counter's growth over the span
/// the samples cover, per second.
#[derive(Debug, Clone)]
pub struct MeterView {
    window_ms: u64,
    /// `(time in ms, counter value)`, oldest first.
    samples: VecDeque<(u64, u64)>,
}

impl Default for MeterView {
    fn default() -> Self {
        MeterView::new(DEFAULT_WINDOW_MS)
    }
}

impl MeterView {
    /// A meter averaging over `window_ms` milliseconds.
    pub fn new(window_ms: u64) -> Self {
        MeterView {
            window_ms: window_ms.max(1),
            samples: VecDeque::new(),
        }
    }

    /// Records that the counter read `count` at `now_ms`. A counter that went down was reset
    /// (a new attempt): the history before it is dropped.
    pub fn update(&mut self, now_ms: u64, count: u64) {
        if let Some(&(t, c)) = self.samples.back() {
            if count < c || now_ms < t {
                self.samples.clear();
            } else if now_ms - t < MIN_SAMPLE_GAP_MS && self.samples.len() > 1 {
                self.samples.pop_back();
            }
        }
        self.samples.push_back((now_ms, count));
        // Keep one sample at or before the window's start, so the rate spans the whole window.
        let start = now_ms.saturating_sub(self.window_ms);
        while self.samples.len() > 2 && self.samples[1].0 <= start {
            self.samples.pop_front();
        }
    }

    /// Events per second over the samples' span (at most the window); 0 before two samples.
    pub fn rate(&self) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some(&(t0, c0)), Some(&(t1, c1))) if t1 > t0 => {
                (c1 - c0) as f64 * 1000.0 / (t1 - t0) as f64
            }
            _ => 0.0,
        }
    }

    /// The counter's last value.
    pub fn count(&self) -> u64 {
        self.samples.back().map_or(0, |&(_, c)| c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_counter_gives_its_rate() {
        let mut m = MeterView::default();
        assert_eq!(m.rate(), 0.0, "no rate before two samples");
        for s in 0..=10u64 {
            m.update(s * 1000, s * 250);
        }
        assert!((m.rate() - 250.0).abs() < 1e-9);
        assert_eq!(m.count(), 2500);
    }

    #[test]
    fn the_rate_covers_only_the_window() {
        let mut m = MeterView::new(10_000);
        // 100/s for 30 s, then nothing for 10 s.
        for s in 0..=30u64 {
            m.update(s * 1000, s * 100);
        }
        for s in 31..=40u64 {
            m.update(s * 1000, 3000);
        }
        assert_eq!(m.rate(), 0.0, "the busy period left the window");
        m.update(41_000, 3500);
        assert!((m.rate() - 50.0).abs() < 1e-9, "{}", m.rate());
        assert!(m.samples.len() <= 12, "old samples are dropped");
    }

    #[test]
    fn frequent_reads_do_not_pile_up_samples() {
        let mut m = MeterView::default();
        for ms in (0..60_000u64).step_by(10) {
            m.update(ms, ms);
        }
        assert!(m.samples.len() <= 62, "{} samples", m.samples.len());
        assert!((m.rate() - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn a_reset_counter_starts_over() {
        let mut m = MeterView::default();
        m.update(0, 0);
        m.update(1000, 5000);
        m.update(2000, 10);
        assert_eq!(m.rate(), 0.0);
        m.update(3000, 110);
        assert!((m.rate() - 100.0).abs() < 1e-9);
    }
}
