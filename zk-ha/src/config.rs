//! Configuration and the ZooKeeper node layout derived from it.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::HaError;

/// Default `high-availability.zookeeper.path.root`.
pub const DEFAULT_ROOT: &str = "/sluice";
/// Default `high-availability.cluster-id`.
pub const DEFAULT_CLUSTER_ID: &str = "default";
/// Default ZooKeeper session timeout.
///
/// Flink uses 60 s because a JVM can pause that long in garbage collection. A Rust process has no
/// such pauses, and this timeout bounds how long a dead leader blocks its successor (failover time
/// is about one session timeout), so 5 s keeps failover well under 10 s while tolerating a few
/// seconds of network trouble. ZooKeeper clamps it to `[2, 20] × tickTime` of the server.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time to establish one TCP connection to a ZooKeeper server.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// Settings of the ZooKeeper HA services, named after Flink's `high-availability.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaConfig {
    /// `high-availability.zookeeper.quorum`: `host:port[,host:port...]`.
    pub quorum: String,
    /// `high-availability.zookeeper.path.root`; default [`DEFAULT_ROOT`].
    pub root: String,
    /// `high-availability.cluster-id`; default [`DEFAULT_CLUSTER_ID`]. Flink's forms are
    /// accepted: `default`, `/default` and `/team/cluster_one` (see [`normalize_cluster_id`]).
    pub cluster_id: String,
    /// `high-availability.storageDir`: where the data behind the pointers lives. Files go to
    /// `<storage_dir>/<cluster_id>/` (the cluster id without its leading and trailing slashes).
    pub storage_dir: PathBuf,
    /// `high-availability.zookeeper.client.session-timeout`; default [`DEFAULT_SESSION_TIMEOUT`].
    pub session_timeout: Duration,
    /// `high-availability.zookeeper.client.connection-timeout`; default
    /// [`DEFAULT_CONNECTION_TIMEOUT`].
    pub connection_timeout: Duration,
}

impl HaConfig {
    /// A configuration with every optional setting at its default.
    pub fn new(quorum: impl Into<String>, storage_dir: impl Into<PathBuf>) -> Self {
        HaConfig {
            quorum: quorum.into(),
            root: DEFAULT_ROOT.to_owned(),
            cluster_id: DEFAULT_CLUSTER_ID.to_owned(),
            storage_dir: storage_dir.into(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
        }
    }

    /// Sets the root path.
    pub fn with_root(mut self, root: impl Into<String>) -> Self {
        self.root = root.into();
        self
    }

    /// Sets the cluster id.
    pub fn with_cluster_id(mut self, cluster_id: impl Into<String>) -> Self {
        self.cluster_id = cluster_id.into();
        self
    }

    /// Sets the session timeout.
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets the connection timeout.
    pub fn with_connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Checks every value and derives the node layout.
    pub fn validate(&self) -> Result<Layout, HaError> {
        if self.quorum.trim().is_empty() {
            return Err(HaError::invalid(
                "high-availability.zookeeper.quorum",
                "empty",
            ));
        }
        if self.session_timeout.is_zero() {
            return Err(HaError::invalid(
                "high-availability.zookeeper.client.session-timeout",
                "zero",
            ));
        }
        if self.storage_dir.as_os_str().is_empty() {
            return Err(HaError::invalid("high-availability.storageDir", "empty"));
        }
        Layout::new(&self.root, &self.cluster_id)
    }

    /// The directory the cluster's files go to: `<storage_dir>/<cluster id>`, the id without its
    /// leading and trailing slashes (as Flink joins them), so `/default` and `default` share one.
    pub fn cluster_storage_dir(&self) -> Result<PathBuf, HaError> {
        Ok(self
            .storage_dir
            .join(normalize_cluster_id(&self.cluster_id)?))
    }
}

/// The cluster id as a relative ZooKeeper path: Flink's forms `default`, `/default`,
/// `/cluster_one/` and nested ids such as `/team/cluster_one` all work, as in Flink, which trims
/// the id's leading and trailing slashes before joining it to the root. Each segment between
/// slashes must be a valid name (so `..`, `.`, empty segments such as in `a//b`, and an empty id
/// are refused): the id can never leave the root, in ZooKeeper or in the storage directory.
pub fn normalize_cluster_id(cluster_id: &str) -> Result<String, HaError> {
    const KEY: &str = "high-availability.cluster-id";
    let trimmed = cluster_id.trim_matches('/');
    if trimmed.is_empty() {
        return Err(HaError::invalid(
            KEY,
            format!("{cluster_id:?} is empty: give a name such as /default"),
        ));
    }
    for segment in trimmed.split('/') {
        if validate_name(KEY, segment).is_err() {
            return Err(HaError::invalid(
                KEY,
                format!(
                    "{cluster_id:?}: every part between slashes must be 1-200 of [A-Za-z0-9._-] \
                     and not . or .. (as in /default or /team/cluster_one)"
                ),
            ));
        }
    }
    Ok(trimmed.to_owned())
}

/// Rejects names that would escape their parent node or file directory.
pub(crate) fn validate_name(what: &'static str, name: &str) -> Result<(), HaError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(HaError::invalid(
            what,
            format!("{name:?} must be 1-200 of [A-Za-z0-9._-] and not . or .."),
        ))
    }
}

/// The ZooKeeper paths of one cluster. See the crate documentation for the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    base: String,
}

impl Layout {
    /// The layout under `<root>/<cluster_id>` (the cluster id normalized by
    /// [`normalize_cluster_id`]).
    pub fn new(root: &str, cluster_id: &str) -> Result<Self, HaError> {
        let root_ok = root.starts_with('/')
            && (root == "/" || !root.ends_with('/'))
            && !root.contains("//")
            && root
                .split('/')
                .skip(1)
                .all(|seg| root == "/" || validate_name("root", seg).is_ok());
        if !root_ok {
            return Err(HaError::invalid(
                "high-availability.zookeeper.path.root",
                format!("{root:?} must be an absolute ZooKeeper path without a trailing '/'"),
            ));
        }
        let cluster_id = normalize_cluster_id(cluster_id)?;
        let base = if root == "/" {
            format!("/{cluster_id}")
        } else {
            format!("{root}/{cluster_id}")
        };
        Ok(Layout { base })
    }

    /// `<root>/<cluster-id>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `<base>/leader-latch`: the election's ephemeral-sequential contender nodes.
    pub fn latch_dir(&self) -> String {
        format!("{}/leader-latch", self.base)
    }

    /// `<base>/leader/<component>/connection_info`: the leader's published addresses (EPHEMERAL).
    pub fn connection_info(&self, component: &str) -> Result<String, HaError> {
        validate_name("component", component)?;
        Ok(format!("{}/leader/{component}/connection_info", self.base))
    }

    /// `<base>/jobgraphs`: one pointer per submitted job.
    pub fn job_graphs_dir(&self) -> String {
        format!("{}/jobgraphs", self.base)
    }

    /// `<base>/jobs/<job-id>`: per-job state.
    pub fn job_dir(&self, job_id: &str) -> Result<String, HaError> {
        validate_name("job id", job_id)?;
        Ok(format!("{}/jobs/{job_id}", self.base))
    }

    /// `<base>/jobs/<job-id>/checkpoints`: one pointer per retained completed checkpoint.
    pub fn checkpoints_dir(&self, job_id: &str) -> Result<String, HaError> {
        Ok(format!("{}/checkpoints", self.job_dir(job_id)?))
    }

    /// `<base>/jobs/<job-id>/checkpoint-counter`: the next checkpoint id, as decimal text.
    pub fn checkpoint_counter(&self, job_id: &str) -> Result<String, HaError> {
        Ok(format!("{}/checkpoint-counter", self.job_dir(job_id)?))
    }

    /// `<base>/job-results`: one pointer per globally terminated job.
    pub fn job_results_dir(&self) -> String {
        format!("{}/job-results", self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout() {
        let l = HaConfig::new("127.0.0.1:2181", "/tmp/ha")
            .validate()
            .unwrap();
        assert_eq!(l.latch_dir(), "/sluice/default/leader-latch");
        assert_eq!(
            l.connection_info("dispatcher").unwrap(),
            "/sluice/default/leader/dispatcher/connection_info"
        );
        assert_eq!(l.job_graphs_dir(), "/sluice/default/jobgraphs");
        assert_eq!(
            l.checkpoints_dir("j1").unwrap(),
            "/sluice/default/jobs/j1/checkpoints"
        );
        assert_eq!(
            l.checkpoint_counter("j1").unwrap(),
            "/sluice/default/jobs/j1/checkpoint-counter"
        );
        assert_eq!(l.job_results_dir(), "/sluice/default/job-results");
    }

    #[test]
    fn nested_and_top_level_roots() {
        assert_eq!(Layout::new("/a/b", "c").unwrap().base(), "/a/b/c");
        assert_eq!(Layout::new("/", "c").unwrap().base(), "/c");
    }

    #[test]
    fn rejects_bad_paths_and_names() {
        for root in ["", "sluice", "/sluice/", "//x", "/a/../b"] {
            assert!(Layout::new(root, "c").is_err(), "root {root:?} accepted");
        }
        for id in [
            "", "/", "//", "..", ".", "/..", "a/../b", "a//b", "/a b", "x/./y",
        ] {
            assert!(Layout::new("/s", id).is_err(), "cluster id {id:?} accepted");
        }
        let l = Layout::new("/s", "c").unwrap();
        assert!(l.job_dir("../x").is_err());
        assert!(l.connection_info("a/b").is_err());
    }

    #[test]
    fn flinks_cluster_id_forms_give_flinks_paths() {
        // Flink's own default is `/default` and its HA docs use `/cluster_one`: Flink trims the
        // slashes and joins root and id with one, so both name the same node as without them.
        for (id, base) in [
            ("default", "/flink/default"),
            ("/default", "/flink/default"),
            ("/cluster_one", "/flink/cluster_one"),
            ("/cluster_one/", "/flink/cluster_one"),
            ("/team/cluster_one", "/flink/team/cluster_one"),
        ] {
            assert_eq!(Layout::new("/flink", id).unwrap().base(), base, "{id}");
        }
        assert_eq!(Layout::new("/", "/default").unwrap().base(), "/default");
        let config = HaConfig::new("zk:2181", "/ha").with_cluster_id("/team/cluster_one");
        assert_eq!(
            config.cluster_storage_dir().unwrap(),
            PathBuf::from("/ha/team/cluster_one")
        );
        assert_eq!(
            HaConfig::new("zk:2181", "/ha")
                .with_cluster_id("/default")
                .cluster_storage_dir()
                .unwrap(),
            HaConfig::new("zk:2181", "/ha")
                .cluster_storage_dir()
                .unwrap()
        );
        let refused = HaConfig::new("zk:2181", "/ha").with_cluster_id("/../etc");
        assert!(refused.cluster_storage_dir().is_err());
        assert!(refused.validate().is_err());
    }

    #[test]
    fn rejects_empty_quorum() {
        assert!(HaConfig::new(" ", "/tmp").validate().is_err());
    }
}
