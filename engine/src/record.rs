//! Records as rkyv archives: how a record of any job type is written into a network buffer and
//! read back from one.
//!
//! A buffer is a sequence of runs: `[u32 length][u32 count]` and then `count` archives of
//! `length` bytes each, every one padded to 8 bytes. Every archive starts on an 8-byte boundary
//! of a buffer whose storage is 16-byte aligned, so a receiver can access it in place without
//! copying it first. Records whose archives all have one size (integers, tuples and structs of
//! plain fields) fill a whole buffer with one run: 8 bytes of header per buffer rather than per
//! record, a 7% smaller shuffle for 100-byte records. Records of varying size make runs of one.

use rkyv::api::high::{HighDeserializer, HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
pub use rkyv::de::Pool;
use rkyv::rancor;
use rkyv::ser::allocator::{Arena, ArenaHandle};
use rkyv::util::AlignedVec;

use crate::common::error::RecordError;

/// Alignment of each record's archive inside a buffer.
pub const RECORD_ALIGN: usize = 8;
/// Bytes in front of each run of archives: their length and their count.
pub const RECORD_HEADER: usize = 8;

/// The bound every record type of a job satisfies: it can be archived by rkyv, validated when it
/// arrives from the network, and deserialized back. Derive `rkyv::{Archive, Serialize,
/// Deserialize}` on a struct, or use the standard types (integers, `String`, tuples, `Vec`).
pub trait Data: Archive<
        Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>>
                      + rkyv::Deserialize<Self, HighDeserializer<rancor::Error>>,
    > + for<'a, 'b> rkyv::Serialize<HighSerializer<&'b mut AlignedVec, LazyArena<'a>, rancor::Error>>
    + Clone
    + Send
    + 'static
{
}

impl<T> Data for T where
    T: Archive<
            Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>>
                          + rkyv::Deserialize<T, HighDeserializer<rancor::Error>>,
        > + for<'a, 'b> rkyv::Serialize<
            HighSerializer<&'b mut AlignedVec, LazyArena<'a>, rancor::Error>,
        > + Clone
        + Send
        + 'static
{
}

use rkyv::Archive;

/// The scratch space of one serialization: rkyv's arena, taken only if the record asks for
/// some. Records of plain fields (integers, arrays, tuples of them) never do, and taking the
/// arena (`Arena::acquire`, which also trims it) cost about 3% of a shuffle's CPU.
pub struct LazyArena<'a> {
    arena: Option<&'a mut Arena>,
    handle: Option<ArenaHandle<'a>>,
}

impl<'a> LazyArena<'a> {
    fn new(arena: &'a mut Arena) -> Self {
        LazyArena {
            arena: Some(arena),
            handle: None,
        }
    }
}

// SAFETY: every allocation is the arena handle's, made and released through its own
// `Allocator` implementation; this type only takes the handle on the first request.
unsafe impl<E> rkyv::ser::Allocator<E> for LazyArena<'_> {
    unsafe fn push_alloc(
        &mut self,
        layout: std::alloc::Layout,
    ) -> Result<std::ptr::NonNull<[u8]>, E> {
        let handle = match &mut self.handle {
            Some(handle) => handle,
            None => {
                let arena = self
                    .arena
                    .take()
                    .expect("a lazy arena holds its arena until used");
                self.handle.insert(arena.acquire())
            }
        };
        // SAFETY: the caller's guarantees for `push_alloc` pass on unchanged.
        unsafe { handle.push_alloc(layout) }
    }

    unsafe fn pop_alloc(
        &mut self,
        ptr: std::ptr::NonNull<u8>,
        layout: std::alloc::Layout,
    ) -> Result<(), E> {
        let handle = self
            .handle
            .as_mut()
            .expect("memory is only given back after it was allocated");
        // SAFETY: `ptr` was allocated by this handle (the caller's guarantee); the rest passes on.
        unsafe { handle.pop_alloc(ptr, layout) }
    }
}

/// Appends one record to `buf` as a run of its own. The buffer's length must be a multiple of
/// [`RECORD_ALIGN`] (every run leaves it so). Uses the thread's rkyv arena; a writer that
/// appends many records keeps its own [`Appender`], which also joins records into runs.
pub fn append<T: Data>(buf: &mut AlignedVec, record: &T) -> Result<(), RecordError> {
    rkyv::util::with_arena(|arena| append_with(buf, arena, record, &mut None))
}

/// The last run of a buffer being filled: where its header is, the length of its archives and
/// how many there are. A writer keeps one per buffer, starts it empty (`None`) with each new
/// buffer and closes it with [`close_run`] before the buffer is read: records that join the run
/// are counted here, and the header's count is written once, not once per record.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    header: usize,
    len: usize,
    count: u32,
}

impl Run {
    /// Writes the run's count into its header in `buf`, the buffer it was made in.
    fn seal(&self, buf: &mut AlignedVec) {
        let at = self.header + 4;
        buf[at..at + 4].copy_from_slice(&self.count.to_le_bytes());
    }
}

/// Ends the open run of `buf`, if any (writes its count): before the buffer is read, or before
/// anything but a record of the run is appended to it.
pub fn close_run(buf: &mut AlignedVec, run: &mut Option<Run>) {
    if let Some(run) = run.take() {
        run.seal(buf);
    }
}

/// Serializes records into buffers with an arena of its own (rkyv's scratch space for records
/// with out-of-line parts), so appending costs no thread-local lookup per record: network
/// writers frame records with it, keyed state encodes keys and values with it.
pub struct Appender {
    arena: rkyv::ser::allocator::Arena,
    /// Whether the next record is expected to have the open run's length, so that it is
    /// serialized without a header in front of it. It stops after the first record that did
    /// not: that one is serialized again behind a header, and a type whose archives vary in
    /// size would pay that on every record.
    predict: bool,
}

impl Default for Appender {
    fn default() -> Self {
        Appender {
            arena: Default::default(),
            predict: true,
        }
    }
}

/// Arena memory an [`Appender`] keeps between buffers.
const ARENA_KEEP: usize = 64 * 1024;

impl Appender {
    /// Appends one record to `buf` as a run of its own, like [`append`].
    pub fn append<T: Data>(&mut self, buf: &mut AlignedVec, record: &T) -> Result<(), RecordError> {
        append_with(buf, &mut self.arena, record, &mut None)
    }

    /// Appends one record to `buf`, to `run` (the buffer's last run) if its archive has the
    /// run's length, else as a new run, which `run` then names (the run it ends is sealed).
    pub fn append_to_run<T: Data>(
        &mut self,
        buf: &mut AlignedVec,
        run: &mut Option<Run>,
        record: &T,
    ) -> Result<(), RecordError> {
        if let Some(open) = run {
            // Archives of no bytes (unit records) are not joined: see `RecordError::InvalidRun`.
            if self.predict && open.len > 0 && open.count < u32::MAX {
                let start = buf.len();
                if let Err(e) = archive_with(buf, &mut self.arena, record) {
                    // The buffer keeps only whole records.
                    buf.resize(start, 0);
                    return Err(e);
                }
                if buf.len() - start == open.len {
                    open.count += 1;
                    pad(buf);
                    return Ok(());
                }
                buf.resize(start, 0);
                self.predict = false;
            }
            open.seal(buf);
        }
        append_with(buf, &mut self.arena, record, run)
    }

    /// Appends `value`'s bare archive (no frame) to `buf`, the root last, as rkyv's
    /// `to_bytes_in` does; the bytes are the same.
    pub fn encode<T: Data>(&mut self, buf: &mut AlignedVec, value: &T) -> Result<(), RecordError> {
        archive_with(buf, &mut self.arena, value)
    }

    /// Gives back what unusually large records made the arena grow to (call between buffers).
    pub fn trim(&mut self) {
        if self.arena.capacity() > ARENA_KEEP {
            self.arena.shrink();
        }
    }
}

/// Appends `record` as a new run of one and makes `run` name it.
fn append_with<T: Data>(
    buf: &mut AlignedVec,
    arena: &mut rkyv::ser::allocator::Arena,
    record: &T,
    run: &mut Option<Run>,
) -> Result<(), RecordError> {
    debug_assert_eq!(buf.len() % RECORD_ALIGN, 0);
    let start = buf.len();
    buf.extend_from_slice(&[0u8; RECORD_HEADER]);
    let written = archive_with(buf, arena, record).and_then(|()| {
        let len = buf.len() - start - RECORD_HEADER;
        write_run_header(buf, start, len, 1).map(|()| len)
    });
    let len = match written {
        Ok(len) => len,
        Err(e) => {
            // The buffer keeps only whole records.
            buf.resize(start, 0);
            return Err(e);
        }
    };
    pad(buf);
    *run = Some(Run {
        header: start,
        len,
        count: 1,
    });
    Ok(())
}

/// The bytes of `value` when they are its archive: an integer, or an array of them (rkyv's
/// copy-optimized types, archived at an alignment of at most 16, the buffers' own). `None` for
/// any other type, whose archive its serializer must write.
#[inline(always)]
pub(crate) fn plain_archive<T: Data>(value: &T) -> Option<&[u8]> {
    if T::COPY_OPTIMIZATION.is_enabled() && std::mem::align_of::<T::Archived>() <= 16 {
        // SAFETY: `value` is a live value of `size_of::<T>()` initialized bytes (a copy-
        // optimized type has no padding: rkyv requires that of the types it enables it for),
        // borrowed for as long as the slice.
        Some(unsafe {
            std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
        })
    } else {
        None
    }
}

/// Appends `record`'s archive to `buf`.
fn archive_with<T: Data>(
    buf: &mut AlignedVec,
    arena: &mut rkyv::ser::allocator::Arena,
    record: &T,
) -> Result<(), RecordError> {
    use rkyv::ser::{Serializer, WriterExt, sharing::Share};
    let serialize_err = |e: rancor::Error| RecordError::Serialize(e.to_string());
    if let Some(bytes) = plain_archive(record) {
        // Copied where its serializer would write them, without running it.
        let pos = buf
            .len()
            .next_multiple_of(std::mem::align_of::<T::Archived>());
        buf.resize(pos, 0);
        buf.extend_from_slice(bytes);
        return Ok(());
    }
    if std::mem::align_of::<T::Archived>() > 16 {
        // Over-aligned archives (beyond the buffer's 16-byte storage alignment) take rkyv's path.
        rkyv::api::high::to_bytes_in_with_alloc::<_, _, rancor::Error>(
            record,
            &mut *buf,
            LazyArena::new(arena),
        )
        .map_err(serialize_err)?;
        return Ok(());
    }
    // What rkyv's `to_bytes_in` does, except that the root is resolved in place in the buffer
    // rather than on the stack and then copied (for a record of plain bytes that copy was most
    // of the serialization's cost).
    let resolver = {
        // Used in place and dropped where it lies: taking it apart (`into_writer`) moved it
        // through the stack in wide loads of what `acquire` had just stored in narrower ones,
        // a store-forwarding stall on every record (the source thread's hottest instruction).
        let mut serializer = Serializer::new(&mut *buf, LazyArena::new(arena), Share::new());
        let resolver = rkyv::Serialize::serialize(
            record,
            rancor::Strategy::<_, rancor::Error>::wrap(&mut serializer),
        )
        .map_err(serialize_err)?;
        WriterExt::<rancor::Error>::align_for::<T::Archived>(&mut serializer)
            .map_err(serialize_err)?;
        resolver
    };
    let pos = buf.len();
    let size = std::mem::size_of::<T::Archived>();
    buf.reserve(size);
    // SAFETY: `reserve` made room for `size` bytes at `pos`, which `align_for` aligned for
    // `T::Archived` (the buffer's storage is 16-byte aligned and archives need at most that);
    // the bytes are zeroed before `resolve` writes the archive (so padding is initialized), and
    // `resolver` is the result of serializing `record` into this same buffer, whose positions
    // are the buffer's offsets, as `Place::new_unchecked` requires.
    unsafe {
        let out = buf.as_mut_ptr().add(pos).cast::<T::Archived>();
        out.write_bytes(0, 1);
        record.resolve(resolver, rkyv::Place::new_unchecked(pos, out));
        buf.set_len(pos + size);
    }
    Ok(())
}

/// Writes the header of the run at `start`: the length of its archives and their count.
fn write_run_header(
    buf: &mut AlignedVec,
    start: usize,
    len: usize,
    count: u32,
) -> Result<(), RecordError> {
    let len = u32::try_from(len).map_err(|_| {
        RecordError::Serialize(format!(
            "a record of {len} bytes exceeds the 4 GiB frame limit"
        ))
    })?;
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    buf[start + 4..start + 8].copy_from_slice(&count.to_le_bytes());
    Ok(())
}

/// Pads the buffer to where the next archive or run starts.
fn pad(buf: &mut AlignedVec) {
    let padded = buf.len().next_multiple_of(RECORD_ALIGN);
    buf.resize(padded, 0);
}

/// Iterates over the archives in a buffer of runs, without copying them.
pub struct Frames<'a> {
    bytes: &'a [u8],
    offset: usize,
    /// Archives left in the current run, and their length.
    left: u32,
    len: usize,
}

impl<'a> Frames<'a> {
    /// Frames of `bytes`, which must start 8-byte aligned in memory for in-place access.
    pub fn new(bytes: &'a [u8]) -> Self {
        Frames {
            bytes,
            offset: 0,
            left: 0,
            len: 0,
        }
    }

    /// Ends the iteration with `error`.
    fn fail(&mut self, error: RecordError) -> Option<Result<(usize, &'a [u8]), RecordError>> {
        (self.offset, self.left) = (self.bytes.len(), 0);
        Some(Err(error))
    }
}

impl<'a> Iterator for Frames<'a> {
    /// The frame's start offset and its archive bytes.
    type Item = Result<(usize, &'a [u8]), RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            if self.offset >= self.bytes.len() {
                return None;
            }
            let offset = self.offset;
            let available = self.bytes.len() - offset;
            let Some(header) = self.bytes.get(offset..offset + RECORD_HEADER) else {
                return self.fail(RecordError::Truncated {
                    offset,
                    needed: RECORD_HEADER,
                    available,
                });
            };
            let word = |i: usize| {
                u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]])
            };
            let (len, count) = (word(0) as usize, word(4));
            if count == 0 || (len == 0 && count > 1) {
                return self.fail(RecordError::InvalidRun { offset, count, len });
            }
            self.len = len;
            self.left = count;
            self.offset += RECORD_HEADER;
        }
        let (body, len) = (self.offset, self.len);
        let available = self.bytes.len() - body;
        if len > available {
            return self.fail(RecordError::Truncated {
                offset: body,
                needed: len,
                available,
            });
        }
        self.left -= 1;
        self.offset = (body + len)
            .next_multiple_of(RECORD_ALIGN)
            .min(self.bytes.len());
        Some(Ok((body, &self.bytes[body..body + len])))
    }
}

/// Validates an archive in place and returns a reference into `bytes` (no copy).
pub fn access<T: Data>(offset: usize, bytes: &[u8]) -> Result<&T::Archived, RecordError> {
    rkyv::access::<T::Archived, rancor::Error>(bytes).map_err(|e| RecordError::Invalid {
        offset,
        reason: e.to_string(),
    })
}

/// An archive this process wrote, in place and without validation.
///
/// # Safety
/// `bytes` must be a frame of a buffer a record writer of this process filled with records of
/// type `T` (an [`Appender`]'s archive, still where it was written, so aligned as written).
pub unsafe fn access_written<T: Data>(bytes: &[u8]) -> &T::Archived {
    // SAFETY: the caller's guarantee: the bytes are a whole archive of `T` rkyv wrote, with its
    // root at the end and aligned for it.
    unsafe { rkyv::access_unchecked::<T::Archived>(bytes) }
}

/// Deserializes an archive this process wrote, without validating it (see
/// [`access_written`], whose safety requirements are this function's).
///
/// # Safety
/// As for [`access_written`].
pub unsafe fn decode_written<T: Data>(
    pool: &mut Pool,
    offset: usize,
    bytes: &[u8],
) -> Result<T, RecordError> {
    // SAFETY: passed on from the caller.
    let archived = unsafe { access_written::<T>(bytes) };
    deserialize_in(pool, offset, archived)
}

/// Deserializes with `pool`, rkyv's table of the shared pointers already deserialized. One pool
/// serves every record of one buffer (each archive is its record's own, so no two records share
/// an address); it must not outlive the buffer, whose memory is reused. A pool per buffer
/// rather than per record: making and dropping one per record was ~2% of a keyed job's CPU.
fn deserialize_in<T: Data>(
    pool: &mut Pool,
    offset: usize,
    archived: &T::Archived,
) -> Result<T, RecordError> {
    rkyv::api::deserialize_using::<T, _, rancor::Error>(archived, pool).map_err(|e| {
        RecordError::Invalid {
            offset,
            reason: e.to_string(),
        }
    })
}

/// Validates an archive and deserializes it with `pool` (see [`deserialize_in`]).
pub fn decode_in<T: Data>(pool: &mut Pool, offset: usize, bytes: &[u8]) -> Result<T, RecordError> {
    let archived = access::<T>(offset, bytes)?;
    deserialize_in(pool, offset, archived)
}

/// Deserializes an archived record that was already validated.
pub fn deserialize_archived<T: Data>(archived: &T::Archived) -> Result<T, RecordError> {
    rkyv::deserialize::<T, rancor::Error>(archived).map_err(|e| RecordError::Invalid {
        offset: 0,
        reason: e.to_string(),
    })
}

/// Validates an archive and deserializes it into an owned record.
pub fn decode<T: Data>(offset: usize, bytes: &[u8]) -> Result<T, RecordError> {
    decode_in(&mut Pool::new(), offset, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every record of `buf`, decoded (panics on any error).
    fn read_all<T: Data>(buf: &[u8]) -> Vec<T> {
        Frames::new(buf)
            .map(|f| {
                let (off, bytes) = f.unwrap();
                decode::<T>(off, bytes).unwrap()
            })
            .collect()
    }

    fn roundtrip<T: Data + PartialEq + std::fmt::Debug>(records: &[T]) {
        let mut buf = AlignedVec::new();
        for r in records {
            append(&mut buf, r).unwrap();
        }
        assert_eq!(read_all::<T>(&buf), records);
    }

    #[test]
    fn strings_and_tuples_round_trip() {
        roundtrip(&[
            ("hello".to_string(), 3u64),
            (String::new(), 0),
            ("ü".repeat(100), u64::MAX),
        ]);
        roundtrip(&[1u8, 2, 3]);
        roundtrip::<Vec<u32>>(&[vec![], vec![1, 2, 3]]);
        // Vectors of strings need scratch space: the lazy arena is taken, and taken again for
        // the next record.
        roundtrip::<Vec<String>>(&[
            vec!["a".into(), "b".repeat(300)],
            vec![],
            (0..1000).map(|i| i.to_string()).collect(),
        ]);
    }

    #[test]
    fn the_appender_writes_what_rkyv_writes() {
        let records = [
            ("hello".to_string(), 3u64),
            ("ü".repeat(300), u64::MAX),
            (String::new(), 0),
        ];
        let (mut ours, mut appender) = (AlignedVec::new(), Appender::default());
        for r in &records {
            appender.append(&mut ours, r).unwrap();
        }
        let mut theirs = AlignedVec::<16>::new();
        for r in &records {
            let start = theirs.len();
            theirs.extend_from_slice(&[0u8; RECORD_HEADER]);
            rkyv::api::high::to_bytes_in::<_, rancor::Error>(r, &mut theirs).unwrap();
            let len = theirs.len() - start - RECORD_HEADER;
            write_run_header(&mut theirs, start, len, 1).unwrap();
            pad(&mut theirs);
        }
        assert_eq!(&ours[..], &theirs[..]);
        assert_eq!(read_all::<(String, u64)>(&ours), records);
        // Bare archives (keyed state's keys and values) are rkyv's bytes too.
        for r in &records {
            let mut bare = AlignedVec::new();
            appender.encode(&mut bare, r).unwrap();
            let theirs = rkyv::to_bytes::<rancor::Error>(r).unwrap();
            assert_eq!(&bare[..], &theirs[..]);
        }
    }

    /// Integers and arrays of them are copied, not serialized: the bytes must be rkyv's,
    /// bare and in runs, after records of other alignments.
    #[test]
    fn copied_integers_are_what_rkyv_writes() {
        macro_rules! same {
            ($value:expr, $t:ty) => {{
                let value: $t = $value;
                assert!(<$t as rkyv::Archive>::COPY_OPTIMIZATION.is_enabled());
                let mut appender = Appender::default();
                let mut bare = AlignedVec::new();
                appender.encode(&mut bare, &value).unwrap();
                assert_eq!(
                    &bare[..],
                    &rkyv::to_bytes::<rancor::Error>(&value).unwrap()[..]
                );
                roundtrip(&[value]);
            }};
        }
        same!(7, u8);
        same!(-3, i32);
        same!(u64::MAX - 5, u64);
        same!(1 << 40, i64);
        same!(u128::MAX / 3, u128);
        same!([1, 2, 3], [u32; 3]);
        same!([9; 5], [u16; 5]);
        let mut buf = AlignedVec::new();
        let mut appender = Appender::default();
        appender.encode(&mut buf, &1u8).unwrap();
        appender.encode(&mut buf, &2u64).unwrap();
        let mut theirs = AlignedVec::<16>::new();
        rkyv::api::high::to_bytes_in::<_, rancor::Error>(&1u8, &mut theirs).unwrap();
        rkyv::api::high::to_bytes_in::<_, rancor::Error>(&2u64, &mut theirs).unwrap();
        assert_eq!(&buf[..], &theirs[..]);
        let runs = via_runs(&[5u64, 6, 7]);
        assert_eq!(read_all::<u64>(&runs), vec![5, 6, 7]);
    }

    /// Appends `records` as a network writer does (joined into runs) and reads them back.
    fn via_runs<T: Data + PartialEq + std::fmt::Debug>(records: &[T]) -> AlignedVec {
        let (mut buf, mut run, mut appender) = (AlignedVec::new(), None, Appender::default());
        for r in records {
            appender.append_to_run(&mut buf, &mut run, r).unwrap();
        }
        close_run(&mut buf, &mut run);
        assert_eq!(read_all::<T>(&buf), records);
        buf
    }

    #[test]
    fn records_of_one_size_share_one_header() {
        let records: Vec<(u64, [u8; 92])> = (0..1000).map(|i| (i, [i as u8; 92])).collect();
        let buf = via_runs(&records);
        // 104-byte archives (100 bytes padded to their 8-byte alignment) behind one header.
        assert_eq!(buf.len(), RECORD_HEADER + 1000 * 104);
        assert_eq!(&buf[..8], &[104, 0, 0, 0, 0xe8, 0x03, 0, 0]);
        // A new buffer starts a new run.
        let (mut next, mut run, mut appender) = (AlignedVec::new(), None, Appender::default());
        appender
            .append_to_run(&mut next, &mut run, &records[0])
            .unwrap();
        assert_eq!(next.len(), RECORD_HEADER + 104);
    }

    #[test]
    fn records_of_varying_size_make_runs_of_one() {
        // Each archive 8 bytes longer than the one before (strings of 9 or more bytes are out
        // of line): after the second record misses the run, no record tries to join one.
        let records: Vec<String> = (0..50).map(|i| "x".repeat(9 + 8 * i)).collect();
        let ours = via_runs(&records);
        let mut single = AlignedVec::new();
        for r in &records {
            append(&mut single, r).unwrap();
        }
        assert_eq!(&ours[..], &single[..], "the same bytes as runs of one");
    }

    #[test]
    fn runs_and_single_records_mix() {
        // Equal sizes join, a different size starts a run; after the first miss the appender
        // stops predicting, and equal sizes no longer join (still correct, only longer).
        let buf = via_runs(&[1u64, 2, 3]);
        assert_eq!(buf.len(), RECORD_HEADER + 3 * 8);
        via_runs::<Vec<u32>>(&[vec![1], vec![2], vec![], vec![4, 5], vec![6, 7], vec![8, 9]]);
        // Strings of 9 to 12 bytes have archives of one length (20 bytes with padding): a run.
        let buf = via_runs(&["x".repeat(9), "x".repeat(12), "x".repeat(13)]);
        assert_eq!(&buf[..8], &[20, 0, 0, 0, 2, 0, 0, 0]);
        // Archives of no bytes (unit records) make runs of one.
        let buf = via_runs::<()>(&[(), (), ()]);
        assert_eq!(&buf[..], &[0, 0, 0, 0, 1, 0, 0, 0].repeat(3)[..]);
        via_runs::<()>(&[(), (), ()]);
    }

    #[test]
    fn a_run_claiming_no_records_or_too_many_is_an_error() {
        let mut buf = AlignedVec::<16>::new();
        buf.extend_from_slice(&[8, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(matches!(
            Frames::new(&buf).next(),
            Some(Err(RecordError::InvalidRun {
                offset: 0,
                count: 0,
                len: 8
            }))
        ));
        // Many records of no bytes in 8 bytes: refused rather than counted out.
        let mut empty = AlignedVec::<16>::new();
        empty.extend_from_slice(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            Frames::new(&empty).next(),
            Some(Err(RecordError::InvalidRun {
                count: u32::MAX,
                len: 0,
                ..
            }))
        ));
        // Three 8-byte records claimed, one present: the second is reported truncated.
        buf[4] = 3;
        let got: Vec<_> = Frames::new(&buf).collect();
        assert_eq!(got.len(), 2);
        assert!(got[0].is_ok());
        assert!(
            matches!(
                got[1],
                Err(RecordError::Truncated {
                    offset: 16,
                    needed: 8,
                    available: 0
                })
            ),
            "{got:?}"
        );
    }

    #[test]
    fn truncated_buffer_is_an_error_not_a_panic() {
        let mut buf = AlignedVec::new();
        append(&mut buf, &"some text".to_string()).unwrap();
        for cut in 0..buf.len() {
            let mut short = AlignedVec::<16>::new();
            short.extend_from_slice(&buf[..cut]);
            for (off, bytes) in Frames::new(&short).flatten() {
                let _ = decode::<String>(off, bytes);
            }
        }
    }

    proptest! {
        #[test]
        fn any_records_round_trip(records in proptest::collection::vec((".*", any::<u64>(), any::<i32>()), 0..50)) {
            roundtrip(&records);
            via_runs(&records);
        }

        #[test]
        fn fixed_size_records_round_trip_in_runs(records in proptest::collection::vec((any::<u64>(), any::<[u8; 5]>(), any::<bool>()), 0..200)) {
            let buf = via_runs(&records);
            let one = std::mem::size_of::<rkyv::Archived<(u64, [u8; 5], bool)>>().next_multiple_of(RECORD_ALIGN);
            let headers = if records.is_empty() { 0 } else { RECORD_HEADER };
            prop_assert_eq!(buf.len(), headers + records.len() * one);
        }

        #[test]
        fn damaged_runs_are_errors_never_panics_or_endless(
            keys in proptest::collection::vec(any::<u64>(), 1..40),
            damage in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cut in any::<usize>(),
        ) {
            // A valid buffer of runs (fixed-size records, then strings), bytes overwritten and
            // the tail cut off: reading yields records or errors, and stops.
            let records: Vec<(u64, u64)> = keys.iter().map(|k| (*k, k.rotate_left(7))).collect();
            let mut buf = via_runs(&records);
            let words: Vec<String> = keys.iter().map(|k| "w".repeat((*k % 20) as usize)).collect();
            let (mut run, mut appender) = (None, Appender::default());
            for w in &words {
                appender.append_to_run(&mut buf, &mut run, w).unwrap();
            }
            close_run(&mut buf, &mut run);
            for (at, byte) in damage {
                let at = at % buf.len();
                buf[at] = byte;
            }
            let mut damaged = AlignedVec::<16>::new();
            damaged.extend_from_slice(&buf[..cut % (buf.len() + 1)]);
            let mut seen = 0;
            for frame in Frames::new(&damaged) {
                seen += 1;
                prop_assert!(seen <= damaged.len() / RECORD_ALIGN + 1, "more records than 8-byte words");
                if let Ok((off, bytes)) = frame {
                    let _ = decode::<(u64, u64)>(off, bytes);
                    let _ = decode::<String>(off, bytes);
                }
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut buf = AlignedVec::<16>::new();
            buf.extend_from_slice(&bytes);
            for (off, body) in Frames::new(&buf).flatten() {
                let _ = decode::<(String, u64)>(off, body);
            }
        }
    }
}
