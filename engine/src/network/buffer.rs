//! What flows through a channel: buffers of records, and control events.

use rkyv::util::AlignedVec;

/// One unit of a channel: a buffer of record frames or an event.
#[derive(Debug)]
pub(crate) enum NetBuffer {
    /// Frames written by [`crate::record::append`].
    Data(Buffer),
    /// The producer has finished; nothing follows.
    EndOfPartition,
    /// A checkpoint barrier: everything before it belongs to the checkpoint, nothing after.
    Barrier(std::sync::Arc<CheckpointBarrier>),
}

/// What a checkpoint barrier carries from the sources through every channel of the job.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CheckpointBarrier {
    /// When the JobMaster triggered it (ms since the epoch).
    pub(crate) timestamp: u64,
    /// Where the snapshot's files go, with the checkpoint id and kind.
    pub(crate) location: crate::checkpoint::SnapshotLocation,
}

impl CheckpointBarrier {
    /// The checkpoint's id.
    pub(crate) fn id(&self) -> u64 {
        self.location.checkpoint_id
    }
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

/// A buffer of record frames. A buffer that came over the network carries a credit: dropping
/// the buffer once its records are processed gives the credit back to the producer, which may
/// then send one more buffer on that channel.
#[derive(Debug)]
pub(crate) struct Buffer {
    bytes: AlignedVec,
    _credit: Option<CreditGuard>,
}

impl Buffer {
    /// A buffer produced on this TaskManager.
    pub(crate) fn local(bytes: AlignedVec) -> Self {
        Buffer {
            bytes,
            _credit: None,
        }
    }

    /// A buffer received from a remote producer, returning its credit when dropped.
    pub(crate) fn remote(bytes: AlignedVec, credit: CreditGuard) -> Self {
        Buffer {
            bytes,
            _credit: Some(credit),
        }
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// The credits a consumer has freed and not yet announced to the producer.
#[derive(Debug, Default)]
pub(crate) struct Credits {
    pub(crate) freed: std::sync::atomic::AtomicU32,
    pub(crate) closed: std::sync::atomic::AtomicBool,
    pub(crate) notify: tokio::sync::Notify,
}

/// Returns one credit when dropped.
#[derive(Debug)]
pub(crate) struct CreditGuard(pub(crate) std::sync::Arc<Credits>);

impl Drop for CreditGuard {
    fn drop(&mut self) {
        self.0
            .freed
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.0.notify.notify_one();
    }
}
