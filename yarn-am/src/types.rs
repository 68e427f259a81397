//! YARN's records as plain Rust values, and their conversion to and from the wire messages.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::UNIX_EPOCH;

use crate::error::DecodeError;
use crate::proto;

/// A YARN application id: `application_<cluster timestamp>_<sequence>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApplicationId {
    /// Start time of the ResourceManager that issued the id (ms since the epoch).
    pub cluster_timestamp: i64,
    /// Sequence number within that ResourceManager.
    pub id: i32,
}

impl fmt::Display for ApplicationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "application_{}_{:04}", self.cluster_timestamp, self.id)
    }
}

impl FromStr for ApplicationId {
    type Err = DecodeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DecodeError::new(format!("not an application id: {s:?}"));
        let rest = s.strip_prefix("application_").ok_or_else(bad)?;
        let (ts, id) = rest.split_once('_').ok_or_else(bad)?;
        Ok(ApplicationId {
            cluster_timestamp: ts.parse().map_err(|_| bad())?,
            id: id.parse().map_err(|_| bad())?,
        })
    }
}

/// One attempt of an application: `appattempt_<ts>_<app>_<attempt>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApplicationAttemptId {
    /// The application.
    pub application: ApplicationId,
    /// Attempt number, starting at 1.
    pub attempt: i32,
}

impl fmt::Display for ApplicationAttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "appattempt_{}_{:04}_{:06}",
            self.application.cluster_timestamp, self.application.id, self.attempt
        )
    }
}

/// A container id: `container_[e<epoch>_]<ts>_<app>_<attempt>_<id>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerId {
    /// The attempt that owns the container.
    pub attempt: ApplicationAttemptId,
    /// The container number; the ResourceManager's epoch sits in bits 40 and up.
    pub id: i64,
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let epoch = self.id >> 40;
        let seq = self.id & ((1 << 40) - 1);
        f.write_str("container_")?;
        if epoch > 0 {
            write!(f, "e{epoch:02}_")?;
        }
        write!(
            f,
            "{}_{:04}_{:02}_{:06}",
            self.attempt.application.cluster_timestamp,
            self.attempt.application.id,
            self.attempt.attempt,
            seq
        )
    }
}

impl FromStr for ContainerId {
    type Err = DecodeError;
    /// Parses the form the NodeManager puts in `CONTAINER_ID`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DecodeError::new(format!("not a container id: {s:?}"));
        let mut parts = s.strip_prefix("container_").ok_or_else(bad)?.split('_');
        let mut first = parts.next().ok_or_else(bad)?;
        let mut epoch: i64 = 0;
        if let Some(e) = first.strip_prefix('e') {
            epoch = e.parse().map_err(|_| bad())?;
            first = parts.next().ok_or_else(bad)?;
        }
        let ts: i64 = first.parse().map_err(|_| bad())?;
        let app: i32 = parts.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let attempt: i32 = parts.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let seq: i64 = parts.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        if parts.next().is_some() || !(0..1 << 40).contains(&seq) || !(0..1 << 23).contains(&epoch)
        {
            return Err(bad());
        }
        Ok(ContainerId {
            attempt: ApplicationAttemptId {
                application: ApplicationId {
                    cluster_timestamp: ts,
                    id: app,
                },
                attempt,
            },
            id: (epoch << 40) | seq,
        })
    }
}

/// A NodeManager's RPC address, as YARN names nodes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    /// Host name.
    pub host: String,
    /// ContainerManagementProtocol port.
    pub port: i32,
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Memory and virtual cores of a container or a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Resource {
    /// Memory in MiB.
    pub memory_mb: i64,
    /// Virtual cores.
    pub vcores: i32,
}

impl Resource {
    /// A resource of `memory_mb` MiB and `vcores` cores.
    pub fn new(memory_mb: i64, vcores: i32) -> Self {
        Resource { memory_mb, vcores }
    }

    /// Whether `self` is at least `other` in every dimension (YARN rounds requests up, so an
    /// allocated container may be bigger than asked).
    pub fn fits(&self, other: &Resource) -> bool {
        self.memory_mb >= other.memory_mb && self.vcores >= other.vcores
    }
}

/// A Hadoop security token (AMRM token, NM token, container token, ...).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The serialized token identifier (public part).
    pub identifier: Vec<u8>,
    /// The secret: HMAC of the identifier under the issuer's master key.
    pub password: Vec<u8>,
    /// The token kind, e.g. `YARN_AM_RM_TOKEN`, `NMToken`, `ContainerToken`.
    pub kind: String,
    /// The service (`host:port`) the token is for; may be empty.
    pub service: String,
}

impl fmt::Debug for Token {
    // The password is a credential: never print it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("kind", &self.kind)
            .field("service", &self.service)
            .field("identifier_len", &self.identifier.len())
            .finish_non_exhaustive()
    }
}

/// Token kind of the ApplicationMaster's token for the scheduler.
pub const AMRM_TOKEN_KIND: &str = "YARN_AM_RM_TOKEN";

/// A container the ResourceManager allocated to this application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Its id.
    pub id: ContainerId,
    /// The NodeManager that will run it.
    pub node: NodeId,
    /// The NodeManager's web address.
    pub node_http_address: String,
    /// What was allocated (may exceed what was asked).
    pub resource: Resource,
    /// The priority of the request it satisfies.
    pub priority: i32,
    /// The token to present to the NodeManager in `startContainers`.
    pub token: Option<Token>,
}

/// Lifecycle state of a container as YARN reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContainerState {
    /// Allocated, not yet started.
    New,
    /// Its process runs.
    Running,
    /// It has exited or been killed.
    Complete,
    /// Queued at the NodeManager (opportunistic containers).
    Scheduled,
    /// A value this crate does not know.
    Unknown(i32),
}

/// A container's state and, once complete, its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStatus {
    /// The container.
    pub id: ContainerId,
    /// Its state.
    pub state: ContainerState,
    /// Process exit status; YARN's negative codes: -100 aborted/released, -101 disks failed,
    /// -102 preempted, -103/-104 killed for memory, -105 killed by the AM, -106 by the RM,
    /// -1000 not yet known.
    pub exit_status: i32,
    /// Why it ended, in YARN's words.
    pub diagnostics: String,
}

/// What the ResourceManager tells an ApplicationMaster to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmCommand {
    /// The RM lost track of this AM (e.g. RM restart): register again and resend all requests.
    Resync,
    /// Stop now: the application is being ended.
    Shutdown,
}

/// The final status an ApplicationMaster reports when it unregisters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalStatus {
    /// The application did its work.
    Succeeded,
    /// The application failed.
    Failed,
    /// The application was killed (by its user).
    Killed,
    /// Not known (long-running services).
    Undefined,
}

impl FinalStatus {
    pub(crate) fn to_proto(self) -> i32 {
        match self {
            FinalStatus::Undefined => 0,
            FinalStatus::Succeeded => 1,
            FinalStatus::Failed => 2,
            FinalStatus::Killed => 3,
        }
    }
}

/// How a local resource is unpacked on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalResourceType {
    /// Copied as is.
    File,
    /// Unpacked (jar, zip, tar.gz).
    Archive,
}

/// Who may share a localized resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Any application on the node.
    Public,
    /// Applications of the same user.
    Private,
    /// This application only.
    Application,
}

/// A file the NodeManager copies into the container's working directory before start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalResource {
    /// `file:///abs/path` (single-machine clusters) or `hdfs://nn:port/path`.
    pub url: String,
    /// Length in bytes; YARN refuses to localize a file whose length differs.
    pub size: i64,
    /// Modification time in ms since the epoch; YARN refuses a file whose mtime differs.
    pub timestamp: i64,
    /// File or archive.
    pub kind: LocalResourceType,
    /// Sharing scope.
    pub visibility: Visibility,
}

impl LocalResource {
    /// A `file://` resource for a local file, with its current size and mtime (what the
    /// NodeManager checks before localizing it).
    pub fn local_file(path: &Path) -> std::io::Result<Self> {
        let abs = std::path::absolute(path)?;
        let meta = std::fs::metadata(&abs)?;
        let mtime = meta.modified()?;
        let timestamp = mtime
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Ok(LocalResource {
            url: format!("file://{}", abs.display()),
            size: meta.len() as i64,
            timestamp,
            kind: LocalResourceType::File,
            visibility: Visibility::Application,
        })
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self.kind {
            LocalResourceType::File => "FILE",
            LocalResourceType::Archive => "ARCHIVE",
        }
    }

    pub(crate) fn visibility_name(&self) -> &'static str {
        match self.visibility {
            Visibility::Public => "PUBLIC",
            Visibility::Private => "PRIVATE",
            Visibility::Application => "APPLICATION",
        }
    }

    pub(crate) fn to_proto(&self) -> proto::LocalResourceProto {
        let url = parse_url(&self.url);
        proto::LocalResourceProto {
            resource: Some(url),
            size: Some(self.size),
            timestamp: Some(self.timestamp),
            r#type: Some(match self.kind {
                LocalResourceType::Archive => 1,
                LocalResourceType::File => 2,
            }),
            visibility: Some(match self.visibility {
                Visibility::Public => 1,
                Visibility::Private => 2,
                Visibility::Application => 3,
            }),
            pattern: None,
        }
    }
}

/// Splits `scheme://[user@]host[:port]/path` into YARN's `URLProto`.
fn parse_url(url: &str) -> proto::UrlProto {
    let (scheme, rest) = url.split_once("://").unwrap_or(("file", url));
    let (authority, file) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (user_info, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, authority),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if p.parse::<i32>().is_ok() => (h, p.parse::<i32>().ok()),
        _ => (hostport, None),
    };
    proto::UrlProto {
        scheme: Some(scheme.to_string()),
        host: (!host.is_empty()).then(|| host.to_string()),
        port,
        file: Some(file.to_string()),
        user_info,
    }
}

/// Everything a NodeManager needs to start a container's process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaunchContext {
    /// Files to localize, by the name they get in the working directory.
    pub local_resources: BTreeMap<String, LocalResource>,
    /// Environment variables (`{{VAR}}` and `<LOG_DIR>` are expanded by the NodeManager).
    pub environment: BTreeMap<String, String>,
    /// The shell command(s); the NodeManager joins them with spaces and runs them with bash.
    pub commands: Vec<String>,
    /// Serialized credentials to hand to the container (Hadoop's `Credentials` storage
    /// format); none needed on clusters with security off.
    pub tokens: Option<Vec<u8>>,
}

impl LaunchContext {
    pub(crate) fn to_proto(&self) -> proto::ContainerLaunchContextProto {
        proto::ContainerLaunchContextProto {
            local_resources: self
                .local_resources
                .iter()
                .map(|(k, v)| proto::StringLocalResourceMapProto {
                    key: Some(k.clone()),
                    value: Some(v.to_proto()),
                })
                .collect(),
            tokens: self.tokens.clone(),
            environment: self
                .environment
                .iter()
                .map(|(k, v)| proto::StringStringMapProto {
                    key: Some(k.clone()),
                    value: Some(v.clone()),
                })
                .collect(),
            command: self.commands.clone(),
        }
    }
}

// ---- conversions from and to the wire ----

impl ApplicationId {
    pub(crate) fn from_proto(p: &proto::ApplicationIdProto) -> Self {
        ApplicationId {
            cluster_timestamp: p.cluster_timestamp.unwrap_or_default(),
            id: p.id.unwrap_or_default(),
        }
    }
    pub(crate) fn to_proto(self) -> proto::ApplicationIdProto {
        proto::ApplicationIdProto {
            id: Some(self.id),
            cluster_timestamp: Some(self.cluster_timestamp),
        }
    }
}

impl ContainerId {
    pub(crate) fn from_proto(p: &proto::ContainerIdProto) -> Self {
        let attempt = p.app_attempt_id.as_ref();
        let app = attempt
            .and_then(|a| a.application_id.as_ref())
            .or(p.app_id.as_ref())
            .map(ApplicationId::from_proto)
            .unwrap_or(ApplicationId {
                cluster_timestamp: 0,
                id: 0,
            });
        ContainerId {
            attempt: ApplicationAttemptId {
                application: app,
                attempt: attempt.and_then(|a| a.attempt_id).unwrap_or_default(),
            },
            id: p.id.unwrap_or_default(),
        }
    }
    pub(crate) fn to_proto(self) -> proto::ContainerIdProto {
        let app = self.attempt.application.to_proto();
        proto::ContainerIdProto {
            app_id: Some(app.clone()),
            app_attempt_id: Some(proto::ApplicationAttemptIdProto {
                application_id: Some(app),
                attempt_id: Some(self.attempt.attempt),
            }),
            id: Some(self.id),
        }
    }
}

impl Resource {
    pub(crate) fn from_proto(p: &proto::ResourceProto) -> Self {
        Resource {
            memory_mb: p.memory.unwrap_or_default(),
            vcores: p.virtual_cores.unwrap_or_default(),
        }
    }
    pub(crate) fn to_proto(self) -> proto::ResourceProto {
        proto::ResourceProto {
            memory: Some(self.memory_mb),
            virtual_cores: Some(self.vcores),
        }
    }
}

impl NodeId {
    pub(crate) fn from_proto(p: &proto::NodeIdProto) -> Self {
        NodeId {
            host: p.host.clone().unwrap_or_default(),
            port: p.port.unwrap_or_default(),
        }
    }
}

impl Token {
    pub(crate) fn from_proto(p: &proto::TokenProto) -> Self {
        Token {
            identifier: p.identifier.clone(),
            password: p.password.clone(),
            kind: p.kind.clone(),
            service: p.service.clone(),
        }
    }
    pub(crate) fn to_proto(&self) -> proto::TokenProto {
        proto::TokenProto {
            identifier: self.identifier.clone(),
            password: self.password.clone(),
            kind: self.kind.clone(),
            service: self.service.clone(),
        }
    }
}

impl Container {
    pub(crate) fn from_proto(p: &proto::ContainerProto) -> Self {
        Container {
            id: p
                .id
                .as_ref()
                .map(ContainerId::from_proto)
                .unwrap_or(ContainerId {
                    attempt: ApplicationAttemptId {
                        application: ApplicationId {
                            cluster_timestamp: 0,
                            id: 0,
                        },
                        attempt: 0,
                    },
                    id: 0,
                }),
            node: p
                .node_id
                .as_ref()
                .map(NodeId::from_proto)
                .unwrap_or(NodeId {
                    host: String::new(),
                    port: 0,
                }),
            node_http_address: p.node_http_address.clone().unwrap_or_default(),
            resource: p
                .resource
                .as_ref()
                .map(Resource::from_proto)
                .unwrap_or_default(),
            priority: p
                .priority
                .as_ref()
                .and_then(|p| p.priority)
                .unwrap_or_default(),
            token: p.container_token.as_ref().map(Token::from_proto),
        }
    }
}

impl ContainerStatus {
    pub(crate) fn from_proto(p: &proto::ContainerStatusProto) -> Self {
        ContainerStatus {
            id: p
                .container_id
                .as_ref()
                .map(ContainerId::from_proto)
                .unwrap_or_else(|| Container::from_proto(&Default::default()).id),
            state: match p.state.unwrap_or(1) {
                1 => ContainerState::New,
                2 => ContainerState::Running,
                3 => ContainerState::Complete,
                4 => ContainerState::Scheduled,
                other => ContainerState::Unknown(other),
            },
            exit_status: p.exit_status.unwrap_or(-1000),
            diagnostics: p.diagnostics.clone().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_roundtrip_through_strings() {
        let c: ContainerId = "container_1795965764364_0001_01_000002"
            .parse()
            .expect("valid");
        assert_eq!(c.to_string(), "container_1795965764364_0001_01_000002");
        assert_eq!(
            c.attempt.to_string(),
            "appattempt_1795965764364_0001_000001"
        );
        let e: ContainerId = "container_e17_1410901177871_0001_01_000005"
            .parse()
            .expect("valid");
        assert_eq!(e.id >> 40, 17);
        assert_eq!(e.to_string(), "container_e17_1410901177871_0001_01_000005");
        let a: ApplicationId = "application_1795965764364_0012".parse().expect("valid");
        assert_eq!(a.id, 12);
        assert_eq!(a.to_string(), "application_1795965764364_0012");
        assert!("container_x".parse::<ContainerId>().is_err());
        assert!("application_1".parse::<ApplicationId>().is_err());
    }

    #[test]
    fn url_split() {
        let u = parse_url("file:///opt/sluice/bin");
        assert_eq!(u.scheme.as_deref(), Some("file"));
        assert_eq!(u.host, None);
        assert_eq!(u.file.as_deref(), Some("/opt/sluice/bin"));
        let h = parse_url("hdfs://nn:8020/x/y");
        assert_eq!(
            (h.host.as_deref(), h.port, h.file.as_deref()),
            (Some("nn"), Some(8020), Some("/x/y"))
        );
    }

    #[test]
    fn resource_fits() {
        assert!(Resource::new(128, 1).fits(&Resource::new(100, 1)));
        assert!(!Resource::new(128, 1).fits(&Resource::new(100, 2)));
    }
}
