//! Ctrl-C and SIGTERM for the CLI verbs that must clean up before they exit.

use crate::yarn::YarnError;

/// Ctrl-C and SIGTERM, caught from the moment the client starts submitting: a signal during
/// submission must not kill the client before it can kill the application it created.
pub(crate) struct Interrupt(tokio::sync::watch::Receiver<bool>);

impl Interrupt {
    pub(crate) fn install() -> Result<Self, YarnError> {
        use tokio::signal::unix::{SignalKind, signal};
        let io = |cause| YarnError::Io {
            what: "cannot watch signals",
            path: "SIGINT/SIGTERM".into(),
            cause,
        };
        let mut int = signal(SignalKind::interrupt()).map_err(io)?;
        let mut term = signal(SignalKind::terminate()).map_err(io)?;
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            let _ = tx.send(true);
        });
        Ok(Interrupt(rx))
    }

    pub(crate) fn happened(&self) -> bool {
        *self.0.borrow()
    }

    pub(crate) async fn wait(&mut self) {
        while !*self.0.borrow_and_update() {
            if self.0.changed().await.is_err() {
                // The watcher is gone: no signal will ever come.
                std::future::pending::<()>().await;
            }
        }
    }
}
