//! What can go wrong with sluice on YARN, each with a message that names the problem.

use yarn_am::{RestError, RpcError};

/// Why a YARN operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum YarnError {
    /// No ResourceManager address is configured anywhere.
    #[error(
        "no YARN ResourceManager configured: set yarn.resourcemanager.webapp.address (-D yarn.resourcemanager.webapp.address=HOST:PORT) or HADOOP_CONF_DIR to a directory with yarn-site.xml"
    )]
    NoResourceManager,
    /// `yarn-site.xml` exists but cannot be read.
    #[error(transparent)]
    YarnSite(#[from] yarn_am::ConfigError),
    /// YARN's REST API failed (unreachable, refused, timed out).
    // The cause is part of the message (not a `source`), so it is printed once, whether a
    // caller shows only the message or the whole chain.
    #[error("YARN ResourceManager at {address}: {cause}")]
    Rest {
        /// The web address used.
        address: String,
        /// What went wrong.
        cause: RestError,
    },
    /// YARN refused the application (queue, memory over the maximum, ...).
    #[error("YARN refused the application {id}: {message}")]
    Refused {
        /// The application id.
        id: String,
        /// YARN's reason.
        message: String,
    },
    /// The application ended before its JobManager was up, or while it was wanted.
    #[error("YARN application {id} ended {state} ({final_status}): {diagnostics}")]
    Ended {
        /// The application id.
        id: String,
        /// YARN's state.
        state: String,
        /// YARN's final status.
        final_status: String,
        /// YARN's diagnostics.
        diagnostics: String,
    },
    /// Something did not happen in time.
    #[error("timed out after {seconds} s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        seconds: u64,
    },
    /// Hadoop RPC with the scheduler or a NodeManager failed.
    #[error("YARN {peer}: {cause}")]
    Rpc {
        /// Which server (`scheduler at HOST:PORT`, `NodeManager HOST:PORT`).
        peer: String,
        /// What went wrong.
        cause: RpcError,
    },
    /// The AM's container environment or token file is missing or broken.
    #[error("not a usable YARN container: {0}")]
    Container(String),
    /// A local file could not be written or read.
    #[error("{what} {path}: {cause}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: String,
        /// Why.
        cause: std::io::Error,
    },
    /// No session was found for `run -t yarn-session`, `list`, `cancel`.
    #[error("no YARN session found: {0}")]
    NoSession(String),
    /// A configuration value is unusable.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The JobManager could not start inside the AM container.
    #[error(transparent)]
    JobManager(#[from] crate::jobmanager::StartError),
    /// The cluster secret could not be set up.
    #[error(transparent)]
    Security(#[from] crate::security::SecurityError),
}

impl YarnError {
    /// A REST error from the ResourceManager at `address`, refusals turned into [`Refused`].
    ///
    /// [`Refused`]: YarnError::Refused
    pub(crate) fn rest(address: &str, id: Option<&str>, cause: RestError) -> Self {
        match cause {
            RestError::Refused { message } => YarnError::Refused {
                id: id.unwrap_or("(new)").to_string(),
                message,
            },
            cause => YarnError::Rest {
                address: address.to_string(),
                cause,
            },
        }
    }
}
