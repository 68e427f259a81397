//! What flows through a channel: buffers of records, and control events.

use rkyv::util::AlignedVec;

/// One unit of a channel: a buffer of record frames or an event.
#[derive(Debug)]
pub(crate) enum NetBuffer {
    /// Frames written by [`crate::record::append`].
    Data(AlignedVec),
    /// The producer has finished; nothing follows.
    EndOfPartition,
}

/// Counters a task keeps about its inputs and outputs, served by the REST API.
#[derive(Debug, Default)]
pub(crate) struct IoCounters {
    pub(crate) records_in: std::sync::atomic::AtomicU64,
    pub(crate) bytes_in: std::sync::atomic::AtomicU64,
    pub(crate) records_out: std::sync::atomic::AtomicU64,
    pub(crate) bytes_out: std::sync::atomic::AtomicU64,
    /// Nanoseconds spent waiting for room downstream (backpressure).
    pub(crate) back_pressured_nanos: std::sync::atomic::AtomicU64,
}
