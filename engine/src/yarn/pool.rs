//! The YARN side of the resource driver's decisions, with no I/O: the provider-neutral
//! decisions (how many TaskManagers, which idle one to stop, what an ended one means, the
//! failure limit) are [`WorkerPool`]'s; this adapter adds YARN's container matching (which
//! granted container to launch or give back) and the absolute request YARN is told.
//!
//! Events and `now` (ms) go in, [`Command`]s come out; the I/O loop in `am.rs` carries them out
//! against YARN and the Dispatcher. A TaskManager started by this pool registers with its
//! container id as its resource id, which is how slots and containers are matched up.

use std::collections::BTreeSet;

use yarn_am::{AllocationMatcher, Container, ContainerId, ContainerStatus, Decision, Resource};

use crate::resource::pool::{Action, FailureLimit, WorkerPool};
pub use crate::resource::pool::{REGISTRATION_TIMEOUT_MS, SlotView};

/// The one priority sluice asks TaskManager containers at (one resource profile, as in Flink).
pub const TASKMANAGER_PRIORITY: i32 = 1;

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

/// The TaskManager containers of one ApplicationMaster.
#[derive(Debug)]
pub struct TaskManagerPool {
    capability: Resource,
    matcher: AllocationMatcher<u64>,
    workers: WorkerPool<Container>,
    last_request: Option<i32>,
    /// The latest time an event brought (ms), for failures YARN reports without one.
    now: u64,
}

impl TaskManagerPool {
    /// A pool of TaskManagers of `capability` with `slots_per_taskmanager` slots each;
    /// TaskManagers idle for `idle_timeout_ms` are released; the application fails after
    /// `max_failed` containers ended without being asked to. A started container whose
    /// TaskManager has not registered within [`REGISTRATION_TIMEOUT_MS`] is stopped and
    /// counted as failed.
    pub fn new(
        capability: Resource,
        slots_per_taskmanager: u32,
        idle_timeout_ms: u64,
        max_failed: u32,
    ) -> Self {
        TaskManagerPool {
            capability,
            matcher: AllocationMatcher::new(),
            workers: WorkerPool::new(
                "TaskManager containers",
                slots_per_taskmanager,
                idle_timeout_ms,
                FailureLimit::Total {
                    max: max_failed,
                    key: "yarn.maximum-failed-containers",
                },
            ),
            last_request: None,
            now: 0,
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
        self.workers.starting()
    }

    /// Containers granted and not ended (starting, running or stopping).
    pub fn containers(&self) -> usize {
        self.workers.workers()
    }

    /// The container of a TaskManager, by resource id.
    pub fn container_of(&self, resource_id: &str) -> Option<&Container> {
        self.workers.worker(resource_id)
    }

    /// How many more containers the demand needs (negative: how many outstanding requests
    /// are no longer needed).
    pub fn shortfall(&self, view: &SlotView) -> i64 {
        self.workers.shortfall(view)
    }

    /// Time passes with the ResourceManager in `view`: registrations are noted, containers are
    /// requested or requests withdrawn, TaskManagers idle longer than the timeout are stopped.
    pub fn tick(&mut self, view: &SlotView, now: u64) -> Vec<Command> {
        self.now = self.now.max(now);
        let actions = self.workers.tick(view, now);
        let mut out = self.commands(actions, now);
        out.extend(self.request_if_changed());
        out
    }

    /// The core's actions as YARN commands; requests and withdrawals go to the matcher.
    fn commands(&mut self, actions: Vec<Action<Container>>, now: u64) -> Vec<Command> {
        let mut out = Vec::new();
        for action in actions {
            match action {
                Action::Request(n) => {
                    for _ in 0..n {
                        self.matcher
                            .request(TASKMANAGER_PRIORITY, self.capability, now);
                    }
                }
                Action::Withdraw(n) => {
                    for _ in 0..n {
                        self.matcher.cancel(TASKMANAGER_PRIORITY, self.capability);
                    }
                }
                Action::Stop(container) => out.push(Command::Stop(container)),
                Action::Lost {
                    resource_id,
                    reason,
                } => out.push(Command::Lost {
                    resource_id,
                    reason,
                }),
                Action::Fail(diagnostics) => out.push(Command::Fail(diagnostics)),
            }
        }
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
        self.now = self.now.max(now);
        let mut out = Vec::new();
        for decision in self.matcher.on_allocated(containers) {
            match decision {
                Decision::Launch { container, .. } => {
                    self.workers
                        .started(container.id.to_string(), container.clone(), now);
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
            self.workers.adopt(container.id.to_string(), container, now);
        }
    }

    /// A container could not be started through its NodeManager.
    pub fn on_launch_failed(&mut self, id: ContainerId, error: &str) -> Vec<Command> {
        let mut out = vec![Command::Release(id)];
        let actions = self.workers.start_failed(
            &id.to_string(),
            &format!("starting {id} failed: {error}"),
            self.now,
        );
        out.extend(self.commands(actions, self.now));
        out
    }

    /// YARN reports containers ended. A TaskManager that ended without being stopped is lost
    /// (its jobs fail over, and the next tick asks for a replacement if slots are short).
    pub fn on_completed(&mut self, statuses: &[ContainerStatus]) -> Vec<Command> {
        let mut out = Vec::new();
        for s in statuses {
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
            let actions = self.workers.ended(&s.id.to_string(), &reason, self.now);
            out.extend(self.commands(actions, self.now));
        }
        out
    }

    /// Every container the pool holds, to stop when the application ends.
    pub fn all_containers(&self) -> Vec<Container> {
        self.workers.all()
    }

    /// Resource ids of TaskManagers that were granted (for tests and logs).
    pub fn resource_ids(&self) -> BTreeSet<String> {
        self.workers.resource_ids()
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
