//! High availability services on ZooKeeper: leader election, leader retrieval and fenced stores.
//!
//! PLACEHOLDER_DOCS
#![warn(missing_docs, unreachable_pub)]

mod config;
mod election;
mod error;
mod fence;
mod leader_info;
mod retrieval;
mod services;
mod session_id;
mod storage;
mod stores;
mod zk;

pub use crate::config::{
    DEFAULT_CLUSTER_ID, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_ROOT, DEFAULT_SESSION_TIMEOUT,
    HaConfig, Layout,
};
pub use crate::election::{LeaderElection, LeadershipEvent, RevokeReason};
pub use crate::error::{HaError, RetryHint};
pub use crate::fence::LeaderFence;
pub use crate::leader_info::{LEADER_INFO_VERSION, LeaderInfo};
pub use crate::retrieval::LeaderRetrieval;
pub use crate::services::ZooKeeperHaServices;
pub use crate::session_id::LeaderSessionId;
pub use crate::storage::{BlobStore, FsBlobStore};
pub use crate::stores::{
    CheckpointIdCounter, CheckpointStore, CompletedCheckpoint, JobGraphStore, JobResultStore,
};
