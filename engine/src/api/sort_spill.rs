//! Sorted runs on local disk for a batch aggregation whose table outgrows its memory.
//!
//! A batch keyed aggregation keeps one entry per key in a hash table. When the table's estimated
//! size reaches the aggregation's budget (its slot's share of managed memory), its entries are
//! written out as a *run*, sorted by key hash, and the table starts empty again. At the end of
//! input the runs are merged by hash, as Flink's sort-based batch operators merge their spill
//! files: equal keys meet as the merge reaches their hash, and each key's aggregates are
//! combined into its final result. More runs than [`FAN_IN`] are first merged into fewer, so
//! a merge never has more files open than that.
//!
//! A run is a sequence of blocks `[raw length: u32][stored length: u32][LZ4 bytes]`, each a
//! buffer of `(hash, aggregate)` records framed as on the data plane. Runs are unnamed files in
//! the subtask's working directory: the operating system removes them when they are closed,
//! whether the subtask finishes, fails or is cancelled.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rkyv::util::AlignedVec;

use crate::common::error::TaskError;
use crate::record::{self, Data, Frames};

/// Raw bytes of records gathered before a block is compressed and written.
const BLOCK: usize = 64 << 10;
/// The most runs one merge reads at once.
pub(crate) const FAN_IN: usize = 64;
/// What one table entry costs beyond the size of its key and value: the table's control byte
/// and spare capacity, and the allocator's rounding of the parts a record keeps on the heap.
const ENTRY_OVERHEAD: usize = 24;

/// The runs of one batch aggregation, and the budget of the table that fills them.
pub(crate) struct SortSpill<T> {
    dir: PathBuf,
    budget: usize,
    /// The table's estimated bytes since it was last spilled.
    used: usize,
    runs: Vec<File>,
    /// A record's archive, to measure it.
    scratch: AlignedVec,
    /// Bytes written to runs so far, compressed.
    spilled: u64,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T: Data> SortSpill<T> {
    /// Runs in `dir` for a table of at most `budget` bytes.
    pub(crate) fn new(dir: PathBuf, budget: usize) -> Self {
        SortSpill {
            dir,
            budget,
            used: 0,
            runs: Vec::new(),
            scratch: AlignedVec::new(),
            spilled: 0,
            _t: std::marker::PhantomData,
        }
    }

    /// Counts a new key's entry, `entry_size` bytes in the table plus what `record` keeps on
    /// the heap (estimated by the out-of-line part of its archive, twice: once in the key, once
    /// in the value); whether the table is now full and should be spilled.
    pub(crate) fn admit(&mut self, entry_size: usize, record: &T) -> Result<bool, TaskError> {
        self.scratch.clear();
        record::append(&mut self.scratch, record)?;
        let inline = record::RECORD_HEADER + std::mem::size_of::<T::Archived>();
        let out_of_line = self.scratch.len().saturating_sub(inline);
        self.used += entry_size + ENTRY_OVERHEAD + 2 * out_of_line;
        Ok(self.used >= self.budget)
    }

    /// Whether any run was written.
    pub(crate) fn has_runs(&self) -> bool {
        !self.runs.is_empty()
    }

    /// How many runs there are.
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Bytes written to runs, compressed (a merge's rewrites included).
    pub(crate) fn spilled_bytes(&self) -> u64 {
        self.spilled
    }

    /// Writes `entries`, sorted by hash, as a new run; the table is empty again.
    pub(crate) fn write_run(
        &mut self,
        entries: impl IntoIterator<Item = (u64, T)>,
    ) -> Result<(), TaskError> {
        let mut writer = RunWriter::create(&self.dir)?;
        for entry in entries {
            writer.push(&entry)?;
        }
        let (file, bytes) = writer.finish()?;
        self.spilled += bytes;
        self.runs.push(file);
        self.used = 0;
        Ok(())
    }

    /// Every key's final aggregate, in hash order, `combine` folding the aggregates of one key
    /// (in the order their runs were written) and `same_key` telling keys of one hash apart:
    /// handed to `out` one at a time. Consumes the runs.
    pub(crate) fn merge(
        mut self,
        combine: &impl Fn(T, T) -> T,
        same_key: &impl Fn(&T, &T) -> bool,
        out: &mut impl FnMut(T) -> Result<(), TaskError>,
    ) -> Result<(), TaskError> {
        // Merge the oldest runs into one until one merge can read them all.
        while self.runs.len() > FAN_IN {
            let batch: Vec<File> = self.runs.drain(..FAN_IN).collect();
            let mut writer = RunWriter::create(&self.dir)?;
            merge_runs(batch, combine, same_key, &mut |entry| writer.push(&entry))?;
            let (file, bytes) = writer.finish()?;
            self.spilled += bytes;
            // Older than every run left: it goes first, so each key's aggregates keep their order.
            self.runs.insert(0, file);
        }
        let runs = std::mem::take(&mut self.runs);
        merge_runs(runs, combine, same_key, &mut |(_, value)| out(value))
    }
}

/// Merges `runs` by hash and hands each key's combined aggregate, with its hash, to `out`.
fn merge_runs<T: Data>(
    runs: Vec<File>,
    combine: &impl Fn(T, T) -> T,
    same_key: &impl Fn(&T, &T) -> bool,
    out: &mut impl FnMut((u64, T)) -> Result<(), TaskError>,
) -> Result<(), TaskError> {
    let mut readers = Vec::with_capacity(runs.len());
    for file in runs {
        readers.push(RunReader::<T>::open(file)?);
    }
    let mut heads: Vec<Option<(u64, T)>> = Vec::with_capacity(readers.len());
    let mut heap = BinaryHeap::new();
    for (i, reader) in readers.iter_mut().enumerate() {
        let head = reader.next()?;
        if let Some((hash, _)) = &head {
            heap.push(Reverse((*hash, i)));
        }
        heads.push(head);
    }
    // The keys of the hash being merged, each with its aggregate so far: almost always one.
    let mut group: Vec<T> = Vec::new();
    while let Some(Reverse((hash, _))) = heap.peek().copied() {
        // Every run's records of this hash, runs in the order they were written.
        while let Some(Reverse((h, i))) = heap.peek().copied() {
            if h != hash {
                break;
            }
            heap.pop();
            let (_, value) = heads[i].take().expect("a run in the heap has a head");
            match group.iter().position(|g| same_key(g, &value)) {
                Some(at) => {
                    let acc = group.swap_remove(at);
                    group.push(combine(acc, value));
                }
                None => group.push(value),
            }
            let next = readers[i].next()?;
            if let Some((h, _)) = &next {
                heap.push(Reverse((*h, i)));
            }
            heads[i] = next;
        }
        for value in group.drain(..) {
            out((hash, value))?;
        }
    }
    Ok(())
}

/// Writes one run.
struct RunWriter {
    file: BufWriter<File>,
    block: AlignedVec,
    compressed: Vec<u8>,
    written: u64,
}

impl RunWriter {
    fn create(dir: &std::path::Path) -> Result<Self, TaskError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = dir.join(format!("run-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        let context = || {
            format!(
                "creating {}, a spill file of a batch aggregation",
                path.display()
            )
        };
        std::fs::create_dir_all(dir).map_err(|e| TaskError::io(context(), e))?;
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| TaskError::io(context(), e))?;
        // Unnamed from now on: the file lives as long as it is open.
        std::fs::remove_file(&path).map_err(|e| TaskError::io(context(), e))?;
        Ok(RunWriter {
            file: BufWriter::with_capacity(BLOCK * 2, file),
            block: AlignedVec::with_capacity(BLOCK + 1024),
            compressed: Vec::new(),
            written: 0,
        })
    }

    fn push<T: Data>(&mut self, entry: &(u64, T)) -> Result<(), TaskError> {
        record::append(&mut self.block, entry)?;
        if self.block.len() >= BLOCK {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), TaskError> {
        if self.block.is_empty() {
            return Ok(());
        }
        let raw = self.block.len();
        self.compressed
            .resize(lz4_flex::block::get_maximum_output_size(raw), 0);
        let stored = lz4_flex::block::compress_into(&self.block, &mut self.compressed)
            .map_err(|e| TaskError::State(format!("compressing a spill block: {e}")))?;
        let write = |file: &mut BufWriter<File>, bytes: &[u8]| {
            file.write_all(bytes)
                .map_err(|e| TaskError::io("writing a spill file of a batch aggregation", e))
        };
        write(&mut self.file, &(raw as u32).to_le_bytes())?;
        write(&mut self.file, &(stored as u32).to_le_bytes())?;
        write(&mut self.file, &self.compressed[..stored])?;
        self.written += 8 + stored as u64;
        self.block.clear();
        Ok(())
    }

    /// The run's file, rewound for reading, and its length.
    fn finish(mut self) -> Result<(File, u64), TaskError> {
        self.flush_block()?;
        let context = "finishing a spill file of a batch aggregation";
        let mut file = self
            .file
            .into_inner()
            .map_err(|e| TaskError::io(context, e.into_error()))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| TaskError::io(context, e))?;
        Ok((file, self.written))
    }
}

/// Reads one run, a block at a time.
struct RunReader<T> {
    file: BufReader<File>,
    block: AlignedVec,
    compressed: Vec<u8>,
    entries: VecDeque<(u64, T)>,
}

impl<T: Data> RunReader<T> {
    fn open(file: File) -> Result<Self, TaskError> {
        Ok(RunReader {
            file: BufReader::with_capacity(BLOCK, file),
            block: AlignedVec::new(),
            compressed: Vec::new(),
            entries: VecDeque::new(),
        })
    }

    fn next(&mut self) -> Result<Option<(u64, T)>, TaskError> {
        if self.entries.is_empty() && !self.read_block()? {
            return Ok(None);
        }
        Ok(self.entries.pop_front())
    }

    /// Reads the next block's entries; false at the end of the run.
    fn read_block(&mut self) -> Result<bool, TaskError> {
        let context = "reading a spill file of a batch aggregation";
        let mut header = [0u8; 8];
        match self.file.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(TaskError::io(context, e)),
        }
        let raw = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let stored = u32::from_le_bytes(header[4..].try_into().expect("4 bytes")) as usize;
        self.compressed.resize(stored, 0);
        self.file
            .read_exact(&mut self.compressed)
            .map_err(|e| TaskError::io(context, e))?;
        self.block.clear();
        self.block.resize(raw, 0);
        let n = lz4_flex::block::decompress_into(&self.compressed, &mut self.block)
            .map_err(|e| TaskError::State(format!("{context}: {e}")))?;
        if n != raw {
            return Err(TaskError::State(format!(
                "{context}: a block of {raw} bytes decompressed to {n}"
            )));
        }
        for frame in Frames::new(&self.block) {
            let (offset, bytes) = frame?;
            self.entries.push_back(record::decode(offset, bytes)?);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: (u32, u64), b: (u32, u64)) -> (u32, u64) {
        (a.0, a.1 + b.1)
    }

    fn same(a: &(u32, u64), b: &(u32, u64)) -> bool {
        a.0 == b.0
    }

    /// Runs of `(key, 1)` sorted by a deliberately colliding hash (key % 7), each key in
    /// every run, merged.
    fn merged(runs: usize, keys: u32) -> Vec<(u32, u64)> {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = SortSpill::new(dir.path().to_path_buf(), 1 << 20);
        for _ in 0..runs {
            let mut entries: Vec<(u64, (u32, u64))> =
                (0..keys).map(|k| (u64::from(k % 7), (k, 1))).collect();
            entries.sort_by_key(|e| e.0);
            spill.write_run(entries).unwrap();
        }
        assert_eq!(spill.runs(), runs);
        assert!(spill.spilled_bytes() > 0);
        let mut out = Vec::new();
        spill
            .merge(&sum, &same, &mut |v| {
                out.push(v);
                Ok(())
            })
            .unwrap();
        // The runs are unnamed files: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        out
    }

    #[test]
    fn runs_merge_into_one_total_per_key_whatever_the_hash_collisions() {
        let mut out = merged(3, 1000);
        let by_hash: Vec<u64> = out.iter().map(|(k, _)| u64::from(k % 7)).collect();
        assert!(by_hash.is_sorted(), "merged in hash order");
        out.sort();
        assert_eq!(out, (0..1000).map(|k| (k, 3)).collect::<Vec<_>>());
    }

    #[test]
    fn more_runs_than_one_merge_reads_are_merged_in_passes() {
        let mut out = merged(FAN_IN * 2 + 5, 50);
        out.sort();
        let runs = (FAN_IN * 2 + 5) as u64;
        assert_eq!(out, (0..50).map(|k| (k, runs)).collect::<Vec<_>>());
    }

    #[test]
    fn a_table_is_full_when_its_estimated_entries_reach_the_budget() {
        let mut spill = SortSpill::<(String, u64)>::new(PathBuf::from("/nonexistent"), 1000);
        let entry = std::mem::size_of::<(String, Option<(String, u64)>)>();
        let mut admitted = 0;
        while !spill
            .admit(entry, &("a word of some length".into(), 1))
            .unwrap()
        {
            admitted += 1;
        }
        // Each entry counts its table slot and its string twice.
        assert!((5..=10).contains(&admitted), "{admitted}");
    }
}
