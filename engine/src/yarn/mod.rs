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

/// The job of a one-job application (`run -t yarn-application`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApplicationJob {
    /// A bundled program's name.
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its parallelism (default: parallelism.default).
    pub parallelism: Option<u32>,
    /// Job-scoped configuration (`-D execution.checkpointing.…` and the like).
    pub overrides: Vec<(String, String)>,
    /// A savepoint to start from.
    pub savepoint: Option<String>,
    /// The job artifact the program comes from, on the submitting machine: shipped as the
    /// application's binary (it is a whole sluice with the job's programs bundled), instead
    /// of the submitting `sluice` itself. Not part of what the AM is told.
    #[serde(skip)]
    pub artifact: Option<std::path::PathBuf>,
}

impl ApplicationJob {
    /// The value of [`JOB_ENV`].
    pub fn to_env(&self) -> String {
        to_hex_json(self)
    }

    /// Parses the value of [`JOB_ENV`].
    pub fn from_env(value: &str) -> Result<Self, String> {
        from_hex_json(JOB_ENV, value)
    }
}

/// `value` as hex-encoded JSON: an environment value survives the NodeManager's launch
/// script, which does not preserve quotes.
fn to_hex_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_vec(value)
        .unwrap_or_default()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Parses what [`to_hex_json`] wrote into the environment variable `name`.
fn from_hex_json<T: serde::de::DeserializeOwned>(name: &str, value: &str) -> Result<T, String> {
    let bytes = (0..value.len())
        .step_by(2)
        .map(|i| {
            value
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{name} is not hex"))
        })
        .collect::<Result<Vec<u8>, String>>()?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{name} is not valid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_application_job_survives_the_environment_and_garbage_is_an_error() {
        let job = ApplicationJob {
            name: "wordcount".into(),
            args: vec!["--input".into(), "/a \"b\" c".into()],
            parallelism: Some(2),
            overrides: vec![("restart-strategy.type".into(), "none".into())],
            savepoint: None,
            artifact: None,
        };
        let env = job.to_env();
        assert!(env.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(ApplicationJob::from_env(&env), Ok(job));
        assert!(ApplicationJob::from_env("zz").is_err());
        assert!(ApplicationJob::from_env("7b").is_err());
        assert!(ApplicationJob::from_env("7").is_err());
    }
}
