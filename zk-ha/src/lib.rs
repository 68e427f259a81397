//! High availability services on ZooKeeper: leader election, leader retrieval and fenced stores.
//!
//! A library for a coordinator with standbys (sluice's JobManager, but nothing here knows about
//! it): one contender leads at a time, followers and clients find the leader, and the leader keeps
//! small durable state that a successor takes over. Built on `zookeeper-client` and tokio.
//!
//! # Using it
//! ```no_run
//! # async fn demo() -> Result<(), zk_ha::HaError> {
//! use zk_ha::{HaConfig, LeaderInfo, LeadershipEvent, ZooKeeperHaServices};
//!
//! let config = HaConfig::new("zk1:2181,zk2:2181,zk3:2181", "/shared/ha").with_cluster_id("prod");
//! let ha = ZooKeeperHaServices::new(&config)?;
//! let mut election = ha.start_election();
//! while let Some(event) = election.next_event().await {
//!     match event {
//!         LeadershipEvent::Granted(fence) => {
//!             let me = LeaderInfo::new(fence.session_id()).with_address("rpc", "10.0.0.5:6123");
//!             election.publish(&fence, "dispatcher", &me).await?;
//!             for job in ha.job_graph_store().job_ids().await? {
//!                 // recover `job`; every write carries `&fence`
//!             }
//!         }
//!         LeadershipEvent::Revoked { .. } => { /* stop acting at once */ }
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # ZooKeeper layout
//! Under `<root>/<cluster-id>` (defaults `/sluice` and `default`, Flink's
//! `high-availability.zookeeper.path.root` and `high-availability.cluster-id`):
//!
//! | node | kind | content |
//! |---|---|---|
//! | `leader-latch/latch-<token>-<seq>` | EPHEMERAL_SEQUENTIAL | one per contender; the lowest `<seq>` leads; data: the current term's leader session id |
//! | `leader/<component>/connection_info` | EPHEMERAL (leader's session) | JSON `{"version":1,"session_id":"<32 hex>","addresses":{"rpc":..,"rest":..}}` |
//! | `jobgraphs/<job-id>` | persistent | pointer to the job graph blob |
//! | `jobs/<job-id>/checkpoints/<id, 19 digits>` | persistent | pointer to the checkpoint metadata blob |
//! | `jobs/<job-id>/checkpoint-counter` | persistent | next checkpoint id, decimal |
//! | `job-results/<job-id>` | persistent | pointer to the job result blob |
//!
//! A pointer is JSON `{"version":1,"file":"<blob name>","len":<bytes>}`; blobs live in
//! `<high-availability.storageDir>/<cluster-id>/` ([`FsBlobStore`], or any [`BlobStore`]).
//!
//! # Promises
//! - **One leader per term, a fresh id per term.** Each grant carries a new random
//!   [`LeaderSessionId`] inside a [`LeaderFence`].
//! - **Fencing.** Every store write (and publication) is a ZooKeeper multi-op that first checks the
//!   term's latch node and its version. A deposed leader's write fails with
//!   [`HaError::NotLeader`], however late it arrives, including a leader re-elected since
//!   (its new term re-versions the node).
//! - **Transient disconnects keep the term.** Losing the connection does not revoke leadership
//!   while the session may live (unlike FLINK-10052); reconnecting within the session timeout
//!   changes nothing.
//! - **Expiry revokes at once.** When the server reports the session expired, when the connection
//!   has been down for as long as the server takes to expire it, or when the process itself was
//!   paused that long (SIGSTOP), the term is revoked and the contender rejoins with a new session,
//!   as a follower.
//! - **A pointer implies its file.** Blobs are written and fsynced under a unique name before
//!   their pointer; deleted only after their pointer is confirmed gone; kept when a commit's
//!   outcome is unknown ([`HaError::CommitUnknown`], unlike FLINK-22494/24543).
//! - **Nothing is cleaned up on revocation**, and only the fenced leader removes HA data
//!   (unlike FLINK-25486); there are no per-job locks to leak (unlike FLINK-10011).
//! - **Errors are classified**: [`HaError::retry_hint`] says whether a retry can help.
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

#[cfg(feature = "testkit")]
pub mod testkit;

pub use crate::config::{
    DEFAULT_CLUSTER_ID, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_ROOT, DEFAULT_SESSION_TIMEOUT,
    HaConfig, Layout, normalize_cluster_id,
};
pub use crate::election::{LeaderElection, LeadershipEvent, RevokeReason};
pub use crate::error::{HaError, RetryHint};
pub use crate::fence::LeaderFence;
pub use crate::leader_info::{LEADER_INFO_VERSION, LeaderInfo};
pub use crate::retrieval::LeaderRetrieval;
pub use crate::services::ZooKeeperHaServices;
pub use crate::session_id::LeaderSessionId;
pub use crate::storage::{BlobStore, FsBlobStore, check_blob_name, new_blob_name};
pub use crate::stores::{
    CheckpointIdCounter, CheckpointStore, CompletedCheckpoint, JobGraphStore, JobResultStore,
};
