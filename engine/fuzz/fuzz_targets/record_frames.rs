//! A network buffer of record frames, as a TaskManager receives it from a peer: validation
//! must reject anything malformed without panicking or reading out of bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rkyv::util::AlignedVec;
use sluice::record::{Frames, decode};

fuzz_target!(|data: &[u8]| {
    // Received buffers are 16-byte aligned, as the transport allocates them.
    let mut buf = AlignedVec::<16>::with_capacity(data.len());
    buf.extend_from_slice(data);
    for (offset, bytes) in Frames::new(&buf).flatten() {
        let _ = decode::<(String, u64)>(offset, bytes);
        let _ = decode::<(u64, u64)>(offset, bytes);
        let _ = decode::<Vec<String>>(offset, bytes);
    }
});
