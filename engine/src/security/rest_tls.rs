//! TLS of the REST API (`security.ssl.rest.*`): the JobManager's server configuration and what
//! a REST client (the CLI, the YARN client) needs to connect, both read from the same PEM files.
//!
//! Everything is read and checked when a process starts, so a JobManager with a missing or
//! malformed file does not start at all (rather than serve plain HTTP or fail at the first
//! client), and the error names the key and the file.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use super::SecurityError;
use crate::config::{Config, RestSslOptions};

/// The key naming the certificate chain.
pub const CERT_KEY: &str = "security.ssl.rest.cert";
/// The key naming the private key.
pub const KEY_KEY: &str = "security.ssl.rest.key";
/// The key naming the trusted CA certificates.
pub const TRUSTSTORE_KEY: &str = "security.ssl.rest.truststore";

/// The most bytes read from one PEM file: a CA bundle is a few hundred KiB; more is the wrong
/// file (`/dev/zero`, a log), refused instead of read for ever.
pub const MAX_PEM_FILE_SIZE: u64 = 4 << 20;

/// The ALPN protocol the REST port speaks: Flink's REST API is HTTP/1.1 only, so a browser that
/// offers HTTP/2 is told to use HTTP/1.1.
const HTTP_1_1: &[u8] = b"http/1.1";

/// What a REST client needs for `https`: the CA certificates to trust and, with client
/// authentication, the certificate and key to present.
#[derive(Clone)]
pub struct RestClientTls {
    /// CA certificates (DER) the server's certificate must chain to; empty: the public web CAs.
    pub roots: Vec<CertificateDer<'static>>,
    /// The certificate chain and the private key to present, PEM, as read from
    /// `security.ssl.rest.cert` and `security.ssl.rest.key` (checked to parse and to match).
    pub identity_pem: Option<Vec<u8>>,
    /// Whether the server's certificate must name the host connected to.
    pub verify_hostname: bool,
}

impl std::fmt::Debug for RestClientTls {
    /// Leaves the private key out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClientTls")
            .field("roots", &self.roots.len())
            .field("identity", &self.identity_pem.is_some())
            .field("verify_hostname", &self.verify_hostname)
            .finish()
    }
}

/// The REST server's TLS configuration, or `None` when `security.ssl.rest.enabled` is false.
///
/// Needs `security.ssl.rest.cert` and `security.ssl.rest.key`; with
/// `security.ssl.rest.authentication-enabled` also `security.ssl.rest.truststore`, whose CAs
/// the clients' certificates must chain to (a client without one fails the handshake).
pub fn server_config(config: &Config) -> Result<Option<Arc<rustls::ServerConfig>>, SecurityError> {
    let ssl = &config.security.rest_ssl;
    if !ssl.enabled {
        return Ok(None);
    }
    let why = "security.ssl.rest.enabled is true, so the REST server needs";
    let cert_path = required(ssl.cert.as_deref(), CERT_KEY, why, "its certificate chain")?;
    let key_path = required(ssl.key.as_deref(), KEY_KEY, why, "its private key")?;
    let chain = read_chain(CERT_KEY, cert_path)?;
    let key = read_key(KEY_KEY, key_path)?;
    let provider = super::provider();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| SecurityError::Tls(e.to_string()))?;
    let builder = if ssl.authentication {
        let trust_path = required(
            ssl.truststore.as_deref(),
            TRUSTSTORE_KEY,
            "security.ssl.rest.authentication-enabled is true, so the REST server needs",
            "the CA certificates that sign its clients' certificates",
        )?;
        let roots = root_store(trust_path)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| file_error(TRUSTSTORE_KEY, trust_path, e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut server = builder
        .with_single_cert(chain, key)
        .map_err(|e| mismatch(cert_path, key_path, e))?;
    server.alpn_protocols = vec![HTTP_1_1.to_vec()];
    Ok(Some(Arc::new(server)))
}

/// What a REST client needs for `https`, or `None` when `security.ssl.rest.enabled` is false.
///
/// `security.ssl.rest.truststore` is optional (unset: the public web CAs);
/// with `security.ssl.rest.authentication-enabled`, `security.ssl.rest.cert` and
/// `security.ssl.rest.key` are required.
pub fn client_config(config: &Config) -> Result<Option<RestClientTls>, SecurityError> {
    let ssl: &RestSslOptions = &config.security.rest_ssl;
    if !ssl.enabled {
        return Ok(None);
    }
    let roots = match &ssl.truststore {
        Some(path) => {
            let roots = read_certs(TRUSTSTORE_KEY, path)?;
            // Checked as the server's verifier would, so a bad CA is reported here.
            root_store(path)?;
            roots
        }
        None => Vec::new(),
    };
    let identity_pem = if ssl.authentication {
        let why = "security.ssl.rest.authentication-enabled is true, so a REST client needs";
        let cert_path = required(ssl.cert.as_deref(), CERT_KEY, why, "its certificate chain")?;
        let key_path = required(ssl.key.as_deref(), KEY_KEY, why, "its private key")?;
        let chain = read_chain(CERT_KEY, cert_path)?;
        let key = read_key(KEY_KEY, key_path)?;
        // The pair must match, or every handshake would fail with a less helpful message.
        rustls::sign::CertifiedKey::from_der(chain, key, &super::provider())
            .map_err(|e| mismatch(cert_path, key_path, e))?;
        let mut pem = read_bounded(CERT_KEY, cert_path)?;
        pem.push(b'\n');
        pem.extend(read_bounded(KEY_KEY, key_path)?);
        Some(pem)
    } else {
        None
    };
    Ok(Some(RestClientTls {
        roots,
        identity_pem,
        verify_hostname: ssl.verify_hostname,
    }))
}

fn required<'a>(
    path: Option<&'a Path>,
    key: &'static str,
    why: &'static str,
    what: &'static str,
) -> Result<&'a Path, SecurityError> {
    path.ok_or(SecurityError::RestTlsUnset { key, why, what })
}

fn file_error(key: &'static str, path: &Path, reason: impl Into<String>) -> SecurityError {
    SecurityError::RestTlsFile {
        key,
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

fn mismatch(cert: &Path, key: &Path, e: rustls::Error) -> SecurityError {
    match e {
        rustls::Error::InconsistentKeys(_) => file_error(
            KEY_KEY,
            key,
            format!(
                "it is not the private key of the certificate in {CERT_KEY} ({})",
                cert.display()
            ),
        ),
        other => file_error(KEY_KEY, key, other.to_string()),
    }
}

/// Reads a file of at most [`MAX_PEM_FILE_SIZE`] bytes.
fn read_bounded(key: &'static str, path: &Path) -> Result<Vec<u8>, SecurityError> {
    use std::io::Read;
    let failed = |e: std::io::Error| file_error(key, path, format!("reading it failed: {e}"));
    let file = std::fs::File::open(path).map_err(failed)?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_FILE_SIZE + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_PEM_FILE_SIZE {
        return Err(file_error(
            key,
            path,
            format!(
                "it holds more than {} MiB, which is no PEM file of certificates or keys",
                MAX_PEM_FILE_SIZE >> 20
            ),
        ));
    }
    Ok(bytes)
}

/// What to say of a file that has no PEM section of the wanted kind: Java keystores are named
/// (Flink's `security.ssl.rest.keystore` and `truststore` are JKS or PKCS #12 files).
fn not_pem(bytes: &[u8], wanted: &str) -> String {
    const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];
    if bytes.starts_with(&JKS_MAGIC) || bytes.first() == Some(&0x30) {
        format!(
            "it holds no PEM {wanted} but a binary file (a Java keystore or PKCS #12?): sluice reads PEM; convert it, e.g. with `openssl pkcs12 -in FILE -nodes`"
        )
    } else {
        format!("it holds no PEM {wanted}")
    }
}

/// What is wrong with a PEM file, in words (the library's own text shows markers as bytes).
fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::MissingSectionEnd { end_marker } => format!(
            "it is not valid PEM: a section has no end line (-----END {}-----)",
            String::from_utf8_lossy(end_marker)
        ),
        Error::IllegalSectionStart { line } => format!(
            "it is not valid PEM: a malformed BEGIN line: {}",
            String::from_utf8_lossy(line)
        ),
        other => format!("it is not valid PEM: {other}"),
    }
}

/// Every certificate in the file, in order.
fn read_certs(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, SecurityError> {
    let bytes = read_bounded(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(key, path, pem_error(&e)))?;
    if certs.is_empty() {
        return Err(file_error(
            key,
            path,
            not_pem(&bytes, "certificate (-----BEGIN CERTIFICATE-----)"),
        ));
    }
    Ok(certs)
}

/// A certificate chain whose first certificate parses as X.509.
fn read_chain(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, SecurityError> {
    let chain = read_certs(key, path)?;
    // rustls checks the certificates only in a handshake; the end entity is parsed here so a
    // corrupt file fails the start, not every connection.
    rustls::server::ParsedCertificate::try_from(&chain[0]).map_err(|e| {
        file_error(
            key,
            path,
            format!("its first certificate does not parse: {e}"),
        )
    })?;
    Ok(chain)
}

fn read_key(key: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, SecurityError> {
    let bytes = read_bounded(key, path)?;
    if bytes
        .windows(b"ENCRYPTED PRIVATE KEY".len())
        .any(|w| w == b"ENCRYPTED PRIVATE KEY")
    {
        return Err(file_error(
            key,
            path,
            "the private key is encrypted; sluice reads unencrypted keys (decrypt it with `openssl pkey -in KEY -out KEY.plain` and make the file readable by the sluice user only)",
        ));
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => file_error(
            key,
            path,
            not_pem(
                &bytes,
                "private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)",
            ),
        ),
        other => file_error(key, path, pem_error(&other)),
    })
}

/// The trust anchors of `security.ssl.rest.truststore`.
fn root_store(path: &Path) -> Result<RootCertStore, SecurityError> {
    let mut roots = RootCertStore::empty();
    for (i, cert) in read_certs(TRUSTSTORE_KEY, path)?.into_iter().enumerate() {
        roots.add(cert).map_err(|e| {
            file_error(
                TRUSTSTORE_KEY,
                path,
                format!("certificate {} is no usable CA certificate: {e}", i + 1),
            )
        })?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA, and a certificate for `localhost` signed by it, in PEM.
    struct Pki {
        ca: String,
        cert: String,
        key: String,
    }

    fn pki() -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        Pki {
            ca: ca.pem(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    struct Files {
        dir: tempfile::TempDir,
    }

    impl Files {
        fn new(pki: &Pki) -> Self {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("ca.pem"), &pki.ca).unwrap();
            std::fs::write(dir.path().join("cert.pem"), &pki.cert).unwrap();
            std::fs::write(dir.path().join("key.pem"), &pki.key).unwrap();
            Files { dir }
        }

        fn path(&self, name: &str) -> std::path::PathBuf {
            self.dir.path().join(name)
        }

        fn config(&self, authentication: bool) -> Config {
            let mut config = Config::default();
            let ssl = &mut config.security.rest_ssl;
            ssl.enabled = true;
            ssl.authentication = authentication;
            ssl.cert = Some(self.path("cert.pem"));
            ssl.key = Some(self.path("key.pem"));
            ssl.truststore = Some(self.path("ca.pem"));
            config
        }
    }

    fn error_text<T>(result: Result<T, SecurityError>) -> String {
        match result {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn disabled_means_no_tls_on_either_side() {
        let config = Config::default();
        assert!(server_config(&config).unwrap().is_none());
        assert!(client_config(&config).unwrap().is_none());
    }

    #[test]
    fn good_files_make_a_server_and_a_client() {
        let files = Files::new(&pki());
        let server = server_config(&files.config(true)).unwrap().unwrap();
        assert_eq!(server.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let client = client_config(&files.config(true)).unwrap().unwrap();
        assert_eq!(client.roots.len(), 1);
        assert!(client.identity_pem.is_some());
        assert!(client.verify_hostname);
        // Without authentication a client needs no certificate of its own.
        let mut config = files.config(false);
        config.security.rest_ssl.cert = None;
        config.security.rest_ssl.key = None;
        let client = client_config(&config).unwrap().unwrap();
        assert!(client.identity_pem.is_none());
    }

    #[test]
    fn missing_keys_are_named() {
        let files = Files::new(&pki());
        let mut config = files.config(false);
        config.security.rest_ssl.cert = None;
        let text = error_text(server_config(&config));
        assert!(text.contains(CERT_KEY), "{text}");
        assert!(text.contains("security.ssl.rest.enabled"), "{text}");
        let mut config = files.config(true);
        config.security.rest_ssl.truststore = None;
        let text = error_text(server_config(&config));
        assert!(text.contains(TRUSTSTORE_KEY), "{text}");
        config.security.rest_ssl.key = None;
        let text = error_text(client_config(&config));
        assert!(text.contains(KEY_KEY), "{text}");
        assert!(text.contains("authentication-enabled"), "{text}");
    }

    #[test]
    fn bad_files_are_named_with_their_key() {
        let pki = pki();
        let files = Files::new(&pki);
        let cases: [(&str, &str, &[u8], &str); 6] = [
            (CERT_KEY, "cert.pem", b"not a certificate", "no PEM certificate"),
            (
                CERT_KEY,
                "cert.pem",
                b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
                "not valid PEM",
            ),
            (KEY_KEY, "key.pem", pki.cert.as_bytes(), "no PEM private key"),
            (
                KEY_KEY,
                "key.pem",
                b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
                "encrypted",
            ),
            (TRUSTSTORE_KEY, "ca.pem", &[0xfe, 0xed, 0xfe, 0xed, 0, 0], "Java keystore"),
            (TRUSTSTORE_KEY, "ca.pem", b"", "no PEM certificate"),
        ];
        for (key, name, content, expected) in cases {
            let files = Files::new(&pki);
            std::fs::write(files.path(name), content).unwrap();
            let text = error_text(server_config(&files.config(true)));
            let path = files.path(name).display().to_string();
            for part in [key, path.as_str(), expected] {
                assert!(text.contains(part), "{part} missing from: {text}");
            }
        }
        // A file that is not there.
        let mut config = files.config(false);
        config.security.rest_ssl.cert = Some(files.path("absent.pem"));
        let text = error_text(server_config(&config));
        assert!(
            text.contains("absent.pem") && text.contains(CERT_KEY),
            "{text}"
        );
        // An endless file is refused after the limit.
        config.security.rest_ssl.cert = Some("/dev/zero".into());
        let text = error_text(server_config(&config));
        assert!(text.contains("/dev/zero") && text.contains("MiB"), "{text}");
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_on_both_sides() {
        let files = Files::new(&pki());
        std::fs::write(files.path("key.pem"), pki().key).unwrap();
        for text in [
            error_text(server_config(&files.config(true))),
            error_text(client_config(&files.config(true))),
        ] {
            assert!(text.contains(KEY_KEY), "{text}");
            assert!(text.contains("not the private key"), "{text}");
        }
    }
}
