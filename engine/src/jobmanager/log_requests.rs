//! The JobManager's open log requests to TaskManagers (the REST API's
//! `/taskmanagers/:id/log*`): each is numbered, sent over the TaskManager's control connection,
//! and waits for the answer with its number. An answer is accepted only from the TaskManager
//! that was asked; a request whose answer never comes is forgotten when its asker stops
//! waiting, so the table holds only requests someone still waits for.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::common::ids::ResourceId;
use crate::rpc::messages::LogAnswer;

/// Why a TaskManager's log could not be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskManagerLogError {
    /// No TaskManager of that id is registered (or it has no control connection now).
    #[error("TaskManager {0} not found")]
    UnknownTaskManager(String),
    /// Its control connection ended before it answered.
    #[error("TaskManager {0} was lost before it sent its log")]
    ConnectionLost(String),
    /// It did not answer in time.
    #[error("TaskManager {0} did not send its log within {1:?}")]
    Timeout(String, std::time::Duration),
}

/// The open requests.
#[derive(Debug, Default)]
pub struct LogRequests {
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    next: u64,
    waiting: HashMap<u64, (ResourceId, oneshot::Sender<LogAnswer>)>,
}

/// A request's number and where its answer arrives; dropping it forgets the request.
#[derive(Debug)]
pub struct PendingLog<'a> {
    requests: &'a LogRequests,
    /// The number to send with the request.
    pub request: u64,
    /// Gets the answer, or an error when the request was forgotten (the connection ended).
    pub answer: oneshot::Receiver<LogAnswer>,
}

impl Drop for PendingLog<'_> {
    fn drop(&mut self) {
        self.requests.lock().waiting.remove(&self.request);
    }
}

impl LogRequests {
    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a request to `taskmanager`.
    pub fn open(&self, taskmanager: &str) -> PendingLog<'_> {
        let (tx, rx) = oneshot::channel();
        let mut open = self.lock();
        let request = open.next;
        open.next += 1;
        open.waiting.insert(request, (taskmanager.to_string(), tx));
        PendingLog {
            requests: self,
            request,
            answer: rx,
        }
    }

    /// Hands `answer` from `taskmanager` to the request it answers; false if no one waits
    /// for it (a late answer, or one from a TaskManager that was not asked).
    pub fn answer(&self, taskmanager: &str, request: u64, answer: LogAnswer) -> bool {
        let mut open = self.lock();
        match open.waiting.get(&request) {
            Some((asked, _)) if asked == taskmanager => {}
            _ => return false,
        }
        match open.waiting.remove(&request) {
            Some((_, tx)) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// Forgets the requests to `taskmanager` (its connection ended): their askers get an error
    /// at once instead of waiting for their timeout.
    pub fn forget(&self, taskmanager: &str) {
        self.lock()
            .waiting
            .retain(|_, (asked, _)| asked != taskmanager);
    }

    /// How many requests wait.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> LogAnswer {
        LogAnswer::Text(crate::logdir::LogTail {
            text: t.into(),
            skipped: 0,
        })
    }

    #[test]
    fn an_answer_reaches_its_request_only_from_the_taskmanager_asked() {
        let requests = LogRequests::default();
        let mut a = requests.open("tm-a");
        let mut b = requests.open("tm-b");
        assert_ne!(a.request, b.request);
        assert!(!requests.answer("tm-b", a.request, text("forged")));
        assert!(!requests.answer("tm-a", 999, text("unknown")));
        assert!(requests.answer("tm-a", a.request, text("from a")));
        assert_eq!(a.answer.try_recv().unwrap(), text("from a"));
        // Answered once: a second answer finds no one waiting.
        assert!(!requests.answer("tm-a", a.request, text("again")));
        requests.forget("tm-b");
        assert!(b.answer.try_recv().is_err());
        drop((a, b));
        assert_eq!(requests.waiting(), 0);
    }

    #[test]
    fn a_request_its_asker_gave_up_is_forgotten() {
        let requests = LogRequests::default();
        let pending = requests.open("tm-a");
        let request = pending.request;
        assert_eq!(requests.waiting(), 1);
        drop(pending);
        assert_eq!(requests.waiting(), 0);
        assert!(!requests.answer("tm-a", request, text("late")));
    }
}
