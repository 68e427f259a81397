//! The JobManager's job artifacts: uploaded executables kept under their content key, asked
//! what they hold when they arrive and for a program's job graph when a job is submitted.
//!
//! An artifact is user code: it runs only as a child process with a deadline (a program that
//! panics, crashes or never returns costs its submission, never the JobManager), and a file's
//! name from an upload never becomes a path (files are named by their SHA-256).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::graph::{JobGraph, PlanAnswer};
use crate::pids::run_child;
use crate::rpc::artifact::{self, ArtifactDescription};

/// How long an artifact may take to describe itself or to build a job graph.
pub const CHILD_DEADLINE: Duration = Duration::from_secs(30);

/// Why an artifact is refused or cannot do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// No artifact with that id.
    #[error("no job artifact '{0}' (list them with GET /jars)")]
    Unknown(String),
    /// The file is not a job artifact for this cluster.
    #[error("{name} is not a usable job artifact: {reason}")]
    Refused {
        /// The uploaded file's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The artifact's program could not build its job graph.
    #[error("{0}")]
    Plan(String),
    /// The store's files.
    #[error("the artifact store at {dir}: {error}")]
    Io {
        /// The store's directory.
        dir: String,
        /// What failed.
        error: std::io::Error,
    },
}

/// What the store knows of one artifact (Flink's `/jars` entry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredArtifact {
    /// Its content key, which is also its id.
    pub id: String,
    /// The file name it was uploaded as (display only).
    pub name: String,
    /// When it was uploaded, ms since the epoch.
    pub uploaded: u64,
    /// Its size in bytes.
    pub size: u64,
    /// What it said of itself.
    pub description: ArtifactDescription,
}

/// Artifacts in a directory: `<key>` (the executable) and `<key>.json` (its [`StoredArtifact`]).
#[derive(Debug)]
pub struct ArtifactStore {
    dir: PathBuf,
}

impl ArtifactStore {
    /// The store in `dir` (created owner-only if missing).
    pub fn open(dir: PathBuf) -> Result<Self, ArtifactError> {
        let io = |error| ArtifactError::Io {
            dir: dir.display().to_string(),
            error,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        Ok(Self { dir })
    }

    /// Where the store keeps its files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(&self, error: std::io::Error) -> ArtifactError {
        ArtifactError::Io {
            dir: self.dir.display().to_string(),
            error,
        }
    }

    /// The executable of artifact `id`, if the store has it.
    pub fn path(&self, id: &str) -> Result<PathBuf, ArtifactError> {
        if !artifact::is_content_key(id) {
            return Err(ArtifactError::Unknown(id.to_string()));
        }
        let path = self.dir.join(id);
        if path.is_file() {
            Ok(path)
        } else {
            Err(ArtifactError::Unknown(id.to_string()))
        }
    }

    /// Adds the file `upload` (moved into the store) that arrived as `name`: it must describe
    /// itself within [`CHILD_DEADLINE`] as an artifact this cluster can run. The same content
    /// uploaded twice is one artifact.
    pub fn add(
        &self,
        name: &str,
        upload: &Path,
        now: u64,
    ) -> Result<StoredArtifact, ArtifactError> {
        let refused = |reason: String| ArtifactError::Refused {
            name: display_name(name),
            reason,
        };
        let mut file = std::fs::File::open(upload).map_err(|e| self.io(e))?;
        let mut hasher = artifact::ContentHasher::default();
        let mut buf = vec![0u8; 1 << 16];
        let mut size = 0u64;
        loop {
            let n = file.read(&mut buf).map_err(|e| self.io(e))?;
            if n == 0 {
                break;
            }
            size += n as u64;
            hasher.update(&buf[..n]);
        }
        drop(file);
        let key = hasher.finish();
        let mut head = [0u8; 4];
        let magic = std::fs::File::open(upload)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok();
        if !magic || head != *b"\x7fELF" {
            let _ = std::fs::remove_file(upload);
            return Err(refused(
                "it is not an executable (no ELF header): upload the binary `cargo build` made for the job".into(),
            ));
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(upload, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| self.io(e))?;
        let described = run_child(upload, &[artifact::DESCRIBE.to_string()], CHILD_DEADLINE)
            .and_then(|out| {
                serde_json::from_slice::<ArtifactDescription>(&out).map_err(|e| {
                    format!("it does not describe itself as a sluice job (is it built with sluice::job_main?): {e}")
                })
            })
            .and_then(|d| d.check_compatible().map(|()| d));
        let description = match described {
            Ok(d) => d,
            Err(reason) => {
                let _ = std::fs::remove_file(upload);
                return Err(refused(reason));
            }
        };
        let stored = StoredArtifact {
            id: key.clone(),
            name: display_name(name),
            uploaded: now,
            size,
            description,
        };
        let target = self.dir.join(&key);
        std::fs::rename(upload, &target).map_err(|e| self.io(e))?;
        let meta = serde_json::to_vec_pretty(&stored).map_err(|e| self.io(e.into()))?;
        let tmp = self.dir.join(format!("{key}.json.tmp"));
        std::fs::write(&tmp, meta).map_err(|e| self.io(e))?;
        std::fs::rename(&tmp, self.dir.join(format!("{key}.json"))).map_err(|e| self.io(e))?;
        Ok(stored)
    }

    /// Every stored artifact, newest first.
    pub fn list(&self) -> Vec<StoredArtifact> {
        let mut all: Vec<StoredArtifact> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|bytes| serde_json::from_slice::<StoredArtifact>(&bytes).ok())
            .filter(|a| self.dir.join(&a.id).is_file())
            .collect();
        all.sort_by(|a, b| b.uploaded.cmp(&a.uploaded).then(a.id.cmp(&b.id)));
        all
    }

    /// The record of artifact `id`.
    pub fn get(&self, id: &str) -> Result<StoredArtifact, ArtifactError> {
        self.path(id)?;
        let bytes = std::fs::read(self.dir.join(format!("{id}.json"))).map_err(|e| self.io(e))?;
        serde_json::from_slice(&bytes).map_err(|e| self.io(e.into()))
    }

    /// Removes artifact `id`.
    pub fn remove(&self, id: &str) -> Result<(), ArtifactError> {
        let path = self.path(id)?;
        std::fs::remove_file(path).map_err(|e| self.io(e))?;
        let _ = std::fs::remove_file(self.dir.join(format!("{id}.json")));
        Ok(())
    }

    /// Asks artifact `id` for the job graph of its program `name` with `args` at
    /// `parallelism`.
    pub fn plan(
        &self,
        id: &str,
        name: &str,
        args: &[String],
        parallelism: u32,
    ) -> Result<JobGraph, ArtifactError> {
        let path = self.path(id)?;
        let mut argv = vec![
            artifact::PLAN.to_string(),
            name.to_string(),
            parallelism.to_string(),
        ];
        argv.extend(args.iter().cloned());
        let out = run_child(&path, &argv, CHILD_DEADLINE).map_err(|reason| {
            ArtifactError::Plan(format!(
                "program {name} of artifact {id} could not build its job graph: {reason}"
            ))
        })?;
        match serde_json::from_slice::<PlanAnswer>(&out) {
            Ok(PlanAnswer::Graph(graph)) => Ok(graph),
            Ok(PlanAnswer::Error(e)) => Err(ArtifactError::Plan(e)),
            Err(e) => Err(ArtifactError::Plan(format!(
                "artifact {id} answered the plan request with something that is not a job graph: {e}"
            ))),
        }
    }
}

/// An uploaded file's name as shown (never used as a path): its last path component, printable
/// characters only, at most 200 of them.
pub fn display_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let clean: String = last.chars().filter(|c| !c.is_control()).take(200).collect();
    if clean.is_empty() || clean == "." || clean == ".." {
        "artifact".into()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_names_are_shown_but_never_become_paths() {
        assert_eq!(display_name("../../etc/passwd"), "passwd");
        assert_eq!(display_name("C:\\jobs\\my-job"), "my-job");
        assert_eq!(display_name(".."), "artifact");
        assert_eq!(display_name("a\nb"), "ab");
    }

    #[test]
    fn files_that_are_not_artifacts_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(dir.path().join("store")).unwrap();
        let upload = dir.path().join("up");
        std::fs::write(&upload, b"PK\x03\x04 a jar, not a job").unwrap();
        let err = store.add("job.jar", &upload, 1).unwrap_err().to_string();
        assert!(err.contains("job.jar") && err.contains("ELF"), "{err}");
        // An executable that is not a sluice job: /bin/true describes nothing.
        std::fs::copy("/bin/true", &upload).unwrap();
        let err = store.add("true", &upload, 1).unwrap_err().to_string();
        assert!(err.contains("does not describe itself"), "{err}");
        // One that crashes: /bin/sh with the describe argument exits non-zero.
        std::fs::copy("/bin/sh", &upload).unwrap();
        let err = store.add("sh", &upload, 1).unwrap_err().to_string();
        assert!(err.contains("exit status"), "{err}");
        assert!(store.list().is_empty());
        assert!(matches!(store.path("../x"), Err(ArtifactError::Unknown(_))));
    }
}
