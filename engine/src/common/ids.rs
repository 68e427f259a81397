//! Identifiers shared by the JobManager, TaskManagers and the REST API.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A job's id: 128 random bits, written as 32 lower-case hex digits as in Flink.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct JobId(pub u128);

impl JobId {
    /// A fresh random id.
    pub fn random() -> Self {
        JobId(rand::random())
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for JobId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("'{s}' is not a job id (32 hexadecimal digits)"));
        }
        u128::from_str_radix(s, 16)
            .map(JobId)
            .map_err(|e| format!("'{s}' is not a job id: {e}"))
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.to_string()
    }
}

impl TryFrom<String> for JobId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

/// One attempt of one parallel subtask of one vertex of one job.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct ExecutionId {
    /// The job.
    pub job: JobId,
    /// The vertex's index in the job graph.
    pub vertex: u32,
    /// The subtask's index, `0..parallelism`.
    pub subtask: u32,
    /// How many times this subtask was deployed before (0 for the first deployment).
    pub attempt: u32,
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/v{}/{}#{}",
            self.job, self.vertex, self.subtask, self.attempt
        )
    }
}

/// A result partition: what one producing execution writes for one of its outputs.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct PartitionId {
    /// The producing execution.
    pub producer: ExecutionId,
    /// Which of the producer vertex's outputs (job edges) this is.
    pub output: u32,
}

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:out{}", self.producer, self.output)
    }
}

/// A TaskManager's id (Flink's ResourceID): chosen by the TaskManager, unique in the cluster.
pub type ResourceId = String;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_id_is_32_hex_digits_and_parses_back() {
        let id = JobId(0xabc);
        assert_eq!(id.to_string(), "00000000000000000000000000000abc");
        assert_eq!(id.to_string().parse::<JobId>().unwrap(), id);
        assert!("xyz".parse::<JobId>().is_err());
        assert!("0000000000000000000000000000000g".parse::<JobId>().is_err());
    }
}
