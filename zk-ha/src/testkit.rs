//! Real ZooKeeper servers for tests (feature `testkit`): a single node or an ensemble on loopback
//! ports, in temporary directories, killed on drop, and a TCP [`Proxy`] that injects network
//! faults. Needs Debian's `zookeeper` package (`scripts/zookeeper.sh install`) and a JRE.
//!
//! Test support: failures to start a server panic with a message saying what is missing.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server jar of Debian's `zookeeper` package.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// The logging backend the server logs through (Debian's `libslf4j-java`).
pub const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";

/// Server tick: sessions may last 2 to `maxSessionTimeout` (set below) of these.
pub const TICK_MS: u64 = 200;

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// Sends a four-letter word and returns the answer ("" if the server does not answer).
pub fn four_letter(port: u16, word: &str) -> String {
    let Ok(mut s) = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(500),
    ) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(1000)));
    if s.write_all(word.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The `Mode:` line of `srvr` (standalone, leader, follower), if the server serves.
pub fn mode(port: u16) -> Option<String> {
    four_letter(port, "srvr")
        .lines()
        .find_map(|l| l.strip_prefix("Mode: ").map(|m| m.trim().to_owned()))
}

fn check_installed() {
    for jar in [ZOOKEEPER_JAR, SLF4J_SIMPLE_JAR] {
        assert!(
            Path::new(jar).exists(),
            "{jar} is missing: install ZooKeeper with `scripts/zookeeper.sh install` (Debian package zookeeper)"
        );
    }
}

/// One ZooKeeper server process (standalone, or one member of an ensemble).
#[derive(Debug)]
pub struct ZkProcess {
    dir: PathBuf,
    main_class: &'static str,
    client_port: u16,
    child: Option<Child>,
}

impl ZkProcess {
    fn spawn(&mut self) {
        check_installed();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("open server log");
        let child = Command::new("java")
            .args([
                "-Xmx128m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Dzookeeper.jmx.log4j.disable=true",
            ])
            .arg("-cp")
            .arg(format!("{ZOOKEEPER_JAR}:{SLF4J_SIMPLE_JAR}"))
            .arg(self.main_class)
            .arg(self.dir.join("zoo.cfg"))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log"))
            .stderr(log)
            .spawn()
            .expect("start java (is a JRE installed?)");
        self.child = Some(child);
    }

    /// Kills the server at once (SIGKILL), like a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data directory.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Whether this handle started the process and has not killed it.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The loopback port clients connect to.
    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    /// Waits until `srvr` reports a mode.
    pub fn wait_serving(&self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = mode(self.client_port) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "ZooKeeper on port {} did not serve within {timeout:?}; log in {}",
                self.client_port,
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ZkProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn base_config(data_dir: &Path, client_port: u16) -> String {
    format!(
        "tickTime={TICK_MS}\n\
         dataDir={}\n\
         clientPort={client_port}\n\
         clientPortAddress=127.0.0.1\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=ruok,srvr,stat,mntr\n\
         maxSessionTimeout=30000\n\
         initLimit=20\n\
         syncLimit=10\n",
        data_dir.display()
    )
}

/// A standalone server (ZooKeeperServerMain).
#[derive(Debug)]
pub struct ZkServer {
    /// The server process.
    pub process: ZkProcess,
    _dir: tempfile::TempDir,
}

impl ZkServer {
    /// Starts a server and waits until it serves.
    pub fn start() -> ZkServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        let port = free_port();
        std::fs::write(dir.path().join("zoo.cfg"), base_config(&data, port))
            .expect("write zoo.cfg");
        let mut process = ZkProcess {
            dir: dir.path().to_owned(),
            main_class: "org.apache.zookeeper.server.ZooKeeperServerMain",
            client_port: port,
            child: None,
        };
        process.spawn();
        assert_eq!(process.wait_serving(Duration::from_secs(30)), "standalone");
        ZkServer { process, _dir: dir }
    }

    /// `127.0.0.1:<port>`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.process.client_port)
    }

    /// Kills the server and starts it again on the same data, waiting until it serves.
    pub fn restart(&mut self) {
        self.process.restart();
        self.process.wait_serving(Duration::from_secs(30));
    }
}

/// An ensemble (QuorumPeerMain per member) on loopback.
#[derive(Debug)]
pub struct ZkEnsemble {
    /// The members, `server.1` first.
    pub members: Vec<ZkProcess>,
    _dir: tempfile::TempDir,
}

impl ZkEnsemble {
    /// Starts `size` members and waits until each serves.
    pub fn start(size: usize) -> ZkEnsemble {
        let dir = tempfile::tempdir().expect("temp dir");
        let ports: Vec<(u16, u16, u16)> = (0..size)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let servers: String = ports
            .iter()
            .enumerate()
            .map(|(i, (_, quorum, election))| {
                format!("server.{}=127.0.0.1:{quorum}:{election}\n", i + 1)
            })
            .collect();
        let mut members = Vec::new();
        for (i, (client, _, _)) in ports.iter().enumerate() {
            let member_dir = dir.path().join(format!("zk{}", i + 1));
            let data = member_dir.join("data");
            std::fs::create_dir_all(&data).expect("data dir");
            std::fs::write(data.join("myid"), format!("{}\n", i + 1)).expect("myid");
            std::fs::write(
                member_dir.join("zoo.cfg"),
                format!("{}{servers}", base_config(&data, *client)),
            )
            .expect("zoo.cfg");
            let mut process = ZkProcess {
                dir: member_dir,
                main_class: "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                client_port: *client,
                child: None,
            };
            process.spawn();
            members.push(process);
        }
        let ensemble = ZkEnsemble { members, _dir: dir };
        for m in &ensemble.members {
            m.wait_serving(Duration::from_secs(60));
        }
        ensemble
    }

    /// All members' client addresses, comma-separated.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Index of the member whose `srvr` says `leader`.
    pub fn leader(&self) -> Option<usize> {
        self.members
            .iter()
            .position(|m| m.is_running() && mode(m.client_port).as_deref() == Some("leader"))
    }

    /// Waits until some member leads.
    pub fn wait_leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.leader() {
                return i;
            }
            assert!(
                Instant::now() < deadline,
                "no ensemble leader within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A TCP proxy in front of a ZooKeeper server that can fail like a network: freeze (both
/// directions silently dropped, sockets kept open: a partition, or a frozen process), stall
/// (nothing forwarded until thawed, nothing lost: a ZooKeeper that answers late), or let one
/// request through and then drop every reply on that connection (an ambiguous commit).
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    mode: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

const FORWARD: usize = 0;
const FROZEN: usize = 1;
const STALLED: usize = 2;
// Values above STALLED arm the reply drop: the value is the request-size threshold + 3.

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream_port`.
    pub async fn start(upstream_port: u16) -> Proxy {
        use std::sync::Arc;
        use std::sync::atomic::AtomicUsize;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let mode = Arc::new(AtomicUsize::new(FORWARD));
        let m = mode.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream_port)).await
                else {
                    continue;
                };
                tokio::spawn(Self::serve(client, server, m.clone()));
            }
        });
        Proxy { port, mode, task }
    }

    async fn serve(
        client: tokio::net::TcpStream,
        server: tokio::net::TcpStream,
        mode: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use std::sync::atomic::{AtomicBool, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let muted = std::sync::Arc::new(AtomicBool::new(false));
        let (mut cr, mut cw) = client.into_split();
        let (mut sr, mut sw) = server.into_split();
        let up = {
            let mode = mode.clone();
            let muted = muted.clone();
            async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = match cr.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    while mode.load(Ordering::SeqCst) == STALLED {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                    match mode.load(Ordering::SeqCst) {
                        FROZEN => continue,
                        FORWARD => {}
                        armed => {
                            if n > armed - 3
                                && mode
                                    .compare_exchange(
                                        armed,
                                        FORWARD,
                                        Ordering::SeqCst,
                                        Ordering::SeqCst,
                                    )
                                    .is_ok()
                            {
                                muted.store(true, Ordering::SeqCst);
                            }
                        }
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        };
        let down = async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match sr.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                while mode.load(Ordering::SeqCst) == STALLED {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                if mode.load(Ordering::SeqCst) == FROZEN || muted.load(Ordering::SeqCst) {
                    continue;
                }
                if cw.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        };
        // When either side ends, drop both connections.
        tokio::select! {
            _ = up => {}
            _ = down => {}
        }
    }

    /// `127.0.0.1:<proxy port>`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Drops all traffic both ways, keeping connections open.
    pub fn freeze(&self) {
        self.mode.store(FROZEN, std::sync::atomic::Ordering::SeqCst);
    }

    /// Holds all traffic both ways until [`thaw`](Self::thaw), losing none: requests and
    /// replies arrive late, in order.
    pub fn stall(&self) {
        self.mode
            .store(STALLED, std::sync::atomic::Ordering::SeqCst);
    }

    /// Back to forwarding.
    pub fn thaw(&self) {
        self.mode
            .store(FORWARD, std::sync::atomic::Ordering::SeqCst);
    }

    /// Forwards the next client request larger than `bytes`, then drops every reply on its
    /// connection (so the client cannot learn whether it was applied).
    pub fn drop_replies_after_request_larger_than(&self, bytes: usize) {
        self.mode
            .store(bytes + 3, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
