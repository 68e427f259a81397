//! When a time window emits its result (Flink's triggers): by default once, when its clock
//! reaches its end; or after every `n` of a key's records in it ([`CountTrigger`]); or early,
//! every interval until its end ([`ContinuousEventTimeTrigger`],
//! [`ContinuousProcessingTimeTrigger`]); any of them purging the window's contents after each
//! firing ([`PurgingTrigger`]). Set with `WindowedStream::trigger`; the window operator
//! (`super::windows`) carries them out.

use std::time::Duration;

use crate::state::TimeDomain;

/// When a window fires, and whether its contents go after each firing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trigger {
    pub(crate) fires: Fires,
    /// Each firing empties the window: the next one sees only what came after it.
    pub(crate) purging: bool,
}

/// The firing rules a trigger has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fires {
    /// Once the window's clock reaches its end (`None`: whichever clock the windows follow,
    /// the default).
    AtEnd(Option<TimeDomain>),
    /// When the window has this many records of the key since it last fired; never at its
    /// end.
    Count(u64),
    /// At every multiple of `interval` ms of `domain` while the window is open and holds
    /// records, and at its end.
    Continuous { domain: TimeDomain, interval: i64 },
}

impl Trigger {
    /// The windows' own trigger: once, at their end.
    pub(crate) const DEFAULT: Trigger = Trigger {
        fires: Fires::AtEnd(None),
        purging: false,
    };

    /// Whether the window fires when its clock reaches its end, and at once for a record that
    /// comes after that within the allowed lateness (a late firing).
    pub(crate) fn fires_at_end(&self) -> bool {
        !matches!(self.fires, Fires::Count(_))
    }

    /// Why this trigger cannot serve windows of `domain` (`tumbling`: windows that do not
    /// overlap, whose contents a purge can drop), if it cannot.
    pub(crate) fn unfit_for(&self, domain: TimeDomain, tumbling: bool) -> Option<String> {
        match self.fires {
            Fires::AtEnd(Some(d)) if d != domain => {
                return Some(format!(
                    "{} on {} windows: use the trigger of their own clock",
                    trigger_name(d),
                    domain_name(domain)
                ));
            }
            Fires::Continuous {
                domain: TimeDomain::EventTime,
                ..
            } if domain == TimeDomain::ProcessingTime => {
                return Some(
                    "ContinuousEventTimeTrigger on processing-time windows: their records have \
                     no event time to fire by; use ContinuousProcessingTimeTrigger"
                        .into(),
                );
            }
            _ => {}
        }
        if self.purging && !tumbling {
            return Some(
                "PurgingTrigger on sliding or session windows: a sliding window shares its \
                 records with the windows it overlaps and a session may still merge, so only \
                 tumbling windows can be purged"
                    .into(),
            );
        }
        None
    }
}

fn trigger_name(domain: TimeDomain) -> &'static str {
    match domain {
        TimeDomain::EventTime => "EventTimeTrigger",
        TimeDomain::ProcessingTime => "ProcessingTimeTrigger",
    }
}

fn domain_name(domain: TimeDomain) -> &'static str {
    match domain {
        TimeDomain::EventTime => "event-time",
        TimeDomain::ProcessingTime => "processing-time",
    }
}

fn millis(interval: Duration) -> i64 {
    (interval.as_millis().min(i64::MAX as u128 / 4) as i64).max(1)
}

/// Fires an event-time window once, when the watermark passes its end (the default of
/// event-time windows; Flink's `EventTimeTrigger`).
pub struct EventTimeTrigger;

impl EventTimeTrigger {
    /// The trigger.
    pub fn create() -> Trigger {
        Trigger {
            fires: Fires::AtEnd(Some(TimeDomain::EventTime)),
            purging: false,
        }
    }
}

/// Fires a processing-time window once, when the clock reaches its end (the default of
/// processing-time windows; Flink's `ProcessingTimeTrigger`).
pub struct ProcessingTimeTrigger;

impl ProcessingTimeTrigger {
    /// The trigger.
    pub fn create() -> Trigger {
        Trigger {
            fires: Fires::AtEnd(Some(TimeDomain::ProcessingTime)),
            purging: false,
        }
    }
}

/// Fires a window each time it has `n` more records of the key (Flink's `CountTrigger`): its
/// result then covers every record so far, or, purging, the last `n`. It never fires at the
/// window's end; the window's state still goes then (after the allowed lateness), unfired
/// records with it.
pub struct CountTrigger;

impl CountTrigger {
    /// Fires at every `n`th record (at least 1).
    pub fn of(n: u64) -> Trigger {
        Trigger {
            fires: Fires::Count(n.max(1)),
            purging: false,
        }
    }
}

/// Fires an event-time window early, whenever the watermark passes a multiple of `interval`
/// (ms since the epoch) inside it, while it holds records, and at its end as the default does
/// (Flink's `ContinuousEventTimeTrigger`). The end of input fires each window's final result
/// once, not once for every interval left before its end.
pub struct ContinuousEventTimeTrigger;

impl ContinuousEventTimeTrigger {
    /// Fires every `interval` of event time (at least 1 ms).
    pub fn of(interval: Duration) -> Trigger {
        Trigger {
            fires: Fires::Continuous {
                domain: TimeDomain::EventTime,
                interval: millis(interval),
            },
            purging: false,
        }
    }
}

/// Fires a window early, whenever the clock passes a multiple of `interval` while the window
/// holds records, and at its end as the default does (Flink's
/// `ContinuousProcessingTimeTrigger`, for event-time or processing-time windows). Unlike
/// Flink's, an event-time window with it still fires when the watermark passes its end, so
/// its final result is always emitted.
pub struct ContinuousProcessingTimeTrigger;

impl ContinuousProcessingTimeTrigger {
    /// Fires every `interval` of processing time (at least 1 ms).
    pub fn of(interval: Duration) -> Trigger {
        Trigger {
            fires: Fires::Continuous {
                domain: TimeDomain::ProcessingTime,
                interval: millis(interval),
            },
            purging: false,
        }
    }
}

/// Makes a trigger drop the window's contents each time it fires (Flink's `PurgingTrigger`):
/// every firing then emits what came since the one before. For tumbling windows only; on
/// others the job fails at its start, saying why.
pub struct PurgingTrigger;

impl PurgingTrigger {
    /// `trigger`, purging.
    pub fn of(trigger: Trigger) -> Trigger {
        Trigger {
            purging: true,
            ..trigger
        }
    }
}
