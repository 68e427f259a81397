//! Sinks: where records leave a job.

use std::fmt::Display;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::context::{RuntimeContext, TaskError};

/// A user-defined sink. One instance runs per parallel subtask.
pub trait SinkFunction<T>: 'static {
    /// Takes one record.
    fn invoke(&mut self, record: T) -> Result<(), TaskError>;
    /// The input has ended: make everything written durable.
    fn finish(&mut self) -> Result<(), TaskError> {
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

impl<T: Display> SinkFunction<T> for TextFileSink {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        writeln!(self.writer, "{record}")
            .map_err(|e| TaskError::io(format!("cannot write {}", self.path.display()), e))
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        let err = |e| TaskError::io(format!("cannot write {}", self.path.display()), e);
        self.writer.flush().map_err(err)?;
        self.writer.get_ref().sync_all().map_err(err)
    }
}

/// Writes one line per record into `DIR/part-<subtask>-<attempt>`: every subtask and every
/// attempt has its own file, so restarted attempts never overwrite earlier output. Not
/// transactional: what an attempt wrote before a failure stays visible.
pub(crate) struct PartFileSink {
    inner: TextFileSink,
}

impl PartFileSink {
    pub(crate) fn open(dir: &std::path::Path, ctx: &RuntimeContext) -> Result<Self, TaskError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            TaskError::io(
                format!("cannot create output directory {}", dir.display()),
                e,
            )
        })?;
        let path = dir.join(format!("part-{}-{}", ctx.subtask_index(), ctx.attempt()));
        let file = File::create(&path).map_err(|e| {
            TaskError::io(format!("cannot create output file {}", path.display()), e)
        })?;
        Ok(PartFileSink {
            inner: TextFileSink {
                writer: BufWriter::with_capacity(256 * 1024, file),
                path,
            },
        })
    }
}

impl<T: Display> SinkFunction<T> for PartFileSink {
    fn invoke(&mut self, record: T) -> Result<(), TaskError> {
        self.inner.invoke(record)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        SinkFunction::<T>::finish(&mut self.inner)
    }
}

/// Drops every record (for throughput tests).
pub(crate) struct DiscardSink;

impl<T> SinkFunction<T> for DiscardSink {
    fn invoke(&mut self, _record: T) -> Result<(), TaskError> {
        Ok(())
    }
}
