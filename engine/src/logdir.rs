//! The log files a daemon serves over REST (the JobManager its own, a TaskManager its own
//! through the JobManager): the file its stderr writes to and that file's rolled-over copies
//! `<name>.1`, `<name>.2`, ... (`crate::logfile`). A requested name is checked for path syntax
//! first and then only ever looked up among the listed names, so it can never reach another
//! path, not even another daemon's log in the same directory.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

/// One log file of a list (Flink's `LogInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogFile {
    /// Its file name (no directory).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written (ms since the epoch).
    pub mtime: u64,
}

/// Why a log file cannot be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogDirError {
    /// The name has a path separator or `..`: it is refused before anything is looked up.
    #[error("'{0}' is not a log file name (no paths, no '..')")]
    BadName(String),
    /// The name is not one of the listed log files.
    #[error("there is no log file named '{0}'")]
    Unknown(String),
    /// The file was listed but is gone (rolled over between the listing and the read).
    #[error("the log {0} is gone")]
    Gone(String),
    /// The directory or file cannot be read.
    #[error("cannot read the log {path}: {source}")]
    Io {
        /// What was read.
        path: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

fn io_error(path: &Path, source: std::io::Error) -> LogDirError {
    LogDirError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Whether `candidate` is the log `base` or one of its rolled-over copies (`base.<n>`).
fn is_own_log(base: &str, candidate: &str) -> bool {
    candidate == base
        || candidate
            .strip_prefix(base)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The log `current` and its rolled-over copies in its directory: the current one first, then
/// the copies newest first.
pub fn list(current: &Path) -> Result<Vec<LogFile>, LogDirError> {
    let dir = current.parent().unwrap_or(Path::new("."));
    let base = current
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || !is_own_log(&base, &name) {
            continue;
        }
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64);
        files.push(LogFile {
            name,
            size: meta.len(),
            mtime,
        });
    }
    // `base` sorts first; `.2` after `.1`, `.10` after `.9`.
    let order = |f: &LogFile| {
        f.name
            .strip_prefix(&base)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    files.sort_by_key(order);
    Ok(files)
}

/// Refuses a name that could step out of the log directory.
pub fn check_name(name: &str) -> Result<(), LogDirError> {
    if name.is_empty() || name.contains('/') || name.contains('\\') || name.contains("..") {
        return Err(LogDirError::BadName(name.to_string()));
    }
    Ok(())
}

/// The path of the listed log file `name`. A name with a path separator or `..` is refused
/// before anything is looked up; any other name must be one of [`list`]'s.
pub fn resolve(current: &Path, name: &str) -> Result<PathBuf, LogDirError> {
    check_name(name)?;
    if !list(current)?.iter().any(|f| f.name == name) {
        return Err(LogDirError::Unknown(name.to_string()));
    }
    Ok(current.with_file_name(name))
}

/// The end of a log file, at most `max` bytes of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogTail {
    /// The text (invalid UTF-8 replaced), whole lines when the file was cut.
    pub text: String,
    /// How many bytes of the file's start were left out.
    pub skipped: u64,
}

/// The last `max` bytes of the file at `path`; when the file is longer, the text starts after
/// the first line break of that window, so that no line is shown cut.
pub fn tail(path: &Path, max: u64) -> Result<LogTail, LogDirError> {
    let mut file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => LogDirError::Gone(path.display().to_string()),
        _ => io_error(path, e),
    })?;
    let size = file.metadata().map_err(|e| io_error(path, e))?.len();
    let start = size.saturating_sub(max);
    file.seek(SeekFrom::Start(start))
        .map_err(|e| io_error(path, e))?;
    let mut bytes = Vec::with_capacity((size - start) as usize);
    // `take`: the file may still grow while it is read.
    file.take(max)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    let mut skipped = start;
    if start > 0 {
        let cut = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(0, |newline| newline + 1);
        bytes.drain(..cut);
        skipped += cut as u64;
    }
    Ok(LogTail {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        skipped,
    })
}

/// The regular file this process's stdout writes to, if it is one (not a terminal or a pipe).
pub fn stdout_file() -> Option<PathBuf> {
    regular_file_of_fd(1)
}

/// The regular file this process's stderr writes to, if it is one (a daemon started by the
/// scripts), not a terminal or a pipe.
pub fn stderr_file() -> Option<PathBuf> {
    regular_file_of_fd(2)
}

fn regular_file_of_fd(fd: u32) -> Option<PathBuf> {
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    std::fs::metadata(&path)
        .ok()
        .filter(|m| m.is_file())
        .map(|_| path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_log_and_its_numbered_copies_are_listed() {
        assert!(is_own_log("jm.log", "jm.log"));
        assert!(is_own_log("jm.log", "jm.log.1"));
        assert!(is_own_log("jm.log", "jm.log.12"));
        assert!(!is_own_log("jm.log", "jm.log."));
        assert!(!is_own_log("jm.log", "jm.log.1.bak"));
        assert!(!is_own_log("jm.log", "jm.logx"));
        assert!(!is_own_log("jm.log", "tm.log"));
    }

    #[test]
    fn the_list_holds_the_log_and_its_copies_in_order_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let current = dir.path().join("sluice-jobmanager-0.log");
        std::fs::write(&current, "now\n").unwrap();
        for (name, text) in [
            ("sluice-jobmanager-0.log.10", "oldest"),
            ("sluice-jobmanager-0.log.2", "older"),
            ("sluice-jobmanager-0.log.1", "old"),
            ("sluice-taskmanager-0.log", "a TaskManager's"),
            ("sluice-jobmanager.pid", "1"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let files = list(&current).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "sluice-jobmanager-0.log",
                "sluice-jobmanager-0.log.1",
                "sluice-jobmanager-0.log.2",
                "sluice-jobmanager-0.log.10"
            ]
        );
        assert_eq!(files[0].size, 4);
        assert_eq!(files[1].size, 3);
        assert!(files[0].mtime > 0);
    }

    #[test]
    fn names_resolve_only_to_listed_files() {
        let dir = tempfile::tempdir().unwrap();
        let current = dir.path().join("jm.log");
        std::fs::write(&current, "x").unwrap();
        std::fs::write(dir.path().join("jm.log.1"), "y").unwrap();
        std::fs::write(dir.path().join("secret"), "z").unwrap();
        assert_eq!(
            resolve(&current, "jm.log.1").unwrap(),
            dir.path().join("jm.log.1")
        );
        for bad in [
            "../jm.log",
            "/etc/passwd",
            "a/jm.log",
            "..",
            "",
            "jm.log/..",
            "..\\jm.log",
        ] {
            let e = resolve(&current, bad).unwrap_err();
            assert!(matches!(e, LogDirError::BadName(_)), "{bad}: {e:?}");
        }
        for unknown in ["secret", "jm.log.2", "tm.log"] {
            let e = resolve(&current, unknown).unwrap_err();
            assert!(matches!(e, LogDirError::Unknown(_)), "{unknown}: {e:?}");
            assert!(e.to_string().contains(unknown), "{e}");
        }
    }

    #[test]
    fn a_tail_is_the_whole_small_file_or_the_last_whole_lines_of_a_big_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tm.log");
        std::fs::write(&path, "first line\nsecond line\nthird\n").unwrap();
        let whole = tail(&path, 1024).unwrap();
        assert_eq!(whole.text, "first line\nsecond line\nthird\n");
        assert_eq!(whole.skipped, 0);
        // The last 14 bytes are "d line\nthird\n": the cut line is dropped.
        let end = tail(&path, 14).unwrap();
        assert_eq!(end.text, "third\n");
        assert_eq!(end.skipped, 29 - 6);
        let e = tail(&dir.path().join("rolled"), 10).unwrap_err();
        assert!(matches!(e, LogDirError::Gone(_)), "{e:?}");
    }
}
