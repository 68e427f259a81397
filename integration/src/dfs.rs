//! A real HDFS for the tests: a MiniDFSCluster (one NameNode, three DataNodes on 127.0.0.1)
//! started by `scripts/yarn-minicluster.sh start-dfs`, one per test binary ([`mini_dfs`]), or
//! one of a test's own that it may break ([`private_dfs`]: stop and restart the NameNode, stop a
//! DataNode).
//!
//! The launcher watches the test binary's pid and stops when it ends, so the shared cluster
//! (a static, never dropped) does not outlive its tests. Its directory holds the
//! `core-site.xml`/`hdfs-site.xml` the sluice processes read as `HADOOP_CONF_DIR`.

use std::ops::Deref;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{repo_root, wait_for};

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
    DFS.get_or_init(|| start(PathBuf::from(format!("{DIR_PREFIX}{}", std::process::id()))))
}

/// A MiniDFSCluster of one test's own, in its own directory, which the test may break; it is
/// stopped and its directory removed when dropped (and, should the test binary die first, the
/// launcher stops when the binary's pid is gone).
#[derive(Debug)]
pub struct PrivateDfs {
    dfs: MiniDfs,
    /// The sequence number of the next control command.
    next_command: AtomicU64,
}

/// Starts a [`PrivateDfs`]; `name` tells it apart from the binary's other clusters.
pub fn private_dfs(name: &str) -> PrivateDfs {
    let dir = PathBuf::from(format!("{DIR_PREFIX}{}-{name}", std::process::id()));
    // A directory left by an earlier run of the same name would start its old cluster again.
    let _ = std::fs::remove_dir_all(&dir);
    PrivateDfs {
        dfs: start(dir),
        next_command: AtomicU64::new(1),
    }
}

impl PrivateDfs {
    /// Stops the NameNode: its port refuses connections until [`restart_namenode`]; the
    /// DataNodes keep running.
    ///
    /// [`restart_namenode`]: Self::restart_namenode
    pub fn stop_namenode(&self) {
        self.control("stop-namenode");
    }

    /// Starts the NameNode again on the same port from its metadata; returns once the
    /// DataNodes have registered again and it has left safe mode.
    pub fn restart_namenode(&self) {
        self.control("restart-namenode");
    }

    /// Stops the DataNode at `index` of those still running (0, 1 or 2 at first) at once, its
    /// connections dropped, as when its machine dies.
    pub fn stop_datanode(&self, index: usize) {
        self.control(&format!("stop-datanode {index}"));
    }

    /// Hands `command` to the launcher through its control directory and waits for its answer
    /// (the protocol is in `DfsLauncher.java`); panics with the launcher's error.
    fn control(&self, command: &str) {
        let seq = self.next_command.fetch_add(1, Ordering::Relaxed);
        let control = self.dir.join("control");
        let file = control.join(format!("{seq}.cmd"));
        let tmp = control.join(format!("{seq}.cmd.tmp"));
        std::fs::write(&tmp, command).expect("write the control command");
        std::fs::rename(&tmp, &file).expect("place the control command");
        let done = control.join(format!("{seq}.done"));
        let answer = wait_for(
            Duration::from_secs(180),
            &format!("the MiniDFSCluster in {} to {command}", self.dir.display()),
            || std::fs::read_to_string(&done).ok(),
        );
        assert!(
            answer.trim() == "ok",
            "the MiniDFSCluster could not {command}: {}; see {}",
            answer.trim(),
            self.dir.join("log").display()
        );
    }
}

impl Deref for PrivateDfs {
    type Target = MiniDfs;
    fn deref(&self) -> &MiniDfs {
        &self.dfs
    }
}

impl Drop for PrivateDfs {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn script() -> PathBuf {
    repo_root().join("scripts/yarn-minicluster.sh")
}

/// Starts a cluster in `dir` that stops when this test binary ends.
fn start(dir: PathBuf) -> MiniDfs {
    crate::remove_stale_dirs(DIR_PREFIX, "pid");
    let built = Command::new(script())
        .arg("build")
        .status()
        .expect("build launcher");
    assert!(built.success(), "building the mini cluster launcher failed");
    let me = std::process::id();
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
