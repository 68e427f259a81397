//! What a JobManager keeps of its part in ZooKeeper HA: the services, the current term's fence,
//! the published leader's REST address and which ended jobs are recorded. `leadership.rs`
//! drives it.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::common::ids::JobId;

/// A JobManager's part in ZooKeeper HA.
pub struct HaRuntime {
    /// The ZooKeeper services.
    pub(super) services: zk_ha::ZooKeeperHaServices,
    /// The current term's fence while this JobManager leads.
    pub(super) fence: Mutex<Option<zk_ha::LeaderFence>>,
    /// The leader's REST address as last published (for a standby's redirects).
    pub(super) leader_rest: Mutex<Option<String>>,
    /// Jobs whose end is recorded in the job result store.
    pub(super) recorded: Mutex<HashSet<JobId>>,
    /// Whether this term's leader has recovered the HA stores' jobs (until then it does not
    /// know every job whose artifact must stay).
    pub(super) recovered: std::sync::atomic::AtomicBool,
}

impl HaRuntime {
    /// HA state around `services`, not leading yet.
    pub(super) fn new(services: zk_ha::ZooKeeperHaServices) -> Self {
        HaRuntime {
            services,
            fence: Mutex::new(None),
            leader_rest: Mutex::new(None),
            recorded: Mutex::new(HashSet::new()),
            recovered: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(super) fn fence(&self) -> Option<zk_ha::LeaderFence> {
        self.fence.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The ZooKeeper services.
    pub fn services(&self) -> &zk_ha::ZooKeeperHaServices {
        &self.services
    }
}
