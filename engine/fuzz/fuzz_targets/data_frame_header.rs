//! The header of a data-plane frame (length and kind) from a peer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::network::transport::decode_header;

fuzz_target!(|data: [u8; 5]| {
    if let Ok((len, _kind)) = decode_header(data) {
        assert!(len <= sluice::network::transport::MAX_FRAME);
    }
});
