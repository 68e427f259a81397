//! Sinks: where records leave a job.

use std::fmt::Display;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::context::RuntimeContext;
use crate::common::error::TaskError;

/// A user-defined sink. One instance runs per parallel subtask.
pub trait SinkFunction<T>: 'static {
    /// Takes one record.
    fn invoke(&mut self, record: T) -> Result<(), TaskError>;
    /// Takes the records of `batch` in order, leaving it empty: `invoke` for each, unless the
    /// sink has a faster way to take many.
    fn invoke_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        for record in batch.drain(..) {
            self.invoke(record)?;
        }
        Ok(())
    }
    /// The input has ended: make everything written durable.
    fn finish(&mut self) -> Result<(), TaskError> {
        Ok(())
    }
    /// A checkpoint barrier arrived: make what was written so far durable (pre-commit) and
    /// return the sink's operator state, e.g. the transactions to commit later.
    fn snapshot_state(&mut self, _checkpoint_id: u64) -> Result<Vec<Vec<u8>>, TaskError> {
        Ok(Vec::new())
    }
    /// The checkpoint completed: commit what it pre-committed.
    fn checkpoint_complete(&mut self, _checkpoint_id: u64) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Prints records to standard output, prefixed with the subtask's number (from 1) when the sink
/// runs in parallel, as Flink's `print()` does.
pub(crate) struct PrintSink {
    pub(crate) prefix: String,
}

impl PrintSink {
    pub(crate) fn new(ctx: &RuntimeContext) -> Self {
        let prefix = if ctx.parallelism() > 1 {
            format!("{}> ", ctx.subtask_index() + 1)
        } else {
            String::new()
        };
        PrintSink { prefix }
    }
}

impl<T: Display> SinkFunction<T> for PrintSink {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}{record}", self.prefix)
            .map_err(|e| TaskError::io("cannot print to standard output", e))
    }
}

/// Writes one line per record. With parallelism 1 the path is the file; otherwise the path is a
/// directory holding one file per subtask, named by its number from 1 (Flink's `writeAsText`).
pub(crate) struct TextFileSink {
    path: PathBuf,
    writer: BufWriter<File>,
}

impl TextFileSink {
    pub(crate) fn open(path: &std::path::Path, ctx: &RuntimeContext) -> Result<Self, TaskError> {
        let path = if ctx.parallelism() == 1 {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| {
                    TaskError::io(format!("cannot create directory {}", parent.display()), e)
                })?;
            }
            path.to_path_buf()
        } else {
            std::fs::create_dir_all(path).map_err(|e| {
                TaskError::io(
                    format!("cannot create output directory {}", path.display()),
                    e,
                )
            })?;
            path.join((ctx.subtask_index() + 1).to_string())
        };
        let file = File::create(&path).map_err(|e| {
            TaskError::io(format!("cannot create output file {}", path.display()), e)
        })?;
        Ok(TextFileSink {
            writer: BufWriter::with_capacity(256 * 1024, file),
            path,
        })
    }
}

impl TextFileSink {
    fn sync(&mut self) -> Result<(), TaskError> {
        let err = |e| TaskError::io(format!("cannot write {}", self.path.display()), e);
        self.writer.flush().map_err(err)?;
        self.writer.get_ref().sync_all().map_err(err)
    }
}

impl<T: Display> SinkFunction<T> for TextFileSink {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        writeln!(self.writer, "{record}")
            .map_err(|e| TaskError::io(format!("cannot write {}", self.path.display()), e))
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.sync()
    }
    /// At least once: what was written before the barrier is on disk.
    fn snapshot_state(&mut self, _checkpoint_id: u64) -> Result<Vec<Vec<u8>>, TaskError> {
        self.sync()?;
        Ok(Vec::new())
    }
}

/// An exactly-once file sink (Flink's `FileSink` with two-phase commit). Records go to a hidden
/// in-progress file `DIR/.part-<subtask>-<attempt>-<token>-<n>.inprogress`; a checkpoint barrier
/// closes it and renames it to `.pending` (pre-commit), and the file's name becomes part of the
/// checkpoint; when the checkpoint completes the file is renamed to its visible name
/// `part-<subtask>-<attempt>-<token>-<n>` (commit). A restored subtask commits the pending
/// files of the checkpoint it restores (commits are idempotent); what a failed attempt wrote
/// after its last checkpoint stays hidden. Without checkpointing, files commit when the input
/// ends. The random token keeps a job restarted from a savepoint from reusing names.
pub(crate) struct TransactionalFileSink {
    dir: PathBuf,
    base: String,
    counter: u64,
    current: Option<(String, BufWriter<File>)>,
    /// Pre-committed files with the checkpoint that covers them.
    pending: Vec<(u64, String)>,
    checkpointing: bool,
}

impl TransactionalFileSink {
    pub(crate) fn open(dir: &std::path::Path, ctx: &RuntimeContext) -> Result<Self, TaskError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            TaskError::io(
                format!("cannot create output directory {}", dir.display()),
                e,
            )
        })?;
        let sink = TransactionalFileSink {
            dir: dir.to_path_buf(),
            base: format!(
                "part-{}-{}-{:08x}",
                ctx.subtask_index(),
                ctx.attempt(),
                rand::random::<u32>()
            ),
            counter: 0,
            current: None,
            pending: Vec::new(),
            checkpointing: ctx.state.checkpointing,
        };
        // Commit what the restored checkpoint pre-committed (it completed, or we would not
        // restore it), whichever subtask wrote it.
        for element in ctx.restored_operator_state()?.unwrap_or_default() {
            let name = String::from_utf8(element).map_err(|_| {
                TaskError::State("a pending file name in the restored state is not UTF-8".into())
            })?;
            // The sink writes plain part file names; anything else would rename files outside
            // its directory.
            if !name.starts_with("part-") || name.contains(['/', '\\', '\0']) {
                return Err(TaskError::State(format!(
                    "cannot restore the file sink: {name:?} in the restored state is not a part file name it writes"
                )));
            }
            sink.commit(&name)?;
        }
        Ok(sink)
    }

    fn hidden(&self, name: &str, suffix: &str) -> PathBuf {
        self.dir.join(format!(".{name}.{suffix}"))
    }

    /// Makes a pre-committed file visible; done already is fine, lost is an error.
    fn commit(&self, name: &str) -> Result<(), TaskError> {
        let pending = self.hidden(name, "pending");
        let visible = self.dir.join(name);
        match std::fs::rename(&pending, &visible) {
            Ok(()) => Ok(()),
            Err(_) if visible.exists() => Ok(()),
            Err(e) => Err(TaskError::io(
                format!(
                    "cannot commit {}: the pre-committed file is gone",
                    pending.display()
                ),
                e,
            )),
        }
    }

    /// Closes the in-progress file, if any, and renames it to pending.
    fn pre_commit(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        let Some((name, mut writer)) = self.current.take() else {
            return Ok(());
        };
        let inprogress = self.hidden(&name, "inprogress");
        let err = |e| TaskError::io(format!("cannot write {}", inprogress.display()), e);
        writer.flush().map_err(err)?;
        writer.get_ref().sync_all().map_err(err)?;
        drop(writer);
        let pending = self.hidden(&name, "pending");
        std::fs::rename(&inprogress, &pending)
            .map_err(|e| TaskError::io(format!("cannot pre-commit {}", inprogress.display()), e))?;
        self.pending.push((checkpoint_id, name));
        Ok(())
    }

    fn writer(&mut self) -> Result<&mut BufWriter<File>, TaskError> {
        if self.current.is_none() {
            let name = format!("{}-{}", self.base, self.counter);
            self.counter += 1;
            let path = self.hidden(&name, "inprogress");
            let file = File::create(&path).map_err(|e| {
                TaskError::io(format!("cannot create output file {}", path.display()), e)
            })?;
            self.current = Some((name, BufWriter::with_capacity(256 * 1024, file)));
        }
        match &mut self.current {
            Some((_, w)) => Ok(w),
            None => Err(TaskError::State("no in-progress file".into())),
        }
    }
}

impl<T: Display> SinkFunction<T> for TransactionalFileSink {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        let written = writeln!(self.writer()?, "{record}");
        written.map_err(|e| TaskError::io(format!("cannot write into {}", self.dir.display()), e))
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        if self.checkpointing {
            // The task takes a final checkpoint after its input ended; its completion commits.
            return Ok(());
        }
        self.pre_commit(0)?;
        for (_, name) in std::mem::take(&mut self.pending) {
            self.commit(&name)?;
        }
        Ok(())
    }
    fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<Vec<Vec<u8>>, TaskError> {
        self.pre_commit(checkpoint_id)?;
        Ok(self
            .pending
            .iter()
            .map(|(_, name)| name.as_bytes().to_vec())
            .collect())
    }
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        let (done, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(id, _)| *id <= checkpoint_id);
        self.pending = later;
        for (_, name) in done {
            self.commit(&name)?;
        }
        Ok(())
    }
}

/// Drops every record (for throughput tests).
pub(crate) struct DiscardSink;

impl<T> SinkFunction<T> for DiscardSink {
    fn invoke(&mut self, _record: T) -> Result<(), TaskError> {
        Ok(())
    }
    fn invoke_batch(&mut self, batch: &mut Vec<T>) -> Result<(), TaskError> {
        batch.clear();
        Ok(())
    }
}
