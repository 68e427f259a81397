//! A real Kubernetes control plane for the tests (etcd, kube-apiserver and
//! kube-controller-manager started by `scripts/kubernetes.sh`, one per test binary:
//! [`control_plane`]) and a stand-in for the kubelet ([`Kubelet`]), which the control plane
//! lacks.
//!
//! The stand-in registers a Node, binds the namespace's pending pods to it (it is the
//! scheduler too: a pod asking for more CPU than the node has stays Pending as Unschedulable),
//! runs each bound pod's first container as a local process with the pod's command and args
//! (`$(VAR)` expanded) and env (values, pod fields, Secret keys) (an "image" names a local binary: [`Kubelet::start`]; an unknown image leaves the pod
//! waiting in `ErrImagePull`), writes mounted ConfigMaps to their mount paths, reports the
//! pod's phase and exit code, restarts containers as the pod's `restartPolicy` says, and kills
//! the process and removes the pod when the pod is deleted (a bound pod needs the kubelet's
//! final delete).
//!
//! `SLUICE_SKIP_KUBERNETES=1` skips the Kubernetes tests.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::repo_root;

/// Where the test binaries' control planes live: `<DIR_PREFIX><pid of the test binary>`.
const DIR_PREFIX: &str = "/var/tmp/sluice-kube-test-";

/// How often the stand-in looks at the pods: the delay a test sees between a pod's creation
/// and its process, like a kubelet's reaction time.
const POLL: Duration = Duration::from_millis(100);

/// Whether the Kubernetes tests are to be skipped (`SLUICE_SKIP_KUBERNETES=1`); says so when
/// they are.
pub fn skipped() -> bool {
    let skip = std::env::var("SLUICE_SKIP_KUBERNETES").as_deref() == Ok("1");
    if skip {
        println!("SKIPPED: SLUICE_SKIP_KUBERNETES=1, not starting a Kubernetes control plane");
    }
    skip
}

/// A running control plane; it stops when the test binary ends (`scripts/kubernetes.sh`
/// watches the binary's pid).
#[derive(Debug)]
pub struct ControlPlane {
    /// Its directory: kubeconfig, logs, etcd's data.
    pub dir: PathBuf,
    /// The API server's URL, `https://127.0.0.1:PORT`.
    pub server: String,
    /// A kubeconfig for a member of `system:masters` (what `kubernetes.config.file` names).
    pub kubeconfig: PathBuf,
    token: String,
}

/// The test binary's control plane, started on first use.
pub fn control_plane() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(start)
}

fn start() -> ControlPlane {
    crate::remove_stale_dirs(DIR_PREFIX, "apiserver.pid");
    let me = std::process::id();
    let dir = PathBuf::from(format!("{DIR_PREFIX}{me}"));
    let out = Command::new(repo_root().join("scripts/kubernetes.sh"))
        .arg("start")
        .arg(&dir)
        .arg(me.to_string())
        .output()
        .expect("run scripts/kubernetes.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the Kubernetes control plane did not start:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ready = stdout
        .lines()
        .find_map(|l| l.strip_prefix("READY "))
        .unwrap_or_else(|| panic!("no READY line in {stdout:?}"));
    let field = |name: &str| {
        ready
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {name} in the READY line {ready:?}"))
            .to_string()
    };
    ControlPlane {
        dir,
        server: field("server"),
        kubeconfig: PathBuf::from(field("kubeconfig")),
        token: field("token"),
    }
}

impl ControlPlane {
    /// A client of its API as the administrator.
    pub fn api(&self) -> Api {
        Api {
            http: crate::http_client(|b| b.danger_accept_invalid_certs(true)),
            server: self.server.clone(),
            token: self.token.clone(),
        }
    }

    /// Creates a namespace with a unique name for one test and returns its name.
    pub fn namespace(&self, prefix: &str) -> String {
        let api = self.api();
        let name = format!("{prefix}-{}", crate::now_ms() % 1_000_000_000);
        api.post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        name
    }
}

/// Expands `$(NAME)` in a command element with the container's environment, as a kubelet
/// does; `$$` is a literal `$`, and a reference to an unknown variable stays as written.
fn expand(arg: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some((name, after)) = tail
            .strip_prefix("$(")
            .and_then(|t| t.split_once(')'))
            .filter(|(name, _)| env.iter().any(|(n, _)| n == name))
        {
            let value = env.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v);
            out.push_str(value.map(String::as_str).unwrap_or_default());
            rest = after;
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// A small client of the Kubernetes API: JSON in and out, errors as the server's message.
pub struct Api {
    http: reqwest::blocking::Client,
    server: String,
    token: String,
}

impl Api {
    fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> Result<Value, String> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.server))
            .bearer_auth(&self.token);
        if let Some((content_type, body)) = body {
            req = req
                .header("Content-Type", content_type)
                .body(body.to_string());
        }
        let resp = req.send().map_err(|e| format!("{method} {path}: {e}"))?;
        let status = resp.status();
        let text = resp.text().map_err(|e| format!("{method} {path}: {e}"))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            Ok(value)
        } else {
            Err(format!(
                "{method} {path}: {status}: {}",
                value["message"].as_str().unwrap_or(&value.to_string())
            ))
        }
    }

    /// GET `path`.
    pub fn get(&self, path: &str) -> Result<Value, String> {
        self.send(reqwest::Method::GET, path, None)
    }

    /// POST `body` to `path` (create).
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        self.send(
            reqwest::Method::POST,
            path,
            Some(("application/json", body)),
        )
    }

    /// A JSON merge patch of `path`.
    pub fn patch(&self, path: &str, body: &Value) -> Result<Value, String> {
        self.send(
            reqwest::Method::PATCH,
            path,
            Some(("application/merge-patch+json", body)),
        )
    }

    /// DELETE `path` with delete options `body`.
    pub fn delete(&self, path: &str, body: &Value) -> Result<Value, String> {
        self.send(
            reqwest::Method::DELETE,
            path,
            Some(("application/json", body)),
        )
    }
}

/// A pod's process the stand-in runs.
struct Running {
    uid: String,
    child: Child,
    restarts: u32,
}

/// What the stand-in's loop and the test share.
#[derive(Default)]
struct Pods {
    /// By pod name: the pods whose container runs now.
    running: BTreeMap<String, Running>,
    /// Pods whose status the stand-in has settled (terminal, unschedulable, bad image): uid.
    settled: BTreeMap<String, String>,
}

/// The kubelet (and scheduler) stand-in of one namespace; stops its loop and kills its pods'
/// processes when dropped.
pub struct Kubelet {
    stop: Arc<AtomicBool>,
    pods: Arc<Mutex<Pods>>,
    thread: Option<JoinHandle<()>>,
    /// The Node it registered.
    pub node: String,
    /// Where the pods' logs (`<pod>.log`) and working directories are.
    pub dir: PathBuf,
}

/// What the stand-in knows of its node and images.
struct Node {
    name: String,
    namespace: String,
    /// Image name -> the local binary that runs in place of the container command's first
    /// element.
    images: BTreeMap<String, PathBuf>,
    /// The node's allocatable CPU in millicores (what the scheduler checks requests against).
    cpu_millis: u64,
    dir: PathBuf,
    api_port: String,
}

impl Kubelet {
    /// Registers a Node with `cpus` CPUs and starts running the pods of `namespace` on it.
    /// `images` maps image names to local binaries.
    pub fn start(
        plane: &ControlPlane,
        namespace: &str,
        cpus: u64,
        images: &[(&str, &Path)],
    ) -> Kubelet {
        let api = plane.api();
        let name = format!("node-{namespace}");
        let dir = plane.dir.join("kubelet").join(namespace);
        std::fs::create_dir_all(&dir).expect("kubelet dir");
        api.post(
            "/api/v1/nodes",
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        )
        .unwrap_or_else(|e| panic!("registering node {name}: {e}"));
        let capacity = json!({"cpu": cpus.to_string(), "memory": "64Gi", "pods": "110"});
        api.patch(
            &format!("/api/v1/nodes/{name}/status"),
            &json!({"status": {
                "capacity": capacity, "allocatable": capacity,
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "the sluice test kubelet stand-in"}],
            }}),
        )
        .unwrap_or_else(|e| panic!("node {name} status: {e}"));
        let node = Node {
            name: name.clone(),
            namespace: namespace.to_string(),
            images: images
                .iter()
                .map(|(i, p)| (i.to_string(), p.to_path_buf()))
                .collect(),
            cpu_millis: cpus * 1000,
            dir: dir.clone(),
            api_port: plane.server.rsplit(':').next().unwrap_or("443").to_string(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let pods = Arc::new(Mutex::new(Pods::default()));
        let thread = {
            let (stop, pods) = (stop.clone(), pods.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = node.sync(&api, &pods) {
                        eprintln!("kubelet stand-in {}: {e}", node.name);
                    }
                    std::thread::sleep(POLL);
                }
                for (_, mut r) in std::mem::take(&mut lock(&pods).running) {
                    kill(&mut r.child, Duration::ZERO);
                }
            })
        };
        Kubelet {
            stop,
            pods,
            thread: Some(thread),
            node: name,
            dir,
        }
    }

    /// The pid of each running pod's process, by pod name.
    pub fn pids(&self) -> BTreeMap<String, u32> {
        lock(&self.pods)
            .running
            .iter()
            .map(|(n, r)| (n.clone(), r.child.id()))
            .collect()
    }

    /// The log of a pod's container (stdout and stderr of every run).
    pub fn log(&self, pod: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{pod}.log"))).unwrap_or_default()
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(pods: &Mutex<Pods>) -> std::sync::MutexGuard<'_, Pods> {
    pods.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends a process group: SIGTERM, then SIGKILL after `grace`.
fn kill(child: &mut Child, grace: Duration) {
    let group = -(child.id() as i32);
    // SAFETY: kill(2) on the process group the stand-in created for this child.
    unsafe { libc::kill(group, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above.
    unsafe { libc::kill(group, libc::SIGKILL) };
    let _ = child.wait();
}

/// A CPU quantity ("2", "500m", "0.5") in millicores.
fn cpu_millis(q: &str) -> Option<u64> {
    match q.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => q.parse::<f64>().ok().map(|c| (c * 1000.0).ceil() as u64),
    }
}

impl Node {
    fn pods_path(&self) -> String {
        format!("/api/v1/namespaces/{}/pods", self.namespace)
    }

    fn set_status(&self, api: &Api, pod: &str, status: Value) -> Result<(), String> {
        api.patch(
            &format!("{}/{pod}/status", self.pods_path()),
            &json!({ "status": status }),
        )
        .map(|_| ())
    }

    /// One look at the namespace's pods: schedule, start, report, restart, remove.
    fn sync(&self, api: &Api, pods: &Mutex<Pods>) -> Result<(), String> {
        let list = api.get(&self.pods_path())?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let mut state = lock(pods);
        // Processes whose pod is gone (or replaced by a new one of the same name).
        let live: BTreeMap<&str, &str> = items
            .iter()
            .filter_map(|p| {
                Some((
                    p["metadata"]["name"].as_str()?,
                    p["metadata"]["uid"].as_str()?,
                ))
            })
            .collect();
        let gone: Vec<String> = state
            .running
            .iter()
            .filter(|(n, r)| live.get(n.as_str()) != Some(&r.uid.as_str()))
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            if let Some(mut r) = state.running.remove(&name) {
                kill(&mut r.child, Duration::ZERO);
            }
        }
        state
            .settled
            .retain(|n, uid| live.get(n.as_str()) == Some(&uid.as_str()));
        for pod in &items {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
            if let Some(grace) = pod["metadata"]["deletionTimestamp"].as_str().map(|_| {
                pod["metadata"]["deletionGracePeriodSeconds"]
                    .as_u64()
                    .unwrap_or(30)
            }) {
                if let Some(mut r) = state.running.remove(name) {
                    kill(&mut r.child, Duration::from_secs(grace.min(5)));
                }
                // The kubelet's final delete: the pod is gone once its process is.
                let _ = api.delete(
                    &format!("{}/{name}", self.pods_path()),
                    &json!({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}),
                );
                continue;
            }
            let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
            if node.is_empty() {
                if !state.settled.contains_key(name) {
                    self.schedule(api, pod, name, uid, &mut state)?;
                }
                continue;
            }
            if node != self.name || state.settled.contains_key(name) {
                continue;
            }
            match state.running.get_mut(name) {
                None => self.run(api, pod, name, uid, 0, &mut state)?,
                Some(r) => {
                    let Ok(Some(exit)) = r.child.try_wait() else {
                        continue;
                    };
                    let code = exit.code().unwrap_or_else(|| {
                        128 + std::os::unix::process::ExitStatusExt::signal(&exit).unwrap_or(0)
                    });
                    let restarts = r.restarts;
                    state.running.remove(name);
                    let policy = pod["spec"]["restartPolicy"].as_str().unwrap_or("Always");
                    if policy == "Always" || (policy == "OnFailure" && code != 0) {
                        self.run(api, pod, name, uid, restarts + 1, &mut state)?;
                    } else {
                        let phase = if code == 0 { "Succeeded" } else { "Failed" };
                        state.settled.insert(name.to_string(), uid.to_string());
                        self.set_status(api, name, json!({
                            "phase": phase,
                            "containerStatuses": [self.container_status(pod, restarts, json!({
                                "terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" }}
                            }))],
                        }))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Binds a pending pod to the node, or marks it Unschedulable when it asks for more CPU
    /// than the node has.
    fn schedule(
        &self,
        api: &Api,
        pod: &Value,
        name: &str,
        uid: &str,
        state: &mut Pods,
    ) -> Result<(), String> {
        let wanted: u64 = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| cpu_millis(c["resources"]["requests"]["cpu"].as_str()?))
            .sum();
        if wanted > self.cpu_millis {
            state.settled.insert(name.to_string(), uid.to_string());
            return self.set_status(api, name, json!({
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": format!("0/1 nodes are available: 1 Insufficient cpu (requested {wanted}m, node has {}m).", self.cpu_millis)}],
            }));
        }
        api.post(
            &format!("{}/{name}/binding", self.pods_path()),
            &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "uid": uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": self.name}}),
        )
        .map(|_| ())
    }

    fn container_status(&self, pod: &Value, restarts: u32, state: Value) -> Value {
        let c = &pod["spec"]["containers"][0];
        json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": state.get("running").is_some(),
               "restartCount": restarts, "state": state})
    }

    /// Starts the pod's first container as a process, or reports why it cannot.
    fn run(
        &self,
        api: &Api,
        pod: &Value,
        name: &str,
        uid: &str,
        restarts: u32,
        state: &mut Pods,
    ) -> Result<(), String> {
        let container = &pod["spec"]["containers"][0];
        let image = container["image"].as_str().unwrap_or_default();
        let waiting = |reason: &str, message: String| {
            json!({"phase": "Pending", "containerStatuses": [self.container_status(pod, restarts,
                json!({"waiting": {"reason": reason, "message": message}}))]})
        };
        let Some(binary) = self.images.get(image) else {
            state.settled.insert(name.to_string(), uid.to_string());
            return self.set_status(
                api,
                name,
                waiting(
                    "ErrImagePull",
                    format!(
                        "failed to pull image {image:?}: not found (the test kubelet knows {:?})",
                        self.images.keys().collect::<Vec<_>>()
                    ),
                ),
            );
        };
        let config = self
            .mount_config_maps(api, pod)
            .and_then(|()| self.env(api, pod, container));
        let env = match config {
            Ok(env) => env,
            Err(e) => {
                state.settled.insert(name.to_string(), uid.to_string());
                return self.set_status(api, name, waiting("CreateContainerConfigError", e));
            }
        };
        let mut argv: Vec<String> = container["command"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(container["args"].as_array().into_iter().flatten())
            .filter_map(|a| a.as_str().map(|a| expand(a, &env)))
            .collect();
        if argv.is_empty() {
            argv.push(binary.display().to_string());
        }
        // The image's binary stands for the command of the same file name.
        let program = if Path::new(&argv[0]).file_name() == binary.file_name() {
            binary.clone()
        } else {
            PathBuf::from(&argv[0])
        };
        let workdir = self.dir.join("pods").join(name);
        std::fs::create_dir_all(&workdir).map_err(|e| e.to_string())?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .map_err(|e| e.to_string())?;
        let spawned = Command::new(&program)
            .args(&argv[1..])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOSTNAME", name)
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", &self.api_port)
            .envs(env)
            .current_dir(&workdir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .process_group(0)
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                state.settled.insert(name.to_string(), uid.to_string());
                return self.set_status(api, name, json!({"phase": "Failed",
                    "containerStatuses": [self.container_status(pod, restarts, json!({
                        "terminated": {"exitCode": 128, "reason": "StartError",
                                       "message": format!("starting {}: {e}", program.display())}}))]}));
            }
        };
        state.running.insert(
            name.to_string(),
            Running {
                uid: uid.to_string(),
                child,
                restarts,
            },
        );
        let now = "1970-01-01T00:00:00Z";
        self.set_status(api, name, json!({
            "phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}], "hostIP": "127.0.0.1",
            "startTime": now,
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"},
                           {"type": "ContainersReady", "status": "True"}, {"type": "Ready", "status": "True"}],
            "containerStatuses": [self.container_status(pod, restarts, json!({"running": {"startedAt": now}}))],
        }))
    }

    /// The container's environment: plain values, the downward API's pod fields and keys of
    /// Secrets.
    fn env(
        &self,
        api: &Api,
        pod: &Value,
        container: &Value,
    ) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        for var in container["env"].as_array().into_iter().flatten() {
            let name = var["name"].as_str().unwrap_or_default().to_string();
            let value = if let Some(v) = var["value"].as_str() {
                v.to_string()
            } else if let Some(path) = var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                match path {
                    "metadata.name" => pod["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    "metadata.namespace" => self.namespace.clone(),
                    "metadata.uid" => pod["metadata"]["uid"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    "spec.nodeName" => self.name.clone(),
                    "status.podIP" | "status.hostIP" => "127.0.0.1".to_string(),
                    other => {
                        return Err(format!(
                            "env {name}: the test kubelet does not support fieldRef {other}"
                        ));
                    }
                }
            } else if let Some(secret) = var["valueFrom"]["secretKeyRef"].as_object() {
                let secret_name = secret["name"].as_str().unwrap_or_default();
                let key = secret["key"].as_str().unwrap_or_default();
                let object = api
                    .get(&format!(
                        "/api/v1/namespaces/{}/secrets/{secret_name}",
                        self.namespace
                    ))
                    .map_err(|e| format!("env {name}: secret {secret_name:?} not found: {e}"))?;
                let encoded = object["data"][key].as_str().ok_or_else(|| {
                    format!("env {name}: secret {secret_name:?} has no key {key:?}")
                })?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|e| format!("env {name}: secret {secret_name:?}: {e}"))?;
                String::from_utf8_lossy(&bytes).into_owned()
            } else if var.get("valueFrom").is_some() {
                return Err(format!(
                    "env {name}: the test kubelet supports only value, fieldRef and secretKeyRef"
                ));
            } else {
                String::new()
            };
            out.push((name, value));
        }
        Ok(out)
    }

    /// Writes each mounted ConfigMap's keys as files at the mount path (shared by the pods of
    /// one host, as a test's paths are its own).
    fn mount_config_maps(&self, api: &Api, pod: &Value) -> Result<(), String> {
        let volumes = pod["spec"]["volumes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for mount in pod["spec"]["containers"][0]["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let vol_name = mount["name"].as_str().unwrap_or_default();
            let Some(volume) = volumes.iter().find(|v| v["name"] == vol_name) else {
                continue;
            };
            let Some(cm) = volume["configMap"]["name"].as_str() else {
                continue;
            };
            let map = api
                .get(&format!(
                    "/api/v1/namespaces/{}/configmaps/{cm}",
                    self.namespace
                ))
                .map_err(|e| format!("configmap {cm:?} of volume {vol_name}: {e}"))?;
            let dir = PathBuf::from(mount["mountPath"].as_str().unwrap_or_default());
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let items: Vec<(String, String)> = match volume["configMap"]["items"].as_array() {
                Some(items) => items
                    .iter()
                    .filter_map(|i| {
                        Some((
                            i["key"].as_str()?.to_string(),
                            i["path"].as_str()?.to_string(),
                        ))
                    })
                    .collect(),
                None => map["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| (k.clone(), k.clone()))
                    .collect(),
            };
            for (key, path) in items {
                let data = map["data"][&key].as_str().unwrap_or_default();
                std::fs::write(dir.join(&path), data).map_err(|e| format!("{path}: {e}"))?;
            }
        }
        Ok(())
    }
}
