//! A server's DIGEST-MD5 challenge and final rspauth message.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(ch) = yarn_am::DigestChallenge::parse(data) {
        let _ = yarn_am::digest_response(&ch, "user", "password", "/default", "cnonce");
    }
    let _ = yarn_am::verify_rspauth(data, "00");
});
