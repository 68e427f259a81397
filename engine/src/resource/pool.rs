//! The decisions of an active resource driver, with no I/O and provider-neutral: how many
//! TaskManager workers to ask for, which idle one to stop after
//! `resourcemanager.taskmanager-timeout`, which started one never registered, what a worker
//! that ended means for the JobManager, and when too many failed.
//!
//! A worker is whatever runs one TaskManager (a YARN container, a Kubernetes pod), known by the
//! resource id its TaskManager registers with; `W` is the provider's handle for it. Events and
//! `now` (ms) go in, [`Action`]s come out; the provider's loop carries them out.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How long a started TaskManager may take to register with the JobManager.
pub const REGISTRATION_TIMEOUT_MS: u64 = 120_000;

/// What the ResourceManager looks like at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotView {
    /// Slots that jobs wait for.
    pub pending_slots: u32,
    /// Registered TaskManagers: resource id → (free slots, total slots).
    pub taskmanagers: BTreeMap<String, (u32, u32)>,
}

impl SlotView {
    fn free_slots(&self) -> u32 {
        self.taskmanagers.values().map(|(free, _)| free).sum()
    }
}

/// When failed workers make the driver give up.
#[derive(Debug, Clone, PartialEq)]
pub enum FailureLimit {
    /// After more than this many failures in all (`yarn.maximum-failed-containers`).
    Total {
        /// The failures tolerated.
        max: u32,
        /// The configuration key that set it, for the diagnostic.
        key: &'static str,
    },
    /// After more than this many failures within one minute
    /// (`resourcemanager.start-worker.max-failure-rate`).
    PerMinute {
        /// The failures per minute tolerated.
        rate: f64,
        /// The configuration key that set it, for the diagnostic.
        key: &'static str,
    },
}

/// What the provider's loop must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<W> {
    /// Ask for this many more workers (each becomes [`WorkerPool::started`] once it exists).
    Request(u32),
    /// Withdraw this many of the requests not yet granted.
    Withdraw(u32),
    /// Stop a worker (idle longer than the timeout, or never registered).
    Stop(W),
    /// Tell the Dispatcher this TaskManager is gone.
    Lost {
        /// Its resource id.
        resource_id: String,
        /// Why, for the jobs' exception history.
        reason: String,
    },
    /// Give up: too many workers failed.
    Fail(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Started at `since` (ms); its TaskManager has not registered yet.
    Starting { since: u64 },
    /// Registered; `idle_since` is when all its slots became free.
    Registered { idle_since: Option<u64> },
    /// Asked to stop; its end is expected.
    Stopping,
}

#[derive(Debug, Clone)]
struct Worker<W> {
    handle: W,
    state: State,
}

/// The TaskManager workers of one JobManager.
#[derive(Debug)]
pub struct WorkerPool<W> {
    /// What a worker is called in diagnostics ("TaskManager containers", "TaskManager pods").
    noun: &'static str,
    slots_per_worker: u32,
    idle_timeout_ms: u64,
    registration_timeout_ms: u64,
    limit: FailureLimit,
    /// Workers asked for that do not exist yet.
    requested: u32,
    workers: BTreeMap<String, Worker<W>>,
    /// When each counted failure happened (ms).
    failures: VecDeque<u64>,
}

impl<W: Clone> WorkerPool<W> {
    /// A pool of workers (`noun`, plural, for diagnostics) with `slots_per_worker` slots each;
    /// workers idle for `idle_timeout_ms` are stopped; the driver gives up past `limit`. A
    /// started worker whose TaskManager has not registered within [`REGISTRATION_TIMEOUT_MS`]
    /// is stopped and counted as failed (it would otherwise count as coming forever and block
    /// replacements).
    pub fn new(
        noun: &'static str,
        slots_per_worker: u32,
        idle_timeout_ms: u64,
        limit: FailureLimit,
    ) -> Self {
        WorkerPool {
            noun,
            slots_per_worker: slots_per_worker.max(1),
            idle_timeout_ms,
            registration_timeout_ms: REGISTRATION_TIMEOUT_MS,
            limit,
            requested: 0,
            workers: BTreeMap::new(),
            failures: VecDeque::new(),
        }
    }

    /// Workers asked for that do not exist yet.
    pub fn requested(&self) -> u32 {
        self.requested
    }

    /// Workers asked for or started whose TaskManager has not registered yet.
    pub fn starting(&self) -> usize {
        self.requested as usize
            + self
                .workers
                .values()
                .filter(|w| matches!(w.state, State::Starting { .. }))
                .count()
    }

    /// Workers that exist and have not ended (starting, running or stopping).
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// The handle of a worker, by resource id.
    pub fn worker(&self, resource_id: &str) -> Option<&W> {
        self.workers.get(resource_id).map(|w| &w.handle)
    }

    /// Every worker's handle, to stop when the cluster ends.
    pub fn all(&self) -> Vec<W> {
        self.workers.values().map(|w| w.handle.clone()).collect()
    }

    /// The resource ids of the workers that exist.
    pub fn resource_ids(&self) -> BTreeSet<String> {
        self.workers.keys().cloned().collect()
    }

    /// How many more workers the demand needs (negative: how many requests are no longer
    /// needed). Requested workers and started ones whose TaskManager has not registered yet
    /// count as coming.
    pub fn shortfall(&self, view: &SlotView) -> i64 {
        let missing = view.pending_slots.saturating_sub(view.free_slots()) as i64;
        let per = self.slots_per_worker as i64;
        let wanted = (missing + per - 1) / per;
        let starting = self
            .workers
            .iter()
            .filter(|(id, w)| {
                matches!(w.state, State::Starting { .. }) && !view.taskmanagers.contains_key(*id)
            })
            .count() as i64;
        wanted - starting - self.requested as i64
    }

    /// Time passes with the ResourceManager in `view`: registrations are noted, workers are
    /// requested or requests withdrawn, workers idle longer than the timeout or not registered
    /// in time are stopped.
    pub fn tick(&mut self, view: &SlotView, now: u64) -> Vec<Action<W>> {
        let mut out = Vec::new();
        for (id, w) in self.workers.iter_mut() {
            if let Some(&(free, total)) = view.taskmanagers.get(id) {
                let idle = free == total;
                w.state = match (&w.state, idle) {
                    (State::Stopping, _) => State::Stopping,
                    (
                        State::Registered {
                            idle_since: Some(t),
                        },
                        true,
                    ) => State::Registered {
                        idle_since: Some(*t),
                    },
                    (_, true) => State::Registered {
                        idle_since: Some(now),
                    },
                    (_, false) => State::Registered { idle_since: None },
                };
            }
        }
        let mut late = Vec::new();
        for (id, w) in self.workers.iter_mut() {
            if let State::Starting { since } = w.state
                && now.saturating_sub(since) >= self.registration_timeout_ms
            {
                w.state = State::Stopping;
                out.push(Action::Stop(w.handle.clone()));
                late.push(id.clone());
            }
        }
        for id in late {
            let reason = format!(
                "the TaskManager in {id} did not register within {} s",
                self.registration_timeout_ms / 1000
            );
            out.extend(self.count_failure(&reason, now));
        }
        let shortfall = self.shortfall(view);
        if shortfall > 0 {
            self.requested += shortfall as u32;
            out.push(Action::Request(shortfall as u32));
        } else {
            let withdraw = (-shortfall).min(self.requested as i64) as u32;
            if withdraw > 0 {
                self.requested -= withdraw;
                out.push(Action::Withdraw(withdraw));
            }
        }
        // Stop idle workers only while nothing waits for slots: a job about to be scheduled
        // would otherwise ask for the very worker just stopped.
        if view.pending_slots == 0 {
            for w in self.workers.values_mut() {
                if let State::Registered {
                    idle_since: Some(t),
                } = w.state
                    && now.saturating_sub(t) >= self.idle_timeout_ms
                {
                    w.state = State::Stopping;
                    out.push(Action::Stop(w.handle.clone()));
                }
            }
        }
        out
    }

    /// A requested worker exists now (a granted container launched, a pod created).
    pub fn started(&mut self, resource_id: String, handle: W, now: u64) {
        self.requested = self.requested.saturating_sub(1);
        self.adopt(resource_id, handle, now);
    }

    /// Takes over a worker nobody requested in this process (one an earlier JobManager
    /// started): until its TaskManager registers it counts as coming, and one that never
    /// registers is stopped after the registration timeout like any other.
    pub fn adopt(&mut self, resource_id: String, handle: W, now: u64) {
        self.workers.insert(
            resource_id,
            Worker {
                handle,
                state: State::Starting { since: now },
            },
        );
    }

    /// A started worker could not start its TaskManager (`reason` says why): it is forgotten
    /// and counted as failed. Unknown resource ids are ignored.
    pub fn start_failed(&mut self, resource_id: &str, reason: &str, now: u64) -> Vec<Action<W>> {
        if self.workers.remove(resource_id).is_none() {
            return Vec::new();
        }
        self.count_failure(reason, now).into_iter().collect()
    }

    /// A worker ended (`reason` says how). A TaskManager that ended without being stopped is
    /// lost and counted as failed; its jobs fail over and the next tick asks for a
    /// replacement if slots are short. Unknown resource ids are ignored.
    pub fn ended(&mut self, resource_id: &str, reason: &str, now: u64) -> Vec<Action<W>> {
        let Some(w) = self.workers.remove(resource_id) else {
            return Vec::new();
        };
        let mut out = vec![Action::Lost {
            resource_id: resource_id.to_string(),
            reason: reason.to_string(),
        }];
        if w.state != State::Stopping {
            out.extend(self.count_failure(reason, now));
        }
        out
    }

    fn count_failure(&mut self, reason: &str, now: u64) -> Option<Action<W>> {
        self.failures.push_back(now);
        match self.limit {
            FailureLimit::Total { max, key } => {
                let failed = self.failures.len();
                (failed > max as usize).then(|| {
                    Action::Fail(format!(
                        "{failed} {} failed ({key} is {max}); the last: {reason}",
                        self.noun
                    ))
                })
            }
            FailureLimit::PerMinute { rate, key } => {
                while self
                    .failures
                    .front()
                    .is_some_and(|t| now.saturating_sub(*t) >= 60_000)
                {
                    self.failures.pop_front();
                }
                let failed = self.failures.len();
                (failed as f64 > rate).then(|| {
                    Action::Fail(format!(
                        "{failed} {} failed within a minute ({key} is {rate}); the last: {reason}",
                        self.noun
                    ))
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(pending: u32, tms: &[(&str, u32, u32)]) -> SlotView {
        SlotView {
            pending_slots: pending,
            taskmanagers: tms
                .iter()
                .map(|(id, free, total)| (id.to_string(), (*free, *total)))
                .collect(),
        }
    }

    fn pool(slots: u32, limit: FailureLimit) -> WorkerPool<String> {
        WorkerPool::new("TaskManager pods", slots, 30_000, limit)
    }

    const RATE: FailureLimit = FailureLimit::PerMinute {
        rate: 2.0,
        key: "resourcemanager.start-worker.max-failure-rate",
    };

    #[test]
    fn asks_for_workers_once_and_counts_started_ones_as_coming() {
        let mut p = pool(2, RATE);
        assert_eq!(p.tick(&view(0, &[]), 0), vec![]);
        assert_eq!(p.tick(&view(3, &[]), 1), vec![Action::Request(2)]);
        assert_eq!(p.tick(&view(3, &[]), 2), vec![]);
        p.started("tm-1".into(), "tm-1".into(), 3);
        assert_eq!(p.requested(), 1);
        assert_eq!(p.tick(&view(3, &[]), 4), vec![]);
        // tm-1 registered with 2 free slots: one more worker is still wanted, and asked for.
        assert_eq!(p.tick(&view(3, &[("tm-1", 2, 2)]), 5), vec![]);
        assert_eq!(p.starting(), 1);
        // The demand drops to what tm-1 offers: the outstanding request is withdrawn.
        assert_eq!(
            p.tick(&view(2, &[("tm-1", 2, 2)]), 6),
            vec![Action::Withdraw(1)]
        );
        assert_eq!(p.requested(), 0);
    }

    #[test]
    fn idle_workers_stop_after_the_timeout_and_their_end_is_no_failure() {
        let mut p = pool(1, RATE);
        p.tick(&view(1, &[]), 0);
        p.started("tm-1".into(), "tm-1".into(), 0);
        assert_eq!(p.tick(&view(0, &[("tm-1", 0, 1)]), 1_000), vec![]);
        assert_eq!(p.tick(&view(0, &[("tm-1", 1, 1)]), 2_000), vec![]);
        assert_eq!(p.tick(&view(1, &[("tm-1", 1, 1)]), 40_000), vec![]);
        assert_eq!(
            p.tick(&view(0, &[("tm-1", 1, 1)]), 40_001),
            vec![Action::Stop("tm-1".to_string())]
        );
        assert_eq!(
            p.ended("tm-1", "deleted", 40_002),
            vec![Action::Lost {
                resource_id: "tm-1".into(),
                reason: "deleted".into()
            }]
        );
        assert_eq!(p.workers(), 0);
        assert_eq!(p.ended("tm-1", "again", 40_003), vec![]);
    }

    #[test]
    fn failures_beyond_the_rate_within_a_minute_fail_and_older_ones_are_forgotten() {
        let mut p = pool(1, RATE);
        for (i, at) in [0u64, 20_000, 70_000].into_iter().enumerate() {
            let id = format!("tm-{i}");
            p.tick(&view(1, &[]), at);
            p.started(id.clone(), id.clone(), at);
            let out = p.start_failed(&id, "ErrImagePull", at);
            assert_eq!(out, vec![], "failure {i} at {at} ms is within the rate");
        }
        // The one at 0 s is older than a minute at 70 s; the third failure within the last minute
        // (20 s, 70 s, 71 s) exceeds 2 per minute.
        p.tick(&view(1, &[]), 71_000);
        p.started("tm-3".into(), "tm-3".into(), 71_000);
        let out = p.ended("tm-3", "exit code 1", 71_000);
        assert!(
            matches!(&out[1], Action::Fail(m) if m.contains("3 TaskManager pods failed within a minute") && m.contains("max-failure-rate is 2") && m.contains("exit code 1")),
            "{out:?}"
        );
    }

    #[test]
    fn a_total_limit_counts_every_failure() {
        let mut p = pool(
            1,
            FailureLimit::Total {
                max: 1,
                key: "yarn.maximum-failed-containers",
            },
        );
        p.started("a".into(), "a".into(), 0);
        p.started("b".into(), "b".into(), 0);
        assert_eq!(p.start_failed("a", "x", 0), vec![]);
        assert!(matches!(
            &p.start_failed("b", "y", 1_000_000)[..],
            [Action::Fail(m)] if m.contains("2 TaskManager pods failed (yarn.maximum-failed-containers is 1)")
        ));
    }

    #[test]
    fn a_worker_that_never_registers_is_stopped_counted_and_replaced() {
        let mut p = pool(1, RATE);
        p.tick(&view(1, &[]), 0);
        p.started("tm-1".into(), "tm-1".into(), 1_000);
        assert_eq!(
            p.tick(&view(1, &[]), 1_000 + REGISTRATION_TIMEOUT_MS - 1),
            vec![]
        );
        let out = p.tick(&view(1, &[]), 1_000 + REGISTRATION_TIMEOUT_MS);
        assert_eq!(
            out,
            vec![Action::Stop("tm-1".to_string()), Action::Request(1)]
        );
        assert_eq!(
            p.ended("tm-1", "deleted", 1_000 + REGISTRATION_TIMEOUT_MS)
                .len(),
            1,
            "lost, but not a second failure"
        );
    }
}
