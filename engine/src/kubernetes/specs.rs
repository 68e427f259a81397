//! The Kubernetes objects of a sluice cluster and what a pod's status means, with no I/O.
//!
//! A cluster named `C` (`kubernetes.cluster-id`) is: the Deployment `C` (one JobManager pod),
//! the Secret `C-secret` (the cluster secret, owned by the Deployment), the Service `C-rest`
//! (the REST API, owned by the Deployment) and the TaskManager pods `C-taskmanager-…`, which
//! the JobManager creates owned by the Deployment: deleting the Deployment deletes them all.

use serde_json::{Value, json};

use crate::config::{Config, ServiceExposedType};
use crate::resource::application::ApplicationJob;
use crate::security::SECRET_ENV;

/// The label every object of a sluice cluster carries, valued with the cluster id.
pub const CLUSTER_LABEL: &str = "app";
/// The label naming the role of a pod: `jobmanager` or `taskmanager`.
pub const COMPONENT_LABEL: &str = "component";
/// The label marking sluice's objects.
pub const TYPE_LABEL: &str = "type";
/// Its value.
pub const TYPE_VALUE: &str = "sluice-native-kubernetes";
/// The key of the cluster secret in the Secret `C-secret`.
pub const SECRET_KEY: &str = "cluster-secret";
/// The name of the one container of each pod.
const CONTAINER: &str = "sluice";
/// The command of every pod of a session: the image's `sluice`. An application cluster whose
/// program comes from a job artifact in the image runs that artifact instead.
pub const SLUICE: &str = "sluice";
/// The argument of `sluice kubernetes-jobmanager` carrying an application cluster's job.
pub const JOB_ARG: &str = "--job";
/// An application cluster's Deployment annotation with its job's id, once submitted.
pub const JOB_ID_ANNOTATION: &str = "sluice/job-id";
/// An application cluster's Deployment annotation with its job's final state.
pub const JOB_STATE_ANNOTATION: &str = "sluice/job-state";
/// An application cluster's Deployment annotation with why its job failed (a JSON list).
pub const JOB_CAUSES_ANNOTATION: &str = "sluice/job-causes";
/// At most this many causes, of at most this many bytes each, go into the annotation (the API
/// server limits a object's annotations to 256 KiB).
const MAX_CAUSES: usize = 5;
const MAX_CAUSE_BYTES: usize = 8 * 1024;

/// The Service of a cluster's REST API.
pub fn rest_service_name(cluster_id: &str) -> String {
    format!("{cluster_id}-rest")
}

/// The Secret holding a cluster's secret.
pub fn secret_name(cluster_id: &str) -> String {
    format!("{cluster_id}-secret")
}

/// `app=C,component=ROLE`: selects a cluster's pods of one role.
pub fn selector(cluster_id: &str, component: &str) -> String {
    format!("{CLUSTER_LABEL}={cluster_id},{COMPONENT_LABEL}={component}")
}

fn labels(cluster_id: &str, component: &str) -> Value {
    json!({CLUSTER_LABEL: cluster_id, COMPONENT_LABEL: component, TYPE_LABEL: TYPE_VALUE})
}

/// An `ownerReferences` entry naming the cluster's Deployment.
pub fn owned_by_deployment(cluster_id: &str, uid: &str) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": cluster_id, "uid": uid,
            "controller": true, "blockOwnerDeletion": true}])
}

/// Environment of every pod: its own name, namespace and IP from the downward API, the
/// cluster secret from the Secret, and the log level.
fn env(cluster_id: &str) -> Value {
    let field = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
    json!([
        field("POD_NAME", "metadata.name"),
        field("POD_NAMESPACE", "metadata.namespace"),
        field("POD_IP", "status.podIP"),
        {"name": SECRET_ENV, "valueFrom": {"secretKeyRef": {"name": secret_name(cluster_id), "key": SECRET_KEY}}},
        {"name": "RUST_LOG", "value": std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())},
    ])
}

/// `-D key=value` for every option that differs from its default, except the secrets (the
/// cluster secret comes from the Secret): what every pod of the cluster is configured with.
pub fn config_args(config: &Config) -> Vec<String> {
    config
        .to_overrides()
        .into_iter()
        .filter(|kv| !kv.starts_with("security.") || kv.starts_with("security.ssl."))
        .flat_map(|kv| ["-D".to_string(), kv])
        .collect()
}

/// The Secret with the cluster secret (`hex`), created before the Deployment that uses it.
pub fn secret(cluster_id: &str, hex: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret_name(cluster_id), "labels": labels(cluster_id, "jobmanager")},
        "type": "Opaque", "stringData": {SECRET_KEY: hex}})
}

/// The JobManager's Deployment: one pod running `sluice kubernetes-jobmanager` with the
/// client's configuration; for an application cluster, with its `job` and with the job
/// artifact's path in the image (`job.artifact`) as the command instead of `sluice`.
pub fn jobmanager_deployment(
    config: &Config,
    cluster_id: &str,
    job: Option<&ApplicationJob>,
) -> Value {
    let k = &config.kubernetes;
    let binary = job
        .and_then(|j| j.artifact.as_ref())
        .map_or_else(|| SLUICE.to_string(), |p| p.display().to_string());
    let mut command = vec![binary];
    command.extend(config_args(config));
    command.push("kubernetes-jobmanager".into());
    if let Some(job) = job {
        command.extend([JOB_ARG.to_string(), job.encode()]);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": cluster_id, "labels": labels(cluster_id, "jobmanager")},
        "spec": {"replicas": 1,
            "selector": {"matchLabels": {CLUSTER_LABEL: cluster_id, COMPONENT_LABEL: "jobmanager"}},
            "template": {"metadata": {"labels": labels(cluster_id, "jobmanager")},
                "spec": {"serviceAccountName": k.jobmanager_service_account,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": CONTAINER, "image": k.image, "command": command,
                        "env": env(cluster_id),
                        "ports": [{"name": "rest", "containerPort": config.rest.port}]}]}}}})
}

/// The Service of the REST API, owned by the Deployment (`owner_uid`).
pub fn rest_service(config: &Config, cluster_id: &str, owner_uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": rest_service_name(cluster_id), "labels": labels(cluster_id, "jobmanager"),
            "ownerReferences": owned_by_deployment(cluster_id, owner_uid)},
        "spec": {"type": config.kubernetes.rest_service_exposed_type.api_name(),
            "selector": {CLUSTER_LABEL: cluster_id, COMPONENT_LABEL: "jobmanager"},
            "ports": [{"name": "rest", "port": config.rest.port, "targetPort": config.rest.port}]}})
}

/// A TaskManager pod `name`, owned by the Deployment (`owner_uid`), connecting to the
/// JobManager's RPC endpoint `jobmanager` (`host:port`). Its resource id is its name, which is
/// how the pool matches slots and pods. It is never restarted in place: a TaskManager that
/// ended is replaced by a new pod if slots are short. `binary` is the JobManager's own command
/// (`sluice`, or an application's job artifact), so both know the same programs.
pub fn taskmanager_pod(
    config: &Config,
    cluster_id: &str,
    owner_uid: &str,
    name: &str,
    jobmanager: &str,
    binary: &str,
) -> Value {
    let k = &config.kubernetes;
    let mut command = vec![binary.to_string()];
    command.extend(config_args(config));
    command.extend(
        [
            "-D",
            "taskmanager.resource-id=$(POD_NAME)",
            "-D",
            "taskmanager.host=$(POD_IP)",
            "-D",
            "taskmanager.bind-host=0.0.0.0",
            "taskmanager",
            "--jobmanager",
            jobmanager,
        ]
        .map(str::to_string),
    );
    let memory = format!("{}Mi", config.network.process_size.div_ceil(1 << 20));
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels(cluster_id, "taskmanager"),
            "ownerReferences": owned_by_deployment(cluster_id, owner_uid)},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
            "containers": [{"name": CONTAINER, "image": k.image, "command": command,
                "env": env(cluster_id),
                "resources": {"requests": {"cpu": k.taskmanager_cpu.to_string(), "memory": memory},
                              "limits": {"memory": memory}}}]}})
}

/// How an application cluster's job ended, as its JobManager records it on the Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnd {
    /// `FINISHED`, `FAILED` or `CANCELED`.
    pub state: String,
    /// Why it failed, most recent first (empty when it finished).
    pub causes: Vec<String>,
}

/// What an application cluster's Deployment says about its job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplicationStatus {
    /// The job's id, once the JobManager submitted it.
    pub job_id: Option<String>,
    /// How it ended, once it did (also when it was refused and never got an id).
    pub end: Option<JobEnd>,
}

/// The merge patch recording the job's id on the Deployment.
pub fn job_id_patch(job_id: &str) -> Value {
    json!({"metadata": {"annotations": {JOB_ID_ANNOTATION: job_id}}})
}

/// The merge patch recording the job's end on the Deployment; the causes are cut to what an
/// annotation holds.
pub fn job_end_patch(end: &JobEnd) -> Value {
    let causes: Vec<String> = end
        .causes
        .iter()
        .take(MAX_CAUSES)
        .map(|c| {
            let mut cut = MAX_CAUSE_BYTES.min(c.len());
            while !c.is_char_boundary(cut) {
                cut -= 1;
            }
            c[..cut].to_string()
        })
        .collect();
    json!({"metadata": {"annotations": {JOB_STATE_ANNOTATION: end.state,
        JOB_CAUSES_ANNOTATION: serde_json::to_string(&causes).unwrap_or_default()}}})
}

/// Reads what the JobManager recorded on its Deployment.
pub fn application_status(deployment: &Value) -> ApplicationStatus {
    let annotations = &deployment["metadata"]["annotations"];
    let end = annotations[JOB_STATE_ANNOTATION]
        .as_str()
        .map(|state| JobEnd {
            state: state.to_string(),
            causes: annotations[JOB_CAUSES_ANNOTATION]
                .as_str()
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or_default(),
        });
    ApplicationStatus {
        job_id: annotations[JOB_ID_ANNOTATION].as_str().map(str::to_string),
        end,
    }
}

/// What a pod's status means for the resource driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodState {
    /// Not running yet (scheduling, pulling, starting).
    Pending,
    /// Its container runs.
    Running,
    /// It cannot start, and will not by waiting: why.
    CannotStart(String),
    /// Its container ended: how.
    Ended(String),
}

/// Waiting reasons after which a container does not start without someone changing the pod
/// or the cluster.
const HOPELESS: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
];

/// Reads a pod's status.
pub fn pod_state(pod: &Value) -> PodState {
    let name = pod["metadata"]["name"].as_str().unwrap_or("?");
    let status = &pod["status"];
    let container = &status["containerStatuses"][0];
    match status["phase"].as_str() {
        Some("Failed") | Some("Succeeded") => {
            let t = &container["state"]["terminated"];
            let mut how = match t["exitCode"].as_i64() {
                Some(code) => format!("pod {name} ended with exit code {code}"),
                None => format!("pod {name} {}", status["phase"].as_str().unwrap_or("ended")),
            };
            for part in [&t["reason"], &t["message"], &status["message"]] {
                if let Some(s) = part.as_str().filter(|s| !s.is_empty()) {
                    how.push_str(&format!(": {s}"));
                }
            }
            return PodState::Ended(how);
        }
        Some("Running") => return PodState::Running,
        _ => {}
    }
    let waiting = &container["state"]["waiting"];
    if let Some(reason) = waiting["reason"].as_str().filter(|r| HOPELESS.contains(r)) {
        let message = waiting["message"].as_str().unwrap_or_default();
        return PodState::CannotStart(format!("pod {name} cannot start: {reason}: {message}"));
    }
    let unschedulable = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| {
            c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable"
        });
    if let Some(c) = unschedulable {
        return PodState::CannotStart(format!(
            "pod {name} cannot be scheduled: {}",
            c["message"].as_str().unwrap_or("Unschedulable")
        ));
    }
    PodState::Pending
}

/// Where clients reach the REST API of a cluster, from its Service, its JobManager pod and
/// the node that pod runs on (`node`, if known): a LoadBalancer's ingress, else a node's
/// address with the NodePort, else (ClusterIP) the JobManager pod's own address, reachable
/// inside the cluster's network. `None` while it is not known yet.
pub fn rest_address(
    exposed: ServiceExposedType,
    service: &Value,
    jobmanager_pod: &Value,
    node: Option<&Value>,
) -> Option<String> {
    let port = &service["spec"]["ports"][0];
    match exposed {
        ServiceExposedType::LoadBalancer => {
            let ingress = &service["status"]["loadBalancer"]["ingress"][0];
            let host = ingress["ip"].as_str().or(ingress["hostname"].as_str())?;
            Some(format!("{host}:{}", port["port"].as_i64()?))
        }
        ServiceExposedType::NodePort => {
            let addresses = node?["status"]["addresses"].as_array()?;
            let host = ["ExternalIP", "InternalIP", "Hostname"]
                .iter()
                .find_map(|kind| addresses.iter().find(|a| a["type"] == *kind))?["address"]
                .as_str()?;
            Some(format!("{host}:{}", port["nodePort"].as_i64()?))
        }
        ServiceExposedType::ClusterIp => {
            (jobmanager_pod["status"]["phase"] == "Running").then_some(())?;
            let ip = jobmanager_pod["status"]["podIP"].as_str()?;
            Some(format!("{ip}:{}", port["targetPort"].as_i64()?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: Value) -> Value {
        json!({"metadata": {"name": "c-taskmanager-1"}, "status": status})
    }

    #[test]
    fn pod_states_are_read_as_a_kubelet_and_scheduler_report_them() {
        assert_eq!(
            pod_state(&pod(json!({"phase": "Pending"}))),
            PodState::Pending
        );
        assert_eq!(
            pod_state(&pod(json!({"phase": "Running"}))),
            PodState::Running
        );
        assert_eq!(
            pod_state(&pod(
                json!({"phase": "Failed", "containerStatuses": [{"state":
                {"terminated": {"exitCode": 137, "reason": "Error"}}}]})
            )),
            PodState::Ended("pod c-taskmanager-1 ended with exit code 137: Error".into())
        );
        assert!(matches!(
            pod_state(&pod(json!({"phase": "Pending", "containerStatuses": [{"state":
                {"waiting": {"reason": "ErrImagePull", "message": "not found"}}}]}))),
            PodState::CannotStart(m) if m.contains("ErrImagePull: not found")
        ));
        // Still pulling: may yet start.
        assert_eq!(
            pod_state(&pod(
                json!({"phase": "Pending", "containerStatuses": [{"state":
                {"waiting": {"reason": "ContainerCreating"}}}]})
            )),
            PodState::Pending
        );
        assert!(matches!(
            pod_state(&pod(json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable", "message": "0/1 nodes: Insufficient cpu"}]}))),
            PodState::CannotStart(m) if m.contains("cannot be scheduled: 0/1 nodes: Insufficient cpu")
        ));
    }

    #[test]
    fn taskmanager_pods_are_owned_named_and_sized() {
        let config = Config::load(
            None,
            &[
                "kubernetes.taskmanager.cpu=0.5".into(),
                "kubernetes.container.image=sluice:test".into(),
                "taskmanager.numberOfTaskSlots=2".into(),
            ],
        )
        .unwrap();
        let p = taskmanager_pod(
            &config,
            "c",
            "uid-1",
            "c-taskmanager-ab-1",
            "10.0.0.1:6123",
            SLUICE,
        );
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "Deployment");
        assert_eq!(p["metadata"]["labels"]["component"], "taskmanager");
        assert_eq!(p["spec"]["restartPolicy"], "Never");
        let c = &p["spec"]["containers"][0];
        assert_eq!(c["image"], "sluice:test");
        assert_eq!(c["resources"]["requests"]["cpu"], "0.5");
        let command: Vec<&str> = c["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            command.contains(&"taskmanager.numberOfTaskSlots=2"),
            "{command:?}"
        );
        assert!(command.contains(&"taskmanager.resource-id=$(POD_NAME)"));
        assert_eq!(
            &command[command.len() - 3..],
            ["taskmanager", "--jobmanager", "10.0.0.1:6123"]
        );
        assert!(!command.iter().any(|a| a.starts_with("security.cluster")));
    }

    #[test]
    fn the_rest_address_follows_the_service_type() {
        let service = json!({"spec": {"ports": [{"port": 8081, "targetPort": 18081, "nodePort": 30081}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
        let jm = json!({"status": {"phase": "Running", "podIP": "10.1.1.1"}});
        let node = json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"},
            {"type": "InternalIP", "address": "192.168.0.5"}]}});
        assert_eq!(
            rest_address(ServiceExposedType::ClusterIp, &service, &jm, None).as_deref(),
            Some("10.1.1.1:18081")
        );
        assert_eq!(
            rest_address(ServiceExposedType::NodePort, &service, &jm, Some(&node)).as_deref(),
            Some("192.168.0.5:30081")
        );
        assert_eq!(
            rest_address(ServiceExposedType::LoadBalancer, &service, &jm, None).as_deref(),
            Some("1.2.3.4:8081")
        );
        let pending = json!({"status": {"phase": "Pending"}});
        assert_eq!(
            rest_address(ServiceExposedType::ClusterIp, &service, &pending, None),
            None
        );
    }

    #[test]
    fn an_application_deployment_carries_its_job_and_runs_its_artifact() {
        let config = Config::load(None, &["kubernetes.container.image=my/app:1".into()]).unwrap();
        let job = ApplicationJob {
            name: "sum".into(),
            args: vec!["--keys".into(), "10".into()],
            parallelism: Some(2),
            overrides: Vec::new(),
            savepoint: Some("/savepoints/s-1".into()),
            artifact: Some("/opt/job/my-job".into()),
        };
        let command = |d: &Value| -> Vec<String> {
            d["spec"]["template"]["spec"]["containers"][0]["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect()
        };
        let app = command(&jobmanager_deployment(&config, "c", Some(&job)));
        assert_eq!(app[0], "/opt/job/my-job");
        let at = app.iter().position(|a| a == JOB_ARG).unwrap();
        assert_eq!(app[at - 1], "kubernetes-jobmanager");
        let told = ApplicationJob::decode(JOB_ARG, &app[at + 1]).unwrap();
        // The path is the command, not part of what the JobManager is told.
        assert_eq!(told.artifact, None);
        assert_eq!((told.name.as_str(), told.parallelism), ("sum", Some(2)));
        assert_eq!(told.savepoint.as_deref(), Some("/savepoints/s-1"));
        let session = command(&jobmanager_deployment(&config, "c", None));
        assert_eq!(session[0], SLUICE);
        assert_eq!(session.last().unwrap(), "kubernetes-jobmanager");
    }

    #[test]
    fn a_job_end_recorded_on_the_deployment_reads_back_cut_to_size() {
        let mut deployment = json!({"metadata": {"name": "c"}});
        assert_eq!(
            application_status(&deployment),
            ApplicationStatus::default()
        );
        // The cut falls inside a two-byte character: it ends before it.
        let long = format!("x{}", "é".repeat(MAX_CAUSE_BYTES));
        let end = JobEnd {
            state: "FAILED".into(),
            causes: vec!["boom".into(); 3]
                .into_iter()
                .chain(std::iter::repeat_n(long.clone(), 4))
                .collect(),
        };
        for patch in [job_id_patch("00ff"), job_end_patch(&end)] {
            let annotations = patch["metadata"]["annotations"].as_object().unwrap();
            for (k, v) in annotations {
                deployment["metadata"]["annotations"][k] = v.clone();
            }
        }
        let status = application_status(&deployment);
        assert_eq!(status.job_id.as_deref(), Some("00ff"));
        let read = status.end.unwrap();
        assert_eq!(read.state, "FAILED");
        assert_eq!(read.causes.len(), MAX_CAUSES);
        assert_eq!(&read.causes[..3], ["boom", "boom", "boom"]);
        assert_eq!(read.causes[3].len(), MAX_CAUSE_BYTES - 1);
        assert!(long.starts_with(&read.causes[3]));
    }
}
