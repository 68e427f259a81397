//! The control-plane connection: TCP, TLS 1.3, a mutual proof of the cluster secret, then
//! length-prefixed JSON messages (`[u32 big-endian length][JSON]`). Frames are capped so that a
//! garbage length cannot make a process allocate gigabytes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::security::{self, ClusterSecret};

/// ALPN protocol id of the control plane.
pub const ALPN: &[u8] = b"sluice-rpc/1";
/// The largest control frame accepted.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;
/// How long the TLS handshake and the secret proofs may take when connecting (the accepting side
/// is given its `security.handshake.timeout`).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a control connection failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// The socket failed.
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer did not prove it knows the cluster secret.
    #[error(
        "the peer did not prove knowledge of the cluster secret (wrong security.cluster.secret?)"
    )]
    AuthenticationFailed,
    /// TLS failed.
    #[error("TLS error: {0}")]
    Tls(String),
    /// A frame announced more bytes than allowed: (announced, limit).
    #[error("frame of {0} bytes exceeds the limit of {1} bytes")]
    FrameTooLarge(usize, usize),
    /// A frame did not decode as the expected message.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The handshake took too long.
    #[error("handshake timed out")]
    Timeout,
}

impl RpcError {
    /// Whether trying again later may help (the peer may come back).
    pub fn is_retryable(&self) -> bool {
        matches!(self, RpcError::Io(_) | RpcError::Timeout)
    }
}

/// Reads one frame.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Vec<u8>, RpcError> {
    read_frame_of_at_most(r, MAX_FRAME).await
}

/// Reads one frame of at most `limit` bytes; a longer announced length is refused before
/// anything is allocated for it.
async fn read_frame_of_at_most<R: AsyncRead + Unpin>(
    r: &mut R,
    limit: usize,
) -> Result<Vec<u8>, RpcError> {
    let len = r.read_u32().await? as usize;
    if len > limit {
        return Err(RpcError::FrameTooLarge(len, limit));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await?;
    Ok(buf)
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> Result<(), RpcError> {
    if bytes.len() > MAX_FRAME {
        return Err(RpcError::FrameTooLarge(bytes.len(), MAX_FRAME));
    }
    w.write_u32(bytes.len() as u32).await?;
    w.write_all(bytes).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one JSON message.
pub async fn recv<R: AsyncRead + Unpin, T: DeserializeOwned>(r: &mut R) -> Result<T, RpcError> {
    let frame = read_frame(r).await?;
    serde_json::from_slice(&frame).map_err(|e| RpcError::Malformed(e.to_string()))
}

/// Writes one JSON message.
pub async fn send<W: AsyncWrite + Unpin, T: Serialize>(w: &mut W, msg: &T) -> Result<(), RpcError> {
    let bytes = serde_json::to_vec(msg).map_err(|e| RpcError::Malformed(e.to_string()))?;
    write_frame(w, &bytes).await
}

/// An authenticated control connection.
pub type Stream<S> = tokio_rustls::TlsStream<S>;

async fn prove<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    secret: &ClusterSecret,
    ekm: [u8; 32],
    mine: &[u8],
    theirs: &[u8],
    i_speak_first: bool,
) -> Result<(), RpcError> {
    let my_proof = secret.proof(&ekm, mine);
    if i_speak_first {
        write_frame(stream, &my_proof).await?;
    }
    // Before the peer is authenticated it may make us allocate no more than a proof's size.
    let their_proof = read_frame_of_at_most(stream, ClusterSecret::PROOF_LEN).await?;
    if !secret.verify(&ekm, theirs, &their_proof) {
        // An empty frame tells the peer its proof failed, so it can stop retrying; it reveals
        // nothing about the secret.
        if !i_speak_first {
            let _ = write_frame(stream, &[]).await;
        }
        return Err(RpcError::AuthenticationFailed);
    }
    if !i_speak_first {
        write_frame(stream, &my_proof).await?;
    }
    Ok(())
}

/// The session's exported keying material the secret proofs are bound to.
fn keying_material<D>(conn: &rustls::ConnectionCommon<D>) -> Result<[u8; 32], RpcError> {
    let mut out = [0u8; 32];
    conn.export_keying_material(&mut out, security::EXPORTER_LABEL, None)
        .map_err(|e| RpcError::Tls(e.to_string()))?;
    Ok(out)
}

/// Connects to a control endpoint and proves the cluster secret (the server proves it back).
pub async fn connect(
    addr: SocketAddr,
    secret: &ClusterSecret,
) -> Result<Stream<TcpStream>, RpcError> {
    let config = security::client_tls(ALPN).map_err(|e| RpcError::Tls(e.to_string()))?;
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let connector = TlsConnector::from(Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from("sluice")
        .map_err(|e| RpcError::Tls(e.to_string()))?;
    let fut = async {
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| RpcError::Tls(e.to_string()))?;
        let ekm = keying_material(tls.get_ref().1)?;
        prove(&mut tls, secret, ekm, b"client", b"server", true).await?;
        Ok(tokio_rustls::TlsStream::Client(tls))
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, fut)
        .await
        .map_err(|_| RpcError::Timeout)?
}

/// Accepts a control connection: TLS, then the client's proof, then ours, all within `timeout`.
pub async fn accept(
    tcp: TcpStream,
    acceptor: &TlsAcceptor,
    secret: &ClusterSecret,
    timeout: Duration,
) -> Result<Stream<TcpStream>, RpcError> {
    tcp.set_nodelay(true)?;
    let fut = async {
        let mut tls = acceptor
            .accept(tcp)
            .await
            .map_err(|e| RpcError::Tls(e.to_string()))?;
        let ekm = keying_material(tls.get_ref().1)?;
        prove(&mut tls, secret, ekm, b"server", b"client", false).await?;
        Ok(tokio_rustls::TlsStream::Server(tls))
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| RpcError::Timeout)?
}

/// A TLS acceptor for the control plane.
pub fn acceptor() -> Result<TlsAcceptor, RpcError> {
    let config = security::server_tls(ALPN).map_err(|e| RpcError::Tls(e.to_string()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn pair(
        server_secret: &str,
        client_secret: &str,
    ) -> (Result<(), RpcError>, Result<(), RpcError>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server_secret = ClusterSecret::new(server_secret);
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut s =
                accept(tcp, &acceptor().unwrap(), &server_secret, HANDSHAKE_TIMEOUT).await?;
            let msg: String = recv(&mut s).await?;
            send(&mut s, &format!("echo {msg}")).await
        });
        let client = async {
            let mut c = connect(addr, &ClusterSecret::new(client_secret)).await?;
            send(&mut c, &"hi".to_string()).await?;
            let back: String = recv(&mut c).await?;
            assert_eq!(back, "echo hi");
            Ok(())
        }
        .await;
        (server.await.unwrap(), client)
    }

    #[tokio::test]
    async fn same_secret_talks_wrong_secret_is_refused() {
        let (s, c) = pair("the-same-secret-on-both", "the-same-secret-on-both").await;
        assert!(s.is_ok() && c.is_ok(), "{s:?} {c:?}");
        let (s, c) = pair("the-real-cluster-secret", "a-wrong-cluster-secret!").await;
        assert!(matches!(s, Err(RpcError::AuthenticationFailed)), "{s:?}");
        assert!(c.is_err());
    }

    #[tokio::test]
    async fn garbage_frame_lengths_are_rejected_without_allocating() {
        let mut bytes: &[u8] = &[0xff, 0xff, 0xff, 0xff, 1, 2];
        assert!(matches!(
            read_frame(&mut bytes).await,
            Err(RpcError::FrameTooLarge(_, MAX_FRAME))
        ));
        let mut bytes: &[u8] = &[0, 0, 0, 9, 1, 2];
        assert!(matches!(read_frame(&mut bytes).await, Err(RpcError::Io(_))));
    }

    #[test]
    fn the_proof_length_is_an_hmac_sha256() {
        let proof = ClusterSecret::new("x").proof(&[0u8; 32], b"client");
        assert_eq!(proof.len(), ClusterSecret::PROOF_LEN);
    }

    /// A peer that has not proved the secret announces a huge proof: it is refused from the
    /// length alone (nothing of that size is allocated or read), and the server keeps
    /// accepting and authenticating other peers.
    #[tokio::test]
    async fn an_unauthenticated_huge_proof_is_refused_and_the_server_keeps_serving() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let secret = ClusterSecret::new("the-cluster-secret-of-this-test");
        let server_secret = secret.clone();
        let server = tokio::spawn(async move {
            let acceptor = acceptor().unwrap();
            let mut outcomes = Vec::new();
            for _ in 0..2 {
                let (tcp, _) = listener.accept().await.unwrap();
                outcomes.push(
                    match accept(tcp, &acceptor, &server_secret, HANDSHAKE_TIMEOUT).await {
                        Ok(mut s) => {
                            let msg: String = recv(&mut s).await.unwrap();
                            send(&mut s, &format!("echo {msg}")).await.map(|_| ())
                        }
                        Err(e) => Err(e),
                    },
                );
            }
            outcomes
        });

        // The attacker: a TLS session, then a frame header announcing 60 MiB (under the
        // general frame limit) as its "proof", and then a few bytes only.
        let config = security::client_tls(ALPN).unwrap();
        let connector = TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("sluice").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_u32(60 << 20).await.unwrap();
        tls.write_all(&[0u8; 16]).await.unwrap();
        tls.flush().await.unwrap();
        // The server closes the session at once instead of waiting for 60 MiB.
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "the server waited for the announced proof");

        // An honest peer still gets in.
        let mut c = connect(addr, &secret).await.unwrap();
        send(&mut c, &"hi".to_string()).await.unwrap();
        let back: String = recv(&mut c).await.unwrap();
        assert_eq!(back, "echo hi");

        let outcomes = server.await.unwrap();
        assert!(
            matches!(
                outcomes[0],
                Err(RpcError::FrameTooLarge(n, ClusterSecret::PROOF_LEN)) if n == 60 << 20
            ),
            "{:?}",
            outcomes[0]
        );
        assert!(outcomes[1].is_ok(), "{:?}", outcomes[1]);
    }
}
