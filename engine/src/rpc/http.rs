//! Serving HTTP/1.1 (the REST API and web UI), plain or over TLS, on a port open to the
//! network, with the limits such a port needs: a cap on connections, a deadline for each
//! request's line and headers (which is also how long an idle keep-alive connection stays, and
//! within which a TLS handshake must end), a deadline for a connection on which nothing moves,
//! and a bound on the bytes a request head may take. HTTP/2 is not served: Flink's REST API is
//! HTTP/1.1, and every protocol served is one more to bound.
//!
//! Every error answer, including the ones hyper writes by itself for requests it cannot parse
//! (400, 414, 431, normally with an empty body), carries Flink's `{"errors": ["..."]}`.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tracing::{debug, info};

use super::listener::{Accepted, LimitedListener};

/// The most bytes a request's line and headers may take; hyper answers a longer head with 431.
/// A connection's read buffer grows to at most twice this.
pub const MAX_HEAD: usize = 64 * 1024;

/// The limits of an HTTP port (`rest.server.*`).
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// How long a client may take to send a request line and headers, counted from the
    /// connection's start or the end of the previous answer.
    pub header_read_timeout: Duration,
    /// A connection on which no byte moves for this long is closed.
    pub idle_timeout: Duration,
    /// Connections held at once; more are answered 503 and closed.
    pub max_connections: u32,
}

/// Serves `router` on `listener` until the task is dropped; never returns on its own. With
/// `tls` every connection is HTTPS: its handshake must end within the header read timeout (which
/// so bounds a silent client as in plain HTTP), and a connection that fails it is closed.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: HttpLimits,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let listener = LimitedListener::new(listener, limits.max_connections, "the REST port");
    info!(?limits, tls = tls.is_some(), "serving REST");
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        // A TLS client would read a plain 503 as garbage: over the cap it is only closed.
        let Accepted {
            stream,
            peer,
            place,
        } = match &acceptor {
            None => listener.accept(refuse_busy).await,
            Some(_) => listener.accept(|_| {}).await,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor {
                None => serve_connection(stream, service, limits, peer).await,
                Some(acceptor) => {
                    let handshake = tls_handshake(&acceptor, stream, peer);
                    match tokio::time::timeout(limits.header_read_timeout, handshake).await {
                        Ok(Some(stream)) => serve_connection(stream, service, limits, peer).await,
                        Ok(None) => {}
                        Err(_) => debug!(
                            %peer,
                            "no TLS handshake within rest.server.header-read-timeout; closed"
                        ),
                    }
                }
            }
            drop(place);
        });
    }
}

/// Serves HTTP/1.1 on one connection (plain or TLS) until it ends or goes idle.
async fn serve_connection<S>(
    stream: S,
    service: TowerToHyperService<axum::Router>,
    limits: HttpLimits,
    peer: std::net::SocketAddr,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched::new(stream, activity.clone()));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(MAX_HEAD)
        .max_buf_size(2 * MAX_HEAD)
        // Answers are written in one flat buffer, which `Watched` can inspect.
        .writev(false);
    let connection = builder.serve_connection(io, service);
    tokio::select! {
        result = connection => {
            if let Err(e) = result {
                debug!(%peer, error = %e, "REST connection ended");
            }
        }
        () = activity.idle_for(limits.idle_timeout) => {
            debug!(%peer, "REST connection idle for rest.server.idle-timeout; closed");
        }
    }
}

/// The first byte of a TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// How long a refused connection is drained before it is closed (see [`linger_close`]).
const LINGER: Duration = Duration::from_secs(1);

/// Completes the server's side of a TLS handshake, or `None` when the client is refused (no
/// valid certificate with client authentication) or is not speaking TLS. A plain HTTP request
/// gets a plain answer saying so (a browser or curl pointed at `http://` then shows why). A
/// refused client is told why (the TLS alert, that answer) before its connection is closed.
/// Failures are logged at debug level only, since any stranger can cause them.
async fn tls_handshake(
    acceptor: &tokio_rustls::TlsAcceptor,
    mut stream: TcpStream,
    peer: std::net::SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(1) if first[0] == TLS_HANDSHAKE_RECORD => {}
        Ok(1) => {
            debug!(%peer, "plain HTTP on the HTTPS REST port; answered 400 and closed");
            let answer = json_answer(
                400,
                "Bad Request",
                "This REST API is served over HTTPS only (security.ssl.rest.enabled): use https://",
            );
            let _ = stream.write_all(&answer).await;
            linger_close(stream).await;
            return None;
        }
        _ => return None,
    }
    match acceptor.accept(stream).into_fallible().await {
        Ok(stream) => Some(stream),
        Err((e, stream)) => {
            debug!(%peer, error = %e, "REST TLS handshake failed; closed");
            linger_close(stream).await;
            None
        }
    }
}

/// Closes a refused connection so that its client reads what it was sent rather than a reset
/// (closing a socket with unread bytes resets it, and the reset overtakes the answer): our side
/// is shut down, then what the client still sends is read and dropped until it closes, for at
/// most [`LINGER`].
async fn linger_close(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let drain = async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// Answers a connection over `rest.server.max-connections` with a 503 if the socket takes it
/// at once (it never waits), before the connection is closed.
fn refuse_busy(stream: &TcpStream) {
    let _ = stream.try_write(&json_answer(
        503,
        "Service Unavailable",
        "Too many connections to the REST API (rest.server.max-connections); retry shortly",
    ));
}

/// A complete HTTP/1.1 answer with Flink's error body, after which the connection closes.
fn json_answer(code: u16, reason: &str, message: &str) -> Vec<u8> {
    let body = serde_json::json!({ "errors": [message] }).to_string();
    format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// If `written` is one of hyper's automatic answers to a request it could not parse (a status
/// of 400, 414 or 431 with an empty body: the REST API's own error answers always carry one),
/// the same answer with Flink's error body.
fn with_error_body(written: &[u8]) -> Option<Vec<u8>> {
    let head = written.strip_prefix(b"HTTP/1.1 ")?;
    if !written.ends_with(b"\r\n\r\n") || !contains(written, b"\r\ncontent-length: 0\r\n") {
        return None;
    }
    let answer = match head.get(..3)? {
        b"400" => json_answer(
            400,
            "Bad Request",
            "Bad request: the request line or a header is not valid HTTP/1.1",
        ),
        b"414" => json_answer(414, "URI Too Long", "Bad request: the URI is too long"),
        b"431" => json_answer(
            431,
            "Request Header Fields Too Large",
            &format!(
                "Bad request: the request line and headers must fit in {} KiB and 100 headers",
                MAX_HEAD / 1024
            ),
        ),
        _ => return None,
    };
    Some(answer)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// When bytes last moved on a connection.
struct Activity {
    start: Instant,
    /// Milliseconds from `start` to the last byte read or written.
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Resolves once no byte has moved for `limit`.
    async fn idle_for(&self, limit: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A connection that records when bytes move and puts Flink's error body into hyper's
/// automatic error answers.
struct Watched<S> {
    stream: S,
    activity: Arc<Activity>,
    /// A replacement answer being written: the bytes and how many are out.
    replacement: Option<(Vec<u8>, usize)>,
}

impl<S: AsyncWrite + Unpin> Watched<S> {
    fn new(stream: S, activity: Arc<Activity>) -> Self {
        Watched {
            stream,
            activity,
            replacement: None,
        }
    }

    /// Writes what is left of a replacement answer.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while let Some((bytes, done)) = &mut self.replacement {
            if *done == bytes.len() {
                self.replacement = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            *done += n;
            self.activity.touch();
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.touch();
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        if let Some(answer) = with_error_body(buf) {
            // The whole of hyper's answer is taken; ours goes out instead (here, or on the
            // flush and shutdown that follow).
            this.replacement = Some((answer, 0));
            if let Poll::Ready(Err(e)) = this.poll_replacement(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        let result = Pin::new(&mut this.stream).poll_write(cx, buf);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        result
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hyper_s_empty_error_answers_get_a_body() {
        let hyper_431 =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let answer = String::from_utf8(with_error_body(hyper_431).unwrap()).unwrap();
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(json["errors"][0].as_str().unwrap().contains("64 KiB"));
        // The REST API's own answers (a body) and successes are left alone.
        let own = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 20\r\n\r\n";
        assert!(with_error_body(own).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(with_error_body(ok).is_none());
    }
}
