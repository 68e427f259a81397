//! sluice on YARN: the JobManager as ApplicationMaster, TaskManager containers on demand, and the
//! client side of `sluice yarn-session` / `run -t yarn-session`.
//!
//! - [`pool`]: the resource driver's decisions (how many containers, which to launch, release
//!   or stop, what a completed container means) as a pure core with unit tests;
//! - [`am`]: the ApplicationMaster process (`sluice yarn-appmaster`, started by a NodeManager):
//!   a normal JobManager plus the thin loop that carries out the pool's commands over Hadoop RPC;
//! - [`client`]: submission over YARN's REST API, waiting for the cluster, attaching, listing
//!   and killing;
//! - [`properties`]: the file later commands find a detached session with;
//! - [`cluster`]: what the AM and the client both derive from the configuration (addresses,
//!   container sizes);
//! - [`staging`]: the staging directory (local or on HDFS) the shipped files are uploaded to,
//!   and the YARN local resources that name them.
//!
//! The command-line verbs (`yarn-session`, `run -t yarn-application`) are in `crate::cli::yarn`;
//! the YARN protocols themselves live in the `yarn-am` crate.

use std::time::Duration;

pub use crate::resource::application::ApplicationJob;
use crate::resource::application::{from_hex_json, to_hex_json};

pub mod am;
pub mod client;
pub mod cluster;
pub mod error;
pub mod pool;
pub mod properties;
pub mod staging;

pub use error::YarnError;

/// Environment variable (set at submission) with the scheduler address the AM registers with.
pub const SCHEDULER_ENV: &str = "SLUICE_YARN_SCHEDULER";
/// Environment variable (set at submission) naming the application's staging directory (a
/// local path or an `hdfs://` URI), which the AM removes when the application ends.
pub const SHIP_DIR_ENV: &str = "SLUICE_YARN_SHIP_DIR";
/// Environment variable (set at submission) with the local resources the AM was started with,
/// which it gives every TaskManager container unchanged (hex-encoded JSON, see [`JOB_ENV`]).
pub const RESOURCES_ENV: &str = "SLUICE_YARN_RESOURCES";
/// The link name of the shipped binary in every container's working directory.
pub const BINARY: &str = "sluice";
/// The YARN application type of sluice applications.
pub const APPLICATION_TYPE: &str = "sluice";
/// File names shipped to each container (their link names in its working directory).
pub const SHIPPED_FILES: [&str; 3] = ["sluice", "config.yaml", ".cluster-secret"];
/// Environment variable (set at submission by `run -t yarn-application`) holding the one job
/// the AM runs: [`ApplicationJob`] as hex-encoded JSON, since the NodeManager's launch script
/// does not preserve quotes in environment values.
pub const JOB_ENV: &str = "SLUICE_YARN_JOB";

/// A running session: its YARN application and its JobManager's REST address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The YARN application id.
    pub application_id: String,
    /// `host:port` of the JobManager's REST API and web UI.
    pub rest_address: String,
    /// Seconds from submission to the JobManager answering.
    pub startup: Duration,
}
