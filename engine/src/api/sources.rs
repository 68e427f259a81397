//! Sources: where records enter a job. Bounded ones end by themselves; unbounded ones run until
//! the job is cancelled.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::{RuntimeContext, TaskError};
use super::operators::Output;

/// How a running task lets a source flush buffers on time and notice cancellation.
pub(crate) trait SourceHooks {
    /// Called often by the source context: flush output buffers that are due and fail with
    /// [`TaskError::Cancelled`] once cancelled.
    fn tick(&mut self) -> Result<(), TaskError>;
}

/// What a source uses to emit records.
pub struct SourceContext<'a, T> {
    pub(crate) out: &'a mut dyn Output<T>,
    pub(crate) runtime: &'a RuntimeContext,
    pub(crate) hooks: &'a mut dyn SourceHooks,
    pub(crate) since_tick: u32,
}

impl<T> SourceContext<'_, T> {
    /// Emits one record downstream. Blocks while downstream is backpressured.
    pub fn collect(&mut self, record: T) -> Result<(), TaskError> {
        self.out.push(record)?;
        self.since_tick += 1;
        if self.since_tick >= 64 {
            self.since_tick = 0;
            self.hooks.tick()?;
        }
        Ok(())
    }

    /// Waits `duration` while keeping output flushed and cancellation noticed; a rate-limited
    /// source calls this instead of sleeping.
    pub fn idle(&mut self, duration: Duration) -> Result<(), TaskError> {
        let until = Instant::now() + duration;
        loop {
            self.hooks.tick()?;
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            std::thread::sleep((until - now).min(Duration::from_millis(20)));
        }
    }

    /// The subtask this source instance runs in.
    pub fn runtime(&self) -> &RuntimeContext {
        self.runtime
    }
}

/// A user-defined source. One instance runs per parallel subtask; it should read only its own
/// share of the input (see [`RuntimeContext::subtask_index`]).
pub trait SourceFunction<T>: 'static {
    /// Emits records; returns when a bounded input is exhausted.
    fn run(&mut self, ctx: &mut SourceContext<'_, T>) -> Result<(), TaskError>;
}

/// Emits every `parallelism`-th element of a collection, starting at the subtask's index.
pub(crate) struct CollectionSource<T> {
    pub(crate) items: Arc<Vec<T>>,
}

impl<T: Clone + 'static> SourceFunction<T> for CollectionSource<T> {
    fn run(&mut self, ctx: &mut SourceContext<'_, T>) -> Result<(), TaskError> {
        let (index, parallelism) = (
            ctx.runtime.subtask_index as usize,
            ctx.runtime.parallelism as usize,
        );
        for item in self.items.iter().skip(index).step_by(parallelism) {
            ctx.collect(item.clone())?;
        }
        Ok(())
    }
}

/// The part `[start, end)` of `0..total` that subtask `index` of `parallelism` owns.
pub(crate) fn split_range(total: u64, index: u32, parallelism: u32) -> (u64, u64) {
    let share = |i: u64| ((total as u128 * i as u128) / parallelism as u128) as u64;
    (share(index as u64), share(index as u64 + 1))
}

/// The numbers `from..=to`, split into contiguous ranges across subtasks.
pub(crate) struct SequenceSource {
    pub(crate) from: u64,
    pub(crate) to: u64,
}

impl SourceFunction<u64> for SequenceSource {
    fn run(&mut self, ctx: &mut SourceContext<'_, u64>) -> Result<(), TaskError> {
        if self.to < self.from {
            return Ok(());
        }
        let total = self.to - self.from + 1;
        let (start, end) = split_range(total, ctx.runtime.subtask_index, ctx.runtime.parallelism);
        for n in start..end {
            ctx.collect(self.from + n)?;
        }
        Ok(())
    }
}

/// Lines of a text file or of every visible file in a directory. The files' bytes are split into
/// one contiguous range per subtask; a line belongs to the subtask whose range holds its first
/// byte, so every line is read exactly once whatever the parallelism.
pub(crate) struct TextFileSource {
    pub(crate) path: PathBuf,
}

/// The files a text source reads: the path itself, or a directory's visible regular files in
/// name order.
pub(crate) fn list_input_files(path: &Path) -> Result<Vec<(PathBuf, u64)>, TaskError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| TaskError::io(format!("cannot read input {}", path.display()), e))?;
    if meta.is_file() {
        return Ok(vec![(path.to_path_buf(), meta.len())]);
    }
    let mut files = Vec::new();
    let entries = std::fs::read_dir(path)
        .map_err(|e| TaskError::io(format!("cannot list input directory {}", path.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| {
            TaskError::io(format!("cannot list input directory {}", path.display()), e)
        })?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(['.', '_']) {
            continue;
        }
        let meta = entry
            .metadata()
            .map_err(|e| TaskError::io(format!("cannot read {}", entry.path().display()), e))?;
        if meta.is_file() {
            files.push((entry.path(), meta.len()));
        }
    }
    files.sort();
    Ok(files)
}

impl SourceFunction<String> for TextFileSource {
    fn run(&mut self, ctx: &mut SourceContext<'_, String>) -> Result<(), TaskError> {
        let files = list_input_files(&self.path)?;
        let total: u64 = files.iter().map(|(_, len)| len).sum();
        let (start, end) = split_range(total, ctx.runtime.subtask_index, ctx.runtime.parallelism);
        let mut file_start = 0u64;
        for (path, len) in files {
            let file_end = file_start + len;
            if file_end > start && file_start < end {
                let from = start.saturating_sub(file_start);
                let to = end.min(file_end) - file_start;
                read_lines(&path, from, to, ctx)?;
            }
            file_start = file_end;
        }
        Ok(())
    }
}

/// Emits the lines of `path` whose first byte lies in `[from, to)`.
fn read_lines(
    path: &Path,
    from: u64,
    to: u64,
    ctx: &mut SourceContext<'_, String>,
) -> Result<(), TaskError> {
    let err = |e| TaskError::io(format!("cannot read input {}", path.display()), e);
    let mut file = File::open(path).map_err(err)?;
    let mut pos = from;
    if from > 0 {
        // A line that started before our range belongs to the previous subtask: skip to its end.
        file.seek(SeekFrom::Start(from - 1)).map_err(err)?;
    }
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    if from > 0 {
        pos = from - 1 + reader.read_until(b'\n', &mut line).map_err(err)? as u64;
        line.clear();
    }
    while pos < to {
        let n = reader.read_until(b'\n', &mut line).map_err(err)?;
        if n == 0 {
            break;
        }
        pos += n as u64;
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        ctx.collect(String::from_utf8_lossy(&line).into_owned())?;
        line.clear();
    }
    Ok(())
}

/// An unbounded (or `count`-bounded) generator: subtask `i` of `p` produces the global indices
/// `i, i + p, i + 2p, ...` at `rate / p` records per second (`rate` 0: as fast as possible).
pub(crate) struct GeneratorSource<F> {
    pub(crate) rate: u64,
    pub(crate) count: Option<u64>,
    pub(crate) f: Arc<F>,
}

impl<T, F: Fn(u64) -> T + 'static> SourceFunction<T> for GeneratorSource<F> {
    fn run(&mut self, ctx: &mut SourceContext<'_, T>) -> Result<(), TaskError> {
        let (index, parallelism) = (
            ctx.runtime.subtask_index as u64,
            ctx.runtime.parallelism as u64,
        );
        let per_subtask_rate = self.rate as f64 / parallelism as f64;
        let started = Instant::now();
        let mut n = 0u64;
        loop {
            let global = n * parallelism + index;
            if self.count.is_some_and(|count| global >= count) {
                return Ok(());
            }
            if per_subtask_rate > 0.0 {
                // Emit in small bursts, then wait until the schedule catches up.
                let due = Duration::from_secs_f64(n as f64 / per_subtask_rate);
                let elapsed = started.elapsed();
                if due > elapsed {
                    ctx.idle(due - elapsed)?;
                }
            }
            ctx.collect((self.f)(global))?;
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operators::testing::Collect;
    use std::cell::RefCell;
    use std::io::Write;
    use std::rc::Rc;

    struct NoHooks;
    impl SourceHooks for NoHooks {
        fn tick(&mut self) -> Result<(), TaskError> {
            Ok(())
        }
    }

    fn run_all<T: 'static>(
        make: impl Fn() -> Box<dyn SourceFunction<T>>,
        parallelism: u32,
    ) -> Vec<Vec<T>> {
        (0..parallelism)
            .map(|i| {
                let got = Rc::new(RefCell::new(Vec::new()));
                let mut out = Collect(got.clone(), Rc::new(RefCell::new(false)));
                let runtime = RuntimeContext::standalone(i, parallelism);
                let mut ctx = SourceContext {
                    out: &mut out,
                    runtime: &runtime,
                    hooks: &mut NoHooks,
                    since_tick: 0,
                };
                make().run(&mut ctx).unwrap();
                got.take()
            })
            .collect()
    }

    #[test]
    fn text_files_split_into_every_line_exactly_once_at_any_parallelism() {
        let dir = tempfile::tempdir().unwrap();
        let mut expected = Vec::new();
        for f in 0..3 {
            let mut file = File::create(dir.path().join(format!("part-{f}"))).unwrap();
            for l in 0..(50 + f * 37) {
                let line = format!("file {f} line {l} {}", "x".repeat(l % 13));
                writeln!(file, "{line}").unwrap();
                expected.push(line);
            }
        }
        // No trailing newline on a last line is still a line.
        std::fs::write(dir.path().join("part-9"), "last\r\nno newline").unwrap();
        expected.extend(["last".to_string(), "no newline".to_string()]);
        std::fs::write(dir.path().join(".hidden"), "ignored\n").unwrap();
        expected.sort();
        for p in [1, 2, 3, 7, 64] {
            let path = dir.path().to_path_buf();
            let mut all: Vec<String> =
                run_all(move || Box::new(TextFileSource { path: path.clone() }), p).concat();
            all.sort();
            assert_eq!(all, expected, "parallelism {p}");
        }
    }

    #[test]
    fn sequence_and_collection_split_without_loss() {
        for p in [1, 3, 8] {
            let mut all = run_all(|| Box::new(SequenceSource { from: 5, to: 104 }), p).concat();
            all.sort();
            assert_eq!(all, (5..=104).collect::<Vec<_>>());
            let items = Arc::new((0..10).collect::<Vec<u32>>());
            let mut all = run_all(
                move || {
                    Box::new(CollectionSource {
                        items: items.clone(),
                    })
                },
                p,
            )
            .concat();
            all.sort();
            assert_eq!(all, (0..10).collect::<Vec<_>>());
        }
    }

    #[test]
    fn bounded_generator_emits_each_index_once() {
        let mut all = run_all(
            || {
                Box::new(GeneratorSource {
                    rate: 0,
                    count: Some(100),
                    f: Arc::new(|i| i),
                })
            },
            3,
        )
        .concat();
        all.sort();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn missing_input_names_the_path() {
        let err = list_input_files(Path::new("/no/such/input")).unwrap_err();
        assert!(err.to_string().contains("/no/such/input"), "{err}");
    }
}
