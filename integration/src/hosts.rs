//! Many hosts on one machine: each "host" is a Linux network namespace with its own address on a
//! shared bridge, so the processes of a cluster reach each other only over that bridge, by the
//! addresses their configuration names, and a test can cut the network between two hosts.
//!
//! Everything lives in 10.77.0.0/24 inside namespaces and links this module creates (named
//! `sluice-host-*` and [`BRIDGE`]); the bridge has [`GATEWAY`] in the test's own namespace so
//! the test reaches the REST API. A [`Network`] removes all of it when dropped (a failing test
//! too), and removes the leftovers of a crashed run before it builds its own, so only one
//! network exists on a machine at a time (the tests that use it hold [`Network::lock`]).
//!
//! A partition ([`Network::partition`]) is a pair of blackhole routes, one in each of the two
//! namespaces: what either sends to the other is dropped by its own kernel, silently for the
//! peer, which sees a connection that just goes quiet. The hosts share the file system (a
//! checkpoint directory, the log directory); only their network is split. Needs root and
//! iproute2 (`scripts/install-deps.sh`).

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// The bridge every host's veth is attached to.
pub const BRIDGE: &str = "sluicehostbr";
/// The test process's own address on the bridge.
pub const GATEWAY: &str = "10.77.0.254";
/// The prefix of the namespaces this module creates.
const NS_PREFIX: &str = "sluice-host-";
/// The prefix of the root-namespace ends of the hosts' veth pairs.
const VETH_PREFIX: &str = "slhost";

/// One host: a network namespace and its address on the bridge.
#[derive(Clone, Debug)]
pub struct Host {
    /// A short name (`jm`, `tm1`, ...): the namespace is `sluice-host-<name>`.
    pub name: String,
    /// Its address on the bridge.
    pub address: String,
}

impl Host {
    /// The network namespace's name.
    pub fn namespace(&self) -> String {
        format!("{NS_PREFIX}{}", self.name)
    }

    /// A command that runs `program` inside this host's namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.namespace()]).arg(program);
        c
    }
}

/// The hosts of one test and the bridge between them; torn down on drop.
pub struct Network {
    hosts: Vec<Host>,
    _lock: MutexGuard<'static, ()>,
}

/// Runs `ip ARGS` (in `netns` when given); panics with its stderr when it fails.
fn ip(netns: Option<&str>, args: &[&str]) {
    let out = ip_output(netns, args);
    assert!(
        out.status.success(),
        "ip {}{} failed: {}",
        netns.map(|n| format!("-n {n} ")).unwrap_or_default(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ip_output(netns: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut c = Command::new("ip");
    if let Some(n) = netns {
        c.args(["-n", n]);
    }
    c.args(args)
        .output()
        .expect("run ip (iproute2, scripts/install-deps.sh installs it)")
}

/// Removes every namespace and link this module may have created (a previous run's too). The
/// veth pairs go first, through their ends in this namespace (deleting a namespace would delete
/// them too, but asynchronously: a new network could then find the old names still taken).
fn remove_all() {
    let links = ip_output(None, &["-o", "link", "show"]);
    for line in String::from_utf8_lossy(&links.stdout).lines() {
        // "7: slhost3@if2: <...>": the name ends at '@' or ':'.
        let name = line
            .split(": ")
            .nth(1)
            .and_then(|n| n.split('@').next())
            .unwrap_or_default();
        if name.starts_with(VETH_PREFIX) {
            let _ = ip_output(None, &["link", "delete", name]);
        }
    }
    let list = ip_output(None, &["netns", "list"]);
    for line in String::from_utf8_lossy(&list.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if name.starts_with(NS_PREFIX) {
            let _ = ip_output(None, &["netns", "delete", name]);
        }
    }
    let _ = ip_output(None, &["link", "delete", BRIDGE]);
}

/// Only one network at a time in this process: they share the bridge and the address range.
static LOCK: Mutex<()> = Mutex::new(());

impl Network {
    /// Builds the bridge and one host per name, addressed 10.77.0.1, .2, ... in order.
    pub fn new(names: &[&str]) -> Network {
        let lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        assert!(names.len() < 250, "at most 249 hosts");
        remove_all();
        let mut network = Network {
            hosts: Vec::new(),
            _lock: lock,
        };
        ip(None, &["link", "add", BRIDGE, "type", "bridge"]);
        ip(
            None,
            &["addr", "add", &format!("{GATEWAY}/24"), "dev", BRIDGE],
        );
        ip(None, &["link", "set", BRIDGE, "up"]);
        for (i, name) in names.iter().enumerate() {
            let host = Host {
                name: name.to_string(),
                address: format!("10.77.0.{}", i + 1),
            };
            let ns = host.namespace();
            let veth = format!("{VETH_PREFIX}{}", i + 1);
            ip(None, &["netns", "add", &ns]);
            // From here on drop removes it, whatever fails next.
            network.hosts.push(host.clone());
            ip(Some(ns.as_str()), &["link", "set", "lo", "up"]);
            ip(
                None,
                &[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ],
            );
            ip(None, &["link", "set", &veth, "master", BRIDGE]);
            ip(None, &["link", "set", &veth, "up"]);
            ip(
                Some(ns.as_str()),
                &[
                    "addr",
                    "add",
                    &format!("{}/24", host.address),
                    "dev",
                    "eth0",
                ],
            );
            ip(Some(ns.as_str()), &["link", "set", "eth0", "up"]);
        }
        network
    }

    /// The host of this name.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// The host with this address.
    pub fn host_of_address(&self, address: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.address == address)
    }

    /// Cuts `a` and `b` apart: packets either sends to the other are dropped (both directions,
    /// silently: no reset, no ICMP). Their other links stay as they were.
    pub fn partition(&self, a: &str, b: &str) {
        let (a, b) = (self.host(a), self.host(b));
        ip(
            Some(a.namespace().as_str()),
            &["route", "add", "blackhole", &format!("{}/32", b.address)],
        );
        ip(
            Some(b.namespace().as_str()),
            &["route", "add", "blackhole", &format!("{}/32", a.address)],
        );
    }

    /// Heals a [`partition`](Self::partition) of `a` and `b`.
    pub fn heal(&self, a: &str, b: &str) {
        let (a, b) = (self.host(a), self.host(b));
        ip(
            Some(a.namespace().as_str()),
            &["route", "del", "blackhole", &format!("{}/32", b.address)],
        );
        ip(
            Some(b.namespace().as_str()),
            &["route", "del", "blackhole", &format!("{}/32", a.address)],
        );
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        remove_all();
    }
}
