//! The adaptive scheduler on a standalone cluster of real processes: a `counting` job wanting
//! parallelism 4 starts on the 2 slots there are, grows to 4 when a TaskManager joins, shrinks
//! back when that TaskManager is killed, and follows new requirements put through REST — and
//! its output is still exactly once. Prints how long each change took.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_integration::{StandaloneCluster, all_running, counting_args, signal, wait_for};

/// Every vertex's parallelism, as `GET /jobs/:id` shows it.
fn parallelism(job: &Value) -> Vec<u64> {
    job["vertices"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v["parallelism"].as_u64())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until the job runs every vertex at `p` (or at 1 where the vertex's upper bound is 1)
/// under the adaptive scheduler's `Executing`; how long that took.
fn wait_running_at(cluster: &StandaloneCluster, id: &str, p: u64, within: Duration) -> Duration {
    let started = Instant::now();
    wait_for(
        within,
        &format!("the job running at parallelism {p}"),
        || {
            let job = cluster.job(id);
            assert_ne!(job["state"], "FAILED", "{}", cluster.exceptions(id));
            (all_running(&job)
                && job["adaptive-scheduler-state"] == "Executing"
                && parallelism(&job).iter().all(|&v| v == p))
            .then_some(())
        },
    );
    started.elapsed()
}

fn config(checkpoints: &Path) -> String {
    format!(
        "jobmanager.scheduler: adaptive\n\
         jobmanager.adaptive-scheduler.resource-stabilization-timeout: 1 s\n\
         jobmanager.adaptive-scheduler.scaling-interval.min: 3 s\n\
         execution.checkpointing.interval: 500 ms\n\
         execution.checkpointing.dir: {}\n\
         restart-strategy.type: fixed-delay\n\
         restart-strategy.fixed-delay.attempts: 100\n\
         restart-strategy.fixed-delay.delay: 100 ms\n",
        checkpoints.display()
    )
}

#[test]
fn a_job_grows_and_shrinks_with_its_taskmanagers_and_new_requirements_exactly_once() {
    let scratch = tempfile::tempdir().expect("scratch");
    let output = scratch.path().join("out");
    let cluster = StandaloneCluster::start(1, 2, &config(&scratch.path().join("checkpoints")));
    let (rate, keys) = (4_000u64, 11u64);
    let records = rate * 40;
    let submitted = Instant::now();
    let id = cluster.submit_args(&counting_args(4, records, keys, &output, rate));
    let first = wait_running_at(&cluster, &id, 2, Duration::from_secs(30));
    eprintln!(
        "adaptive: submitted -> running at 2 of 4 wanted: {:.1} s (stabilization 1 s)",
        (submitted.elapsed()).as_secs_f64().max(first.as_secs_f64())
    );
    let requirements = cluster
        .get(&format!("/jobs/{id}/resource-requirements"))
        .expect("requirements");
    let vertices: Vec<String> = requirements
        .as_object()
        .expect("a map by vertex id")
        .keys()
        .cloned()
        .collect();
    assert!(!vertices.is_empty());
    for v in &vertices {
        assert_eq!(
            requirements[v]["parallelism"]["upperBound"], 4,
            "{requirements}"
        );
        assert_eq!(
            requirements[v]["parallelism"]["lowerBound"], 1,
            "{requirements}"
        );
    }

    // A TaskManager joins: the job rescales to 4 (after the scaling interval of 3 s).
    let before = cluster.pids("taskmanager");
    let out = cluster.script("taskmanager.sh", &["start"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let joined = Instant::now();
    let grew = wait_running_at(&cluster, &id, 4, Duration::from_secs(60));
    eprintln!(
        "adaptive: TaskManager started -> running at 4: {:.1} s (scaling interval 3 s)",
        grew.as_secs_f64().min(joined.elapsed().as_secs_f64())
    );

    // It is killed: the job fails over onto the 2 slots left instead of waiting for 4.
    std::thread::sleep(Duration::from_secs(2));
    let new_tm = cluster
        .pids("taskmanager")
        .into_iter()
        .find(|p| !before.contains(p))
        .expect("the new TaskManager's pid");
    signal("-9", new_tm);
    let shrank = wait_running_at(&cluster, &id, 2, Duration::from_secs(60));
    eprintln!(
        "adaptive: TaskManager killed -> running at 2: {:.1} s",
        shrank.as_secs_f64()
    );

    // New requirements through REST: at most 1 subtask per vertex, at once.
    std::thread::sleep(Duration::from_secs(2));
    let body: serde_json::Map<String, Value> = vertices
        .iter()
        .map(|v| {
            let bounds = serde_json::json!({"parallelism": {"lowerBound": 1, "upperBound": 1}});
            (v.clone(), bounds)
        })
        .collect();
    let put = Instant::now();
    let (status, text) = cluster.request(
        "PUT",
        &format!("/jobs/{id}/resource-requirements"),
        &Value::Object(body).to_string(),
    );
    assert_eq!(status, 200, "{text}");
    let narrowed = wait_running_at(&cluster, &id, 1, Duration::from_secs(60));
    eprintln!(
        "adaptive: PUT requirements -> running at 1: {:.1} s",
        narrowed.min(put.elapsed()).as_secs_f64()
    );
    // A bad request says what is wrong and changes nothing.
    let (status, text) = cluster.request(
        "PUT",
        &format!("/jobs/{id}/resource-requirements"),
        r#"{"nope": {"parallelism": {"lowerBound": 1, "upperBound": 2}}}"#,
    );
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("every vertex"), "{text}");

    cluster.wait_state(&id, "FINISHED", Duration::from_secs(120));
    let (ok, report) = cluster.check_counting(records, keys, &output);
    assert!(
        ok && report.starts_with("OK"),
        "not exactly once:\n{report}"
    );
}
