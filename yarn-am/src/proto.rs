//! Hadoop's protobuf messages, written by hand with only the fields this crate uses.
//!
//! Field numbers are copied from Hadoop's `.proto` files (hadoop-common `RpcHeader.proto`,
//! `IpcConnectionContext.proto`, `ProtobufRpcEngine2.proto`, `Security.proto`; hadoop-yarn-api
//! `yarn_protos.proto`, `yarn_service_protos.proto`). Fields we do not declare are skipped by
//! prost when decoding, so newer servers that add fields still parse. Enums are declared as
//! `int32` (the same varint on the wire) and interpreted where they are used.

#![allow(dead_code)]

// ---- hadoop.common: RpcHeader.proto ----

/// `RpcKindProto.RPC_PROTOCOL_BUFFER`.
pub(crate) const RPC_PROTOCOL_BUFFER: i32 = 2;
/// `OperationProto.RPC_FINAL_PACKET`.
pub(crate) const RPC_FINAL_PACKET: i32 = 0;

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RpcRequestHeaderProto {
    #[prost(int32, optional, tag = "1")]
    pub(crate) rpc_kind: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub(crate) rpc_op: Option<i32>,
    /// `sint32` (zigzag) in requests, while the response header's call id is `uint32`:
    /// Hadoop's own .proto says so, and a server reading -33 as uint32 sees a different id.
    #[prost(sint32, required, tag = "3")]
    pub(crate) call_id: i32,
    #[prost(bytes = "vec", required, tag = "4")]
    pub(crate) client_id: Vec<u8>,
    #[prost(sint32, optional, tag = "5")]
    pub(crate) retry_count: Option<i32>,
}

/// `RpcStatusProto`.
pub(crate) const RPC_STATUS_SUCCESS: i32 = 0;
pub(crate) const RPC_STATUS_ERROR: i32 = 1;
pub(crate) const RPC_STATUS_FATAL: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RpcResponseHeaderProto {
    /// Negative ids (-33 SASL) arrive as the two's-complement `u32`.
    #[prost(uint32, required, tag = "1")]
    pub(crate) call_id: u32,
    #[prost(int32, required, tag = "2")]
    pub(crate) status: i32,
    #[prost(uint32, optional, tag = "3")]
    pub(crate) server_ipc_version_num: Option<u32>,
    #[prost(string, optional, tag = "4")]
    pub(crate) exception_class_name: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub(crate) error_msg: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub(crate) error_detail: Option<i32>,
    #[prost(bytes = "vec", optional, tag = "7")]
    pub(crate) client_id: Option<Vec<u8>>,
    #[prost(sint32, optional, tag = "8")]
    pub(crate) retry_count: Option<i32>,
}

/// `RpcSaslProto.SaslState`.
pub(crate) const SASL_SUCCESS: i32 = 0;
pub(crate) const SASL_NEGOTIATE: i32 = 1;
pub(crate) const SASL_INITIATE: i32 = 2;
pub(crate) const SASL_CHALLENGE: i32 = 3;
pub(crate) const SASL_RESPONSE: i32 = 4;

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RpcSaslProto {
    #[prost(uint32, optional, tag = "1")]
    pub(crate) version: Option<u32>,
    #[prost(int32, required, tag = "2")]
    pub(crate) state: i32,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub(crate) token: Option<Vec<u8>>,
    #[prost(message, repeated, tag = "4")]
    pub(crate) auths: Vec<SaslAuth>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SaslAuth {
    #[prost(string, required, tag = "1")]
    pub(crate) method: String,
    #[prost(string, required, tag = "2")]
    pub(crate) mechanism: String,
    #[prost(string, optional, tag = "3")]
    pub(crate) protocol: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(crate) server_id: Option<String>,
    #[prost(bytes = "vec", optional, tag = "5")]
    pub(crate) challenge: Option<Vec<u8>>,
}

// ---- hadoop.common: IpcConnectionContext.proto, ProtobufRpcEngine2.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct UserInformationProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) effective_user: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(crate) real_user: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct IpcConnectionContextProto {
    #[prost(message, optional, tag = "2")]
    pub(crate) user_info: Option<UserInformationProto>,
    #[prost(string, optional, tag = "3")]
    pub(crate) protocol: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RequestHeaderProto {
    #[prost(string, required, tag = "1")]
    pub(crate) method_name: String,
    #[prost(string, required, tag = "2")]
    pub(crate) declaring_class_protocol_name: String,
    #[prost(uint64, required, tag = "3")]
    pub(crate) client_protocol_version: u64,
}

// ---- hadoop.common: Security.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TokenProto {
    #[prost(bytes = "vec", required, tag = "1")]
    pub(crate) identifier: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub(crate) password: Vec<u8>,
    #[prost(string, required, tag = "3")]
    pub(crate) kind: String,
    #[prost(string, required, tag = "4")]
    pub(crate) service: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CredentialsKvProto {
    #[prost(string, required, tag = "1")]
    pub(crate) alias: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) token: Option<TokenProto>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub(crate) secret: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CredentialsProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) tokens: Vec<CredentialsKvProto>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) secrets: Vec<CredentialsKvProto>,
}

// ---- hadoop.yarn: yarn_protos.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SerializedExceptionProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) message: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(crate) trace: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(crate) class_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ApplicationIdProto {
    #[prost(int32, optional, tag = "1")]
    pub(crate) id: Option<i32>,
    #[prost(int64, optional, tag = "2")]
    pub(crate) cluster_timestamp: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ApplicationAttemptIdProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) application_id: Option<ApplicationIdProto>,
    #[prost(int32, optional, tag = "2")]
    pub(crate) attempt_id: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ContainerIdProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) app_id: Option<ApplicationIdProto>,
    #[prost(message, optional, tag = "2")]
    pub(crate) app_attempt_id: Option<ApplicationAttemptIdProto>,
    #[prost(int64, optional, tag = "3")]
    pub(crate) id: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResourceProto {
    #[prost(int64, optional, tag = "1")]
    pub(crate) memory: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub(crate) virtual_cores: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PriorityProto {
    #[prost(int32, optional, tag = "1")]
    pub(crate) priority: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NodeIdProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) host: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub(crate) port: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ContainerProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) id: Option<ContainerIdProto>,
    #[prost(message, optional, tag = "2")]
    pub(crate) node_id: Option<NodeIdProto>,
    #[prost(string, optional, tag = "3")]
    pub(crate) node_http_address: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub(crate) resource: Option<ResourceProto>,
    #[prost(message, optional, tag = "5")]
    pub(crate) priority: Option<PriorityProto>,
    #[prost(message, optional, tag = "6")]
    pub(crate) container_token: Option<TokenProto>,
    #[prost(int64, optional, tag = "8")]
    pub(crate) allocation_request_id: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ContainerStatusProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) container_id: Option<ContainerIdProto>,
    #[prost(int32, optional, tag = "2")]
    pub(crate) state: Option<i32>,
    #[prost(string, optional, tag = "3")]
    pub(crate) diagnostics: Option<String>,
    #[prost(int32, optional, tag = "4")]
    pub(crate) exit_status: Option<i32>,
    #[prost(message, optional, tag = "5")]
    pub(crate) capability: Option<ResourceProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResourceRequestProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) priority: Option<PriorityProto>,
    #[prost(string, optional, tag = "2")]
    pub(crate) resource_name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub(crate) capability: Option<ResourceProto>,
    #[prost(int32, optional, tag = "4")]
    pub(crate) num_containers: Option<i32>,
    #[prost(bool, optional, tag = "5")]
    pub(crate) relax_locality: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct UrlProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) scheme: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(crate) host: Option<String>,
    #[prost(int32, optional, tag = "3")]
    pub(crate) port: Option<i32>,
    #[prost(string, optional, tag = "4")]
    pub(crate) file: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub(crate) user_info: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LocalResourceProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) resource: Option<UrlProto>,
    #[prost(int64, optional, tag = "2")]
    pub(crate) size: Option<i64>,
    #[prost(int64, optional, tag = "3")]
    pub(crate) timestamp: Option<i64>,
    #[prost(int32, optional, tag = "4")]
    pub(crate) r#type: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub(crate) visibility: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub(crate) pattern: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StringLocalResourceMapProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) key: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<LocalResourceProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StringStringMapProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(crate) value: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ContainerLaunchContextProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) local_resources: Vec<StringLocalResourceMapProto>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub(crate) tokens: Option<Vec<u8>>,
    #[prost(message, repeated, tag = "4")]
    pub(crate) environment: Vec<StringStringMapProto>,
    #[prost(string, repeated, tag = "5")]
    pub(crate) command: Vec<String>,
}

// ---- hadoop.yarn: yarn_service_protos.proto (ApplicationMasterProtocol) ----

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RegisterApplicationMasterRequestProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) host: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub(crate) rpc_port: Option<i32>,
    #[prost(string, optional, tag = "3")]
    pub(crate) tracking_url: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RegisterApplicationMasterResponseProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) maximum_capability: Option<ResourceProto>,
    #[prost(message, repeated, tag = "4")]
    pub(crate) containers_from_previous_attempts: Vec<ContainerProto>,
    #[prost(string, optional, tag = "5")]
    pub(crate) queue: Option<String>,
    #[prost(message, repeated, tag = "6")]
    pub(crate) nm_tokens_from_previous_attempts: Vec<NmTokenProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct FinishApplicationMasterRequestProto {
    #[prost(string, optional, tag = "1")]
    pub(crate) diagnostics: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(crate) tracking_url: Option<String>,
    #[prost(int32, optional, tag = "3")]
    pub(crate) final_application_status: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct FinishApplicationMasterResponseProto {
    #[prost(bool, optional, tag = "1")]
    pub(crate) is_unregistered: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AllocateRequestProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) ask: Vec<ResourceRequestProto>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) release: Vec<ContainerIdProto>,
    #[prost(int32, optional, tag = "4")]
    pub(crate) response_id: Option<i32>,
    #[prost(float, optional, tag = "5")]
    pub(crate) progress: Option<f32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NmTokenProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) node_id: Option<NodeIdProto>,
    #[prost(message, optional, tag = "2")]
    pub(crate) token: Option<TokenProto>,
}

/// `AMCommandProto`.
pub(crate) const AM_RESYNC: i32 = 1;
pub(crate) const AM_SHUTDOWN: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AllocateResponseProto {
    #[prost(int32, optional, tag = "1")]
    pub(crate) a_m_command: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub(crate) response_id: Option<i32>,
    #[prost(message, repeated, tag = "3")]
    pub(crate) allocated_containers: Vec<ContainerProto>,
    #[prost(message, repeated, tag = "4")]
    pub(crate) completed_container_statuses: Vec<ContainerStatusProto>,
    #[prost(message, optional, tag = "5")]
    pub(crate) limit: Option<ResourceProto>,
    #[prost(int32, optional, tag = "7")]
    pub(crate) num_cluster_nodes: Option<i32>,
    #[prost(message, repeated, tag = "9")]
    pub(crate) nm_tokens: Vec<NmTokenProto>,
    #[prost(message, optional, tag = "12")]
    pub(crate) am_rm_token: Option<TokenProto>,
}

// ---- hadoop.yarn: yarn_service_protos.proto (ContainerManagementProtocol) ----

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StartContainerRequestProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) container_launch_context: Option<ContainerLaunchContextProto>,
    #[prost(message, optional, tag = "2")]
    pub(crate) container_token: Option<TokenProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StartContainersRequestProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) start_container_request: Vec<StartContainerRequestProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ContainerExceptionMapProto {
    #[prost(message, optional, tag = "1")]
    pub(crate) container_id: Option<ContainerIdProto>,
    #[prost(message, optional, tag = "2")]
    pub(crate) exception: Option<SerializedExceptionProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StartContainersResponseProto {
    #[prost(message, repeated, tag = "2")]
    pub(crate) succeeded_requests: Vec<ContainerIdProto>,
    #[prost(message, repeated, tag = "3")]
    pub(crate) failed_requests: Vec<ContainerExceptionMapProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StopContainersRequestProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) container_id: Vec<ContainerIdProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StopContainersResponseProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) succeeded_requests: Vec<ContainerIdProto>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) failed_requests: Vec<ContainerExceptionMapProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct GetContainerStatusesRequestProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) container_id: Vec<ContainerIdProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct GetContainerStatusesResponseProto {
    #[prost(message, repeated, tag = "1")]
    pub(crate) status: Vec<ContainerStatusProto>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) failed_requests: Vec<ContainerExceptionMapProto>,
}
