//! What can go wrong with sluice on Kubernetes, each with a message that names the problem.

/// Why a Kubernetes operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeError {
    /// The kubeconfig or the in-cluster credentials are missing or unusable.
    #[error("Kubernetes credentials from {origin}: {problem}")]
    Config {
        /// The file (or the in-cluster account) read.
        origin: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The API server did not answer.
    #[error("Kubernetes API server {server} is unreachable: {cause}")]
    Unreachable {
        /// Its URL.
        server: String,
        /// The transport's error.
        cause: String,
    },
    /// The API server refused a call.
    #[error("Kubernetes API: {what} answered {status}: {message}")]
    Api {
        /// The call (`POST /api/v1/...`).
        what: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// A watch broke off.
    #[error("Kubernetes watch: {0}")]
    Watch(String),
    /// A cluster is not there or not usable.
    #[error("{0}")]
    Cluster(String),
    /// Something did not happen in time.
    #[error("timed out after {seconds} s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        seconds: u64,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Configuration(#[from] crate::config::ConfigError),
    /// Starting the JobManager failed.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}
