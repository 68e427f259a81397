//! Job artifacts: a user's job, built as an executable that links sluice and registers its
//! programs (`sluice::job_main`). The JobManager asks an artifact what it holds (`describe`) and
//! for a program's job graph (`plan`); TaskManagers run its subtasks in a worker process started
//! from it. What those answers look like, how an artifact is named (by its content), and which
//! artifacts a cluster accepts are defined here, on both sides of the exchange.

use serde::{Deserialize, Serialize};

/// The artifact's hidden command that prints its [`ArtifactDescription`] as JSON.
pub const DESCRIBE: &str = "sluice-describe";
/// The artifact's hidden command that prints a program's job graph as JSON
/// (`crate::graph::PlanAnswer`).
pub const PLAN: &str = "sluice-plan";
/// The artifact's hidden command that runs it as a TaskManager's worker for one job.
pub const WORKER: &str = "sluice-worker";
/// The environment variable naming the worker's parent TaskManager (its control address).
pub const WORKER_PARENT_ENV: &str = "SLUICE_WORKER_PARENT";

/// One program an artifact holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramInfo {
    /// The name it is run by.
    pub name: String,
    /// One line on what it does.
    pub description: String,
    /// Its arguments.
    pub usage: String,
}

/// What an artifact says of itself: the sluice it was built with and its programs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactDescription {
    /// The sluice library's version it links.
    pub sluice_version: String,
    /// Its control protocol (TaskManager ⇄ JobManager) version.
    pub protocol_version: u32,
    /// Its data plane's protocol (QUIC ALPN) name.
    pub data_protocol: String,
    /// The checkpoint metadata format it writes.
    pub metadata_version: u32,
    /// The platform it runs on: `<arch>-<os>`.
    pub platform: String,
    /// Its programs.
    pub programs: Vec<ProgramInfo>,
}

/// This process's platform, as [`ArtifactDescription::platform`] names it.
pub fn platform() -> String {
    format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS)
}

impl ArtifactDescription {
    /// The description of an artifact built from this code with `programs`.
    pub fn current(programs: Vec<ProgramInfo>) -> Self {
        Self {
            sluice_version: env!("CARGO_PKG_VERSION").to_string(),
            protocol_version: super::messages::PROTOCOL_VERSION,
            data_protocol: String::from_utf8_lossy(crate::network::transport::ALPN).into_owned(),
            metadata_version: crate::checkpoint::metadata::METADATA_VERSION,
            platform: platform(),
            programs,
        }
    }

    /// Whether a cluster running this code can run the artifact: the same control and data
    /// protocols, checkpoint format and platform. The error names both sides and what to do.
    pub fn check_compatible(&self) -> Result<(), String> {
        let ours = Self::current(Vec::new());
        let rebuild = format!(
            "rebuild the job against sluice {} (the version this cluster runs)",
            ours.sluice_version
        );
        if self.platform != ours.platform {
            return Err(format!(
                "the artifact is built for {}, but this cluster runs on {}: build it for {}",
                self.platform, ours.platform, ours.platform
            ));
        }
        let mismatch = |what: &str, theirs: String, mine: String| {
            Err(format!(
                "the artifact was built with sluice {} ({what} {theirs}), but this cluster runs sluice {} ({what} {mine}): {rebuild}",
                self.sluice_version, ours.sluice_version
            ))
        };
        if self.protocol_version != ours.protocol_version {
            return mismatch(
                "control protocol",
                self.protocol_version.to_string(),
                ours.protocol_version.to_string(),
            );
        }
        if self.data_protocol != ours.data_protocol {
            return mismatch(
                "data protocol",
                self.data_protocol.clone(),
                ours.data_protocol,
            );
        }
        if self.metadata_version != ours.metadata_version {
            return mismatch(
                "checkpoint format",
                self.metadata_version.to_string(),
                ours.metadata_version.to_string(),
            );
        }
        if self.programs.is_empty() {
            return Err("the artifact registers no program".into());
        }
        Ok(())
    }

    /// The program `entry` names, or the only one when `entry` is `None`.
    pub fn program(&self, entry: Option<&str>) -> Result<&ProgramInfo, String> {
        let names = || {
            self.programs
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match entry {
            Some(name) => self
                .programs
                .iter()
                .find(|p| p.name == name)
                .ok_or_else(|| {
                    format!("the artifact has no program '{name}'; it has: {}", names())
                }),
            None => match self.programs.as_slice() {
                [only] => Ok(only),
                _ => Err(format!(
                    "the artifact holds several programs ({}): name one (-c/--class, or entryClass over REST)",
                    names()
                )),
            },
        }
    }
}

/// The content key of an artifact's bytes: their SHA-256 in lowercase hex.
pub fn content_key(bytes: &[u8]) -> String {
    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes).as_ref())
}

/// Incrementally computes a [`content_key`] (for files read in pieces).
pub struct ContentHasher(aws_lc_rs::digest::Context);

impl Default for ContentHasher {
    fn default() -> Self {
        Self(aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256))
    }
}

impl ContentHasher {
    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The key of everything added.
    pub fn finish(self) -> String {
        hex(self.0.finish().as_ref())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `key` looks like a [`content_key`] (so it can name a file safely).
pub fn is_content_key(key: &str) -> bool {
    key.len() == 64
        && key
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str) -> ProgramInfo {
        ProgramInfo {
            name: name.into(),
            description: String::new(),
            usage: String::new(),
        }
    }

    #[test]
    fn an_artifact_of_this_build_is_compatible_and_others_are_refused_with_both_versions() {
        let mut d = ArtifactDescription::current(vec![info("job")]);
        assert_eq!(d.check_compatible(), Ok(()));
        d.protocol_version += 1;
        d.sluice_version = "9.9.9".into();
        let err = d.check_compatible().unwrap_err();
        assert!(
            err.contains("9.9.9") && err.contains(env!("CARGO_PKG_VERSION")),
            "{err}"
        );
        assert!(err.contains("rebuild"), "{err}");
        let mut d = ArtifactDescription::current(vec![info("job")]);
        d.platform = "riscv64-freebsd".into();
        assert!(
            d.check_compatible()
                .unwrap_err()
                .contains("riscv64-freebsd")
        );
        let d = ArtifactDescription::current(vec![]);
        assert!(d.check_compatible().unwrap_err().contains("no program"));
    }

    #[test]
    fn the_entry_program_is_named_or_the_only_one() {
        let one = ArtifactDescription::current(vec![info("a")]);
        assert_eq!(one.program(None).unwrap().name, "a");
        let two = ArtifactDescription::current(vec![info("a"), info("b")]);
        assert!(two.program(None).unwrap_err().contains("a, b"));
        assert_eq!(two.program(Some("b")).unwrap().name, "b");
        assert!(
            two.program(Some("c"))
                .unwrap_err()
                .contains("no program 'c'")
        );
    }

    #[test]
    fn content_keys_are_sha256_in_hex_whole_or_in_pieces() {
        let key = content_key(b"abc");
        assert_eq!(
            key,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut h = ContentHasher::default();
        h.update(b"a");
        h.update(b"bc");
        assert_eq!(h.finish(), key);
        assert!(is_content_key(&key));
        assert!(!is_content_key("../etc/passwd"));
        assert!(!is_content_key(&key.to_uppercase()));
    }
}
