//! The ApplicationMaster's side of `ContainerManagementProtocol`, spoken with each
//! NodeManager: start, stop and query containers.

use std::time::Duration;

use crate::error::RpcError;
use crate::ipc::RpcClient;
use crate::proto;
use crate::types::{Container, ContainerId, ContainerStatus, LaunchContext, NodeId, Token};

/// Protocol name of a NodeManager's container management endpoint.
pub const NM_PROTOCOL: &str = "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB";

/// A client of one NodeManager, authenticated with that node's NM token (from
/// [`crate::AmRmClient::nm_token`]).
#[derive(Debug)]
pub struct NmClient {
    rpc: RpcClient,
}

impl NmClient {
    /// A client for the NodeManager `node` using its NM token.
    pub fn new(node: &NodeId, nm_token: Token) -> Self {
        NmClient {
            rpc: RpcClient::new(node.to_string(), NM_PROTOCOL, nm_token),
        }
    }

    /// Sets the bound on each call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.rpc = self.rpc.with_timeout(timeout);
        self
    }

    /// Replaces the NM token (a newer one arrived with a heartbeat).
    pub fn set_token(&mut self, token: Token) {
        self.rpc.set_token(token);
    }

    /// Starts `container` with `launch`. Fails with [`RpcError::Container`] when the
    /// NodeManager refuses this container (bad or expired container token, ...).
    pub async fn start_container(
        &mut self,
        container: &Container,
        launch: &LaunchContext,
    ) -> Result<(), RpcError> {
        let token = container.token.as_ref().ok_or_else(|| {
            RpcError::Usage(format!("container {} has no container token", container.id))
        })?;
        let req = proto::StartContainersRequestProto {
            start_container_request: vec![proto::StartContainerRequestProto {
                container_launch_context: Some(launch.to_proto()),
                container_token: Some(token.to_proto()),
            }],
        };
        let resp: proto::StartContainersResponseProto =
            self.rpc.call("startContainers", &req).await?;
        check_failed(&resp.failed_requests)?;
        if !resp
            .succeeded_requests
            .iter()
            .any(|c| ContainerId::from_proto(c) == container.id)
        {
            return Err(RpcError::Usage(format!(
                "NodeManager did not confirm the start of {}",
                container.id
            )));
        }
        Ok(())
    }

    /// Stops (kills) a container this application runs on the node.
    pub async fn stop_container(&mut self, id: ContainerId) -> Result<(), RpcError> {
        let req = proto::StopContainersRequestProto {
            container_id: vec![id.to_proto()],
        };
        let resp: proto::StopContainersResponseProto =
            self.rpc.call("stopContainers", &req).await?;
        check_failed(&resp.failed_requests)
    }

    /// The current status of a container.
    pub async fn container_status(&mut self, id: ContainerId) -> Result<ContainerStatus, RpcError> {
        let req = proto::GetContainerStatusesRequestProto {
            container_id: vec![id.to_proto()],
        };
        let resp: proto::GetContainerStatusesResponseProto =
            self.rpc.call("getContainerStatuses", &req).await?;
        check_failed(&resp.failed_requests)?;
        resp.status
            .iter()
            .map(ContainerStatus::from_proto)
            .find(|s| s.id == id)
            .ok_or_else(|| RpcError::Usage(format!("NodeManager returned no status for {id}")))
    }
}

fn check_failed(failed: &[proto::ContainerExceptionMapProto]) -> Result<(), RpcError> {
    match failed.first() {
        None => Ok(()),
        Some(f) => {
            let ex = f.exception.clone().unwrap_or_default();
            Err(RpcError::Container {
                container: f
                    .container_id
                    .as_ref()
                    .map(|c| ContainerId::from_proto(c).to_string())
                    .unwrap_or_default(),
                class: ex.class_name.unwrap_or_default(),
                message: ex.message.unwrap_or_default(),
            })
        }
    }
}
