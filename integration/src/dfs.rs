//! A real HDFS for the tests: a MiniDFSCluster (one NameNode, three DataNodes on 127.0.0.1)
//! started by `scripts/yarn-minicluster.sh start-dfs`, one per test binary ([`mini_dfs`]).
//!
//! The launcher watches the test binary's pid and stops when it ends, so the shared cluster
//! (a static, never dropped) does not outlive its tests. Its directory holds the
//! `core-site.xml`/`hdfs-site.xml` the sluice processes read as `HADOOP_CONF_DIR`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::repo_root;

/// Where the test binaries' clusters live: `<DIR_PREFIX><pid of the test binary>`.
const DIR_PREFIX: &str = "/var/tmp/sluice-minidfs-";

/// A running MiniDFSCluster.
#[derive(Debug)]
pub struct MiniDfs {
    /// Its directory: the Hadoop configuration (the clients' `HADOOP_CONF_DIR`), its data,
    /// `ready`, `pid` and `log`.
    pub dir: PathBuf,
    /// The NameNode's RPC address, `127.0.0.1:PORT`.
    pub namenode: String,
    /// The logical name service the configuration declares for the same NameNode.
    pub nameservice: String,
}

impl MiniDfs {
    /// `hdfs://127.0.0.1:PORT<path>`.
    pub fn uri(&self, path: &str) -> String {
        format!("hdfs://{}{path}", self.namenode)
    }

    /// The directory to give processes as `HADOOP_CONF_DIR`.
    pub fn conf_dir(&self) -> String {
        self.dir.display().to_string()
    }
}

/// The test binary's MiniDFSCluster, started on first use (a build of the launcher if needed,
/// then ≈ 10–20 s on a 2-core machine).
pub fn mini_dfs() -> &'static MiniDfs {
    static DFS: OnceLock<MiniDfs> = OnceLock::new();
    DFS.get_or_init(start)
}

fn script() -> PathBuf {
    repo_root().join("scripts/yarn-minicluster.sh")
}

fn start() -> MiniDfs {
    crate::remove_stale_dirs(DIR_PREFIX, "pid");
    let built = Command::new(script())
        .arg("build")
        .status()
        .expect("build launcher");
    assert!(built.success(), "building the mini cluster launcher failed");
    let me = std::process::id();
    let dir = PathBuf::from(format!("{DIR_PREFIX}{me}"));
    let out = Command::new(script())
        .arg("start-dfs")
        .arg(&dir)
        .arg(me.to_string())
        .output()
        .expect("start the MiniDFSCluster");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "MiniDFSCluster did not start:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with("READY "))
            .and_then(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(name).map(str::to_string))
            })
            .unwrap_or_else(|| panic!("no {name} in the READY line of {stdout:?}"))
    };
    MiniDfs {
        namenode: field("namenode="),
        nameservice: field("nameservice="),
        dir,
    }
}
