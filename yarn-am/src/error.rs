//! Error types. Every variant says whether retrying the same operation can help, so a caller's
//! restart strategy can act on the type rather than on message text.

use std::time::Duration;

/// Bytes that are not what the Hadoop wire format allows.
///
/// Produced by the pure decoders (frames, varints, SASL challenges, credentials files); a peer
/// that sends garbage gets this, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct DecodeError {
    what: String,
}

impl DecodeError {
    pub(crate) fn new(what: impl Into<String>) -> Self {
        DecodeError { what: what.into() }
    }
}

impl From<prost::DecodeError> for DecodeError {
    fn from(e: prost::DecodeError) -> Self {
        DecodeError::new(format!("invalid protobuf: {e}"))
    }
}

/// A failure of a Hadoop RPC call (ApplicationMasterProtocol, ContainerManagementProtocol, ...).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// The TCP connection could not be opened, or broke during the call.
    #[error("I/O error talking to {addr}: {source}")]
    Io {
        /// The server's `host:port`.
        addr: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The server sent bytes that are not a valid Hadoop RPC frame or message.
    #[error("malformed data from {addr}: {source}")]
    Decode {
        /// The server's `host:port`.
        addr: String,
        /// What was wrong with the bytes.
        #[source]
        source: DecodeError,
    },
    /// SASL authentication failed: wrong or expired token, or no mechanism in common.
    #[error("authentication with {addr} failed: {message}")]
    Auth {
        /// The server's `host:port`.
        addr: String,
        /// The server's exception text, or what the client could not accept.
        message: String,
    },
    /// The server ran the call and answered with a Java exception.
    #[error("{addr} answered with {class}: {message}")]
    Remote {
        /// The server's `host:port`.
        addr: String,
        /// The Java exception class, e.g. `org.apache.hadoop.yarn.exceptions.InvalidResourceRequestException`.
        class: String,
        /// The exception message (the first line; Hadoop often appends a stack trace).
        message: String,
        /// Whether the server closed the connection afterwards (RPC status FATAL).
        fatal: bool,
    },
    /// No response arrived within the call timeout.
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout {
        /// The server's `host:port`.
        addr: String,
        /// The timeout that elapsed.
        timeout: Duration,
    },
    /// A per-request failure reported inside a successful ContainerManagementProtocol response.
    #[error("container {container}: {class}: {message}")]
    Container {
        /// The container the NodeManager refused to act on.
        container: String,
        /// The Java exception class.
        class: String,
        /// The exception message.
        message: String,
    },
    /// The caller asked for something the protocol state does not allow.
    #[error("{0}")]
    Usage(String),
}

/// Java exception classes after which a plain retry can succeed.
const RETRYABLE_REMOTE: &[&str] = &[
    "org.apache.hadoop.ipc.RetriableException",
    "org.apache.hadoop.ipc.StandbyException",
    "org.apache.hadoop.ipc.ServerTooBusyException",
    "org.apache.hadoop.yarn.exceptions.ApplicationMasterNotRegisteredException",
    "org.apache.hadoop.yarn.exceptions.ApplicationAttemptNotFoundException",
    "org.apache.hadoop.yarn.exceptions.NMNotYetReadyException",
];

impl RpcError {
    /// Whether repeating the call (after a pause, on a fresh connection) may succeed.
    ///
    /// Network trouble and servers that are busy or failing over are retryable; authentication
    /// failures, malformed data and application errors are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            RpcError::Io { .. } | RpcError::Timeout { .. } => true,
            RpcError::Remote { class, .. } => RETRYABLE_REMOTE.contains(&class.as_str()),
            RpcError::Decode { .. }
            | RpcError::Auth { .. }
            | RpcError::Container { .. }
            | RpcError::Usage(_) => false,
        }
    }

    /// The Java exception class, for `Remote` and `Container` errors.
    pub fn remote_class(&self) -> Option<&str> {
        match self {
            RpcError::Remote { class, .. } | RpcError::Container { class, .. } => Some(class),
            _ => None,
        }
    }
}

/// A failure of a YARN REST call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestError {
    /// The HTTP request could not be sent or its answer not read (connection refused, timeout).
    #[error("HTTP request to {url} failed: {source}")]
    Http {
        /// The URL called.
        url: String,
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
    },
    /// YARN refused a submission (unknown or stopped queue, memory or vcores over the maximum,
    /// ...); `message` is YARN's own text.
    #[error("YARN refused the application: {message}")]
    Refused {
        /// YARN's explanation.
        message: String,
    },
    /// The resource does not exist (unknown application id, ...).
    #[error("not found: {url}: {message}")]
    NotFound {
        /// The URL called.
        url: String,
        /// YARN's message.
        message: String,
    },
    /// Any other non-success HTTP status.
    #[error("{url} answered HTTP {status}: {message}")]
    Status {
        /// The URL called.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// YARN's message (from its `RemoteException` JSON when present).
        message: String,
    },
    /// The answer was not the JSON YARN documents.
    #[error("unexpected answer from {url}: {message}")]
    Decode {
        /// The URL called.
        url: String,
        /// What was missing or malformed.
        message: String,
    },
    /// A local file named as a local resource could not be read.
    #[error("local resource {path}: {source}")]
    LocalResource {
        /// The file.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// An operation did not reach its goal within its time bound (e.g. kill).
    #[error("{what} did not complete within {timeout:?}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// The bound that elapsed.
        timeout: Duration,
    },
}

impl RestError {
    /// Whether repeating the call may succeed: connection problems and server-side (5xx)
    /// errors are retryable; refusals, missing resources and malformed answers are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            RestError::Http { source, .. } => {
                source.is_connect() || source.is_timeout() || source.is_request()
            }
            RestError::Status { status, .. } => *status >= 500,
            RestError::Timeout { .. } => true,
            RestError::Refused { .. }
            | RestError::NotFound { .. }
            | RestError::Decode { .. }
            | RestError::LocalResource { .. } => false,
        }
    }
}

/// A failure to read a Hadoop credentials (token storage) file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialsError {
    /// `HADOOP_TOKEN_FILE_LOCATION` is not set (the process was not started by a NodeManager).
    #[error("HADOOP_TOKEN_FILE_LOCATION is not set")]
    NoTokenFile,
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a token storage file.
    #[error("malformed credentials: {0}")]
    Malformed(#[from] DecodeError),
    /// The file holds no token of the wanted kind.
    #[error("no token of kind {0} in the credentials")]
    MissingToken(String),
}

impl CredentialsError {
    /// Credentials problems never heal by retrying: the file is written once, before start.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// A failure to read a Hadoop configuration file (`yarn-site.xml`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a Hadoop configuration.
    #[error("{path} is not a Hadoop configuration file: {source}")]
    Malformed {
        /// The file.
        path: String,
        /// What was wrong.
        #[source]
        source: DecodeError,
    },
}

impl ConfigError {
    /// Configuration files do not heal by retrying.
    pub fn is_retryable(&self) -> bool {
        false
    }
}
