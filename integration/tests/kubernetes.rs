//! The Kubernetes test environment against a real control plane (kube-apiserver and
//! kube-controller-manager from `scripts/kubernetes.sh`): the kubelet stand-in of
//! `integration/src/kube.rs` runs the pods the real Deployment and ReplicaSet controllers
//! create, restarts and reports them as a kubelet does, and the real garbage collector removes
//! a deleted Deployment's pods. On it, `sluice kubernetes-session` runs a session: TaskManager
//! pods grow with a job's demand and go when idle, a lost TaskManager is replaced, pods that
//! cannot be scheduled make the JobManager give up with a clear diagnostic, and deleting the
//! session's Deployment removes every pod. `run -t kubernetes-application` runs one job on a
//! cluster of its own, bundled or a job artifact in the image (`local://`), reports its end
//! and leaves nothing behind. Prints the measured numbers (`MEASURED ...`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_integration::kube::{self, Api, ControlPlane, Kubelet};
use sluice_integration::{
    alive, counting_args, final_sums, free_port, job_id_of, make_text, read_counts,
    reference_counts, signal, sluice_bin, test_job_bin, wait_for,
};

const WAIT: Duration = Duration::from_secs(60);

/// The namespace's pods by name.
fn pods(api: &Api, ns: &str) -> BTreeMap<String, Value> {
    api.get(&format!("/api/v1/namespaces/{ns}/pods"))
        .expect("list pods")["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p.clone(),
            )
        })
        .collect()
}

fn pod(api: &Api, ns: &str, name: &str) -> Value {
    api.get(&format!("/api/v1/namespaces/{ns}/pods/{name}"))
        .unwrap_or_else(|e| panic!("pod {name}: {e}"))
}

#[test]
fn deployment_pods_run_restart_and_go_with_their_owner() {
    if kube::skipped() {
        return;
    }
    let plane = kube::control_plane();
    let api = plane.api();
    let ns = plane.namespace("deploy");
    let kubelet = Kubelet::start(plane, &ns, 8, &[("sleeper:1", Path::new("/bin/sleep"))]);
    let created = Instant::now();
    api.post(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sleepers"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "sleepers"}},
                "template": {"metadata": {"labels": {"app": "sleepers"}},
                    "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "main",
                        "image": "sleeper:1", "command": ["sleep", "600"]}]}}}}),
    )
    .expect("create deployment");
    // The real controllers make a ReplicaSet and its pods; the stand-in binds and runs them.
    let first = wait_for(WAIT, "2 running pods", || {
        let running: BTreeMap<String, Value> = pods(&api, &ns)
            .into_iter()
            .filter(|(_, p)| p["status"]["phase"] == "Running")
            .collect();
        let pids = kubelet.pids();
        (running.len() == 2 && running.keys().all(|n| pids.contains_key(n))).then_some(pids)
    });
    // Reported, not asserted: docs/kubernetes.md quotes it.
    println!(
        "deployment created to 2 pods running: {:?}",
        created.elapsed()
    );
    for (name, pid) in &first {
        assert!(alive(*pid), "{name}'s process {pid} is not alive");
        let p = pod(&api, &ns, name);
        assert_eq!(p["spec"]["nodeName"], kubelet.node.as_str());
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    }
    // A killed container of an `Always` pod is restarted in the same pod, counted.
    let (victim, pid) = first.iter().next().map(|(n, p)| (n.clone(), *p)).unwrap();
    signal("-9", pid);
    let restarted = wait_for(WAIT, "the killed container's restart", || {
        let p = pod(&api, &ns, &victim);
        let pid_now = kubelet.pids().get(&victim).copied()?;
        (p["status"]["containerStatuses"][0]["restartCount"] == 1
            && p["status"]["phase"] == "Running"
            && pid_now != pid)
            .then_some(pid_now)
    });
    assert!(alive(restarted));
    // Deleting the Deployment (kubectl's default, background propagation): the garbage
    // collector deletes the ReplicaSet and its pods, the stand-in ends their processes.
    api.delete(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/sleepers"),
        &json!({"propagationPolicy": "Background"}),
    )
    .expect("delete deployment");
    wait_for(WAIT, "every pod gone", || {
        pods(&api, &ns).is_empty().then_some(())
    });
    wait_for(WAIT, "every process gone", || {
        (kubelet.pids().is_empty() && !alive(restarted) && first.values().all(|p| !alive(*p)))
            .then_some(())
    });
}

#[test]
fn pods_that_cannot_run_are_reported_as_a_kubelet_does() {
    if kube::skipped() {
        return;
    }
    let plane = kube::control_plane();
    let api = plane.api();
    let ns = plane.namespace("fail");
    let kubelet = Kubelet::start(plane, &ns, 2, &[("shell:1", Path::new("/bin/sh"))]);
    let conf_dir = plane.dir.join("mounts").join(&ns);
    api.post(
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"},
                "data": {"config.yaml": "answer: 42\n"}}),
    )
    .expect("create configmap");
    let create = |name: &str, image: &str, cpu: &str, script: &str| {
        api.post(
            &format!("/api/v1/namespaces/{ns}/pods"),
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"restartPolicy": "Never",
                    "volumes": [{"name": "conf", "configMap": {"name": "conf"}}],
                    "containers": [{"name": "main", "image": image,
                        "command": ["sh", "-c", script],
                        "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "CONF", "value": conf_dir.display().to_string()}],
                        "resources": {"requests": {"cpu": cpu}},
                        "volumeMounts": [{"name": "conf", "mountPath": conf_dir.display().to_string()}]}]}}),
        )
        .unwrap_or_else(|e| panic!("create pod {name}: {e}"));
    };
    create(
        "exits",
        "shell:1",
        "500m",
        "echo \"$POD reads $(cat \"$CONF/config.yaml\")\"; exit 3",
    );
    create("bad-image", "no-such-image:1", "500m", "true");
    create("too-big", "shell:1", "3", "true");
    let status = |name: &str, f: &dyn Fn(&Value) -> bool| {
        wait_for(WAIT, &format!("{name}'s status"), || {
            let s = pod(&api, &ns, name)["status"].clone();
            f(&s).then_some(s)
        })
    };
    let exits = status("exits", &|s| s["phase"] == "Failed");
    assert_eq!(
        exits["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        3
    );
    assert_eq!(kubelet.log("exits").trim(), "exits reads answer: 42");
    let bad = status("bad-image", &|s| {
        s["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImagePull"
    });
    assert_eq!(bad["phase"], "Pending");
    let big = status("too-big", &|s| {
        s["conditions"][0]["reason"] == "Unschedulable"
    });
    assert!(
        big["conditions"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Insufficient cpu"),
        "{big}"
    );
    assert!(pod(&api, &ns, "too-big")["spec"]["nodeName"].is_null());
}

/// The image the stand-in runs as the local `sluice` binary.
const IMAGE: &str = "sluice:test";

/// A `sluice` command line against the session `cluster` in `ns` (the client's own `-D`s:
/// everything the session's pods get too).
struct Session {
    ns: String,
    keys: Vec<String>,
}

impl Session {
    fn new(plane: &ControlPlane, ns: &str, cluster: &str, extra: &[&str]) -> Session {
        let mut keys: Vec<String> = vec![
            format!("kubernetes.cluster-id={cluster}"),
            format!("kubernetes.namespace={ns}"),
            format!("kubernetes.config.file={}", plane.kubeconfig.display()),
            format!("kubernetes.container.image={IMAGE}"),
            format!("rest.port={}", free_port()),
            "taskmanager.numberOfTaskSlots=1".into(),
            "kubernetes.taskmanager.cpu=0.5".into(),
        ];
        keys.extend(extra.iter().map(|k| k.to_string()));
        Session {
            ns: ns.to_string(),
            keys,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(sluice_bin());
        for k in &self.keys {
            cmd.args(["-D", k]);
        }
        cmd.args(args).env_remove("KUBECONFIG");
        cmd
    }

    fn sluice(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run sluice")
    }

    fn taskmanager_pods(&self, api: &Api) -> BTreeMap<String, Value> {
        pods(api, &self.ns)
            .into_iter()
            .filter(|(_, p)| p["metadata"]["labels"]["component"] == "taskmanager")
            .collect()
    }

    fn jobmanager_pod(&self, api: &Api) -> Option<String> {
        pods(api, &self.ns)
            .into_iter()
            .find(|(_, p)| p["metadata"]["labels"]["component"] == "jobmanager")
            .map(|(n, _)| n)
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn rest(address: &str, path: &str) -> Value {
    sluice_integration::http_client(|b| b)
        .get(format!("http://{address}{path}"))
        .send()
        .and_then(|r| r.json())
        .unwrap_or(Value::Null)
}

/// A fresh namespace of the control plane with a kubelet stand-in that runs the sluice image
/// (8 CPUs): the plane, its API, the namespace (named from `prefix`) and the kubelet. `None`
/// when the Kubernetes tests are skipped.
fn sluice_namespace(prefix: &str) -> Option<(&'static ControlPlane, Api, String, Kubelet)> {
    if kube::skipped() {
        return None;
    }
    let plane = kube::control_plane();
    let ns = plane.namespace(prefix);
    let kubelet = Kubelet::start(plane, &ns, 8, &[(IMAGE, sluice_bin().as_path())]);
    Some((plane, plane.api(), ns, kubelet))
}

/// The session's REST address, as `kubernetes-session` printed it.
fn rest_address_of(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("JobManager REST endpoint: http://"))
        .unwrap_or_else(|| panic!("no REST endpoint in {stdout}"))
        .trim()
        .to_string()
}

#[test]
fn a_session_grows_and_shrinks_taskmanager_pods_replaces_lost_ones_and_goes_with_its_deployment() {
    let Some((plane, api, ns, kubelet)) = sluice_namespace("session") else {
        return;
    };
    let session = Session::new(
        plane,
        &ns,
        "sum-session",
        &[
            "resourcemanager.taskmanager-timeout=2 s",
            "restart-strategy.type=fixed-delay",
            "restart-strategy.fixed-delay.attempts=5",
            "restart-strategy.fixed-delay.delay=500 ms",
        ],
    );
    let started = Instant::now();
    let out = session.sluice(&["kubernetes-session"]);
    assert!(out.status.success(), "{}", text(&out));
    println!(
        "MEASURED kubernetes-session to REST answering: {:?}",
        started.elapsed()
    );
    let address = rest_address_of(&out);
    assert_eq!(rest(&address, "/overview")["taskmanagers"], 0);
    assert!(session.taskmanager_pods(&api).is_empty());
    let deployment = api
        .get(&format!(
            "/apis/apps/v1/namespaces/{ns}/deployments/sum-session"
        ))
        .expect("the session's Deployment");
    let owner = deployment["metadata"]["uid"].as_str().unwrap().to_string();
    for object in ["services/sum-session-rest", "secrets/sum-session-secret"] {
        let o = api
            .get(&format!("/api/v1/namespaces/{ns}/{object}"))
            .unwrap_or_else(|e| panic!("{object}: {e}"));
        assert_eq!(
            o["metadata"]["ownerReferences"][0]["uid"],
            owner.as_str(),
            "{object}"
        );
    }
    // A second session of the same name is refused, naming the way out.
    let again = session.sluice(&["kubernetes-session"]);
    assert!(!again.status.success());
    assert!(text(&again).contains("already exists"), "{}", text(&again));

    // A job needing 2 slots at once: 2 TaskManager pods, owned by the Deployment.
    let submitted = Instant::now();
    let run = session.sluice(&[
        "run",
        "-t",
        "kubernetes-session",
        "-d",
        "-p",
        "2",
        "stream-sum",
        "--rate",
        "200",
    ]);
    assert!(run.status.success(), "{}", text(&run));
    let job = job_id_of(&String::from_utf8_lossy(&run.stdout));
    let job_running =
        || (rest(&address, &format!("/jobs/{job}"))["state"] == "RUNNING").then_some(());
    wait_for(WAIT, "the job to run on 2 TaskManager pods", || {
        job_running()?;
        (rest(&address, "/overview")["taskmanagers"] == 2).then_some(())
    });
    println!(
        "MEASURED job submitted to RUNNING on 2 new TaskManager pods: {:?}",
        submitted.elapsed()
    );
    let tms = session.taskmanager_pods(&api);
    assert_eq!(tms.len(), 2, "{:?}", tms.keys());
    let registered: Vec<String> = rest(&address, "/taskmanagers")["taskmanagers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    for (name, p) in &tms {
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "Deployment");
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], owner.as_str());
        assert_eq!(p["spec"]["restartPolicy"], "Never");
        assert!(
            registered.contains(name),
            "{name} is not among {registered:?}"
        );
    }

    // A TaskManager's process dies: its pod fails, the JobManager deletes it, creates a
    // replacement, and the job (with its restart strategy) runs again.
    let (victim, pid) = kubelet
        .pids()
        .into_iter()
        .find(|(n, _)| tms.contains_key(n))
        .expect("a TaskManager process");
    let killed = Instant::now();
    signal("-9", pid);
    let replacement = wait_for(WAIT, "the job to run again on a replacement pod", || {
        let pods = session.taskmanager_pods(&api);
        let new = pods.keys().find(|n| !tms.contains_key(*n))?.clone();
        job_running()?;
        let ids = rest(&address, "/taskmanagers")["taskmanagers"].clone();
        (ids.as_array()?.iter().any(|t| t["id"] == new.as_str()) && !pods.contains_key(&victim))
            .then_some(new)
    });
    println!(
        "MEASURED TaskManager pod lost to the job RUNNING again: {:?}",
        killed.elapsed()
    );
    let exceptions = rest(&address, &format!("/jobs/{job}/exceptions"));
    assert!(exceptions.to_string().contains(&victim), "{exceptions}");
    assert!(session.taskmanager_pods(&api).contains_key(&replacement));

    // Cancelled, the job frees its slots: after resourcemanager.taskmanager-timeout the idle
    // pods are deleted.
    let cancel = session.sluice(&["cancel", "-m", &address, &job]);
    assert!(cancel.status.success(), "{}", text(&cancel));
    wait_for(WAIT, "the idle TaskManager pods to go", || {
        (session.taskmanager_pods(&api).is_empty()
            && rest(&address, "/overview")["taskmanagers"] == 0)
            .then_some(())
    });

    // Busy again, then the session is deleted: every pod it owned goes, processes too.
    let run = session.sluice(&[
        "run",
        "-t",
        "kubernetes-session",
        "-d",
        "-p",
        "2",
        "stream-sum",
        "--rate",
        "100",
    ]);
    assert!(run.status.success(), "{}", text(&run));
    wait_for(WAIT, "2 TaskManager pods again", || {
        (session.taskmanager_pods(&api).len() == 2
            && rest(&address, "/overview")["taskmanagers"] == 2)
            .then_some(())
    });
    let pids: Vec<u32> = kubelet.pids().into_values().collect();
    assert_eq!(pids.len(), 3, "the JobManager and 2 TaskManagers");
    let kill = session.sluice(&["kubernetes-session", "--kill"]);
    assert!(kill.status.success(), "{}", text(&kill));
    wait_for(WAIT, "every pod, the Service and the Secret gone", || {
        let gone = |o: &str| api.get(&format!("/api/v1/namespaces/{ns}/{o}")).is_err();
        (pods(&api, &ns).is_empty()
            && gone("services/sum-session-rest")
            && gone("secrets/sum-session-secret"))
        .then_some(())
    });
    wait_for(WAIT, "every process gone", || {
        (kubelet.pids().is_empty() && pids.iter().all(|p| !alive(*p))).then_some(())
    });
    let after = session.sluice(&["run", "-t", "kubernetes-session", "stream-sum"]);
    assert!(!after.status.success());
    assert!(
        text(&after).contains("no Kubernetes session sum-session"),
        "{}",
        text(&after)
    );
}

#[test]
fn taskmanager_pods_that_cannot_be_scheduled_make_the_jobmanager_give_up_clearly() {
    if kube::skipped() {
        return;
    }
    let plane = kube::control_plane();
    let api = plane.api();
    let ns = plane.namespace("unschedulable");
    let kubelet = Kubelet::start(plane, &ns, 2, &[(IMAGE, sluice_bin().as_path())]);
    // Each TaskManager pod asks for more CPU than the node has.
    let session = Session::new(
        plane,
        &ns,
        "too-big",
        &[
            "kubernetes.taskmanager.cpu=4",
            "resourcemanager.start-worker.max-failure-rate=2",
        ],
    );
    let out = session.sluice(&["kubernetes-session"]);
    assert!(out.status.success(), "{}", text(&out));
    let jm = session.jobmanager_pod(&api).expect("the JobManager pod");
    let run = session.sluice(&["run", "-t", "kubernetes-session", "-d", "stream-sum"]);
    assert!(run.status.success(), "{}", text(&run));
    // Three pods in a row cannot be scheduled: more than 2 a minute, the JobManager exits
    // with the reason (and its Deployment's pod restarts it).
    let log = wait_for(WAIT, "the JobManager to give up", || {
        let log = kubelet.log(&jm);
        log.contains("failed within a minute").then_some(log)
    });
    assert!(
        log.contains("3 TaskManager pods failed within a minute (resourcemanager.start-worker.max-failure-rate is 2)"),
        "{log}"
    );
    assert!(
        log.contains("cannot be scheduled") && log.contains("Insufficient cpu"),
        "{log}"
    );
    // The pods it gave up on are deleted, not left Pending.
    wait_for(WAIT, "no unschedulable pod left", || {
        session
            .taskmanager_pods(&api)
            .values()
            .all(|p| {
                p["status"]["phase"] != "Pending" || p["metadata"]["deletionTimestamp"].is_string()
            })
            .then_some(())
    });
    let kill = session.sluice(&["kubernetes-session", "--kill"]);
    assert!(kill.status.success(), "{}", text(&kill));
    wait_for(WAIT, "every pod gone", || {
        pods(&api, &ns).is_empty().then_some(())
    });
}

/// Whether nothing of the cluster `id` is left in `ns`: no Deployment, Service, Secret or pod.
fn cluster_gone(api: &Api, ns: &str, id: &str) -> bool {
    let gone = |path: String| api.get(&path).is_err();
    pods(api, ns).is_empty()
        && gone(format!("/apis/apps/v1/namespaces/{ns}/deployments/{id}"))
        && gone(format!("/api/v1/namespaces/{ns}/services/{id}-rest"))
        && gone(format!("/api/v1/namespaces/{ns}/secrets/{id}-secret"))
}

/// The names of the TaskManager pods of cluster `id` the stand-in ran (it keeps their logs).
fn taskmanagers_run(kubelet: &Kubelet, id: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&kubelet.dir)
        .expect("the stand-in's folder")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log")
                .filter(|n| n.starts_with(&format!("{id}-taskmanager-")))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

#[test]
fn an_application_runs_its_job_reports_it_and_leaves_nothing() {
    let Some((plane, api, ns, kubelet)) = sluice_namespace("app") else {
        return;
    };
    let app = Session::new(plane, &ns, "wc-app", &[]);
    let tmp = tempfile::tempdir().expect("a scratch folder");
    let text_in = make_text(256 * 1024);
    let input = tmp.path().join("input.txt");
    std::fs::write(&input, &text_in).expect("write the input");
    let output = tmp.path().join("counts");
    let started = Instant::now();
    let out = app.sluice(&[
        "run",
        "-t",
        "kubernetes-application",
        "-p",
        "2",
        "wordcount",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    let returned = Instant::now();
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    assert_eq!(read_counts(&output), reference_counts(&text_in));
    assert!(
        printed.contains("Kubernetes application cluster wc-app started")
            && printed.contains("has finished")
            && printed.contains("Kubernetes application cluster wc-app is deleted"),
        "{printed}"
    );
    job_id_of(&String::from_utf8_lossy(&out.stdout));
    assert!(
        !taskmanagers_run(&kubelet, "wc-app").is_empty(),
        "the job ran on TaskManager pods"
    );
    wait_for(WAIT, "every object and process of the cluster gone", || {
        (cluster_gone(&api, &ns, "wc-app") && kubelet.pids().is_empty()).then_some(())
    });
    println!(
        "MEASURED run -t kubernetes-application -p 2 wordcount (attached): whole run {:?}, CLI exit to cluster gone {:?}",
        returned - started,
        returned.elapsed()
    );
}

#[test]
fn a_detached_application_returns_at_once_and_its_cluster_goes_when_the_job_ends() {
    let Some((plane, api, ns, kubelet)) = sluice_namespace("detached") else {
        return;
    };
    let app = Session::new(
        plane,
        &ns,
        "count-app",
        &["execution.runtime-mode=STREAMING"],
    );
    let tmp = tempfile::tempdir().expect("a scratch folder");
    let output = tmp.path().join("counted");
    let (records, keys) = (6_000, 7);
    let mut args = vec![
        "run".to_string(),
        "-t".into(),
        "kubernetes-application".into(),
    ];
    args.push("-d".into());
    args.extend(counting_args(2, records, keys, &output, 1_000));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let out = app.sluice(&args);
    let returned = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout.contains("count-app"), "{stdout}");
    let job = job_id_of(&stdout);
    let address = rest_address_of(&out);
    assert!(
        api.get(&format!(
            "/apis/apps/v1/namespaces/{ns}/deployments/count-app"
        ))
        .is_ok(),
        "the cluster runs on after -d returned"
    );
    wait_for(WAIT, "the job RUNNING on 2 TaskManager pods", || {
        (rest(&address, &format!("/jobs/{job}"))["state"] == "RUNNING"
            && rest(&address, "/overview")["taskmanagers"] == 2)
            .then_some(())
    });
    let running = started.elapsed();
    // The JobManager keeps serving the final state for a grace period before it goes.
    wait_for(WAIT, "the job FINISHED", || {
        (rest(&address, &format!("/jobs/{job}"))["state"] == "FINISHED").then_some(())
    });
    let finished = Instant::now();
    wait_for(WAIT, "every object and process of the cluster gone", || {
        (cluster_gone(&api, &ns, "count-app") && kubelet.pids().is_empty()).then_some(())
    });
    println!(
        "MEASURED run -t kubernetes-application -d -p 2 counting: returned {returned:?}, submit to RUNNING on 2 TaskManager pods {running:?}, job FINISHED (seen) to cluster gone {:?}",
        finished.elapsed()
    );
    assert_eq!(taskmanagers_run(&kubelet, "count-app").len(), 2);
    let check = app.sluice(&[
        "check-counting",
        "--records",
        &records.to_string(),
        "--keys",
        &keys.to_string(),
        output.to_str().unwrap(),
    ]);
    assert!(check.status.success(), "{}", text(&check));
}

#[test]
fn ctrl_c_of_an_attached_application_deletes_its_cluster_and_job() {
    let Some((plane, api, ns, kubelet)) = sluice_namespace("interrupted") else {
        return;
    };
    let app = Session::new(plane, &ns, "sum-app", &[]);
    // An unbounded job: only the interrupt ends this run.
    let child = app
        .command(&[
            "run",
            "-t",
            "kubernetes-application",
            "-p",
            "1",
            "stream-sum",
            "--rate",
            "1000",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start sluice");
    wait_for(WAIT, "the job running on a TaskManager pod", || {
        (!taskmanagers_run(&kubelet, "sum-app").is_empty()
            && api
                .get(&format!(
                    "/apis/apps/v1/namespaces/{ns}/deployments/sum-app"
                ))
                .is_ok_and(|d| !d["metadata"]["annotations"]["sluice/job-id"].is_null()))
        .then_some(())
    });
    let interrupted = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success());
    let out = child.wait_with_output().expect("the interrupted run's end");
    let printed = text(&out);
    assert!(!out.status.success(), "{printed}");
    assert!(
        printed.contains(
            "Interrupted: the Kubernetes application cluster sum-app and its job are deleted."
        ),
        "{printed}"
    );
    wait_for(WAIT, "every object and process of the cluster gone", || {
        (cluster_gone(&api, &ns, "sum-app") && kubelet.pids().is_empty()).then_some(())
    });
    println!(
        "MEASURED run -t kubernetes-application, Ctrl-C to cluster gone: {:?}",
        interrupted.elapsed()
    );
}

#[test]
fn a_failing_application_reports_its_failure_and_bad_input_leaves_nothing() {
    let Some((plane, api, ns, kubelet)) = sluice_namespace("failing") else {
        return;
    };
    let app = Session::new(plane, &ns, "bad-app", &["restart-strategy.type=none"]);
    let deployments = || {
        api.get(&format!("/apis/apps/v1/namespaces/{ns}/deployments"))
            .expect("list deployments")["items"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let refused = |args: &[&str], expected: &str| {
        let out = app.sluice(args);
        assert!(!out.status.success(), "{}", text(&out));
        assert!(text(&out).contains(expected), "{}", text(&out));
        assert_eq!(deployments(), 0, "nothing created for {args:?}");
    };
    let run = ["run", "-t", "kubernetes-application"];
    // Refused before anything is created.
    refused(
        &[&run[..], &["./target/my-job"]].concat(),
        "put the job artifact into the image and name it local:///path/in/the/image",
    );
    refused(
        &[&run[..], &["no-such-program"]].concat(),
        "there is no bundled program 'no-such-program'",
    );
    refused(
        &[&run[..], &["-c", "sum", "wordcount"]].concat(),
        "is a bundled program",
    );
    refused(
        &[
            &["-D", "kubernetes.no-such-key=1"][..],
            &run[..],
            &["wordcount"],
        ]
        .concat(),
        "kubernetes.no-such-key",
    );
    let dead = plane.dir.join(format!("{ns}-unreachable.kubeconfig"));
    let kubeconfig = std::fs::read_to_string(&plane.kubeconfig).expect("the kubeconfig");
    std::fs::write(
        &dead,
        kubeconfig.replace(&plane.server, &format!("https://127.0.0.1:{}", free_port())),
    )
    .expect("write a kubeconfig");
    let dead_config = format!("kubernetes.config.file={}", dead.display());
    refused(
        &[&["-D", &dead_config][..], &run[..], &["wordcount"]].concat(),
        "unreachable",
    );

    // A job that fails at once: its cause in the CLI's output, a non-zero exit, and the
    // cluster gone.
    let missing = plane.dir.join("no-such-input.txt");
    let out = app.sluice(
        &[
            &run[..],
            &["wordcount", "--input", missing.to_str().unwrap()],
        ]
        .concat(),
    );
    let printed = text(&out);
    assert!(!out.status.success(), "{printed}");
    assert!(
        printed.contains("failed.") && printed.contains("Caused by:"),
        "{printed}"
    );
    assert!(printed.contains("no-such-input.txt"), "{printed}");
    wait_for(WAIT, "the failed application's cluster gone", || {
        (cluster_gone(&api, &ns, "bad-app") && kubelet.pids().is_empty()).then_some(())
    });

    // A program the artifact in the image does not hold: its JobManager refuses the job, the
    // CLI says why, and the cluster goes.
    let artifact = format!("local://{}", test_job_bin().display());
    let out = app.sluice(&[&run[..], &["-c", "nope", &artifact]].concat());
    let printed = text(&out);
    assert!(!out.status.success(), "{printed}");
    assert!(
        printed.contains("no program 'nope'") && printed.contains("sum"),
        "{printed}"
    );
    wait_for(WAIT, "the refused application's cluster gone", || {
        (cluster_gone(&api, &ns, "bad-app") && kubelet.pids().is_empty()).then_some(())
    });
}

#[test]
fn a_job_artifact_in_the_image_runs_as_the_whole_application_cluster() {
    let Some((plane, api, ns, kubelet)) = sluice_namespace("artifact") else {
        return;
    };
    let app = Session::new(plane, &ns, "sum-app", &[]);
    let tmp = tempfile::tempdir().expect("a scratch folder");
    let sums = tmp.path().join("sums");
    // The stand-in runs pods on this host: the artifact's path here is its path "in the image".
    let artifact = format!("local://{}", test_job_bin().display());
    let out = app.sluice(&[
        "run",
        "-t",
        "kubernetes-application",
        "-p",
        "2",
        "-c",
        "sum",
        &artifact,
        "--records",
        "20000",
        "--keys",
        "10",
        "--output",
        sums.to_str().unwrap(),
    ]);
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    assert!(
        printed.contains(&format!("sum from {artifact}")),
        "{printed}"
    );
    let finals = final_sums(&sums);
    assert_eq!(finals.len(), 10, "{finals:?}");
    assert!(finals.values().all(|&s| s == 2_000), "{finals:?}");
    // The TaskManagers ran the artifact too: their program is not one sluice bundles.
    let tms = taskmanagers_run(&kubelet, "sum-app");
    assert!(!tms.is_empty());
    wait_for(WAIT, "every object and process of the cluster gone", || {
        (cluster_gone(&api, &ns, "sum-app") && kubelet.pids().is_empty()).then_some(())
    });
}
