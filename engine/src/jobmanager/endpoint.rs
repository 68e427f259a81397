//! The TaskManager protocol on the JobManager's side: accepts control connections (TLS and the
//! cluster secret's proof), registers TaskManagers, answers heartbeats and turns each message
//! into an event for the Dispatcher. One task per connection; the Dispatcher's lock is taken
//! only for the core's computation.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::resourcemanager::TaskManagerInfo;
use super::service::{JobManagerShared, now_ms};
use crate::rpc::listener::{Accepted, LimitedListener};
use crate::rpc::messages::{JmToTm, PROTOCOL_VERSION, TaskMetrics, TmToJm};
use crate::rpc::transport::{self, RpcError};
use crate::security::ClusterSecret;

/// How a JobManager that does not lead the current term refuses a TaskManager (HA).
pub const NOT_LEADER: &str = "not the leader of the current term";

/// Accepts control connections for good: at most `jobmanager.rpc.max-connections` at once
/// (more are closed as soon as they are accepted) and at most
/// `security.handshake.max-concurrent` of them proving the cluster secret at once (the others
/// wait, holding nothing but their socket), each within `security.handshake.timeout`.
pub(super) async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    secret: ClusterSecret,
    shared: Arc<JobManagerShared>,
) {
    let config = shared.config();
    let listener = LimitedListener::new(
        listener,
        config.jobmanager.rpc_max_connections,
        "the RPC port",
    );
    let handshakes = Arc::new(Semaphore::new(
        config.security.handshake_max_concurrent.max(1) as usize,
    ));
    let handshake_timeout = config.security.handshake_timeout;
    loop {
        let Accepted {
            stream,
            peer,
            place,
        } = listener.accept(|_| {}).await;
        let (acceptor, secret, shared) = (acceptor.clone(), secret.clone(), shared.clone());
        let handshakes = handshakes.clone();
        tokio::spawn(async move {
            let authenticated = async {
                let _turn = handshakes
                    .acquire()
                    .await
                    .map_err(|_| RpcError::Malformed("the JobManager is shutting down".into()))?;
                transport::accept(stream, &acceptor, &secret, handshake_timeout).await
            };
            let result = match authenticated.await {
                Ok(stream) => serve_taskmanager(stream, peer, shared.clone()).await,
                Err(e) => Err(e),
            };
            match result {
                Err(e) if shared.is_stopped() => {
                    debug!(%peer, error = %e, "control connection closed while stopping");
                }
                Err(e) => warn!(%peer, error = %e, "control connection closed"),
                Ok(()) => {}
            }
            drop(place);
        });
    }
}

/// Sends a TaskManager the job artifact `key`: its size, then its bytes in frames; or why not.
async fn send_artifact<W: tokio::io::AsyncWrite + Unpin>(
    writer: &mut W,
    key: &str,
    shared: &JobManagerShared,
) -> Result<(), RpcError> {
    use tokio::io::AsyncReadExt;
    // The store may fetch the executable from HDFS first: off the runtime's threads.
    let (store, id) = (shared.artifacts().clone(), key.to_string());
    let found = tokio::task::spawn_blocking(move || store.path(&id))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let opened = match found {
        Ok(path) => tokio::fs::File::open(&path)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let mut file = match opened {
        Ok(file) => file,
        Err(reason) => {
            return transport::send(writer, &JmToTm::Refused { reason }).await;
        }
    };
    let size = file.metadata().await?.len();
    transport::send(writer, &JmToTm::Artifact { size }).await?;
    let mut chunk = vec![0u8; crate::rpc::messages::ARTIFACT_CHUNK];
    let mut left = size;
    while left > 0 {
        let n = file.read(&mut chunk).await?;
        if n == 0 {
            return Err(RpcError::Malformed(format!(
                "artifact {key} shrank while it was sent"
            )));
        }
        transport::write_frame(writer, &chunk[..n]).await?;
        left = left.saturating_sub(n as u64);
    }
    Ok(())
}

/// Tells a TaskManager why its registration is refused (it logs the reason and stops trying
/// where retrying cannot help), logs it here too, and ends the connection with it.
async fn refuse<W: tokio::io::AsyncWrite + Unpin>(
    writer: &mut W,
    peer: SocketAddr,
    reason: String,
) -> Result<(), RpcError> {
    warn!(%peer, "{reason}");
    transport::send(
        writer,
        &JmToTm::Refused {
            reason: reason.clone(),
        },
    )
    .await?;
    Err(RpcError::Malformed(reason))
}

async fn serve_taskmanager(
    stream: transport::Stream<TcpStream>,
    peer: SocketAddr,
    shared: Arc<JobManagerShared>,
) -> Result<(), RpcError> {
    let (mut reader, mut writer) = tokio::io::split(stream);
    let first: TmToJm = tokio::time::timeout(Duration::from_secs(10), transport::recv(&mut reader))
        .await
        .map_err(|_| RpcError::Timeout)??;
    let TmToJm::Register {
        protocol_version,
        resource_id,
        host,
        data_port,
        slots,
        hardware,
        network_memory,
        managed_memory,
        running: _,
        leader_session,
        metrics_port,
        worker_of: _,
    } = first
    else {
        if let TmToJm::FetchArtifact { key } = first {
            return send_artifact(&mut writer, &key, &shared).await;
        }
        return Err(RpcError::Malformed(
            "the first message must be Register or FetchArtifact".into(),
        ));
    };
    if protocol_version != PROTOCOL_VERSION {
        let reason = format!(
            "TaskManager {resource_id} speaks control protocol version {protocol_version}, this JobManager speaks {PROTOCOL_VERSION}: run the same sluice version everywhere"
        );
        return refuse(&mut writer, peer, reason).await;
    }
    let term = shared.leader_session();
    if shared.has_ha() && (term.is_none() || leader_session != term) {
        let reason = format!(
            "{NOT_LEADER}: TaskManager {resource_id} asked for leader session {}, this JobManager's is {}",
            leader_session.as_deref().unwrap_or("none"),
            term.as_deref().unwrap_or("none (a standby)")
        );
        return refuse(&mut writer, peer, reason).await;
    }
    if slots == 0 || slots > crate::config::MAX_TASK_SLOTS {
        let reason = format!(
            "TaskManager {resource_id} offers {slots} slots: taskmanager.numberOfTaskSlots must be 1 to {}",
            crate::config::MAX_TASK_SLOTS
        );
        return refuse(&mut writer, peer, reason).await;
    }
    let data_address = SocketAddr::new(peer.ip(), data_port);
    let data_address = match tokio::net::lookup_host((host.as_str(), data_port))
        .await
        .ok()
        .and_then(|mut a| a.next())
    {
        Some(addr) => addr,
        None => data_address,
    };
    let hb = &shared.config().heartbeat;
    transport::send(
        &mut writer,
        &JmToTm::Registered {
            heartbeat_interval_ms: hb.interval.as_millis() as u64,
            heartbeat_timeout_ms: hb.detection_timeout().as_millis() as u64,
        },
    )
    .await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Heartbeats are answered on this connection; a weak handle, so that dropping the
    // connection from `connections` (a lost TaskManager, a revoked leader) still ends it.
    let acks = tx.downgrade();
    let connection = shared
        .next_connection
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    shared
        .connections
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(resource_id.clone(), (connection, tx));
    let now = now_ms();
    let info = TaskManagerInfo {
        resource_id: resource_id.clone(),
        host,
        data_address,
        rpc_address: peer,
        hardware,
        network_memory,
        managed_memory,
        registered_at: now,
        last_heartbeat: now,
        slots: vec![None; slots as usize],
    };
    shared
        .metrics()
        .register_taskmanager(&resource_id, metrics_port);
    let outbox = shared.dispatcher().register_taskmanager(info, now);
    shared.deliver(outbox);
    info!(%resource_id, %peer, slots, "TaskManager registered");

    let write_loop = async {
        while let Some(msg) = rx.recv().await {
            transport::send(&mut writer, &msg).await?;
        }
        Ok::<(), RpcError>(())
    };
    let read_loop = async {
        loop {
            let msg: TmToJm = transport::recv(&mut reader).await?;
            if shared.has_ha() && shared.leader_session() != term {
                // The term this connection was made in is over: nothing it says may change
                // the new term's jobs.
                warn!(%resource_id, "refusing a message sent in an earlier leader term; closing the connection");
                return Err(RpcError::Malformed(format!(
                    "{NOT_LEADER}: the term changed"
                )));
            }
            let now = now_ms();
            match msg {
                TmToJm::Heartbeat { metrics, process } => {
                    shared
                        .metrics()
                        .heartbeat(&resource_id, now, &metrics, process);
                    shared.dispatcher().heartbeat(&resource_id, metrics, now);
                    // The TaskManager counts unanswered heartbeats
                    // (heartbeat.rpc-failure-threshold) and gives up on a silent JobManager.
                    if let Some(tx) = acks.upgrade() {
                        let _ = tx.send(JmToTm::HeartbeatAck);
                    }
                }
                TmToJm::TaskState {
                    execution,
                    state,
                    error,
                    metrics,
                } => {
                    shared.dispatcher().heartbeat(&resource_id, Vec::new(), now);
                    if metrics != TaskMetrics::default() {
                        shared.metrics().task_update(execution, now, &metrics);
                    }
                    let outbox = shared
                        .dispatcher()
                        .task_state(execution, state, error, metrics, now);
                    shared.deliver(outbox);
                }
                TmToJm::AcknowledgeCheckpoint {
                    execution,
                    checkpoint_id,
                    state,
                } => {
                    let outbox = shared.dispatcher().acknowledge_checkpoint(
                        execution,
                        checkpoint_id,
                        state,
                        now,
                    );
                    shared.deliver(outbox);
                }
                TmToJm::DeclineCheckpoint {
                    execution,
                    checkpoint_id,
                    reason,
                } => {
                    let outbox = shared.dispatcher().decline_checkpoint(
                        execution,
                        checkpoint_id,
                        reason,
                        now,
                    );
                    shared.deliver(outbox);
                }
                TmToJm::LogAnswer { request, answer } => {
                    if !shared.log_requests.answer(&resource_id, request, answer) {
                        debug!(%resource_id, request, "a log answer no one waits for (any more)");
                    }
                }
                TmToJm::Register { .. } | TmToJm::FetchArtifact { .. } => {
                    return Err(RpcError::Malformed(
                        "Register or FetchArtifact on a registered connection".into(),
                    ));
                }
            }
        }
    };
    let result = tokio::select! {
        r = write_loop => r,
        r = read_loop => r,
    };
    // The connection is gone: so is the TaskManager, unless it already registered again on a
    // newer connection (then that registration has failed over its old executions).
    let still_ours = {
        let mut connections = shared.connections.lock().unwrap_or_else(|e| e.into_inner());
        let ours = connections
            .get(&resource_id)
            .is_some_and(|(c, _)| *c == connection);
        if ours {
            connections.remove(&resource_id);
            shared.log_requests.forget(&resource_id);
        }
        ours
    };
    if still_ours && !shared.is_stopped() {
        let reason = match &result {
            Err(e) => format!("its control connection broke ({e})"),
            Ok(()) => "its control connection closed".to_string(),
        };
        warn!(%resource_id, "TaskManager lost: {reason}");
        let outbox = shared
            .dispatcher()
            .taskmanager_lost(&resource_id, &reason, now_ms());
        shared.deliver(outbox);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::jobmanager::JobManager;

    #[tokio::test]
    async fn a_taskmanager_of_another_protocol_version_is_refused_with_the_reason() {
        let mut config = Config::default();
        for (k, v) in [
            ("rest.port", "0"),
            ("jobmanager.rpc.port", "0"),
            ("jobmanager.bind-host", "127.0.0.1"),
            ("rest.bind-address", "127.0.0.1"),
        ] {
            config.set(k, v).unwrap();
        }
        let secret = ClusterSecret::new("protocol-version-test-secret");
        let programs = Arc::new(crate::api::ProgramRegistry::new());
        let jm = JobManager::start(config, secret.clone(), programs, |_| axum::Router::new())
            .await
            .unwrap();
        let mut stream = transport::connect(jm.shared.rpc_address(), &secret)
            .await
            .unwrap();
        let register = TmToJm::Register {
            protocol_version: PROTOCOL_VERSION + 1,
            resource_id: "from-the-future".into(),
            host: "127.0.0.1".into(),
            data_port: 1,
            slots: 1,
            hardware: Default::default(),
            network_memory: 0,
            managed_memory: 0,
            running: vec![],
            leader_session: None,
            metrics_port: None,
            worker_of: None,
        };
        transport::send(&mut stream, &register).await.unwrap();
        match transport::recv::<_, JmToTm>(&mut stream).await.unwrap() {
            JmToTm::Refused { reason } => {
                assert!(
                    reason.contains(&format!("version {}", PROTOCOL_VERSION + 1)),
                    "{reason}"
                );
                assert!(reason.contains("same sluice version"), "{reason}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(jm.shared.view().resources().total_slots(), 0);
    }
}
