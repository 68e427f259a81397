//! The JobManager's log files over REST, as Flink serves them: `GET /jobmanager/logs` lists
//! them, `GET /jobmanager/logs/:name` and `GET /jobmanager/log` (the current one) answer their
//! text. The log is the file the daemon's stderr was redirected to (`scripts/daemon.sh`) and its
//! rolled-over copies `<name>.1`, `<name>.2`, ... (`log.file.max-count`). A requested name is
//! only ever looked up among the listed names, so it can never reach another path.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error::ApiError;

/// One log file of the list (Flink's `LogInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Its file name (no directory).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written (ms since the epoch).
    pub mtime: u64,
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
pub fn list(current: &Path) -> std::io::Result<Vec<LogFile>> {
    let dir = current.parent().unwrap_or(Path::new("."));
    let base = current
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
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

/// The path of the listed log file `name`. A name with a path separator or `..` is refused
/// before anything is looked up; any other name must be one of [`list`]'s.
pub fn resolve(current: &Path, name: &str) -> Result<PathBuf, ApiError> {
    check_name(name)?;
    let files = list(current).map_err(|e| not_readable(current, &e))?;
    if !files.iter().any(|f| f.name == name) {
        return Err(ApiError::not_found(format!(
            "The JobManager has no log file named '{name}' (see /jobmanager/logs)"
        )));
    }
    Ok(current.with_file_name(name))
}

/// Refuses a name that could step out of the log directory.
pub fn check_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.contains('/') || name.contains('\\') || name.contains("..") {
        return Err(ApiError::bad_request(format!(
            "Bad request: '{name}' is not a log file name (no paths, no '..')"
        )));
    }
    Ok(())
}

/// The log this process writes, or why there is none.
pub fn current() -> Result<PathBuf, ApiError> {
    crate::logfile::stderr_file().ok_or_else(|| {
        ApiError::not_found(
            "This JobManager logs to a terminal or a pipe, not to a file: start it with \
             scripts/jobmanager.sh to have a log file",
        )
    })
}

fn not_readable(path: &Path, e: &std::io::Error) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("Cannot read the log {}: {e}", path.display()),
    )
}

/// `GET /jobmanager/logs` (Flink's `LogListInfo`).
pub fn list_json(files: &[LogFile]) -> Value {
    let logs: Vec<Value> = files
        .iter()
        .map(|f| json!({ "name": f.name, "size": f.size, "mtime": f.mtime }))
        .collect();
    json!({ "logs": logs })
}

/// A log file's text (as Flink, the whole file; `log.file.max-size` bounds it).
pub async fn text(path: &Path) -> Response {
    match tokio::fs::read(path).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes).into_response(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Rolled over between the listing and the read.
            ApiError::not_found(format!("The log {} is gone", path.display())).into_response()
        }
        Err(e) => not_readable(path, &e).into_response(),
    }
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
        assert!(files[0].mtime > 0);
        let json = list_json(&files);
        assert_eq!(json["logs"][1]["name"], "sluice-jobmanager-0.log.1");
        assert_eq!(json["logs"][1]["size"], 3);
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
        ] {
            let e = resolve(&current, bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad}: {e:?}");
        }
        for unknown in ["secret", "jm.log.2", "tm.log"] {
            let e = resolve(&current, unknown).unwrap_err();
            assert_eq!(e.status, StatusCode::NOT_FOUND, "{unknown}: {e:?}");
            assert!(e.errors[0].contains(unknown), "{e:?}");
        }
    }
}
