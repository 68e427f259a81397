//! Where the data behind ZooKeeper's pointers lives (`high-availability.storageDir`).

use std::fmt::Debug;
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::error::HaError;

/// Durable blob storage for the HA stores. The stores only ever create new, uniquely named blobs,
/// read them, and delete them once no pointer references them, so an implementation needs no
/// overwrite or rename. A filesystem directory ([`FsBlobStore`]) is the implementation here;
/// a user of the library plugs in others (the sluice engine one on HDFS) behind the same trait,
/// naming blobs with [`new_blob_name`] and checking names with [`check_blob_name`].
///
/// Calls are blocking; the stores run them on tokio's blocking pool.
pub trait BlobStore: Send + Sync + Debug + 'static {
    /// Stores `data` durably under a new name starting with `prefix` and returns the name. When
    /// this returns, the blob must survive a crash of this process and of the machine.
    fn write_new(&self, prefix: &str, data: &[u8]) -> Result<String, HaError>;
    /// Reads a blob; `Ok(None)` if it does not exist.
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, HaError>;
    /// Deletes a blob; deleting a missing blob succeeds.
    fn delete(&self, name: &str) -> Result<(), HaError>;
    /// Names of all blobs (for garbage collection and tests).
    fn list(&self) -> Result<Vec<String>, HaError>;
    /// When a blob was written; `Ok(None)` if it does not exist.
    fn modified(&self, name: &str) -> Result<Option<std::time::SystemTime>, HaError>;
}

/// A new blob name starting with `prefix`. A random suffix makes the name unique, so a retried or
/// concurrent write never replaces a blob some committed pointer may reference.
pub fn new_blob_name(prefix: &str) -> String {
    format!("{prefix}-{:032x}", rand::random::<u128>())
}

/// Refuses a blob name that could escape its store's directory. Names come back from ZooKeeper,
/// so every store checks them before it builds a path from one.
pub fn check_blob_name(name: &str) -> Result<(), HaError> {
    crate::config::validate_name("blob name", name)
}

/// Blobs as files in one directory of a local or shared (NFS) filesystem.
#[derive(Debug, Clone)]
pub struct FsBlobStore {
    dir: PathBuf,
}

impl FsBlobStore {
    /// Uses `dir`, creating it if needed.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, HaError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|source| HaError::Storage {
            path: dir.clone(),
            source,
        })?;
        Ok(FsBlobStore { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, name: &str) -> Result<PathBuf, HaError> {
        check_blob_name(name)?;
        Ok(self.dir.join(name))
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> HaError + '_ {
    move |source| HaError::Storage {
        path: path.to_owned(),
        source,
    }
}

impl BlobStore for FsBlobStore {
    fn write_new(&self, prefix: &str, data: &[u8]) -> Result<String, HaError> {
        let name = new_blob_name(prefix);
        let path = self.path_of(&name)?;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err(&path))?;
        file.write_all(data).map_err(io_err(&path))?;
        file.sync_all().map_err(io_err(&path))?;
        // The directory entry must be durable too, or a crash could lose the file behind a
        // pointer that ZooKeeper already holds.
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.dir))?;
        Ok(name)
    }

    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, HaError> {
        let path = self.path_of(name)?;
        match fs::read(&path) {
            Ok(data) => Ok(Some(data)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    fn delete(&self, name: &str) -> Result<(), HaError> {
        let path = self.path_of(name)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    fn list(&self) -> Result<Vec<String>, HaError> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = entry.map_err(io_err(&self.dir))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn modified(&self, name: &str) -> Result<Option<std::time::SystemTime>, HaError> {
        let path = self.path_of(name)?;
        match fs::metadata(&path).and_then(|m| m.modified()) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::new(dir.path().join("ha")).unwrap();
        let a = store.write_new("jobgraph-j1", b"one").unwrap();
        let b = store.write_new("jobgraph-j1", b"two").unwrap();
        assert_ne!(a, b, "names must be unique");
        assert_eq!(store.read(&a).unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(store.list().unwrap().len(), 2);
        store.delete(&a).unwrap();
        store.delete(&a).unwrap();
        assert_eq!(store.read(&a).unwrap(), None);
    }

    #[test]
    fn rejects_escaping_names() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::new(dir.path()).unwrap();
        assert!(store.read("../etc/passwd").is_err());
        assert!(store.delete("/etc/passwd").is_err());
    }
}
