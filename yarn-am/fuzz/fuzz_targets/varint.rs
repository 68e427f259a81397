//! Protobuf varints, delimited messages, and Hadoop's Writable vints.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((v, used)) = yarn_am::decode_varint(data) {
        let mut again = Vec::new();
        yarn_am::encode_varint(v, &mut again);
        // Over-long encodings decode too; the canonical one is never longer.
        assert!(again.len() <= used);
    }
    let _ = yarn_am::split_delimited(data);
    let mut s = data;
    let _ = yarn_am::read_vlong(&mut s);
});
