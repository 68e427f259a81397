//! The TaskManager's network memory budget, counted in buffers of `segment-size` bytes, and how
//! many of them each part of a task may hold.
//!
//! Every buffer a task can hold is reserved here before the task starts: for each result
//! partition its pool (the buffers being filled and those queued for consumers, local or
//! remote), and for each remote input channel its credit (exclusive buffers plus a share of the
//! gate's floating ones). Local input channels read the producer's queues, which the producer
//! reserved. A buffer sent to a remote consumer leaves its partition's pool once handed to QUIC,
//! which keeps it until acknowledged: at most the consumer's credit per channel, so a
//! TaskManager's memory stays bounded though that part is counted on the consumer's side. A
//! task that would exceed the budget fails at start with Flink's "Insufficient
//! number of network buffers" instead of letting the process grow: the network memory is
//! bounded by configuration, however slow a consumer is.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How buffers are shared out, by Flink's keys and rules (`NettyShuffleUtils`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BufferShares {
    /// `taskmanager.network.memory.buffers-per-channel`: a remote input channel's exclusive
    /// buffers, and each subpartition's share of its partition's pool.
    pub(crate) per_channel: usize,
    /// `taskmanager.network.memory.floating-buffers-per-gate`: buffers an input gate lends to
    /// its remote channels, and a result partition's pool beyond the per-subpartition shares.
    pub(crate) floating_per_gate: usize,
    /// `taskmanager.network.memory.max-buffers-per-channel`: the most buffers one subpartition
    /// may queue, so that one slow consumer cannot take its partition's whole pool.
    pub(crate) max_per_channel: usize,
}

impl BufferShares {
    /// A result partition's pool: `subpartitions × buffers-per-channel + floating`, and at least
    /// one buffer being filled per subpartition plus one to ship (Flink's pipelined bounds).
    pub(crate) fn partition_pool(&self, subpartitions: usize) -> usize {
        (subpartitions * self.per_channel + self.floating_per_gate).max(subpartitions + 1)
    }

    /// How many shipped buffers one subpartition may queue.
    pub(crate) fn subpartition_queue(&self, subpartitions: usize) -> usize {
        self.max_per_channel
            .min(self.partition_pool(subpartitions))
            .max(1)
    }

    /// A remote input channel's credit: its exclusive buffers plus its share of the gate's
    /// floating ones. Local channels take no credit (they read the producer's queue), so the
    /// floating buffers go to the gate's `remote_channels` alone.
    pub(crate) fn remote_credit(&self, remote_channels: usize) -> usize {
        (self.per_channel + self.floating_per_gate.div_ceil(remote_channels.max(1))).max(1)
    }
}

/// How many buffers the TaskManager may hold for data exchange.
#[derive(Debug)]
pub(crate) struct BufferBudget {
    total: usize,
    used: AtomicUsize,
    segment_size: usize,
}

/// Buffers reserved by one task; returned when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<BufferBudget>,
    buffers: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.buffers, Ordering::AcqRel);
    }
}

impl BufferBudget {
    /// A budget of `network_memory` bytes in buffers of `segment_size` bytes.
    pub(crate) fn new(network_memory: u64, segment_size: usize) -> Arc<Self> {
        let total = (network_memory / segment_size.max(1) as u64) as usize;
        Arc::new(BufferBudget {
            total,
            used: AtomicUsize::new(0),
            segment_size,
        })
    }

    /// All buffers.
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Buffers not reserved by any task.
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.total.saturating_sub(self.used.load(Ordering::Acquire))
    }

    /// Reserves `buffers` for a task, or explains why not.
    pub(crate) fn reserve(self: &Arc<Self>, buffers: usize) -> Result<Reservation, String> {
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            if used + buffers > self.total {
                return Err(format!(
                    "Insufficient number of network buffers: required {buffers}, but only {} available. The total number of network buffers is currently set to {} of {} bytes each. You can increase this number by setting the configuration keys 'taskmanager.memory.network.fraction', 'taskmanager.memory.network.min', and 'taskmanager.memory.network.max'.",
                    self.total - used,
                    self.total,
                    self.segment_size
                ));
            }
            match self.used.compare_exchange_weak(
                used,
                used + buffers,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Ok(Reservation {
                        budget: self.clone(),
                        buffers,
                    });
                }
                Err(now) => used = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLINK: BufferShares = BufferShares {
        per_channel: 2,
        floating_per_gate: 8,
        max_per_channel: 10,
    };

    #[test]
    fn shares_follow_flinks_defaults() {
        // Two subpartitions: 2 × 2 + 8 buffers, any one of them queueing up to 10.
        assert_eq!(FLINK.partition_pool(2), 12);
        assert_eq!(FLINK.subpartition_queue(2), 10);
        // Many subpartitions: the pool grows, the per-subpartition cap stays.
        assert_eq!(FLINK.partition_pool(100), 208);
        assert_eq!(FLINK.subpartition_queue(100), 10);
        // One remote channel in a gate gets all floating buffers; many share them.
        assert_eq!(FLINK.remote_credit(1), 10);
        assert_eq!(FLINK.remote_credit(3), 5);
        assert_eq!(FLINK.remote_credit(100), 3);
    }

    #[test]
    fn shares_never_starve() {
        let none = BufferShares {
            per_channel: 0,
            floating_per_gate: 0,
            max_per_channel: 0,
        };
        // A buffer being filled per subpartition plus one to ship; a queue of one; a credit.
        assert_eq!(none.partition_pool(4), 5);
        assert_eq!(none.subpartition_queue(4), 1);
        assert_eq!(none.remote_credit(0), 1);
        let small = BufferShares {
            max_per_channel: 100,
            ..FLINK
        };
        // A queue never exceeds the pool it draws from.
        assert_eq!(small.subpartition_queue(1), small.partition_pool(1));
    }

    #[test]
    fn reservations_are_bounded_and_returned_on_drop() {
        let budget = BufferBudget::new(10 * 32 * 1024, 32 * 1024);
        assert_eq!(budget.total(), 10);
        let a = budget.reserve(6).unwrap();
        let err = budget.reserve(5).unwrap_err();
        assert!(
            err.contains("required 5, but only 4 available")
                && err.contains("taskmanager.memory.network.fraction"),
            "{err}"
        );
        let b = budget.reserve(4).unwrap();
        assert_eq!(budget.available(), 0);
        drop(a);
        assert_eq!(budget.available(), 6);
        drop(b);
        assert_eq!(budget.available(), 10);
    }
}
