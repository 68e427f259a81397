//! sluice's ResourceManager (not YARN's): knows every registered TaskManager and its slots,
//! queues slot requests of JobMasters, and hands out only slots that exist. A pure core: events
//! and the time in milliseconds go in, decisions come out.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Serialize;

use crate::common::ids::{JobId, ResourceId};
use crate::rpc::messages::Hardware;

/// A slot handed to a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlotRef {
    /// The TaskManager holding it.
    pub resource_id: ResourceId,
    /// Its data-plane address.
    pub data_address: SocketAddr,
    /// The slot's index on that TaskManager.
    pub index: u32,
}

/// A registered TaskManager.
#[derive(Clone, Debug)]
pub struct TaskManagerInfo {
    /// Its id.
    pub resource_id: ResourceId,
    /// Host name.
    pub host: String,
    /// Data-plane address.
    pub data_address: SocketAddr,
    /// Control connection's peer address.
    pub rpc_address: SocketAddr,
    /// Hardware it reported.
    pub hardware: Hardware,
    /// Network memory in bytes.
    pub network_memory: u64,
    /// Managed memory in bytes (for RocksDB).
    pub managed_memory: u64,
    /// When it registered (ms since the epoch).
    pub registered_at: u64,
    /// When it was last heard from (ms since the epoch).
    pub last_heartbeat: u64,
    /// Which job holds each slot.
    pub slots: Vec<Option<JobId>>,
}

impl TaskManagerInfo {
    /// Slots no job holds.
    pub fn free_slots(&self) -> u32 {
        self.slots.iter().filter(|s| s.is_none()).count() as u32
    }
}

#[derive(Clone, Debug)]
struct Request {
    job: JobId,
    slots: u32,
    /// Granted once this many are free (then as many as are, up to `slots`).
    at_least: u32,
    since: u64,
}

/// Slot bookkeeping for the cluster.
#[derive(Default, Debug)]
pub struct ResourceManager {
    taskmanagers: BTreeMap<ResourceId, TaskManagerInfo>,
    pending: Vec<Request>,
    /// Slots jobs of the adaptive scheduler could use, by job: they run with fewer, but an
    /// active resource driver should provide them.
    declared: BTreeMap<JobId, u32>,
}

impl ResourceManager {
    /// Adds (or replaces, after a restart with the same id) a TaskManager. Returns the jobs that
    /// held slots on the replaced instance.
    pub fn register(&mut self, info: TaskManagerInfo) -> Vec<JobId> {
        let lost = self.unregister(&info.resource_id);
        self.taskmanagers.insert(info.resource_id.clone(), info);
        lost
    }

    /// Removes a TaskManager; returns the jobs that held slots on it.
    pub fn unregister(&mut self, id: &str) -> Vec<JobId> {
        let mut jobs: Vec<JobId> = match self.taskmanagers.remove(id) {
            Some(tm) => tm.slots.into_iter().flatten().collect(),
            None => Vec::new(),
        };
        jobs.sort();
        jobs.dedup();
        jobs
    }

    /// Notes a sign of life.
    pub fn heartbeat(&mut self, id: &str, now: u64) -> bool {
        match self.taskmanagers.get_mut(id) {
            Some(tm) => {
                tm.last_heartbeat = now;
                true
            }
            None => false,
        }
    }

    /// TaskManagers silent for longer than `timeout` ms.
    pub fn silent_since(&self, now: u64, timeout: u64) -> Vec<ResourceId> {
        self.taskmanagers
            .values()
            .filter(|tm| now.saturating_sub(tm.last_heartbeat) > timeout)
            .map(|tm| tm.resource_id.clone())
            .collect()
    }

    /// The first instant at which [`silent_since`](Self::silent_since) or
    /// [`expire`](Self::expire) would return something, for these timeouts (ms).
    pub fn poll_timeout(&self, heartbeat_timeout: u64, request_timeout: u64) -> Option<u64> {
        let silent = self
            .taskmanagers
            .values()
            .map(|tm| {
                tm.last_heartbeat
                    .saturating_add(heartbeat_timeout)
                    .saturating_add(1)
            })
            .min();
        let expiry = self
            .pending
            .iter()
            .map(|r| r.since.saturating_add(request_timeout))
            .min();
        [silent, expiry].into_iter().flatten().min()
    }

    /// Queues a request for `slots` slots for `job`.
    pub fn request(&mut self, job: JobId, slots: u32, now: u64) {
        self.request_between(job, slots, slots, now);
    }

    /// Queues a request of `job` for up to `slots` slots, granted once `at_least` are free
    /// (a batch job runs on whatever it gets).
    pub fn request_between(&mut self, job: JobId, at_least: u32, slots: u32, now: u64) {
        self.pending.retain(|r| r.job != job);
        self.pending.push(Request {
            job,
            slots,
            at_least: at_least.clamp(1, slots.max(1)),
            since: now,
        });
    }

    /// Withdraws a job's pending request.
    pub fn cancel_request(&mut self, job: JobId) {
        self.pending.retain(|r| r.job != job);
    }

    /// Declares that `job` (under the adaptive scheduler) could use `slots` slots.
    pub fn declare(&mut self, job: JobId, slots: u32) {
        self.declared.insert(job, slots);
    }

    /// Slots that queued requests wait for, and slots that jobs of the adaptive scheduler
    /// could use beyond those they hold and ask for (what an active resource driver, e.g.
    /// YARN's, must provide beyond the free slots).
    pub fn pending_slots(&self) -> u32 {
        let queued: u32 = self.pending.iter().map(|r| r.slots).sum();
        let declared: u32 = self
            .declared
            .iter()
            .map(|(&job, &wanted)| {
                let asked = self
                    .pending
                    .iter()
                    .filter(|r| r.job == job)
                    .map(|r| r.slots)
                    .sum::<u32>();
                wanted.saturating_sub(self.held_by(job).max(asked))
            })
            .sum();
        queued + declared
    }

    /// Slots `job` holds.
    pub fn held_by(&self, job: JobId) -> u32 {
        self.taskmanagers
            .values()
            .flat_map(|tm| &tm.slots)
            .filter(|s| **s == Some(job))
            .count() as u32
    }

    /// Whether a job waits for slots.
    pub fn is_pending(&self, job: JobId) -> bool {
        self.pending.iter().any(|r| r.job == job)
    }

    /// Grants every pending request that the free slots can satisfy, oldest first: in full,
    /// or, for a request that takes fewer, as many as are free.
    /// Slots are spread: each comes from the TaskManager with the most free slots, so a job's
    /// subtasks use all TaskManagers.
    pub fn allocate(&mut self) -> Vec<(JobId, Vec<SlotRef>)> {
        let mut granted = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            let free = self.free_slots();
            if self.pending[i].at_least <= free {
                let want = self.pending[i].slots.min(free);
                let job = self.pending.remove(i).job;
                let slots = (0..want).filter_map(|_| self.take_one(job)).collect();
                granted.push((job, slots));
            } else {
                i += 1;
            }
        }
        granted
    }

    fn take_one(&mut self, job: JobId) -> Option<SlotRef> {
        let tm = self
            .taskmanagers
            .values_mut()
            .filter(|tm| tm.free_slots() > 0)
            .max_by_key(|tm| tm.free_slots())?;
        let index = tm.slots.iter().position(Option::is_none)?;
        tm.slots[index] = Some(job);
        Some(SlotRef {
            resource_id: tm.resource_id.clone(),
            data_address: tm.data_address,
            index: index as u32,
        })
    }

    /// Requests older than `timeout` ms; they are removed.
    pub fn expire(&mut self, now: u64, timeout: u64) -> Vec<JobId> {
        let (expired, kept): (Vec<_>, Vec<_>) = self
            .pending
            .drain(..)
            .partition(|r| now.saturating_sub(r.since) >= timeout);
        self.pending = kept;
        expired.into_iter().map(|r| r.job).collect()
    }

    /// Frees every slot a job holds (its declaration stays: see [`forget`](Self::forget)).
    pub fn release(&mut self, job: JobId) {
        for tm in self.taskmanagers.values_mut() {
            for slot in &mut tm.slots {
                if *slot == Some(job) {
                    *slot = None;
                }
            }
        }
        self.cancel_request(job);
    }

    /// The job ended: frees its slots and forgets its declaration.
    pub fn forget(&mut self, job: JobId) {
        self.release(job);
        self.declared.remove(&job);
    }

    /// Registered TaskManagers.
    pub fn taskmanagers(&self) -> impl Iterator<Item = &TaskManagerInfo> {
        self.taskmanagers.values()
    }

    /// One TaskManager.
    pub fn taskmanager(&self, id: &str) -> Option<&TaskManagerInfo> {
        self.taskmanagers.get(id)
    }

    /// Slots of all TaskManagers.
    pub fn total_slots(&self) -> u32 {
        self.taskmanagers
            .values()
            .map(|tm| tm.slots.len() as u32)
            .sum()
    }

    /// Slots no job holds.
    pub fn free_slots(&self) -> u32 {
        self.taskmanagers
            .values()
            .map(TaskManagerInfo::free_slots)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tm(id: &str, slots: usize) -> TaskManagerInfo {
        TaskManagerInfo {
            resource_id: id.into(),
            host: "localhost".into(),
            data_address: "127.0.0.1:1".parse().unwrap(),
            rpc_address: "127.0.0.1:2".parse().unwrap(),
            hardware: Hardware::default(),
            network_memory: 0,
            managed_memory: 0,
            registered_at: 0,
            last_heartbeat: 0,
            slots: vec![None; slots],
        }
    }

    #[test]
    fn grants_only_whole_requests_and_spreads_over_taskmanagers() {
        let mut rm = ResourceManager::default();
        rm.register(tm("a", 2));
        rm.register(tm("b", 2));
        let (j1, j2, j3) = (JobId(1), JobId(2), JobId(3));
        rm.request(j1, 2, 0);
        rm.request(j2, 5, 0);
        rm.request(j3, 2, 0);
        let granted = rm.allocate();
        assert_eq!(
            granted.len(),
            2,
            "the 5-slot request waits, smaller ones pass it"
        );
        let mut tms: Vec<&str> = granted[0]
            .1
            .iter()
            .map(|s| s.resource_id.as_str())
            .collect();
        tms.sort();
        assert_eq!(tms, ["a", "b"]);
        assert_eq!(rm.free_slots(), 0);
        assert!(rm.is_pending(j2));
        rm.release(j1);
        assert_eq!(rm.free_slots(), 2);
        assert!(rm.allocate().is_empty());
        assert_eq!(rm.expire(299_999, 300_000), vec![]);
        assert_eq!(rm.expire(300_000, 300_000), vec![j2]);
        assert!(!rm.is_pending(j2));
    }

    #[test]
    fn losing_a_taskmanager_names_the_jobs_on_it() {
        let mut rm = ResourceManager::default();
        rm.register(tm("a", 1));
        rm.register(tm("b", 1));
        rm.request(JobId(7), 2, 0);
        assert_eq!(rm.allocate().len(), 1);
        assert_eq!(rm.unregister("a"), vec![JobId(7)]);
        assert_eq!(rm.total_slots(), 1);
        assert_eq!(rm.silent_since(100, 50), vec!["b".to_string()]);
        rm.heartbeat("b", 90);
        assert!(rm.silent_since(100, 50).is_empty());
    }

    #[test]
    fn declared_slots_count_as_pending_beyond_those_held_or_asked_for() {
        let mut rm = ResourceManager::default();
        rm.register(tm("a", 2));
        let job = JobId(3);
        rm.declare(job, 5);
        assert_eq!(rm.pending_slots(), 5);
        rm.request(job, 2, 0);
        assert_eq!(
            rm.pending_slots(),
            2 + 3,
            "the request, and 3 more it could use"
        );
        assert_eq!(rm.allocate().len(), 1);
        assert_eq!((rm.held_by(job), rm.pending_slots()), (2, 3));
        rm.release(job);
        assert_eq!(
            rm.pending_slots(),
            5,
            "a restarting job still wants its slots"
        );
        rm.forget(job);
        assert_eq!(rm.pending_slots(), 0);
    }
}
