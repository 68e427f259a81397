//! The token that fences every write of a leader to its own term.

use crate::session_id::LeaderSessionId;

/// Proof of one leadership term, handed out with every grant and required by every HA write.
///
/// A fenced write is a ZooKeeper multi-op whose first op checks that the term's latch node still
/// exists with the version it had when leadership was granted. The node is ephemeral, so it
/// vanishes when the leader's session expires; each grant bumps its version (it stores the new
/// leader session id), so a later term of the same contender also invalidates the earlier one
/// (FLINK-11665). ZooKeeper applies the check and the write atomically, so a deposed leader's write
/// can never land, however late it arrives.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LeaderFence {
    pub(crate) latch_path: String,
    pub(crate) latch_version: i32,
    pub(crate) session_id: LeaderSessionId,
}

impl LeaderFence {
    /// The leader session id of the term.
    pub fn session_id(&self) -> LeaderSessionId {
        self.session_id
    }

    /// The latch node this term is tied to (diagnostics).
    pub fn latch_path(&self) -> &str {
        &self.latch_path
    }

    /// Builds a fence from parts; for tests that must forge a stale or foreign term.
    #[doc(hidden)]
    pub fn from_parts(latch_path: String, latch_version: i32, session_id: LeaderSessionId) -> Self {
        LeaderFence {
            latch_path,
            latch_version,
            session_id,
        }
    }
}
