//! The job as checkpointing sees it: vertices with their parallelism and operators, and the
//! subtasks that acknowledge. The coordinator tracks these; restore assignment maps a
//! snapshot onto them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::common::ids::OperatorIdentity;

/// One parallel subtask of one vertex: the unit that acknowledges checkpoints.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskKey {
    /// The vertex's index in the topology.
    pub vertex: u32,
    /// The subtask's index, `0..parallelism`.
    pub subtask: u32,
}

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}/{}", self.vertex, self.subtask)
    }
}

/// One vertex of the job as the coordinator sees it; its index in the topology is the
/// `vertex` of its [`TaskKey`]s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VertexTopology {
    /// Its parallelism.
    pub parallelism: u32,
    /// Its max parallelism (number of key groups).
    pub max_parallelism: u32,
    /// Indices of its upstream vertices.
    pub inputs: Vec<usize>,
    /// The operators of its chain, head first.
    pub operators: Vec<TopologyOperator>,
}

/// One operator of a vertex's chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyOperator {
    /// The id its subtasks acknowledge and restore its state under: its node index in this
    /// job's stream graph (valid for this job only).
    pub node: u32,
    /// Its stable identity, which checkpoints and savepoints record its state by.
    pub identity: OperatorIdentity,
}
