//! How cluster processes trust each other: a shared cluster secret, TLS on every connection, and
//! a mutual proof of the secret bound to the TLS session.
//!
//! Each process makes a fresh self-signed certificate at start; certificates are not what is
//! trusted. After the TLS handshake both sides derive keying material from the session
//! (RFC 5705 exporter) and send an HMAC-SHA256 of it under the cluster secret, each with its own
//! role label. A peer without the secret cannot produce the proof, and a man in the middle has
//! two different sessions, so relayed proofs do not verify. Everything after the proofs is
//! encrypted by TLS, so a stranger can neither join, command, nor read the cluster's traffic.
//!
//! The REST API is the cluster's door for people, not processes: its TLS (certificates from
//! PEM files, optionally required of clients) lives in [`rest_tls`].

pub mod rest_tls;

use std::path::Path;
use std::sync::Arc;

use aws_lc_rs::hmac;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::config::Config;

/// The environment variable that can hold the cluster secret.
pub const SECRET_ENV: &str = "SLUICE_CLUSTER_SECRET";
/// The file in the configuration directory that the standalone scripts generate.
pub const SECRET_FILE_NAME: &str = ".cluster-secret";
/// The most bytes read from a secret file. Reading stops there, so a misconfigured
/// `security.cluster.secret-file: /dev/zero` fails at once instead of reading forever.
pub const MAX_SECRET_FILE_SIZE: u64 = 16 * 1024;
/// Exporter label for the session-bound proofs.
pub(crate) const EXPORTER_LABEL: &[u8] = b"EXPORTER-sluice-cluster-auth";

/// Why a process could not set up its security.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityError {
    /// No secret was configured anywhere.
    #[error(
        "no cluster secret: set security.cluster.secret or security.cluster.secret-file, or the environment variable {SECRET_ENV}, or create {SECRET_FILE_NAME} in the configuration directory (scripts/start-cluster.sh does)"
    )]
    NoSecret,
    /// The secret file could not be read.
    #[error("cannot read the cluster secret file {path}: {source}")]
    SecretFile {
        /// Which file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The secret file is larger than any secret: probably the wrong file (`/dev/zero`, a log).
    #[error(
        "{from} names {path}, which holds more than {limit} bytes; a cluster secret is a short line (the limit is {limit} bytes)"
    )]
    SecretFileTooLarge {
        /// The key or place that named the file.
        from: String,
        /// Which file.
        path: String,
        /// [`MAX_SECRET_FILE_SIZE`].
        limit: u64,
    },
    /// The secret is too short to be a secret.
    #[error("the cluster secret from {0} is shorter than 16 characters")]
    WeakSecret(String),
    /// Certificate or TLS setup failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// A file the REST API's TLS needs is not configured.
    #[error("{why} {what}: set {key} (a PEM file)")]
    RestTlsUnset {
        /// The key to set.
        key: &'static str,
        /// Which setting needs it.
        why: &'static str,
        /// What the file holds.
        what: &'static str,
    },
    /// A file of the REST API's TLS cannot be used.
    #[error("{key} names {path}, which cannot be used: {reason}")]
    RestTlsFile {
        /// The key that names the file.
        key: &'static str,
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// The secret all processes of a cluster share.
#[derive(Clone)]
pub struct ClusterSecret(Arc<Vec<u8>>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(******)")
    }
}

impl ClusterSecret {
    /// A secret from bytes (trailing whitespace of files is not part of it).
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        ClusterSecret(Arc::new(secret.as_ref().trim_ascii_end().to_vec()))
    }

    /// The secret in hex, for a child process this one starts (given on its standard input,
    /// which no other process can read).
    pub(crate) fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The secret [`to_hex`](Self::to_hex) wrote.
    pub(crate) fn from_hex(text: &str) -> Option<Self> {
        let text = text.trim();
        if !text.len().is_multiple_of(2) || text.is_empty() {
            return None;
        }
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some(ClusterSecret(Arc::new(bytes)))
    }

    /// A random secret for a cluster that lives in one process.
    pub fn random() -> Self {
        let bytes: [u8; 32] = rand::random();
        ClusterSecret(Arc::new(bytes.to_vec()))
    }

    /// Finds the secret: the config key, the configured file, the environment, then
    /// `<conf_dir>/.cluster-secret`.
    pub fn resolve(config: &Config, conf_dir: Option<&Path>) -> Result<Self, SecurityError> {
        let checked = |bytes: Vec<u8>, from: String| {
            let s = ClusterSecret::new(bytes);
            if s.0.len() < 16 {
                Err(SecurityError::WeakSecret(from))
            } else {
                Ok(s)
            }
        };
        let read = |path: &Path, from: &str| read_bounded(path, from);
        if let Some(secret) = &config.security.cluster_secret {
            return checked(secret.as_bytes().to_vec(), "security.cluster.secret".into());
        }
        if let Some(path) = &config.security.cluster_secret_file {
            return checked(
                read(path, "security.cluster.secret-file")?,
                path.display().to_string(),
            );
        }
        if let Ok(secret) = std::env::var(SECRET_ENV) {
            return checked(secret.into_bytes(), SECRET_ENV.into());
        }
        if let Some(dir) = conf_dir {
            let path = dir.join(SECRET_FILE_NAME);
            if path.exists() {
                return checked(
                    read(&path, "the configuration directory")?,
                    path.display().to_string(),
                );
            }
        }
        Err(SecurityError::NoSecret)
    }

    /// The length of a proof in bytes (an HMAC-SHA256).
    pub(crate) const PROOF_LEN: usize = 32;

    /// The proof that the holder of this secret is on the TLS session with keying material
    /// `ekm`, in the given role.
    pub(crate) fn proof(&self, ekm: &[u8], role: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.0);
        let mut ctx = hmac::Context::with_key(&key);
        ctx.update(role);
        ctx.update(ekm);
        ctx.sign().as_ref().to_vec()
    }

    /// Checks a peer's proof in constant time.
    pub(crate) fn verify(&self, ekm: &[u8], role: &[u8], proof: &[u8]) -> bool {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.0);
        let mut msg = role.to_vec();
        msg.extend_from_slice(ekm);
        hmac::verify(&key, &msg, proof).is_ok()
    }
}

/// Reads a secret file of at most [`MAX_SECRET_FILE_SIZE`] bytes; `from` names who named it.
fn read_bounded(path: &Path, from: &str) -> Result<Vec<u8>, SecurityError> {
    use std::io::Read;
    let io_error = |source| SecurityError::SecretFile {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_FILE_SIZE + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    if bytes.len() as u64 > MAX_SECRET_FILE_SIZE {
        return Err(SecurityError::SecretFileTooLarge {
            from: from.to_owned(),
            path: path.display().to_string(),
            limit: MAX_SECRET_FILE_SIZE,
        });
    }
    Ok(bytes)
}

/// Exports keying material from a QUIC connection.
pub(crate) fn export_quic(conn: &quinn::Connection) -> Result<[u8; 32], String> {
    let mut out = [0u8; 32];
    conn.export_keying_material(&mut out, EXPORTER_LABEL, b"")
        .map_err(|e| format!("{e:?}"))?;
    Ok(out)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A TLS server configuration with a fresh self-signed certificate.
pub fn server_tls(alpn: &[u8]) -> Result<rustls::ServerConfig, SecurityError> {
    let certified = rcgen::generate_simple_self_signed(vec!["sluice".to_string()])
        .map_err(|e| SecurityError::Tls(e.to_string()))?;
    let cert = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| SecurityError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .map_err(|e| SecurityError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

/// A TLS client configuration that accepts the server's self-signed certificate: trust comes
/// from the session-bound secret proofs, not from certificates.
pub fn client_tls(alpn: &[u8]) -> Result<rustls::ClientConfig, SecurityError> {
    let provider = provider();
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| SecurityError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(SecretBasedTrust(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

/// Accepts any certificate but still checks that the server holds its key (handshake
/// signatures); identity is established by the secret proofs afterwards.
#[derive(Debug)]
struct SecretBasedTrust(Arc<CryptoProvider>);

impl ServerCertVerifier for SecretBasedTrust {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_with_the_same_secret_session_and_role() {
        let a = ClusterSecret::new("a-long-enough-cluster-secret");
        let b = ClusterSecret::new("another-long-cluster-secret!");
        let ekm = [7u8; 32];
        let p = a.proof(&ekm, b"client");
        assert!(a.verify(&ekm, b"client", &p));
        assert!(!a.verify(&ekm, b"server", &p));
        assert!(!a.verify(&[8u8; 32], b"client", &p));
        assert!(!b.verify(&ekm, b"client", &p));
        assert!(!a.verify(&ekm, b"client", b"garbage"));
    }

    #[test]
    fn secret_resolution_order_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        std::fs::write(
            dir.path().join(SECRET_FILE_NAME),
            "from-the-conf-dir-file\n",
        )
        .unwrap();
        if std::env::var(SECRET_ENV).is_err() {
            let s = ClusterSecret::resolve(&config, Some(dir.path())).unwrap();
            assert_eq!(&**s.0, b"from-the-conf-dir-file");
            assert!(matches!(
                ClusterSecret::resolve(&config, None),
                Err(SecurityError::NoSecret)
            ));
        }
        config.security.cluster_secret = Some("short".into());
        assert!(matches!(
            ClusterSecret::resolve(&config, None),
            Err(SecurityError::WeakSecret(_))
        ));
        config.security.cluster_secret = None;
        config.security.cluster_secret_file = Some(dir.path().join("missing"));
        let err = ClusterSecret::resolve(&config, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn an_endless_secret_file_is_refused_after_the_limit() {
        let mut config = Config::default();
        config.security.cluster_secret_file = Some("/dev/zero".into());
        let err = ClusterSecret::resolve(&config, None).unwrap_err();
        assert!(
            matches!(err, SecurityError::SecretFileTooLarge { limit, .. } if limit == MAX_SECRET_FILE_SIZE),
            "{err}"
        );
        let text = err.to_string();
        for part in [
            "security.cluster.secret-file",
            "/dev/zero",
            &MAX_SECRET_FILE_SIZE.to_string(),
        ] {
            assert!(text.contains(part), "{part} missing from: {text}");
        }
        // A file of exactly the limit is still read.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, vec![b'x'; MAX_SECRET_FILE_SIZE as usize]).unwrap();
        config.security.cluster_secret_file = Some(path);
        assert!(ClusterSecret::resolve(&config, None).is_ok());
    }
}
