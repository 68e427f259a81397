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

/// An operator's stable id, which checkpoints and savepoints address its state by (Flink's
/// `OperatorID`): the hash of the uid the program gave it, or one the job graph derives from
/// the operator's place in the dataflow. 128 bits, written as 32 lower-case hex digits.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct OperatorId(pub u128);

impl OperatorId {
    /// The id of the operator whose uid is `uid`: the same uid always gives the same id, in
    /// any program and any version of it.
    pub fn from_uid(uid: &str) -> Self {
        Self::digest(&[b"sluice-operator-uid\0", uid.as_bytes()])
    }

    /// The first 128 bits of the SHA-256 of `parts`, concatenated.
    pub fn digest(parts: &[&[u8]]) -> Self {
        let mut context = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        for part in parts {
            context.update(part);
        }
        let digest = context.finish();
        let mut first = [0u8; 16];
        first.copy_from_slice(&digest.as_ref()[..16]);
        OperatorId(u128::from_be_bytes(first))
    }
}

impl fmt::Display for OperatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for OperatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for OperatorId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "'{s}' is not an operator id (32 hexadecimal digits)"
            ));
        }
        u128::from_str_radix(s, 16)
            .map(OperatorId)
            .map_err(|e| format!("'{s}' is not an operator id: {e}"))
    }
}

impl From<OperatorId> for String {
    fn from(id: OperatorId) -> String {
        id.to_string()
    }
}

impl TryFrom<String> for OperatorId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

/// An operator as checkpoints know it: its stable id, and the uid it was given (if any), for
/// messages that a user should recognise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorIdentity {
    /// Its stable id.
    pub id: OperatorId,
    /// The uid the program gave it; `None` when the id was derived from the dataflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl fmt::Display for OperatorIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.uid {
            Some(uid) => write!(f, "{} (uid \"{uid}\")", self.id),
            None => write!(f, "{}", self.id),
        }
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
