//! How a subtask fails: the task error every layer from the data plane up returns, and the
//! record codec's error it wraps.

/// Why a subtask stopped before finishing. The JobMaster decides from the variant whether a
/// restart can help.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// The subtask was cancelled on request; not a failure.
    #[error("the task was cancelled")]
    Cancelled,
    /// The job's own code panicked or returned an error.
    #[error("{0}")]
    User(String),
    /// Reading or writing a file failed.
    #[error("{context}: {source}")]
    Io {
        /// What the task was doing, with the path.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A record could not be written or read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// An exchange with another subtask broke: a peer vanished or sent garbage.
    #[error("network: {0}")]
    Network(String),
    /// The task could not be set up (a job graph mismatch, a missing partition, ...).
    #[error("task setup failed: {0}")]
    Setup(String),
    /// Keyed state could not be read, written, snapshotted or restored.
    #[error("state: {0}")]
    State(String),
}

impl TaskError {
    /// Whether the failure is likely a consequence of a failure elsewhere (a broken exchange),
    /// rather than a cause of its own.
    pub fn is_secondary(&self) -> bool {
        matches!(self, TaskError::Network(_))
    }

    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TaskError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Why bytes could not be turned back into a record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The buffer ended inside a run's header or inside a record.
    #[error(
        "truncated record frame at offset {offset}: {needed} bytes needed, {available} available"
    )]
    Truncated {
        /// Where the header or the record starts.
        offset: usize,
        /// Bytes the frame claims.
        needed: usize,
        /// Bytes left in the buffer.
        available: usize,
    },
    /// The archive bytes did not validate as the expected type.
    #[error("invalid record archive at offset {offset}: {reason}")]
    Invalid {
        /// Where the frame starts.
        offset: usize,
        /// What rkyv's validator said.
        reason: String,
    },
    /// A run's header claims no records, or several archives of no bytes (writers put those
    /// in runs of one, so that a buffer holds at most one record per 8 bytes).
    #[error("record run at offset {offset} claims {count} records of {len} bytes")]
    InvalidRun {
        /// Where the run's header starts.
        offset: usize,
        /// The records it claims.
        count: u32,
        /// Their length.
        len: usize,
    },
    /// rkyv could not serialize a record.
    #[error("could not serialize a record: {0}")]
    Serialize(String),
}
