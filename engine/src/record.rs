//! Records as rkyv archives: how a record of any job type is written into a network buffer and
//! read back from one.
//!
//! A buffer is a sequence of frames `[u32 length][u32 padding][archive bytes][padding to 8]`.
//! Every archive starts on an 8-byte boundary of a buffer whose storage is 16-byte aligned, so a
//! receiver can access it in place without copying it first.

use rkyv::api::high::{HighDeserializer, HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor;
use rkyv::ser::allocator::{Arena, ArenaHandle};
use rkyv::util::AlignedVec;

/// Alignment of each record's archive inside a buffer.
pub const RECORD_ALIGN: usize = 8;
/// Bytes in front of each archive: the length and padding up to [`RECORD_ALIGN`].
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

/// Why bytes could not be turned back into a record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The buffer ended inside a frame header or a frame body.
    #[error(
        "truncated record frame at offset {offset}: {needed} bytes needed, {available} available"
    )]
    Truncated {
        /// Where the frame starts.
        offset: usize,
        /// Bytes the frame claims.
        needed: usize,
        /// Bytes left in the buffer.
        available: usize,
    },
    /// The archive bytes did not validate as the expected type.
    #[error("invalid record archive at offset {offset}: {reason}")]
    Invalid {
        /// Where the frame starts.
        offset: usize,
        /// What rkyv's validator said.
        reason: String,
    },
    /// rkyv could not serialize a record.
    #[error("could not serialize a record: {0}")]
    Serialize(String),
}

/// Appends one record to `buf` as a frame. The buffer's length must be a multiple of
/// [`RECORD_ALIGN`] (every frame leaves it so). Uses the thread's rkyv arena; a writer that
/// appends many records keeps its own [`Appender`].
pub fn append<T: Data>(buf: &mut AlignedVec, record: &T) -> Result<(), RecordError> {
    rkyv::util::with_arena(|arena| append_with(buf, arena, record))
}

/// Serializes records into buffers with an arena of its own (rkyv's scratch space for records
/// with out-of-line parts), so appending costs no thread-local lookup per record: network
/// writers frame records with it, keyed state encodes keys and values with it.
#[derive(Default)]
pub struct Appender {
    arena: rkyv::ser::allocator::Arena,
}

/// Arena memory an [`Appender`] keeps between buffers.
const ARENA_KEEP: usize = 64 * 1024;

impl Appender {
    /// Appends one record to `buf` as a frame, like [`append`].
    pub fn append<T: Data>(&mut self, buf: &mut AlignedVec, record: &T) -> Result<(), RecordError> {
        append_with(buf, &mut self.arena, record)
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

fn append_with<T: Data>(
    buf: &mut AlignedVec,
    arena: &mut rkyv::ser::allocator::Arena,
    record: &T,
) -> Result<(), RecordError> {
    debug_assert_eq!(buf.len() % RECORD_ALIGN, 0);
    let start = buf.len();
    buf.extend_from_slice(&[0u8; RECORD_HEADER]);
    archive_with(buf, arena, record)?;
    finish_frame(buf, start)
}

/// Appends `record`'s archive to `buf`.
fn archive_with<T: Data>(
    buf: &mut AlignedVec,
    arena: &mut rkyv::ser::allocator::Arena,
    record: &T,
) -> Result<(), RecordError> {
    use rkyv::ser::{Serializer, WriterExt, sharing::Share};
    let serialize_err = |e: rancor::Error| RecordError::Serialize(e.to_string());
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

/// Writes the length of the frame that starts at `start` and pads the buffer to the next frame.
fn finish_frame(buf: &mut AlignedVec, start: usize) -> Result<(), RecordError> {
    let len = buf.len() - start - RECORD_HEADER;
    buf[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    let padded = buf.len().next_multiple_of(RECORD_ALIGN);
    buf.resize(padded, 0);
    Ok(())
}

/// Iterates over the archives in a buffer written by [`append`], without copying them.
pub struct Frames<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Frames<'a> {
    /// Frames of `bytes`, which must start 8-byte aligned in memory for in-place access.
    pub fn new(bytes: &'a [u8]) -> Self {
        Frames { bytes, offset: 0 }
    }
}

impl<'a> Iterator for Frames<'a> {
    /// The frame's start offset and its archive bytes.
    type Item = Result<(usize, &'a [u8]), RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        let offset = self.offset;
        if offset >= self.bytes.len() {
            return None;
        }
        let available = self.bytes.len() - offset;
        if available < RECORD_HEADER {
            self.offset = self.bytes.len();
            return Some(Err(RecordError::Truncated {
                offset,
                needed: RECORD_HEADER,
                available,
            }));
        }
        let mut len_bytes = [0u8; 4];
        len_bytes.copy_from_slice(&self.bytes[offset..offset + 4]);
        let len = u32::from_le_bytes(len_bytes) as usize;
        let body = offset + RECORD_HEADER;
        if len > self.bytes.len() - body {
            self.offset = self.bytes.len();
            return Some(Err(RecordError::Truncated {
                offset,
                needed: len,
                available: available - RECORD_HEADER,
            }));
        }
        self.offset = (body + len)
            .next_multiple_of(RECORD_ALIGN)
            .min(self.bytes.len());
        Some(Ok((offset, &self.bytes[body..body + len])))
    }
}

/// Validates an archive in place and returns a reference into `bytes` (no copy).
pub fn access<T: Data>(offset: usize, bytes: &[u8]) -> Result<&T::Archived, RecordError> {
    rkyv::access::<T::Archived, rancor::Error>(bytes).map_err(|e| RecordError::Invalid {
        offset,
        reason: e.to_string(),
    })
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
    let archived = access::<T>(offset, bytes)?;
    rkyv::deserialize::<T, rancor::Error>(archived).map_err(|e| RecordError::Invalid {
        offset,
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip<T: Data + PartialEq + std::fmt::Debug>(records: &[T]) {
        let mut buf = AlignedVec::new();
        for r in records {
            append(&mut buf, r).unwrap();
        }
        let back: Vec<T> = Frames::new(&buf)
            .map(|f| {
                let (off, bytes) = f.unwrap();
                decode::<T>(off, bytes).unwrap()
            })
            .collect();
        assert_eq!(back, records);
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
            finish_frame(&mut theirs, start).unwrap();
        }
        assert_eq!(&ours[..], &theirs[..]);
        let back: Vec<(String, u64)> = Frames::new(&ours)
            .map(|f| {
                let (off, bytes) = f.unwrap();
                decode(off, bytes).unwrap()
            })
            .collect();
        assert_eq!(back, records);
        // Bare archives (keyed state's keys and values) are rkyv's bytes too.
        for r in &records {
            let mut bare = AlignedVec::new();
            appender.encode(&mut bare, r).unwrap();
            let theirs = rkyv::to_bytes::<rancor::Error>(r).unwrap();
            assert_eq!(&bare[..], &theirs[..]);
        }
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
