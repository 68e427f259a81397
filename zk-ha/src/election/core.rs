//! The election as a deterministic state machine: events and `now` in, actions out, no I/O.
//!
//! The driver ([`super::driver`]) performs the actions against ZooKeeper and feeds back what
//! happened. Keeping every decision here lets the tests replay any interleaving of connection
//! changes, watch events and replies in microseconds.
//!
//! The recipe is ZooKeeper's classic one: every contender owns one EPHEMERAL_SEQUENTIAL node in the
//! latch directory; the lowest sequence number leads. Because sequence numbers only grow, once a
//! node is lowest it stays lowest until it disappears, so "my node exists" is "I am leader"; the
//! fence checks exactly that (plus the node's version, which each grant bumps).

use std::time::{Duration, Instant};

use crate::fence::LeaderFence;
use crate::session_id::LeaderSessionId;

/// Why leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RevokeReason {
    /// ZooKeeper expired (or closed) the session: its ephemeral latch node is gone.
    SessionExpired,
    /// The connection stayed down longer than the session timeout, so the server has (or soon
    /// will have) expired the session; the leader steps down without waiting to hear it.
    ConnectionLost,
    /// The latch node disappeared or stopped being first while the session lived (deleted by an
    /// operator, or a lost race during recovery).
    LatchLost,
    /// The contender's process did not run for longer than the loss timeout (stopped with
    /// SIGSTOP, frozen VM, starved): its session may have expired meanwhile without it seeing a
    /// disconnect, so it steps down on waking rather than act on a term that may be over.
    Paused,
    /// The contender was closed.
    Closed,
}

/// What the election tells its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeadershipEvent {
    /// This contender leads, for the term identified by the fence's session id.
    Granted(LeaderFence),
    /// The term of `session_id` is over; every write fenced with it will fail.
    Revoked {
        /// The term that ended.
        session_id: LeaderSessionId,
        /// Why.
        reason: RevokeReason,
    },
}

/// Inputs from the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// A new session is connected; a leader of this session steps down after `loss_timeout` of
    /// disconnection (derived from the negotiated session timeout).
    SessionStarted { loss_timeout: Duration },
    /// Our latch node exists at this path.
    LatchCreated { path: String },
    /// A fresh listing of the latch directory (child names).
    Children(Vec<String>),
    /// Our claim (writing the new session id into our latch node) succeeded.
    Claimed {
        session_id: LeaderSessionId,
        version: i32,
    },
    /// Our claim failed (node gone or connection lost): re-read before trying again.
    ClaimFailed { session_id: LeaderSessionId },
    /// The connection dropped; the session may still be alive.
    Disconnected,
    /// The connection is back within the same session.
    Reconnected,
    /// The session is over (expired, closed, auth failed).
    SessionEnded,
    /// Time passed.
    Tick,
}

/// Work for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Close the current session (if any) and open a new one, then report `SessionStarted`.
    RestartSession,
    /// Create our EPHEMERAL_SEQUENTIAL node, then report `LatchCreated`.
    CreateLatch,
    /// Delete a latch node of ours that the core does not track (best effort).
    DeleteLatch { path: String },
    /// List the latch directory with a watch, then report `Children`.
    ListChildren,
    /// Store `session_id` in our latch node (bumping its version), then report `Claimed`.
    Claim {
        path: String,
        session_id: LeaderSessionId,
    },
    /// Tell the owner.
    Notify(LeadershipEvent),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// Waiting for a session.
    Connecting,
    /// Session up, latch node being created.
    Joining,
    /// Our node exists but is not first.
    Follower { path: String },
    /// Our node is first; writing the new term's id into it.
    Claiming {
        path: String,
        session_id: LeaderSessionId,
    },
    /// Leader for the term in `fence`.
    Leader { fence: LeaderFence },
    /// Closed for good.
    Closed,
}

/// The election state machine.
pub(crate) struct ElectionCore {
    role: Role,
    /// When the connection dropped, if it is down now.
    disconnected_since: Option<Instant>,
    /// How long a leader may stay disconnected before it steps down on its own.
    loss_timeout: Duration,
    /// When the last `Tick` arrived: a gap longer than `loss_timeout` means we did not run.
    last_tick: Option<Instant>,
    /// Source of new term ids; injectable so tests are deterministic.
    next_id: Box<dyn FnMut() -> LeaderSessionId + Send>,
}

impl std::fmt::Debug for ElectionCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElectionCore")
            .field("role", &self.role)
            .field("disconnected_since", &self.disconnected_since)
            .field("loss_timeout", &self.loss_timeout)
            .finish_non_exhaustive()
    }
}

/// The sequence number ZooKeeper appended to a latch node's name (its last 10+ digits).
pub(crate) fn sequence_of(name: &str) -> Option<i64> {
    let digits = name.rsplit('-').next()?;
    if digits.len() < 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl ElectionCore {
    /// A core that steps down after `loss_timeout` of disconnection (use the session timeout).
    pub(crate) fn new(
        loss_timeout: Duration,
        next_id: Box<dyn FnMut() -> LeaderSessionId + Send>,
    ) -> Self {
        ElectionCore {
            role: Role::Connecting,
            disconnected_since: None,
            loss_timeout,
            last_tick: None,
            next_id,
        }
    }

    /// The first actions: open a session.
    pub(crate) fn start(&mut self) -> Vec<Action> {
        vec![Action::RestartSession]
    }

    /// The current term, if leading.
    pub(crate) fn fence(&self) -> Option<&LeaderFence> {
        match &self.role {
            Role::Leader { fence } => Some(fence),
            _ => None,
        }
    }

    /// Whether our latch node exists behind another one (we wait for our turn).
    pub(crate) fn is_follower(&self) -> bool {
        matches!(self.role, Role::Follower { .. })
    }

    /// Whether the core has been closed.
    #[cfg(test)]
    pub(crate) fn is_closed(&self) -> bool {
        self.role == Role::Closed
    }

    /// Ends the election: revoke if leading; the driver then drops its session, which deletes the
    /// latch node so the next contender need not wait for a session timeout.
    pub(crate) fn close(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        self.step_down(RevokeReason::Closed, &mut out);
        self.role = Role::Closed;
        out
    }

    /// Moves from leader (if leading) to `Connecting`, emitting the revocation.
    fn step_down(&mut self, reason: RevokeReason, out: &mut Vec<Action>) {
        if let Role::Leader { fence } = &self.role {
            out.push(Action::Notify(LeadershipEvent::Revoked {
                session_id: fence.session_id,
                reason,
            }));
        }
        self.role = Role::Connecting;
    }

    /// Feeds one input observed at `now`.
    pub(crate) fn handle(&mut self, now: Instant, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        if self.role == Role::Closed {
            return out;
        }
        match input {
            Input::SessionStarted { loss_timeout } => {
                self.disconnected_since = None;
                self.loss_timeout = loss_timeout;
                // Time spent (re)connecting is no pause of a term.
                self.last_tick = None;
                // A new session never inherits leadership: its latch node is new and must win
                // the election on its own.
                self.step_down(RevokeReason::SessionExpired, &mut out);
                self.role = Role::Joining;
                out.push(Action::CreateLatch);
            }
            Input::LatchCreated { path } => {
                if self.role == Role::Joining {
                    self.role = Role::Follower { path };
                    out.push(Action::ListChildren);
                } else {
                    // A node we no longer track would sit in the queue ahead of later
                    // contenders until our session ends: remove it.
                    out.push(Action::DeleteLatch { path });
                }
            }
            Input::Children(children) => self.on_children(children, &mut out),
            Input::Claimed {
                session_id,
                version,
            } => {
                if let Role::Claiming {
                    path,
                    session_id: pending,
                } = &self.role
                    && *pending == session_id
                {
                    let fence = LeaderFence {
                        latch_path: path.clone(),
                        latch_version: version,
                        session_id,
                    };
                    self.role = Role::Leader {
                        fence: fence.clone(),
                    };
                    // The pause check measures from the start of the term.
                    self.last_tick = Some(now);
                    out.push(Action::Notify(LeadershipEvent::Granted(fence)));
                }
            }
            Input::ClaimFailed { session_id } => {
                if let Role::Claiming {
                    path,
                    session_id: pending,
                } = &self.role
                    && *pending == session_id
                {
                    // Unknown whether the node still exists: re-read, and claim again with a fresh
                    // id if we are still first.
                    self.role = Role::Follower { path: path.clone() };
                    out.push(Action::ListChildren);
                }
            }
            Input::Disconnected => {
                // Keep leadership (FLINK-10052): the session, and with it the latch node, may well
                // survive. Only the clock (Tick) or the server (SessionEnded) ends the term.
                if self.disconnected_since.is_none() {
                    self.disconnected_since = Some(now);
                }
            }
            Input::Reconnected => {
                self.disconnected_since = None;
                // Watch events that fired while we were away may be lost (ZOOKEEPER-4698):
                // re-read the truth.
                if matches!(
                    self.role,
                    Role::Follower { .. } | Role::Claiming { .. } | Role::Leader { .. }
                ) {
                    out.push(Action::ListChildren);
                }
            }
            Input::SessionEnded => {
                self.disconnected_since = None;
                self.step_down(RevokeReason::SessionExpired, &mut out);
                out.push(Action::RestartSession);
            }
            Input::Tick => {
                let gap = self.last_tick.map(|t| now.saturating_duration_since(t));
                self.last_tick = Some(now);
                if gap.is_some_and(|g| g >= self.loss_timeout)
                    && matches!(self.role, Role::Leader { .. } | Role::Claiming { .. })
                {
                    // Ticks come every 100 ms; a gap this long means this process was not
                    // running, and the server may have expired the session while no
                    // `Disconnected` could be observed.
                    self.disconnected_since = None;
                    self.step_down(RevokeReason::Paused, &mut out);
                    out.push(Action::RestartSession);
                } else if let Some(since) = self.disconnected_since
                    && now.saturating_duration_since(since) >= self.loss_timeout
                    && matches!(self.role, Role::Leader { .. } | Role::Claiming { .. })
                {
                    // The server expires a silent session one session timeout after it last heard
                    // from us; `loss_timeout` ends at about that moment (see
                    // `Connector::loss_timeout`), so a successor may be leading by now. Step down
                    // at once and rejoin with a new session rather than act on a term that may be
                    // over.
                    self.disconnected_since = None;
                    self.step_down(RevokeReason::ConnectionLost, &mut out);
                    out.push(Action::RestartSession);
                }
            }
        }
        out
    }

    fn on_children(&mut self, children: Vec<String>, out: &mut Vec<Action>) {
        let path = match &self.role {
            Role::Follower { path } | Role::Claiming { path, .. } => path.clone(),
            Role::Leader { fence } => fence.latch_path.clone(),
            _ => return,
        };
        let ours = name_of(&path);
        let Some(our_seq) = sequence_of(ours) else {
            // Our own node name always carries a sequence; if not, the driver is broken.
            self.step_down(RevokeReason::LatchLost, out);
            out.push(Action::RestartSession);
            return;
        };
        if !children.iter().any(|c| c == ours) {
            // Our node is gone while the session lives (deleted by hand, or the reply to our
            // create was lost and we followed a stale path): start over with a clean session.
            self.step_down(RevokeReason::LatchLost, out);
            out.push(Action::RestartSession);
            return;
        }
        // (The listing also re-armed the driver's watch on the directory, so followers learn when
        // their turn comes and the leader learns if its node is deleted under it.)
        let first = children
            .iter()
            .filter_map(|c| sequence_of(c))
            .min()
            .unwrap_or(our_seq)
            >= our_seq;
        match (&self.role, first) {
            (Role::Follower { .. }, true) => {
                let session_id = (self.next_id)();
                self.role = Role::Claiming {
                    path: path.clone(),
                    session_id,
                };
                out.push(Action::Claim { path, session_id });
            }
            (Role::Claiming { .. }, false) => self.role = Role::Follower { path },
            (Role::Leader { .. }, false) => {
                // Cannot happen with growing sequence numbers; if it does, leading on would risk
                // two leaders.
                self.step_down(RevokeReason::LatchLost, out);
                self.role = Role::Follower { path };
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> ElectionCore {
        let mut n = 0u128;
        ElectionCore::new(
            Duration::from_secs(2),
            Box::new(move || {
                n += 1;
                LeaderSessionId::from_u128(n)
            }),
        )
    }

    const ME: &str = "/s/c/leader-latch/latch-aa-0000000003";
    fn me() -> String {
        "latch-aa-0000000003".to_owned()
    }
    fn other(seq: u32) -> String {
        format!("latch-bb-{seq:010}")
    }

    /// Drives a fresh core to leadership; returns it with its fence.
    fn leader(t0: Instant) -> (ElectionCore, LeaderFence) {
        let mut c = core();
        assert_eq!(c.start(), vec![Action::RestartSession]);
        assert_eq!(
            c.handle(
                t0,
                Input::SessionStarted {
                    loss_timeout: Duration::from_secs(2)
                }
            ),
            vec![Action::CreateLatch]
        );
        assert_eq!(
            c.handle(t0, Input::LatchCreated { path: ME.into() }),
            vec![Action::ListChildren]
        );
        let sid = LeaderSessionId::from_u128(1);
        assert_eq!(
            c.handle(t0, Input::Children(vec![me(), other(7)])),
            vec![Action::Claim {
                path: ME.into(),
                session_id: sid
            }]
        );
        let out = c.handle(
            t0,
            Input::Claimed {
                session_id: sid,
                version: 1,
            },
        );
        let fence = LeaderFence {
            latch_path: ME.into(),
            latch_version: 1,
            session_id: sid,
        };
        assert_eq!(
            out,
            vec![Action::Notify(LeadershipEvent::Granted(fence.clone()))]
        );
        (c, fence)
    }

    fn revoked(out: &[Action]) -> Option<RevokeReason> {
        out.iter().find_map(|a| match a {
            Action::Notify(LeadershipEvent::Revoked { reason, .. }) => Some(*reason),
            _ => None,
        })
    }

    #[test]
    fn sequence_parsing() {
        assert_eq!(sequence_of("latch-x-0000000012"), Some(12));
        assert_eq!(sequence_of("latch-x-12"), None);
        assert_eq!(sequence_of("junk"), None);
        assert_eq!(sequence_of("latch-x-00000000a1"), None);
    }

    #[test]
    fn follower_waits_until_first() {
        let t0 = Instant::now();
        let mut c = core();
        c.handle(
            t0,
            Input::SessionStarted {
                loss_timeout: Duration::from_secs(2),
            },
        );
        c.handle(t0, Input::LatchCreated { path: ME.into() });
        let out = c.handle(t0, Input::Children(vec![other(1), me()]));
        assert!(out.is_empty());
        assert!(c.fence().is_none());
        // The predecessor leaves: now first.
        let out = c.handle(t0, Input::Children(vec![me()]));
        assert!(matches!(out.last(), Some(Action::Claim { .. })));
    }

    /// Feeds ticks every 100 ms in `(from, to]`, as the driver does, and collects the actions.
    fn tick_until(c: &mut ElectionCore, from: Instant, to: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        let mut t = from;
        while t < to {
            t = (t + Duration::from_millis(100)).min(to);
            out.extend(c.handle(t, Input::Tick));
        }
        out
    }

    #[test]
    fn transient_disconnect_keeps_leadership() {
        let t0 = Instant::now();
        let (mut c, fence) = leader(t0);
        assert!(c.handle(t0, Input::Disconnected).is_empty());
        assert!(tick_until(&mut c, t0, t0 + Duration::from_millis(1500)).is_empty());
        assert_eq!(
            c.handle(t0 + Duration::from_millis(1600), Input::Reconnected),
            vec![Action::ListChildren]
        );
        // Well past the timeout, but we are connected again: still the same term.
        let t1 = t0 + Duration::from_millis(1500);
        assert!(tick_until(&mut c, t1, t0 + Duration::from_secs(10)).is_empty());
        assert!(c.handle(t0, Input::Children(vec![me()])).is_empty());
        assert_eq!(c.fence(), Some(&fence));
    }

    #[test]
    fn long_disconnect_steps_down_and_rejoins() {
        let t0 = Instant::now();
        let (mut c, _) = leader(t0);
        c.handle(t0, Input::Disconnected);
        // A second Disconnected must not restart the clock.
        c.handle(t0 + Duration::from_secs(1), Input::Disconnected);
        assert!(tick_until(&mut c, t0, t0 + Duration::from_millis(1900)).is_empty());
        let out = tick_until(
            &mut c,
            t0 + Duration::from_millis(1900),
            t0 + Duration::from_secs(2),
        );
        assert_eq!(revoked(&out), Some(RevokeReason::ConnectionLost));
        assert_eq!(out.last(), Some(&Action::RestartSession));
        assert!(c.fence().is_none());
        // The reconnect of the old session is ignored; the new session starts as a follower.
        assert_eq!(
            c.handle(
                t0,
                Input::SessionStarted {
                    loss_timeout: Duration::from_secs(2)
                }
            ),
            vec![Action::CreateLatch]
        );
        assert!(c.fence().is_none());
    }

    #[test]
    fn a_long_pause_steps_down_on_waking() {
        let t0 = Instant::now();
        let (mut c, _) = leader(t0);
        // Regular ticks: nothing happens.
        for i in 1..=30 {
            assert!(
                c.handle(t0 + Duration::from_millis(100 * i), Input::Tick)
                    .is_empty()
            );
        }
        // The next tick comes 2.5 s late (loss timeout 2 s): the process was stopped.
        let out = c.handle(t0 + Duration::from_millis(5500), Input::Tick);
        assert_eq!(revoked(&out), Some(RevokeReason::Paused));
        assert_eq!(out.last(), Some(&Action::RestartSession));
    }

    #[test]
    fn reconnecting_is_not_a_pause() {
        let t0 = Instant::now();
        let mut c = core();
        c.handle(t0, Input::Tick);
        // A long session restart without ticks, then a quick grant.
        let t1 = t0 + Duration::from_secs(30);
        c.handle(
            t1,
            Input::SessionStarted {
                loss_timeout: Duration::from_secs(2),
            },
        );
        c.handle(t1, Input::LatchCreated { path: ME.into() });
        c.handle(t1, Input::Children(vec![me()]));
        c.handle(
            t1,
            Input::Claimed {
                session_id: LeaderSessionId::from_u128(1),
                version: 1,
            },
        );
        assert!(c.fence().is_some());
        assert!(
            c.handle(t1 + Duration::from_millis(100), Input::Tick)
                .is_empty()
        );
        assert!(c.fence().is_some());
    }

    #[test]
    fn expiry_revokes_at_once() {
        let t0 = Instant::now();
        let (mut c, fence) = leader(t0);
        let out = c.handle(t0, Input::SessionEnded);
        assert_eq!(
            out,
            vec![
                Action::Notify(LeadershipEvent::Revoked {
                    session_id: fence.session_id,
                    reason: RevokeReason::SessionExpired
                }),
                Action::RestartSession
            ]
        );
    }

    #[test]
    fn each_grant_has_a_new_session_id() {
        let t0 = Instant::now();
        let (mut c, first) = leader(t0);
        c.handle(t0, Input::SessionEnded);
        c.handle(
            t0,
            Input::SessionStarted {
                loss_timeout: Duration::from_secs(2),
            },
        );
        let path2 = "/s/c/leader-latch/latch-aa-0000000009";
        c.handle(t0, Input::LatchCreated { path: path2.into() });
        let out = c.handle(t0, Input::Children(vec!["latch-aa-0000000009".into()]));
        let Some(Action::Claim { session_id, .. }) = out.last().cloned() else {
            panic!("no claim: {out:?}")
        };
        assert_ne!(session_id, first.session_id);
        let out = c.handle(
            t0,
            Input::Claimed {
                session_id,
                version: 1,
            },
        );
        assert!(
            matches!(&out[0], Action::Notify(LeadershipEvent::Granted(f)) if f.session_id == session_id)
        );
    }

    #[test]
    fn stale_claim_reply_is_ignored() {
        let t0 = Instant::now();
        let mut c = core();
        c.handle(
            t0,
            Input::SessionStarted {
                loss_timeout: Duration::from_secs(2),
            },
        );
        c.handle(t0, Input::LatchCreated { path: ME.into() });
        c.handle(t0, Input::Children(vec![me()]));
        // The session ends before the claim's reply arrives; the late reply must not grant.
        c.handle(t0, Input::SessionEnded);
        let out = c.handle(
            t0,
            Input::Claimed {
                session_id: LeaderSessionId::from_u128(1),
                version: 1,
            },
        );
        assert!(out.is_empty());
        assert!(c.fence().is_none());
    }

    #[test]
    fn failed_claim_rereads_and_claims_with_new_id() {
        let t0 = Instant::now();
        let mut c = core();
        c.handle(
            t0,
            Input::SessionStarted {
                loss_timeout: Duration::from_secs(2),
            },
        );
        c.handle(t0, Input::LatchCreated { path: ME.into() });
        c.handle(t0, Input::Children(vec![me()]));
        let out = c.handle(
            t0,
            Input::ClaimFailed {
                session_id: LeaderSessionId::from_u128(1),
            },
        );
        assert_eq!(out, vec![Action::ListChildren]);
        let out = c.handle(t0, Input::Children(vec![me()]));
        assert_eq!(
            out.last(),
            Some(&Action::Claim {
                path: ME.into(),
                session_id: LeaderSessionId::from_u128(2)
            })
        );
    }

    #[test]
    fn deleted_latch_node_revokes() {
        let t0 = Instant::now();
        let (mut c, _) = leader(t0);
        let out = c.handle(t0, Input::Children(vec![other(9)]));
        assert_eq!(revoked(&out), Some(RevokeReason::LatchLost));
        assert_eq!(out.last(), Some(&Action::RestartSession));
    }

    #[test]
    fn untracked_latch_node_is_deleted() {
        let t0 = Instant::now();
        let (mut c, _) = leader(t0);
        let stray = "/s/c/leader-latch/latch-cc-0000000042".to_owned();
        assert_eq!(
            c.handle(
                t0,
                Input::LatchCreated {
                    path: stray.clone()
                }
            ),
            vec![Action::DeleteLatch { path: stray }]
        );
        assert!(c.fence().is_some());
    }

    #[test]
    fn follower_does_not_step_down_on_timeout() {
        let t0 = Instant::now();
        let mut c = core();
        c.handle(
            t0,
            Input::SessionStarted {
                loss_timeout: Duration::from_secs(2),
            },
        );
        c.handle(t0, Input::LatchCreated { path: ME.into() });
        c.handle(t0, Input::Children(vec![other(1), me()]));
        c.handle(t0, Input::Disconnected);
        // Nothing to give up; the server tells us about expiry when we reconnect.
        assert!(
            c.handle(t0 + Duration::from_secs(60), Input::Tick)
                .is_empty()
        );
    }

    #[test]
    fn close_revokes_and_ignores_everything_after() {
        let t0 = Instant::now();
        let (mut c, _) = leader(t0);
        assert_eq!(revoked(&c.close()), Some(RevokeReason::Closed));
        assert!(c.is_closed());
        assert!(
            c.handle(
                t0,
                Input::SessionStarted {
                    loss_timeout: Duration::from_secs(2)
                }
            )
            .is_empty()
        );
    }

    /// Random interleavings: a grant is always followed by exactly one revoke before the next
    /// grant, and term ids never repeat.
    #[test]
    fn random_interleavings_keep_grants_and_revokes_paired() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..300 {
            let mut c = core();
            let mut now = Instant::now();
            let mut leading: Option<LeaderSessionId> = None;
            let mut seen = std::collections::HashSet::new();
            let mut pending_claim: Option<LeaderSessionId> = None;
            let mut actions = c.start();
            for _ in 0..200 {
                for a in actions.drain(..) {
                    match a {
                        Action::Notify(LeadershipEvent::Granted(f)) => {
                            assert!(leading.is_none(), "granted twice without revoke");
                            assert!(seen.insert(f.session_id), "term id reused");
                            leading = Some(f.session_id);
                        }
                        Action::Notify(LeadershipEvent::Revoked { session_id, .. }) => {
                            assert_eq!(
                                leading.take(),
                                Some(session_id),
                                "revoked a term we did not hold"
                            );
                        }
                        Action::Claim { session_id, .. } => pending_claim = Some(session_id),
                        _ => {}
                    }
                }
                // What the owner was told matches what the core believes.
                assert_eq!(leading, c.fence().map(|f| f.session_id));
                now += Duration::from_millis(rng.random_range(0..1500));
                let input = match rng.random_range(0..9) {
                    0 => Input::SessionStarted {
                        loss_timeout: Duration::from_secs(2),
                    },
                    1 => Input::LatchCreated { path: ME.into() },
                    2 => Input::Children(vec![me()]),
                    3 => Input::Children(vec![other(1), me()]),
                    4 => match pending_claim.take() {
                        Some(session_id) => Input::Claimed {
                            session_id,
                            version: rng.random_range(1..5),
                        },
                        None => Input::Tick,
                    },
                    5 => Input::Disconnected,
                    6 => Input::Reconnected,
                    7 => Input::SessionEnded,
                    _ => Input::Tick,
                };
                actions = c.handle(now, input);
            }
        }
    }
}
