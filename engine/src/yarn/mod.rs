//! sluice on YARN: the JobManager as ApplicationMaster, TaskManager containers on demand, and the
//! client side of `sluice yarn-session` / `run -t yarn-session`.
//!
//! - [`pool`]: the resource driver's decisions (how many containers, which to launch, release
//!   or stop, what a completed container means) as a pure core with unit tests;
//! - [`am`]: the ApplicationMaster process (`sluice yarn-appmaster`, started by a NodeManager):
//!   a normal JobManager plus the thin loop that carries out the pool's commands over Hadoop RPC;
//! - [`session`]: submission over YARN's REST API, waiting for the cluster, the properties file
//!   later commands find the session with, and killing.
//!
//! The YARN protocols themselves live in the `yarn-am` crate.

pub mod am;
pub mod error;
pub mod pool;
pub mod session;

pub use error::YarnError;

/// Environment variable (set at submission) with the scheduler address the AM registers with.
pub const SCHEDULER_ENV: &str = "SLUICE_YARN_SCHEDULER";
/// Environment variable (set at submission) naming the directory holding the files shipped to
/// every container: the `sluice` binary, `config.yaml` and `.cluster-secret`.
pub const SHIP_DIR_ENV: &str = "SLUICE_YARN_SHIP_DIR";
/// The YARN application type of sluice applications.
pub const APPLICATION_TYPE: &str = "sluice";
/// File names shipped to each container (their link names in its working directory).
pub const SHIPPED_FILES: [&str; 3] = ["sluice", "config.yaml", ".cluster-secret"];
