//! The Hadoop client configuration, read as Hadoop tools read it: `core-site.xml` then
//! `hdfs-site.xml` (its values win) from `HADOOP_CONF_DIR`, else from `$HADOOP_HOME/etc/hadoop`.
//! And how an `hdfs:` URI's authority resolves against it: an empty one (`hdfs:///path`) is
//! `fs.defaultFS`'s, a logical name service lists its NameNodes in `dfs.ha.namenodes.<ns>` and
//! `dfs.namenode.rpc-address.<ns>.<id>`, anything else is a NameNode `host[:port]`.
//!
//! Pure: the files' text goes in, settings and decisions come out; only [`HadoopConf::from_env`]
//! and [`HadoopConf::load`] touch the file system.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::HdfsUri;

/// `fs.defaultFS`: the file system of paths without an authority.
const DEFAULT_FS: &str = "fs.defaultFS";
/// The NameNode RPC port when a URI names a host without one (Hadoop's default).
const DEFAULT_NAMENODE_PORT: u16 = 8020;
/// The site files, lowest precedence first.
const SITE_FILES: [&str; 2] = ["core-site.xml", "hdfs-site.xml"];
/// How often Hadoop's client tries to connect to a NameNode that refuses before the call fails,
/// and Hadoop's default.
const CONNECT_MAX_RETRIES: (&str, u64) = ("ipc.client.connect.max.retries", 10);
/// The milliseconds between those tries, and Hadoop's default.
const CONNECT_RETRY_INTERVAL: (&str, u64) = ("ipc.client.connect.retry.interval", 1000);
/// How often a NameNode call that could not reach a NameNode tries (the next) one again.
const FAILOVER_MAX_ATTEMPTS: &str = "dfs.client.failover.max.attempts";
/// The first pause between those tries, in ms; it doubles up to the next setting.
const FAILOVER_SLEEP_BASE: &str = "dfs.client.failover.sleep.base.millis";
/// The longest pause between those tries, in ms.
const FAILOVER_SLEEP_MAX: &str = "dfs.client.failover.sleep.max.millis";

/// Hadoop settings (name to value) and where they were read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HadoopConf {
    settings: BTreeMap<String, String>,
    /// The directory the site files came from; `None` when no configuration directory is set.
    source: Option<PathBuf>,
}

/// Where an `hdfs:` URI's file system is: the cluster URI a client connects to
/// (`hdfs://host:port` or `hdfs://nameservice`) and the NameNode RPC addresses behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HdfsCluster {
    /// `hdfs://authority`, the authority resolved (never empty).
    pub uri: String,
    /// `host:port` of each NameNode, in configured order.
    pub namenodes: Vec<String>,
}

impl HadoopConf {
    /// The configuration of `HADOOP_CONF_DIR`, else of `$HADOOP_HOME/etc/hadoop`, else none.
    pub fn from_env() -> Result<HadoopConf, String> {
        // An empty variable is an unset one, as for Hadoop's own scripts.
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let dir = var("HADOOP_CONF_DIR")
            .map(PathBuf::from)
            .or_else(|| var("HADOOP_HOME").map(|h| PathBuf::from(h).join("etc/hadoop")));
        match dir {
            Some(dir) => Self::load(&dir),
            None => Ok(HadoopConf::default()),
        }
    }

    /// Reads the site files of `dir`; a missing file is no error (Hadoop's defaults apply), a
    /// malformed one is, naming the file.
    pub fn load(dir: &Path) -> Result<HadoopConf, String> {
        let mut conf = HadoopConf {
            settings: BTreeMap::new(),
            source: Some(dir.to_path_buf()),
        };
        for name in SITE_FILES {
            let path = dir.join(name);
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
            };
            conf.add_site(&text)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(conf)
    }

    /// Adds the properties of one site file's text; later values replace earlier ones.
    pub fn add_site(&mut self, xml: &str) -> Result<(), String> {
        for (name, value) in parse_site(xml)? {
            self.settings.insert(name, value);
        }
        Ok(())
    }

    /// A setting's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings.get(key).map(String::as_str)
    }

    /// The settings a client of `cluster` is built with: all of these, and for a cluster of one
    /// NameNode how long a call keeps trying to reach it.
    ///
    /// `hdfs-native` retries a NameNode it cannot reach through its failover loop, also when
    /// there is only one NameNode: `dfs.client.failover.max.attempts` tries (15 by default)
    /// with pauses from `dfs.client.failover.sleep.base.millis` doubling to
    /// `dfs.client.failover.sleep.max.millis` (1 s to 15 s), about three minutes in all. Hadoop's
    /// own client fails over only between the NameNodes of a name service; a single NameNode
    /// that refuses is tried `ipc.client.connect.max.retries` times (10),
    /// `ipc.client.connect.retry.interval` apart (1 s), and the call fails after ≈ 10 s. So for
    /// one NameNode the failover settings not set explicitly are taken from those two, and a
    /// NameNode that is down fails a checkpoint's writes within seconds instead of minutes.
    /// For a name service of several NameNodes the failover settings apply as they are.
    pub fn client_settings(&self, cluster: &HdfsCluster) -> Vec<(String, String)> {
        let mut settings = self.settings.clone();
        if cluster.namenodes.len() == 1 {
            let number = |(key, default): (&str, u64)| {
                self.get(key)
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(default)
            };
            // Tries after the first, as hdfs-native counts them too.
            let retries = number(CONNECT_MAX_RETRIES);
            let interval = number(CONNECT_RETRY_INTERVAL);
            for (key, value) in [
                (FAILOVER_MAX_ATTEMPTS, retries),
                (FAILOVER_SLEEP_BASE, interval),
                (FAILOVER_SLEEP_MAX, interval),
            ] {
                settings
                    .entry(key.to_string())
                    .or_insert_with(|| value.to_string());
            }
        }
        settings.into_iter().collect()
    }

    /// Where the settings came from, for messages.
    fn origin(&self) -> String {
        match &self.source {
            Some(dir) => format!("the Hadoop configuration in {}", dir.display()),
            None => "the Hadoop configuration (neither HADOOP_CONF_DIR nor HADOOP_HOME is set)"
                .to_string(),
        }
    }

    /// The cluster `uri` (an `hdfs:` URI written as `raw`) lives on, or why it cannot be
    /// reached: no `fs.defaultFS` for `hdfs:///path`, a default file system that is not HDFS, or
    /// a name service whose NameNodes are not configured. Errors name `raw` and the setting.
    pub fn resolve(&self, raw: &str, uri: &HdfsUri) -> Result<HdfsCluster, String> {
        let authority = if uri.authority.is_empty() {
            self.default_authority(raw)?
        } else {
            uri.authority.clone()
        };
        let declared = self
            .get("dfs.nameservices")
            .is_some_and(|list| list.split(',').any(|ns| ns.trim() == authority));
        let namenode_ids = self.get(&format!("dfs.ha.namenodes.{authority}"));
        if declared || namenode_ids.is_some() {
            let ids = namenode_ids.ok_or_else(|| {
                format!(
                    "'{raw}' names the name service '{authority}', but dfs.ha.namenodes.{authority} is not set in {}",
                    self.origin()
                )
            })?;
            let mut namenodes = Vec::new();
            for id in ids.split(',').map(str::trim).filter(|id| !id.is_empty()) {
                let key = format!("dfs.namenode.rpc-address.{authority}.{id}");
                let address = self.get(&key).ok_or_else(|| {
                    format!(
                        "'{raw}' names the name service '{authority}', but {key} is not set in {}",
                        self.origin()
                    )
                })?;
                namenodes.push(address.trim().to_string());
            }
            if namenodes.is_empty() {
                return Err(format!(
                    "'{raw}' names the name service '{authority}', whose dfs.ha.namenodes.{authority} lists no NameNode"
                ));
            }
            return Ok(HdfsCluster {
                uri: format!("hdfs://{authority}"),
                namenodes,
            });
        }
        let namenode = if authority.contains(':') {
            authority.clone()
        } else {
            format!("{authority}:{DEFAULT_NAMENODE_PORT}")
        };
        Ok(HdfsCluster {
            uri: format!("hdfs://{authority}"),
            namenodes: vec![namenode],
        })
    }

    /// `hdfs://authority` of `fs.defaultFS` if that names an HDFS cluster.
    pub fn default_hdfs(&self) -> Option<String> {
        match HdfsUri::parse(self.get(DEFAULT_FS)?) {
            Some(Ok(uri)) if !uri.authority.is_empty() => Some(format!("hdfs://{}", uri.authority)),
            _ => None,
        }
    }

    /// The authority of `fs.defaultFS`, which must be an `hdfs://` URI with one.
    fn default_authority(&self, raw: &str) -> Result<String, String> {
        let default = self.get(DEFAULT_FS).ok_or_else(|| {
            format!(
                "'{raw}' names no NameNode and {DEFAULT_FS} is not set in {}: write hdfs://namenode:port/path or set {DEFAULT_FS}",
                self.origin()
            )
        })?;
        match HdfsUri::parse(default) {
            Some(Ok(d)) if !d.authority.is_empty() => Ok(d.authority),
            _ => Err(format!(
                "'{raw}' names no NameNode and {DEFAULT_FS} in {} is '{default}', not an hdfs://authority URI",
                self.origin()
            )),
        }
    }
}

/// The `(name, value)` properties of a Hadoop site file, in order. A property without a name is
/// skipped, as Hadoop does; a value may be empty.
fn parse_site(xml: &str) -> Result<Vec<(String, String)>, String> {
    let doc =
        roxmltree::Document::parse(xml).map_err(|e| format!("not a Hadoop site file: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "configuration" {
        return Err(format!(
            "not a Hadoop site file: the root element is <{}>, not <configuration>",
            root.tag_name().name()
        ));
    }
    let text = |property: roxmltree::Node<'_, '_>, tag: &str| {
        property
            .children()
            .find(|n| n.tag_name().name() == tag)
            .map(|n| n.text().unwrap_or("").trim().to_string())
    };
    Ok(root
        .children()
        .filter(|n| n.tag_name().name() == "property")
        .filter_map(|p| {
            let name = text(p, "name").filter(|n| !n.is_empty())?;
            Some((name, text(p, "value").unwrap_or_default()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(props: &[(&str, &str)]) -> String {
        let body: String = props
            .iter()
            .map(|(n, v)| {
                format!(
                    "<property><name>{n}</name><value>{v}</value><final>true</final></property>"
                )
            })
            .collect();
        format!(
            "<?xml version=\"1.0\"?>\n<!-- a comment -->\n<configuration>{body}</configuration>"
        )
    }

    fn uri(raw: &str) -> HdfsUri {
        HdfsUri::parse(raw).unwrap().unwrap()
    }

    fn ha_conf() -> HadoopConf {
        let mut conf = HadoopConf::default();
        conf.add_site(&site(&[("fs.defaultFS", "hdfs://prod")]))
            .unwrap();
        conf.add_site(&site(&[
            ("dfs.nameservices", "prod, other"),
            ("dfs.ha.namenodes.prod", "nn1,nn2"),
            ("dfs.namenode.rpc-address.prod.nn1", "nn-a.example:8020"),
            ("dfs.namenode.rpc-address.prod.nn2", " nn-b.example:8020 "),
        ]))
        .unwrap();
        conf
    }

    #[test]
    fn site_files_yield_their_properties_and_later_files_win() {
        let mut conf = HadoopConf::default();
        conf.add_site(&site(&[("fs.defaultFS", "hdfs://a:1"), ("x", "core")]))
            .unwrap();
        conf.add_site(&site(&[("x", "hdfs"), ("empty", "")]))
            .unwrap();
        assert_eq!(conf.get("fs.defaultFS"), Some("hdfs://a:1"));
        assert_eq!(conf.get("x"), Some("hdfs"));
        assert_eq!(conf.get("empty"), Some(""));
        let pairs = parse_site(
            "<configuration><property><value>no name</value></property>\
             <property><name> k </name><value>\n  v\n</value><description>d</description></property></configuration>",
        )
        .unwrap();
        assert_eq!(pairs, vec![("k".to_string(), "v".to_string())]);
        let e = parse_site("<configuration><property>").unwrap_err();
        assert!(e.contains("not a Hadoop site file"), "{e}");
        let e = parse_site("<properties/>").unwrap_err();
        assert!(e.contains("<properties>"), "{e}");
    }

    #[test]
    fn conf_dirs_are_read_with_hdfs_site_last_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let conf = HadoopConf::load(dir.path()).unwrap();
        assert_eq!(conf.get("fs.defaultFS"), None, "missing files are no error");
        std::fs::write(
            dir.path().join("core-site.xml"),
            site(&[("fs.defaultFS", "hdfs://nn:9000"), ("k", "core")]),
        )
        .unwrap();
        std::fs::write(dir.path().join("hdfs-site.xml"), site(&[("k", "hdfs")])).unwrap();
        let conf = HadoopConf::load(dir.path()).unwrap();
        assert_eq!(conf.get("k"), Some("hdfs"));
        let cluster = conf.resolve("hdfs:///chk", &uri("hdfs:///chk")).unwrap();
        assert_eq!(cluster.uri, "hdfs://nn:9000");
        std::fs::write(dir.path().join("hdfs-site.xml"), "<configuration>").unwrap();
        let e = HadoopConf::load(dir.path()).unwrap_err();
        assert!(e.contains("hdfs-site.xml"), "{e}");
    }

    #[test]
    fn authorities_resolve_to_namenodes_name_services_or_the_default_fs() {
        let conf = ha_conf();
        let prod = HdfsCluster {
            uri: "hdfs://prod".into(),
            namenodes: vec!["nn-a.example:8020".into(), "nn-b.example:8020".into()],
        };
        assert_eq!(conf.resolve("hdfs:///x", &uri("hdfs:///x")).unwrap(), prod);
        assert_eq!(
            conf.resolve("hdfs://prod/x", &uri("hdfs://prod/x"))
                .unwrap(),
            prod
        );
        let direct = conf
            .resolve("hdfs://nn:9000/x", &uri("hdfs://nn:9000/x"))
            .unwrap();
        assert_eq!(direct.uri, "hdfs://nn:9000");
        assert_eq!(direct.namenodes, vec!["nn:9000"]);
        let default_port = conf.resolve("hdfs://nn/x", &uri("hdfs://nn/x")).unwrap();
        assert_eq!(default_port.namenodes, vec!["nn:8020"]);
    }

    #[test]
    fn one_namenode_is_retried_as_hadoop_retries_connections_and_a_name_service_fails_over() {
        let get = |settings: &[(String, String)], key: &str| {
            settings
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let conf = ha_conf();
        let single = conf
            .resolve("hdfs://nn:9000/x", &uri("hdfs://nn:9000/x"))
            .unwrap();
        let settings = conf.client_settings(&single);
        assert_eq!(get(&settings, FAILOVER_MAX_ATTEMPTS).as_deref(), Some("10"));
        assert_eq!(get(&settings, FAILOVER_SLEEP_BASE).as_deref(), Some("1000"));
        assert_eq!(get(&settings, FAILOVER_SLEEP_MAX).as_deref(), Some("1000"));
        assert_eq!(
            get(&settings, "dfs.nameservices").as_deref(),
            Some("prod, other")
        );
        let prod = conf.resolve("hdfs:///x", &uri("hdfs:///x")).unwrap();
        let settings = conf.client_settings(&prod);
        assert_eq!(get(&settings, FAILOVER_MAX_ATTEMPTS), None);

        let mut tuned = ha_conf();
        tuned
            .add_site(&site(&[
                ("ipc.client.connect.max.retries", "3"),
                ("ipc.client.connect.retry.interval", "200"),
                ("dfs.client.failover.sleep.max.millis", "700"),
            ]))
            .unwrap();
        let settings = tuned.client_settings(&single);
        assert_eq!(get(&settings, FAILOVER_MAX_ATTEMPTS).as_deref(), Some("3"));
        assert_eq!(get(&settings, FAILOVER_SLEEP_BASE).as_deref(), Some("200"));
        assert_eq!(
            get(&settings, FAILOVER_SLEEP_MAX).as_deref(),
            Some("700"),
            "an explicit setting wins"
        );
    }

    #[test]
    fn unresolvable_uris_name_the_uri_and_the_missing_setting() {
        let none = HadoopConf::default();
        let e = none
            .resolve("hdfs:///chk", &uri("hdfs:///chk"))
            .unwrap_err();
        assert!(
            e.contains("'hdfs:///chk'") && e.contains("fs.defaultFS is not set"),
            "{e}"
        );
        assert!(e.contains("HADOOP_CONF_DIR"), "{e}");
        let mut local = HadoopConf::default();
        local
            .add_site(&site(&[("fs.defaultFS", "file:///")]))
            .unwrap();
        let e = local
            .resolve("hdfs:///chk", &uri("hdfs:///chk"))
            .unwrap_err();
        assert!(e.contains("'file:///'"), "{e}");
        let e = ha_conf()
            .resolve("hdfs://other/x", &uri("hdfs://other/x"))
            .unwrap_err();
        assert!(
            e.contains("'hdfs://other/x'") && e.contains("dfs.ha.namenodes.other"),
            "{e}"
        );
        let mut half = ha_conf();
        half.add_site(&site(&[
            ("dfs.ha.namenodes.other", "a,b"),
            ("dfs.namenode.rpc-address.other.a", "h:1"),
        ]))
        .unwrap();
        let e = half
            .resolve("hdfs://other/x", &uri("hdfs://other/x"))
            .unwrap_err();
        assert!(e.contains("dfs.namenode.rpc-address.other.b"), "{e}");
    }
}
