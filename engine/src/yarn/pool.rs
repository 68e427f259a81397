//! The YARN resource driver's decisions, with no I/O: how many TaskManager containers to ask
//! for, which granted container to launch or give back, which idle TaskManager to release, and
//! what a completed container means for the JobManager.
//!
//! Events and `now` (ms) go in, [`Command`]s come out; the I/O loop in `am.rs` carries them out
//! against YARN and the Dispatcher. A TaskManager started by this pool registers with its
//! container id as its resource id, which is how slots and containers are matched up.

use std::collections::{BTreeMap, BTreeSet};

use yarn_am::{AllocationMatcher, Container, ContainerId, ContainerStatus, Decision, Resource};

/// The one priority sluice asks TaskManager containers at (one resource profile, as in Flink).
pub const TASKMANAGER_PRIORITY: i32 = 1;

/// How long a started TaskManager container may take to register with the JobManager.
pub const REGISTRATION_TIMEOUT_MS: u64 = 120_000;

/// What the ResourceManager (sluice's, not YARN's) looks like at one moment.
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

/// What the I/O loop must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Tell YARN the absolute number of containers still wanted.
    SetRequest(i32),
    /// Start `sluice taskmanager` in this granted container.
    Launch(Container),
    /// Give back a granted container nobody wants (never started).
    Release(ContainerId),
    /// Stop a running TaskManager's container (idle longer than the timeout).
    Stop(Container),
    /// Tell the Dispatcher this TaskManager is gone.
    Lost {
        /// Its resource id (the container id).
        resource_id: String,
        /// Why, for the jobs' exception history.
        reason: String,
    },
    /// Give up: too many containers failed; unregister with FAILED and this diagnostic.
    Fail(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum WorkerState {
    /// Granted and being started since `since` (ms); not registered with the JobManager yet.
    Starting { since: u64 },
    /// Registered; `idle_since` is when all its slots became free.
    Registered { idle_since: Option<u64> },
    /// Asked to stop; its completion is expected.
    Stopping,
}

#[derive(Debug, Clone)]
struct Worker {
    container: Container,
    state: WorkerState,
}

/// The TaskManager containers of one ApplicationMaster.
#[derive(Debug)]
pub struct TaskManagerPool {
    capability: Resource,
    slots_per_taskmanager: u32,
    idle_timeout_ms: u64,
    registration_timeout_ms: u64,
    max_failed: u32,
    matcher: AllocationMatcher<u64>,
    workers: BTreeMap<ContainerId, Worker>,
    failed: u32,
    last_request: Option<i32>,
}

impl TaskManagerPool {
    /// A pool of TaskManagers of `capability` with `slots_per_taskmanager` slots each;
    /// TaskManagers idle for `idle_timeout_ms` are released; the application fails after
    /// `max_failed` containers ended without being asked to. A started container whose
    /// TaskManager has not registered within [`REGISTRATION_TIMEOUT_MS`] is stopped and
    /// counted as failed (it would otherwise count as "coming" forever and block replacements).
    pub fn new(
        capability: Resource,
        slots_per_taskmanager: u32,
        idle_timeout_ms: u64,
        max_failed: u32,
    ) -> Self {
        TaskManagerPool {
            capability,
            slots_per_taskmanager: slots_per_taskmanager.max(1),
            idle_timeout_ms,
            registration_timeout_ms: REGISTRATION_TIMEOUT_MS,
            max_failed,
            matcher: AllocationMatcher::new(),
            workers: BTreeMap::new(),
            failed: 0,
            last_request: None,
        }
    }

    /// The capability each TaskManager container is asked with.
    pub fn capability(&self) -> Resource {
        self.capability
    }

    /// Containers asked for and not granted yet.
    pub fn outstanding(&self) -> u32 {
        self.matcher.pending_len() as u32
    }

    /// Containers asked for or started whose TaskManager has not registered yet.
    pub fn starting(&self) -> usize {
        self.outstanding() as usize
            + self
                .workers
                .values()
                .filter(|w| matches!(w.state, WorkerState::Starting { .. }))
                .count()
    }

    /// Containers granted and not ended (starting, running or stopping).
    pub fn containers(&self) -> usize {
        self.workers.len()
    }

    /// The container of a TaskManager, by resource id.
    pub fn container_of(&self, resource_id: &str) -> Option<&Container> {
        self.workers
            .values()
            .find(|w| w.container.id.to_string() == resource_id)
            .map(|w| &w.container)
    }

    /// How many more containers the demand needs (negative: how many outstanding requests
    /// are no longer needed). Slots already on their way (outstanding requests and started
    /// containers whose TaskManager has not registered yet) count as coming.
    pub fn shortfall(&self, view: &SlotView) -> i64 {
        let missing = view.pending_slots.saturating_sub(view.free_slots()) as i64;
        let per = self.slots_per_taskmanager as i64;
        let wanted = (missing + per - 1) / per;
        let starting = self
            .workers
            .values()
            .filter(|w| {
                matches!(w.state, WorkerState::Starting { .. })
                    && !view.taskmanagers.contains_key(&w.container.id.to_string())
            })
            .count() as i64;
        wanted - starting - self.outstanding() as i64
    }

    /// Time passes with the ResourceManager in `view`: registrations are noted, containers are
    /// requested or requests withdrawn, TaskManagers idle longer than the timeout are stopped.
    pub fn tick(&mut self, view: &SlotView, now: u64) -> Vec<Command> {
        let mut out = Vec::new();
        for w in self.workers.values_mut() {
            if let Some(&(free, total)) = view.taskmanagers.get(&w.container.id.to_string()) {
                let idle = free == total;
                w.state = match (&w.state, idle) {
                    (WorkerState::Stopping, _) => WorkerState::Stopping,
                    (
                        WorkerState::Registered {
                            idle_since: Some(t),
                        },
                        true,
                    ) => WorkerState::Registered {
                        idle_since: Some(*t),
                    },
                    (_, true) => WorkerState::Registered {
                        idle_since: Some(now),
                    },
                    (_, false) => WorkerState::Registered { idle_since: None },
                };
            }
        }
        let mut late = Vec::new();
        for w in self.workers.values_mut() {
            if let WorkerState::Starting { since } = w.state
                && now.saturating_sub(since) >= self.registration_timeout_ms
            {
                w.state = WorkerState::Stopping;
                out.push(Command::Stop(w.container.clone()));
                late.push(w.container.id);
            }
        }
        for id in late {
            out.extend(self.count_failure(&format!(
                "the TaskManager in {id} did not register within {} s",
                self.registration_timeout_ms / 1000
            )));
        }
        let shortfall = self.shortfall(view);
        if shortfall > 0 {
            for _ in 0..shortfall {
                self.matcher
                    .request(TASKMANAGER_PRIORITY, self.capability, now);
            }
        } else {
            for _ in 0..(-shortfall).min(self.outstanding() as i64) {
                self.matcher.cancel(TASKMANAGER_PRIORITY, self.capability);
            }
        }
        // Release idle TaskManagers only while nothing waits for slots: a job about to be
        // scheduled would otherwise ask for the very container just given back.
        if view.pending_slots == 0 {
            for w in self.workers.values_mut() {
                if let WorkerState::Registered {
                    idle_since: Some(t),
                } = w.state
                    && now.saturating_sub(t) >= self.idle_timeout_ms
                {
                    w.state = WorkerState::Stopping;
                    out.push(Command::Stop(w.container.clone()));
                }
            }
        }
        out.extend(self.request_if_changed());
        out
    }

    fn request_if_changed(&mut self) -> Option<Command> {
        let n = self.outstanding() as i32;
        (self.last_request != Some(n)).then(|| {
            self.last_request = Some(n);
            Command::SetRequest(n)
        })
    }

    /// YARN granted containers: launch those a request waits for, give back the rest.
    pub fn on_allocated(&mut self, containers: Vec<Container>, now: u64) -> Vec<Command> {
        let mut out = Vec::new();
        for decision in self.matcher.on_allocated(containers) {
            match decision {
                Decision::Launch { container, .. } => {
                    self.workers.insert(
                        container.id,
                        Worker {
                            container: container.clone(),
                            state: WorkerState::Starting { since: now },
                        },
                    );
                    out.push(Command::Launch(container));
                }
                Decision::Release { container } => out.push(Command::Release(container.id)),
            }
        }
        out.extend(self.request_if_changed());
        out
    }

    /// Takes over the TaskManager containers an earlier AM attempt started, which YARN kept
    /// running (keep-containers, with ZooKeeper HA only). Their TaskManagers find this
    /// attempt's JobManager through ZooKeeper, so until they register they count as starting:
    /// no replacement is asked for them, and one that never registers is stopped after the
    /// registration timeout like any other.
    pub fn adopt(&mut self, containers: Vec<Container>, now: u64) {
        for container in containers {
            self.workers.insert(
                container.id,
                Worker {
                    container,
                    state: WorkerState::Starting { since: now },
                },
            );
        }
    }

    /// A container could not be started through its NodeManager.
    pub fn on_launch_failed(&mut self, id: ContainerId, error: &str) -> Vec<Command> {
        let mut out = vec![Command::Release(id)];
        if self.workers.remove(&id).is_some() {
            out.extend(self.count_failure(&format!("starting {id} failed: {error}")));
        }
        out
    }

    /// YARN reports containers ended. A TaskManager that ended without being stopped is lost
    /// (its jobs fail over, and the next tick asks for a replacement if slots are short).
    pub fn on_completed(&mut self, statuses: &[ContainerStatus]) -> Vec<Command> {
        let mut out = Vec::new();
        for s in statuses {
            let Some(w) = self.workers.remove(&s.id) else {
                continue;
            };
            let reason = format!(
                "its YARN container {} ended with exit status {}{}",
                s.id,
                s.exit_status,
                if s.diagnostics.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", s.diagnostics.trim())
                }
            );
            out.push(Command::Lost {
                resource_id: s.id.to_string(),
                reason: reason.clone(),
            });
            if w.state != WorkerState::Stopping {
                out.extend(self.count_failure(&reason));
            }
        }
        out
    }

    fn count_failure(&mut self, reason: &str) -> Option<Command> {
        self.failed += 1;
        (self.failed > self.max_failed).then(|| {
            Command::Fail(format!(
                "{} TaskManager containers failed (yarn.maximum-failed-containers is {}); the last: {reason}",
                self.failed, self.max_failed
            ))
        })
    }

    /// Every container the pool holds, to stop when the application ends.
    pub fn all_containers(&self) -> Vec<Container> {
        self.workers.values().map(|w| w.container.clone()).collect()
    }

    /// Resource ids of TaskManagers that were granted (for tests and logs).
    pub fn resource_ids(&self) -> BTreeSet<String> {
        self.workers.keys().map(ContainerId::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yarn_am::{ApplicationAttemptId, ApplicationId, ContainerState, NodeId};

    const CAP: Resource = Resource {
        memory_mb: 256,
        vcores: 1,
    };

    fn container(seq: i64) -> Container {
        Container {
            id: ContainerId {
                attempt: ApplicationAttemptId {
                    application: ApplicationId {
                        cluster_timestamp: 1,
                        id: 1,
                    },
                    attempt: 1,
                },
                id: seq,
            },
            node: NodeId {
                host: "127.0.0.1".into(),
                port: 1,
            },
            node_http_address: String::new(),
            resource: CAP,
            priority: TASKMANAGER_PRIORITY,
            token: None,
        }
    }

    fn view(pending: u32, tms: &[(&Container, u32, u32)]) -> SlotView {
        SlotView {
            pending_slots: pending,
            taskmanagers: tms
                .iter()
                .map(|(c, free, total)| (c.id.to_string(), (*free, *total)))
                .collect(),
        }
    }

    fn completed(c: &Container, exit: i32) -> ContainerStatus {
        ContainerStatus {
            id: c.id,
            state: ContainerState::Complete,
            exit_status: exit,
            diagnostics: "killed".into(),
        }
    }

    #[test]
    fn asks_for_enough_containers_for_the_missing_slots_once() {
        let mut pool = TaskManagerPool::new(CAP, 2, 30_000, 3);
        assert_eq!(pool.tick(&view(0, &[]), 0), vec![Command::SetRequest(0)]);
        // 3 slots wanted, 2 per TaskManager: 2 containers.
        assert_eq!(pool.tick(&view(3, &[]), 1), vec![Command::SetRequest(2)]);
        // Nothing changed: nothing is sent again.
        assert_eq!(pool.tick(&view(3, &[]), 2), vec![]);
        // One granted: launched, one still outstanding.
        let c1 = container(1);
        assert_eq!(
            pool.on_allocated(vec![c1.clone()], 0),
            vec![Command::Launch(c1.clone()), Command::SetRequest(1)]
        );
        // The started container counts as coming: no new ask while it registers.
        assert_eq!(pool.tick(&view(3, &[]), 3), vec![]);
        // It registered: 2 free of 2 slots, 3 wanted → still one more container.
        assert_eq!(pool.tick(&view(3, &[(&c1, 2, 2)]), 4), vec![]);
        assert_eq!(pool.outstanding(), 1);
        assert_eq!(pool.starting(), 1, "only the outstanding one");
    }

    #[test]
    fn containers_kept_from_an_earlier_attempt_count_as_coming_until_they_register() {
        let mut pool = TaskManagerPool::new(CAP, 1, 30_000, 3);
        let (c1, c2) = (container(1), container(2));
        pool.adopt(vec![c1.clone(), c2.clone()], 0);
        assert_eq!(pool.containers(), 2);
        // The recovered job wants 2 slots before the kept TaskManagers found the new leader:
        // nothing is asked of YARN.
        assert_eq!(pool.shortfall(&view(2, &[])), 0);
        assert_eq!(pool.tick(&view(2, &[]), 1), vec![Command::SetRequest(0)]);
        // They registered and run the job; later idle, they are released like any other.
        assert_eq!(pool.tick(&view(0, &[(&c1, 0, 1), (&c2, 0, 1)]), 2), vec![]);
        assert_eq!(pool.starting(), 0);
        assert_eq!(pool.tick(&view(0, &[(&c1, 1, 1), (&c2, 0, 1)]), 3), vec![]);
        assert_eq!(
            pool.tick(&view(0, &[(&c1, 1, 1), (&c2, 0, 1)]), 30_003),
            vec![Command::Stop(c1.clone())]
        );
    }

    #[test]
    fn withdraws_requests_no_longer_needed_and_releases_surplus_grants() {
        let mut pool = TaskManagerPool::new(CAP, 1, 30_000, 3);
        assert_eq!(pool.tick(&view(2, &[]), 0), vec![Command::SetRequest(2)]);
        // The job was cancelled: nothing pending any more.
        assert_eq!(pool.tick(&view(0, &[]), 1), vec![Command::SetRequest(0)]);
        // Grants in flight arrive anyway: given back.
        let (c1, c2) = (container(1), container(2));
        assert_eq!(
            pool.on_allocated(vec![c1.clone(), c2.clone()], 0),
            vec![Command::Release(c1.id), Command::Release(c2.id)]
        );
        assert_eq!(pool.containers(), 0);
    }

    #[test]
    fn idle_taskmanagers_are_stopped_after_the_timeout_but_not_while_slots_are_wanted() {
        let mut pool = TaskManagerPool::new(CAP, 1, 30_000, 3);
        pool.tick(&view(1, &[]), 0);
        let c1 = container(1);
        pool.on_allocated(vec![c1.clone()], 0);
        // Busy: the job holds its slot.
        assert_eq!(pool.tick(&view(0, &[(&c1, 0, 1)]), 1_000), vec![]);
        // The job ended at 2 s: idle from then.
        assert_eq!(pool.tick(&view(0, &[(&c1, 1, 1)]), 2_000), vec![]);
        assert_eq!(pool.tick(&view(0, &[(&c1, 1, 1)]), 31_999), vec![]);
        // A job waits for more slots than exist: keep it even though it is idle.
        let mut busy_pool = TaskManagerPool::new(CAP, 1, 30_000, 3);
        busy_pool.tick(&view(1, &[]), 0);
        busy_pool.on_allocated(vec![c1.clone()], 0);
        busy_pool.tick(&view(0, &[(&c1, 1, 1)]), 0);
        assert!(
            !busy_pool
                .tick(&view(2, &[(&c1, 1, 1)]), 40_000)
                .iter()
                .any(|c| matches!(c, Command::Stop(_)))
        );
        // Back in the first pool: the timeout passes.
        assert_eq!(
            pool.tick(&view(0, &[(&c1, 1, 1)]), 32_000),
            vec![Command::Stop(c1.clone())]
        );
        // Its completion is expected: lost (for the Dispatcher), but not a failure.
        assert_eq!(
            pool.on_completed(&[completed(&c1, 143)]),
            vec![Command::Lost {
                resource_id: c1.id.to_string(),
                reason: format!(
                    "its YARN container {} ended with exit status 143: killed",
                    c1.id
                ),
            }]
        );
        assert_eq!(pool.containers(), 0);
    }

    #[test]
    fn a_crashed_taskmanager_is_lost_and_replaced_and_too_many_crashes_fail() {
        let mut pool = TaskManagerPool::new(CAP, 1, 30_000, 1);
        pool.tick(&view(1, &[]), 0);
        let c1 = container(1);
        pool.on_allocated(vec![c1.clone()], 0);
        pool.tick(&view(0, &[(&c1, 0, 1)]), 1);
        let out = pool.on_completed(&[completed(&c1, 1)]);
        assert!(
            matches!(&out[..], [Command::Lost { resource_id, .. }] if *resource_id == c1.id.to_string())
        );
        // The job fails over and asks for its slot again: a replacement is requested.
        assert_eq!(pool.tick(&view(1, &[]), 2), vec![Command::SetRequest(1)]);
        let c2 = container(2);
        pool.on_allocated(vec![c2.clone()], 0);
        // The replacement cannot even start: the second failure exceeds the limit of 1.
        let out = pool.on_launch_failed(c2.id, "no such file");
        assert_eq!(out[0], Command::Release(c2.id));
        assert!(
            matches!(&out[1], Command::Fail(m) if m.contains("2 TaskManager containers failed") && m.contains("no such file")),
            "{out:?}"
        );
    }

    #[test]
    fn a_taskmanager_that_never_registers_is_stopped_counted_and_replaced() {
        let mut pool = TaskManagerPool::new(CAP, 1, 30_000, 0);
        pool.tick(&view(1, &[]), 0);
        let c1 = container(1);
        pool.on_allocated(vec![c1.clone()], 1_000);
        assert_eq!(
            pool.tick(&view(1, &[]), 1_000 + REGISTRATION_TIMEOUT_MS - 1),
            vec![]
        );
        let out = pool.tick(&view(1, &[]), 1_000 + REGISTRATION_TIMEOUT_MS);
        assert_eq!(out[0], Command::Stop(c1.clone()));
        assert!(
            matches!(&out[1], Command::Fail(m) if m.contains("did not register within 120 s")),
            "{out:?}"
        );
        // It no longer counts as coming: a replacement is asked for in the same tick.
        assert_eq!(out[2], Command::SetRequest(1));
        // Its completion is the expected end of a stop, not a second failure.
        assert!(
            !pool
                .on_completed(&[completed(&c1, 143)])
                .iter()
                .any(|c| matches!(c, Command::Fail(_)))
        );
    }

    #[test]
    fn several_waiting_jobs_add_up_and_free_slots_count_against_them() {
        let mut pool = TaskManagerPool::new(CAP, 2, 30_000, 3);
        let c1 = container(1);
        pool.tick(&view(1, &[]), 0);
        pool.on_allocated(vec![c1.clone()], 0);
        // Two jobs wait for 2 + 3 slots; the registered TaskManager has 1 of 2 free:
        // 4 missing slots → 2 more containers.
        assert_eq!(pool.shortfall(&view(5, &[(&c1, 1, 2)])), 2);
        assert_eq!(
            pool.tick(&view(5, &[(&c1, 1, 2)]), 1),
            vec![Command::SetRequest(2)]
        );
    }

    #[test]
    fn completions_of_unknown_containers_are_ignored() {
        let mut pool = TaskManagerPool::new(CAP, 1, 30_000, 1);
        assert_eq!(pool.on_completed(&[completed(&container(9), 0)]), vec![]);
        assert!(pool.resource_ids().is_empty());
    }
}
