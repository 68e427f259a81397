//! The JobManager's job artifacts: uploaded executables kept under their content key, asked
//! what they hold when they arrive and for a program's job graph when a job is submitted.
//!
//! With ZooKeeper HA on HDFS the store's files live in `<storageDir>/<cluster id>/jars` on
//! HDFS, where a new leader finds them; each JobManager keeps the executables it runs in a local
//! cache of its own (a child process needs a local file), fetched from HDFS when first needed.
//!
//! An artifact is user code: it runs only as a child process with a deadline (a program that
//! panics, crashes or never returns costs its submission, never the JobManager), and a file's
//! name from an upload never becomes a path (files are named by their SHA-256).

use std::collections::HashSet;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::graph::{JobGraph, PlanAnswer};
use crate::pids::run_child;
use crate::rpc::artifact::{self, ArtifactDescription};
use crate::state::StateStorage;

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

/// Asks the executable at `path` what it holds: it must be an ELF file that describes itself,
/// within [`CHILD_DEADLINE`], as a job artifact this sluice can run. The error says why not,
/// in words for whoever built it.
pub fn describe(path: &Path) -> Result<ArtifactDescription, String> {
    let mut head = [0u8; 4];
    let magic = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok();
    if !magic || head != *b"\x7fELF" {
        return Err(
            "it is not an executable (no ELF header): use the binary `cargo build` made for the job"
                .into(),
        );
    }
    run_child(path, &[artifact::DESCRIBE.to_string()], CHILD_DEADLINE)
        .and_then(|out| {
            serde_json::from_slice::<ArtifactDescription>(&out).map_err(|e| {
                format!("it does not describe itself as a sluice job (is it built with sluice::job_main?): {e}")
            })
        })
        .and_then(|d| d.check_compatible().map(|()| d))
}

/// Artifacts in a directory: `<key>` (the executable) and `<key>.json` (its [`StoredArtifact`]).
/// The directory is local, or on durable storage ([`with_remote`](Self::with_remote)) with the
/// local one as a cache of executables.
#[derive(Debug)]
pub struct ArtifactStore {
    dir: PathBuf,
    /// Whether the directory is this process's own (not configured), removed when it ends.
    own: bool,
    /// Where the files live when not in `dir`.
    remote: Option<Remote>,
}

/// A directory of durable storage (HDFS) holding the store's files.
struct Remote {
    storage: Arc<dyn StateStorage>,
    dir: String,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("dir", &self.dir).finish()
    }
}

impl Remote {
    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.dir.trim_end_matches('/'))
    }
}

/// The name prefix of JobManagers' own artifact directories in the temporary directory,
/// followed by the process id and a number counting the JobManagers of that process (tests
/// and embedded clusters run several in one process).
const OWN_DIR_PREFIX: &str = "sluice-jars-";

static OWN_DIRS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl ArtifactStore {
    /// The store in `configured` (`web.upload.dir`), else in a directory of this process's own
    /// in the system's temporary directory; directories that JobManagers no longer running
    /// left there are removed.
    pub fn open_for_process(configured: Option<PathBuf>) -> Result<Self, ArtifactError> {
        if let Some(dir) = configured {
            return Self::open(dir);
        }
        let tmp = std::env::temp_dir();
        for entry in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let dead = name
                .strip_prefix(OWN_DIR_PREFIX)
                .and_then(|rest| rest.split('-').next()?.parse::<u32>().ok())
                .is_some_and(|pid| !crate::pids::alive(pid));
            if dead {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let n = OWN_DIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{OWN_DIR_PREFIX}{}-{n}", std::process::id());
        let mut store = Self::open(tmp.join(name))?;
        store.own = true;
        Ok(store)
    }

    /// Removes the store's directory if it is this process's own (the JobManager stops).
    pub fn remove_own(&self) {
        if self.own {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// The store in `dir` (created owner-only if missing).
    pub fn open(dir: PathBuf) -> Result<Self, ArtifactError> {
        let io = |error| ArtifactError::Io {
            dir: dir.display().to_string(),
            error,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        Ok(Self {
            dir,
            own: false,
            remote: None,
        })
    }

    /// The store with its files in `dir` of `storage` (an `hdfs:` directory shared by the
    /// JobManagers); its own directory becomes the local cache of the executables it runs.
    /// Nothing is read or written until the store is used.
    pub fn with_remote(mut self, storage: Arc<dyn StateStorage>, dir: String) -> Self {
        self.remote = Some(Remote { storage, dir });
        self
    }

    /// Where the store keeps its files (as shown to whoever uploads).
    pub fn location(&self) -> String {
        match &self.remote {
            Some(remote) => remote.dir.clone(),
            None => self.dir.display().to_string(),
        }
    }

    /// The local directory: the store, or the cache of a store on durable storage.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(&self, error: std::io::Error) -> ArtifactError {
        ArtifactError::Io {
            dir: self.location(),
            error,
        }
    }

    /// The names of the store's files.
    fn names(&self) -> std::io::Result<HashSet<String>> {
        match &self.remote {
            Some(remote) => Ok(remote.storage.list(&remote.dir)?.into_iter().collect()),
            None => Ok(std::fs::read_dir(&self.dir)?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()),
        }
    }

    /// Reads the store's file `name`.
    fn read_file(&self, name: &str) -> std::io::Result<Vec<u8>> {
        match &self.remote {
            Some(remote) => remote.storage.read(&remote.path(name)),
            None => std::fs::read(self.dir.join(name)),
        }
    }

    /// Whether the store has the file `name`.
    fn has_file(&self, name: &str) -> Result<bool, ArtifactError> {
        match &self.remote {
            Some(remote) => Ok(remote
                .storage
                .status(&remote.path(name))
                .map_err(|e| self.io(e))?
                .is_some_and(|s| !s.is_dir)),
            None => Ok(self.dir.join(name).is_file()),
        }
    }

    /// Deletes the store's file `name` (and its cached copy); a missing file is no error.
    fn delete_file(&self, name: &str) -> std::io::Result<()> {
        if let Some(remote) = &self.remote {
            remote.storage.delete_file(&remote.path(name))?;
        }
        match std::fs::remove_file(self.dir.join(name)) {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The executable of artifact `id`, if the store has it: a local file, fetched into the
    /// cache first when the store is on durable storage. Blocks on that storage.
    pub fn path(&self, id: &str) -> Result<PathBuf, ArtifactError> {
        if !artifact::is_content_key(id) {
            return Err(ArtifactError::Unknown(id.to_string()));
        }
        let path = self.dir.join(id);
        if path.is_file() {
            return Ok(path);
        }
        let Some(remote) = &self.remote else {
            return Err(ArtifactError::Unknown(id.to_string()));
        };
        if !self.has_file(id)? {
            return Err(ArtifactError::Unknown(id.to_string()));
        }
        // Fetched under a name that is no content key (a sweep leaves it alone), then renamed:
        // a concurrent fetch of the same artifact writes a file of its own.
        let part = self
            .dir
            .join(format!("{id}.fetch-{:016x}", rand::random::<u64>()));
        let fetched = remote
            .storage
            .download(&remote.path(id), &part)
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o700))
            })
            .and_then(|()| std::fs::rename(&part, &path));
        if let Err(e) = fetched {
            let _ = std::fs::remove_file(&part);
            return Err(self.io(e));
        }
        tracing::info!(artifact = %id, from = %remote.dir, "fetched a job artifact into the local cache");
        Ok(path)
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
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(upload, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| self.io(e))?;
        let description = match describe(upload) {
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
        // The record first: an executable without one is what a sweep removes.
        let meta = serde_json::to_vec_pretty(&stored).map_err(|e| self.io(e.into()))?;
        if let Some(remote) = &self.remote {
            // On durable storage the executable first, then the record that lists it: a new
            // leader never sees a record without its code. Each file is written whole and
            // renamed into place by the storage.
            let published = remote
                .storage
                .upload(upload, &remote.path(&key))
                .and_then(|_| {
                    remote
                        .storage
                        .write(&remote.path(&format!("{key}.json")), &meta)
                });
            if let Err(e) = published {
                let _ = std::fs::remove_file(upload);
                return Err(self.io(e));
            }
        }
        let tmp = self.dir.join(format!("{key}.json.tmp"));
        std::fs::write(&tmp, meta).map_err(|e| self.io(e))?;
        std::fs::rename(&tmp, self.dir.join(format!("{key}.json"))).map_err(|e| self.io(e))?;
        std::fs::rename(upload, self.dir.join(&key)).map_err(|e| self.io(e))?;
        Ok(stored)
    }

    /// Every stored artifact, newest first.
    pub fn list(&self) -> Vec<StoredArtifact> {
        let names = match self.names() {
            Ok(names) => names,
            Err(e) => {
                tracing::warn!(dir = %self.location(), "cannot list the job artifacts: {e}");
                return Vec::new();
            }
        };
        let mut all: Vec<StoredArtifact> = names
            .iter()
            .filter(|name| name.ends_with(".json"))
            .filter_map(|name| self.read_file(name).ok())
            .filter_map(|bytes| serde_json::from_slice::<StoredArtifact>(&bytes).ok())
            .filter(|a| names.contains(&a.id))
            .collect();
        all.sort_by(|a, b| b.uploaded.cmp(&a.uploaded).then(a.id.cmp(&b.id)));
        all
    }

    /// The record of artifact `id`.
    pub fn get(&self, id: &str) -> Result<StoredArtifact, ArtifactError> {
        if !artifact::is_content_key(id) || !self.has_file(id)? {
            return Err(ArtifactError::Unknown(id.to_string()));
        }
        let bytes = match self.read_file(&format!("{id}.json")) {
            Ok(bytes) => bytes,
            // Its upload was deleted; a running job still has the executable.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ArtifactError::Unknown(id.to_string()));
            }
            Err(e) => return Err(self.io(e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| self.io(e.into()))
    }

    /// Removes the upload of artifact `id`: it is no longer listed or runnable. Its executable
    /// stays while `in_use` (a running job's TaskManagers may still fetch it) and goes with
    /// the [`sweep`](Self::sweep) after that job.
    pub fn remove(&self, id: &str, in_use: bool) -> Result<(), ArtifactError> {
        let record = format!("{id}.json");
        if !artifact::is_content_key(id) || !self.has_file(id)? || !self.has_file(&record)? {
            return Err(ArtifactError::Unknown(id.to_string()));
        }
        self.delete_file(&record).map_err(|e| self.io(e))?;
        if !in_use {
            self.delete_file(id).map_err(|e| self.io(e))?;
        }
        Ok(())
    }

    /// Removes every executable whose upload was removed and that is not `in_use`, and
    /// records whose executable is gone; returns the ids removed.
    pub fn sweep(&self, in_use: &HashSet<String>) -> Vec<String> {
        let names = match self.names() {
            Ok(names) => names,
            Err(e) => {
                tracing::warn!(dir = %self.location(), "cannot list the job artifacts to sweep them: {e}");
                return Vec::new();
            }
        };
        let mut removed = Vec::new();
        for name in &names {
            if let Some(id) = name.strip_suffix(".json")
                && artifact::is_content_key(id)
                && !names.contains(id)
            {
                let _ = self.delete_file(name);
            }
            let orphan = artifact::is_content_key(name)
                && !names.contains(&format!("{name}.json"))
                && !in_use.contains(name);
            if orphan && self.delete_file(name).is_ok() {
                removed.push(name.clone());
            }
        }
        removed.sort();
        removed
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

    #[test]
    fn own_directories_are_per_job_manager_and_left_ones_of_dead_processes_go() {
        // A process that has ended: its pid names a directory nobody owns any more.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let left = std::env::temp_dir().join(format!("{OWN_DIR_PREFIX}{dead}-0"));
        std::fs::create_dir_all(&left).unwrap();
        let a = ArtifactStore::open_for_process(None).unwrap();
        let b = ArtifactStore::open_for_process(None).unwrap();
        assert!(!left.exists() || crate::pids::alive(dead));
        assert_ne!(a.dir(), b.dir());
        a.remove_own();
        assert!(!a.dir().exists() && b.dir().exists());
        b.remove_own();
        // A configured directory is the operator's: it stays.
        let configured = tempfile::tempdir().unwrap();
        let c = ArtifactStore::open_for_process(Some(configured.path().join("jars"))).unwrap();
        c.remove_own();
        assert!(c.dir().exists());
    }

    #[test]
    fn a_deleted_upload_keeps_its_executable_while_a_job_runs_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(dir.path().join("store")).unwrap();
        let (running, idle) = ("a".repeat(64), "b".repeat(64));
        for id in [&running, &idle] {
            std::fs::write(store.dir().join(id), b"\x7fELF").unwrap();
            std::fs::write(store.dir().join(format!("{id}.json")), b"{}").unwrap();
        }
        // An upload in progress has no content key for a name yet: never swept.
        std::fs::write(store.dir().join("upload-1.part"), b"half").unwrap();
        store.remove(&running, true).unwrap();
        store.remove(&idle, false).unwrap();
        assert!(matches!(
            store.get(&running),
            Err(ArtifactError::Unknown(_))
        ));
        assert!(matches!(
            store.remove(&running, true),
            Err(ArtifactError::Unknown(_))
        ));
        assert!(store.path(&running).is_ok(), "the running job's code stays");
        assert!(store.path(&idle).is_err());
        let in_use = std::collections::HashSet::from([running.clone()]);
        assert!(store.sweep(&in_use).is_empty());
        assert_eq!(
            store.sweep(&Default::default()),
            std::slice::from_ref(&running)
        );
        assert!(store.path(&running).is_err());
        assert!(store.dir().join("upload-1.part").exists());
        // A record whose executable is gone is removed too; a listed upload stays.
        let listed = "c".repeat(64);
        std::fs::write(store.dir().join(&listed), b"\x7fELF").unwrap();
        std::fs::write(store.dir().join(format!("{listed}.json")), b"{}").unwrap();
        std::fs::write(store.dir().join(format!("{}.json", "d".repeat(64))), b"{}").unwrap();
        assert!(store.sweep(&Default::default()).is_empty());
        assert!(store.path(&listed).is_ok());
        assert!(
            !store
                .dir()
                .join(format!("{}.json", "d".repeat(64)))
                .exists()
        );
    }

    #[test]
    fn a_store_on_durable_storage_fetches_what_another_job_manager_uploaded() {
        let dir = tempfile::tempdir().unwrap();
        let shared = format!("{}/ha/default/jars", dir.path().display());
        let store = ArtifactStore::open(dir.path().join("cache"))
            .unwrap()
            .with_remote(Arc::new(crate::state::LocalFileStorage), shared.clone());
        assert!(store.list().is_empty(), "no directory yet");
        // What the previous leader published: the executable, then its record.
        let id = "e".repeat(64);
        let record = StoredArtifact {
            id: id.clone(),
            name: "job".into(),
            uploaded: 7,
            size: 4,
            description: ArtifactDescription::current(Vec::new()),
        };
        std::fs::create_dir_all(&shared).unwrap();
        std::fs::write(format!("{shared}/{id}"), b"\x7fELF").unwrap();
        std::fs::write(
            format!("{shared}/{id}.json"),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        assert_eq!(store.list(), vec![record.clone()]);
        assert_eq!(store.get(&id).unwrap(), record);
        let local = store.path(&id).unwrap();
        assert_eq!(local, store.dir().join(&id), "fetched into the cache");
        assert_eq!(std::fs::read(&local).unwrap(), b"\x7fELF");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&local).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(matches!(
            store.path(&"f".repeat(64)),
            Err(ArtifactError::Unknown(_))
        ));
        // Removed while a job runs it: unlisted, the code stays, and goes with the sweep after.
        store.remove(&id, true).unwrap();
        assert!(store.list().is_empty());
        assert!(std::path::Path::new(&format!("{shared}/{id}")).exists());
        let in_use = HashSet::from([id.clone()]);
        assert!(store.sweep(&in_use).is_empty());
        assert_eq!(store.sweep(&HashSet::new()), vec![id.clone()]);
        assert!(!std::path::Path::new(&format!("{shared}/{id}")).exists());
        assert!(!local.exists(), "the cached copy goes with it");
    }
}
