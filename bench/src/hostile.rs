//! What strangers on the network cost a cluster: a JobManager and a TaskManager run as real
//! processes (`Cluster`), this process plays the attackers and reads the victims' RSS from
//! `/proc`. Three attacks, each measured during and after:
//!
//! 1. `connections` slow REST connections (a request line and one header, then silence): the
//!    JobManager's RSS and the latency and status of `GET /overview` while they are held, after
//!    the header-read timeout had time to act (still held by the attacker), and after they are
//!    dropped;
//! 2. 16 TLS connections to the RPC port, each announcing a 64 MiB "proof" and sending it;
//! 3. 10 QUIC connections to the TaskManager's data port that leave the proof stream empty and
//!    push data on as many other streams as they may open.
//!
//! Run it against another engine with `--sluice-bin` (e.g. a build of an older commit) for a
//! before/after comparison; the attackers speak only the wire protocols, which are the same.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cluster::Cluster;
use crate::procs;

/// Raises the soft limit of open files to the hard limit: the attacker holds one descriptor per
/// connection, and the JobManager it starts inherits the limit.
fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn rss(pid: u32) -> u64 {
    procs::status_bytes(pid, "VmRSS").unwrap_or(0)
}

/// `GET /overview` on a fresh connection: the status (0: no answer within 10 s) and the time.
async fn overview(addr: SocketAddr) -> (u16, Duration) {
    let start = Instant::now();
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(b"GET /overview HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.ok()?;
        String::from_utf8_lossy(&answer)
            .split(' ')
            .nth(1)?
            .parse::<u16>()
            .ok()
    };
    let status = tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(0);
    (status, start.elapsed())
}

/// How many of `streams` the server has closed (a read sees the end or an error at once).
fn closed_by_server(streams: &[TcpStream]) -> usize {
    let mut buf = [0u8; 512];
    streams
        .iter()
        .filter(|s| match s.try_read(&mut buf) {
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        })
        .count()
}

fn row(what: &str, rss: u64, answer: Option<(u16, Duration)>, note: &str) {
    let answer = answer
        .map(|(status, t)| format!("{status} in {:.1} ms", t.as_secs_f64() * 1e3))
        .unwrap_or_else(|| "-".into());
    println!("| {what} | {:.0} | {answer} | {note} |", mib(rss));
}

/// Runs the three attacks against a cluster of `bin`.
pub fn run(bin: &Path, connections: usize) -> Result<()> {
    let limit = raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let cluster = Cluster::start(bin, 1, "")?;
    let jm = cluster.jobmanager_pid();
    let tm = cluster.taskmanager_pids()[0];
    let rest: SocketAddr = ([127, 0, 0, 1], cluster.rest_port()).into();
    let rpc: SocketAddr = ([127, 0, 0, 1], cluster.rpc_port).into();
    let tms = cluster.get("/taskmanagers")?;
    let tm_id = tms["taskmanagers"][0]["id"]
        .as_str()
        .context("a TaskManager id")?
        .to_string();
    let data_port = cluster.get(&format!("/taskmanagers/{tm_id}"))?["dataPort"]
        .as_u64()
        .context("the TaskManager's dataPort")?;
    let data: SocketAddr = ([127, 0, 0, 1], data_port as u16).into();
    println!("engine: {}; open-file limit {limit}", bin.display());

    // 1. Slow REST connections.
    println!("\n### {connections} slow REST connections (JobManager)\n");
    println!("| when | JobManager RSS (MiB) | GET /overview | note |");
    println!("|---|---|---|---|");
    row(
        "before",
        rss(jm),
        Some(rt.block_on(overview(rest))),
        "no attacker",
    );
    let peak = procs::peak_rss(vec![jm]);
    let (slow, refused) = rt.block_on(async {
        let mut slow = Vec::with_capacity(connections);
        let mut refused = 0;
        for _ in 0..connections {
            match TcpStream::connect(rest).await {
                Ok(mut s) => {
                    let _ = s
                        .write_all(b"GET /overview HTTP/1.1\r\nHost: bench\r\n")
                        .await;
                    slow.push(s);
                }
                Err(_) => refused += 1,
            }
        }
        (slow, refused)
    });
    let held = rt.block_on(async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        overview(rest).await
    });
    let closed = closed_by_server(&slow);
    row(
        "all opened (+1 s)",
        rss(jm),
        Some(held),
        &format!(
            "{} connected, {refused} refused at connect, {closed} already closed by the server",
            slow.len()
        ),
    );
    let later = rt.block_on(async {
        tokio::time::sleep(Duration::from_secs(15)).await;
        overview(rest).await
    });
    let closed = closed_by_server(&slow);
    let peak = peak.finish().get(&jm).copied().unwrap_or(0);
    row(
        "15 s later, attacker still holding",
        rss(jm),
        Some(later),
        &format!(
            "{closed} closed by the server; peak RSS so far {:.0} MiB",
            mib(peak)
        ),
    );
    drop(slow);
    let after = rt.block_on(async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        overview(rest).await
    });
    row("3 s after the attacker closed", rss(jm), Some(after), "");

    // 2. Oversized pre-authentication proofs.
    println!("\n### 16 pre-authentication 64 MiB proofs (JobManager RPC port)\n");
    println!("| when | JobManager RSS (MiB) | GET /overview | note |");
    println!("|---|---|---|---|");
    row("before", rss(jm), None, "");
    let peak = procs::peak_rss(vec![jm]);
    let sent: Vec<u64> = rt.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|_| tokio::spawn(oversized_proof(rpc)))
            .collect();
        let mut sent = Vec::new();
        for t in tasks {
            sent.push(t.await.unwrap_or(0));
        }
        sent
    });
    let peak = peak.finish().get(&jm).copied().unwrap_or(0);
    row(
        "peak while sending",
        peak,
        None,
        &format!(
            "bytes the JobManager took before closing: {} MiB in all",
            sent.iter().sum::<u64>() >> 20
        ),
    );
    std::thread::sleep(Duration::from_secs(2));
    row("2 s after", rss(jm), None, "");

    // 3. Unauthenticated QUIC connections pushing data.
    println!("\n### 10 unauthenticated QUIC connections pushing data (TaskManager data port)\n");
    println!("| when | TaskManager RSS (MiB) | GET /overview | note |");
    println!("|---|---|---|---|");
    row("before", rss(tm), None, "");
    let peak = procs::peak_rss(vec![tm]);
    let pushed: Vec<(u64, usize)> = rt.block_on(async {
        let tasks: Vec<_> = (0..10).map(|_| tokio::spawn(quic_push(data))).collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.ok().and_then(Result::ok).unwrap_or((0, 0)));
        }
        out
    });
    let peak = peak.finish().get(&tm).copied().unwrap_or(0);
    let bytes: u64 = pushed.iter().map(|p| p.0).sum();
    let streams: usize = pushed.iter().map(|p| p.1).sum();
    row(
        "peak while pushing",
        peak,
        None,
        &format!(
            "the TaskManager accepted {:.1} MiB on {streams} streams before closing",
            mib(bytes)
        ),
    );
    std::thread::sleep(Duration::from_secs(2));
    row("2 s after", rss(tm), None, "");
    Ok(())
}

/// A TLS session to the RPC port, a frame header announcing 64 MiB, then as much of it as the
/// JobManager takes within 15 s; the bytes written.
async fn oversized_proof(rpc: SocketAddr) -> u64 {
    let attempt = async {
        let config = sluice::security::client_tls(sluice::rpc::transport::ALPN).ok()?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(rpc).await.ok()?;
        let name = rustls::pki_types::ServerName::try_from("sluice").ok()?;
        let mut tls = connector.connect(name, tcp).await.ok()?;
        let mut sent = 0u64;
        if tls.write_u32(64 << 20).await.is_err() {
            return Some(sent);
        }
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..64 {
            if tls.write_all(&chunk).await.is_err() {
                break;
            }
            sent += chunk.len() as u64;
        }
        let _ = tls.flush().await;
        Some(sent)
    };
    tokio::time::timeout(Duration::from_secs(15), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// A QUIC connection that opens the first stream without a proof, then pushes 1 MiB chunks on
/// up to 64 more streams until the TaskManager closes the connection (or 15 s pass): the bytes
/// the TaskManager's flow control let through and the streams it let open.
async fn quic_push(data: SocketAddr) -> Result<(u64, usize)> {
    let tls = sluice::security::client_tls(sluice::network::transport::ALPN)?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut endpoint = quinn::Endpoint::client(([127, 0, 0, 1], 0).into())?;
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let connection = endpoint.connect(data, "sluice")?.await?;
    let (_proof, _) = connection.open_bi().await?;
    let push = async {
        let mut writers = Vec::new();
        for _ in 0..64 {
            let Ok((mut send, _recv)) = connection.open_bi().await else {
                break;
            };
            writers.push(tokio::spawn(async move {
                let chunk = bytes::Bytes::from(vec![1u8; 1 << 20]);
                let mut sent = 0u64;
                while let Ok(n) = send.write(&chunk).await {
                    sent += n as u64;
                }
                sent
            }));
        }
        let streams = writers.len();
        let mut sent = 0;
        for w in writers {
            sent += w.await.unwrap_or(0);
        }
        (sent, streams)
    };
    let result = tokio::select! {
        r = push => r,
        _ = tokio::time::sleep(Duration::from_secs(15)) => (0, 0),
    };
    let _ = tokio::time::timeout(Duration::from_secs(15), connection.closed()).await;
    Ok(result)
}
