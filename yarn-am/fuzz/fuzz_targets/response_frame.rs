//! A server's response frame (after the 4-byte length): header, then body.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 4 {
        let _ = yarn_am::decode_frame_len([data[0], data[1], data[2], data[3]]);
    }
    let _ = yarn_am::ResponseFrame::decode(data);
});
