//! Where snapshot files are kept. A trait, so that a distributed file system (HDFS) can be added
//! beside the local (or shared, mounted) file system without touching backends or the coordinator.
//!
//! Paths are storage paths: `/`-separated strings, absolute for the local file system.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A file store for checkpoint data. Every write is atomic: a reader sees the whole file or none.
pub trait StateStorage: Send + Sync {
    /// Writes `data` to `path` (creating parent directories), replacing it atomically.
    fn write(&self, path: &str, data: &[u8]) -> io::Result<()>;
    /// Copies the local file `from` to `path`; returns the bytes copied.
    fn upload(&self, from: &Path, path: &str) -> io::Result<u64>;
    /// Reads a whole file.
    fn read(&self, path: &str) -> io::Result<Vec<u8>>;
    /// Copies `path` to the local file `to`.
    fn download(&self, path: &str, to: &Path) -> io::Result<()>;
    /// The file's size, or `None` if it does not exist.
    fn size(&self, path: &str) -> io::Result<Option<u64>> {
        Ok(self.status(path)?.map(|info| info.len))
    }
    /// The size and modification time of a file or directory, or `None` if it does not exist.
    fn status(&self, path: &str) -> io::Result<Option<FileInfo>>;
    /// Creates a directory (and missing parents) that only its owner may read or enter, or
    /// restricts an existing one so: for files that must not be read by other users, such as a
    /// cluster's secret shipped to its containers.
    fn create_private_dir(&self, path: &str) -> io::Result<()>;
    /// The names of the entries of a directory (empty if it does not exist).
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;
    /// Deletes a file; a missing file is not an error.
    fn delete_file(&self, path: &str) -> io::Result<()>;
    /// Deletes a directory and everything in it; a missing directory is not an error.
    fn delete_dir(&self, path: &str) -> io::Result<()>;
    /// Whether `path` can name a place on this storage at all, without touching it: an error
    /// for a path no configuration resolves (an `hdfs:///` path while no `fs.defaultFS` is
    /// set), so a job is refused at submission rather than failing every checkpoint.
    fn check_path(&self, _path: &str) -> io::Result<()> {
        Ok(())
    }
    /// Opens the file `path` for reading from byte `offset` on, as a stream: for inputs too
    /// large to [`read`](StateStorage::read) whole, such as a text source's files.
    fn open_read(&self, path: &str, offset: u64) -> io::Result<Box<dyn Read + Send>>;
    /// Creates the file `path` (replacing one that exists; its directory must exist) for
    /// writing as a stream. Unlike [`write`](StateStorage::write) it is not atomic: the file
    /// exists under its name while it is written, so callers write to a hidden name and
    /// [`rename`](StateStorage::rename) it into place once it is closed.
    fn create_file(&self, path: &str) -> io::Result<Box<dyn OutputFile>>;
    /// Renames the file `from` to `to` (replacing a file `to`), atomically.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Creates the directory `path` and its missing parents; an existing one is fine.
    fn create_dir(&self, path: &str) -> io::Result<()>;
}

/// A file being written by [`StateStorage::create_file`]. Writes may be buffered by the file
/// system; [`sync`](OutputFile::sync) makes them durable while the file stays open, and
/// [`close`](OutputFile::close) ends the file. A file dropped without `close` may lose what was
/// written (on HDFS it stays open until its lease expires).
pub trait OutputFile: Write + Send {
    /// Makes everything written so far durable (local `fsync`, HDFS `hsync`).
    fn sync(&mut self) -> io::Result<()>;
    /// Makes everything written durable and closes the file.
    fn close(self: Box<Self>) -> io::Result<()>;
}

/// What [`StateStorage::status`] reports about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// Length in bytes (of a file; a directory's is whatever its file system says).
    pub len: u64,
    /// Last modification, in milliseconds since the Unix epoch: the value YARN compares before
    /// it localizes a file.
    pub modified_ms: i64,
    /// Whether the path is a directory.
    pub is_dir: bool,
}

/// The directory, beside a checkpoint's `chk-<n>`, that holds its incremental (shared) files,
/// as a path relative to the checkpoint directory.
const SHARED_PREFIX: [&str; 2] = ["..", "shared"];

/// Resolves a file a snapshot's metadata references, `relative` to `metadata_dir` (the directory
/// holding `_metadata`): a file inside that directory, or, with `allow_shared`, `../shared/<name>`
/// in the job's shared directory beside it (incremental checkpoints). Anything else, an absolute
/// path, other `..` segments or an empty name, is refused with the reason: a crafted `_metadata`
/// must not make a restore read, download or delete files anywhere else.
pub fn resolve_inside(
    metadata_dir: &str,
    relative: &str,
    allow_shared: bool,
) -> Result<String, String> {
    let segments: Vec<&str> = relative.split('/').collect();
    let rest = if allow_shared && segments.len() > 2 && segments[..2] == SHARED_PREFIX {
        &segments[2..]
    } else {
        &segments[..]
    };
    let bad = rest
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == ".." || s.contains('\0'));
    if relative.starts_with('/') || bad {
        let inside = if allow_shared {
            format!("inside {metadata_dir} or its job's shared directory")
        } else {
            format!("inside {metadata_dir}")
        };
        return Err(format!("the state file {relative:?} does not lie {inside}"));
    }
    Ok(join(metadata_dir, relative))
}

/// Joins a storage path and a relative one, resolving `..` segments.
pub fn join(base: &str, relative: &str) -> String {
    if relative.starts_with('/') {
        return relative.to_string();
    }
    let mut parts: Vec<&str> = base.split('/').collect();
    if parts.last() == Some(&"") && parts.len() > 1 {
        parts.pop();
    }
    for seg in relative.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.len() > 1 {
                    parts.pop();
                }
            }
            s => parts.push(s),
        }
    }
    parts.join("/")
}

/// The local file system (or a shared one mounted on every host).
#[derive(Clone, Debug, Default)]
pub struct LocalFileStorage;

impl LocalFileStorage {
    fn path(p: &str) -> PathBuf {
        PathBuf::from(p)
    }

    fn temp_beside(path: &Path) -> PathBuf {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        path.with_file_name(format!(".{name}.inprogress-{}", rand::random::<u64>()))
    }

    fn create_parent(path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => std::fs::create_dir_all(parent),
            _ => Ok(()),
        }
    }
}

/// A local file being written: [`OutputFile`] over [`std::fs::File`].
struct LocalOutputFile(std::fs::File);

impl Write for LocalOutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl OutputFile for LocalOutputFile {
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }
    fn close(self: Box<Self>) -> io::Result<()> {
        self.0.sync_all()
    }
}

impl StateStorage for LocalFileStorage {
    fn write(&self, path: &str, data: &[u8]) -> io::Result<()> {
        let path = Self::path(path);
        Self::create_parent(&path)?;
        let tmp = Self::temp_beside(&path);
        let result = (|| {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(data)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    fn upload(&self, from: &Path, path: &str) -> io::Result<u64> {
        let path = Self::path(path);
        Self::create_parent(&path)?;
        let tmp = Self::temp_beside(&path);
        let result = (|| {
            let n = std::fs::copy(from, &tmp)?;
            std::fs::File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            Ok(n)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        std::fs::read(Self::path(path))
    }

    fn download(&self, path: &str, to: &Path) -> io::Result<()> {
        Self::create_parent(to)?;
        std::fs::copy(Self::path(path), to).map(|_| ())
    }

    fn status(&self, path: &str) -> io::Result<Option<FileInfo>> {
        let meta = match std::fs::metadata(Self::path(path)) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let modified_ms = meta
            .modified()?
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        Ok(Some(FileInfo {
            len: meta.len(),
            modified_ms,
            is_dir: meta.is_dir(),
        }))
    }

    fn create_private_dir(&self, path: &str) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let path = Self::path(path);
        std::fs::create_dir_all(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(Self::path(dir)) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for entry in entries {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn delete_file(&self, path: &str) -> io::Result<()> {
        match std::fs::remove_file(Self::path(path)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn delete_dir(&self, path: &str) -> io::Result<()> {
        match std::fs::remove_dir_all(Self::path(path)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn open_read(&self, path: &str, offset: u64) -> io::Result<Box<dyn Read + Send>> {
        let mut file = std::fs::File::open(Self::path(path))?;
        if offset > 0 {
            file.seek(SeekFrom::Start(offset))?;
        }
        Ok(Box::new(file))
    }

    fn create_file(&self, path: &str) -> io::Result<Box<dyn OutputFile>> {
        let file = std::fs::File::create(Self::path(path))?;
        Ok(Box::new(LocalOutputFile(file)))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(Self::path(from), Self::path(to))
    }

    fn create_dir(&self, path: &str) -> io::Result<()> {
        std::fs::create_dir_all(Self::path(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_status_and_private_dirs() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let storage = LocalFileStorage;
        let dir = format!("{}/a/private", tmp.path().display());
        storage.create_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let file = format!("{dir}/f");
        storage.write(&file, b"12345").unwrap();
        let info = storage.status(&file).unwrap().unwrap();
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        let want = mtime
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        assert_eq!((info.len, info.modified_ms, info.is_dir), (5, want, false));
        assert_eq!(storage.size(&file).unwrap(), Some(5));
        assert!(storage.status(&dir).unwrap().unwrap().is_dir);
        assert_eq!(storage.status(&format!("{dir}/none")).unwrap(), None);
        assert_eq!(storage.size(&format!("{dir}/none")).unwrap(), None);
    }

    #[test]
    fn state_files_resolve_inside_their_snapshot_only() {
        let dir = "/c/job/chk-3";
        assert_eq!(
            resolve_inside(dir, "op-1", false).unwrap(),
            "/c/job/chk-3/op-1"
        );
        assert_eq!(
            resolve_inside(dir, "a/b", false).unwrap(),
            "/c/job/chk-3/a/b"
        );
        assert_eq!(
            resolve_inside(dir, "../shared/a.sst", true).unwrap(),
            "/c/job/shared/a.sst"
        );
        for (bad, shared) in [
            ("../shared/a.sst", false),
            ("../../../etc/passwd", true),
            ("../shared/../../x", true),
            ("../shared/", true),
            ("../x", true),
            ("/etc/passwd", true),
            ("a/../../x", true),
            ("a/./b", true),
            ("", true),
            ("a//b", true),
            ("a\0b", true),
        ] {
            let err = resolve_inside(dir, bad, shared).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn join_resolves_parent_segments() {
        assert_eq!(
            join("/c/job/chk-3", "../shared/a.sst"),
            "/c/job/shared/a.sst"
        );
        assert_eq!(join("/c/job/chk-3/", "op-1"), "/c/job/chk-3/op-1");
        assert_eq!(join("/c/job", "/abs/x"), "/abs/x");
    }

    #[test]
    fn local_storage_writes_atomically_and_lists() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_string_lossy().into_owned();
        let s = LocalFileStorage;
        let f = join(&base, "a/b/file");
        s.write(&f, b"hello").unwrap();
        assert_eq!(s.read(&f).unwrap(), b"hello");
        assert_eq!(s.size(&f).unwrap(), Some(5));
        assert_eq!(s.list(&join(&base, "a/b")).unwrap(), vec!["file"]);
        assert_eq!(s.size(&join(&base, "nope")).unwrap(), None);
        let local = dir.path().join("copy");
        s.download(&f, &local).unwrap();
        assert_eq!(s.upload(&local, &join(&base, "up/x")).unwrap(), 5);
        s.delete_dir(&join(&base, "a")).unwrap();
        s.delete_file(&join(&base, "missing")).unwrap();
        assert_eq!(s.size(&f).unwrap(), None);
    }
}
