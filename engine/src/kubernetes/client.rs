//! A small client of the Kubernetes API (plain JSON over HTTPS): credentials from a kubeconfig
//! (`kubernetes.config.file`, $KUBECONFIG, ~/.kube/config) or from the pod's service account,
//! and the few calls sluice makes: get, create, delete, list and watch.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::error::KubeError;
use crate::config::Config;

/// Where a pod's service account credentials are mounted.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How to reach and authenticate to one API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `https://host:port`.
    pub server: String,
    /// A bearer token.
    pub token: Option<String>,
    /// PEM of the CA certificates to trust (else the web's).
    pub ca_pem: Option<Vec<u8>>,
    /// PEM of a client certificate followed by its key.
    pub client_pem: Option<Vec<u8>>,
    /// Skip checking the server's certificate (kubeconfig `insecure-skip-tls-verify`).
    pub insecure: bool,
    /// Where these came from, for error messages.
    pub origin: String,
}

/// The kubeconfig to read: `kubernetes.config.file`, else $KUBECONFIG (its first file), else
/// `~/.kube/config` when it exists; `None`: use the in-cluster service account.
pub fn kubeconfig_path(config: &Config) -> Option<PathBuf> {
    if let Some(path) = &config.kubernetes.config_file {
        return Some(path.clone());
    }
    if let Some(first) = std::env::var_os("KUBECONFIG")
        .and_then(|v| std::env::split_paths(&v).find(|p| !p.as_os_str().is_empty()))
    {
        return Some(first);
    }
    let home = PathBuf::from(std::env::var_os("HOME")?).join(".kube/config");
    home.exists().then_some(home)
}

/// Reads the credentials sluice uses: from the kubeconfig [`kubeconfig_path`] picks, else the
/// pod's service account.
pub fn credentials(config: &Config) -> Result<Credentials, KubeError> {
    match kubeconfig_path(config) {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| KubeError::Config {
                origin: path.display().to_string(),
                problem: format!("cannot read it: {e}"),
            })?;
            from_kubeconfig(&text, &path)
        }
        None => in_cluster(),
    }
}

/// The current context's cluster and user of a kubeconfig's text (`path` resolves relative
/// file names and names the file in errors).
pub fn from_kubeconfig(text: &str, path: &Path) -> Result<Credentials, KubeError> {
    let origin = path.display().to_string();
    let bad = |problem: String| KubeError::Config {
        origin: origin.clone(),
        problem,
    };
    let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| bad(format!("not YAML: {e}")))?;
    let named = |list: &str, name: &str| -> Result<Value, KubeError> {
        doc[list]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == name)
            .cloned()
            .ok_or_else(|| bad(format!("no entry {name:?} in {list}")))
    };
    let context_name = doc["current-context"]
        .as_str()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| bad("no current-context".into()))?;
    let context = named("contexts", context_name)?;
    let cluster_name = context["context"]["cluster"]
        .as_str()
        .ok_or_else(|| bad(format!("context {context_name:?} names no cluster")))?;
    let cluster = named("clusters", cluster_name)?["cluster"].clone();
    let user = match context["context"]["user"].as_str() {
        Some(name) => named("users", name)?["user"].clone(),
        None => Value::Null,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    // `<key>-data` is base64 of the file's content; `<key>` names the file.
    let data_or_file = |entry: &Value, key: &str| -> Result<Option<Vec<u8>>, KubeError> {
        if let Some(b64) = entry[format!("{key}-data")].as_str() {
            return base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map(Some)
                .map_err(|e| bad(format!("{key}-data is not base64: {e}")));
        }
        match entry[key].as_str() {
            Some(file) => {
                let file = dir.join(file);
                std::fs::read(&file)
                    .map(Some)
                    .map_err(|e| bad(format!("cannot read {key} {}: {e}", file.display())))
            }
            None => Ok(None),
        }
    };
    let server = cluster["server"]
        .as_str()
        .ok_or_else(|| bad(format!("cluster {cluster_name:?} has no server")))?
        .trim_end_matches('/')
        .to_string();
    let token = match user["token"].as_str() {
        Some(t) => Some(t.to_string()),
        None => match user["tokenFile"].as_str() {
            Some(file) => Some(
                std::fs::read_to_string(dir.join(file))
                    .map_err(|e| bad(format!("cannot read tokenFile {file}: {e}")))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        },
    };
    let client_pem = match (
        data_or_file(&user, "client-certificate")?,
        data_or_file(&user, "client-key")?,
    ) {
        (Some(mut cert), Some(key)) => {
            cert.push(b'\n');
            cert.extend(key);
            Some(cert)
        }
        _ => None,
    };
    Ok(Credentials {
        server,
        token,
        ca_pem: data_or_file(&cluster, "certificate-authority")?,
        client_pem,
        insecure: cluster["insecure-skip-tls-verify"] == true,
        origin,
    })
}

/// A pod's own credentials: its service account's token and CA, the API server from
/// `KUBERNETES_SERVICE_HOST`/`_PORT`.
fn in_cluster() -> Result<Credentials, KubeError> {
    let origin =
        "the in-cluster service account (no kubeconfig: set kubernetes.config.file or KUBECONFIG)"
            .to_string();
    let env = |name: &str| {
        std::env::var(name).map_err(|_| KubeError::Config {
            origin: origin.clone(),
            problem: format!("{name} is not set: not running in a pod"),
        })
    };
    let host = env("KUBERNETES_SERVICE_HOST")?;
    let port = env("KUBERNETES_SERVICE_PORT")?;
    let dir = Path::new(SERVICE_ACCOUNT_DIR);
    let read = |name: &str| {
        std::fs::read(dir.join(name)).map_err(|e| KubeError::Config {
            origin: origin.clone(),
            problem: format!("cannot read {}: {e}", dir.join(name).display()),
        })
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Ok(Credentials {
        server: format!("https://{host}:{port}"),
        token: Some(String::from_utf8_lossy(&read("token")?).trim().to_string()),
        ca_pem: Some(read("ca.crt")?),
        client_pem: None,
        insecure: false,
        origin,
    })
}

/// A client of one API server.
#[derive(Debug, Clone)]
pub struct KubeClient {
    http: reqwest::Client,
    server: String,
    token: Option<String>,
}

/// Whether a call's object was there.
fn not_found(e: &KubeError) -> bool {
    matches!(e, KubeError::Api { status: 404, .. })
}

impl KubeClient {
    /// A client with `credentials`.
    pub fn new(credentials: &Credentials) -> Result<Self, KubeError> {
        let bad = |problem: String| KubeError::Config {
            origin: credentials.origin.clone(),
            problem,
        };
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .danger_accept_invalid_certs(credentials.insecure);
        if let Some(pem) = &credentials.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| bad(format!("the CA certificate is not PEM: {e}")))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(pem) = &credentials.client_pem {
            builder = builder.identity(
                reqwest::Identity::from_pem(pem)
                    .map_err(|e| bad(format!("the client certificate or key is not PEM: {e}")))?,
            );
        }
        Ok(KubeClient {
            http: builder
                .build()
                .map_err(|e| bad(format!("cannot build an HTTP client: {e}")))?,
            server: credentials.server.clone(),
            token: credentials.token.clone(),
        })
    }

    /// A client with the credentials the configuration leads to ([`credentials`]).
    pub fn from_config(config: &Config) -> Result<Self, KubeError> {
        KubeClient::new(&credentials(config)?)
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, format!("{}{path}", self.server));
        if let Some(token) = &self.token {
            r = r.bearer_auth(token);
        }
        r
    }

    async fn send(
        &self,
        what: String,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, KubeError> {
        let response = request
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| KubeError::Unreachable {
                server: self.server.clone(),
                cause: e.to_string(),
            })?;
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        let json: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if !(200..300).contains(&status) {
            let message = json["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| body.chars().take(300).collect());
            return Err(KubeError::Api {
                what,
                status,
                message,
            });
        }
        Ok(json)
    }

    /// GETs an object or list.
    pub async fn get(&self, path: &str) -> Result<Value, KubeError> {
        self.send(
            format!("GET {path}"),
            self.request(reqwest::Method::GET, path),
        )
        .await
    }

    /// GETs an object; `None` if it does not exist.
    pub async fn get_opt(&self, path: &str) -> Result<Option<Value>, KubeError> {
        match self.get(path).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates an object in the collection at `path`.
    pub async fn create(&self, path: &str, object: &Value) -> Result<Value, KubeError> {
        self.send(
            format!("POST {path}"),
            self.request(reqwest::Method::POST, path).json(object),
        )
        .await
    }

    /// Changes an object with a JSON merge patch.
    pub async fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, KubeError> {
        self.send(
            format!("PATCH {path}"),
            self.request(reqwest::Method::PATCH, path)
                .header("Content-Type", "application/merge-patch+json")
                .body(patch.to_string()),
        )
        .await
    }

    /// Deletes an object (its dependents in the background, as kubectl does); `false` if it
    /// was already gone.
    pub async fn delete(&self, path: &str) -> Result<bool, KubeError> {
        let body = serde_json::json!({"propagationPolicy": "Background"});
        match self
            .send(
                format!("DELETE {path}"),
                self.request(reqwest::Method::DELETE, path).json(&body),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Starts a watch of the collection at `path` (with a `?` query already or not) from
    /// `resource_version`; the server ends it after `timeout_s`.
    pub async fn watch(
        &self,
        path: &str,
        resource_version: &str,
        timeout_s: u64,
    ) -> Result<Watch, KubeError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = format!(
            "{path}{sep}watch=1&resourceVersion={resource_version}&allowWatchBookmarks=true&timeoutSeconds={timeout_s}"
        );
        let response = self
            .request(reqwest::Method::GET, &url)
            .timeout(Duration::from_secs(timeout_s + 30))
            .send()
            .await
            .map_err(|e| KubeError::Unreachable {
                server: self.server.clone(),
                cause: e.to_string(),
            })?;
        let status = response.status().as_u16();
        if status != 200 {
            let message = response.text().await.unwrap_or_default();
            return Err(KubeError::Api {
                what: format!("watch {path}"),
                status,
                message,
            });
        }
        Ok(Watch {
            response,
            buffer: Vec::new(),
        })
    }
}

/// The events of one watch, newline-delimited JSON.
#[derive(Debug)]
pub struct Watch {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Watch {
    /// The next event (`{"type": ..., "object": ...}`); `None` when the server ended the watch.
    pub async fn next(&mut self) -> Result<Option<Value>, KubeError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return serde_json::from_slice(&line)
                    .map(Some)
                    .map_err(|e| KubeError::Watch(format!("an event is not JSON: {e}")));
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => return Ok(None),
                Err(e) => return Err(KubeError::Watch(e.to_string())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "
apiVersion: v1
kind: Config
current-context: b
clusters:
- name: one
  cluster:
    server: https://one:6443/
    insecure-skip-tls-verify: true
- name: two
  cluster:
    server: https://two:6443
    certificate-authority-data: aGVsbG8=
users:
- name: admin
  user:
    token: secret-token
contexts:
- name: a
  context: {cluster: one, user: admin}
- name: b
  context: {cluster: two, user: admin}
";

    #[test]
    fn the_current_context_picks_cluster_and_user() {
        let c = from_kubeconfig(KUBECONFIG, Path::new("/tmp/kubeconfig")).unwrap();
        assert_eq!(c.server, "https://two:6443");
        assert_eq!(c.token.as_deref(), Some("secret-token"));
        assert_eq!(c.ca_pem.as_deref(), Some(&b"hello"[..]));
        assert!(!c.insecure);
        let a = from_kubeconfig(
            &KUBECONFIG.replace("current-context: b", "current-context: a"),
            Path::new("/tmp/kubeconfig"),
        )
        .unwrap();
        assert_eq!(a.server, "https://one:6443");
        assert!(a.insecure);
    }

    #[test]
    fn a_broken_kubeconfig_names_the_problem_and_the_file() {
        let e = from_kubeconfig(
            &KUBECONFIG.replace("current-context: b", "current-context: c"),
            Path::new("/x/kc"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("/x/kc") && e.contains("no entry \"c\" in contexts"),
            "{e}"
        );
        let e = from_kubeconfig("[", Path::new("/x/kc"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not YAML"), "{e}");
    }
}
