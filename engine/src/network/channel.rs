//! An input gate's channels as a deployment names them (a producer's subpartition and where it
//! runs), and the interface through which a task opens the ones on other TaskManagers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::buffer::NetBuffer;
use crate::common::error::TaskError;
use crate::common::ids::{ExecutionId, JobId, PartitionId, ResourceId};

/// Where a producer's partition can be fetched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLocation {
    /// The producer's TaskManager.
    pub resource_id: ResourceId,
    /// Its data-plane (QUIC) address.
    pub data_address: SocketAddr,
}

/// One channel of an input gate: a producer's subpartition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelDeployment {
    /// The producer's partition.
    pub partition: PartitionId,
    /// Which subpartition of it this consumer reads.
    pub subpartition: u32,
    /// Where the producer runs.
    pub location: PartitionLocation,
}

/// Every producer of one result (one output of every subtask of a vertex), as consumers find
/// them. The JobManager builds a group once per deployment round and sends it once to each
/// TaskManager that runs a consumer; a deployment names the group instead of listing every
/// producer, so its size does not grow with the producer's parallelism (an all-to-all edge of
/// n x n subtasks costs n groups' worth of bytes per TaskManager, not n² channels).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerGroup {
    /// Names the group within its job; a newer group of the same result replaces an older one.
    pub id: u64,
    /// The job.
    pub job: JobId,
    /// The producing vertex.
    pub vertex: u32,
    /// Which of the vertex's outputs.
    pub output: u32,
    /// The distinct places the producers run.
    pub locations: Vec<PartitionLocation>,
    /// Per producer subtask, in subtask order: its attempt and its index into `locations`.
    pub producers: Vec<(u32, u32)>,
}

/// One input gate of a deployment: the producer group it reads, which of its producers, and
/// which subpartition of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputDeployment {
    /// The group's id.
    pub group: u64,
    /// One producer subtask (a forward edge), or every producer of the group (`None`).
    pub producer: Option<u32>,
    /// The subpartition read from each producer.
    pub subpartition: u32,
}

impl ProducerGroup {
    /// The channels of `input`, in producer order.
    pub fn channels(&self, input: &InputDeployment) -> Result<Vec<ChannelDeployment>, String> {
        if input.group != self.id {
            return Err(format!(
                "the deployment reads producer group {} but group {} was sent",
                input.group, self.id
            ));
        }
        let channel = |subtask: u32| -> Result<ChannelDeployment, String> {
            let &(attempt, at) = self.producers.get(subtask as usize).ok_or_else(|| {
                format!(
                    "producer group {} has no subtask {subtask} ({} producers)",
                    self.id,
                    self.producers.len()
                )
            })?;
            let location = self
                .locations
                .get(at as usize)
                .ok_or_else(|| format!("producer group {} names no location {at}", self.id))?;
            Ok(ChannelDeployment {
                partition: PartitionId {
                    producer: ExecutionId {
                        job: self.job,
                        vertex: self.vertex,
                        subtask,
                        attempt,
                    },
                    output: self.output,
                },
                subpartition: input.subpartition,
                location: location.clone(),
            })
        };
        match input.producer {
            Some(subtask) => Ok(vec![channel(subtask)?]),
            None => (0..self.producers.len() as u32).map(channel).collect(),
        }
    }
}

/// The producer groups a TaskManager was sent on its current JobManager connection: the newest
/// group of each result, per job.
#[derive(Debug, Default)]
pub struct ProducerGroups {
    by_job: std::collections::HashMap<JobId, Vec<Arc<ProducerGroup>>>,
}

impl ProducerGroups {
    /// Keeps `group`, replacing an older group of the same result.
    pub fn insert(&mut self, group: Arc<ProducerGroup>) {
        let groups = self.by_job.entry(group.job).or_default();
        groups.retain(|g| (g.vertex, g.output) != (group.vertex, group.output));
        groups.push(group);
    }

    /// The group `id` of `job`, if it was sent.
    pub fn group(&self, job: JobId, id: u64) -> Option<Arc<ProducerGroup>> {
        self.by_job.get(&job)?.iter().find(|g| g.id == id).cloned()
    }

    /// Forgets a job's groups.
    pub fn release_job(&mut self, job: JobId) {
        self.by_job.remove(&job);
    }

    /// A deployment's input gates as channels.
    pub fn expand(
        &self,
        job: JobId,
        inputs: &[InputDeployment],
    ) -> Result<Vec<Vec<ChannelDeployment>>, String> {
        let groups = self.by_job.get(&job).map(Vec::as_slice).unwrap_or_default();
        inputs
            .iter()
            .map(|input| {
                groups
                    .iter()
                    .find(|g| g.id == input.group)
                    .ok_or_else(|| {
                        format!(
                            "the deployment reads producer group {} of job {job}, which this TaskManager was not sent",
                            input.group
                        )
                    })?
                    .channels(input)
            })
            .collect()
    }
}

/// Fetches a subpartition from another TaskManager (the QUIC client).
pub(crate) trait RemoteChannels: Send + Sync {
    /// Starts reading `channel` and returns the queue its buffers arrive in.
    fn open(
        &self,
        channel: &ChannelDeployment,
        capacity: usize,
        cancelled: Arc<AtomicBool>,
    ) -> Result<flume::Receiver<NetBuffer>, TaskError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> ProducerGroup {
        let at = |port: u16| PartitionLocation {
            resource_id: format!("tm-{port}"),
            data_address: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        ProducerGroup {
            id: 7,
            job: JobId(3),
            vertex: 1,
            output: 2,
            locations: vec![at(1000), at(2000)],
            producers: vec![(0, 0), (4, 1), (1, 0)],
        }
    }

    #[test]
    fn a_group_expands_into_every_producers_channel_or_one() {
        let g = group();
        let all = g
            .channels(&InputDeployment {
                group: 7,
                producer: None,
                subpartition: 5,
            })
            .unwrap();
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|c| c.subpartition == 5));
        assert_eq!(all[1].partition.producer.subtask, 1);
        assert_eq!(all[1].partition.producer.attempt, 4);
        assert_eq!(all[1].partition.output, 2);
        assert_eq!(all[1].location.resource_id, "tm-2000");
        assert_eq!(all[2].location.resource_id, "tm-1000");
        let one = g
            .channels(&InputDeployment {
                group: 7,
                producer: Some(2),
                subpartition: 0,
            })
            .unwrap();
        assert_eq!(
            one,
            vec![all[2].clone()]
                .into_iter()
                .map(|mut c| {
                    c.subpartition = 0;
                    c
                })
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_newer_group_of_the_same_result_replaces_the_older_and_release_forgets_them() {
        let mut groups = ProducerGroups::default();
        let old = group();
        let mut other_output = group();
        other_output.id = 8;
        other_output.output = 3;
        let mut newer = group();
        newer.id = 9;
        newer.producers = vec![(1, 0), (5, 1), (2, 0)];
        groups.insert(Arc::new(old));
        groups.insert(Arc::new(other_output));
        groups.insert(Arc::new(newer));
        let read = |group| InputDeployment {
            group,
            producer: Some(1),
            subpartition: 0,
        };
        let gates = groups.expand(JobId(3), &[read(9), read(8)]).unwrap();
        assert_eq!(gates[0][0].partition.producer.attempt, 5);
        assert_eq!(gates[1][0].partition.output, 3);
        let stale = groups.expand(JobId(3), &[read(7)]).unwrap_err();
        assert!(stale.contains("producer group 7"), "{stale}");
        assert!(groups.expand(JobId(4), &[read(9)]).is_err());
        groups.release_job(JobId(3));
        assert!(groups.expand(JobId(3), &[read(9)]).is_err());
    }

    #[test]
    fn a_wrong_group_or_subtask_is_an_error_naming_it() {
        let g = group();
        let wrong = InputDeployment {
            group: 8,
            producer: None,
            subpartition: 0,
        };
        assert!(g.channels(&wrong).unwrap_err().contains("group 8"));
        let missing = InputDeployment {
            group: 7,
            producer: Some(3),
            subpartition: 0,
        };
        assert!(g.channels(&missing).unwrap_err().contains("no subtask 3"));
    }
}
