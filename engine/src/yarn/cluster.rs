//! What the ApplicationMaster and the client both take from the configuration and the
//! environment: the ResourceManager's addresses, the user YARN acts as and container sizes.

use yarn_am::{Resource, YarnSite};

use super::YarnError;
use crate::config::Config;

/// Environment variable naming the user Hadoop's simple authentication acts as (YARN and
/// HDFS alike); the HDFS client reads it too.
pub const HADOOP_USER_ENV: &str = "HADOOP_USER_NAME";

/// The user YARN's simple authentication acts as: `HADOOP_USER_NAME`, as Hadoop's own clients
/// read it, else the login user. The client passes it to the containers, so the AM and the
/// TaskManagers reach HDFS as the user that staged the files and owns the application.
pub(crate) fn user() -> String {
    std::env::var(HADOOP_USER_ENV)
        .or_else(|_| std::env::var("USER"))
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "sluice".into())
}

/// The ResourceManager's web (REST) address: `yarn.resourcemanager.webapp.address`, else
/// `$HADOOP_CONF_DIR/yarn-site.xml`.
pub fn webapp_address(config: &Config) -> Result<String, YarnError> {
    if let Some(a) = &config.yarn.webapp_address {
        return Ok(a.clone());
    }
    YarnSite::from_env()?
        .map(|site| site.webapp_address())
        .ok_or(YarnError::NoResourceManager)
}

/// The scheduler address the ApplicationMaster registers with:
/// `yarn.resourcemanager.scheduler.address`, else `$HADOOP_CONF_DIR/yarn-site.xml`, else the
/// host of `yarn.resourcemanager.webapp.address` with YARN's default scheduler port 8030.
pub fn scheduler_address(config: &Config) -> Result<String, YarnError> {
    if let Some(a) = &config.yarn.scheduler_address {
        return Ok(a.clone());
    }
    if let Some(site) = YarnSite::from_env()? {
        return Ok(site.scheduler_address());
    }
    config
        .yarn
        .webapp_address
        .as_deref()
        .map(|web| {
            let host = web.rsplit_once(':').map_or(web, |(host, _)| host);
            format!("{host}:8030")
        })
        .ok_or(YarnError::NoResourceManager)
}

/// Memory sizes in YARN's unit (MiB), rounded up so the process always fits its container.
pub fn container_mb(bytes: u64) -> i64 {
    bytes.div_ceil(1024 * 1024) as i64
}

/// The capability of one TaskManager container from `taskmanager.memory.process.size` and
/// `yarn.containers.vcores`.
pub fn taskmanager_capability(config: &Config) -> Resource {
    Resource::new(
        container_mb(config.network.process_size),
        config.yarn.vcores as i32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_sizes_round_up_to_whole_mebibytes() {
        assert_eq!(container_mb(256 * 1024 * 1024), 256);
        assert_eq!(container_mb(256 * 1024 * 1024 + 1), 257);
        let mut config = Config::default();
        config
            .set("taskmanager.memory.process.size", "300mb")
            .unwrap();
        config.set("yarn.containers.vcores", "2").unwrap();
        assert_eq!(taskmanager_capability(&config), Resource::new(300, 2));
    }

    #[test]
    fn no_resource_manager_anywhere_is_a_clear_error() {
        // SAFETY of the test: only this test reads HADOOP_CONF_DIR in this process's tests.
        if std::env::var_os("HADOOP_CONF_DIR").is_some() {
            return;
        }
        let err = webapp_address(&Config::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("yarn.resourcemanager.webapp.address"),
            "{err}"
        );
        let mut config = Config::default();
        config
            .set("yarn.resourcemanager.webapp.address", "rm:8088")
            .unwrap();
        assert_eq!(webapp_address(&config).unwrap(), "rm:8088");
        assert_eq!(scheduler_address(&config).unwrap(), "rm:8030");
        config
            .set("yarn.resourcemanager.scheduler.address", "rm:9030")
            .unwrap();
        assert_eq!(scheduler_address(&config).unwrap(), "rm:9030");
    }
}
