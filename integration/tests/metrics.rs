//! Metrics end to end: a standalone cluster of two TaskManagers with Prometheus reporters on a
//! port range, scraped by a real Prometheus (started by `scripts/prometheus.sh`), and the REST
//! metric endpoints against the same running job.

use std::time::Duration;

use serde_json::Value;
use sluice_integration::prometheus::{self, Prometheus};
use sluice_integration::{StandaloneCluster, free_port, job_id_of, wait_for};

fn text(o: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The value of the one metric a `get=` request asked for.
fn single(values: &Value) -> f64 {
    values[0]["value"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no value in {values}"))
}

#[test]
fn prometheus_scrapes_the_reporters_and_rest_serves_the_metrics() {
    prometheus::assert_installed();
    let first = free_port();
    let last = first.saturating_add(30);
    let checkpoints = tempfile::tempdir().unwrap();
    let cluster = StandaloneCluster::start(
        2,
        2,
        &format!(
            "metrics.reporter.prom.factory.class: org.apache.flink.metrics.prometheus.PrometheusReporterFactory\nmetrics.reporter.prom.port: {first}-{last}\nheartbeat.interval: 1 s\nexecution.checkpointing.interval: 1 s\nexecution.checkpointing.dir: {}\n",
            checkpoints.path().display()
        ),
    );
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();

    // The TaskManagers name their reporter ports in REST; each took its own port of the range.
    let tms = cluster.get("/taskmanagers").expect("taskmanagers");
    let tm_ports = cluster.reporter_ports();
    assert_eq!(tm_ports.len(), 2);
    assert_ne!(tm_ports[0], tm_ports[1]);
    assert!(tm_ports.iter().all(|p| (first..=last).contains(p)));
    let tm_id = tms["taskmanagers"][0]["id"].as_str().unwrap().to_string();
    let one = cluster
        .get(&format!("/taskmanagers/{tm_id}"))
        .expect("taskmanager");
    assert!(one["prometheusReporterPort"].as_u64().is_some(), "{one}");
    // The JobManager's reporter is the other port of the range that answers.
    let jm_port = (first..=last)
        .filter(|p| !tm_ports.contains(p))
        .find(|p| {
            http.get(format!("http://127.0.0.1:{p}/metrics"))
                .send()
                .and_then(|r| r.text())
                .is_ok_and(|t| t.contains("flink_jobmanager_numRegisteredTaskManagers"))
        })
        .expect("the JobManager's reporter in the port range");
    // Garbage on a reporter port gets an error answer, and the reporter keeps serving.
    let bad = http
        .post(format!("http://127.0.0.1:{jm_port}/metrics"))
        .body("\u{0}\u{1}garbage")
        .send()
        .expect("an answer");
    assert!(bad.status().is_client_error(), "{}", bad.status());

    let out = cluster.cli(&[
        "run",
        "-m",
        &cluster.rest(),
        "-d",
        "-p",
        "2",
        "stream-sum",
        "--rate",
        "4000",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let job = job_id_of(&String::from_utf8_lossy(&out.stdout));

    let mut targets: Vec<String> = tm_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    targets.push(format!("127.0.0.1:{jm_port}"));
    let prometheus = Prometheus::start(&targets);
    let promql =
        format!("flink_taskmanager_job_task_numRecordsInPerSecond{{job_id=\"{job}\"}} > 0");
    let series = wait_for(
        Duration::from_secs(90),
        "Prometheus to see records flowing into every subtask of the sum",
        || {
            let result = prometheus.query(&http, &promql)?;
            let subtasks: std::collections::BTreeSet<String> = result
                .iter()
                .filter_map(|s| s["metric"]["subtask_index"].as_str().map(String::from))
                .collect();
            (subtasks.len() == 2).then_some(result)
        },
    );
    for s in &series {
        let m = &s["metric"];
        for label in ["job_name", "task_name", "task_attempt_num", "tm_id", "host"] {
            assert!(m[label].is_string(), "label {label} missing: {s}");
        }
    }
    let usage = prometheus
        .query(
            &http,
            &format!("flink_taskmanager_job_task_inPoolUsage{{job_id=\"{job}\"}}"),
        )
        .expect("Prometheus answers");
    assert!(!usage.is_empty(), "inPoolUsage is exported");
    wait_for(
        Duration::from_secs(30),
        "Prometheus to count two TaskManagers",
        || {
            let result =
                prometheus.query(&http, "flink_jobmanager_numRegisteredTaskManagers == 2")?;
            (!result.is_empty()).then_some(())
        },
    );

    // REST: the sum vertex's records in grow, its subtasks report rates and time shares.
    let details = cluster.job(&job);
    let vertices: Vec<String> = details["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    let records_in = |vid: &str| {
        let v = cluster
            .get(&format!(
                "/jobs/{job}/vertices/{vid}/subtasks/metrics?get=numRecordsIn&agg=sum"
            ))
            .expect("subtask metrics");
        v[0]["sum"].as_f64().unwrap_or(0.0)
    };
    // The source reads no records from the network; the sum does.
    let vid = wait_for(Duration::from_secs(30), "a vertex with records in", || {
        vertices.iter().find(|v| records_in(v) > 0.0).cloned()
    });
    let base = format!("/jobs/{job}/vertices/{vid}");
    let records_in = || records_in(&vid);
    let before = records_in();
    wait_for(Duration::from_secs(30), "numRecordsIn to grow", || {
        (records_in() > before).then_some(())
    });
    let rate = cluster
        .get(&format!("{base}/metrics?get=0.numRecordsInPerSecond"))
        .expect("vertex metrics");
    assert!(single(&rate) > 0.0, "{rate}");
    // The input side's buffer usage is served with the other task metrics.
    let usage = cluster
        .get(&format!(
            "{base}/metrics?get=0.inPoolUsage,1.inputQueueLength"
        ))
        .expect("vertex metrics");
    assert_eq!(usage.as_array().map(Vec::len), Some(2), "{usage}");
    let in_pool = usage
        .as_array()
        .and_then(|a| a.iter().find(|m| m["id"] == "0.inPoolUsage"))
        .and_then(|m| m["value"].as_str())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("0.inPoolUsage in {usage}"));
    assert!((0.0..=1.0).contains(&in_pool), "{usage}");
    let bp = cluster
        .get(&format!("{base}/backpressure"))
        .expect("backpressure");
    assert_eq!(bp["status"], "ok", "{bp}");
    assert_eq!(bp["subtasks"].as_array().map(Vec::len), Some(2), "{bp}");
    let jm = cluster
        .get("/jobmanager/metrics?get=numRegisteredTaskManagers,numRunningJobs")
        .expect("jobmanager metrics");
    assert_eq!(jm[0]["value"], "2", "{jm}");
    assert_eq!(jm[1]["value"], "1", "{jm}");
    let rss = cluster
        .get(&format!(
            "/taskmanagers/{tm_id}/metrics?get=Status.Process.Memory.RSS"
        ))
        .expect("taskmanager metrics");
    assert!(single(&rss) > 0.0, "{rss}");
    let uptime = cluster
        .get(&format!("/jobs/{job}/metrics?get=uptime"))
        .expect("job metrics");
    assert!(single(&uptime) > 0.0, "{uptime}");

    // `stateSize`: the sum's subtasks report the bytes of their latest snapshot, which is what
    // the checkpoint statistics count for the vertex once that snapshot's checkpoint completed
    // (1,000 keys, so the size settles once every key has been seen).
    let state_size = || {
        let v = cluster
            .get(&format!(
                "/jobs/{job}/vertices/{vid}/subtasks/metrics?get=stateSize&agg=sum"
            ))
            .expect("subtask metrics");
        v[0]["sum"].as_f64().unwrap_or(0.0) as u64
    };
    let (reported, checkpointed) = wait_for(
        Duration::from_secs(60),
        "the sum's stateSize to match its latest completed checkpoint",
        || {
            let history = cluster.get(&format!("/jobs/{job}/checkpoints")).ok()?;
            let id = history["latest"]["completed"]["id"].as_u64()?;
            let detail = cluster
                .get(&format!("/jobs/{job}/checkpoints/details/{id}"))
                .ok()?;
            let checkpointed = detail["tasks"][vid.as_str()]["state_size"].as_u64()?;
            let reported = state_size();
            (reported > 0 && reported == checkpointed).then_some((reported, checkpointed))
        },
    );
    assert_eq!(reported, checkpointed);
    wait_for(
        Duration::from_secs(30),
        "Prometheus to see the subtasks' stateSize",
        || {
            let promql = format!("flink_taskmanager_job_task_stateSize{{job_id=\"{job}\"}} > 0");
            let result = prometheus.query(&http, &promql)?;
            (!result.is_empty()).then_some(())
        },
    );

    let out = cluster.cli(&["cancel", "-m", &cluster.rest(), &job]);
    assert!(out.status.success(), "{}", text(&out));
    drop(prometheus);
}
