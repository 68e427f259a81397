//! An input gate's channels as a deployment names them (a producer's subpartition and where it
//! runs), and the interface through which a task opens the ones on other TaskManagers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::buffer::NetBuffer;
use crate::common::error::TaskError;
use crate::common::ids::{PartitionId, ResourceId};

/// Where a producer's partition can be fetched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLocation {
    /// The producer's TaskManager.
    pub resource_id: ResourceId,
    /// Its data-plane (QUIC) address.
    pub data_address: SocketAddr,
}

/// One channel of an input gate: a producer's subpartition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelDeployment {
    /// The producer's partition.
    pub partition: PartitionId,
    /// Which subpartition of it this consumer reads.
    pub subpartition: u32,
    /// Where the producer runs.
    pub location: PartitionLocation,
}

/// Fetches a subpartition from another TaskManager (the QUIC client).
pub(crate) trait RemoteChannels: Send + Sync {
    /// Starts reading `channel` and returns the queue its buffers arrive in.
    fn open(
        &self,
        channel: &ChannelDeployment,
        capacity: usize,
        cancelled: Arc<AtomicBool>,
    ) -> Result<flume::Receiver<NetBuffer>, TaskError>;
}
