//! The result partitions a TaskManager's running subtasks produce, waiting for their consumers.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::buffer::NetBuffer;
use crate::common::ids::{JobId, PartitionId};

/// Subpartition queues by partition; a consumer takes its queue's receiving end once.
#[derive(Default)]
pub(crate) struct PartitionRegistry {
    partitions: Mutex<HashMap<PartitionId, Vec<Option<flume::Receiver<NetBuffer>>>>>,
    changed: Condvar,
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
}

impl PartitionRegistry {
    /// Makes a producer's subpartitions available to consumers.
    pub(crate) fn register(&self, id: PartitionId, receivers: Vec<flume::Receiver<NetBuffer>>) {
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(id, receivers.into_iter().map(Some).collect());
        self.changed.notify_all();
    }

    /// Takes the receiving end of one subpartition, waiting up to `timeout` for its producer to
    /// be deployed; `cancelled` is polled while waiting.
    pub(crate) fn take(
        &self,
        id: PartitionId,
        subpartition: u32,
        timeout: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<flume::Receiver<NetBuffer>, TakeError> {
        let deadline = Instant::now() + timeout;
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(subs) = map.get_mut(&id) {
                return subs
                    .get_mut(subpartition as usize)
                    .and_then(Option::take)
                    .ok_or(TakeError::Taken(id, subpartition));
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
        map.retain(|id, _| id.producer.job != job);
    }

    /// Forgets one producer's partitions.
    pub(crate) fn release_producer(&self, producer: crate::common::ids::ExecutionId) {
        let mut map = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|id, _| id.producer != producer);
    }
}
