//! The ApplicationMaster's side of `ApplicationMasterProtocol`: register, heartbeat
//! (`allocate`), unregister.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tracing::{debug, info};

use crate::error::RpcError;
use crate::ipc::RpcClient;
use crate::proto;
use crate::types::{
    AmCommand, Container, ContainerId, ContainerStatus, FinalStatus, NodeId, Resource, Token,
};

/// Protocol name of the ResourceManager's scheduler endpoint.
pub const AM_PROTOCOL: &str = "org.apache.hadoop.yarn.api.ApplicationMasterProtocolPB";

/// What the ResourceManager says when an ApplicationMaster registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The largest container this application may ask for.
    pub maximum_capability: Resource,
    /// The queue the application runs in.
    pub queue: Option<String>,
    /// Containers still running from earlier attempts (with keep-containers on).
    pub containers_from_previous_attempts: Vec<Container>,
}

/// What one heartbeat brought.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allocation {
    /// Newly allocated containers: start them or release them.
    pub allocated: Vec<Container>,
    /// Containers that have ended (exited, killed, lost with their node, released).
    pub completed: Vec<ContainerStatus>,
    /// An order from the ResourceManager, if any.
    pub command: Option<AmCommand>,
    /// Resources still available to this application.
    pub limit: Option<Resource>,
    /// Number of NodeManagers in the cluster.
    pub num_cluster_nodes: i32,
}

/// A client of the ResourceManager's scheduler for one application attempt.
///
/// Container requests are kept as absolute outstanding counts per (priority, capability),
/// YARN's model: [`set_request`](Self::set_request) states how many containers are still
/// wanted, changed counts travel with the next [`allocate`](Self::allocate), and each
/// allocated container lowers the count of its priority (YARN does the same on its side, so
/// the two stay in step without resending unchanged asks, which would re-request containers
/// already granted).
#[derive(Debug)]
pub struct AmRmClient {
    rpc: RpcClient,
    response_id: i32,
    asks: AskTable,
    releases: Vec<ContainerId>,
    nm_tokens: HashMap<String, Token>,
}

impl AmRmClient {
    /// A client for the scheduler at `scheduler_addr` (`yarn.resourcemanager.scheduler.address`,
    /// default port 8030) using the attempt's AMRM token.
    pub fn new(scheduler_addr: impl Into<String>, amrm_token: Token) -> Self {
        AmRmClient {
            rpc: RpcClient::new(scheduler_addr, AM_PROTOCOL, amrm_token),
            response_id: 0,
            asks: AskTable::default(),
            releases: Vec::new(),
            nm_tokens: HashMap::new(),
        }
    }

    /// Sets the bound on each call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.rpc = self.rpc.with_timeout(timeout);
        self
    }

    /// Registers the ApplicationMaster. `tracking_url` is what YARN's UI links to.
    pub async fn register(
        &mut self,
        host: &str,
        rpc_port: i32,
        tracking_url: &str,
    ) -> Result<Registration, RpcError> {
        let req = proto::RegisterApplicationMasterRequestProto {
            host: Some(host.to_string()),
            rpc_port: Some(rpc_port),
            tracking_url: Some(tracking_url.to_string()),
        };
        let resp: proto::RegisterApplicationMasterResponseProto =
            self.rpc.call("registerApplicationMaster", &req).await?;
        for t in &resp.nm_tokens_from_previous_attempts {
            self.store_nm_token(t);
        }
        let reg = Registration {
            maximum_capability: resp
                .maximum_capability
                .as_ref()
                .map(Resource::from_proto)
                .unwrap_or_default(),
            queue: resp.queue,
            containers_from_previous_attempts: resp
                .containers_from_previous_attempts
                .iter()
                .map(Container::from_proto)
                .collect(),
        };
        info!(max = ?reg.maximum_capability, queue = ?reg.queue, "registered with the ResourceManager");
        Ok(reg)
    }

    /// States that `count` containers of `capability` at `priority` are still wanted
    /// (absolute, not a delta). Sent with the next heartbeat if it changed.
    pub fn set_request(&mut self, priority: i32, capability: Resource, count: i32) {
        self.asks.set(priority, capability, count);
    }

    /// The outstanding count for (priority, capability).
    pub fn outstanding(&self, priority: i32, capability: Resource) -> i32 {
        self.asks.outstanding(priority, capability)
    }

    /// Gives a container back to YARN (sent with the next heartbeat).
    pub fn release(&mut self, id: ContainerId) {
        self.releases.push(id);
    }

    /// How long to wait before the next heartbeat, following Flink: 500 ms while
    /// containers are outstanding (grants arrive only with heartbeats), else 5 s.
    pub fn suggested_interval(&self) -> Duration {
        if self.asks.any_outstanding() {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(5)
        }
    }

    /// The NodeManager token for `node`, received in an earlier heartbeat.
    pub fn nm_token(&self, node: &NodeId) -> Option<&Token> {
        self.nm_tokens.get(&node.to_string())
    }

    /// Heartbeats: sends changed requests and releases, returns what YARN granted. Call it
    /// well within `yarn.am.liveness-monitor.expiry-interval-ms` (10 min default); Flink
    /// uses 500 ms while requests are pending and 5 s otherwise.
    pub async fn allocate(&mut self, progress: f32) -> Result<Allocation, RpcError> {
        let ask: Vec<proto::ResourceRequestProto> = self
            .asks
            .changed()
            .map(
                |(priority, capability, count)| proto::ResourceRequestProto {
                    priority: Some(proto::PriorityProto {
                        priority: Some(priority),
                    }),
                    resource_name: Some("*".to_string()),
                    capability: Some(capability.to_proto()),
                    num_containers: Some(count),
                    relax_locality: Some(true),
                },
            )
            .collect();
        let req = proto::AllocateRequestProto {
            ask,
            release: self.releases.iter().map(|c| c.to_proto()).collect(),
            response_id: Some(self.response_id),
            progress: Some(progress),
        };
        let resp: proto::AllocateResponseProto = self.rpc.call("allocate", &req).await?;
        // Only once the RM has the asks and releases may we forget them; a failed call above
        // leaves them queued for the next heartbeat.
        self.asks.sent();
        self.releases.clear();
        self.response_id = resp.response_id.unwrap_or(self.response_id);

        for t in &resp.nm_tokens {
            self.store_nm_token(t);
        }
        if let Some(t) = &resp.am_rm_token {
            // YARN rolls the AMRM master key (yarn.resourcemanager.am-rm-tokens.master-key-
            // rolling-interval-secs); the old token stops working for new connections.
            info!("ResourceManager rolled the AMRM token");
            let mut token = Token::from_proto(t);
            if token.service.is_empty() {
                token.service = self.rpc.addr().to_string();
            }
            self.rpc.set_token(token);
        }
        let allocated: Vec<Container> = resp
            .allocated_containers
            .iter()
            .map(Container::from_proto)
            .collect();
        for c in &allocated {
            if let Some(left) = self.asks.on_allocated(c.priority, c.resource) {
                debug!(container = %c.id, priority = c.priority, left, "container allocated");
            }
        }
        let command = match resp.a_m_command {
            Some(proto::AM_RESYNC) => {
                // After a resync the RM has forgotten this attempt's state: start the
                // response ids over and resend every outstanding ask.
                self.response_id = 0;
                self.asks.resync();
                Some(AmCommand::Resync)
            }
            Some(proto::AM_SHUTDOWN) => Some(AmCommand::Shutdown),
            _ => None,
        };
        Ok(Allocation {
            allocated,
            completed: resp
                .completed_container_statuses
                .iter()
                .map(ContainerStatus::from_proto)
                .collect(),
            command,
            limit: resp.limit.as_ref().map(Resource::from_proto),
            num_cluster_nodes: resp.num_cluster_nodes.unwrap_or_default(),
        })
    }

    /// Unregisters with `status`. Repeats until the RM confirms (it may need a moment to
    /// persist the final state), at most `patience` long.
    pub async fn finish(
        &mut self,
        status: FinalStatus,
        diagnostics: &str,
        tracking_url: Option<&str>,
        patience: Duration,
    ) -> Result<(), RpcError> {
        let req = proto::FinishApplicationMasterRequestProto {
            diagnostics: Some(diagnostics.to_string()),
            tracking_url: tracking_url.map(str::to_string),
            final_application_status: Some(status.to_proto()),
        };
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let resp: proto::FinishApplicationMasterResponseProto =
                self.rpc.call("finishApplicationMaster", &req).await?;
            if resp.is_unregistered.unwrap_or(false) {
                info!(?status, "unregistered from the ResourceManager");
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(RpcError::Timeout {
                    addr: self.rpc.addr().to_string(),
                    timeout: patience,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn store_nm_token(&mut self, t: &proto::NmTokenProto) {
        if let (Some(node), Some(token)) = (&t.node_id, &t.token) {
            let node = NodeId::from_proto(node);
            self.nm_tokens
                .insert(node.to_string(), Token::from_proto(token));
        }
    }
}

/// Outstanding container requests per (priority, capability), and which changed since the
/// last successful heartbeat. No I/O: the bookkeeping `AmRmClient` relies on.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct AskTable {
    /// (priority, capability) -> outstanding count.
    asks: BTreeMap<(i32, Resource), i32>,
    /// Counts changed since the last heartbeat that reached the RM.
    dirty: BTreeMap<(i32, Resource), i32>,
}

impl AskTable {
    fn set(&mut self, priority: i32, capability: Resource, count: i32) {
        let key = (priority, capability);
        let count = count.max(0);
        if self.outstanding(priority, capability) != count {
            self.asks.insert(key, count);
            self.dirty.insert(key, count);
        }
    }

    fn outstanding(&self, priority: i32, capability: Resource) -> i32 {
        self.asks.get(&(priority, capability)).copied().unwrap_or(0)
    }

    fn any_outstanding(&self) -> bool {
        self.asks.values().any(|&n| n > 0)
    }

    /// The asks to send with the next heartbeat.
    fn changed(&self) -> impl Iterator<Item = (i32, Resource, i32)> + '_ {
        self.dirty.iter().map(|(&(p, cap), &n)| (p, cap, n))
    }

    /// The heartbeat carrying [`changed`](Self::changed) reached the RM.
    fn sent(&mut self) {
        self.dirty.clear();
    }

    /// YARN decremented its count for the request a container satisfies when it allocated
    /// it; do the same (without marking it changed) so the next changed ask carries the right
    /// absolute number. Returns the count left, if a request matched.
    fn on_allocated(&mut self, priority: i32, resource: Resource) -> Option<i32> {
        let (_, count) = self
            .asks
            .iter_mut()
            .find(|((p, cap), n)| *p == priority && **n > 0 && resource.fits(cap))?;
        *count -= 1;
        Some(*count)
    }

    /// After a resync the RM has forgotten every ask: all must be sent again.
    fn resync(&mut self) {
        self.dirty = self.asks.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changed_asks_are_sent_and_kept_until_delivered() {
        let r = Resource::new(128, 1);
        let mut t = AskTable::default();
        t.set(1, r, 2);
        t.set(1, r, 2);
        assert_eq!(t.changed().collect::<Vec<_>>(), [(1, r, 2)]);
        // A failed heartbeat leaves the change queued; a delivered one clears it.
        assert_eq!(t.changed().count(), 1);
        t.sent();
        assert_eq!(t.changed().count(), 0);
        // A grant lowers the count silently, as YARN does on its side.
        assert_eq!(t.on_allocated(1, Resource::new(256, 1)), Some(1));
        assert_eq!(t.changed().count(), 0);
        assert_eq!(t.outstanding(1, r), 1);
        // Grants of another priority or too small match nothing.
        assert_eq!(t.on_allocated(2, r), None);
        assert_eq!(t.on_allocated(1, Resource::new(64, 1)), None);
        // Lowering to what is outstanding after the grant is not a change.
        t.set(1, r, 1);
        assert_eq!(t.changed().count(), 0);
        t.set(1, r, 0);
        assert_eq!(t.changed().collect::<Vec<_>>(), [(1, r, 0)]);
        assert!(!t.any_outstanding());
    }

    #[test]
    fn resync_resends_everything() {
        let mut t = AskTable::default();
        t.set(1, Resource::new(128, 1), 3);
        t.set(2, Resource::new(512, 2), 1);
        t.sent();
        t.resync();
        assert_eq!(t.changed().count(), 2);
        t.set(-1, Resource::new(1, 1), -5);
        assert_eq!(t.outstanding(-1, Resource::new(1, 1)), 0);
    }
}
