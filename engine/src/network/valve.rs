//! Event time across a task's input channels: each channel carries its producer's watermarks
//! and its idle or active status; the task's input watermark is the least watermark of the
//! channels that are active, and it only ever grows (Flink's `StatusWatermarkValve`). A pure
//! core: it takes signals per channel and says what the task's input time becomes.

/// What a channel says about event time, between its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeSignal {
    /// No record with a timestamp at or below this one (ms since the epoch) will follow.
    Watermark(i64),
    /// The producer emits nothing for a while: its watermark must not hold time back.
    Idle,
    /// The producer emits again after being idle.
    Active,
}

/// What the combined input time did after a signal: the new input watermark, if it advanced,
/// and the new status, if it changed. Emitted in the order `Active`, watermark, `Idle`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ValveOutput {
    /// The input became active (emit before the watermark).
    pub(crate) active: bool,
    /// The input watermark advanced to this.
    pub(crate) watermark: Option<i64>,
    /// Every input became idle (emit after the watermark).
    pub(crate) idle: bool,
}

impl ValveOutput {
    /// The signals to pass downstream, in order.
    pub(crate) fn signals(self) -> impl Iterator<Item = TimeSignal> {
        let active = self.active.then_some(TimeSignal::Active);
        let watermark = self.watermark.map(TimeSignal::Watermark);
        let idle = self.idle.then_some(TimeSignal::Idle);
        active.into_iter().chain(watermark).chain(idle)
    }
}

#[derive(Clone, Copy, Debug)]
struct Channel {
    watermark: i64,
    idle: bool,
    /// Whether its watermark counts for the minimum: it is active and has caught up with the
    /// input watermark (a channel that returns from idleness behind it does not pull time
    /// back; its records are late until it catches up).
    aligned: bool,
}

/// The input watermark of one task over its channels.
#[derive(Clone, Debug)]
pub(crate) struct WatermarkValve {
    channels: Vec<Channel>,
    /// The input watermark last passed on (`i64::MIN` before the first).
    output: i64,
    /// Whether every channel is idle (the status last passed on).
    idle: bool,
}

impl WatermarkValve {
    /// A valve over `channels` channels, all active, no watermark yet.
    pub(crate) fn new(channels: usize) -> Self {
        WatermarkValve {
            channels: vec![
                Channel {
                    watermark: i64::MIN,
                    idle: false,
                    aligned: true,
                };
                channels
            ],
            output: i64::MIN,
            idle: false,
        }
    }

    /// The input watermark passed on so far (`i64::MIN` before the first).
    #[cfg(test)]
    pub(crate) fn watermark(&self) -> i64 {
        self.output
    }

    /// Takes `signal` from channel `channel`.
    pub(crate) fn on_signal(&mut self, channel: usize, signal: TimeSignal) -> ValveOutput {
        let mut out = ValveOutput::default();
        let Some(ch) = self.channels.get(channel).copied() else {
            return out;
        };
        match signal {
            TimeSignal::Watermark(wm) => {
                // A watermark of an idle channel (or of an idle input) says nothing.
                if self.idle || ch.idle || wm <= ch.watermark {
                    return out;
                }
                let c = &mut self.channels[channel];
                c.watermark = wm;
                if wm >= self.output {
                    c.aligned = true;
                }
                out.watermark = self.advance_to_min();
            }
            TimeSignal::Idle => {
                if ch.idle {
                    return out;
                }
                let c = &mut self.channels[channel];
                c.idle = true;
                c.aligned = false;
                if self.channels.iter().all(|c| c.idle) {
                    // Time may move to the most any channel has seen: nothing active holds it.
                    if ch.watermark == self.output {
                        out.watermark = self.advance_to_max();
                    }
                    self.idle = true;
                    out.idle = true;
                } else if ch.watermark == self.output {
                    out.watermark = self.advance_to_min();
                }
            }
            TimeSignal::Active => {
                if !ch.idle {
                    return out;
                }
                let output = self.output;
                let c = &mut self.channels[channel];
                c.idle = false;
                c.aligned = c.watermark >= output;
                if self.idle {
                    self.idle = false;
                    out.active = true;
                }
            }
        }
        out
    }

    /// Channel `channel` ended: nothing of it will come, so it holds no time back.
    pub(crate) fn on_end(&mut self, channel: usize) -> ValveOutput {
        let mut out = self.on_signal(channel, TimeSignal::Active);
        let after = self.on_signal(channel, TimeSignal::Watermark(i64::MAX));
        out.watermark = after.watermark;
        out
    }

    fn advance_to_min(&mut self) -> Option<i64> {
        let min = self
            .channels
            .iter()
            .filter(|c| c.aligned)
            .map(|c| c.watermark)
            .min()?;
        self.advance(min)
    }

    fn advance_to_max(&mut self) -> Option<i64> {
        let max = self.channels.iter().map(|c| c.watermark).max()?;
        self.advance(max)
    }

    fn advance(&mut self, to: i64) -> Option<i64> {
        (to > self.output).then(|| {
            self.output = to;
            to
        })
    }
}

/// Event time of a task with two logical inputs (a two-input operator, Flink's
/// `TwoInputStreamOperator`): one [`WatermarkValve`] per input over that input's channels, and
/// the operator's input watermark the least of the two inputs' watermarks, an idle input left
/// out (Flink's combined watermark status). The task is idle when both inputs are; an input
/// whose channels all ended has the watermark `i64::MAX` and holds nothing back. A pure core
/// like the valve.
#[derive(Clone, Debug)]
pub(crate) struct TwoInputValves {
    /// Per channel of the task's gate: its input (0 or 1) and its index among that input's
    /// channels.
    channels: Vec<(usize, usize)>,
    inputs: [WatermarkValve; 2],
    /// Per input: the watermark its valve passed on last.
    watermarks: [i64; 2],
    /// Per input: whether all its channels are idle.
    idle: [bool; 2],
    /// The combined watermark passed on so far.
    output: i64,
    /// Whether the combined status last passed on is idle.
    output_idle: bool,
}

impl TwoInputValves {
    /// Valves over the gate's channels, `channel_inputs[c]` saying which input (0 or 1)
    /// channel `c` belongs to. An input without channels counts as ended.
    pub(crate) fn new(channel_inputs: &[usize]) -> Self {
        let mut counts = [0usize; 2];
        let channels = channel_inputs
            .iter()
            .map(|&input| {
                let input = input.min(1);
                counts[input] += 1;
                (input, counts[input] - 1)
            })
            .collect();
        let ended = |n: usize| if n == 0 { i64::MAX } else { i64::MIN };
        TwoInputValves {
            channels,
            inputs: [
                WatermarkValve::new(counts[0]),
                WatermarkValve::new(counts[1]),
            ],
            watermarks: [ended(counts[0]), ended(counts[1])],
            idle: [false; 2],
            output: i64::MIN,
            output_idle: false,
        }
    }

    /// The input channel `channel` belongs to (0 or 1).
    pub(crate) fn input_of(&self, channel: usize) -> usize {
        self.channels.get(channel).map_or(0, |&(input, _)| input)
    }

    /// Takes `signal` from channel `channel`.
    pub(crate) fn on_signal(&mut self, channel: usize, signal: TimeSignal) -> ValveOutput {
        let Some(&(input, local)) = self.channels.get(channel) else {
            return ValveOutput::default();
        };
        let out = self.inputs[input].on_signal(local, signal);
        self.combine(input, out)
    }

    /// Channel `channel` ended.
    pub(crate) fn on_end(&mut self, channel: usize) -> ValveOutput {
        let Some(&(input, local)) = self.channels.get(channel) else {
            return ValveOutput::default();
        };
        let out = self.inputs[input].on_end(local);
        self.combine(input, out)
    }

    /// Applies what input `input`'s valve passed on, and says what the combined time did.
    fn combine(&mut self, input: usize, out: ValveOutput) -> ValveOutput {
        if out.active {
            self.idle[input] = false;
        }
        if let Some(w) = out.watermark {
            self.watermarks[input] = w;
        }
        if out.idle {
            self.idle[input] = true;
        }
        let mut combined = ValveOutput::default();
        let all_idle = self.idle.iter().all(|&idle| idle);
        if all_idle {
            if !self.output_idle {
                self.output_idle = true;
                combined.idle = true;
            }
            return combined;
        }
        if self.output_idle {
            self.output_idle = false;
            combined.active = true;
        }
        let min = (0..2)
            .filter(|&i| !self.idle[i])
            .map(|i| self.watermarks[i])
            .min()
            .unwrap_or(i64::MIN);
        if min > self.output {
            self.output = min;
            combined.watermark = Some(min);
        }
        combined
    }
}

#[cfg(test)]
mod tests {
    use super::TimeSignal::{Active, Idle, Watermark};
    use super::*;

    fn wm(out: ValveOutput) -> Option<i64> {
        out.watermark
    }

    #[test]
    fn the_input_watermark_is_the_least_of_the_channels_and_never_goes_back() {
        let mut v = WatermarkValve::new(2);
        assert_eq!(
            wm(v.on_signal(0, Watermark(10))),
            None,
            "channel 1 has none yet"
        );
        assert_eq!(wm(v.on_signal(1, Watermark(5))), Some(5));
        assert_eq!(wm(v.on_signal(1, Watermark(20))), Some(10));
        assert_eq!(
            wm(v.on_signal(1, Watermark(15))),
            None,
            "a channel's own goes back"
        );
        assert_eq!(wm(v.on_signal(0, Watermark(30))), Some(20));
        assert_eq!(v.watermark(), 20);
    }

    #[test]
    fn an_idle_channel_does_not_hold_time_back_and_rejoins_once_caught_up() {
        let mut v = WatermarkValve::new(2);
        v.on_signal(0, Watermark(10));
        v.on_signal(1, Watermark(3));
        assert_eq!(v.watermark(), 3);
        // Channel 1 held the minimum; idle, it stops holding it.
        let out = v.on_signal(1, Idle);
        assert_eq!(out.watermark, Some(10));
        assert!(!out.idle, "channel 0 is still active");
        assert_eq!(wm(v.on_signal(0, Watermark(12))), Some(12));
        // Back behind the input watermark: not aligned, so time is not pulled back ...
        assert_eq!(v.on_signal(1, Active), ValveOutput::default());
        assert_eq!(wm(v.on_signal(1, Watermark(8))), None);
        assert_eq!(wm(v.on_signal(0, Watermark(40))), Some(40));
        // ... until it catches up: then it counts again.
        assert_eq!(
            wm(v.on_signal(1, Watermark(20))),
            None,
            "20 < 40 still behind"
        );
        assert_eq!(
            wm(v.on_signal(1, Watermark(50))),
            None,
            "aligned, 40 is the min"
        );
        assert_eq!(wm(v.on_signal(0, Watermark(60))), Some(50));
    }

    #[test]
    fn all_idle_moves_time_to_the_most_seen_then_reports_idle_and_active() {
        let mut v = WatermarkValve::new(2);
        v.on_signal(0, Watermark(7));
        v.on_signal(1, Watermark(4));
        assert_eq!(v.on_signal(0, Idle).watermark, None, "channel 1 holds 4");
        let out = v.on_signal(1, Idle);
        assert_eq!(
            out.signals().collect::<Vec<_>>(),
            [Watermark(7), Idle],
            "the most seen, then idle"
        );
        assert_eq!(wm(v.on_signal(0, Watermark(100))), None, "idle channel");
        let out = v.on_signal(0, Active);
        assert_eq!(out.signals().collect::<Vec<_>>(), [Active]);
        assert_eq!(wm(v.on_signal(0, Watermark(9))), Some(9));
    }

    #[test]
    fn ended_channels_hold_nothing_back_and_the_last_end_is_the_end_of_time() {
        let mut v = WatermarkValve::new(3);
        v.on_signal(0, Watermark(5));
        v.on_signal(1, Watermark(6));
        assert_eq!(wm(v.on_end(2)), Some(5));
        assert_eq!(wm(v.on_end(0)), Some(6));
        // The one channel left goes idle: the ended ones decide, and they are done.
        let out = v.on_signal(1, Idle);
        assert_eq!(out.signals().collect::<Vec<_>>(), [Watermark(i64::MAX)]);
        assert_eq!(v.on_end(1), ValveOutput::default());

        let mut v = WatermarkValve::new(2);
        v.on_signal(0, Idle);
        v.on_signal(1, Idle);
        let out = v.on_end(1);
        assert_eq!(
            out.signals().collect::<Vec<_>>(),
            [Active, Watermark(i64::MAX)]
        );
    }

    #[test]
    fn signals_of_unknown_channels_are_ignored() {
        let mut v = WatermarkValve::new(1);
        assert_eq!(v.on_signal(4, Watermark(1)), ValveOutput::default());
    }
    #[test]
    fn two_inputs_combine_to_the_least_input_watermark() {
        // Channels 0 and 2 are input 0, channel 1 is input 1.
        let mut v = TwoInputValves::new(&[0, 1, 0]);
        assert_eq!(v.input_of(1), 1);
        assert_eq!(
            wm(v.on_signal(0, Watermark(10))),
            None,
            "channel 2 has none"
        );
        assert_eq!(wm(v.on_signal(2, Watermark(12))), None, "input 1 has none");
        assert_eq!(wm(v.on_signal(1, Watermark(30))), Some(10));
        assert_eq!(wm(v.on_signal(0, Watermark(40))), Some(12));
        assert_eq!(wm(v.on_signal(2, Watermark(50))), Some(30));
        assert_eq!(wm(v.on_signal(1, Watermark(20))), None, "never goes back");
        assert_eq!(wm(v.on_signal(1, Watermark(45))), Some(40));
    }

    #[test]
    fn an_idle_input_does_not_hold_the_other_back_and_both_idle_is_idle() {
        let mut v = TwoInputValves::new(&[0, 1]);
        v.on_signal(0, Watermark(100));
        assert_eq!(wm(v.on_signal(1, Watermark(5))), Some(5));
        // Input 1 goes idle: input 0 alone decides. Its valve passes its own watermark on
        // first (5, not new), then idle.
        let out = v.on_signal(1, Idle);
        assert_eq!(out.signals().collect::<Vec<_>>(), [Watermark(100)]);
        assert_eq!(wm(v.on_signal(0, Watermark(120))), Some(120));
        // Both idle: the task is idle, time stays.
        let out = v.on_signal(0, Idle);
        assert_eq!(out.signals().collect::<Vec<_>>(), [Idle]);
        // Input 1 comes back behind: active again, but time is not pulled back.
        let out = v.on_signal(1, Active);
        assert_eq!(out.signals().collect::<Vec<_>>(), [Active]);
        assert_eq!(wm(v.on_signal(1, Watermark(60))), None);
        assert_eq!(wm(v.on_signal(1, Watermark(130))), Some(130));
    }

    #[test]
    fn an_ended_input_holds_nothing_back_and_both_ended_is_the_end_of_time() {
        let mut v = TwoInputValves::new(&[0, 0, 1]);
        v.on_signal(0, Watermark(3));
        v.on_signal(1, Watermark(4));
        assert_eq!(wm(v.on_signal(2, Watermark(9))), Some(3));
        assert_eq!(wm(v.on_end(0)), Some(4));
        assert_eq!(wm(v.on_end(1)), Some(9), "input 0 ended: input 1 decides");
        assert_eq!(wm(v.on_signal(2, Watermark(11))), Some(11));
        assert_eq!(wm(v.on_end(2)), Some(i64::MAX));
        // An input without channels counts as ended from the start.
        let mut v = TwoInputValves::new(&[1]);
        assert_eq!(wm(v.on_signal(0, Watermark(7))), Some(7));
    }
}
