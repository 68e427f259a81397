//! Hostile clients: what a stranger on the cluster's network can do to its open ports without
//! knowing the cluster secret, and what it must not achieve. Slow and idle REST connections are
//! closed (also over TLS, where a stalled handshake is too and a client without a certificate
//! is refused), connections over a port's cap are refused at once, malformed requests get Flink's
//! JSON error body, a restore path does not tell whether a file exists, a proof larger than a
//! proof is refused from its length, a silent handshake times out, and an unauthenticated QUIC
//! peer can make a TaskManager buffer no more than the room for a proof.
//!
//! A real JobManager (and, for the data plane, a real TaskManager) runs in this process on
//! loopback; the attackers use plain sockets, TLS and QUIC. Every wait has a deadline and ends
//! on a condition (a socket closed, an answer received), never on a sleep.

use std::net::SocketAddr;
mod common;

use common::{config, jobmanager};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::embedded::EmbeddedCluster;
use sluice::jobmanager::JobManager;
use sluice::rpc::messages::{JmToTm, PROTOCOL_VERSION, TmToJm};
use sluice::rpc::transport;
use sluice::security::{self, ClusterSecret};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Long enough for anything these tests wait for on a loaded CI machine.
const DEADLINE: Duration = Duration::from_secs(20);

/// Everything the peer sends until it closes the connection (or resets it), or `None` if it
/// is still open at the deadline.
async fn read_until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(got),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Whether the peer has neither closed nor sent anything yet (checked without waiting).
fn still_open(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(stream.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// An HTTP answer's status and its body parsed as JSON.
fn parse_answer(raw: &[u8]) -> (u16, serde_json::Value) {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let json = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("the body of {head:?} is not JSON ({e}): {body:?}"));
    (status, json)
}

/// Sends `request` on a new connection and returns the whole answer (the server closes).
async fn raw_request(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("send");
    read_until_closed(&mut stream)
        .await
        .expect("the server answers and closes")
}

/// A slow client: a request line and one header, then silence.
async fn slow_client(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET /overview HTTP/1.1\r\nHost: sluice\r\n")
        .await
        .expect("send");
    stream
}

/// Polls `GET /overview` until it answers 200 (a freed place may take a moment to be noticed).
async fn overview_answers(addr: SocketAddr) {
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/overview");
    let deadline = Instant::now() + DEADLINE;
    loop {
        match client.get(&url).send().await {
            Ok(r) if r.status() == 200 => return,
            outcome if Instant::now() > deadline => {
                panic!("GET /overview never answered 200: {outcome:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_connections_over_the_cap_get_a_503_in_json_and_freed_places_serve_again() {
    let secret = ClusterSecret::random();
    let config = config(&[
        ("rest.server.max-connections", "8"),
        ("rest.server.header-read-timeout", "5 min"),
    ]);
    let jm = jobmanager(&config, &secret).await;
    let addr = jm.rest_address;
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(slow_client(addr).await);
    }
    // Accepted after the eight in the listen queue's order: no place is left for it.
    let mut over = TcpStream::connect(addr).await.expect("connect");
    let answer = read_until_closed(&mut over)
        .await
        .expect("the connection over the cap is closed at once");
    let (status, body) = parse_answer(&answer);
    assert_eq!(status, 503);
    assert!(
        body["errors"][0]
            .as_str()
            .unwrap()
            .contains("rest.server.max-connections"),
        "{body}"
    );
    assert!(
        held.iter().all(still_open),
        "the held connections stay (their header timeout is minutes away)"
    );
    // A client that goes away frees its place.
    held.pop();
    overview_answers(addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_idle_and_stalled_rest_connections_are_closed_by_the_server() {
    let secret = ClusterSecret::random();
    let config = config(&[
        ("rest.server.header-read-timeout", "1 s"),
        ("rest.server.idle-timeout", "2 s"),
    ]);
    let jm = jobmanager(&config, &secret).await;
    let addr = jm.rest_address;

    // Slowloris: a request line and a header, then nothing.
    let mut slow = slow_client(addr).await;
    // Keep-alive: a complete request, then nothing.
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    idle.write_all(b"GET /overview HTTP/1.1\r\nHost: sluice\r\n\r\n")
        .await
        .expect("send");
    // A body announced but never sent.
    let mut stalled = TcpStream::connect(addr).await.expect("connect");
    stalled
        .write_all(
            b"POST /sluice/jobs HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
        )
        .await
        .expect("send");

    assert!(
        read_until_closed(&mut slow).await.is_some(),
        "a connection that never finishes its headers is closed"
    );
    let answered = read_until_closed(&mut idle)
        .await
        .expect("an idle keep-alive connection is closed");
    assert!(
        String::from_utf8_lossy(&answered).starts_with("HTTP/1.1 200"),
        "the complete request was answered before the connection was closed"
    );
    assert!(
        read_until_closed(&mut stalled).await.is_some(),
        "a connection whose request body stalls is closed"
    );
    overview_answers(addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_requests_get_json_error_bodies() {
    let secret = ClusterSecret::random();
    let jm = jobmanager(&config(&[]), &secret).await;
    let addr = jm.rest_address;

    let huge_header = format!(
        "GET /overview HTTP/1.1\r\nHost: sluice\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    let (status, body) = parse_answer(&raw_request(addr, huge_header.as_bytes()).await);
    assert_eq!(status, 431);
    assert!(
        body["errors"][0].as_str().unwrap().contains("KiB"),
        "{body}"
    );

    let long_uri = format!(
        "GET /jobs/{} HTTP/1.1\r\nHost: sluice\r\n\r\n",
        "x".repeat(70 * 1024)
    );
    let (status, body) = parse_answer(&raw_request(addr, long_uri.as_bytes()).await);
    assert!(matches!(status, 414 | 431), "{status}");
    assert!(body["errors"].is_array(), "{body}");

    let (status, body) = parse_answer(&raw_request(addr, b"\x01\x02 nonsense\r\n\r\n").await);
    assert_eq!(status, 400);
    assert!(
        body["errors"][0].as_str().unwrap().contains("HTTP"),
        "{body}"
    );

    let many_headers: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    let request = format!("GET /overview HTTP/1.1\r\nHost: sluice\r\n{many_headers}\r\n");
    let (status, body) = parse_answer(&raw_request(addr, request.as_bytes()).await);
    assert_eq!(status, 431);
    assert!(body["errors"].is_array(), "{body}");

    // The server still answers well-formed requests.
    overview_answers(addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_path_does_not_reveal_whether_a_file_exists() {
    let secret = ClusterSecret::random();
    let jm = jobmanager(&config(&[]), &secret).await;
    let scratch = tempfile::tempdir().expect("scratch");
    let not_json = scratch.path().join("notes.txt");
    std::fs::write(&not_json, "a file that exists").expect("write");
    let other_json = scratch.path().join("other.json");
    std::fs::write(&other_json, r#"{"some": "json"}"#).expect("write");
    let missing = scratch.path().join("no-such-file");

    let client = reqwest::Client::new();
    let url = format!("http://{}/sluice/jobs", jm.rest_address);
    let mut messages = Vec::new();
    for path in [
        &not_json,
        &other_json,
        &missing,
        &scratch.path().to_path_buf(),
    ] {
        let answer = client
            .post(&url)
            .json(&serde_json::json!({
                "job": "wordcount",
                "args": ["--input", "/dev/null", "--output", "/dev/null"],
                "savepointPath": path.display().to_string(),
            }))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 400);
        let body: serde_json::Value = answer.json().await.expect("JSON");
        let message = body["errors"][0].as_str().expect("a message").to_string();
        assert!(
            message.contains("is not a valid savepoint"),
            "{path:?}: {message}"
        );
        messages.push(message.replace(&path.display().to_string(), "<path>"));
    }
    assert!(
        messages.windows(2).all(|w| w[0] == w[1]),
        "the answers differ by what is at the path: {messages:#?}"
    );
}

/// A TLS session to the RPC port, as anyone can open one.
async fn rpc_tls(addr: SocketAddr) -> tokio_rustls::client::TlsStream<TcpStream> {
    let config = security::client_tls(transport::ALPN).expect("TLS config");
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("sluice").expect("name");
    connector.connect(name, tcp).await.expect("TLS handshake")
}

/// Registers a TaskManager over the real protocol; retries while the port is still full.
async fn register_taskmanager(jm: &JobManager, secret: &ClusterSecret) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let attempt = async {
            let stream = transport::connect(jm.shared.rpc_address(), secret).await?;
            let (mut reader, mut writer) = tokio::io::split(stream);
            let register = TmToJm::Register {
                protocol_version: PROTOCOL_VERSION,
                resource_id: "a-real-taskmanager".into(),
                host: "127.0.0.1".into(),
                data_port: 1,
                slots: 1,
                hardware: Default::default(),
                network_memory: 0,
                managed_memory: 0,
                running: vec![],
                leader_session: jm.shared.leader_session(),
                metrics_port: None,
                worker_of: None,
            };
            transport::send(&mut writer, &register).await?;
            transport::recv::<_, JmToTm>(&mut reader).await
        };
        match attempt.await {
            Ok(JmToTm::Registered { .. }) => return,
            outcome if Instant::now() > deadline => {
                panic!("a TaskManager could not register: {outcome:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_connections_over_the_cap_are_closed_at_once_and_a_taskmanager_still_registers() {
    let secret = ClusterSecret::random();
    let config = config(&[
        ("jobmanager.rpc.max-connections", "4"),
        ("security.handshake.timeout", "5 min"),
    ]);
    let jm = jobmanager(&config, &secret).await;
    let addr = jm.shared.rpc_address();
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let mut over = TcpStream::connect(addr).await.expect("connect");
    assert!(
        read_until_closed(&mut over).await.is_some(),
        "the connection over the cap is closed at once"
    );
    assert!(
        held.iter().all(still_open),
        "the held connections stay (their handshake timeout is minutes away)"
    );
    held.clear();
    register_taskmanager(&jm, &secret).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_proofs_are_refused_from_their_length_and_silent_handshakes_time_out() {
    let secret = ClusterSecret::random();
    let config = config(&[("security.handshake.timeout", "1 s")]);
    let jm = jobmanager(&config, &secret).await;
    let addr = jm.shared.rpc_address();

    // Sixteen peers announce 64 MiB "proofs" and send a little of them.
    let mut liars = Vec::new();
    for _ in 0..16 {
        let mut tls = rpc_tls(addr).await;
        tls.write_u32(64 << 20).await.expect("send");
        tls.write_all(&[0u8; 4096]).await.expect("send");
        tls.flush().await.expect("flush");
        liars.push(tls);
    }
    for tls in &mut liars {
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(DEADLINE, tls.read_to_end(&mut rest)).await;
        assert!(
            closed.is_ok(),
            "the JobManager waited for an announced proof"
        );
    }
    // A peer that completes TLS and then says nothing is dropped after the handshake timeout.
    let mut silent = rpc_tls(addr).await;
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(DEADLINE, silent.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "a silent peer kept its connection");
    register_taskmanager(&jm, &secret).await;
}

/// A QUIC client as an attacker would make it: the data plane's ALPN, any certificate accepted.
fn quic_client() -> quinn::Endpoint {
    let tls = security::client_tls(sluice::network::transport::ALPN).expect("TLS config");
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC crypto");
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("endpoint");
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    endpoint
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_quic_peer_can_make_a_taskmanager_buffer_only_a_proof() {
    let config = config(&[("security.handshake.timeout", "1 s")]);
    let cluster = EmbeddedCluster::start(config, 1)
        .await
        .expect("the cluster starts");
    let data = cluster
        .jobmanager
        .shared
        .view()
        .resources()
        .taskmanagers()
        .next()
        .expect("a TaskManager")
        .data_address;
    let endpoint = quic_client();

    // One peer leaves the proof stream empty and opens another stream to push data on.
    let connection = endpoint
        .connect(data, "sluice")
        .expect("connect")
        .await
        .expect("QUIC handshake");
    let (_proof_send, _proof_recv) = connection.open_bi().await.expect("the first stream");
    let second = tokio::select! {
        opened = connection.open_bi() => opened.ok(),
        _ = connection.closed() => None,
    };
    assert!(
        second.is_none(),
        "an unauthenticated peer opened a second stream"
    );

    // Another pushes as much as it can on its first stream, without a valid proof.
    let connection = endpoint
        .connect(data, "sluice")
        .expect("connect")
        .await
        .expect("QUIC handshake");
    let (mut send, _recv) = connection.open_bi().await.expect("the first stream");
    let chunk = vec![7u8; 64 * 1024];
    let mut accepted = 0usize;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match tokio::time::timeout_at(deadline, send.write(&chunk)).await {
            Ok(Ok(n)) => accepted += n,
            Ok(Err(_)) => break,
            Err(_) => panic!("the TaskManager kept an unauthenticated connection open"),
        }
    }
    assert!(
        accepted <= sluice::network::transport::PRE_AUTH_WINDOW as usize,
        "the TaskManager let an unauthenticated peer send {accepted} bytes"
    );
    assert!(
        tokio::time::timeout(DEADLINE, connection.closed())
            .await
            .is_ok(),
        "the connection was closed"
    );
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files, and the
/// configuration keys of a JobManager that serves REST over TLS and requires client
/// certificates from that CA.
struct RestPki {
    dir: tempfile::TempDir,
    ca: rustls::pki_types::CertificateDer<'static>,
}

impl RestPki {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("CA");
        write("ca.pem", ca.pem());
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        for (name, san) in [("server", "127.0.0.1"), ("client", "client")] {
            let key = rcgen::KeyPair::generate().expect("key");
            let cert = rcgen::CertificateParams::new(vec![san.to_string()])
                .expect("params")
                .signed_by(&key, &issuer)
                .expect("certificate");
            write(&format!("{name}.pem"), cert.pem());
            write(&format!("{name}.key"), key.serialize_pem());
        }
        RestPki {
            ca: ca.der().clone(),
            dir,
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn config(&self, extra: &[(&str, &str)]) -> sluice::config::Config {
        let (cert, key, ca) = (
            self.path("server.pem"),
            self.path("server.key"),
            self.path("ca.pem"),
        );
        let mut keys = vec![
            ("security.ssl.rest.enabled", "true"),
            ("security.ssl.rest.authentication-enabled", "true"),
            ("security.ssl.rest.cert", cert.as_str()),
            ("security.ssl.rest.key", key.as_str()),
            ("security.ssl.rest.truststore", ca.as_str()),
        ];
        keys.extend_from_slice(extra);
        config(&keys)
    }

    /// A TLS session to `addr`, with the client certificate when `identity`.
    async fn connect(
        &self,
        addr: SocketAddr,
        identity: bool,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone()).expect("CA");
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let config = if identity {
            let chain = rustls::pki_types::CertificateDer::pem_file_iter(self.path("client.pem"))
                .expect("client.pem")
                .collect::<Result<Vec<_>, _>>()
                .expect("certificates");
            let key = rustls::pki_types::PrivateKeyDer::from_pem_file(self.path("client.key"))
                .expect("client.key");
            builder.with_client_auth_cert(chain, key).expect("identity")
        } else {
            builder.with_no_client_auth()
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(addr).await?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        connector.connect(name, tcp).await
    }

    /// `GET /overview` over a TLS session; the whole answer, read until the server closes
    /// (at once with `close`, else when the kept-alive session has been idle long enough).
    async fn overview(
        &self,
        addr: SocketAddr,
        identity: bool,
        close: bool,
    ) -> std::io::Result<Vec<u8>> {
        let mut tls = self.connect(addr, identity).await?;
        let connection = if close { "Connection: close\r\n" } else { "" };
        let request = format!("GET /overview HTTP/1.1\r\nHost: 127.0.0.1\r\n{connection}\r\n");
        tls.write_all(request.as_bytes()).await?;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match tokio::time::timeout(DEADLINE, tls.read(&mut buf)).await {
                Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
                Ok(Ok(0)) => return Ok(got),
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
                // Refused: what was read before the alert does not count.
                Ok(Err(e)) if got.is_empty() => return Err(e),
                Ok(Err(_)) => return Ok(got),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_over_tls_bounds_handshakes_and_idle_sessions_and_refuses_strangers() {
    let pki = RestPki::new();
    let config = pki.config(&[
        ("rest.server.header-read-timeout", "1 s"),
        ("rest.server.idle-timeout", "2 s"),
    ]);
    let jm = jobmanager(&config, &ClusterSecret::random()).await;
    let addr = jm.rest_address;

    // Silence, and a handshake that starts and stalls: closed by the header read timeout.
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let mut stalled = TcpStream::connect(addr).await.expect("connect");
    stalled
        .write_all(b"\x16\x03\x01\x02\x00\x01\x00")
        .await
        .expect("send");
    assert!(
        read_until_closed(&mut silent).await.is_some(),
        "silent client"
    );
    assert!(
        read_until_closed(&mut stalled).await.is_some(),
        "stalled handshake"
    );

    // Plain HTTP gets a plain answer saying to use https.
    let answer = raw_request(addr, b"GET /overview HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await;
    let (status, body) = parse_answer(&answer);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["errors"][0].as_str().unwrap().contains("https://"),
        "{body}"
    );

    // Without a client certificate: refused, nothing of the API is read.
    let refused = pki.overview(addr, false, true).await;
    assert!(
        refused.is_err() || refused.as_ref().is_ok_and(|got| got.is_empty()),
        "answered a client without a certificate: {refused:?}"
    );

    // With one: answered, and the idle keep-alive session is then closed by the server.
    let answer = pki
        .overview(addr, true, false)
        .await
        .expect("the client is served, and its idle session closed");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("taskmanagers"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_over_the_cap_are_closed_without_a_plain_answer() {
    let pki = RestPki::new();
    let config = pki.config(&[
        ("rest.server.max-connections", "2"),
        ("rest.server.header-read-timeout", "5 min"),
    ]);
    let jm = jobmanager(&config, &ClusterSecret::random()).await;
    let addr = jm.rest_address;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let mut over = TcpStream::connect(addr).await.expect("connect");
    let answer = read_until_closed(&mut over)
        .await
        .expect("the connection over the cap is closed at once");
    // A TLS client would read a plain 503 as a broken record: it gets nothing.
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    assert!(
        held.iter().all(still_open),
        "the held connections were closed"
    );
    drop(held);
    let deadline = Instant::now() + DEADLINE;
    loop {
        match pki.overview(addr, true, true).await {
            Ok(answer) if answer.starts_with(b"HTTP/1.1 200") => break,
            outcome if Instant::now() > deadline => panic!("never served again: {outcome:?}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
