//! Log files over REST, as Flink serves them. The JobManager's: `GET /jobmanager/logs` lists
//! them, `GET /jobmanager/logs/:name` and `GET /jobmanager/log` (the current one) answer their
//! text. A TaskManager's, fetched from it over its control connection:
//! `GET /taskmanagers/:id/logs`, `/taskmanagers/:id/logs/:name`, `/taskmanagers/:id/log` and
//! `/taskmanagers/:id/stdout` (the last `LOG_TAIL_BYTES` of a file). A log is the file the
//! daemon's stderr was redirected to (`scripts/daemon.sh`) and its rolled-over copies
//! `<name>.1`, `<name>.2`, ... (`log.file.max-count`); `crate::logdir` makes sure a requested
//! name only ever reaches one of them.

use std::path::{Path, PathBuf};

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error::ApiError;
use crate::jobmanager::log_requests::TaskManagerLogError;
use crate::jobmanager::service::JobManagerShared;
use crate::logdir::{LogDirError, LogFile};
use crate::rpc::messages::{LogAnswer, LogQuery};

/// A log-directory error as a REST answer: a bad name is a 400, an unknown or vanished file a
/// 404, anything else a 500. `whose` names the daemon ("The JobManager", "TaskManager x").
pub fn api_error(whose: &str, e: LogDirError) -> ApiError {
    match e {
        LogDirError::BadName(_) => ApiError::bad_request(format!("Bad request: {e}")),
        LogDirError::Unknown(name) => ApiError::not_found(format!(
            "{whose} has no log file named '{name}' (see its logs list)"
        )),
        LogDirError::Gone(_) => ApiError::not_found(format!("{whose}: {e}")),
        _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("{whose}: {e}")),
    }
}

/// The path of the JobManager's listed log file `name` (see [`crate::logdir::resolve`]).
pub fn resolve(current: &Path, name: &str) -> Result<PathBuf, ApiError> {
    crate::logdir::resolve(current, name).map_err(|e| api_error("The JobManager", e))
}

/// Refuses a name that could step out of the log directory.
pub fn check_name(name: &str) -> Result<(), ApiError> {
    crate::logdir::check_name(name).map_err(|e| api_error("The JobManager", e))
}

/// The JobManager's log files.
pub fn list(current: &Path) -> Result<Vec<LogFile>, ApiError> {
    crate::logdir::list(current).map_err(|e| api_error("The JobManager", e))
}

/// The log this process writes, or why there is none.
pub fn current() -> Result<PathBuf, ApiError> {
    crate::logdir::stderr_file().ok_or_else(|| {
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

/// `GET /jobmanager/logs`, `GET /taskmanagers/:id/logs` (Flink's `LogListInfo`).
pub fn list_json(files: &[LogFile]) -> Value {
    let logs: Vec<Value> = files
        .iter()
        .map(|f| json!({ "name": f.name, "size": f.size, "mtime": f.mtime }))
        .collect();
    json!({ "logs": logs })
}

/// Text as a `text/plain` answer.
pub fn plain(text: impl Into<axum::body::Body>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text.into(),
    )
        .into_response()
}

/// A log file's text (as Flink, the whole file; `log.file.max-size` bounds it).
pub async fn text(path: &Path) -> Response {
    match tokio::fs::read(path).await {
        Ok(bytes) => plain(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Rolled over between the listing and the read.
            ApiError::not_found(format!("The log {} is gone", path.display())).into_response()
        }
        Err(e) => not_readable(path, &e).into_response(),
    }
}

/// The header of a TaskManager's log text naming the bytes of the file's start left out (the
/// file was longer than `LOG_TAIL_BYTES`); 0 for a whole file.
pub const SKIPPED_HEADER: &str = "x-sluice-log-skipped-bytes";

/// Asks TaskManager `id` for `query` and turns its answer into the REST answer: a JSON list,
/// a `text/plain` file, or Flink's `{"errors": [...]}` with a status saying whose fault it is.
pub async fn from_taskmanager(
    shared: &JobManagerShared,
    id: &str,
    query: LogQuery,
) -> Result<Response, ApiError> {
    let whose = format!("TaskManager {id}");
    if shared.view().resources().taskmanager(id).is_none() {
        return Err(ApiError::not_found(format!("{whose} not found")));
    }
    let answer = shared.taskmanager_log(id, query).await.map_err(|e| {
        let status = match e {
            TaskManagerLogError::UnknownTaskManager(_) => StatusCode::NOT_FOUND,
            TaskManagerLogError::Timeout(..) => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError::new(status, e.to_string())
    })?;
    match answer {
        LogAnswer::List { logs } => Ok(axum::Json(list_json(&logs)).into_response()),
        LogAnswer::Text(tail) => {
            let mut answer = plain(tail.text);
            // How much of the file's start was left out, for a client that wants to say so.
            answer
                .headers_mut()
                .insert(SKIPPED_HEADER, header::HeaderValue::from(tail.skipped));
            Ok(answer)
        }
        LogAnswer::BadName { reason } => Err(ApiError::bad_request(format!(
            "Bad request: {whose}: {reason}"
        ))),
        LogAnswer::NotFound { reason } => Err(ApiError::not_found(format!("{whose}: {reason}"))),
        LogAnswer::Failed { reason } => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{whose}: {reason}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_errors_answer_400_for_a_path_and_404_for_an_unknown_name() {
        let dir = tempfile::tempdir().unwrap();
        let current = dir.path().join("jm.log");
        std::fs::write(&current, "x").unwrap();
        std::fs::write(dir.path().join("secret"), "z").unwrap();
        assert_eq!(resolve(&current, "jm.log").unwrap(), current);
        for bad in ["../jm.log", "/etc/passwd", ""] {
            let e = resolve(&current, bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad}: {e:?}");
        }
        let e = resolve(&current, "secret").unwrap_err();
        assert_eq!(e.status, StatusCode::NOT_FOUND, "{e:?}");
        assert!(e.errors[0].contains("secret"), "{e:?}");
        let json = list_json(&list(&current).unwrap());
        assert_eq!(json["logs"][0]["name"], "jm.log");
        assert_eq!(json["logs"][0]["size"], 1);
    }
}
