//! The file systems durable files live on, chosen by each path's scheme: `hdfs://` URIs go to
//! HDFS ([`HdfsStorage`]), everything else (plain paths; `file:` URIs are plain paths by the
//! time configuration has read them) to the local or a mounted, shared file system
//! ([`LocalFileStorage`]). [`FileSystems`] is the [`StateStorage`] the JobManager and the
//! TaskManagers use, so a checkpoint directory on HDFS needs nothing but its URI.
//!
//! The Hadoop configuration (`HADOOP_CONF_DIR`) is read when the first `hdfs:` path is used,
//! and one client per cluster is kept; processes that never see an `hdfs:` path read nothing
//! and start no HDFS thread.

mod hadoop_conf;
mod hdfs;

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

pub use hadoop_conf::{HadoopConf, HdfsCluster};
pub use hdfs::HdfsStorage;

use crate::config::HdfsUri;
use crate::state::storage::{FileInfo, LocalFileStorage, OutputFile, StateStorage};

/// Durable storage by scheme: local paths and `hdfs://` URIs.
#[derive(Default)]
pub struct FileSystems {
    local: LocalFileStorage,
    /// The Hadoop configuration, read once when first needed.
    hadoop: OnceLock<Result<Arc<HadoopConf>, String>>,
    /// One client per authority as written (`""` for `hdfs:///`).
    hdfs: Mutex<HashMap<String, Arc<HdfsStorage>>>,
}

impl std::fmt::Debug for FileSystems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSystems").finish_non_exhaustive()
    }
}

/// Where one path goes.
enum Route {
    Local,
    Hdfs(Arc<HdfsStorage>),
}

impl FileSystems {
    /// Storage reading the Hadoop configuration from the environment (`HADOOP_CONF_DIR`, else
    /// `$HADOOP_HOME/etc/hadoop`) when an `hdfs:` path first needs it.
    pub fn new() -> FileSystems {
        FileSystems::default()
    }

    /// Storage with the given Hadoop configuration instead of the environment's.
    pub fn with_hadoop_conf(conf: HadoopConf) -> FileSystems {
        let fs = FileSystems::default();
        let _ = fs.hadoop.set(Ok(Arc::new(conf)));
        fs
    }

    fn hadoop(&self) -> Result<Arc<HadoopConf>, String> {
        self.hadoop
            .get_or_init(|| HadoopConf::from_env().map(Arc::new))
            .clone()
    }

    /// `hdfs://authority` of `fs.defaultFS` when the default file system is HDFS; `None` when
    /// it is another one or no Hadoop configuration is set. Errors name a malformed site file.
    pub fn default_hdfs(&self) -> Result<Option<String>, String> {
        Ok(self.hadoop()?.default_hdfs())
    }

    /// `path` with the authority of `fs.defaultFS` filled in when it is an `hdfs:///` URI, so
    /// that another process reading it (a YARN NodeManager with a configuration of its own)
    /// finds the same cluster; any other path unchanged.
    pub fn qualify(&self, path: &str) -> io::Result<String> {
        match HdfsUri::parse(path) {
            Some(Ok(mut uri)) if uri.authority.is_empty() => {
                let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
                let conf = self.hadoop().map_err(|e| invalid(format!("{path}: {e}")))?;
                let cluster = conf.resolve(path, &uri).map_err(invalid)?;
                uri.authority = cluster.uri.trim_start_matches("hdfs://").to_string();
                Ok(uri.to_uri())
            }
            Some(Err(e)) => Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
            _ => Ok(path.to_string()),
        }
    }

    fn route(&self, path: &str) -> io::Result<Route> {
        let Some(uri) = HdfsUri::parse(path) else {
            return Ok(Route::Local);
        };
        let uri = uri.map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut clients = self.hdfs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(storage) = clients.get(&uri.authority) {
            return Ok(Route::Hdfs(storage.clone()));
        }
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let conf = self.hadoop().map_err(|e| invalid(format!("{path}: {e}")))?;
        let cluster = conf.resolve(path, &uri).map_err(invalid)?;
        let storage = Arc::new(HdfsStorage::connect(cluster, &conf)?);
        clients.insert(uri.authority, storage.clone());
        Ok(Route::Hdfs(storage))
    }
}

/// Runs `$call` on the storage `$path` routes to.
macro_rules! routed {
    ($self:ident, $path:expr, |$s:ident| $call:expr) => {
        match $self.route($path)? {
            Route::Local => {
                let $s: &dyn StateStorage = &$self.local;
                $call
            }
            Route::Hdfs(storage) => {
                let $s: &dyn StateStorage = storage.as_ref();
                $call
            }
        }
    };
}

impl StateStorage for FileSystems {
    fn check_path(&self, path: &str) -> io::Result<()> {
        self.qualify(path).map(|_| ())
    }

    fn write(&self, path: &str, data: &[u8]) -> io::Result<()> {
        routed!(self, path, |s| s.write(path, data))
    }

    fn upload(&self, from: &Path, path: &str) -> io::Result<u64> {
        routed!(self, path, |s| s.upload(from, path))
    }

    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        routed!(self, path, |s| s.read(path))
    }

    fn download(&self, path: &str, to: &Path) -> io::Result<()> {
        routed!(self, path, |s| s.download(path, to))
    }

    fn status(&self, path: &str) -> io::Result<Option<FileInfo>> {
        routed!(self, path, |s| s.status(path))
    }

    fn create_private_dir(&self, path: &str) -> io::Result<()> {
        routed!(self, path, |s| s.create_private_dir(path))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        routed!(self, dir, |s| s.list(dir))
    }

    fn delete_file(&self, path: &str) -> io::Result<()> {
        routed!(self, path, |s| s.delete_file(path))
    }

    fn delete_dir(&self, path: &str) -> io::Result<()> {
        routed!(self, path, |s| s.delete_dir(path))
    }

    fn open_read(&self, path: &str, offset: u64) -> io::Result<Box<dyn Read + Send>> {
        routed!(self, path, |s| s.open_read(path, offset))
    }

    fn create_file(&self, path: &str) -> io::Result<Box<dyn OutputFile>> {
        routed!(self, path, |s| s.create_file(path))
    }

    /// Both paths must be on one file system: a rename never copies.
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        if HdfsUri::parse(from).is_some() != HdfsUri::parse(to).is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot rename {from} to {to}: they are on different file systems"),
            ));
        }
        routed!(self, from, |s| s.rename(from, to))
    }

    fn create_dir(&self, path: &str) -> io::Result<()> {
        routed!(self, path, |s| s.create_dir(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_stay_on_the_local_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::with_hadoop_conf(HadoopConf::default());
        let f = format!("{}/a/b", dir.path().display());
        fs.write(&f, b"x").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"x");
        assert!(
            fs.hdfs.lock().unwrap().is_empty(),
            "no HDFS client for local paths"
        );
    }

    #[test]
    fn hdfs_uris_without_authority_are_qualified_with_the_default_file_system() {
        let mut conf = HadoopConf::default();
        conf.add_site(
            "<configuration><property><name>fs.defaultFS</name>\
             <value>hdfs://nn.example.com:9000</value></property></configuration>",
        )
        .unwrap();
        let fs = FileSystems::with_hadoop_conf(conf);
        assert_eq!(
            fs.default_hdfs().unwrap().as_deref(),
            Some("hdfs://nn.example.com:9000")
        );
        assert_eq!(
            fs.qualify("hdfs:///user/a%20b/.sluice").unwrap(),
            "hdfs://nn.example.com:9000/user/a%20b/.sluice"
        );
        for kept in ["hdfs://other:8020/x", "/local/x"] {
            assert_eq!(fs.qualify(kept).unwrap(), kept);
        }
        let bare = FileSystems::with_hadoop_conf(HadoopConf::default());
        assert_eq!(bare.default_hdfs().unwrap(), None);
        let e = bare.qualify("hdfs:///x").unwrap_err();
        assert!(e.to_string().contains("fs.defaultFS"), "{e}");
    }

    #[test]
    fn unreachable_hdfs_paths_fail_naming_the_path_and_the_cause() {
        // The client's default NameNode failover takes minutes against a closed port.
        let mut conf = HadoopConf::default();
        conf.add_site(
            "<configuration><property><name>dfs.client.failover.max.attempts</name>\
             <value>0</value></property></configuration>",
        )
        .unwrap();
        let fs = FileSystems::with_hadoop_conf(conf);
        let e = fs.read("hdfs:///chk/job/_metadata").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(
            e.to_string().contains("'hdfs:///chk/job/_metadata'")
                && e.to_string().contains("fs.defaultFS"),
            "{e}"
        );
        // Nothing listens on port 1: the cause is the refused connection, named with the path.
        let e = fs.write("hdfs://127.0.0.1:1/chk/x", b"x").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("hdfs://127.0.0.1:1/chk/x: cannot write: ")
                && text.to_lowercase().contains("refused"),
            "{text}"
        );
    }
}
