//! Restart strategies with Flink's semantics: after a failure, whether the job restarts and
//! after what delay. A pure core: the failure time and a random number go in, a decision out.

use std::collections::VecDeque;

use crate::config::{RestartOptions, RestartStrategyKind};

/// A configured restart strategy.
#[derive(Clone, Debug, PartialEq)]
pub enum RestartPolicy {
    /// Never restart.
    None,
    /// Restart up to `attempts` times, `delay_ms` after each failure.
    FixedDelay {
        /// Restarts allowed.
        attempts: u32,
        /// Delay in ms.
        delay_ms: u64,
    },
    /// Restart unless more than `max_failures` failures fall in `interval_ms`.
    FailureRate {
        /// Failures allowed per interval.
        max_failures: u32,
        /// The interval in ms.
        interval_ms: u64,
        /// Delay in ms.
        delay_ms: u64,
    },
    /// Restart with a backoff that grows by `multiplier` up to `max_ms`.
    ExponentialDelay {
        /// First backoff in ms.
        initial_ms: u64,
        /// Largest backoff in ms.
        max_ms: u64,
        /// Growth factor.
        multiplier: f64,
        /// A failure this long after the previous one resets the backoff.
        reset_threshold_ms: u64,
        /// Share of random variation.
        jitter: f64,
        /// Restarts allowed before the job fails (between resets).
        attempts: u32,
    },
}

impl RestartPolicy {
    /// The policy the configuration asks for; unset means `none` without checkpointing and
    /// `exponential-delay` with it, as in Flink.
    pub fn from_config(options: &RestartOptions, checkpointing: bool) -> Self {
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        let kind = options.kind.unwrap_or(if checkpointing {
            RestartStrategyKind::ExponentialDelay
        } else {
            RestartStrategyKind::None
        });
        match kind {
            RestartStrategyKind::None => RestartPolicy::None,
            RestartStrategyKind::FixedDelay => RestartPolicy::FixedDelay {
                attempts: options.fixed_delay_attempts,
                delay_ms: ms(options.fixed_delay_delay),
            },
            RestartStrategyKind::FailureRate => RestartPolicy::FailureRate {
                max_failures: options.failure_rate_max_failures,
                interval_ms: ms(options.failure_rate_interval),
                delay_ms: ms(options.failure_rate_delay),
            },
            RestartStrategyKind::ExponentialDelay => RestartPolicy::ExponentialDelay {
                initial_ms: ms(options.exponential_initial_backoff),
                max_ms: ms(options.exponential_max_backoff),
                multiplier: options.exponential_multiplier,
                reset_threshold_ms: ms(options.exponential_reset_threshold),
                jitter: options.exponential_jitter,
                attempts: options.exponential_attempts_before_reset,
            },
        }
    }

    /// Flink's name of the strategy, for the failure message when recovery is suppressed.
    pub fn describe(&self) -> String {
        match self {
            RestartPolicy::None => "NoRestartBackoffTimeStrategy".into(),
            RestartPolicy::FixedDelay { attempts, delay_ms } => {
                format!(
                    "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts={attempts}, backoffTimeMS={delay_ms})"
                )
            }
            RestartPolicy::FailureRate {
                max_failures,
                interval_ms,
                delay_ms,
            } => format!(
                "FailureRateRestartBackoffTimeStrategy(failuresIntervalMS={interval_ms}, backoffTimeMS={delay_ms}, maxFailuresPerInterval={max_failures})"
            ),
            RestartPolicy::ExponentialDelay {
                initial_ms,
                max_ms,
                multiplier,
                attempts,
                ..
            } => format!(
                "ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS={initial_ms}, maxBackoffMS={max_ms}, backoffMultiplier={multiplier}, attemptsBeforeResetBackoff={attempts})"
            ),
        }
    }
}

/// The restart history of one job.
#[derive(Clone, Debug)]
pub struct RestartTracker {
    policy: RestartPolicy,
    restarts: u32,
    failures: VecDeque<u64>,
    backoff_ms: u64,
    last_failure: Option<u64>,
}

impl RestartTracker {
    /// A job that has not failed yet.
    pub fn new(policy: RestartPolicy) -> Self {
        RestartTracker {
            policy,
            restarts: 0,
            failures: VecDeque::new(),
            backoff_ms: 0,
            last_failure: None,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &RestartPolicy {
        &self.policy
    }

    /// How many times the job restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// A failure happened at `now` (ms); `random` is uniform in `[0, 1)` and drives the jitter.
    /// Returns the delay before the restart, or `None` if the job must fail.
    pub fn on_failure(&mut self, now: u64, random: f64) -> Option<u64> {
        let delay = match &self.policy {
            RestartPolicy::None => None,
            RestartPolicy::FixedDelay { attempts, delay_ms } => {
                (self.restarts < *attempts).then_some(*delay_ms)
            }
            RestartPolicy::FailureRate {
                max_failures,
                interval_ms,
                delay_ms,
            } => {
                self.failures.push_back(now);
                while self
                    .failures
                    .front()
                    .is_some_and(|&t| now.saturating_sub(t) > *interval_ms)
                {
                    self.failures.pop_front();
                }
                (self.failures.len() as u32 <= *max_failures).then_some(*delay_ms)
            }
            RestartPolicy::ExponentialDelay {
                initial_ms,
                max_ms,
                multiplier,
                reset_threshold_ms,
                jitter,
                attempts,
            } => {
                let quiet_long = self
                    .last_failure
                    .is_some_and(|last| now.saturating_sub(last) >= *reset_threshold_ms);
                if self.last_failure.is_none() || quiet_long {
                    self.backoff_ms = *initial_ms;
                    self.restarts = 0;
                } else {
                    self.backoff_ms = ((self.backoff_ms as f64 * multiplier) as u64).min(*max_ms);
                }
                let spread = (self.backoff_ms as f64 * jitter * (2.0 * random - 1.0)) as i64;
                let delay = (self.backoff_ms as i64 + spread).clamp(0, *max_ms as i64) as u64;
                (self.restarts < *attempts).then_some(delay)
            }
        };
        self.last_failure = Some(now);
        if delay.is_some() {
            self.restarts += 1;
        }
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn default_is_none_without_checkpointing_and_exponential_with_it() {
        let options = Config::default().restart;
        assert_eq!(
            RestartPolicy::from_config(&options, false),
            RestartPolicy::None
        );
        assert!(matches!(
            RestartPolicy::from_config(&options, true),
            RestartPolicy::ExponentialDelay {
                initial_ms: 1000,
                ..
            }
        ));
        let mut t = RestartTracker::new(RestartPolicy::None);
        assert_eq!(t.on_failure(0, 0.5), None);
    }

    #[test]
    fn fixed_delay_allows_exactly_its_attempts() {
        let mut t = RestartTracker::new(RestartPolicy::FixedDelay {
            attempts: 2,
            delay_ms: 100,
        });
        assert_eq!(t.on_failure(0, 0.0), Some(100));
        assert_eq!(t.on_failure(10, 0.0), Some(100));
        assert_eq!(t.on_failure(20, 0.0), None);
        assert_eq!(t.restarts(), 2);
    }

    #[test]
    fn failure_rate_counts_failures_in_a_sliding_interval() {
        let mut t = RestartTracker::new(RestartPolicy::FailureRate {
            max_failures: 2,
            interval_ms: 1000,
            delay_ms: 5,
        });
        assert_eq!(t.on_failure(0, 0.0), Some(5));
        assert_eq!(t.on_failure(500, 0.0), Some(5));
        assert_eq!(t.on_failure(900, 0.0), None, "three failures within 1 s");
        let mut t = RestartTracker::new(RestartPolicy::FailureRate {
            max_failures: 2,
            interval_ms: 1000,
            delay_ms: 5,
        });
        for now in [0, 600, 1200, 1800, 2400] {
            assert_eq!(
                t.on_failure(now, 0.0),
                Some(5),
                "never more than two per second at {now}"
            );
        }
    }

    #[test]
    fn exponential_delay_grows_caps_jitters_and_resets_after_quiet_time() {
        let policy = RestartPolicy::ExponentialDelay {
            initial_ms: 100,
            max_ms: 1000,
            multiplier: 2.0,
            reset_threshold_ms: 10_000,
            jitter: 0.0,
            attempts: u32::MAX,
        };
        let mut t = RestartTracker::new(policy.clone());
        let delays: Vec<u64> = (0..6).map(|i| t.on_failure(i * 10, 0.5).unwrap()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(
            t.on_failure(20_000, 0.5),
            Some(100),
            "a long quiet time resets the backoff"
        );
        let RestartPolicy::ExponentialDelay {
            initial_ms,
            max_ms,
            multiplier,
            reset_threshold_ms,
            attempts,
            ..
        } = policy
        else {
            unreachable!()
        };
        let mut jittered = RestartTracker::new(RestartPolicy::ExponentialDelay {
            initial_ms,
            max_ms,
            multiplier,
            reset_threshold_ms,
            jitter: 0.1,
            attempts,
        });
        assert_eq!(jittered.on_failure(0, 0.0), Some(90));
        let mut jittered2 = jittered.clone();
        assert_eq!(jittered2.on_failure(1, 0.999_999), Some(219));
        assert_eq!(jittered.on_failure(1, 0.5), Some(200));
    }

    #[test]
    fn exponential_delay_respects_its_attempts() {
        let mut t = RestartTracker::new(RestartPolicy::ExponentialDelay {
            initial_ms: 1,
            max_ms: 10,
            multiplier: 1.5,
            reset_threshold_ms: 1_000_000,
            jitter: 0.0,
            attempts: 2,
        });
        assert!(t.on_failure(0, 0.0).is_some());
        assert!(t.on_failure(1, 0.0).is_some());
        assert!(t.on_failure(2, 0.0).is_none());
    }
}
