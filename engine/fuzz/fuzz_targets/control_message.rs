//! Control-plane messages as the JobManager and TaskManagers decode them from a peer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::rpc::messages::{JmToTm, TmToJm};

fuzz_target!(|data: &[u8]| {
    let _ = serde_json::from_slice::<TmToJm>(data);
    let _ = serde_json::from_slice::<JmToTm>(data);
});
