//! The Prometheus text exposition format (version 0.0.4), rendered as Flink's Prometheus
//! reporter names and labels metrics: `flink_<scope>_<name>` with the scope's variables as
//! labels, every metric a gauge.
//!
//! Rendered by hand rather than with a client crate: Flink's label sets differ per task and the
//! values are read from the tasks' counters at scrape time, so a registry of typed metric
//! objects would only be filled to be emptied again on each scrape.

use std::collections::BTreeMap;
use std::fmt::Write;

/// One sample: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Label names and values, in the order they are written.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: f64,
}

/// Collects samples by metric name and renders them, each name once with its `# TYPE` line.
#[derive(Debug, Default)]
pub struct Exposition {
    /// By exported name: the help line (Flink's: the metric's own name and its scope) and the
    /// samples.
    families: BTreeMap<String, (String, Vec<Sample>)>,
}

impl Exposition {
    /// Adds a sample of the metric `name` of `scope` (e.g. `taskmanager_job_task`).
    pub fn add(
        &mut self,
        scope: &str,
        name: &str,
        labels: Vec<(&'static str, String)>,
        value: f64,
    ) {
        let full = metric_name(scope, name);
        self.families
            .entry(full)
            .or_insert_with(|| (format!("{name} (scope: {scope})"), Vec::new()))
            .1
            .push(Sample { labels, value });
    }

    /// The text a scrape gets.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, (help, samples)) in &self.families {
            let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
            let _ = writeln!(out, "# TYPE {name} gauge");
            for s in samples {
                out.push_str(name);
                if !s.labels.is_empty() {
                    out.push('{');
                    for (i, (k, v)) in s.labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{k}=\"{}\"", escape_label(v));
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {}", format_value(s.value));
            }
        }
        out
    }
}

/// `flink_<scope>_<name>`, every character Prometheus does not allow in a name replaced by `_`
/// (as Flink's reporter does).
pub fn metric_name(scope: &str, name: &str) -> String {
    format!("flink_{scope}_{name}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A label value with `\`, `"` and newlines escaped.
fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A help text with `\` and newlines escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families_with_labels() {
        let mut e = Exposition::default();
        let labels = |s: &str| {
            vec![
                ("job_name", "a \"q\"\\n\nx".to_string()),
                ("subtask_index", s.to_string()),
            ]
        };
        e.add(
            "taskmanager_job_task",
            "numRecordsInPerSecond",
            labels("0"),
            12.5,
        );
        e.add(
            "taskmanager_job_task",
            "numRecordsInPerSecond",
            labels("1"),
            3.0,
        );
        e.add(
            "jobmanager",
            "numRegisteredTaskManagers",
            vec![("host", "h".into())],
            2.0,
        );
        e.add("jobmanager", "Status.Process.CPU.Load", vec![], f64::NAN);
        let text = e.render();
        assert_eq!(
            text,
            "# HELP flink_jobmanager_Status_Process_CPU_Load Status.Process.CPU.Load (scope: jobmanager)\n\
             # TYPE flink_jobmanager_Status_Process_CPU_Load gauge\n\
             flink_jobmanager_Status_Process_CPU_Load NaN\n\
             # HELP flink_jobmanager_numRegisteredTaskManagers numRegisteredTaskManagers (scope: jobmanager)\n\
             # TYPE flink_jobmanager_numRegisteredTaskManagers gauge\n\
             flink_jobmanager_numRegisteredTaskManagers{host=\"h\"} 2\n\
             # HELP flink_taskmanager_job_task_numRecordsInPerSecond numRecordsInPerSecond (scope: taskmanager_job_task)\n\
             # TYPE flink_taskmanager_job_task_numRecordsInPerSecond gauge\n\
             flink_taskmanager_job_task_numRecordsInPerSecond{job_name=\"a \\\"q\\\"\\\\n\\nx\",subtask_index=\"0\"} 12.5\n\
             flink_taskmanager_job_task_numRecordsInPerSecond{job_name=\"a \\\"q\\\"\\\\n\\nx\",subtask_index=\"1\"} 3\n"
        );
    }

    #[test]
    fn names_keep_only_allowed_characters() {
        assert_eq!(
            metric_name("taskmanager", "Status.Process.Memory.RSS"),
            "flink_taskmanager_Status_Process_Memory_RSS"
        );
        assert_eq!(metric_name("a-b", "x y"), "flink_a_b_x_y");
    }
}
