//! The checkpoint id counter of one job.

use std::sync::Arc;
use std::time::Duration;

use tracing::debug;
use zookeeper_client::Client;

use crate::error::HaError;
use crate::fence::LeaderFence;
use crate::zk::{self, FencedOutcome, SharedClient};

/// How often an increment is retried before giving up.
const ATTEMPTS: usize = 20;

/// Hands out checkpoint ids of one job, strictly increasing across leaders:
/// `<base>/jobs/<job-id>/checkpoint-counter` holds the next id as decimal text.
///
/// Each increment is a version-checked `setData` fenced by the leader's term. After a lost
/// connection the increment is retried; that may skip an id (if the first attempt did land) but
/// never hands out one twice.
#[derive(Debug, Clone)]
pub struct CheckpointIdCounter {
    zk: Arc<SharedClient>,
    path: String,
}

/// The first id of a new counter, like Flink's.
pub(crate) const INITIAL_CHECKPOINT_ID: u64 = 1;

impl CheckpointIdCounter {
    pub(crate) fn new(zk: Arc<SharedClient>, path: String) -> Self {
        CheckpointIdCounter { zk, path }
    }

    async fn read(&self, client: &Client) -> Result<Option<(u64, i32)>, HaError> {
        match client.get_data(&self.path).await {
            Ok((data, stat)) => {
                let text = std::str::from_utf8(&data).map_err(|e| HaError::Corrupt {
                    path: self.path.clone(),
                    reason: e.to_string(),
                })?;
                let value = text.parse().map_err(|e| HaError::Corrupt {
                    path: self.path.clone(),
                    reason: format!("{text:?}: {e}"),
                })?;
                Ok(Some((value, stat.version)))
            }
            Err(zookeeper_client::Error::NoNode) => Ok(None),
            Err(e) => Err(HaError::from_zk("get", &self.path, e)),
        }
    }

    /// The id the next [`CheckpointIdCounter::get_and_increment`] will return.
    pub async fn get(&self) -> Result<u64, HaError> {
        let client = self.zk.get().await?;
        Ok(self
            .read(&client)
            .await?
            .map_or(INITIAL_CHECKPOINT_ID, |(v, _)| v))
    }

    /// Returns the next id and advances the counter.
    pub async fn get_and_increment(&self, fence: &LeaderFence) -> Result<u64, HaError> {
        self.update(fence, |current| {
            current.checked_add(1).map(|next| (current, next))
        })
        .await
    }

    /// Sets the next id (for example after restoring from a savepoint). It may only grow.
    pub async fn set(&self, fence: &LeaderFence, next: u64) -> Result<(), HaError> {
        self.update(fence, |current| (next >= current).then_some(((), next)))
            .await?;
        Ok(())
    }

    async fn update<T>(
        &self,
        fence: &LeaderFence,
        step: impl Fn(u64) -> Option<(T, u64)>,
    ) -> Result<T, HaError> {
        let mut last_error = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(50 * attempt.min(10) as u64)).await;
            }
            let client = match self.zk.get().await {
                Ok(c) => c,
                Err(e) if e.is_retryable() => {
                    last_error = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            zk::ensure_dir(&client, zk::parent_of(&self.path)).await?;
            let current = self.read(&client).await?;
            let value = current.map_or(INITIAL_CHECKPOINT_ID, |(v, _)| v);
            let Some((result, next)) = step(value) else {
                return Err(HaError::invalid(
                    "checkpoint id",
                    format!("counter at {value} cannot move as asked"),
                ));
            };
            let data = next.to_string();
            let outcome = zk::commit_fenced(&client, fence, &self.path, |w| match current {
                Some((_, version)) => w.add_set_data(&self.path, data.as_bytes(), Some(version)),
                None => w.add_create(&self.path, data.as_bytes(), &zk::PERSISTENT),
            })
            .await;
            match outcome {
                Ok(FencedOutcome::Committed) => return Ok(result),
                Ok(FencedOutcome::OpFailed(
                    e @ (zookeeper_client::Error::BadVersion
                    | zookeeper_client::Error::NodeExists
                    | zookeeper_client::Error::NoNode),
                )) => {
                    debug!(path = %self.path, error = %e, "counter changed concurrently; retrying");
                    last_error = Some(HaError::Conflict {
                        path: self.path.clone(),
                    });
                }
                Ok(FencedOutcome::OpFailed(e)) => {
                    return Err(HaError::from_zk("increment", &self.path, e));
                }
                // Ambiguous or unavailable: re-read and try again; an id may be skipped, never
                // reused.
                Err(e) if e.is_retryable() => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or(HaError::Conflict {
            path: self.path.clone(),
        }))
    }
}
