//! Sinks: where records leave a job.

use std::fmt::Display;
use std::io::{BufWriter, Write};
use std::sync::Arc;

use super::context::RuntimeContext;
use super::sources::storage_path;
use crate::common::error::TaskError;
use crate::state::{OutputFile, StateStorage};

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

/// The buffer between a file sink's records and its file system: large writes, few calls.
const SINK_BUFFER: usize = 256 * 1024;

/// A file a sink writes, buffered.
type SinkFile = BufWriter<Box<dyn OutputFile>>;

/// Creates `path` on `storage` for a sink to write.
fn create_sink_file(storage: &dyn StateStorage, path: &str) -> Result<SinkFile, TaskError> {
    let file = storage
        .create_file(path)
        .map_err(|e| TaskError::io(format!("cannot create output file {path}"), e))?;
    Ok(BufWriter::with_capacity(SINK_BUFFER, file))
}

/// Writes out `file`'s buffer and makes what it holds durable, keeping it open.
fn sync_sink_file(file: &mut SinkFile, path: &str) -> Result<(), TaskError> {
    let err = |e| TaskError::io(format!("cannot write {path}"), e);
    file.flush().map_err(err)?;
    file.get_mut().sync().map_err(err)
}

/// Writes out `file`'s buffer and closes it: everything it holds is durable.
fn close_sink_file(file: SinkFile, path: &str) -> Result<(), TaskError> {
    let err = |e| TaskError::io(format!("cannot write {path}"), e);
    file.into_inner()
        .map_err(|e| err(e.into_error()))?
        .close()
        .map_err(err)
}

/// Creates the directory `dir` (and its parents) on `storage`.
fn create_sink_dir(storage: &dyn StateStorage, dir: &str) -> Result<(), TaskError> {
    storage
        .create_dir(dir)
        .map_err(|e| TaskError::io(format!("cannot create output directory {dir}"), e))
}

/// The directory a file path lies in, if it names one.
fn parent_of(path: &str) -> Option<&str> {
    let trimmed = path.trim_end_matches('/');
    let (parent, _) = trimmed.rsplit_once('/')?;
    // `/x` lies in the root, and `hdfs://nn/x` in the cluster's root: nothing to create.
    (!parent.is_empty() && !parent.ends_with(':') && !parent.ends_with("//")).then_some(parent)
}

/// `dir/name` as a storage path.
fn child(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// Writes one line per record. With parallelism 1 the path is the file; otherwise the path is a
/// directory holding one file per subtask, named by its number from 1 (Flink's `writeAsText`).
/// Any file system of the subtask's storage: a local path or an `hdfs://` URI.
pub(crate) struct TextFileSink {
    path: String,
    writer: Option<SinkFile>,
}

impl TextFileSink {
    pub(crate) fn open(path: &std::path::Path, ctx: &RuntimeContext) -> Result<Self, TaskError> {
        let storage = ctx.state.storage.as_ref();
        let path = storage_path(path)?;
        let path = if ctx.parallelism() == 1 {
            if let Some(parent) = parent_of(path) {
                storage
                    .create_dir(parent)
                    .map_err(|e| TaskError::io(format!("cannot create directory {parent}"), e))?;
            }
            path.to_string()
        } else {
            create_sink_dir(storage, path)?;
            child(path, &(ctx.subtask_index() + 1).to_string())
        };
        Ok(TextFileSink {
            writer: Some(create_sink_file(storage, &path)?),
            path,
        })
    }

    fn writer(&mut self) -> Result<&mut SinkFile, TaskError> {
        let path = &self.path;
        self.writer
            .as_mut()
            .ok_or_else(|| TaskError::State(format!("the output file {path} is closed")))
    }
}

impl<T: Display> SinkFunction<T> for TextFileSink {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        let written = writeln!(self.writer()?, "{record}");
        written.map_err(|e| TaskError::io(format!("cannot write {}", self.path), e))
    }
    /// The end of input closes the file: all of it is durable (and, on HDFS, complete).
    fn finish(&mut self) -> Result<(), TaskError> {
        match self.writer.take() {
            Some(writer) => close_sink_file(writer, &self.path),
            None => Ok(()),
        }
    }
    /// At least once: what was written before the barrier is durable (after the end of
    /// input, the closed file is already).
    fn snapshot_state(&mut self, _checkpoint_id: u64) -> Result<Vec<Vec<u8>>, TaskError> {
        if let Some(writer) = self.writer.as_mut() {
            sync_sink_file(writer, &self.path)?;
        }
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
///
/// Files are only ever written whole and renamed, never appended to, so the directory may be on
/// any file system of the subtask's storage: a local path or an `hdfs://` URI.
pub(crate) struct TransactionalFileSink {
    storage: Arc<dyn StateStorage>,
    dir: String,
    base: String,
    counter: u64,
    current: Option<(String, SinkFile)>,
    /// Pre-committed files with the checkpoint that covers them.
    pending: Vec<(u64, String)>,
    checkpointing: bool,
}

impl TransactionalFileSink {
    pub(crate) fn open(dir: &std::path::Path, ctx: &RuntimeContext) -> Result<Self, TaskError> {
        let storage = ctx.state.storage.clone();
        let dir = storage_path(dir)?.trim_end_matches('/').to_string();
        create_sink_dir(storage.as_ref(), &dir)?;
        let sink = TransactionalFileSink {
            storage,
            dir,
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

    fn hidden(&self, name: &str, suffix: &str) -> String {
        child(&self.dir, &format!(".{name}.{suffix}"))
    }

    /// Makes a pre-committed file visible; done already is fine, lost is an error.
    fn commit(&self, name: &str) -> Result<(), TaskError> {
        let pending = self.hidden(name, "pending");
        let visible = child(&self.dir, name);
        match self.storage.rename(&pending, &visible) {
            Ok(()) => Ok(()),
            Err(_) if matches!(self.storage.status(&visible), Ok(Some(_))) => Ok(()),
            Err(e) => Err(TaskError::io(
                format!("cannot commit {pending}: the pre-committed file is gone"),
                e,
            )),
        }
    }

    /// Closes the in-progress file, if any, and renames it to pending.
    fn pre_commit(&mut self, checkpoint_id: u64) -> Result<(), TaskError> {
        let Some((name, writer)) = self.current.take() else {
            return Ok(());
        };
        let inprogress = self.hidden(&name, "inprogress");
        close_sink_file(writer, &inprogress)?;
        let pending = self.hidden(&name, "pending");
        self.storage
            .rename(&inprogress, &pending)
            .map_err(|e| TaskError::io(format!("cannot pre-commit {inprogress}"), e))?;
        self.pending.push((checkpoint_id, name));
        Ok(())
    }

    fn writer(&mut self) -> Result<&mut SinkFile, TaskError> {
        if self.current.is_none() {
            let name = format!("{}-{}", self.base, self.counter);
            self.counter += 1;
            let path = self.hidden(&name, "inprogress");
            let file = create_sink_file(self.storage.as_ref(), &path)?;
            self.current = Some((name, file));
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
        written.map_err(|e| TaskError::io(format!("cannot write into {}", self.dir), e))
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
