//! A native Rust client for Apache Hadoop YARN: REST for submitting, watching and killing
//! applications, and Hadoop RPC for everything an ApplicationMaster does.
//!
//! # What it promises
//!
//! - [`RestClient`] speaks the ResourceManager's REST API (`/ws/v1/cluster`): new
//!   application, submission with local resources, status, attempts, listing by type, kill
//!   (repeated until YARN reports the application ended), cluster metrics and nodes. It
//!   parses leniently across Hadoop versions.
//! - [`RpcClient`] speaks Hadoop IPC (protocol version 9) with SASL TOKEN/DIGEST-MD5
//!   authentication, for any protobuf protocol. A garbage frame from a server is an error,
//!   never a panic, and never makes it allocate more than [`MAX_FRAME_LEN`].
//! - [`AmRmClient`] is the ApplicationMaster's ApplicationMasterProtocol client (register,
//!   heartbeat with absolute outstanding asks, releases, rolled AMRM tokens, NM tokens per
//!   node, unregister); [`NmClient`] starts, stops and queries containers on a NodeManager.
//! - [`Credentials`] reads the token file a NodeManager gives every container
//!   (`HADOOP_TOKEN_FILE_LOCATION`), in both of Hadoop's formats.
//! - [`YarnSite`] reads `yarn-site.xml` to find the scheduler and web addresses.
//! - [`AllocationMatcher`] decides which granted container serves which request, with no I/O.
//!
//! Every error type says whether a retry can help (`is_retryable`).
//!
//! # What it does not do
//!
//! Kerberos (it authenticates only with tokens, which YARN uses for AMs even on secure
//! clusters, but a secure cluster's REST API needs SPNEGO), HDFS uploads, ResourceManager HA
//! failover between several addresses, and RPC encryption (qop `auth-conf`).
//!
//! # An ApplicationMaster in outline
//!
//! ```no_run
//! # async fn am() -> Result<(), Box<dyn std::error::Error>> {
//! use yarn_am::{AmRmClient, Credentials, FinalStatus, LaunchContext, NmClient, Resource};
//! let creds = Credentials::from_env()?;
//! let mut rm = AmRmClient::new("rm-host:8030", creds.amrm_token()?.clone());
//! rm.register("my-host", 0, "").await?;
//! rm.set_request(1, Resource::new(1024, 1), 1);
//! let container = loop {
//!     if let Some(c) = rm.allocate(0.0).await?.allocated.pop() { break c; }
//!     tokio::time::sleep(std::time::Duration::from_millis(500)).await;
//! };
//! let token = rm.nm_token(&container.node).ok_or("no NM token")?.clone();
//! let mut nm = NmClient::new(&container.node, token);
//! let launch = LaunchContext { commands: vec!["sleep 10".into()], ..Default::default() };
//! nm.start_container(&container, &launch).await?;
//! rm.finish(FinalStatus::Succeeded, "", None, std::time::Duration::from_secs(30)).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs, unreachable_pub)]

mod amrm;
mod codec;
mod config;
mod credentials;
mod env;
mod error;
#[cfg(test)]
mod fixture_tests;
mod ipc;
mod matcher;
mod nm;
mod proto;
mod rest;
mod sasl;
mod types;

pub use amrm::{AM_PROTOCOL, Allocation, AmRmClient, Registration};
pub use codec::{
    MAX_FRAME_LEN, MessageBytes, ResponseFrame, ResponseStatus, decode_frame_len, decode_varint,
    encode_frame, encode_varint, split_delimited,
};
pub use config::{HADOOP_CONF_DIR_ENV, YarnSite};
pub use credentials::{Credentials, TOKEN_FILE_ENV, read_vlong, write_vint};
pub use env::ContainerEnv;
pub use error::{ConfigError, CredentialsError, DecodeError, RestError, RpcError};
pub use ipc::{CAPTURE_DIR_ENV, DEFAULT_CALL_TIMEOUT, RpcClient};
pub use matcher::{AllocationMatcher, Decision};
pub use nm::{NM_PROTOCOL, NmClient};
pub use rest::{
    AppAttempt, AppReport, AppState, AppSubmission, ClusterMetrics, NewApplication, NodeReport,
    RestClient,
};
pub use sasl::{
    DigestChallenge, DigestResponse, digest_response, token_credentials, verify_rspauth,
};
pub use types::{
    AMRM_TOKEN_KIND, AmCommand, ApplicationAttemptId, ApplicationId, Container, ContainerId,
    ContainerState, ContainerStatus, FinalStatus, LaunchContext, LocalResource, LocalResourceType,
    NodeId, Resource, Token, Visibility,
};
