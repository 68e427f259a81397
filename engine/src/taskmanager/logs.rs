//! A TaskManager's answers to the JobManager's log requests (the REST API's
//! `/taskmanagers/:id/logs`, `/logs/:name`, `/log`, `/stdout`): only its own log file and that
//! file's rolled-over copies are ever read (`crate::logdir`), and at most their last
//! [`LOG_TAIL_BYTES`].

use std::path::Path;

use crate::logdir::{self, LogDirError};
use crate::rpc::messages::{LOG_TAIL_BYTES, LogAnswer, LogQuery};

/// Answers `query` from the log this process's stderr writes to (`log`) and the file its stdout
/// writes to (`stdout`); `None` where they go to a terminal or a pipe.
pub(crate) fn answer(query: &LogQuery, log: Option<&Path>, stdout: Option<&Path>) -> LogAnswer {
    let no_log = || LogAnswer::NotFound {
        reason: "the TaskManager logs to a terminal or a pipe, not to a file: start it with \
                 scripts/taskmanager.sh to have a log file"
            .into(),
    };
    let result = match query {
        LogQuery::List => match log {
            Some(log) => logdir::list(log).map(|logs| LogAnswer::List { logs }),
            // Flink lists nothing rather than failing.
            None => Ok(LogAnswer::List { logs: Vec::new() }),
        },
        LogQuery::File { name } => match (logdir::check_name(name), log) {
            (Err(e), _) => Err(e),
            (Ok(()), None) => return no_log(),
            (Ok(()), Some(log)) => logdir::resolve(log, name)
                .and_then(|path| logdir::tail(&path, LOG_TAIL_BYTES))
                .map(LogAnswer::Text),
        },
        LogQuery::Current => match log {
            Some(log) => logdir::tail(log, LOG_TAIL_BYTES).map(LogAnswer::Text),
            None => return no_log(),
        },
        LogQuery::Stdout => match stdout {
            Some(out) => logdir::tail(out, LOG_TAIL_BYTES).map(LogAnswer::Text),
            None => {
                return LogAnswer::NotFound {
                    reason: "the TaskManager's stdout is a terminal or a pipe, not a file".into(),
                };
            }
        },
    };
    result.unwrap_or_else(|e| match e {
        LogDirError::BadName(_) => LogAnswer::BadName {
            reason: e.to_string(),
        },
        LogDirError::Unknown(_) | LogDirError::Gone(_) => LogAnswer::NotFound {
            reason: e.to_string(),
        },
        _ => LogAnswer::Failed {
            reason: e.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taskmanager_answers_from_its_own_log_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sluice-taskmanager-0.log");
        std::fs::write(&log, "registered at the JobManager\n").unwrap();
        std::fs::write(dir.path().join("sluice-taskmanager-0.log.1"), "older\n").unwrap();
        std::fs::write(
            dir.path().join("sluice-taskmanager-1.log"),
            "the other one\n",
        )
        .unwrap();
        let ask = |q: LogQuery| answer(&q, Some(&log), None);

        match ask(LogQuery::List) {
            LogAnswer::List { logs } => {
                let names: Vec<&str> = logs.iter().map(|l| l.name.as_str()).collect();
                assert_eq!(
                    names,
                    ["sluice-taskmanager-0.log", "sluice-taskmanager-0.log.1"]
                );
            }
            other => panic!("{other:?}"),
        }
        match ask(LogQuery::Current) {
            LogAnswer::Text(t) => assert_eq!(t.text, "registered at the JobManager\n"),
            other => panic!("{other:?}"),
        }
        match ask(LogQuery::File {
            name: "sluice-taskmanager-0.log.1".into(),
        }) {
            LogAnswer::Text(t) => assert_eq!(t.text, "older\n"),
            other => panic!("{other:?}"),
        }
        for bad in ["../x", "/etc/passwd", ".."] {
            let a = ask(LogQuery::File { name: bad.into() });
            assert!(matches!(a, LogAnswer::BadName { .. }), "{bad}: {a:?}");
        }
        for unknown in ["sluice-taskmanager-1.log", "nothing"] {
            let a = ask(LogQuery::File {
                name: unknown.into(),
            });
            assert!(matches!(a, LogAnswer::NotFound { .. }), "{unknown}: {a:?}");
        }
        assert!(matches!(ask(LogQuery::Stdout), LogAnswer::NotFound { .. }));
    }

    #[test]
    fn without_a_log_file_the_list_is_empty_and_texts_are_not_found() {
        assert_eq!(
            answer(&LogQuery::List, None, None),
            LogAnswer::List { logs: Vec::new() }
        );
        assert!(matches!(
            answer(&LogQuery::Current, None, None),
            LogAnswer::NotFound { .. }
        ));
        // A bad name is refused as such even then.
        assert!(matches!(
            answer(
                &LogQuery::File {
                    name: "../x".into()
                },
                None,
                None
            ),
            LogAnswer::BadName { .. }
        ));
    }
}
