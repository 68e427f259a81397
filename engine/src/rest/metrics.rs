//! The metric endpoints' answers, in Flink's shapes: metric lists (`[{"id": ...}]`, with
//! `get=a,b` `[{"id": ..., "value": "..."}]`, values as strings), aggregated subtask metrics
//! (`[{"id": ..., "min": ..., "max": ..., "avg": ..., "sum": ..., "skew": ...}]`, numbers), and
//! a vertex's back pressure (`JobVertexBackPressureInfo`).

use serde_json::{Value, json};

use crate::metrics::{Aggregate, Aggregation, BackPressureLevel, TimeRatios};

/// A metric value as Flink's REST API writes it: a string, integers without a fraction.
pub fn format_value(v: f64) -> String {
    if v == i64::MIN as f64 {
        // "No watermark yet", as Flink writes it.
        i64::MIN.to_string()
    } else if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The names in a `get` parameter (comma-separated).
fn requested(get: &str) -> Vec<&str> {
    get.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// A metric list: the ids without `get`, else the requested metrics that exist with their
/// values (unknown ids are left out, as Flink does).
pub fn metric_list(values: &[(String, f64)], get: Option<&str>) -> Value {
    match get {
        None => Value::Array(values.iter().map(|(id, _)| json!({ "id": id })).collect()),
        Some(get) => Value::Array(
            requested(get)
                .into_iter()
                .filter_map(|id| values.iter().find(|(name, _)| name == id))
                .map(|(id, v)| json!({ "id": id, "value": format_value(*v) }))
                .collect(),
        ),
    }
}

/// Metrics aggregated over subtasks: the ids any subtask has without `get`, else per requested
/// id the `agg` aggregations (all of them without `agg`). An unknown aggregation is an error.
pub fn aggregated(
    subtasks: &[Vec<(&'static str, f64)>],
    get: Option<&str>,
    agg: Option<&str>,
) -> Result<Value, String> {
    let aggregations = match agg {
        Some(raw) => Aggregation::parse_list(raw)?,
        None => Aggregation::ALL.to_vec(),
    };
    let mut ids: Vec<&str> = Vec::new();
    for (name, _) in subtasks.iter().flatten() {
        if !ids.contains(name) {
            ids.push(name);
        }
    }
    let Some(get) = get else {
        return Ok(Value::Array(
            ids.iter().map(|id| json!({ "id": id })).collect(),
        ));
    };
    let mut out = Vec::new();
    for id in requested(get) {
        let values = subtasks
            .iter()
            .filter_map(|s| s.iter().find(|(name, _)| *name == id).map(|(_, v)| *v));
        let Some(a) = Aggregate::of(values) else {
            continue;
        };
        let mut entry = serde_json::Map::new();
        entry.insert("id".into(), json!(id));
        for aggregation in &aggregations {
            entry.insert(aggregation.name().into(), json!(a.get(*aggregation)));
        }
        out.push(Value::Object(entry));
    }
    Ok(Value::Array(out))
}

/// Flink's `JobVertexBackPressureInfo` from the subtasks' time ratios (ms per second) measured
/// at `now`: each subtask's level from its back-pressured ratio, the vertex's the highest.
pub fn backpressure(subtasks: &[(u32, TimeRatios)], now: u64) -> Value {
    let mut vertex_level = BackPressureLevel::Ok;
    let entries: Vec<Value> = subtasks
        .iter()
        .map(|(subtask, t)| {
            let ratio = t.back_pressured_ms_per_second / 1000.0;
            let level = BackPressureLevel::of(ratio);
            vertex_level = vertex_level.max(level);
            json!({
                "subtask": subtask,
                "backpressure-level": level.name(),
                "ratio": ratio,
                "idleRatio": t.idle_ms_per_second / 1000.0,
                "busyRatio": t.busy_ms_per_second / 1000.0,
            })
        })
        .collect();
    json!({
        "status": "ok",
        "backpressure-level": vertex_level.name(),
        "end-timestamp": now,
        "subtasks": entries,
    })
}

/// Adds the Prometheus reporter's port to a TaskManager's entry (`null` without a reporter), so
/// scrapers can find it.
pub fn add_reporter_port(entry: &mut Value, port: Option<u16>) {
    if let Value::Object(map) = entry {
        map.insert("prometheusReporterPort".into(), json!(port));
    }
}
