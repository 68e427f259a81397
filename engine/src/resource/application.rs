//! The one job of an application cluster (`run -t yarn-application`,
//! `run -t kubernetes-application`): what the client tells the cluster's JobManager to run from
//! its start, and how that travels (hex-encoded JSON: it survives a NodeManager's launch script,
//! which does not keep quotes, as well as a pod's command line).

/// The job of a one-job application cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApplicationJob {
    /// A program's name: a bundled one, or one of the job artifact the cluster runs. Empty on
    /// Kubernetes when the artifact in the image was given without `-c`: the JobManager, which
    /// runs that artifact, picks its only program.
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its parallelism (default: parallelism.default).
    pub parallelism: Option<u32>,
    /// Job-scoped configuration (`-D execution.checkpointing.…` and the like).
    pub overrides: Vec<(String, String)>,
    /// A savepoint to start from.
    pub savepoint: Option<String>,
    /// The job artifact the program comes from, on the submitting machine (YARN ships it as
    /// the application's binary; on Kubernetes it is a path inside the image): a whole sluice
    /// with the job's programs bundled, which every process of the cluster runs. Not part of
    /// what the JobManager is told.
    #[serde(skip)]
    pub artifact: Option<std::path::PathBuf>,
}

impl ApplicationJob {
    /// The job as hex-encoded JSON.
    pub fn encode(&self) -> String {
        to_hex_json(self)
    }

    /// Parses what [`ApplicationJob::encode`] wrote; `what` names where it came from, for the
    /// error.
    pub fn decode(what: &str, value: &str) -> Result<Self, String> {
        from_hex_json(what, value)
    }
}

/// `value` as hex-encoded JSON.
pub fn to_hex_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_vec(value)
        .unwrap_or_default()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Parses what [`to_hex_json`] wrote; `what` names where it came from, for the error.
pub fn from_hex_json<T: serde::de::DeserializeOwned>(what: &str, value: &str) -> Result<T, String> {
    let bytes = (0..value.len())
        .step_by(2)
        .map(|i| {
            value
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{what} is not hex"))
        })
        .collect::<Result<Vec<u8>, String>>()?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{what} is not valid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_application_job_survives_encoding_and_garbage_is_an_error() {
        let job = ApplicationJob {
            name: "wordcount".into(),
            args: vec!["--input".into(), "/a \"b\" c".into()],
            parallelism: Some(2),
            overrides: vec![("restart-strategy.type".into(), "none".into())],
            savepoint: None,
            artifact: None,
        };
        let hex = job.encode();
        assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(ApplicationJob::decode("JOB", &hex), Ok(job));
        assert!(ApplicationJob::decode("JOB", "zz").is_err());
        assert!(ApplicationJob::decode("JOB", "7b").is_err());
        assert!(ApplicationJob::decode("JOB", "7").is_err());
    }
}
