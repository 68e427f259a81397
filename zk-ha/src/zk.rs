//! Thin helpers over `zookeeper-client`: connecting, a self-healing shared client, fenced commits.

use std::time::Duration;

use tokio::sync::Mutex;
use zookeeper_client::{Acls, CheckWriteError, Client, CreateMode, CreateOptions, SessionState};

use crate::config::HaConfig;
use crate::error::HaError;
use crate::fence::LeaderFence;

/// Persistent nodes are world-accessible, like Flink's default (`high-availability.zookeeper.client.acl: open`).
pub(crate) const PERSISTENT: CreateOptions<'static> =
    CreateMode::Persistent.with_acls(Acls::anyone_all());
/// Ephemeral nodes (latch, connection info).
pub(crate) const EPHEMERAL: CreateOptions<'static> =
    CreateMode::Ephemeral.with_acls(Acls::anyone_all());
/// Ephemeral-sequential nodes (latch contenders).
pub(crate) const EPHEMERAL_SEQUENTIAL: CreateOptions<'static> =
    CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());

/// How to open sessions.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    quorum: String,
    session_timeout: Duration,
    connection_timeout: Duration,
}

impl Connector {
    pub(crate) fn new(config: &HaConfig) -> Self {
        Connector {
            quorum: config.quorum.clone(),
            session_timeout: config.session_timeout,
            connection_timeout: config.connection_timeout,
        }
    }

    pub(crate) fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    /// How long a leader may stay disconnected before it must assume its session expired.
    ///
    /// The server expires a session `negotiated` after it last heard from the client. The client
    /// declares a silent connection lost only after its own detection delay (zookeeper-client
    /// 0.11: the connection timeout if set to at most 3/5 of the session timeout, else 2/5 of the
    /// session timeout). Counting from the moment we hear `Disconnected`, the session may thus be
    /// gone after `negotiated - detection`; stepping down then keeps the deposed leader from
    /// believing in its term much longer than the server does. If the drop was noticed at once
    /// (a closed socket) this steps down somewhat early, which is safe.
    pub(crate) fn loss_timeout(&self, negotiated: Duration) -> Duration {
        let detection =
            if self.connection_timeout.is_zero() || self.connection_timeout > negotiated * 3 / 5 {
                negotiated * 2 / 5
            } else {
                self.connection_timeout
            };
        negotiated
            .saturating_sub(detection)
            .max(Duration::from_millis(100))
    }

    /// Opens a new session, giving up after one connection timeout per server plus slack.
    pub(crate) async fn connect(&self) -> Result<Client, HaError> {
        let servers = self.quorum.split(',').count().max(1) as u32;
        let budget = self.connection_timeout * servers + Duration::from_secs(1);
        let connect = Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_connection_timeout(self.connection_timeout)
            .connect(&self.quorum);
        match tokio::time::timeout(budget, connect).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(HaError::from_zk("connect", &self.quorum, e)),
            Err(_) => Err(HaError::from_zk(
                "connect",
                &self.quorum,
                zookeeper_client::Error::Timeout,
            )),
        }
    }
}

/// Whether a session can never serve requests again.
pub(crate) fn is_terminal(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Expired | SessionState::Closed | SessionState::AuthFailed
    )
}

/// One session shared by the stores, replaced by a fresh one when it ends. The stores need no
/// session identity of their own: their writes are fenced by the leader's latch node, which any
/// session can check.
#[derive(Debug)]
pub(crate) struct SharedClient {
    connector: Connector,
    current: Mutex<Option<Client>>,
}

impl SharedClient {
    pub(crate) fn new(connector: Connector) -> Self {
        SharedClient {
            connector,
            current: Mutex::new(None),
        }
    }

    /// A live client, connecting (again) if needed.
    pub(crate) async fn get(&self) -> Result<Client, HaError> {
        let mut current = self.current.lock().await;
        if let Some(client) = current.as_ref()
            && !is_terminal(client.state())
        {
            return Ok(client.clone());
        }
        // Drop the dead client before opening the next session.
        *current = None;
        let client = self.connector.connect().await?;
        *current = Some(client.clone());
        Ok(client)
    }
}

/// `mkdir -p` for persistent parents. Unfenced on purpose: an empty directory node carries no
/// state, so a deposed leader creating one harms nobody.
pub(crate) async fn ensure_dir(client: &Client, path: &str) -> Result<(), HaError> {
    client
        .mkdir(path, &PERSISTENT)
        .await
        .map_err(|e| HaError::from_zk("mkdir", path, e))
}

/// The parent of a ZooKeeper path.
pub(crate) fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// How a fenced multi-op ended.
pub(crate) enum FencedOutcome {
    /// Applied.
    Committed,
    /// One of the caller's ops failed; nothing was applied.
    OpFailed(zookeeper_client::Error),
}

/// Builds and commits `check(latch, version) + ops`. The fence check failing becomes
/// [`HaError::NotLeader`]; a lost connection becomes [`HaError::CommitUnknown`].
pub(crate) async fn commit_fenced(
    client: &Client,
    fence: &LeaderFence,
    target: &str,
    build: impl FnOnce(&mut zookeeper_client::CheckWriter<'_>) -> Result<(), zookeeper_client::Error>,
) -> Result<FencedOutcome, HaError> {
    let mut writer = client
        .new_check_writer(&fence.latch_path, Some(fence.latch_version))
        .map_err(|e| HaError::from_zk("multi", target, e))?;
    build(&mut writer).map_err(|e| HaError::from_zk("multi", target, e))?;
    match writer.commit().await {
        Ok(_) => Ok(FencedOutcome::Committed),
        Err(CheckWriteError::CheckFailed { source }) => match source {
            zookeeper_client::Error::NoNode | zookeeper_client::Error::BadVersion => {
                Err(HaError::NotLeader {
                    session_id: fence.session_id.to_string(),
                    detail: format!(
                        "latch node {} is gone or was re-claimed ({source})",
                        fence.latch_path
                    ),
                })
            }
            other => Err(HaError::from_zk_write("multi", target, other)),
        },
        Err(CheckWriteError::OperationFailed { source, .. }) => Ok(FencedOutcome::OpFailed(source)),
        Err(CheckWriteError::RequestFailed { source }) => {
            Err(HaError::from_zk_write("multi", target, source))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_timeout_subtracts_the_clients_detection_delay() {
        let c = |conn_ms| Connector {
            quorum: "x:1".into(),
            session_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_millis(conn_ms),
        };
        // Connection timeout above 3/5 of the session: the client detects after 2/5 of it.
        assert_eq!(
            c(5000).loss_timeout(Duration::from_secs(5)),
            Duration::from_secs(3)
        );
        assert_eq!(
            c(0).loss_timeout(Duration::from_secs(5)),
            Duration::from_secs(3)
        );
        // A short connection timeout is the detection delay itself.
        assert_eq!(
            c(1000).loss_timeout(Duration::from_secs(5)),
            Duration::from_secs(4)
        );
    }

    #[test]
    fn parents() {
        assert_eq!(parent_of("/a/b/c"), "/a/b");
        assert_eq!(parent_of("/a"), "/");
    }
}
