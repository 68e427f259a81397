//! Reading a cluster's `yarn-site.xml` (Hadoop's `<configuration><property>` format), so a
//! client finds the ResourceManager the way Hadoop's own tools do.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{ConfigError, DecodeError};

/// Environment variable naming the directory that holds `yarn-site.xml`.
pub const HADOOP_CONF_DIR_ENV: &str = "HADOOP_CONF_DIR";

/// The properties of a Hadoop configuration file, with `${key}` references expanded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct YarnSite {
    props: BTreeMap<String, String>,
}

impl YarnSite {
    /// Reads `$HADOOP_CONF_DIR/yarn-site.xml`; `Ok(None)` when the variable is unset.
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        match std::env::var_os(HADOOP_CONF_DIR_ENV) {
            Some(dir) => Self::load(&Path::new(&dir).join("yarn-site.xml")).map(Some),
            None => Ok(None),
        }
    }

    /// Reads and parses one configuration file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|source| ConfigError::Malformed {
            path: path.display().to_string(),
            source,
        })
    }

    /// Parses the text of a configuration file. Later definitions of a key win, as in Hadoop.
    pub fn parse(xml: &str) -> Result<Self, DecodeError> {
        let mut props = BTreeMap::new();
        let mut rest = xml;
        while let Some(start) = rest.find("<property>") {
            let after = &rest[start + "<property>".len()..];
            let end = after
                .find("</property>")
                .ok_or_else(|| DecodeError::new("unterminated <property>"))?;
            let body = &after[..end];
            if let Some(name) = element(body, "name") {
                let value = element(body, "value").unwrap_or_default();
                props.insert(unescape(name.trim()), unescape(value.trim()));
            }
            rest = &after[end..];
        }
        let mut site = YarnSite { props };
        site.expand();
        Ok(site)
    }

    /// A property's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.props.get(key).map(String::as_str)
    }

    /// The scheduler (ApplicationMasterProtocol) address:
    /// `yarn.resourcemanager.scheduler.address`, else `<yarn.resourcemanager.hostname>:8030`.
    pub fn scheduler_address(&self) -> String {
        self.address("yarn.resourcemanager.scheduler.address", 8030)
    }

    /// The ResourceManager web (REST) address: `yarn.resourcemanager.webapp.address`, else
    /// `<yarn.resourcemanager.hostname>:8088`.
    pub fn webapp_address(&self) -> String {
        self.address("yarn.resourcemanager.webapp.address", 8088)
    }

    fn address(&self, key: &str, default_port: u16) -> String {
        match self.get(key) {
            Some(a) if !a.is_empty() => a.to_string(),
            _ => format!(
                "{}:{default_port}",
                self.get("yarn.resourcemanager.hostname")
                    .unwrap_or("0.0.0.0")
            ),
        }
    }

    /// Replaces `${key}` with the key's value, a few rounds deep (Hadoop allows nesting and
    /// stops at 20; unresolvable references stay as they are).
    fn expand(&mut self) {
        for _ in 0..20 {
            let mut changed = false;
            let snapshot = self.props.clone();
            for value in self.props.values_mut() {
                let mut out = String::new();
                let mut rest = value.as_str();
                while let Some(i) = rest.find("${") {
                    let Some(j) = rest[i..].find('}') else { break };
                    let key = &rest[i + 2..i + j];
                    out.push_str(&rest[..i]);
                    match snapshot.get(key) {
                        Some(v) => {
                            out.push_str(v);
                            changed = true;
                        }
                        None => out.push_str(&rest[i..=i + j]),
                    }
                    rest = &rest[i + j + 1..];
                }
                out.push_str(rest);
                *value = out;
            }
            if !changed {
                return;
            }
        }
    }
}

fn element<'a>(body: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = body.find(&open)? + open.len();
    let end = body[start..].find(&close)? + start;
    Some(&body[start..end])
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_expands() {
        let site = YarnSite::parse(
            r#"<?xml version="1.0"?><configuration>
            <property><name>yarn.resourcemanager.hostname</name><value>rm1</value></property>
            <property>
              <name>yarn.resourcemanager.scheduler.address</name>
              <value>${yarn.resourcemanager.hostname}:9030</value>
            </property>
            <property><name>q</name><value>a&amp;b ${missing}</value><final>true</final></property>
            </configuration>"#,
        )
        .expect("valid");
        assert_eq!(site.scheduler_address(), "rm1:9030");
        assert_eq!(site.webapp_address(), "rm1:8088");
        assert_eq!(site.get("q"), Some("a&b ${missing}"));
        assert!(YarnSite::parse("<property><name>x</name>").is_err());
    }

    #[test]
    fn self_reference_terminates() {
        let site = YarnSite::parse("<property><name>a</name><value>${a}x</value></property>")
            .expect("valid");
        assert!(site.get("a").is_some_and(|v| v.ends_with('x')));
    }
}
