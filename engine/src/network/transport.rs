//! The QUIC transport between TaskManagers.
//!
//! Every TaskManager runs one QUIC endpoint on its data port, both server and client. Between
//! two TaskManagers there is one connection, multiplexing one bidirectional stream per input
//! channel. A connection is usable only after both sides proved the cluster secret on its first
//! stream (see [`crate::security`]); a stranger can neither request nor read a partition.
//!
//! On a channel's stream the consumer sends one request frame (the partition and subpartition
//! it wants, as JSON), then the producer sends data frames: `[u32 LE length][u8 kind][body]`
//! with kind 1 = a buffer of records, 2 = end of partition, 3 = an error message, 4 = a
//! checkpoint barrier (JSON).
//!
//! Until a peer has proved the secret it can make a TaskManager hold almost nothing: the
//! server's connections start with one stream and a connection window of [`PRE_AUTH_WINDOW`]
//! bytes (room for the proof), no unidirectional streams and no datagrams; the windows open only
//! after the proof verified. At most `security.handshake.max-concurrent` connections are in
//! their handshake at once, each for at most `security.handshake.timeout`.
//!
//! Credit-based flow control, as in Flink: the consumer's request carries its initial credit
//! (the buffers its channel queue holds: exclusive buffers plus a share of the gate's floating
//! ones); the producer sends a buffer only while it has credit; each received buffer holds one
//! credit, which goes back to the producer (as a `u32` count on the stream's other direction)
//! when the consuming task has processed the buffer. A slow consumer therefore stalls its own
//! channel only, backpressure reaches the producing task through its full subpartition queue,
//! and the memory of a channel is bounded by its credit whatever the consumer's speed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rkyv::util::AlignedVec;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex as AsyncMutex;
use tracing::{debug, warn};

use super::buffer::{Buffer, BufferPool, CheckpointBarrier, CreditGuard, Credits, NetBuffer};
use super::channel::{ChannelDeployment, RemoteChannels};
use super::registry::{PartitionRegistry, TakeError};
use super::valve::TimeSignal;
use crate::common::error::TaskError;
use crate::common::ids::PartitionId;
use crate::config::MtuLimit;
use crate::security::{self, ClusterSecret};
use crate::threads::SchedulingPolicy;

/// ALPN protocol id of the data plane: version 2 framed records in runs (`crate::record`),
/// version 3 adds event time frames, version 4 the redirect to a job's worker process, so a
/// TaskManager of an earlier version fails the handshake instead of misreading the stream.
pub const ALPN: &[u8] = b"sluice-data/4";
const KIND_DATA: u8 = 1;
const KIND_END: u8 = 2;
const KIND_ERROR: u8 = 3;
const KIND_BARRIER: u8 = 4;
/// Body: the watermark, 8 bytes little endian.
const KIND_WATERMARK: u8 = 5;
/// Body: 1 byte, 1 when the producer became idle, 0 when it became active.
const KIND_STATUS: u8 = 6;
/// The partition is served by the job's worker process on the same host: body, its data port
/// (2 bytes little endian). Sent instead of any data; the consumer asks there.
const KIND_MOVED: u8 = 7;
/// How many redirects a channel follows (a worker never redirects; one is what happens).
const MAX_REDIRECTS: u32 = 2;
/// Socket buffer size the data port asks the kernel for, in each direction.
const SOCKET_BUFFER: usize = 8 * 1024 * 1024;
/// How long freed credits short of a batch wait before they are announced anyway.
const CREDIT_LINGER: Duration = Duration::from_millis(50);
/// Largest frame body accepted from a peer.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;
/// What an accepted connection may make this TaskManager buffer before its peer has proved the
/// cluster secret: the 32-byte proof and room to spare, nothing more.
pub const PRE_AUTH_WINDOW: u32 = 1024;
/// An authenticated connection's receive window (all its streams together).
const CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;
/// Channels one authenticated connection may have open at once.
const MAX_CHANNELS_PER_CONNECTION: u32 = 4096;
/// Connection attempts quinn holds before they are accepted (the ones waiting for a handshake
/// turn); more are refused. With the first packets they may buffer, at most a few MiB.
const MAX_INCOMING: usize = 1024;

/// Why the data plane failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The endpoint could not be created or bound.
    #[error("cannot open the data port {addr}: {reason}")]
    Bind {
        /// Where.
        addr: String,
        /// Why.
        reason: String,
    },
    /// Connecting to a peer failed.
    #[error("cannot connect to TaskManager at {addr}: {reason}")]
    Connect {
        /// Where.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
    /// The peer did not prove the cluster secret.
    #[error("the peer at {0} did not prove knowledge of the cluster secret")]
    Authentication(SocketAddr),
    /// A stream failed.
    #[error("data stream error: {0}")]
    Stream(String),
    /// Nothing came from the peer, not even QUIC's keep-alives, for the connection's idle
    /// timeout: the path to it is cut (a partition) or it hangs.
    #[error("data channel to {peer} stalled for {idle:?}")]
    Stalled {
        /// The other end: the producer a consumer reads from, or the consumer a producer
        /// writes to.
        peer: SocketAddr,
        /// How long it was silent.
        idle: Duration,
    },
    /// A peer sent bytes that are not a valid frame.
    #[error("malformed frame from {peer}: {reason}")]
    Malformed {
        /// Who.
        peer: SocketAddr,
        /// What was wrong.
        reason: String,
    },
}

/// The first frame on a channel's stream.
#[derive(Serialize, Deserialize, Debug)]
struct PartitionRequest {
    partition: PartitionId,
    subpartition: u32,
    /// Buffers the consumer can take before it announces more.
    credit: u32,
}

/// Settings of the data plane.
#[derive(Clone, Debug)]
pub struct DataPlaneSettings {
    /// Size of one network buffer.
    pub segment_size: usize,
    /// How long a request waits for a producer that is not yet deployed.
    pub partition_wait: Duration,
    /// A peer silent this long is considered gone.
    pub idle_timeout: Duration,
    /// The largest UDP payload MTU discovery may reach (`taskmanager.network.quic.max-mtu`).
    pub max_mtu: MtuLimit,
    /// Threads of the data plane's runtime (`taskmanager.network.quic.num-threads`, resolved).
    pub threads: usize,
    /// How the OS schedules them (`taskmanager.threads.scheduling-policy`).
    pub scheduling_policy: SchedulingPolicy,
    /// How long an accepted connection may take for its handshake and proof
    /// (`security.handshake.timeout`).
    pub handshake_timeout: Duration,
    /// Accepted connections in their handshake at once (`security.handshake.max-concurrent`).
    pub max_handshakes: u32,
}

/// QUIC's default and minimum-safe UDP payload: what every IPv4 path with a 1500-byte MTU carries.
const DEFAULT_MTU: u16 = 1452;
/// The largest UDP payload the data plane sends or accepts: loopback's 64 KiB MTU less the IP and
/// UDP headers, rounded down.
const LARGEST_MTU: u16 = 65000;
/// Routes whose MTU is at most this (Ethernet's 1500, or a tunnel's less) keep QUIC's defaults.
const ETHERNET_MTU: u32 = 1500;

/// The largest UDP payload MTU discovery may try towards a peer. A fixed limit is used as it
/// is. With `auto`, a route whose MTU exceeds Ethernet's (loopback, jumbo frames) bounds it at
/// that MTU less the IP and UDP headers; any other route, or one the kernel could not tell,
/// keeps QUIC's safe default, from which discovery still climbs on paths that allow it.
pub(crate) fn mtu_upper_bound(limit: MtuLimit, route_mtu: Option<u32>, ipv6: bool) -> u16 {
    match limit {
        MtuLimit::Max(n) => n,
        MtuLimit::Auto => match route_mtu {
            Some(mtu) if mtu > ETHERNET_MTU => {
                let headers = if ipv6 { 40 + 8 } else { 20 + 8 };
                (mtu - headers).min(u32::from(LARGEST_MTU)) as u16
            }
            _ => DEFAULT_MTU,
        },
    }
}

/// The MTU the kernel holds for the route to `peer` (the outgoing interface's, or less if ICMP
/// taught it a smaller path MTU), read from a UDP socket connected to it; nothing is sent.
fn route_mtu(peer: SocketAddr) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let any: SocketAddr = if peer.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = std::net::UdpSocket::bind(any).ok()?;
    socket.connect(peer).ok()?;
    let (level, name) = if peer.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the socket is open for the call, and `mtu`/`len` are a valid c_int and its size.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && mtu > 0).then_some(mtu as u32)
}

/// The upper bound for a connection with `peer`.
fn peer_upper_bound(limit: MtuLimit, peer: SocketAddr) -> u16 {
    let route = match limit {
        MtuLimit::Auto => route_mtu(peer),
        MtuLimit::Max(_) => None,
    };
    mtu_upper_bound(limit, route, peer.is_ipv6())
}

fn transport_config(settings: &DataPlaneSettings, max_mtu: u16) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    // Our own credits bound what is in flight per channel, so QUIC's stream window only has to
    // be large enough not to throttle a channel below its credit.
    let stream_window = (settings.segment_size * 64).min(16 * 1024 * 1024) as u32;
    t.stream_receive_window(quinn::VarInt::from_u32(stream_window));
    t.receive_window(quinn::VarInt::from_u32(CONNECTION_WINDOW));
    t.send_window(64 * 1024 * 1024);
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(MAX_CHANNELS_PER_CONNECTION));
    // Channels are bidirectional streams; nothing uses unidirectional streams or datagrams, so
    // no peer may make us buffer any.
    t.max_concurrent_uni_streams(quinn::VarInt::from_u32(0));
    t.datagram_receive_buffer_size(None);
    t.keep_alive_interval(Some(settings.idle_timeout / 4));
    if let Ok(idle) = quinn::IdleTimeout::try_from(settings.idle_timeout) {
        t.max_idle_timeout(Some(idle));
    }
    // Ask the peer to acknowledge every 8th packet instead of every 2nd (the ACK frequency
    // extension, which quinn peers support): a channel's credit announcements already carry
    // acknowledgements back, so ACK-only packets are mostly overhead for bulk data.
    let mut ack_frequency = quinn::AckFrequencyConfig::default();
    ack_frequency.ack_eliciting_threshold(quinn::VarInt::from_u32(8));
    ack_frequency.max_ack_delay(Some(Duration::from_millis(5)));
    t.ack_frequency_config(Some(ack_frequency));
    if max_mtu > DEFAULT_MTU {
        // Let MTU discovery climb to the path MTU (it stops at 1452 by default). Both sides
        // start at the safe default: a server's initial MTU above ~3600 bytes would stall the
        // handshake on the anti-amplification limit.
        let mut discovery = quinn::MtuDiscoveryConfig::default();
        discovery.upper_bound(max_mtu);
        t.mtu_discovery_config(Some(discovery));
        // Batches of large datagrams exceed 64 KiB with segmentation offload: throughput
        // collapses above ~6500 bytes unless it is off (measured on loopback; `bench/README.md`).
        if max_mtu > 6500 {
            t.enable_segmentation_offload(false);
        }
        // A congestion window of a few datagrams would throttle large datagrams from the start.
        let mut cubic = quinn::congestion::CubicConfig::default();
        cubic.initial_window(64 * max_mtu as u64);
        t.congestion_controller_factory(Arc::new(cubic));
    }
    t
}

/// A TaskManager's QUIC endpoint: serves its partitions and fetches remote ones.
///
/// The data plane runs on a runtime of its own, apart from the TaskManager's RPC and REST work:
/// with one thread (a single-slot TaskManager) every QUIC connection, channel reader and
/// channel server of the TaskManager runs on that thread, so handing a buffer from one to
/// another never wakes a second worker thread, and the task threads wake at most one.
pub struct DataPlane {
    endpoint: quinn::Endpoint,
    configs: PeerConfigs,
    secret: ClusterSecret,
    connections: AsyncMutex<HashMap<SocketAddr, quinn::Connection>>,
    runtime: tokio::runtime::Handle,
    settings: DataPlaneSettings,
    /// Ends the runtime's thread when the data plane is dropped.
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

/// The data plane's QUIC configurations, made per peer: the transport's datagram size depends on
/// the route to it.
struct PeerConfigs {
    server: quinn::ServerConfig,
    client: quinn::ClientConfig,
    settings: DataPlaneSettings,
}

impl PeerConfigs {
    /// For a connection accepted from a peer with this upper bound: it starts closed but for
    /// its proof stream; `authenticate` opens the windows once the proof verified.
    fn server_for(&self, max_mtu: u16) -> quinn::ServerConfig {
        let mut pre_auth = transport_config(&self.settings, max_mtu);
        pre_auth
            .receive_window(quinn::VarInt::from_u32(PRE_AUTH_WINDOW))
            .max_concurrent_bidi_streams(quinn::VarInt::from_u32(1));
        let mut config = self.server.clone();
        config.transport_config(Arc::new(pre_auth));
        config
    }

    fn client_for(&self, max_mtu: u16) -> quinn::ClientConfig {
        let mut config = self.client.clone();
        config.transport_config(Arc::new(transport_config(&self.settings, max_mtu)));
        config
    }
}

/// Starts the data plane's runtime on a thread of its own; it ends when `shutdown` fires or is
/// dropped. With more than one thread it is a work-stealing runtime whose workers do the work
/// while the owning thread only waits.
fn start_runtime(
    threads: usize,
    policy: SchedulingPolicy,
) -> std::io::Result<(tokio::runtime::Handle, tokio::sync::oneshot::Sender<()>)> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads)
            .on_thread_start(move || policy.apply_to_current_thread());
        b
    };
    let runtime = builder.enable_all().thread_name("sluice-data").build()?;
    let handle = runtime.handle().clone();
    let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("sluice-data".into())
        .spawn(move || {
            // With one thread, this one runs the runtime's work.
            policy.apply_to_current_thread();
            runtime.block_on(async {
                let _ = stopped.await;
            });
            // Dropped here, outside any async context.
            runtime.shutdown_background();
        })?;
    Ok((handle, shutdown))
}

impl DataPlane {
    /// Binds the data port and starts serving `registry`'s partitions.
    pub(crate) async fn start(
        bind: &str,
        port: u16,
        secret: ClusterSecret,
        registry: Arc<PartitionRegistry>,
        settings: DataPlaneSettings,
    ) -> Result<Arc<DataPlane>, TransportError> {
        let addr_text = format!("{bind}:{port}");
        let bind_err = |reason: String| TransportError::Bind {
            addr: addr_text.clone(),
            reason,
        };
        let addr = tokio::net::lookup_host(&addr_text)
            .await
            .map_err(|e| bind_err(e.to_string()))?
            .next()
            .ok_or_else(|| bind_err("the host name resolves to no address".into()))?;
        let server_tls = security::server_tls(ALPN).map_err(|e| bind_err(e.to_string()))?;
        let server_crypto = quinn::crypto::rustls::QuicServerConfig::try_from(server_tls)
            .map_err(|e| bind_err(e.to_string()))?;
        let mut server_base = quinn::ServerConfig::with_crypto(Arc::new(server_crypto));
        server_base
            .max_incoming(MAX_INCOMING)
            .incoming_buffer_size(64 * 1024)
            .incoming_buffer_size_total(4 * 1024 * 1024);
        let client_tls = security::client_tls(ALPN).map_err(|e| bind_err(e.to_string()))?;
        let client_crypto = quinn::crypto::rustls::QuicClientConfig::try_from(client_tls)
            .map_err(|e| bind_err(e.to_string()))?;
        let client_base = quinn::ClientConfig::new(Arc::new(client_crypto));
        let configs = PeerConfigs {
            server: server_base,
            client: client_base,
            settings: settings.clone(),
        };
        let mut endpoint_config = quinn::EndpointConfig::default();
        endpoint_config
            .max_udp_payload_size(match settings.max_mtu {
                MtuLimit::Auto => LARGEST_MTU,
                MtuLimit::Max(n) => n.max(DEFAULT_MTU),
            })
            .map_err(|e| bind_err(e.to_string()))?;
        let socket = std::net::UdpSocket::bind(addr).map_err(|e| bind_err(e.to_string()))?;
        // Bursts of large datagrams overflow the kernel's default socket buffers (~208 KiB) as
        // soon as the receiving thread is not scheduled for a moment; every drop costs a
        // retransmission, and repeated drops make MTU black-hole detection fall back to small
        // datagrams for the rest of the connection. Ask for larger buffers (the kernel caps the
        // request at net.core.rmem_max / wmem_max; failing to get them is not an error).
        if let Ok(state) = quinn::udp::UdpSocketState::new((&socket).into()) {
            let _ = state.set_recv_buffer_size((&socket).into(), SOCKET_BUFFER);
            let _ = state.set_send_buffer_size((&socket).into(), SOCKET_BUFFER);
        }
        let (handle, shutdown) = start_runtime(settings.threads, settings.scheduling_policy)
            .map_err(|e| bind_err(e.to_string()))?;
        // The endpoint's driver, and every connection's, run on the data plane's runtime.
        let endpoint = {
            let _in_runtime = handle.enter();
            let runtime =
                quinn::default_runtime().ok_or_else(|| bind_err("no async runtime".into()))?;
            // Every connection gets configurations made for its peer; these defaults are
            // never used.
            let default_server = configs.server_for(DEFAULT_MTU);
            quinn::Endpoint::new(endpoint_config, Some(default_server), socket, runtime)
                .map_err(|e| bind_err(e.to_string()))?
        };
        let plane = Arc::new(DataPlane {
            endpoint,
            configs,
            secret,
            connections: AsyncMutex::new(HashMap::new()),
            runtime: handle.clone(),
            settings,
            _shutdown: shutdown,
        });
        handle.spawn(accept_loop(plane.clone(), registry));
        Ok(plane)
    }

    /// The bound data address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Closes the endpoint.
    pub fn close(&self) {
        self.endpoint.close(quinn::VarInt::from_u32(0), b"shutdown");
    }

    async fn connection(&self, addr: SocketAddr) -> Result<quinn::Connection, TransportError> {
        let mut connections = self.connections.lock().await;
        if let Some(c) = connections
            .get(&addr)
            .filter(|c| c.close_reason().is_none())
        {
            return Ok(c.clone());
        }
        let connect_err = |reason: String| TransportError::Connect { addr, reason };
        let max_mtu = peer_upper_bound(self.settings.max_mtu, addr);
        let connection = self
            .endpoint
            .connect_with(self.configs.client_for(max_mtu), addr, "sluice")
            .map_err(|e| connect_err(e.to_string()))?
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        // Prove the secret on the first stream, then check the server's proof.
        let ekm = security::export_quic(&connection).map_err(connect_err)?;
        let (mut send, mut recv) = connection
            .open_bi()
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        send.write_all(&self.secret.proof(&ekm, b"data-client"))
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        let mut proof = [0u8; 32];
        recv.read_exact(&mut proof)
            .await
            .map_err(|_| TransportError::Authentication(addr))?;
        if !self.secret.verify(&ekm, b"data-server", &proof) {
            connection.close(quinn::VarInt::from_u32(1), b"authentication failed");
            return Err(TransportError::Authentication(addr));
        }
        connections.insert(addr, connection.clone());
        Ok(connection)
    }

    /// Asks the producer at `addr` for the channel's subpartition with `credits`' capacity and
    /// announces freed credits on the request's stream until `credits` closes (or the task is
    /// cancelled); returns the stream's frames.
    async fn request(
        &self,
        addr: SocketAddr,
        channel: &ChannelDeployment,
        credits: Arc<Credits>,
        capacity: usize,
        cancelled: Arc<AtomicBool>,
    ) -> Result<FrameReader, TransportError> {
        let connection = self.connection(addr).await?;
        let stream_err = |e: &dyn std::fmt::Display| TransportError::Stream(e.to_string());
        let (mut send, recv) = connection.open_bi().await.map_err(|e| stream_err(&e))?;
        let request = serde_json::to_vec(&PartitionRequest {
            partition: channel.partition,
            subpartition: channel.subpartition,
            credit: capacity as u32,
        })
        .map_err(|e| stream_err(&e))?;
        send.write_all(&(request.len() as u32).to_le_bytes())
            .await
            .map_err(|e| stream_err(&e))?;
        send.write_all(&request).await.map_err(|e| stream_err(&e))?;
        // Announces freed credits to the producer.
        tokio::spawn(async move {
            loop {
                // Woken by a full batch of freed credits; credits that never make a batch (the
                // task stopped reading, or a channel that carries little) go out after a while,
                // so a producer always learns about them and a consumer that went away is noticed.
                let _ = tokio::time::timeout(CREDIT_LINGER, credits.notify.notified()).await;
                let freed = credits.freed.swap(0, Ordering::AcqRel);
                if freed > 0 && send.write_all(&freed.to_le_bytes()).await.is_err() {
                    return;
                }
                if credits.closed.load(Ordering::Acquire) || cancelled.load(Ordering::Relaxed) {
                    let _ = send.finish();
                    return;
                }
            }
        });
        Ok(FrameReader::new(recv, addr, self.settings.idle_timeout))
    }

    /// Opens a channel: requests the subpartition with `capacity` credits and forwards its
    /// buffers into a queue of that size. Each buffer carries a credit that returns to the
    /// producer when the task has processed (dropped) the buffer. A TaskManager whose job runs
    /// in a worker process answers with the worker's port, and the request goes there.
    async fn open_channel(
        self: Arc<Self>,
        channel: ChannelDeployment,
        capacity: usize,
        cancelled: Arc<AtomicBool>,
    ) -> Result<flume::Receiver<NetBuffer>, TransportError> {
        let capacity = capacity.max(1);
        let (tx, rx) = flume::bounded(capacity);
        let mut credits = Arc::new(Credits::new(capacity as u32));
        let mut frames = self
            .request(
                channel.location.data_address,
                &channel,
                credits.clone(),
                capacity,
                cancelled.clone(),
            )
            .await?;
        let plane = self.clone();
        // Received buffers are recycled: the channel holds at most `capacity` of them.
        let pool = BufferPool::new(self.settings.segment_size, capacity);
        // Reads frames into the queue; the producer's credit guarantees room, so this never
        // waits on the queue. Dropping `tx` without an end-of-partition tells the task its
        // producer is gone.
        tokio::spawn(async move {
            let mut redirects = 0;
            let result = loop {
                match frames.next(&pool).await {
                    Ok(Some((KIND_MOVED, body))) => {
                        let Ok(port) = <[u8; 2]>::try_from(&body[..]).map(u16::from_le_bytes)
                        else {
                            break Err("malformed redirect".to_string());
                        };
                        redirects += 1;
                        if redirects > MAX_REDIRECTS {
                            break Err(format!("more than {MAX_REDIRECTS} redirects"));
                        }
                        // Nothing was received on the old stream: close it and ask again.
                        credits.closed.store(true, Ordering::Release);
                        credits.notify.notify_one();
                        credits = Arc::new(Credits::new(capacity as u32));
                        let mut addr = frames.peer;
                        addr.set_port(port);
                        match plane
                            .request(addr, &channel, credits.clone(), capacity, cancelled.clone())
                            .await
                        {
                            Ok(next) => frames = next,
                            Err(e) => break Err(e.to_string()),
                        }
                    }
                    Ok(Some((KIND_DATA, body))) => {
                        let credit = CreditGuard(credits.clone());
                        let buffer = Buffer::remote(body, pool.clone(), credit);
                        if tx.send_async(NetBuffer::Data(buffer)).await.is_err() {
                            frames.stop();
                            break Ok(());
                        }
                    }
                    Ok(Some((KIND_END, _))) => {
                        let _ = tx.send_async(NetBuffer::EndOfPartition).await;
                        break Ok(());
                    }
                    Ok(Some((KIND_BARRIER, body))) => {
                        match serde_json::from_slice::<CheckpointBarrier>(&body) {
                            Ok(barrier) => {
                                let barrier = NetBuffer::Barrier(Arc::new(barrier));
                                if tx.send_async(barrier).await.is_err() {
                                    frames.stop();
                                    break Ok(());
                                }
                            }
                            Err(e) => break Err(format!("malformed checkpoint barrier: {e}")),
                        }
                    }
                    Ok(Some((kind @ (KIND_WATERMARK | KIND_STATUS), body))) => {
                        let signal = match decode_time(kind, &body[..]) {
                            Ok(signal) => signal,
                            Err(e) => break Err(e),
                        };
                        if tx.send_async(NetBuffer::Time(signal)).await.is_err() {
                            frames.stop();
                            break Ok(());
                        }
                    }
                    Ok(Some((KIND_ERROR, body))) => {
                        break Err(format!(
                            "the producer refused: {}",
                            String::from_utf8_lossy(&body)
                        ));
                    }
                    Ok(Some((kind, _))) => break Err(format!("unknown frame kind {kind}")),
                    Ok(None) => break Err("the stream ended without an end of partition".into()),
                    Err(e) => break Err(e.to_string()),
                }
            };
            if let Err(e) = result {
                let peer = frames.peer;
                warn!(%peer, partition = %channel.partition, "data channel failed: {e}");
            }
            credits.closed.store(true, Ordering::Release);
            credits.notify.notify_one();
        });
        Ok(rx)
    }
}

impl RemoteChannels for Arc<DataPlane> {
    fn open(
        &self,
        channel: &ChannelDeployment,
        capacity: usize,
        cancelled: Arc<AtomicBool>,
    ) -> Result<flume::Receiver<NetBuffer>, TaskError> {
        let plane = self.clone();
        let channel = channel.clone();
        let what = format!(
            "partition {} on {}",
            channel.partition, channel.location.data_address
        );
        // Opened on the data plane's runtime (where the connection and the channel's tasks
        // live); the task thread waits for the result.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(plane.open_channel(channel, capacity, cancelled).await);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(TransportError::Stream("the data plane shut down".into())))
            .map_err(|e| TaskError::Network(format!("cannot open {what}: {e}")))
    }
}

/// Reads frames `[u32 LE len][u8 kind][body]` from a stream.
///
/// It takes the stream's data in the chunks QUIC received it in (one lock of the connection per
/// chunk rather than per read) and copies each frame's body once, into a buffer from the
/// channel's pool (8-byte aligned, so records are accessed in place).
struct FrameReader {
    recv: quinn::RecvStream,
    /// Received bytes not yet consumed.
    pending: bytes::Bytes,
    peer: SocketAddr,
    /// The connection's idle timeout, to say how long a stalled channel was silent.
    idle_timeout: Duration,
}

impl FrameReader {
    fn new(recv: quinn::RecvStream, peer: SocketAddr, idle_timeout: Duration) -> Self {
        FrameReader {
            recv,
            pending: bytes::Bytes::new(),
            peer,
            idle_timeout,
        }
    }

    /// Tells the producer nothing more will be read.
    fn stop(&mut self) {
        let _ = self.recv.stop(quinn::VarInt::from_u32(0));
    }

    /// Waits for more bytes; `false` at the end of the stream.
    async fn fill(&mut self) -> Result<bool, TransportError> {
        while self.pending.is_empty() {
            match self.recv.read_chunk(usize::MAX, true).await {
                Ok(Some(chunk)) => self.pending = chunk.bytes,
                Ok(None) => return Ok(false),
                Err(quinn::ReadError::ConnectionLost(quinn::ConnectionError::TimedOut)) => {
                    return Err(TransportError::Stalled {
                        peer: self.peer,
                        idle: self.idle_timeout,
                    });
                }
                Err(e) => return Err(TransportError::Stream(e.to_string())),
            }
        }
        Ok(true)
    }

    /// Moves up to `want` bytes of the pending chunk out.
    fn consume(&mut self, want: usize) -> bytes::Bytes {
        let n = want.min(self.pending.len());
        self.pending.split_to(n)
    }

    /// The next frame's kind and body; `None` at a clean end of stream (between frames).
    async fn next(
        &mut self,
        pool: &BufferPool,
    ) -> Result<Option<(u8, AlignedVec)>, TransportError> {
        let truncated = || TransportError::Stream("the stream ended inside a frame".into());
        let mut header = [0u8; 5];
        let mut have = 0;
        while have < header.len() {
            if !self.fill().await? {
                return if have == 0 {
                    Ok(None)
                } else {
                    Err(truncated())
                };
            }
            let part = self.consume(header.len() - have);
            header[have..have + part.len()].copy_from_slice(&part);
            have += part.len();
        }
        let (len, kind) = decode_header(header).map_err(|reason| TransportError::Malformed {
            peer: self.peer,
            reason,
        })?;
        let mut body = pool.take(len);
        while body.len() < len {
            if !self.fill().await? {
                return Err(truncated());
            }
            let part = self.consume(len - body.len());
            body.extend_from_slice(&part);
        }
        Ok(Some((kind, body)))
    }
}

/// The frame of an event time signal: its kind and body.
fn encode_time(signal: TimeSignal) -> (u8, Vec<u8>) {
    match signal {
        TimeSignal::Watermark(wm) => (KIND_WATERMARK, wm.to_le_bytes().to_vec()),
        TimeSignal::Idle => (KIND_STATUS, vec![1]),
        TimeSignal::Active => (KIND_STATUS, vec![0]),
    }
}

/// The event time signal of a frame of `kind`; a body of the wrong size is an error.
fn decode_time(kind: u8, body: &[u8]) -> Result<TimeSignal, String> {
    match (kind, body) {
        (KIND_WATERMARK, body) => <[u8; 8]>::try_from(body)
            .map(|b| TimeSignal::Watermark(i64::from_le_bytes(b)))
            .map_err(|_| format!("malformed watermark frame of {} bytes", body.len())),
        (KIND_STATUS, [1]) => Ok(TimeSignal::Idle),
        (KIND_STATUS, [0]) => Ok(TimeSignal::Active),
        _ => Err(format!(
            "malformed event time frame (kind {kind}, {} bytes)",
            body.len()
        )),
    }
}

/// Checks a frame header: a known kind and a length within [`MAX_FRAME`].
pub fn decode_header(header: [u8; 5]) -> Result<(usize, u8), String> {
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let kind = header[4];
    if !(KIND_DATA..=KIND_MOVED).contains(&kind) {
        return Err(format!("unknown frame kind {kind}"));
    }
    if len > MAX_FRAME {
        return Err(format!(
            "frame of {len} bytes exceeds the limit of {MAX_FRAME}"
        ));
    }
    Ok((len, kind))
}

/// Encodes a frame header.
pub(crate) fn encode_header(len: usize, kind: u8) -> [u8; 5] {
    let l = (len as u32).to_le_bytes();
    [l[0], l[1], l[2], l[3], kind]
}

/// Accepts data connections for good. A connection waits for one of the
/// `security.handshake.max-concurrent` handshake turns, then has `security.handshake.timeout`
/// for the QUIC handshake and the proof of the secret; only then is it served.
async fn accept_loop(plane: Arc<DataPlane>, registry: Arc<PartitionRegistry>) {
    let turns = Arc::new(tokio::sync::Semaphore::new(
        plane.settings.max_handshakes.max(1) as usize,
    ));
    while let Some(incoming) = plane.endpoint.accept().await {
        let (plane, registry, turns) = (plane.clone(), registry.clone(), turns.clone());
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            let Ok(turn) = turns.acquire_owned().await else {
                return;
            };
            let timeout = plane.settings.handshake_timeout;
            let max_mtu = peer_upper_bound(plane.settings.max_mtu, remote);
            let connecting = match incoming.accept_with(Arc::new(plane.configs.server_for(max_mtu)))
            {
                Ok(connecting) => connecting,
                Err(e) => {
                    debug!(%remote, error = %e, "data connection attempt refused");
                    return;
                }
            };
            let connection = match tokio::time::timeout(timeout, connecting).await {
                Ok(Ok(connection)) => connection,
                Ok(Err(e)) => {
                    debug!(%remote, error = %e, "data connection attempt failed");
                    return;
                }
                Err(_) => {
                    debug!(%remote, "data connection handshake timed out");
                    return;
                }
            };
            let authenticated = authenticate(&plane, &connection, timeout).await;
            drop(turn);
            let result = match authenticated {
                Ok(()) => serve_connection(&plane, connection, registry).await,
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                warn!(%remote, error = %e, "data connection closed");
            }
        });
    }
}

/// Checks the peer's proof of the secret (the first stream, within `timeout`) and sends ours;
/// then opens the connection's windows, which until now held only room for the proof. A peer
/// that fails is disconnected.
async fn authenticate(
    plane: &DataPlane,
    connection: &quinn::Connection,
    timeout: Duration,
) -> Result<(), TransportError> {
    let peer = connection.remote_address();
    let ekm = security::export_quic(connection).map_err(TransportError::Stream)?;
    let auth = async {
        let (mut send, mut recv) = connection
            .accept_bi()
            .await
            .map_err(|e| TransportError::Stream(e.to_string()))?;
        let mut proof = [0u8; 32];
        recv.read_exact(&mut proof)
            .await
            .map_err(|_| TransportError::Authentication(peer))?;
        if !plane.secret.verify(&ekm, b"data-client", &proof) {
            return Err(TransportError::Authentication(peer));
        }
        connection.set_receive_window(quinn::VarInt::from_u32(CONNECTION_WINDOW));
        connection
            .set_max_concurrent_bi_streams(quinn::VarInt::from_u32(MAX_CHANNELS_PER_CONNECTION));
        send.write_all(&plane.secret.proof(&ekm, b"data-server"))
            .await
            .map_err(|e| TransportError::Stream(e.to_string()))?;
        let _ = send.finish();
        Ok(())
    };
    match tokio::time::timeout(timeout, auth).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            connection.close(quinn::VarInt::from_u32(1), b"authentication failed");
            Err(e)
        }
        Err(_) => {
            connection.close(quinn::VarInt::from_u32(1), b"authentication timed out");
            Err(TransportError::Authentication(peer))
        }
    }
}

/// Serves an authenticated connection's channels until it closes.
async fn serve_connection(
    plane: &DataPlane,
    connection: quinn::Connection,
    registry: Arc<PartitionRegistry>,
) -> Result<(), TransportError> {
    let peer = connection.remote_address();
    loop {
        let (send, recv) = match connection.accept_bi().await {
            Ok(streams) => streams,
            Err(quinn::ConnectionError::ApplicationClosed(_))
            | Err(quinn::ConnectionError::LocallyClosed) => return Ok(()),
            Err(e) => return Err(TransportError::Stream(e.to_string())),
        };
        let registry = registry.clone();
        let wait = plane.settings.partition_wait;
        let idle = plane.settings.idle_timeout;
        tokio::spawn(async move {
            if let Err(e) = serve_channel(send, recv, registry, wait, idle, peer).await {
                warn!(%peer, error = %e, "serving a channel failed");
            }
        });
    }
}

async fn serve_channel(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    registry: Arc<PartitionRegistry>,
    wait: Duration,
    idle: Duration,
    peer: SocketAddr,
) -> Result<(), TransportError> {
    let stream_err = |e: &dyn std::fmt::Display| TransportError::Stream(e.to_string());
    // A write that fails because the consumer's side went silent says so, like a reader does.
    let write_err = |e: quinn::WriteError| match e {
        quinn::WriteError::ConnectionLost(quinn::ConnectionError::TimedOut) => {
            TransportError::Stalled { peer, idle }
        }
        e => TransportError::Stream(e.to_string()),
    };
    let mut len = [0u8; 4];
    recv.read_exact(&mut len)
        .await
        .map_err(|e| stream_err(&e))?;
    let len = u32::from_le_bytes(len) as usize;
    if len > 64 * 1024 {
        return Err(TransportError::Malformed {
            peer,
            reason: format!("partition request of {len} bytes"),
        });
    }
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body)
        .await
        .map_err(|e| stream_err(&e))?;
    let request: PartitionRequest =
        serde_json::from_slice(&body).map_err(|e| TransportError::Malformed {
            peer,
            reason: format!("bad partition request: {e}"),
        })?;
    let rx = {
        let registry = registry.clone();
        let (partition, sub) = (request.partition, request.subpartition);
        tokio::task::spawn_blocking(move || registry.take(partition, sub, false, wait, &|| false))
            .await
            .map_err(|e| stream_err(&e))?
    };
    let rx = match rx {
        Ok(rx) => rx,
        Err(TakeError::Moved(_, port)) => {
            let _ = send.write_all(&encode_header(2, KIND_MOVED)).await;
            let _ = send.write_all(&port.to_le_bytes()).await;
            let _ = send.finish();
            return Ok(());
        }
        Err(e) => {
            let msg = e.to_string();
            let _ = send.write_all(&encode_header(msg.len(), KIND_ERROR)).await;
            let _ = send.write_all(msg.as_bytes()).await;
            let _ = send.finish();
            return Err(TransportError::Stream(msg));
        }
    };
    // The consumer's credit: buffers it has room for. It announces freed ones as u32 counts.
    let credit = Arc::new(tokio::sync::Semaphore::new(
        request.credit.min(1 << 16) as usize
    ));
    let granted = credit.clone();
    tokio::spawn(async move {
        let mut n = [0u8; 4];
        while recv.read_exact(&mut n).await.is_ok() {
            let more = u32::from_le_bytes(n).min(1 << 16) as usize;
            if granted.available_permits() + more > 1 << 20 {
                warn!(%peer, "a consumer announced more credit than it can have; closing the channel");
                granted.close();
                return;
            }
            granted.add_permits(more);
        }
        // The consumer finished its side (it is done or gone); nothing more will be read.
        granted.close();
    });
    loop {
        // Dropping `rx` on a failed write tells the producer its consumer is gone.
        match rx.recv_async().await {
            Ok(NetBuffer::Data(mut buf)) => {
                match credit.acquire().await {
                    Ok(permit) => permit.forget(),
                    Err(_) => {
                        return Err(TransportError::Stream(
                            "the consumer closed the channel".into(),
                        ));
                    }
                }
                // The buffer itself goes to QUIC, not a copy: its memory returns to the
                // producer's pool once the peer has acknowledged it. It stops counting against
                // the pool now, as it would once written to a socket.
                buf.end_loan();
                let header = bytes::Bytes::copy_from_slice(&encode_header(buf.len(), KIND_DATA));
                send.write_all_chunks(&mut [header, bytes::Bytes::from_owner(buf)])
                    .await
                    .map_err(write_err)?;
            }
            Ok(NetBuffer::Batch(_)) => {
                // A producer sends typed batches only to a queue a local consumer took.
                return Err(TransportError::Stream(
                    "a batch for a consumer in the producer's TaskManager reached the transport"
                        .into(),
                ));
            }
            Ok(NetBuffer::Barrier(barrier)) => {
                // Barriers need no credit: they are rare and tiny, and the consumer's reader
                // queues them without holding a buffer.
                let body = serde_json::to_vec(&*barrier)
                    .map_err(|e| TransportError::Stream(format!("cannot encode a barrier: {e}")))?;
                send.write_all(&encode_header(body.len(), KIND_BARRIER))
                    .await
                    .map_err(write_err)?;
                send.write_all(&body).await.map_err(write_err)?;
            }
            Ok(NetBuffer::Time(signal)) => {
                // Like barriers, event time needs no credit.
                let (kind, body) = encode_time(signal);
                send.write_all(&encode_header(body.len(), kind))
                    .await
                    .map_err(write_err)?;
                send.write_all(&body).await.map_err(write_err)?;
            }
            Ok(NetBuffer::EndOfPartition) => {
                send.write_all(&encode_header(0, KIND_END))
                    .await
                    .map_err(write_err)?;
                let _ = send.finish();
                // Wait until the consumer has everything before the stream is dropped.
                let _ = send.stopped().await;
                return Ok(());
            }
            Err(_) => {
                // The producer failed or was cancelled: reset, so the consumer sees a broken channel.
                let _ = send.reset(quinn::VarInt::from_u32(2));
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn event_time_frames_round_trip_and_malformed_ones_are_refused() {
        for signal in [
            TimeSignal::Watermark(i64::MIN),
            TimeSignal::Watermark(1_700_000_000_123),
            TimeSignal::Idle,
            TimeSignal::Active,
        ] {
            let (kind, body) = encode_time(signal);
            assert_eq!(decode_time(kind, &body), Ok(signal));
        }
        assert!(
            decode_time(KIND_WATERMARK, &[1, 2, 3])
                .unwrap_err()
                .contains("3 bytes")
        );
        assert!(decode_time(KIND_STATUS, &[7]).is_err());
        assert!(decode_time(KIND_STATUS, &[]).is_err());
    }

    #[test]
    fn the_datagram_bound_follows_the_route_unless_fixed() {
        // Loopback and jumbo frames: the route's MTU less the headers, at most 65000.
        assert_eq!(mtu_upper_bound(MtuLimit::Auto, Some(65535), false), 65000);
        assert_eq!(mtu_upper_bound(MtuLimit::Auto, Some(9000), false), 8972);
        assert_eq!(mtu_upper_bound(MtuLimit::Auto, Some(9000), true), 8952);
        // Ethernet, a tunnel, or a route the kernel could not tell: QUIC's safe default.
        for route in [Some(1500), Some(1280), Some(576), None] {
            assert_eq!(mtu_upper_bound(MtuLimit::Auto, route, false), DEFAULT_MTU);
        }
        // A number is one bound for every peer, whatever the route.
        assert_eq!(
            mtu_upper_bound(MtuLimit::Max(1452), Some(65536), false),
            1452
        );
        assert_eq!(
            mtu_upper_bound(MtuLimit::Max(9000), Some(1500), false),
            9000
        );
    }

    #[test]
    fn the_kernel_reports_loopbacks_mtu_for_a_local_peer() {
        // Linux's loopback device has a 64 KiB MTU, which the route reports as the largest IP
        // packet (65535); a peer on another host gets its interface's.
        let mtu = route_mtu("127.0.0.1:9".parse().unwrap()).expect("route MTU of 127.0.0.1");
        assert_eq!(mtu, 65535, "loopback's MTU");
        assert_eq!(
            peer_upper_bound(MtuLimit::Auto, "127.0.0.1:9".parse().unwrap()),
            LARGEST_MTU
        );
    }

    proptest! {
        #[test]
        fn header_round_trips_and_garbage_is_rejected(len in 0usize..MAX_FRAME, kind in 0u8..=255) {
            match decode_header(encode_header(len, kind)) {
                Ok((l, k)) => { prop_assert_eq!(l, len); prop_assert_eq!(k, kind); }
                Err(_) => prop_assert!(!(KIND_DATA..=KIND_MOVED).contains(&kind)),
            }
        }
    }

    #[test]
    fn oversized_frames_are_rejected() {
        let mut h = encode_header(0, KIND_DATA);
        h[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_header(h).unwrap_err().contains("exceeds"));
    }
}
