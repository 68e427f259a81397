//! The JobManager's part in ZooKeeper HA: contending for leadership, publishing its addresses,
//! following the published leader (for a standby's redirects), keeping job submissions and
//! results in the fenced HA stores, and recovering jobs in a new term.
//!
//! Everything here that waits on ZooKeeper runs in tasks of its own: a slow or silent ZooKeeper
//! delays recording a job's end, never heartbeats, RPC answers, REST answers or the deadlines of
//! the cores.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::ha_state::HaRuntime;
use super::service::JobManagerShared;
use crate::common::ids::JobId;
use crate::ha::JobRecord;

/// How old an HA blob no pointer references must be before a new leader deletes it: far longer
/// than a write spends between its blob and its pointer, so a write still in progress (of a
/// deposed leader that has not noticed yet) keeps its blob.
const UNREFERENCED_BLOB_MIN_AGE: Duration = Duration::from_secs(600);

impl JobManagerShared {
    /// Whether this JobManager may act: always without HA, only while it leads with HA.
    pub fn is_leader(&self) -> bool {
        self.ha.as_ref().is_none_or(|ha| ha.fence().is_some())
    }

    /// Whether this JobManager knows every job that may still need an artifact: without HA
    /// always; with HA while it leads and once it has recovered the HA stores' jobs.
    fn may_sweep_artifacts(&self) -> bool {
        self.ha.as_ref().is_none_or(|ha| {
            ha.fence().is_some() && ha.recovered.load(std::sync::atomic::Ordering::SeqCst)
        })
    }

    /// The artifacts of jobs that have not ended: their code must stay fetchable, even when
    /// their upload was deleted.
    pub fn artifacts_in_use(&self) -> std::collections::HashSet<String> {
        self.view()
            .jobs()
            .filter(|jm| !jm.status().is_globally_terminal())
            .filter_map(|jm| jm.program().artifact.clone())
            .collect()
    }

    /// Removes the artifacts whose upload was deleted and that no job still runs.
    async fn sweep_artifacts(&self) {
        let (store, in_use) = (self.artifacts().clone(), self.artifacts_in_use());
        let removed = tokio::task::spawn_blocking(move || store.sweep(&in_use))
            .await
            .unwrap_or_default();
        for id in removed {
            info!(artifact = %id, "removed a job artifact no upload or running job references");
        }
    }

    /// The current term's leader session id (HA only).
    pub fn leader_session(&self) -> Option<String> {
        self.ha
            .as_ref()
            .and_then(|ha| ha.fence())
            .map(|f| f.session_id().to_string())
    }

    /// The leader's REST address as published in ZooKeeper (HA standbys).
    pub fn leader_rest(&self) -> Option<String> {
        self.ha.as_ref().and_then(|ha| {
            ha.leader_rest
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        })
    }

    /// The HA services, when configured.
    pub fn ha(&self) -> Option<&HaRuntime> {
        self.ha.as_ref()
    }

    fn forget_recorded(&self) {
        if let Some(ha) = &self.ha {
            *ha.fence.lock().unwrap_or_else(|e| e.into_inner()) = None;
            ha.recorded
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
        }
    }

    /// Keeps a submitted job in the job graph store (HA), so a new leader runs it again.
    pub async fn persist_job(&self, record: &JobRecord) -> Result<(), String> {
        let Some(ha) = &self.ha else {
            return Ok(());
        };
        let fence = ha
            .fence()
            .ok_or("this JobManager is no longer the leader")?;
        let bytes = serde_json::to_vec(record).map_err(|e| e.to_string())?;
        ha.services
            .job_graph_store()
            .put(&fence, &record.job_id.to_string(), &bytes)
            .await
            .map_err(|e| format!("cannot store the job in the HA job graph store: {e}"))
    }

    /// Records the end of every globally terminated job in the job result store and removes
    /// its submission from the job graph store (the result first: a crash in between leaves
    /// both, and the result wins). Returns whether every ended job is recorded.
    async fn record_terminated_jobs(&self) -> bool {
        let Some(ha) = &self.ha else {
            return true;
        };
        let Some(fence) = ha.fence() else {
            return true;
        };
        let ended: Vec<(JobId, &'static str)> = {
            let recorded = ha.recorded.lock().unwrap_or_else(|e| e.into_inner());
            self.view()
                .jobs()
                .filter(|jm| jm.status().is_globally_terminal() && !recorded.contains(&jm.job_id()))
                .map(|jm| (jm.job_id(), jm.status().name()))
                .collect()
        };
        let mut all = true;
        for (job, status) in ended {
            let key = job.to_string();
            let result = serde_json::json!({ "jobId": key, "state": status }).to_string();
            let stored = async {
                ha.services
                    .job_result_store()
                    .put(&fence, &key, result.as_bytes())
                    .await?;
                ha.services.job_graph_store().remove(&fence, &key).await
            }
            .await;
            match stored {
                Ok(()) => {
                    ha.recorded
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(job);
                }
                Err(e) => {
                    all = false;
                    warn!(job_id = %job, error = %e, "cannot record the job's end in the HA stores")
                }
            }
        }
        all
    }

    /// A new term: submits again every job of the job graph store without a recorded result,
    /// under its id, restored from its latest retained checkpoint.
    async fn recover_jobs(self: &Arc<Self>) {
        let Some(ha) = &self.ha else {
            return;
        };
        let ids = match ha.services.job_graph_store().job_ids().await {
            Ok(ids) => ids,
            Err(e) => {
                warn!(error = %e, "cannot list the HA job graph store");
                return;
            }
        };
        for id in ids {
            if ha
                .services
                .job_result_store()
                .contains(&id)
                .await
                .unwrap_or(false)
            {
                continue;
            }
            let record = match ha.services.job_graph_store().get(&id).await {
                Ok(Some(bytes)) => serde_json::from_slice::<JobRecord>(&bytes),
                Ok(None) => continue,
                Err(e) => {
                    warn!(job_id = %id, error = %e, "cannot read a job from the HA job graph store");
                    continue;
                }
            };
            match record {
                Ok(r) => match self
                    .submit_as(
                        r.job_id,
                        r.program,
                        Some(r.parallelism),
                        &r.overrides,
                        r.savepoint,
                        true,
                    )
                    .await
                {
                    Ok(job) => info!(job_id = %job, "recovered a job from the HA job graph store"),
                    Err(e) => warn!(job_id = %id, error = %e, "cannot recover a job"),
                },
                Err(e) => {
                    warn!(job_id = %id, error = %e, "unreadable job record in the HA job graph store")
                }
            }
        }
    }
}

/// Records ended jobs in the HA stores whenever a job may have changed (retrying every second
/// while a write fails), and removes job artifacts nothing references any more. Runs apart from
/// the driver, so ZooKeeper's and the file system's speed delay nothing else.
pub(super) async fn recorder(shared: Arc<JobManagerShared>) {
    let mut retry = false;
    loop {
        if retry {
            let _ =
                tokio::time::timeout(Duration::from_secs(1), shared.job_changed.notified()).await;
        } else {
            shared.job_changed.notified().await;
        }
        retry = !shared.record_terminated_jobs().await;
        if shared.may_sweep_artifacts() {
            shared.sweep_artifacts().await;
        }
        // Many events come in bursts; one pass covers them all.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Contends for leadership (HA): on a grant, publishes this JobManager's addresses and
/// recovers the jobs of the HA stores; on a revocation, drops every job and connection and
/// contends again.
pub(super) async fn leadership(shared: Arc<JobManagerShared>, rpc: String, rest: String) {
    let Some(ha) = &shared.ha else {
        return;
    };
    let mut election = ha.services.start_election();
    while let Some(event) = election.next_event().await {
        match event {
            zk_ha::LeadershipEvent::Granted(fence) => {
                let info = zk_ha::LeaderInfo::new(fence.session_id())
                    .with_address("rpc", rpc.clone())
                    .with_address("rest", rest.clone());
                if let Err(e) = election.publish(&fence, crate::ha::COMPONENT, &info).await {
                    warn!(error = %e, "cannot publish this JobManager's addresses; not acting as leader");
                    continue;
                }
                info!(session = %fence.session_id(), %rpc, %rest, "granted leadership");
                *ha.fence.lock().unwrap_or_else(|e| e.into_inner()) = Some(fence.clone());
                shared.recover_jobs().await;
                ha.recovered
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                shared.job_changed.notify_one();
                // Blobs left by crashes and unknown commit outcomes, once per term: the store
                // checks the fence before it deletes anything.
                let services = ha.services.clone();
                tokio::spawn(async move {
                    if let Err(e) = services
                        .collect_garbage(&fence, UNREFERENCED_BLOB_MIN_AGE)
                        .await
                    {
                        warn!(error = %e, "cannot collect unreferenced HA blobs; the next term tries again");
                    }
                });
            }
            zk_ha::LeadershipEvent::Revoked { session_id, reason } => {
                warn!(session = %session_id, ?reason, "leadership revoked: stopping every job and dropping every TaskManager");
                ha.recovered
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                shared.forget_recorded();
                shared.step_down();
            }
        }
    }
}

/// Follows the published leader so a standby can point REST clients at it.
pub(super) async fn watch_leader(shared: Arc<JobManagerShared>) {
    let Some(ha) = &shared.ha else {
        return;
    };
    let Ok(retrieval) = ha.services.leader_retrieval(crate::ha::COMPONENT) else {
        return;
    };
    let mut rx = retrieval.subscribe();
    loop {
        let rest = rx
            .borrow()
            .as_ref()
            .and_then(|l| l.address("rest").map(str::to_string));
        *ha.leader_rest.lock().unwrap_or_else(|e| e.into_inner()) = rest;
        if rx.changed().await.is_err() {
            return;
        }
    }
}
