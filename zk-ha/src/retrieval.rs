//! Leader retrieval: followers and clients watch a component's published leader.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{Instrument, debug, warn};
use zookeeper_client::{Client, EventType, OneshotWatcher, SessionState};

use crate::error::HaError;
use crate::leader_info::LeaderInfo;
use crate::zk::{Connector, is_terminal};

/// Watches `<base>/leader/<component>/connection_info` and reports its content.
///
/// The value is `None` while no leader is published (the old leader's session is gone and the new
/// one has not published yet). During a lost connection the last known value is kept: it may be
/// stale, which is why every request carries the leader session id and a stale one is refused.
#[derive(Debug)]
pub struct LeaderRetrieval {
    rx: watch::Receiver<Option<LeaderInfo>>,
    task: JoinHandle<()>,
}

impl LeaderRetrieval {
    pub(crate) fn start(connector: Connector, path: String) -> Self {
        let (tx, rx) = watch::channel(None);
        let span = tracing::info_span!("leader_retrieval", %path);
        let task = tokio::spawn(run(connector, path, tx).instrument(span));
        LeaderRetrieval { rx, task }
    }

    /// The leader as last seen.
    pub fn current(&self) -> Option<LeaderInfo> {
        self.rx.borrow().clone()
    }

    /// A receiver that is notified on every change.
    pub fn subscribe(&self) -> watch::Receiver<Option<LeaderInfo>> {
        self.rx.clone()
    }

    /// Waits for the next change and returns the new value.
    pub async fn changed(&mut self) -> Result<Option<LeaderInfo>, HaError> {
        self.rx.changed().await.map_err(|_| HaError::Closed)?;
        Ok(self.rx.borrow_and_update().clone())
    }

    /// Waits until the value satisfies `pred` and returns it.
    pub async fn wait_for(
        &mut self,
        mut pred: impl FnMut(&Option<LeaderInfo>) -> bool,
    ) -> Result<Option<LeaderInfo>, HaError> {
        let value = self
            .rx
            .wait_for(|v| pred(v))
            .await
            .map_err(|_| HaError::Closed)?;
        Ok(value.clone())
    }
}

impl Drop for LeaderRetrieval {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn publish(tx: &watch::Sender<Option<LeaderInfo>>, value: Option<LeaderInfo>) {
    tx.send_if_modified(|current| {
        let changed = *current != value;
        *current = value;
        changed
    });
}

/// Reads the node once and arms a watch. `Ok(None)` asks to re-read at once (the node appeared
/// between our two reads).
async fn read_and_watch(
    client: &Client,
    path: &str,
    tx: &watch::Sender<Option<LeaderInfo>>,
) -> Result<Option<OneshotWatcher>, zookeeper_client::Error> {
    match client.get_and_watch_data(path).await {
        Ok((data, _, watcher)) => {
            match LeaderInfo::decode(path, &data) {
                Ok(info) => publish(tx, Some(info)),
                Err(e) => {
                    // Unreadable data is no leader we can talk to.
                    warn!(error = %e, "ignoring unreadable leader information");
                    publish(tx, None);
                }
            }
            Ok(Some(watcher))
        }
        Err(zookeeper_client::Error::NoNode) => match client.check_and_watch_stat(path).await? {
            (Some(_), _) => Ok(None),
            (None, watcher) => {
                publish(tx, None);
                Ok(Some(watcher))
            }
        },
        Err(e) => Err(e),
    }
}

async fn run(connector: Connector, path: String, tx: watch::Sender<Option<LeaderInfo>>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let client = match connector.connect().await {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "leader retrieval cannot reach ZooKeeper; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        let mut states = client.state_watcher();
        loop {
            let watcher = match read_and_watch(&client, &path, &tx).await {
                Ok(Some(w)) => w,
                Ok(None) => continue,
                Err(e) => {
                    if is_terminal(client.state()) {
                        break;
                    }
                    debug!(error = %e, "leader retrieval read failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            tokio::select! {
                event = watcher.changed() => {
                    if event.event_type == EventType::Session && is_terminal(event.session_state) {
                        break;
                    }
                }
                state = states.changed() => {
                    if is_terminal(state) {
                        break;
                    }
                    // Reconnected: re-read in case a change slipped by (the dropped watcher is
                    // replaced by the next read).
                    if state != SessionState::SyncConnected {
                        let _ = states.changed().await;
                    }
                }
            }
        }
        debug!("leader retrieval session ended; reconnecting");
    }
}
