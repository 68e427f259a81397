//! Accepting TCP connections from anyone on the network without letting them exhaust the
//! process: a cap on the connections a port holds (the ones over it are closed as soon as they
//! are accepted, so they cost a file descriptor for a moment only), and an accept loop that
//! outlives running out of file descriptors (it logs and backs off instead of ending).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{debug, warn};

/// The first pause after accepting failed for lack of resources; it doubles while the failures
/// go on, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest pause between accept attempts while the process has no file descriptors left.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A listening port that holds at most a fixed number of connections.
pub struct LimitedListener {
    listener: TcpListener,
    places: Arc<Semaphore>,
    /// Names the port in logs ("the REST port").
    what: &'static str,
}

/// An accepted connection and its place under the cap; dropping the place frees it.
pub struct Accepted {
    /// The connection.
    pub stream: TcpStream,
    /// Who connected.
    pub peer: SocketAddr,
    /// The connection's place under the cap: keep it as long as the connection lives.
    pub place: OwnedSemaphorePermit,
}

impl LimitedListener {
    /// A listener holding at most `max_connections` connections at once.
    pub fn new(listener: TcpListener, max_connections: u32, what: &'static str) -> Self {
        LimitedListener {
            listener,
            places: Arc::new(Semaphore::new(max_connections.max(1) as usize)),
            what,
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The next connection that fits under the cap. A connection over the cap is handed to
    /// `refuse` (which may write a short answer without waiting) and closed. Errors never end
    /// the loop: running out of file descriptors (EMFILE, ENFILE) or memory is logged once per
    /// episode and retried after a growing pause, a connection that failed before it was
    /// accepted is skipped.
    pub async fn accept(&self, refuse: impl Fn(&TcpStream)) -> Accepted {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    backoff = FIRST_BACKOFF;
                    match self.places.clone().try_acquire_owned() {
                        Ok(place) => {
                            return Accepted {
                                stream,
                                peer,
                                place,
                            };
                        }
                        Err(_) => {
                            debug!(%peer, port = self.what, "connection over the cap closed");
                            refuse(&stream);
                        }
                    }
                }
                Err(e) if is_resource_exhaustion(&e) => {
                    if backoff == FIRST_BACKOFF {
                        warn!(
                            port = self.what,
                            error = %e,
                            "cannot accept connections: the process is out of file descriptors or memory; retrying with backoff (lower the connection caps or raise the file descriptor limit)"
                        );
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(e) => debug!(port = self.what, error = %e, "accepting a connection failed"),
            }
        }
    }
}

/// Whether an accept error means the process (or system) is out of descriptors or buffers, so
/// accepting again at once would only fail again.
fn is_resource_exhaustion(e: &std::io::Error) -> bool {
    #[cfg(target_os = "linux")]
    {
        // Linux's numbers (asm-generic/errno-base.h, errno.h).
        const EMFILE: i32 = 24;
        const ENFILE: i32 = 23;
        const ENOBUFS: i32 = 105;
        const ENOMEM: i32 = 12;
        matches!(e.raw_os_error(), Some(EMFILE | ENFILE | ENOBUFS | ENOMEM))
    }
    #[cfg(not(target_os = "linux"))]
    {
        e.kind() == std::io::ErrorKind::OutOfMemory
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// With the cap reached, a further connection is closed at once (its read ends), and once a
    /// held connection is dropped a new one is admitted again.
    #[tokio::test]
    async fn connections_over_the_cap_are_closed_and_places_come_back() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let limited = LimitedListener::new(listener, 2, "the test port");
        let addr = limited.local_addr().unwrap();
        let held: Vec<TcpStream> = vec![
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
        ];
        let first = limited.accept(|_| {}).await;
        let second = limited.accept(|_| {}).await;
        let mut over = TcpStream::connect(addr).await.unwrap();
        let accepting = tokio::spawn(async move {
            let third = limited.accept(|_| {}).await;
            (limited, third)
        });
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), over.read(&mut byte)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "the connection over the cap stayed open: {read:?}"
        );
        drop(first);
        let _late = TcpStream::connect(addr).await.unwrap();
        let (_limited, third) = tokio::time::timeout(Duration::from_secs(5), accepting)
            .await
            .expect("a freed place admits a new connection")
            .unwrap();
        assert_eq!(third.stream.local_addr().unwrap(), addr);
        drop((held, second));
    }
}
