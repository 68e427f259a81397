//! The TaskManager's network memory budget, counted in buffers of `segment-size` bytes.
//!
//! Every buffer a task can hold is reserved here before the task starts: for each output
//! subpartition its queue (`buffers-per-channel`) plus the buffer being filled, and for each
//! remote input channel its credit (exclusive buffers plus a share of the gate's floating ones).
//! Local input channels read the producer's queues, which the producer reserved. A task that
//! would exceed the budget fails at start with Flink's "Insufficient number of network buffers"
//! instead of letting the process grow: the network memory is bounded by configuration, however
//! slow a consumer is.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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
