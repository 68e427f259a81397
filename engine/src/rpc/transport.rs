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
/// How long the TLS handshake and the secret proofs may take.
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
    /// A frame announced more bytes than allowed.
    #[error("frame of {0} bytes exceeds the limit of {MAX_FRAME} bytes")]
    FrameTooLarge(usize),
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
    let len = r.read_u32().await? as usize;
    if len > MAX_FRAME {
        return Err(RpcError::FrameTooLarge(len));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await?;
    Ok(buf)
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> Result<(), RpcError> {
    if bytes.len() > MAX_FRAME {
        return Err(RpcError::FrameTooLarge(bytes.len()));
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
    let their_proof = read_frame(stream).await?;
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

/// Accepts a control connection: TLS, then the client's proof, then ours.
pub async fn accept(
    tcp: TcpStream,
    acceptor: &TlsAcceptor,
    secret: &ClusterSecret,
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
    tokio::time::timeout(HANDSHAKE_TIMEOUT, fut)
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
            let mut s = accept(tcp, &acceptor().unwrap(), &server_secret).await?;
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
            Err(RpcError::FrameTooLarge(_))
        ));
        let mut bytes: &[u8] = &[0, 0, 0, 9, 1, 2];
        assert!(matches!(read_frame(&mut bytes).await, Err(RpcError::Io(_))));
    }
}
