//! The crate's one error type, classified so callers can act on the type (retry or give up).

use std::path::PathBuf;

/// What a caller should do about an [`HaError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryHint {
    /// The same call may succeed later (connection trouble, a lost race, a busy disk).
    Retryable,
    /// Retrying the same call cannot help: the caller's premise (leadership, configuration,
    /// stored data) is wrong.
    Fatal,
}

/// Errors of the ZooKeeper HA services.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HaError {
    /// The write was fenced with a leadership term that is over: this contender is no longer the
    /// leader (its latch node is gone, or it was re-claimed by a later term). Fatal for the term:
    /// the caller must stop acting as leader.
    #[error("not the leader: the leadership term {session_id} is over ({detail})")]
    NotLeader {
        /// The leader session id of the stale term, as hex.
        session_id: String,
        /// What showed that the term is over.
        detail: String,
    },
    /// The connection dropped while a write was in flight; ZooKeeper may or may not have applied
    /// it. Any file it referenced is kept, so a committed pointer never dangles. Retryable: read
    /// back or write again.
    #[error("outcome of the write to {path} is unknown (connection lost during commit)")]
    CommitUnknown {
        /// The ZooKeeper path that was being written.
        path: String,
    },
    /// ZooKeeper cannot be reached right now (connection loss, timeout, no server). Retryable.
    #[error("ZooKeeper unavailable during {op} on {path}: {source}")]
    Unavailable {
        /// The operation that failed.
        op: &'static str,
        /// The path it was applied to.
        path: String,
        /// The client's error.
        #[source]
        source: zookeeper_client::Error,
    },
    /// The ZooKeeper session ended (expired or closed); a new session is needed. Retryable.
    #[error("ZooKeeper session ended during {op} on {path}")]
    SessionEnded {
        /// The operation that failed.
        op: &'static str,
        /// The path it was applied to.
        path: String,
    },
    /// A concurrent writer changed the node between our read and our write, more often than the
    /// retry budget allows. Retryable.
    #[error("concurrent modification of {path}")]
    Conflict {
        /// The contended path.
        path: String,
    },
    /// An entry that must be new already exists (for example a checkpoint id added twice).
    /// Fatal: the caller's bookkeeping is wrong.
    #[error("{path} already exists")]
    AlreadyExists {
        /// The existing path.
        path: String,
    },
    /// A pointer in ZooKeeper references a file that is not in the storage directory. This breaks
    /// the store's invariant (a pointer implies its file): the storage was tampered with or lost.
    /// Fatal.
    #[error("pointer {pointer} references missing file {file}")]
    MissingFile {
        /// The ZooKeeper pointer path.
        pointer: String,
        /// The file name it references.
        file: String,
    },
    /// Bytes read from ZooKeeper or storage do not decode (wrong format, unknown version,
    /// truncated file). Fatal.
    #[error("corrupt data at {path}: {reason}")]
    Corrupt {
        /// Where the data came from.
        path: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The storage directory could not be read or written. Retryable (a full or flaky disk may
    /// recover), but repeated failures deserve an operator.
    #[error("storage I/O on {path}: {source}")]
    Storage {
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A configuration value or a caller-supplied name is invalid (for example a job id with a
    /// `/`). Fatal.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was invalid.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// ZooKeeper refused an operation for a reason no retry fixes (ACLs, quota, bad arguments).
    /// Fatal.
    #[error("ZooKeeper error during {op} on {path}: {source}")]
    ZooKeeper {
        /// The operation that failed.
        op: &'static str,
        /// The path it was applied to.
        path: String,
        /// The client's error.
        #[source]
        source: zookeeper_client::Error,
    },
    /// The service was shut down (the election or retrieval handle was closed). Fatal.
    #[error("the HA service was closed")]
    Closed,
}

impl HaError {
    /// Whether retrying may help; see [`RetryHint`].
    pub fn retry_hint(&self) -> RetryHint {
        match self {
            HaError::CommitUnknown { .. }
            | HaError::Unavailable { .. }
            | HaError::SessionEnded { .. }
            | HaError::Conflict { .. }
            | HaError::Storage { .. } => RetryHint::Retryable,
            HaError::NotLeader { .. }
            | HaError::AlreadyExists { .. }
            | HaError::MissingFile { .. }
            | HaError::Corrupt { .. }
            | HaError::Invalid { .. }
            | HaError::ZooKeeper { .. }
            | HaError::Closed => RetryHint::Fatal,
        }
    }

    /// Shorthand for `retry_hint() == RetryHint::Retryable`.
    pub fn is_retryable(&self) -> bool {
        self.retry_hint() == RetryHint::Retryable
    }

    /// Classifies a client error from a read, or from a write known not to have been applied.
    pub(crate) fn from_zk(op: &'static str, path: &str, source: zookeeper_client::Error) -> Self {
        use zookeeper_client::Error as E;
        let path = path.to_owned();
        match source {
            // `Custom` carries the client's own connection failures (e.g. "no response from
            // connection in 1000ms"): transient like a connection loss.
            E::ConnectionLoss | E::Timeout | E::NoHosts | E::Throttled | E::Custom(_) => {
                HaError::Unavailable { op, path, source }
            }
            E::SessionExpired | E::ClientClosed | E::SessionMoved => {
                HaError::SessionEnded { op, path }
            }
            source => HaError::ZooKeeper { op, path, source },
        }
    }

    /// Classifies a client error from a write. Only a definite refusal by the server (or a request
    /// the client never sent) means "not applied"; anything else (lost connection, a reply that
    /// never came, the session ending meanwhile) may hide an applied write
    /// (FLINK-22494/24543), so it becomes [`HaError::CommitUnknown`].
    pub(crate) fn from_zk_write(
        op: &'static str,
        path: &str,
        source: zookeeper_client::Error,
    ) -> Self {
        if definitely_not_applied(&source) {
            HaError::from_zk(op, path, source)
        } else {
            HaError::CommitUnknown {
                path: path.to_owned(),
            }
        }
    }

    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        HaError::Invalid {
            what,
            reason: reason.into(),
        }
    }
}

/// Errors that are either the server's answer refusing the request (ZooKeeper then applied none
/// of it; multi-ops are atomic) or the client's refusal to send it.
fn definitely_not_applied(e: &zookeeper_client::Error) -> bool {
    use zookeeper_client::Error as E;
    matches!(
        e,
        E::NoNode
            | E::NoAuth
            | E::BadVersion
            | E::NoChildrenForEphemerals
            | E::NodeExists
            | E::NotEmpty
            | E::InvalidAcl
            | E::AuthFailed
            | E::NotReadOnly
            | E::QuotaExceeded
            | E::Throttled
            | E::MarshallingError
            | E::Unimplemented
            | E::ReconfigDisabled
            | E::BadArguments(_)
            | E::UnexpectedErrorCode(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_connection_on_write_is_ambiguous_and_retryable() {
        let e = HaError::from_zk_write("set", "/a", zookeeper_client::Error::ConnectionLoss);
        assert!(matches!(e, HaError::CommitUnknown { .. }));
        assert!(e.is_retryable());
    }

    #[test]
    fn anything_but_a_definite_refusal_on_write_is_ambiguous() {
        use zookeeper_client::Error as E;
        for e in [
            E::Timeout,
            E::SessionExpired,
            E::ClientClosed,
            E::UnexpectedError("bad reply".into()),
        ] {
            assert!(
                matches!(
                    HaError::from_zk_write("multi", "/a", e.clone()),
                    HaError::CommitUnknown { .. }
                ),
                "{e:?}"
            );
        }
        for e in [E::NodeExists, E::BadVersion, E::NoNode] {
            assert!(
                !matches!(
                    HaError::from_zk_write("multi", "/a", e.clone()),
                    HaError::CommitUnknown { .. }
                ),
                "{e:?}"
            );
        }
    }

    #[test]
    fn lost_connection_on_read_is_unavailable() {
        let e = HaError::from_zk("get", "/a", zookeeper_client::Error::ConnectionLoss);
        assert!(matches!(e, HaError::Unavailable { .. }));
        assert!(e.is_retryable());
    }

    #[test]
    fn acl_failure_is_fatal() {
        let e = HaError::from_zk_write("create", "/a", zookeeper_client::Error::NoAuth);
        assert!(matches!(e, HaError::ZooKeeper { .. }));
        assert_eq!(e.retry_hint(), RetryHint::Fatal);
    }

    #[test]
    fn not_leader_is_fatal() {
        let e = HaError::NotLeader {
            session_id: "00".into(),
            detail: "gone".into(),
        };
        assert!(!e.is_retryable());
    }
}
