//! The Kubernetes test environment against a real control plane (kube-apiserver and
//! kube-controller-manager from `scripts/kubernetes.sh`): the kubelet stand-in of
//! `integration/src/kube.rs` runs the pods the real Deployment and ReplicaSet controllers
//! create, restarts and reports them as a kubelet does, and the real garbage collector removes
//! a deleted Deployment's pods. The native Kubernetes resource driver's tests build on this.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_integration::kube::{self, Api, Kubelet};
use sluice_integration::{alive, signal, wait_for};

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
