//! The REST API over TLS with client authentication (`security.ssl.rest.*`, docs/security.md):
//! a standalone cluster whose JobManager serves HTTPS and requires a client certificate from
//! its CA. The CLI with a client certificate runs and lists jobs; clients without one, with one
//! from another CA, speaking plain HTTP or sending garbage are refused, and the cluster goes on
//! serving. A JobManager whose PEM files are unusable does not start.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use sluice_integration::{
    StandaloneCluster, free_port, http_client, job_id_of, shared_cluster, sluice_bin,
};

/// Two CAs and their certificates, as PEM files in a directory.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).expect("pki file")
    }

    /// A test client's identity: certificate then key, PEM.
    fn identity(&self, prefix: &str) -> reqwest::Identity {
        let mut pem = self.read(&format!("{prefix}.pem"));
        pem.extend(self.read(&format!("{prefix}.key")));
        reqwest::Identity::from_pem(&pem).expect("identity")
    }

    fn ca(&self) -> reqwest::Certificate {
        reqwest::Certificate::from_pem(&self.read("ca.pem")).expect("ca")
    }
}

/// A CA and a signer for certificates it issues.
fn new_ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let pem = params.self_signed(&key).expect("ca certificate").pem();
    (pem, Issuer::new(params, key))
}

/// A certificate for `names` with the one extended key usage `purpose`, signed by `issuer`:
/// certificate and key, PEM.
fn issue(
    issuer: &Issuer<'static, KeyPair>,
    names: &[&str],
    purpose: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().expect("key");
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("params");
    params.extended_key_usages = vec![purpose];
    let cert = params.signed_by(&key, issuer).expect("certificate");
    (cert.pem(), key.serialize_pem())
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        let (ca_pem, ca) = new_ca("sluice test CA");
        write("ca.pem", &ca_pem);
        // The server's certificate serves only as a server's, the client's only as a client's:
        // the CLI must be given its own.
        let (cert, key) = issue(
            &ca,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        write("server.pem", &cert);
        write("server.key", &key);
        let (cert, key) = issue(&ca, &["cli"], ExtendedKeyUsagePurpose::ClientAuth);
        write("client.pem", &cert);
        write("client.key", &key);
        let (other_pem, other) = new_ca("another CA");
        write("other-ca.pem", &other_pem);
        let (cert, key) = issue(&other, &["cli"], ExtendedKeyUsagePurpose::ClientAuth);
        write("other-client.pem", &cert);
        write("other-client.key", &key);
        Pki { dir }
    })
}

/// One cluster for every test: HTTPS with client authentication.
fn cluster() -> &'static StandaloneCluster {
    static CLUSTER: OnceLock<StandaloneCluster> = OnceLock::new();
    shared_cluster(&CLUSTER, || {
        let pki = pki();
        let config = format!(
            "security.ssl.rest.enabled: true\nsecurity.ssl.rest.authentication-enabled: true\nsecurity.ssl.rest.cert: {}\nsecurity.ssl.rest.key: {}\nsecurity.ssl.rest.truststore: {}\n",
            pki.path("server.pem").display(),
            pki.path("server.key").display(),
            pki.path("ca.pem").display(),
        );
        let client = http_client(|b| {
            b.tls_built_in_root_certs(false)
                .add_root_certificate(pki.ca())
                .identity(pki.identity("client"))
        });
        StandaloneCluster::start_https(1, 2, &config, client)
    })
}

/// `-D` overrides that make the CLI present the client certificate instead of the server's
/// (which the cluster's config.yaml names).
fn client_keys(prefix: &str) -> Vec<String> {
    let pki = pki();
    vec![
        "-D".into(),
        format!(
            "security.ssl.rest.cert={}",
            pki.path(&format!("{prefix}.pem")).display()
        ),
        "-D".into(),
        format!(
            "security.ssl.rest.key={}",
            pki.path(&format!("{prefix}.key")).display()
        ),
    ]
}

fn cli(cluster: &StandaloneCluster, overrides: &[String], args: &[&str]) -> (Output, String) {
    let mut full: Vec<&str> = overrides.iter().map(String::as_str).collect();
    full.extend_from_slice(args);
    let out = cluster.cli(&full);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

/// The cluster still answers its own (authenticated) client.
fn assert_serving(cluster: &StandaloneCluster) {
    let overview = cluster.get("/overview").expect("the cluster answers");
    assert_eq!(overview["slots-total"], 2, "{overview}");
}

#[test]
fn the_cli_with_a_client_certificate_runs_and_lists_jobs() {
    let cluster = cluster();
    let keys = client_keys("client");
    // No -m: the address comes from the configuration (rest.address, rest.port), over https.
    let (out, text) = cli(cluster, &keys, &["run", "-p", "2", "wordcount"]);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Program execution finished"), "{text}");
    let id = job_id_of(&text);
    let (out, text) = cli(cluster, &keys, &["list", "-a"]);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&id), "{id} not listed: {text}");
    // With -m host:port, https is implied by the configuration.
    let rest = cluster.rest();
    let (out, text) = cli(cluster, &keys, &["list", "-a", "-m", &rest]);
    assert!(out.status.success() && text.contains(&id), "{text}");
    // The REST API says where it is, with its scheme.
    let jars = cluster.get("/jars").expect("jars");
    assert!(
        jars["address"]
            .as_str()
            .unwrap_or("")
            .starts_with("https://"),
        "{jars}"
    );
}

#[test]
fn clients_without_a_certificate_of_the_ca_are_refused_and_the_cluster_keeps_serving() {
    let cluster = cluster();
    let pki = pki();
    let url = format!("https://{}/overview", cluster.rest());
    // Trusting the server, but without a certificate of its own.
    let anonymous = http_client(|b| {
        b.tls_built_in_root_certs(false)
            .add_root_certificate(pki.ca())
    });
    let refused = anonymous.get(&url).send();
    assert!(
        refused.is_err(),
        "answered without a client certificate: {refused:?}"
    );
    // A certificate from another CA.
    let stranger = http_client(|b| {
        b.tls_built_in_root_certs(false)
            .add_root_certificate(pki.ca())
            .identity(pki.identity("other-client"))
    });
    let refused = stranger.get(&url).send();
    assert!(
        refused.is_err(),
        "answered a certificate of another CA: {refused:?}"
    );
    // Plain HTTP gets a plain answer that says to use https, and nothing else.
    let plain = http_client(|b| b)
        .get(format!("http://{}/overview", cluster.rest()))
        .send();
    if let Ok(answer) = plain {
        assert_eq!(answer.status().as_u16(), 400);
        let body = answer.text().unwrap_or_default();
        assert!(
            body.contains("https://") && !body.contains("slots"),
            "{body}"
        );
    }
    // Garbage that starts like a TLS record, and garbage that does not: both are closed.
    for garbage in [&b"\x16\x03\x01\x00\x05hello"[..], &[0u8, 1, 2, 3, 255][..]] {
        let mut stream = std::net::TcpStream::connect(cluster.rest()).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        stream.write_all(garbage).expect("write");
        let mut rest = Vec::new();
        let read = stream.read_to_end(&mut rest);
        let closed = match &read {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        assert!(closed, "the connection was not closed: {read:?}");
        assert!(!String::from_utf8_lossy(&rest).contains("slots"));
    }
    // The CLI without a client certificate, and the CLI trusting another CA: refused, with a
    // message that says it was the TLS handshake.
    let no_identity = vec![
        "-D".to_string(),
        "security.ssl.rest.authentication-enabled=false".to_string(),
    ];
    let mut other_trust = client_keys("client");
    other_trust.extend([
        "-D".to_string(),
        format!(
            "security.ssl.rest.truststore={}",
            pki.path("other-ca.pem").display()
        ),
    ]);
    for overrides in [no_identity, other_trust] {
        let (out, text) = cli(cluster, &overrides, &["list", "-m", &cluster.rest()]);
        assert!(!out.status.success(), "{overrides:?}: {text}");
        assert!(text.contains("TLS handshake"), "{overrides:?}: {text}");
    }
    assert_serving(cluster);
}

/// Runs `sluice jobmanager` with `config`; it must exit on its own (killed and failed after a
/// minute otherwise). Returns its output.
fn jobmanager_exits(config: &str) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let base = format!(
        "rest.port: {}\nrest.address: 127.0.0.1\nrest.bind-address: 127.0.0.1\njobmanager.rpc.port: {}\njobmanager.bind-host: 127.0.0.1\n",
        free_port(),
        free_port()
    );
    std::fs::write(dir.path().join("config.yaml"), format!("{base}{config}")).expect("config");
    let mut child = Command::new(sluice_bin())
        .arg("--config-dir")
        .arg(dir.path())
        .arg("jobmanager")
        .env("SLUICE_CLUSTER_SECRET", "a-test-secret-of-enough-length")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the jobmanager");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "the JobManager started with {config}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn unusable_pem_files_stop_the_jobmanager_and_the_cli_naming_key_and_file() {
    let pki = pki();
    let dir = tempfile::tempdir().expect("temp dir");
    let broken = dir.path().join("broken.pem");
    std::fs::write(&broken, "-----BEGIN PRIVATE KEY-----\nnot base64!\n").expect("write");
    let keys = |key: &Path| {
        format!(
            "security.ssl.rest.enabled: true\nsecurity.ssl.rest.cert: {}\nsecurity.ssl.rest.key: {}\n",
            pki.path("server.pem").display(),
            key.display()
        )
    };
    for (config, key, file) in [
        (keys(&broken), "security.ssl.rest.key", broken.clone()),
        (
            keys(&dir.path().join("absent.key")),
            "security.ssl.rest.key",
            dir.path().join("absent.key"),
        ),
        // The key of another certificate.
        (
            keys(&pki.path("client.key")),
            "security.ssl.rest.key",
            pki.path("client.key"),
        ),
    ] {
        let out = jobmanager_exits(&config);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        let file = file.display().to_string();
        assert!(stderr.contains(key) && stderr.contains(&file), "{stderr}");
        // It never said it was serving.
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("REST endpoint"),
            "{stderr}"
        );
    }
    // Authentication without TLS is a configuration error, not plain HTTP.
    let out = jobmanager_exits("security.ssl.rest.authentication-enabled: true\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("security.ssl.rest.enabled"),
        "{stderr}"
    );
    // A client's truststore that is not there.
    let out = Command::new(sluice_bin())
        .args([
            "list",
            "-m",
            "127.0.0.1:1",
            "-D",
            "security.ssl.rest.enabled=true",
            "-D",
        ])
        .arg(format!(
            "security.ssl.rest.truststore={}",
            dir.path().join("absent-ca.pem").display()
        ))
        .output()
        .expect("run sluice");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("security.ssl.rest.truststore") && stderr.contains("absent-ca.pem"),
        "{stderr}"
    );
}
