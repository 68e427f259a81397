//! What a NodeManager tells a container through its environment.

use std::collections::HashMap;

use crate::error::DecodeError;
use crate::types::{ApplicationAttemptId, ContainerId};

/// The NodeManager-provided environment of a container (the AM's included).
///
/// The scheduler address is *not* among these: pass it at submission, or read it from
/// `$HADOOP_CONF_DIR/yarn-site.xml` ([`crate::YarnSite`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEnv {
    /// `CONTAINER_ID`: this container; its attempt tells an AM which attempt it is.
    pub container_id: ContainerId,
    /// `NM_HOST`: the node's host name.
    pub nm_host: String,
    /// `NM_PORT`: the NodeManager's RPC port.
    pub nm_port: Option<u16>,
    /// `NM_HTTP_PORT`: the NodeManager's web port.
    pub nm_http_port: Option<u16>,
    /// `LOCAL_DIRS`: scratch directories (comma-separated by YARN).
    pub local_dirs: Vec<String>,
    /// `LOG_DIRS`: log directories.
    pub log_dirs: Vec<String>,
    /// `APP_SUBMIT_TIME_ENV`: submission time, ms since the epoch.
    pub app_submit_time: Option<i64>,
    /// `MAX_APP_ATTEMPTS`: how many AM attempts YARN makes.
    pub max_app_attempts: Option<i32>,
}

impl ContainerEnv {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, DecodeError> {
        Self::from_map(&std::env::vars().collect())
    }

    /// Reads the variables from a map (for tests and for forwarding environments).
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Self, DecodeError> {
        let get = |k: &str| vars.get(k).map(String::as_str);
        let container_id = get("CONTAINER_ID")
            .ok_or_else(|| {
                DecodeError::new("CONTAINER_ID is not set: not started by a NodeManager")
            })?
            .parse()?;
        let list = |k: &str| {
            get(k)
                .map(|v| {
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(ContainerEnv {
            container_id,
            nm_host: get("NM_HOST").unwrap_or_default().to_string(),
            nm_port: get("NM_PORT").and_then(|p| p.parse().ok()),
            nm_http_port: get("NM_HTTP_PORT").and_then(|p| p.parse().ok()),
            local_dirs: list("LOCAL_DIRS"),
            log_dirs: list("LOG_DIRS"),
            app_submit_time: get("APP_SUBMIT_TIME_ENV").and_then(|p| p.parse().ok()),
            max_app_attempts: get("MAX_APP_ATTEMPTS").and_then(|p| p.parse().ok()),
        })
    }

    /// The application attempt this container belongs to.
    pub fn attempt(&self) -> ApplicationAttemptId {
        self.container_id.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_node_manager_environment() {
        let vars: HashMap<String, String> = [
            ("CONTAINER_ID", "container_1795965764364_0006_02_000001"),
            ("NM_HOST", "localhost"),
            ("NM_PORT", "34363"),
            ("LOCAL_DIRS", "/a,/b"),
            ("MAX_APP_ATTEMPTS", "2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let env = ContainerEnv::from_map(&vars).expect("valid");
        assert_eq!(env.attempt().attempt, 2);
        assert_eq!(env.nm_port, Some(34363));
        assert_eq!(env.local_dirs, ["/a", "/b"]);
        assert_eq!(env.max_app_attempts, Some(2));
        assert!(ContainerEnv::from_map(&HashMap::new()).is_err());
    }
}
