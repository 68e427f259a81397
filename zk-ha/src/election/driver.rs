//! The async shell around [`ElectionCore`]: performs its actions with a real ZooKeeper client and
//! feeds back what happened.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug, info, warn};
use zookeeper_client::{Client, SessionInfo, SessionState, StateWatcher, WatchedEvent};

use super::core::{Action, ElectionCore, Input, LeadershipEvent};
use crate::config::Layout;
use crate::error::HaError;
use crate::fence::LeaderFence;
use crate::leader_info::LeaderInfo;
use crate::session_id::LeaderSessionId;
use crate::zk::{self, Connector, FencedOutcome};

/// How often the driver feeds `Tick` to the core; bounds how late a disconnected leader steps
/// down after the session timeout.
const TICK: Duration = Duration::from_millis(100);
/// Pause between retries of an operation that failed for lack of a connection.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

type WatchFuture = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// State shared between the handle and the driver task.
#[derive(Debug, Default)]
struct Shared {
    /// The session currently holding (or contending for) the latch; `None` between sessions.
    /// Publication must use this session so the EPHEMERAL connection info dies with the term.
    client: Mutex<Option<Client>>,
}

impl Shared {
    fn client(&self) -> Option<Client> {
        self.client.lock().map(|c| c.clone()).unwrap_or(None)
    }

    fn set_client(&self, client: Option<Client>) {
        if let Ok(mut slot) = self.client.lock() {
            *slot = client;
        }
    }
}

/// A contender in the leader election under `<root>/<cluster-id>/leader-latch`.
///
/// Created by [`crate::ZooKeeperHaServices::start_election`]. A background task holds a ZooKeeper
/// session and an EPHEMERAL_SEQUENTIAL latch node; the lowest node leads. Each grant comes with a
/// fresh [`LeaderSessionId`] inside a [`LeaderFence`], which every HA write of the leader must
/// carry.
///
/// Connection handling: a dropped connection does not end the term while the session may live;
/// an expired session ends it at once, and so do a disconnection or a pause of this process as
/// long as the server takes to expire the session. Either way the contender rejoins with a new
/// session, as a follower.
///
/// Dropping the handle stops the task and closes the session, which deletes the latch node.
#[derive(Debug)]
pub struct LeaderElection {
    events: mpsc::UnboundedReceiver<LeadershipEvent>,
    fence: watch::Receiver<Option<LeaderFence>>,
    reconnections: watch::Receiver<u64>,
    follows: watch::Receiver<u64>,
    shared: Arc<Shared>,
    layout: Layout,
    close: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl LeaderElection {
    pub(crate) fn start(connector: Connector, layout: Layout) -> Self {
        // Unbounded on purpose: events come at the pace of ZooKeeper session changes (a handful per
        // session timeout at most), and the driver must never block on a slow owner while it
        // holds a term that may need revoking.
        let (events_tx, events) = mpsc::unbounded_channel();
        let (fence_tx, fence) = watch::channel(None);
        let (reconnections_tx, reconnections) = watch::channel(0);
        let (follows_tx, follows) = watch::channel(0);
        let (close, close_rx) = watch::channel(false);
        let shared = Arc::new(Shared::default());
        let core = ElectionCore::new(
            connector.session_timeout(),
            Box::new(LeaderSessionId::random),
        );
        let driver = Driver {
            core,
            connector,
            latch_dir: layout.latch_dir(),
            shared: shared.clone(),
            events: events_tx,
            fence: fence_tx,
            reconnections: reconnections_tx,
            follows: follows_tx,
            close: close_rx,
            state_watcher: None,
            last_state: SessionState::Disconnected,
            children_watch: None,
        };
        let span = tracing::info_span!("leader_election", latch_dir = %layout.latch_dir());
        let task = tokio::spawn(driver.run().instrument(span));
        LeaderElection {
            events,
            fence,
            reconnections,
            follows,
            shared,
            layout,
            close,
            task: Some(task),
        }
    }

    /// The next grant or revocation; `None` once the election has stopped.
    pub async fn next_event(&mut self) -> Option<LeadershipEvent> {
        self.events.recv().await
    }

    /// The current term, if this contender leads right now.
    pub fn current_fence(&self) -> Option<LeaderFence> {
        self.fence.borrow().clone()
    }

    /// Whether this contender leads right now (as far as it knows; the fence decides in
    /// ZooKeeper).
    pub fn is_leader(&self) -> bool {
        self.fence.borrow().is_some()
    }

    /// A watch of the current term, for callers that prefer state to events.
    pub fn watch_fence(&self) -> watch::Receiver<Option<LeaderFence>> {
        self.fence.clone()
    }

    /// How many times the connection to ZooKeeper came back within the same session, counted
    /// once the election has taken the reconnection into account (so a term that survived the
    /// outage is still in [`current_fence`](Self::current_fence) when the count moves).
    /// Diagnostics; tests wait on it instead of sleeping through an outage.
    pub fn watch_reconnections(&self) -> watch::Receiver<u64> {
        self.reconnections.clone()
    }

    /// How many times this contender has read the latch directory and found another node ahead
    /// of its own, so that it follows (counted once decided: a contender that found itself
    /// first is claiming leadership instead). Diagnostics; tests wait on it instead of sleeping
    /// to see that a contender stays a follower.
    pub fn watch_follow_decisions(&self) -> watch::Receiver<u64> {
        self.follows.clone()
    }

    /// The ZooKeeper session currently used by the election (diagnostics; tests use it to expire
    /// the session from outside, as a partitioned or frozen leader would experience it).
    pub fn session_info(&self) -> Option<SessionInfo> {
        self.shared.client().map(|c| c.session().clone())
    }

    /// Publishes `info` as the leader of `component` in the EPHEMERAL node
    /// `<root>/<cluster-id>/leader/<component>/connection_info`, fenced by `fence`.
    ///
    /// The node belongs to the election's session, so it disappears with the term's session.
    /// Publish again after every grant.
    pub async fn publish(
        &self,
        fence: &LeaderFence,
        component: &str,
        info: &LeaderInfo,
    ) -> Result<(), HaError> {
        let path = self.layout.connection_info(component)?;
        if info.session_id != fence.session_id {
            return Err(HaError::invalid(
                "leader info",
                "its session id differs from the fence's term",
            ));
        }
        let not_leader = |detail: &str| HaError::NotLeader {
            session_id: fence.session_id.to_string(),
            detail: detail.into(),
        };
        if self.current_fence().as_ref() != Some(fence) {
            return Err(not_leader("the election no longer holds this term"));
        }
        let client = self
            .shared
            .client()
            .ok_or_else(|| not_leader("no session"))?;
        zk::ensure_dir(&client, zk::parent_of(&path)).await?;
        let data = info.encode();
        for _ in 0..5 {
            let existing = client
                .check_stat(&path)
                .await
                .map_err(|e| HaError::from_zk("exists", &path, e))?;
            let outcome = zk::commit_fenced(&client, fence, &path, |w| {
                // Replace whatever an earlier term left (its session may still be closing).
                if let Some(stat) = existing {
                    w.add_delete(&path, Some(stat.version))?;
                }
                w.add_create(&path, &data, &zk::EPHEMERAL)
            })
            .await?;
            match outcome {
                FencedOutcome::Committed => {
                    info!(component, session_id = %fence.session_id, "published leader information");
                    return Ok(());
                }
                FencedOutcome::OpFailed(
                    zookeeper_client::Error::NodeExists
                    | zookeeper_client::Error::NoNode
                    | zookeeper_client::Error::BadVersion,
                ) => continue,
                FencedOutcome::OpFailed(e) => return Err(HaError::from_zk("publish", &path, e)),
            }
        }
        Err(HaError::Conflict { path })
    }

    /// Leaves the election: revokes leadership (if held, with a `Revoked` event), closes the
    /// session so the latch node goes away at once, and waits for the task to end.
    pub async fn close(mut self) {
        let _ = self.close.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for LeaderElection {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        // The task owned a clone; ours goes too, so the session closes.
        self.shared.set_client(None);
    }
}

struct Driver {
    core: ElectionCore,
    connector: Connector,
    latch_dir: String,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<LeadershipEvent>,
    fence: watch::Sender<Option<LeaderFence>>,
    /// Counts connections re-established within the session (after the core saw them).
    reconnections: watch::Sender<u64>,
    /// Counts listings of the latch directory after which the core follows.
    follows: watch::Sender<u64>,
    close: watch::Receiver<bool>,
    state_watcher: Option<StateWatcher>,
    last_state: SessionState,
    children_watch: Option<WatchFuture>,
}

/// Why the driver woke up.
enum Wake {
    Close,
    Children(WatchedEvent),
    State(SessionState),
    Tick,
}

/// What an action produced.
enum Outcome {
    /// Feed this to the core.
    Input(Input),
    /// Nothing to feed back: the action is done, or was given up because the core decided
    /// something more urgent (already queued).
    Done,
    /// The election is closing.
    Closed,
}

impl Driver {
    async fn run(mut self) {
        let mut pending: VecDeque<Action> = self.core.start().into();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            while let Some(action) = pending.pop_front() {
                // Watch firings and reconnects both ask for a listing; one suffices.
                if action == Action::ListChildren && pending.front() == Some(&Action::ListChildren)
                {
                    continue;
                }
                match self.execute(action, &mut pending).await {
                    Outcome::Input(input @ Input::SessionStarted { .. }) => {
                        // Whatever was queued belongs to the previous session (a second restart,
                        // a listing, a claim): drop it, but still tell the owner what happened.
                        pending.retain(|a| matches!(a, Action::Notify(_)));
                        self.feed(input, &mut pending);
                    }
                    Outcome::Input(input) => self.feed(input, &mut pending),
                    Outcome::Done => {}
                    Outcome::Closed => return self.shutdown().await,
                }
            }
            let wake = {
                let Driver {
                    children_watch,
                    state_watcher,
                    close,
                    ..
                } = &mut self;
                tokio::select! {
                    _ = close.wait_for(|closed| *closed) => Wake::Close,
                    event = async {
                        match children_watch.as_mut() {
                            Some(w) => w.await,
                            None => std::future::pending().await,
                        }
                    } => Wake::Children(event),
                    state = async {
                        match state_watcher.as_mut() {
                            Some(w) => w.changed().await,
                            None => std::future::pending().await,
                        }
                    } => Wake::State(state),
                    _ = tick.tick() => Wake::Tick,
                }
            };
            match wake {
                Wake::Close => return self.shutdown().await,
                Wake::Children(event) => {
                    self.children_watch = None;
                    debug!(event_type = ?event.event_type, "latch directory changed");
                    // Session events on a node watch duplicate what the state watcher reports.
                    if event.event_type != zookeeper_client::EventType::Session {
                        pending.push_back(Action::ListChildren);
                    }
                }
                Wake::State(state) => {
                    if let Some(input) = self.observe_state(state) {
                        self.feed(input, &mut pending);
                    }
                }
                Wake::Tick => self.feed(Input::Tick, &mut pending),
            }
        }
    }

    /// Feeds an input to the core, publishes the resulting term, queues its actions.
    fn feed(&mut self, input: Input, pending: &mut VecDeque<Action>) {
        let reconnected = matches!(input, Input::Reconnected);
        let listing = matches!(input, Input::Children(_));
        let actions = self.core.handle(Instant::now(), input);
        let fence = self.core.fence().cloned();
        self.fence.send_if_modified(|current| {
            let changed = *current != fence;
            *current = fence;
            changed
        });
        if reconnected {
            self.reconnections.send_modify(|n| *n += 1);
        }
        if listing && self.core.is_follower() {
            self.follows.send_modify(|n| *n += 1);
        }
        pending.extend(actions);
    }

    /// Turns a session state change into a core input (or nothing if it is no change).
    fn observe_state(&mut self, state: SessionState) -> Option<Input> {
        let previous = std::mem::replace(&mut self.last_state, state);
        match state {
            SessionState::Disconnected => {
                warn!("ZooKeeper connection lost; keeping leadership while the session may live");
                Some(Input::Disconnected)
            }
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                (previous == SessionState::Disconnected).then(|| {
                    info!("ZooKeeper connection re-established within the session");
                    Input::Reconnected
                })
            }
            SessionState::Expired | SessionState::Closed | SessionState::AuthFailed => {
                warn!(?state, "ZooKeeper session ended");
                // Stop watching a dead session; the core will ask for a new one.
                self.state_watcher = None;
                Some(Input::SessionEnded)
            }
        }
    }

    /// Lets the core see connection changes and time; true if it decided to restart the session
    /// (the term may be over), which makes the action in progress moot.
    fn poll_background(&mut self, pending: &mut VecDeque<Action>) -> bool {
        if let Some(watcher) = self.state_watcher.as_mut() {
            let state = watcher.state();
            if state != self.last_state
                && let Some(input) = self.observe_state(state)
            {
                self.feed(input, pending);
            }
        }
        self.feed(Input::Tick, pending);
        pending.contains(&Action::RestartSession)
    }

    /// Runs one ZooKeeper call while keeping the core's clock running. The client queues requests
    /// made while it is disconnected until it reconnects, so a call can block for as long as the
    /// outage lasts; meanwhile a leader must still step down on time. `Err` carries what to do
    /// instead: `Done` if the core restarted the session, `Closed` if the election is closing.
    async fn guarded<F: Future>(
        &mut self,
        fut: F,
        pending: &mut VecDeque<Action>,
    ) -> Result<F::Output, Outcome> {
        enum Step<T> {
            Ready(T),
            Tick,
            Close,
        }
        let mut fut = std::pin::pin!(fut);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The interval's first tick is immediate; the caller has just been checked.
        tick.tick().await;
        loop {
            let step = {
                let close = &mut self.close;
                tokio::select! {
                    out = &mut fut => Step::Ready(out),
                    _ = tick.tick() => Step::Tick,
                    _ = close.wait_for(|closed| *closed) => Step::Close,
                }
            };
            match step {
                Step::Ready(out) => return Ok(out),
                Step::Close => return Err(Outcome::Closed),
                Step::Tick => {
                    if self.poll_background(pending) {
                        return Err(Outcome::Done);
                    }
                }
            }
        }
    }

    /// Waits before a retry (keeping the core's clock running).
    async fn pause(&mut self, pending: &mut VecDeque<Action>) -> Option<Outcome> {
        if let Err(outcome) = self.guarded(tokio::time::sleep(RETRY_PAUSE), pending).await {
            return Some(outcome);
        }
        self.poll_background(pending).then_some(Outcome::Done)
    }

    fn session_client(&self) -> Option<Client> {
        self.shared.client()
    }

    async fn execute(&mut self, action: Action, pending: &mut VecDeque<Action>) -> Outcome {
        match action {
            Action::Notify(event) => {
                match &event {
                    LeadershipEvent::Granted(fence) => {
                        info!(session_id = %fence.session_id, "leadership granted")
                    }
                    LeadershipEvent::Revoked { session_id, reason } => {
                        warn!(%session_id, ?reason, "leadership revoked")
                    }
                }
                // A closed receiver only means nobody listens any more.
                let _ = self.events.send(event);
                Outcome::Done
            }
            Action::RestartSession => self.restart_session().await,
            Action::CreateLatch => self.create_latch(pending).await,
            Action::ListChildren => self.list_children(pending).await,
            Action::Claim { path, session_id } => self.claim(path, session_id, pending).await,
            Action::DeleteLatch { path } => {
                if let Some(client) = self.session_client()
                    && let Err(e) = client.delete(&path, None).await
                {
                    // It goes with the session at the latest.
                    debug!(%path, error = %e, "could not delete an untracked latch node");
                }
                Outcome::Done
            }
        }
    }

    async fn restart_session(&mut self) -> Outcome {
        // Close the old session first: if it still lives, closing deletes its latch node so it
        // cannot keep a successor waiting.
        self.shared.set_client(None);
        self.state_watcher = None;
        self.children_watch = None;
        let mut backoff = Duration::from_millis(100);
        loop {
            let connect = self.connector.connect();
            let result = tokio::select! {
                _ = self.close.wait_for(|closed| *closed) => return Outcome::Closed,
                r = connect => r,
            };
            match result {
                Ok(client) => {
                    let loss_timeout = self.connector.loss_timeout(client.session_timeout());
                    info!(
                        session = %client.session_id(),
                        negotiated_timeout = ?client.session_timeout(),
                        ?loss_timeout,
                        "ZooKeeper session started"
                    );
                    let mut watcher = client.state_watcher();
                    self.last_state = watcher.state();
                    self.state_watcher = Some(watcher);
                    self.shared.set_client(Some(client));
                    return Outcome::Input(Input::SessionStarted { loss_timeout });
                }
                Err(e) => {
                    warn!(error = %e, "cannot open a ZooKeeper session; retrying");
                    tokio::select! {
                        _ = self.close.wait_for(|closed| *closed) => return Outcome::Closed,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Maps a failed call: terminal session errors end the session; others are retried.
    fn terminal(e: &zookeeper_client::Error) -> bool {
        matches!(
            e,
            zookeeper_client::Error::SessionExpired
                | zookeeper_client::Error::ClientClosed
                | zookeeper_client::Error::AuthFailed
                | zookeeper_client::Error::SessionMoved
        )
    }

    async fn create_latch(&mut self, pending: &mut VecDeque<Action>) -> Outcome {
        let Some(client) = self.session_client() else {
            return Outcome::Input(Input::SessionEnded);
        };
        // A random token in the name finds our node again if the reply to `create` is lost.
        let token = format!("{:016x}", rand::random::<u64>());
        let prefix = format!("{}/latch-{token}-", self.latch_dir);
        let latch_dir = self.latch_dir.clone();
        loop {
            let latch_dir = &latch_dir;
            let attempt = async {
                client.mkdir(latch_dir, &zk::PERSISTENT).await?;
                let (_, seq) = client
                    .create(&prefix, &[], &zk::EPHEMERAL_SEQUENTIAL)
                    .await?;
                Ok::<_, zookeeper_client::Error>(format!("{prefix}{seq}"))
            };
            let result = match self.guarded(attempt, pending).await {
                Ok(result) => result,
                Err(outcome) => return outcome,
            };
            match result {
                Ok(path) => {
                    debug!(%path, "latch node created");
                    return Outcome::Input(Input::LatchCreated { path });
                }
                Err(e) if Self::terminal(&e) => return Outcome::Input(Input::SessionEnded),
                Err(e) => {
                    debug!(error = %e, "creating the latch node failed; retrying");
                    if let Some(outcome) = self.pause(pending).await {
                        return outcome;
                    }
                    // The create may have been applied: adopt the node instead of making a second.
                    let listing = match self
                        .guarded(client.list_children(&self.latch_dir), pending)
                        .await
                    {
                        Ok(listing) => listing,
                        Err(outcome) => return outcome,
                    };
                    if let Ok(children) = listing
                        && let Some(name) = children.iter().find(|c| c.contains(&token))
                    {
                        return Outcome::Input(Input::LatchCreated {
                            path: format!("{}/{name}", self.latch_dir),
                        });
                    }
                }
            }
        }
    }

    async fn list_children(&mut self, pending: &mut VecDeque<Action>) -> Outcome {
        let Some(client) = self.session_client() else {
            return Outcome::Done;
        };
        loop {
            let listing = match self
                .guarded(client.list_and_watch_children(&self.latch_dir), pending)
                .await
            {
                Ok(listing) => listing,
                Err(outcome) => return outcome,
            };
            match listing {
                Ok((children, watcher)) => {
                    self.children_watch = Some(Box::pin(watcher.changed()));
                    return Outcome::Input(Input::Children(children));
                }
                // The directory itself was deleted: our node is gone with it.
                Err(zookeeper_client::Error::NoNode) => {
                    return Outcome::Input(Input::Children(Vec::new()));
                }
                Err(e) if Self::terminal(&e) => return Outcome::Input(Input::SessionEnded),
                Err(e) => {
                    debug!(error = %e, "listing the latch directory failed; retrying");
                    if let Some(outcome) = self.pause(pending).await {
                        return outcome;
                    }
                }
            }
        }
    }

    async fn claim(
        &mut self,
        path: String,
        session_id: LeaderSessionId,
        pending: &mut VecDeque<Action>,
    ) -> Outcome {
        let Some(client) = self.session_client() else {
            return Outcome::Input(Input::ClaimFailed { session_id });
        };
        // Writing the term's id bumps the node's version: the fence of this term checks that
        // version, so writes fenced with any earlier term of ours fail from now on.
        let data = session_id.to_string();
        let result = match self
            .guarded(client.set_data(&path, data.as_bytes(), None), pending)
            .await
        {
            Ok(result) => result,
            Err(outcome) => return outcome,
        };
        match result {
            Ok(stat) => Outcome::Input(Input::Claimed {
                session_id,
                version: stat.version,
            }),
            Err(e) if Self::terminal(&e) => Outcome::Input(Input::SessionEnded),
            Err(e) => {
                debug!(error = %e, "claiming leadership failed");
                Outcome::Input(Input::ClaimFailed { session_id })
            }
        }
    }

    async fn shutdown(mut self) {
        let mut pending: VecDeque<Action> = self.core.close().into();
        self.fence.send_replace(None);
        while let Some(action) = pending.pop_front() {
            if let Action::Notify(event) = action {
                let _ = self.events.send(event);
            }
        }
        if let Some(client) = self.session_client() {
            // Delete the latch node explicitly: closing the session would too, but only once the
            // last clone of the client is gone, which the owner may delay.
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                if let Ok(children) = client.list_children(&self.latch_dir).await {
                    let me = client.session_id();
                    for child in children {
                        let path = format!("{}/{child}", self.latch_dir);
                        if let Ok(Some(stat)) = client.check_stat(&path).await
                            && stat.ephemeral_owner == me.0
                        {
                            let _ = client.delete(&path, None).await;
                        }
                    }
                }
            })
            .await;
        }
        self.shared.set_client(None);
        self.state_watcher = None;
    }
}
