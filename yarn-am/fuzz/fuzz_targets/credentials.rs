//! A Hadoop credentials (token storage) file.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = yarn_am::Credentials::parse(data);
    let mut with_magic = b"HDTS".to_vec();
    with_magic.extend_from_slice(data);
    let _ = yarn_am::Credentials::parse(&with_magic);
});
