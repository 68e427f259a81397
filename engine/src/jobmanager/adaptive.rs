//! The adaptive scheduler's decisions (`jobmanager.scheduler: adaptive`), with no I/O: when a
//! job that waits for slots starts and with how many, when a running job scales up because
//! slots appeared, and when it gives up waiting. The JobMaster carries the decisions out
//! (deploying at the chosen parallelism, restarting from the latest checkpoint to rescale).
//!
//! As in Flink, a job declares per vertex a lower and an upper bound of parallelism. It needs
//! as many slots as its largest lower bound and wants as many as its largest upper bound (slot
//! sharing: subtask *i* of every vertex shares slot *i*). It starts at once when it can have
//! every slot it wants; with fewer, but enough, once the slots it could have stopped changing
//! for `resource-stabilization-timeout`, or when `resource-wait-timeout` has passed. Running
//! below its upper bound, it scales up when slots appear that raise some vertex's parallelism
//! by `min-parallelism-increase`, no sooner than `scaling-interval.min` after its last
//! (re)start; a smaller raise waits for `scaling-interval.max`, if set. A lost TaskManager fails
//! its tasks as under the default scheduler, and the job restarts with the slots that are left.

use serde::Serialize;

/// The adaptive scheduler's settings (`jobmanager.adaptive-scheduler.*`, `scheduler-mode`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdaptiveSettings {
    /// How long a job waits for the slots it wants before it starts with fewer, or fails when
    /// it cannot have the slots it needs; `None`: forever.
    pub resource_wait_timeout_ms: Option<u64>,
    /// How long the slots a job could have must stay unchanged before it starts with fewer
    /// than it wants.
    pub stabilization_timeout_ms: u64,
    /// The smallest raise of a vertex's parallelism worth a rescale.
    pub min_parallelism_increase: u32,
    /// The least time between a job's (re)start and its next scale-up.
    pub scaling_interval_min_ms: u64,
    /// After this long, a raise smaller than `min_parallelism_increase` rescales anyway.
    pub scaling_interval_max_ms: Option<u64>,
    /// `scheduler-mode: reactive`: every vertex's upper bound is its maximum parallelism, so a
    /// job always uses every slot.
    pub reactive: bool,
}

impl Default for AdaptiveSettings {
    fn default() -> Self {
        AdaptiveSettings {
            resource_wait_timeout_ms: Some(300_000),
            stabilization_timeout_ms: 10_000,
            min_parallelism_increase: 1,
            scaling_interval_min_ms: 30_000,
            scaling_interval_max_ms: None,
            reactive: false,
        }
    }
}

/// One vertex's bounds of parallelism (Flink's `JobVertexResourceRequirements`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// The fewest subtasks it may run with.
    pub lower: u32,
    /// The most.
    pub upper: u32,
}

/// The bounds of every vertex of a job, in the job graph's vertex order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirements(pub Vec<Bounds>);

impl Requirements {
    /// Slots the job needs to run at all: its largest lower bound.
    pub fn min_slots(&self) -> u32 {
        self.0.iter().map(|b| b.lower).max().unwrap_or(0)
    }

    /// Slots the job can use: its largest upper bound.
    pub fn max_slots(&self) -> u32 {
        self.0.iter().map(|b| b.upper).max().unwrap_or(0)
    }

    /// Each vertex's parallelism on `slots` slots (at least [`min_slots`](Self::min_slots)):
    /// as many subtasks as slots, within the vertex's bounds.
    pub fn parallelism(&self, slots: u32) -> Vec<u32> {
        self.0
            .iter()
            .map(|b| slots.min(b.upper).max(b.lower))
            .collect()
    }
}

/// Where the adaptive scheduler is with a job, as Flink names its states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for slots since `since`; `stable_since`: when the slots it could have last
    /// changed while enough, `None` while too few.
    WaitingForResources {
        /// When the wait began (ms).
        since: u64,
        /// When the available slots last changed while they were enough.
        stable_since: Option<u64>,
    },
    /// Running (or deploying) on `slots` slots since `since`; `raise_since`: when slots that
    /// would raise its parallelism by less than the minimum increase were first seen.
    Executing {
        /// Slots it runs on.
        slots: u32,
        /// When it (re)started (ms).
        since: u64,
        /// When a small raise first became possible.
        raise_since: Option<u64>,
    },
    /// Stopping its tasks to restart: after a failure (`rescale_to: None`, it waits for slots
    /// again) or to run on `rescale_to` slots.
    Restarting {
        /// The slots to restart on, for a rescale.
        rescale_to: Option<u32>,
    },
    /// The job ended or fails; nothing more to decide.
    Done,
}

impl Phase {
    /// Flink's name of the state, for REST.
    pub fn name(self) -> &'static str {
        match self {
            Phase::WaitingForResources { .. } => "WaitingForResources",
            Phase::Executing { .. } => "Executing",
            Phase::Restarting { .. } => "Restarting",
            Phase::Done => "Finished",
        }
    }
}

/// What the JobMaster must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start the job on this many slots.
    Start(u32),
    /// Restart the running job on this many slots, from its latest checkpoint.
    Rescale(u32),
    /// Fail the job: it could not have the slots it needs in time.
    GiveUp,
}

/// The adaptive scheduler's state for one job.
#[derive(Clone, Debug)]
pub struct Adaptive {
    settings: AdaptiveSettings,
    requirements: Requirements,
    phase: Phase,
    /// The slots the job could have at the last look (free ones plus its own).
    available: u32,
}

impl Adaptive {
    /// A job with these requirements; it waits for slots from `now`.
    pub fn new(settings: AdaptiveSettings, requirements: Requirements, now: u64) -> Self {
        Adaptive {
            settings,
            requirements,
            phase: Phase::WaitingForResources {
                since: now,
                stable_since: None,
            },
            available: 0,
        }
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The job's requirements.
    pub fn requirements(&self) -> &Requirements {
        &self.requirements
    }

    /// The settings.
    pub fn settings(&self) -> &AdaptiveSettings {
        &self.settings
    }

    /// The job waits for slots again (after a failure's restart delay), from `now`; the slots
    /// it could have count as stable from now.
    pub fn wait(&mut self, now: u64) -> Option<Decision> {
        let enough = self.available >= self.requirements.min_slots();
        self.phase = Phase::WaitingForResources {
            since: now,
            stable_since: enough.then_some(now),
        };
        self.decide(now)
    }

    /// The job started (or restarted) on `slots` slots at `now`.
    pub fn started(&mut self, slots: u32, now: u64) {
        self.phase = Phase::Executing {
            slots,
            since: now,
            raise_since: None,
        };
    }

    /// The job's tasks are being stopped to restart, on `rescale_to` slots for a rescale.
    pub fn restarting(&mut self, rescale_to: Option<u32>) {
        self.phase = Phase::Restarting { rescale_to };
    }

    /// The job ended or is failing.
    pub fn done(&mut self) {
        self.phase = Phase::Done;
    }

    /// New requirements (REST `PUT /jobs/:id/resource-requirements`): a running job whose
    /// parallelism they change rescales at once, whatever the scaling interval says.
    pub fn set_requirements(&mut self, requirements: Requirements, now: u64) -> Option<Decision> {
        let before = self.requirements.clone();
        self.requirements = requirements;
        match self.phase {
            Phase::Executing { slots, .. } => {
                let target = self.target_slots();
                let changed = before.parallelism(slots) != self.requirements.parallelism(target);
                (changed && target >= self.requirements.min_slots()).then(|| {
                    self.phase = Phase::Restarting {
                        rescale_to: Some(target),
                    };
                    Decision::Rescale(target)
                })
            }
            Phase::WaitingForResources { .. } => self.decide(now),
            _ => None,
        }
    }

    /// The slots the job would run on now: what it could have, up to what it wants.
    fn target_slots(&self) -> u32 {
        self.available.min(self.requirements.max_slots())
    }

    /// The slots the job could have changed (free slots plus those it holds).
    pub fn available(&mut self, available: u32, now: u64) -> Option<Decision> {
        if available != self.available {
            if let Phase::WaitingForResources {
                since,
                stable_since,
            } = self.phase
            {
                let enough = available >= self.requirements.min_slots();
                let stable_since = enough.then_some(now).or(stable_since.filter(|_| enough));
                self.phase = Phase::WaitingForResources {
                    since,
                    stable_since,
                };
            }
            self.available = available;
        }
        self.decide(now)
    }

    /// Time passes.
    pub fn tick(&mut self, now: u64) -> Option<Decision> {
        self.decide(now)
    }

    /// When [`tick`](Self::tick) may next decide something (ms).
    pub fn poll_timeout(&self) -> Option<u64> {
        let s = &self.settings;
        match self.phase {
            Phase::WaitingForResources {
                since,
                stable_since,
            } => {
                let stable = stable_since.map(|t| t.saturating_add(s.stabilization_timeout_ms));
                let wait = s.resource_wait_timeout_ms.map(|w| since.saturating_add(w));
                [stable, wait].into_iter().flatten().min()
            }
            Phase::Executing {
                slots,
                since,
                raise_since,
            } => {
                let raise = self.raise(slots);
                if raise == 0 {
                    return None;
                }
                let earliest = since.saturating_add(s.scaling_interval_min_ms);
                if raise >= s.min_parallelism_increase {
                    return Some(earliest);
                }
                let forced = raise_since
                    .zip(s.scaling_interval_max_ms)
                    .map(|(t, max)| t.saturating_add(max));
                forced.map(|f| f.max(earliest))
            }
            _ => None,
        }
    }

    /// The largest raise of a vertex's parallelism the available slots allow over `slots`.
    fn raise(&self, slots: u32) -> u32 {
        let now = self.requirements.parallelism(slots);
        let then = self
            .requirements
            .parallelism(self.target_slots().max(slots));
        now.iter()
            .zip(&then)
            .map(|(a, b)| b.saturating_sub(*a))
            .max()
            .unwrap_or(0)
    }

    fn decide(&mut self, now: u64) -> Option<Decision> {
        let s = self.settings.clone();
        match self.phase {
            Phase::WaitingForResources {
                since,
                stable_since,
            } => {
                let (min, max) = (self.requirements.min_slots(), self.requirements.max_slots());
                let waited_out = s
                    .resource_wait_timeout_ms
                    .is_some_and(|w| now >= since.saturating_add(w));
                let start = if self.available >= max {
                    Some(max)
                } else if self.available >= min && min > 0 {
                    let stable = stable_since
                        .is_some_and(|t| now >= t.saturating_add(s.stabilization_timeout_ms));
                    (stable || waited_out).then_some(self.available)
                } else {
                    None
                };
                match start {
                    Some(slots) => Some(Decision::Start(slots)),
                    None if waited_out => {
                        self.phase = Phase::Done;
                        Some(Decision::GiveUp)
                    }
                    None => None,
                }
            }
            Phase::Executing {
                slots,
                since,
                raise_since,
            } => {
                let raise = self.raise(slots);
                if raise == 0 {
                    self.phase = Phase::Executing {
                        slots,
                        since,
                        raise_since: None,
                    };
                    return None;
                }
                let raise_since = raise_since.unwrap_or(now);
                self.phase = Phase::Executing {
                    slots,
                    since,
                    raise_since: Some(raise_since),
                };
                let cooled = now >= since.saturating_add(s.scaling_interval_min_ms);
                let forced = s
                    .scaling_interval_max_ms
                    .is_some_and(|max| now >= raise_since.saturating_add(max));
                (cooled && (raise >= s.min_parallelism_increase || forced)).then(|| {
                    let target = self.target_slots();
                    self.phase = Phase::Restarting {
                        rescale_to: Some(target),
                    };
                    Decision::Rescale(target)
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AdaptiveSettings {
        AdaptiveSettings {
            resource_wait_timeout_ms: Some(60_000),
            stabilization_timeout_ms: 10_000,
            min_parallelism_increase: 2,
            scaling_interval_min_ms: 30_000,
            scaling_interval_max_ms: None,
            reactive: false,
        }
    }

    /// A source and a sink of parallelism up to 4, and a sink fixed at 1.
    fn job(lower: u32) -> Requirements {
        Requirements(vec![
            Bounds { lower, upper: 4 },
            Bounds { lower, upper: 4 },
            Bounds { lower: 1, upper: 1 },
        ])
    }

    #[test]
    fn parallelism_follows_the_slots_within_each_vertex_bounds() {
        let r = job(2);
        assert_eq!((r.min_slots(), r.max_slots()), (2, 4));
        assert_eq!(r.parallelism(3), vec![3, 3, 1]);
        assert_eq!(r.parallelism(9), vec![4, 4, 1]);
    }

    #[test]
    fn starts_at_once_with_every_wanted_slot() {
        let mut a = Adaptive::new(settings(), job(1), 0);
        assert_eq!(a.available(0, 0), None);
        assert_eq!(a.available(5, 100), Some(Decision::Start(4)));
    }

    #[test]
    fn with_enough_but_fewer_slots_it_waits_for_them_to_stay_unchanged() {
        let mut a = Adaptive::new(settings(), job(2), 0);
        assert_eq!(a.available(1, 0), None, "too few: nothing to stabilize");
        assert_eq!(
            a.poll_timeout(),
            Some(60_000),
            "only the wait timeout is pending"
        );
        assert_eq!(a.available(2, 1_000), None);
        assert_eq!(a.poll_timeout(), Some(11_000));
        assert_eq!(
            a.available(3, 5_000),
            None,
            "a change restarts the stabilization"
        );
        assert_eq!(a.tick(14_999), None);
        assert_eq!(a.tick(15_000), Some(Decision::Start(3)));
    }

    #[test]
    fn too_few_slots_until_the_wait_timeout_gives_up() {
        let mut a = Adaptive::new(settings(), job(3), 0);
        assert_eq!(a.available(2, 0), None);
        assert_eq!(a.tick(59_999), None);
        assert_eq!(a.tick(60_000), Some(Decision::GiveUp));
        assert_eq!(a.phase(), Phase::Done);
    }

    #[test]
    fn the_wait_timeout_starts_with_enough_slots_before_they_are_stable() {
        let mut a = Adaptive::new(settings(), job(1), 0);
        for t in (0..60_000).step_by(5_000) {
            // The slots keep changing (2, 3, 2, 3, ...): never stable.
            assert_eq!(a.available(2 + (t / 5_000) as u32 % 2, t), None);
        }
        assert_eq!(a.tick(60_000), Some(Decision::Start(3)));
    }

    #[test]
    fn without_a_wait_timeout_it_waits_forever() {
        let mut s = settings();
        s.resource_wait_timeout_ms = None;
        let mut a = Adaptive::new(s, job(2), 0);
        assert_eq!(a.available(1, 0), None);
        assert_eq!(a.poll_timeout(), None);
        assert_eq!(a.tick(u64::MAX / 2), None);
    }

    #[test]
    fn scales_up_after_the_minimum_interval_when_the_raise_is_large_enough() {
        let mut a = Adaptive::new(settings(), job(1), 0);
        a.started(2, 0);
        assert_eq!(
            a.available(3, 1_000),
            None,
            "a raise of 1 is below the minimum of 2"
        );
        assert_eq!(a.poll_timeout(), None);
        assert_eq!(a.available(4, 2_000), None, "a raise of 2, but too soon");
        assert_eq!(a.poll_timeout(), Some(30_000));
        assert_eq!(a.tick(30_000), Some(Decision::Rescale(4)));
        assert_eq!(
            a.phase(),
            Phase::Restarting {
                rescale_to: Some(4)
            }
        );
        a.started(4, 31_000);
        assert_eq!(a.available(9, 90_000), None, "already at every upper bound");
    }

    #[test]
    fn a_small_raise_rescales_after_the_maximum_interval() {
        let mut s = settings();
        s.scaling_interval_max_ms = Some(100_000);
        let mut a = Adaptive::new(s, job(1), 0);
        a.started(2, 0);
        assert_eq!(a.available(3, 50_000), None);
        assert_eq!(a.poll_timeout(), Some(150_000));
        assert_eq!(a.tick(149_999), None);
        assert_eq!(a.tick(150_000), Some(Decision::Rescale(3)));
    }

    #[test]
    fn a_raise_that_goes_away_is_forgotten() {
        let mut s = settings();
        s.scaling_interval_max_ms = Some(100_000);
        let mut a = Adaptive::new(s, job(1), 0);
        a.started(2, 0);
        assert_eq!(a.available(3, 50_000), None);
        assert_eq!(a.available(2, 60_000), None);
        assert_eq!(a.poll_timeout(), None);
        assert_eq!(a.available(3, 70_000), None);
        assert_eq!(
            a.poll_timeout(),
            Some(170_000),
            "counted from the new sighting"
        );
    }

    #[test]
    fn new_requirements_rescale_a_running_job_at_once() {
        let mut a = Adaptive::new(settings(), job(1), 0);
        assert_eq!(a.available(4, 0), Some(Decision::Start(4)));
        a.started(4, 0);
        let narrower = Requirements(vec![
            Bounds { lower: 1, upper: 2 },
            Bounds { lower: 1, upper: 2 },
            Bounds { lower: 1, upper: 1 },
        ]);
        assert_eq!(
            a.set_requirements(narrower.clone(), 1),
            Some(Decision::Rescale(2))
        );
        a.started(2, 2);
        assert_eq!(
            a.set_requirements(narrower, 3),
            None,
            "no change, no rescale"
        );
    }

    #[test]
    fn a_restart_waits_for_slots_again() {
        let mut a = Adaptive::new(settings(), job(1), 0);
        assert_eq!(a.available(4, 0), Some(Decision::Start(4)));
        a.started(4, 0);
        a.restarting(None);
        assert_eq!(a.available(2, 5_000), None, "a TaskManager was lost");
        assert_eq!(a.wait(6_000), None, "2 of 4: it waits for them to stay");
        assert_eq!(a.tick(15_999), None);
        assert_eq!(a.tick(16_000), Some(Decision::Start(2)));
        a.started(2, 16_000);
        a.restarting(None);
        assert_eq!(a.available(4, 20_000), None);
        assert_eq!(
            a.wait(21_000),
            Some(Decision::Start(4)),
            "all it wants: at once"
        );
    }
}
