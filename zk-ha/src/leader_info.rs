//! The payload of `leader/<component>/connection_info`: who leads, and where to reach it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::HaError;
use crate::session_id::LeaderSessionId;

/// The format version written by this crate. Readers reject other versions rather than guess.
pub const LEADER_INFO_VERSION: u32 = 1;

/// A published leader: its term and its addresses by name (for example `rpc` and `rest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderInfo {
    /// The leader session id of the term; clients stamp requests with it.
    pub session_id: LeaderSessionId,
    /// Named addresses, e.g. `{"rpc": "10.0.0.5:6123", "rest": "http://10.0.0.5:8081"}`.
    pub addresses: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    version: u32,
    session_id: LeaderSessionId,
    addresses: BTreeMap<String, String>,
}

impl LeaderInfo {
    /// A leader with no addresses yet.
    pub fn new(session_id: LeaderSessionId) -> Self {
        LeaderInfo {
            session_id,
            addresses: BTreeMap::new(),
        }
    }

    /// Adds a named address.
    pub fn with_address(mut self, name: impl Into<String>, address: impl Into<String>) -> Self {
        self.addresses.insert(name.into(), address.into());
        self
    }

    /// The address called `name`.
    pub fn address(&self, name: &str) -> Option<&str> {
        self.addresses.get(name).map(String::as_str)
    }

    /// Encodes as versioned JSON: `{"version":1,"session_id":"<32 hex>","addresses":{...}}`.
    pub fn encode(&self) -> Vec<u8> {
        let wire = Wire {
            version: LEADER_INFO_VERSION,
            session_id: self.session_id,
            addresses: self.addresses.clone(),
        };
        // Serializing a struct of strings and maps cannot fail.
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// Decodes bytes written by [`LeaderInfo::encode`]; `path` names the source in errors.
    pub fn decode(path: &str, bytes: &[u8]) -> Result<Self, HaError> {
        let corrupt = |reason: String| HaError::Corrupt {
            path: path.to_owned(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(LEADER_INFO_VERSION) => {}
            other => {
                return Err(corrupt(format!(
                    "unsupported leader info version {other:?}"
                )));
            }
        }
        let wire: Wire = serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))?;
        Ok(LeaderInfo {
            session_id: wire.session_id,
            addresses: wire.addresses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wire_format_is_stable() {
        let info = LeaderInfo::new(LeaderSessionId::from_u128(1)).with_address("rpc", "h:1");
        assert_eq!(
            String::from_utf8(info.encode()).unwrap(),
            r#"{"version":1,"session_id":"00000000000000000000000000000001","addresses":{"rpc":"h:1"}}"#
        );
    }

    #[test]
    fn rejects_other_versions_and_garbage() {
        assert!(
            LeaderInfo::decode(
                "p",
                br#"{"version":2,"session_id":"00000000000000000000000000000001","addresses":{}}"#
            )
            .is_err()
        );
        assert!(LeaderInfo::decode("p", b"").is_err());
        assert!(
            LeaderInfo::decode("p", br#"{"version":1,"session_id":"zz","addresses":{}}"#).is_err()
        );
    }

    proptest! {
        #[test]
        fn round_trip(id in any::<u128>(), addrs in proptest::collection::btree_map(".{0,8}", ".{0,30}", 0..4)) {
            let info = LeaderInfo { session_id: LeaderSessionId::from_u128(id), addresses: addrs };
            prop_assert_eq!(LeaderInfo::decode("p", &info.encode()).ok(), Some(info));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = LeaderInfo::decode("p", &bytes);
        }
    }
}
