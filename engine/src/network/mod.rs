//! The data plane: result partitions written by producing subtasks, input gates read by
//! consuming ones, and the QUIC transport between TaskManagers. Records travel in buffers of
//! rkyv archives; within one TaskManager buffers move through bounded in-memory queues, between
//! TaskManagers over QUIC streams with credit-based flow control. Nothing here passes through
//! the JobManager.

pub(crate) mod budget;
pub(crate) mod buffer;
pub mod channel;
pub(crate) mod gate;
pub(crate) mod partitioner;
pub(crate) mod registry;
pub(crate) mod spill;
pub mod transport;
pub(crate) mod valve;
pub(crate) mod writer;
