//! The ceilings the data plane is compared with: raw TCP over loopback, and a plain quinn bulk
//! transfer with quinn's defaults and tuned for loopback bulk transfer (64 KiB datagrams, no GSO,
//! big windows: the settings an earlier measurement found fastest, listed in
//! `bench/README.md`, row 1c).
//!
//! The sender is this process; the receiver is this binary re-executed with the hidden
//! `receive` subcommand, so the two ends run in separate processes as two TaskManagers do. The
//! receiver prints its port on its first stdout line, counts what arrives until the sender
//! finishes, and answers with the count as a `u64`; the sender's clock runs from the first
//! byte written (connection already established) to that answer.
//!
//! The tuned QUIC ends ask for 8 MiB socket buffers, as sluice's data port does. Without them
//! the receiver's default ~208 KiB buffer (three 64 KiB datagrams) overflowed whenever its
//! thread was descheduled: a quarter of the datagrams were lost, Cubic cut its window thousands
//! of times a second, and a transfer ran at 0.9–1.1 GB/s or, when the scheduler happened to
//! keep the receiver running, at twice that: the bimodal baseline of the earlier runs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;

use crate::procs::{self, Child};

/// Size of one write: 1 MiB.
const CHUNK: usize = 1 << 20;
/// Socket buffers the tuned ends ask for, as sluice's data port does.
const SOCKET_BUFFER: usize = 8 * 1024 * 1024;
/// ALPN of the bench's QUIC connections.
const ALPN: &[u8] = b"sluice-bench";

/// Which transport a baseline uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// TCP over loopback.
    Tcp,
    /// quinn 0.11 with its default transport settings (aws-lc-rs).
    QuicDefault,
    /// quinn tuned for loopback: 64 KiB datagrams without GSO, big windows.
    QuicTuned,
    /// As tuned, but the sender reaches the large MTU by MTU discovery (upper bound 65000)
    /// instead of a fixed initial MTU: what a QUIC *server* can use, whose initial MTU must
    /// stay small for the handshake. sluice's producers are the servers of their connections.
    QuicDiscovery,
}

/// One baseline transfer: bytes moved and the time it took.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Bytes the receiver counted.
    pub bytes: u64,
    /// From the first write to the receiver's answer.
    pub elapsed: Duration,
    /// CPU seconds (user + system) the sender and the receiver process spent in that time.
    pub cpu_seconds: f64,
    /// The sender's path statistics, for the QUIC transports.
    pub quic: Option<QuicPath>,
}

/// What the QUIC sender's connection saw on its path during a transfer.
#[derive(Clone, Copy, Debug)]
pub struct QuicPath {
    /// Packets sent, including the handshake's.
    pub sent_packets: u64,
    /// Packets declared lost: on loopback, datagrams the receiver's socket buffer dropped.
    pub lost_packets: u64,
    /// Times the congestion controller cut its window.
    pub congestion_events: u64,
    /// The datagram size at the end.
    pub mtu: u16,
}

impl std::fmt::Display for Transfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.2} GB/s ({:.2} GB in {:.2} s; {:.2} cores busy, {:.2} GB per CPU second",
            self.gb_per_s(),
            self.bytes as f64 / 1e9,
            self.elapsed.as_secs_f64(),
            self.cores(),
            self.gb_per_cpu_s()
        )?;
        if let Some(q) = &self.quic {
            write!(
                f,
                "; {} of {} packets lost, {} congestion events, MTU {}",
                q.lost_packets, q.sent_packets, q.congestion_events, q.mtu
            )?;
        }
        write!(f, ")")
    }
}

impl Transfer {
    /// Throughput in GB/s (10^9 bytes per second).
    pub fn gb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e9
    }

    /// Cores the two processes kept busy on average.
    pub fn cores(&self) -> f64 {
        self.cpu_seconds / self.elapsed.as_secs_f64()
    }

    /// GB moved per CPU second of the two processes.
    pub fn gb_per_cpu_s(&self) -> f64 {
        self.bytes as f64 / self.cpu_seconds / 1e9
    }
}

/// Sends for `duration` to a freshly started receiver process.
pub fn measure(transport: Transport, duration: Duration) -> Result<Transfer> {
    let exe = std::env::current_exe().context("the bench binary's path")?;
    let mut cmd = Command::new(exe);
    cmd.arg("receive")
        .arg(match transport {
            Transport::Tcp => "tcp",
            Transport::QuicDefault => "quic-default",
            Transport::QuicTuned => "quic-tuned",
            Transport::QuicDiscovery => "quic-discovery",
        })
        .env("RUST_LOG", "warn");
    let (mut child, stdout) = Child::spawn_piped("receiver", cmd)?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("read the receiver's port")?;
    let port: u16 = line
        .trim()
        .parse()
        .with_context(|| format!("receiver printed {line:?} instead of its port"))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let transfer = match transport {
        Transport::Tcp => send_tcp(addr, duration, child.pid())?,
        Transport::QuicDefault | Transport::QuicTuned | Transport::QuicDiscovery => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("tokio runtime")?;
            runtime.block_on(send_quic(addr, transport, duration, child.pid()))?
        }
    };
    child.wait_exit(Duration::from_secs(10))?;
    Ok(transfer)
}

/// CPU seconds of this process and the receiver so far.
fn both_cpu(receiver: u32) -> Result<f64> {
    Ok(procs::cpu_seconds(std::process::id())? + procs::cpu_seconds(receiver)?)
}

fn send_tcp(addr: SocketAddr, duration: Duration, receiver: u32) -> Result<Transfer> {
    let mut stream = TcpStream::connect(addr).context("connect to the TCP receiver")?;
    let chunk = vec![0xa5u8; CHUNK];
    let cpu = both_cpu(receiver)?;
    let start = Instant::now();
    while start.elapsed() < duration {
        stream.write_all(&chunk).context("TCP write")?;
    }
    stream
        .shutdown(std::net::Shutdown::Write)
        .context("TCP shutdown")?;
    let mut answer = [0u8; 8];
    stream
        .read_exact(&mut answer)
        .context("read the receiver's count")?;
    let elapsed = start.elapsed();
    Ok(Transfer {
        bytes: u64::from_le_bytes(answer),
        elapsed,
        cpu_seconds: both_cpu(receiver)? - cpu,
        quic: None,
    })
}

/// The receiver's side: `sluice-bench receive <transport>`.
pub fn receive(transport: Transport) -> Result<()> {
    match transport {
        Transport::Tcp => receive_tcp(),
        Transport::QuicDefault | Transport::QuicTuned | Transport::QuicDiscovery => {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("tokio runtime")?
                .block_on(receive_quic(transport))
        }
    }
}

fn announce(port: u16) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{port}").context("print the port")?;
    out.flush().context("flush stdout")
}

fn receive_tcp() -> Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").context("bind TCP")?;
    announce(listener.local_addr().context("local address")?.port())?;
    let (mut stream, _) = listener.accept().context("accept")?;
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = stream.read(&mut buf).context("TCP read")?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    stream
        .write_all(&total.to_le_bytes())
        .context("answer the count")?;
    Ok(())
}

/// Settings on both ends of the tuned configuration (`bench/README.md`, row 1c).
fn endpoint_config(transport: Transport) -> Result<quinn::EndpointConfig> {
    let mut config = quinn::EndpointConfig::default();
    if transport != Transport::QuicDefault {
        config
            .max_udp_payload_size(65527)
            .context("max_udp_payload_size")?;
    }
    Ok(config)
}

/// quinn's defaults, or the tuned windows; `sender` adds the sender-only settings: a fixed
/// 65000-byte MTU (MTU discovery never climbs past 1452 on loopback), no GSO (batched 64 KiB
/// datagrams exceed what one UDP send takes) and a congestion window far above the MTU (one
/// below it never sends). The receiver keeps the default initial MTU: a server's above ~3600
/// stalls the handshake on the anti-amplification limit.
fn transport_config(transport: Transport, sender: bool) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    if transport != Transport::QuicDefault {
        t.stream_receive_window(quinn::VarInt::from_u32(16 << 20));
        t.send_window(64 << 20);
        if sender {
            if transport == Transport::QuicTuned {
                t.initial_mtu(65000);
                t.mtu_discovery_config(None);
            } else {
                let mut discovery = quinn::MtuDiscoveryConfig::default();
                discovery.upper_bound(65000);
                t.mtu_discovery_config(Some(discovery));
            }
            t.enable_segmentation_offload(false);
            let mut cubic = quinn::congestion::CubicConfig::default();
            cubic.initial_window(16 << 20);
            t.congestion_controller_factory(Arc::new(cubic));
        }
    }
    t
}

fn quic_endpoint(
    transport: Transport,
    server: Option<quinn::ServerConfig>,
) -> Result<quinn::Endpoint> {
    let socket = UdpSocket::bind("127.0.0.1:0").context("bind UDP")?;
    if transport != Transport::QuicDefault {
        let state =
            quinn::udp::UdpSocketState::new((&socket).into()).context("UDP socket state")?;
        state
            .set_recv_buffer_size((&socket).into(), SOCKET_BUFFER)
            .context("SO_RCVBUF")?;
        state
            .set_send_buffer_size((&socket).into(), SOCKET_BUFFER)
            .context("SO_SNDBUF")?;
    }
    quinn::Endpoint::new(
        endpoint_config(transport)?,
        server,
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .context("QUIC endpoint")
}

async fn receive_quic(transport: Transport) -> Result<()> {
    let tls = sluice::security::server_tls(ALPN)?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport_config(transport, false)));
    let endpoint = quic_endpoint(transport, Some(server))?;
    announce(endpoint.local_addr().context("local address")?.port())?;
    let incoming = endpoint.accept().await.context("endpoint closed")?;
    let conn = incoming.await.context("QUIC handshake")?;
    let (mut send, mut recv) = conn.accept_bi().await.context("accept stream")?;
    let mut total = 0u64;
    while let Some(chunk) = recv
        .read_chunk(usize::MAX, true)
        .await
        .context("QUIC read")?
    {
        total += chunk.bytes.len() as u64;
    }
    send.write_all(&total.to_le_bytes())
        .await
        .context("answer the count")?;
    send.finish().context("finish")?;
    // The sender closes the connection once it has the answer.
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await;
    endpoint.wait_idle().await;
    Ok(())
}

async fn send_quic(
    addr: SocketAddr,
    transport: Transport,
    duration: Duration,
    receiver: u32,
) -> Result<Transfer> {
    let tls = sluice::security::client_tls(ALPN)?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut client = quinn::ClientConfig::new(Arc::new(crypto));
    client.transport_config(Arc::new(transport_config(transport, true)));
    let mut endpoint = quic_endpoint(transport, None)?;
    endpoint.set_default_client_config(client);
    let conn = endpoint
        .connect(addr, "sluice")
        .context("connect")?
        .await
        .context("QUIC handshake")?;
    let (mut send, mut recv) = conn.open_bi().await.context("open stream")?;
    // write_chunk hands quinn a reference-counted buffer: no copy on the sending side.
    let chunk = Bytes::from(vec![0xa5u8; CHUNK]);
    let cpu = both_cpu(receiver)?;
    let start = Instant::now();
    while start.elapsed() < duration {
        send.write_chunk(chunk.clone())
            .await
            .context("QUIC write")?;
    }
    send.finish().context("finish")?;
    let mut answer = [0u8; 8];
    recv.read_exact(&mut answer)
        .await
        .context("read the receiver's count")?;
    let elapsed = start.elapsed();
    let cpu_seconds = both_cpu(receiver)? - cpu;
    let path = conn.stats().path;
    conn.close(quinn::VarInt::from_u32(0), b"done");
    endpoint.wait_idle().await;
    let bytes = u64::from_le_bytes(answer);
    if bytes == 0 {
        bail!("the QUIC receiver counted no bytes");
    }
    Ok(Transfer {
        bytes,
        elapsed,
        cpu_seconds,
        quic: Some(QuicPath {
            sent_packets: path.sent_packets,
            lost_packets: path.lost_packets,
            congestion_events: path.congestion_events,
            mtu: path.current_mtu,
        }),
    })
}
