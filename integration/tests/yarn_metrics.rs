//! Metrics of a YARN session scraped by a real Prometheus: a MiniYARNCluster (started by
//! scripts/yarn-minicluster.sh) runs a detached `sluice yarn-session` whose JobManager (in the
//! ApplicationMaster's container) and TaskManager containers run the Prometheus reporter on a
//! port range; Prometheus (scripts/prometheus.sh) is configured from the ports the REST API
//! reports (`prometheusReporterPort` of `GET /taskmanagers`) and a PromQL query returns the
//! job's per-subtask record rate. The containers' logs are read through the JobManager.
//!
//! Needs Java 17 and Maven (as `yarn_session.rs`); `SLUICE_SKIP_YARN=1` skips it.

use std::time::Duration;

use sluice_integration::prometheus::{self, Prometheus};
use sluice_integration::yarn::{
    self, MiniYarn, YarnClient, container_processes, field_after, text,
};
use sluice_integration::{free_port, job_id_of, wait_for};

/// The host of a TaskManager's `path` (`sluice://<host>:<port>/taskmanager/<id>`).
fn host_of_path(path: &str) -> &str {
    let address = path
        .strip_prefix("sluice://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("a TaskManager path: {path}"));
    address.rsplit_once(':').map_or(address, |(host, _)| host)
}

#[test]
fn prometheus_scrapes_a_yarn_sessions_jobmanager_and_taskmanager_containers() {
    if yarn::skipped() {
        return;
    }
    prometheus::assert_installed();
    let cluster = MiniYarn::start("sluice-yarn-metrics-");
    let client = YarnClient::new(&cluster);
    let first = free_port();
    let last = first.saturating_add(30);
    let factory = "metrics.reporter.prom.factory.class=org.apache.flink.metrics.prometheus.PrometheusReporterFactory";
    let ports = format!("metrics.reporter.prom.port={first}-{last}");
    let out = client.sluice(&[
        "-D",
        factory,
        "-D",
        &ports,
        "-D",
        "heartbeat.interval=1 s",
        "yarn-session",
        "-d",
        "-s",
        "1",
        "-tm",
        "256",
        "-jm",
        "256",
    ]);
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    let app = field_after(&printed, "YARN application ").to_string();
    let rest = field_after(&printed, "JobManager Web Interface: http://").to_string();

    let run = client.sluice(&[
        "run",
        "-t",
        "yarn-session",
        "-d",
        "-p",
        "2",
        "stream-sum",
        "--rate",
        "2000",
    ]);
    assert!(run.status.success(), "{}", text(&run));
    let job = job_id_of(&String::from_utf8_lossy(&run.stdout));

    // The TaskManager containers name their reporters in REST.
    let mut targets: Vec<String> = wait_for(
        Duration::from_secs(90),
        "two TaskManager containers with reporter ports",
        || {
            let tms = client.sluice_rest(&rest, "/taskmanagers");
            let targets: Vec<String> = tms["taskmanagers"]
                .as_array()?
                .iter()
                .filter_map(|tm| {
                    let port = tm["prometheusReporterPort"].as_u64()?;
                    let host = host_of_path(tm["path"].as_str()?);
                    Some(format!("{host}:{port}"))
                })
                .collect();
            (targets.len() == 2).then_some(targets)
        },
    );
    // The AM's JobManager reporter: the port of the range that answers with its metrics.
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("http client");
    let jm_host = rest.rsplit_once(':').map_or(rest.as_str(), |(h, _)| h);
    let jm = (first..=last)
        .map(|p| format!("{jm_host}:{p}"))
        .filter(|t| !targets.contains(t))
        .find(|t| {
            http.get(format!("http://{t}/metrics"))
                .send()
                .and_then(|r| r.text())
                .is_ok_and(|m| m.contains("flink_jobmanager_numRegisteredTaskManagers"))
        })
        .expect("the JobManager's reporter in the port range");
    targets.push(jm);

    let prometheus = Prometheus::start(&targets);
    let promql =
        format!("flink_taskmanager_job_task_numRecordsInPerSecond{{job_id=\"{job}\"}} > 0");
    let series = wait_for(
        Duration::from_secs(120),
        "Prometheus to see records flowing into both subtasks on the containers",
        || {
            let result = prometheus.query(&http, &promql)?;
            let subtasks: std::collections::BTreeSet<String> = result
                .iter()
                .filter_map(|s| s["metric"]["subtask_index"].as_str().map(String::from))
                .collect();
            (subtasks.len() == 2).then_some(result)
        },
    );
    let containers: std::collections::BTreeSet<&str> = series
        .iter()
        .filter_map(|s| s["metric"]["tm_id"].as_str())
        .collect();
    assert_eq!(containers.len(), 2, "one subtask per container: {series:?}");
    assert!(
        containers.iter().all(|c| c.starts_with("container_")),
        "{containers:?}"
    );
    wait_for(
        Duration::from_secs(30),
        "Prometheus to read the AM's JobManager",
        || {
            let result =
                prometheus.query(&http, "flink_jobmanager_numRegisteredTaskManagers == 2")?;
            (!result.is_empty()).then_some(())
        },
    );
    drop(prometheus);

    // The containers' logs through the JobManager: YARN sends a container's stderr (the log)
    // and stdout to files of their own in its log directory.
    for tm in client.sluice_rest(&rest, "/taskmanagers")["taskmanagers"]
        .as_array()
        .expect("taskmanagers")
    {
        let id = tm["id"].as_str().expect("id");
        let listed = client.sluice_rest(&rest, &format!("/taskmanagers/{id}/logs"));
        assert_eq!(listed["logs"][0]["name"], "stderr", "{listed}");
        let get = |path: &str| {
            let r = reqwest::blocking::get(format!("http://{rest}{path}")).expect("GET");
            (r.status().as_u16(), r.text().unwrap_or_default())
        };
        let (status, log) = get(&format!("/taskmanagers/{id}/log"));
        assert_eq!(status, 200, "{log}");
        assert!(
            log.contains("TaskManager started") && log.contains(id),
            "the container's own log: {log}"
        );
        let (status, body) = get(&format!("/taskmanagers/{id}/stdout"));
        assert_eq!(status, 200, "{body}");
        // stdout is not one of the log files: not served by name.
        let (status, body) = get(&format!("/taskmanagers/{id}/logs/stdout"));
        assert_eq!(status, 404, "{body}");
    }

    let kill = client.sluice(&["yarn-session", "--kill"]);
    assert!(kill.status.success(), "{}", text(&kill));
    wait_for(
        Duration::from_secs(20),
        "the application's processes to end",
        || container_processes(&app).is_empty().then_some(()),
    );
}
