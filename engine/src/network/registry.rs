//! The result partitions a TaskManager's running subtasks produce, waiting for their consumers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::buffer::NetBuffer;
use super::spill::BlockingPartition;
use crate::common::ids::{JobId, PartitionId};

/// Subpartition queues by partition; a consumer takes its queue's receiving end once.
#[derive(Default)]
pub(crate) struct PartitionRegistry {
    partitions: Mutex<Partitions>,
    changed: Condvar,
}

#[derive(Default)]
struct Partitions {
    by_id: HashMap<PartitionId, Vec<Subpartition>>,
    /// Finished blocking partitions of batch jobs, read from their files by any number of
    /// consumers, each from the start.
    blocking: HashMap<PartitionId, Arc<BlockingPartition>>,
    /// Jobs whose subtasks run in a worker process of this TaskManager, with the worker's data
    /// port: consumers asking here for their partitions are sent there.
    moved: HashMap<JobId, u16>,
}

/// A subpartition's queue, until its consumer takes it.
pub(crate) struct Subpartition {
    pub(crate) queue: Option<flume::Receiver<NetBuffer>>,
    /// Set when a consumer of this TaskManager takes the queue (not the transport for a
    /// remote one): the producer may then hand it typed batches (see `NetBuffer::Batch`).
    pub(crate) local_reader: Arc<AtomicBool>,
}

/// Why a consumer could not get its subpartition.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TakeError {
    #[error("partition {0} was not produced here within {1:?}")]
    NotFound(PartitionId, Duration),
    #[error("subpartition {1} of partition {0} does not exist or was already taken")]
    Taken(PartitionId, u32),
    #[error("cancelled")]
    Cancelled,
    #[error("partition {0} is served by the job's worker process at port {1}")]
    Moved(PartitionId, u16),
    /// A blocking partition's file could not be read.
    #[error("blocking partition {0} cannot be read: {1}")]
    Unreadable(PartitionId, std::io::Error),
}

impl PartitionRegistry {
    /// Makes a producer's subpartitions available to consumers.
    pub(crate) fn register(&self, id: PartitionId, subpartitions: Vec<Subpartition>) {
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        map.by_id.insert(id, subpartitions);
        self.changed.notify_all();
    }

    /// Makes a finished blocking partition available to its consumers.
    pub(crate) fn register_blocking(&self, id: PartitionId, partition: BlockingPartition) {
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        map.blocking.insert(id, Arc::new(partition));
        self.changed.notify_all();
    }

    /// From now on, requests for `job`'s partitions are answered with [`TakeError::Moved`] to
    /// the data port of the worker process that runs its subtasks (`None`: no longer).
    pub(crate) fn set_moved(&self, job: JobId, port: Option<u16>) {
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        match port {
            Some(port) => map.moved.insert(job, port),
            None => map.moved.remove(&job),
        };
        self.changed.notify_all();
    }

    /// Takes the receiving end of one subpartition, waiting up to `timeout` for its producer to
    /// be deployed; `cancelled` is polled while waiting. `local`: the taker is a consumer in
    /// this TaskManager (it reads typed batches), not the transport serving a remote one.
    pub(crate) fn take(
        &self,
        id: PartitionId,
        subpartition: u32,
        local: bool,
        timeout: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<flume::Receiver<NetBuffer>, TakeError> {
        let deadline = Instant::now() + timeout;
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(&port) = map.moved.get(&id.producer.job).filter(|_| !local) {
                return Err(TakeError::Moved(id, port));
            }
            if let Some(partition) = map.blocking.get(&id) {
                return partition
                    .read(subpartition)
                    .map_err(|e| TakeError::Unreadable(id, e));
            }
            if let Some(subs) = map.by_id.get_mut(&id) {
                let sub = subs
                    .get_mut(subpartition as usize)
                    .filter(|s| s.queue.is_some())
                    .ok_or(TakeError::Taken(id, subpartition))?;
                if local {
                    sub.local_reader.store(true, Ordering::Release);
                }
                return sub.queue.take().ok_or(TakeError::Taken(id, subpartition));
            }
            if cancelled() {
                return Err(TakeError::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(TakeError::NotFound(id, timeout));
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            map = self
                .changed
                .wait_timeout(map, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Forgets every partition of a job (it ended or is being restarted).
    pub(crate) fn release_job(&self, job: JobId) {
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        map.by_id.retain(|id, _| id.producer.job != job);
        map.blocking.retain(|id, _| id.producer.job != job);
    }

    /// Forgets one producer's partitions.
    pub(crate) fn release_producer(&self, producer: crate::common::ids::ExecutionId) {
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        map.by_id.retain(|id, _| id.producer != producer);
        map.blocking.retain(|id, _| id.producer != producer);
    }
}
