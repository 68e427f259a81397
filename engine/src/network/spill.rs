//! Blocking result partitions (batch execution): a producer's output is written to a file on
//! the TaskManager's local disk and served to consumers only after the producer finished, as
//! often as they ask (a restarted consumer reads it again from the start).
//!
//! The file is laid out as Flink's sort-merge shuffle lays out its own: the writer keeps what
//! each subpartition receives in memory, compressed, until the partition's region budget is
//! full, then writes one *region*: every subpartition's blocks of that region, one after the
//! other. A consumer of subpartition `i` reads, per region, one contiguous range of the file,
//! so the file has one sequential range per region and consumer instead of one small write per
//! buffer, and the number of files does not grow with the number of consumers.
//!
//! A block is `[kind: u8][raw length: u32][stored length: u32][bytes]`: a buffer of record
//! frames (LZ4-compressed or as it was) or an event-time signal. Where each region's ranges lie
//! is kept in memory: a partition lives exactly as long as its TaskManager process.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::buffer::{Buffer, BufferPool, NetBuffer};
use super::valve::TimeSignal;

const DATA_LZ4: u8 = 0;
const DATA_RAW: u8 = 1;
const WATERMARK: u8 = 2;
const IDLE: u8 = 3;
const ACTIVE: u8 = 4;
const HEADER: usize = 9;

/// How a blocking partition is written (`taskmanager.network.sort-shuffle.*` and
/// `taskmanager.network.blocking-shuffle.compression.enabled`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SpillSettings {
    /// The directory the partition files go to.
    pub(crate) dir: PathBuf,
    /// Bytes of compressed blocks kept in memory before a region is written.
    pub(crate) region_bytes: usize,
    /// Whether buffers of records are LZ4-compressed.
    pub(crate) compress: bool,
    /// The size of the buffers a reader hands to consumers (`taskmanager.memory.segment-size`).
    pub(crate) segment_size: usize,
}

/// A blocking partition being written.
pub(crate) struct SpillWriter {
    path: PathBuf,
    file: BufWriter<File>,
    compress: bool,
    region_bytes: usize,
    segment_size: usize,
    /// The current region's blocks, per subpartition.
    pending: Vec<Vec<u8>>,
    pending_bytes: usize,
    /// Per written region, per subpartition: where its blocks lie in the file.
    regions: Vec<Vec<(u64, u64)>>,
    written: u64,
    /// Bytes of records before compression.
    raw: u64,
    /// Set by `finish`: the file now belongs to the finished partition.
    finished: bool,
}

impl SpillWriter {
    /// Creates the partition's file `name` in `settings.dir` (made if missing).
    pub(crate) fn create(
        settings: &SpillSettings,
        name: &str,
        subpartitions: usize,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(&settings.dir)?;
        let path = settings.dir.join(name);
        let file = File::create(&path)?;
        Ok(SpillWriter {
            path,
            file: BufWriter::with_capacity(1 << 20, file),
            compress: settings.compress,
            region_bytes: settings.region_bytes.max(1),
            segment_size: settings.segment_size,
            pending: vec![Vec::new(); subpartitions],
            pending_bytes: 0,
            regions: Vec::new(),
            written: 0,
            raw: 0,
            finished: false,
        })
    }

    /// Adds what the writer sent to subpartition `channel`. Buffers of records and event-time
    /// signals are kept; barriers cannot occur (a batch job takes no checkpoints) and the end
    /// of the partition is [`finish`](Self::finish).
    pub(crate) fn add(&mut self, channel: usize, item: &NetBuffer) -> std::io::Result<()> {
        let out = &mut self.pending[channel];
        let before = out.len();
        match item {
            NetBuffer::Data(buffer) => {
                self.raw += buffer.len() as u64;
                let compressed = self
                    .compress
                    .then(|| lz4_flex::block::compress(buffer))
                    .filter(|c| c.len() < buffer.len());
                let (kind, bytes): (u8, &[u8]) = match &compressed {
                    Some(c) => (DATA_LZ4, c),
                    None => (DATA_RAW, buffer),
                };
                block(out, kind, buffer.len(), bytes);
            }
            NetBuffer::Time(TimeSignal::Watermark(w)) => block(out, WATERMARK, 8, &w.to_le_bytes()),
            NetBuffer::Time(TimeSignal::Idle) => block(out, IDLE, 0, &[]),
            NetBuffer::Time(TimeSignal::Active) => block(out, ACTIVE, 0, &[]),
            NetBuffer::Batch(_) | NetBuffer::Barrier(_) | NetBuffer::EndOfPartition => {}
        }
        self.pending_bytes += out.len() - before;
        if self.pending_bytes >= self.region_bytes {
            self.write_region()?;
        }
        Ok(())
    }

    /// Writes the region held in memory: each subpartition's blocks in a range of its own.
    fn write_region(&mut self) -> std::io::Result<()> {
        if self.pending_bytes == 0 {
            return Ok(());
        }
        let mut ranges = Vec::with_capacity(self.pending.len());
        for blocks in &mut self.pending {
            self.file.write_all(blocks)?;
            ranges.push((self.written, blocks.len() as u64));
            self.written += blocks.len() as u64;
            blocks.clear();
        }
        self.regions.push(ranges);
        self.pending_bytes = 0;
        Ok(())
    }

    /// Writes what is left: the partition is complete and may be read.
    pub(crate) fn finish(mut self) -> std::io::Result<BlockingPartition> {
        self.write_region()?;
        self.file.flush()?;
        self.finished = true;
        Ok(BlockingPartition {
            path: self.path.clone(),
            regions: std::mem::take(&mut self.regions),
            bytes: self.written,
            raw: self.raw,
            segment_size: self.segment_size,
        })
    }
}

impl Drop for SpillWriter {
    /// A partition that never finished (its producer failed or was cancelled) leaves no file.
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn block(out: &mut Vec<u8>, kind: u8, raw: usize, bytes: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&(raw as u32).to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// A finished blocking partition: its file and where each subpartition's blocks are. The
/// file is removed when the partition is dropped (released, or its job ended) and no reader
/// holds it any more.
#[derive(Debug)]
pub(crate) struct BlockingPartition {
    path: PathBuf,
    regions: Vec<Vec<(u64, u64)>>,
    bytes: u64,
    raw: u64,
    segment_size: usize,
}

impl BlockingPartition {
    /// The bytes on disk.
    pub(crate) fn file_bytes(&self) -> u64 {
        self.bytes
    }

    /// The bytes of the records before compression.
    pub(crate) fn raw_bytes(&self) -> u64 {
        self.raw
    }

    /// The partition's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Starts reading subpartition `sub` from the beginning: a thread reads its blocks region
    /// by region into buffers of the segment size and sends them, then the end of the
    /// partition, into the returned queue. The thread stops when the queue's reader goes away.
    pub(crate) fn read(self: &Arc<Self>, sub: u32) -> std::io::Result<flume::Receiver<NetBuffer>> {
        let segment_size = self.segment_size;
        if self
            .regions
            .first()
            .is_some_and(|r| sub as usize >= r.len())
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the partition has no subpartition {sub}"),
            ));
        }
        let file = File::open(&self.path)?;
        let (tx, rx) = flume::bounded(2);
        let partition = self.clone();
        std::thread::Builder::new()
            .name("blocking-reader".into())
            .spawn(move || {
                let pool = BufferPool::new(segment_size, 4);
                let result = partition.send_all(file, sub as usize, &pool, &tx);
                if let Err(e) = result {
                    // The consumer sees the channel end without EndOfPartition and fails
                    // with a network error naming the producer; say why here.
                    tracing::warn!(path = %partition.path.display(), error = %e, "reading a blocking partition failed");
                }
            })?;
        Ok(rx)
    }

    fn send_all(
        &self,
        file: File,
        sub: usize,
        pool: &Arc<BufferPool>,
        tx: &flume::Sender<NetBuffer>,
    ) -> std::io::Result<()> {
        let never = AtomicBool::new(false);
        let mut file = std::io::BufReader::with_capacity(256 << 10, file);
        let mut header = [0u8; HEADER];
        let mut stored = Vec::new();
        let gone = || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the reader went away");
        for region in &self.regions {
            let (offset, len) = region[sub];
            file.seek(SeekFrom::Start(offset))?;
            let mut left = len;
            while left > 0 {
                file.read_exact(&mut header)?;
                let raw = u32::from_le_bytes(header[1..5].try_into().unwrap_or_default()) as usize;
                let size = u32::from_le_bytes(header[5..9].try_into().unwrap_or_default()) as usize;
                left = left.saturating_sub((HEADER + size) as u64);
                stored.resize(size, 0);
                file.read_exact(&mut stored)?;
                let item = match header[0] {
                    DATA_LZ4 | DATA_RAW => {
                        let (mut bytes, _) = pool.take_within(&never).unwrap_or_default();
                        if header[0] == DATA_RAW {
                            bytes.extend_from_slice(&stored);
                        } else {
                            bytes.resize(raw, 0);
                            lz4_flex::block::decompress_into(&stored, &mut bytes).map_err(|e| {
                                std::io::Error::new(std::io::ErrorKind::InvalidData, e)
                            })?;
                        }
                        NetBuffer::Data(Buffer::pooled(bytes, pool.clone()))
                    }
                    WATERMARK => NetBuffer::Time(TimeSignal::Watermark(i64::from_le_bytes(
                        stored[..8].try_into().unwrap_or_default(),
                    ))),
                    IDLE => NetBuffer::Time(TimeSignal::Idle),
                    ACTIVE => NetBuffer::Time(TimeSignal::Active),
                    other => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("unknown block kind {other}"),
                        ));
                    }
                };
                tx.send(item).map_err(|_| gone())?;
            }
        }
        tx.send(NetBuffer::EndOfPartition).map_err(|_| gone())
    }
}

impl Drop for BlockingPartition {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rkyv::util::AlignedVec;

    fn data(bytes: &[u8]) -> NetBuffer {
        let mut v = AlignedVec::new();
        v.extend_from_slice(bytes);
        NetBuffer::Data(Buffer::local(v))
    }

    fn drain(rx: flume::Receiver<NetBuffer>) -> Vec<String> {
        rx.iter()
            .map(|item| match item {
                NetBuffer::Data(b) => String::from_utf8(b.to_vec()).unwrap(),
                NetBuffer::Time(TimeSignal::Watermark(w)) => format!("wm{w}"),
                NetBuffer::Time(TimeSignal::Idle) => "idle".into(),
                NetBuffer::Time(TimeSignal::Active) => "active".into(),
                NetBuffer::EndOfPartition => "end".into(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn settings(dir: &Path, region_bytes: usize, compress: bool) -> SpillSettings {
        SpillSettings {
            dir: dir.join("shuffle"),
            region_bytes,
            compress,
            segment_size: 64,
        }
    }

    #[test]
    fn each_subpartition_reads_back_its_own_items_in_order_over_many_regions_and_again() {
        for compress in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            // Small regions: every few blocks start a new one.
            let mut w = SpillWriter::create(&settings(dir.path(), 40, compress), "p", 3).unwrap();
            let mut expected = vec![Vec::new(); 3];
            for i in 0..50 {
                let sub = i % 3;
                let text = format!("record {i} {}", "x".repeat(i * 7));
                w.add(sub, &data(text.as_bytes())).unwrap();
                expected[sub].push(text);
                if i % 10 == 0 {
                    w.add(sub, &NetBuffer::Time(TimeSignal::Watermark(i as i64)))
                        .unwrap();
                    expected[sub].push(format!("wm{i}"));
                }
            }
            w.add(1, &NetBuffer::Time(TimeSignal::Idle)).unwrap();
            expected[1].push("idle".into());
            let p = Arc::new(w.finish().unwrap());
            assert!(p.regions.len() > 5, "{} regions", p.regions.len());
            if compress {
                assert!(p.file_bytes() < p.raw_bytes(), "repetitive text compresses");
            }
            for (sub, want) in expected.iter_mut().enumerate() {
                want.push("end".into());
                assert_eq!(&drain(p.read(sub as u32).unwrap()), want);
                // A restarted consumer reads it all again.
                assert_eq!(&drain(p.read(sub as u32).unwrap()), want);
            }
            assert!(p.read(3).is_err());
            let path = p.path().to_path_buf();
            assert!(path.exists());
            drop(p);
            assert!(!path.exists(), "a released partition leaves no file");
        }
    }

    #[test]
    fn an_unfinished_partition_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SpillWriter::create(&settings(dir.path(), 10, true), "p", 1).unwrap();
        w.add(0, &data(b"some bytes that make a region")).unwrap();
        let path = w.path.clone();
        assert!(path.exists());
        drop(w);
        assert!(!path.exists());
    }
}
