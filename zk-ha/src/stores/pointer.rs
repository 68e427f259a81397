//! The pattern behind every store: data in a blob, a small pointer to it in ZooKeeper.
//!
//! Invariant: **a pointer in ZooKeeper implies its blob exists.** It holds because
//! 1. a blob is written and made durable, under a new unique name, before any pointer names it;
//! 2. a blob is deleted only after a pointer that named it is confirmed gone or replaced;
//! 3. when a pointer write's outcome is unknown (connection lost during commit), its blob is kept
//!    (FLINK-22494/24543); at worst an unreferenced blob is left behind, never a dangling pointer.
//!
//! Every pointer write is fenced by the writer's leadership term, so a deposed leader can neither
//! add, replace nor remove anything (FLINK-25486, FLINK-10011).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tracing::{debug, warn};
use zookeeper_client::Client;

use crate::error::HaError;
use crate::fence::LeaderFence;
use crate::storage::BlobStore;
use crate::zk::{self, FencedOutcome, SharedClient};

/// Format version of pointer nodes.
const POINTER_VERSION: u32 = 1;
/// How often a write is retried when a concurrent writer changes the node under it.
const CONFLICT_RETRIES: usize = 5;

/// The content of a pointer node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pointer {
    version: u32,
    /// Blob name in the storage directory.
    file: String,
    /// Blob length, to detect a truncated file on read.
    len: u64,
}

impl Pointer {
    fn decode(path: &str, bytes: &[u8]) -> Result<Self, HaError> {
        let p: Pointer = serde_json::from_slice(bytes).map_err(|e| HaError::Corrupt {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        if p.version != POINTER_VERSION {
            return Err(HaError::Corrupt {
                path: path.to_owned(),
                reason: format!("pointer version {}", p.version),
            });
        }
        Ok(p)
    }

    fn encode(&self) -> Vec<u8> {
        // A struct of a number and a string always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// Runs a blocking storage call on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    blobs: &Arc<dyn BlobStore>,
    f: impl FnOnce(&dyn BlobStore) -> Result<T, HaError> + Send + 'static,
) -> Result<T, HaError> {
    let blobs = blobs.clone();
    tokio::task::spawn_blocking(move || f(blobs.as_ref()))
        .await
        .map_err(|e| HaError::Storage {
            path: "<blocking task>".into(),
            source: std::io::Error::other(e),
        })?
}

/// Whether `put` may replace an existing entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutMode {
    CreateOnly,
    CreateOrReplace,
}

/// Pointers under one ZooKeeper directory, data in a blob store.
#[derive(Debug, Clone)]
pub(crate) struct PointerStore {
    zk: Arc<SharedClient>,
    blobs: Arc<dyn BlobStore>,
    dir: String,
    /// Blob name prefix, e.g. `jobgraph`.
    kind: &'static str,
}

impl PointerStore {
    pub(crate) fn new(
        zk: Arc<SharedClient>,
        blobs: Arc<dyn BlobStore>,
        dir: String,
        kind: &'static str,
    ) -> Self {
        PointerStore {
            zk,
            blobs,
            dir,
            kind,
        }
    }

    pub(crate) fn dir(&self) -> &str {
        &self.dir
    }

    fn path(&self, key: &str) -> Result<String, HaError> {
        crate::config::validate_name("key", key)?;
        Ok(format!("{}/{key}", self.dir))
    }

    async fn client(&self) -> Result<Client, HaError> {
        self.zk.get().await
    }

    /// Reads a pointer and its node version; `None` if absent.
    async fn read_pointer(
        &self,
        client: &Client,
        path: &str,
    ) -> Result<Option<(Pointer, i32)>, HaError> {
        match client.get_data(path).await {
            Ok((data, stat)) => Ok(Some((Pointer::decode(path, &data)?, stat.version))),
            Err(zookeeper_client::Error::NoNode) => Ok(None),
            Err(e) => Err(HaError::from_zk("get", path, e)),
        }
    }

    /// Stores `data` under `key`, fenced by `fence`.
    pub(crate) async fn put(
        &self,
        fence: &LeaderFence,
        key: &str,
        data: Vec<u8>,
        mode: PutMode,
    ) -> Result<(), HaError> {
        let path = self.path(key)?;
        let client = self.client().await?;
        // Fail early (and leave no blob) when the entry exists and must not be replaced. The same
        // data again is a retry (say after `CommitUnknown`) that already landed: succeed.
        if mode == PutMode::CreateOnly && self.read_pointer(&client, &path).await?.is_some() {
            return match self.get(key).await? {
                Some(existing) if existing == data => Ok(()),
                _ => Err(HaError::AlreadyExists { path }),
            };
        }
        let len = data.len() as u64;
        let prefix = format!("{}-{key}", self.kind);
        // Step 1: the blob, durable, before any pointer names it.
        let file = blocking(&self.blobs, move |b| b.write_new(&prefix, &data)).await?;
        let pointer = Pointer {
            version: POINTER_VERSION,
            file: file.clone(),
            len,
        }
        .encode();
        let result = self
            .commit_pointer(&client, fence, &path, &pointer, mode)
            .await;
        match result {
            Ok(replaced) => {
                debug!(%path, %file, "pointer committed");
                // Step 3: the replaced blob is unreferenced only now that the new pointer is in.
                if let Some(old) = replaced
                    && let Err(e) = blocking(&self.blobs, move |b| b.delete(&old)).await
                {
                    warn!(error = %e, "could not delete a replaced blob; it is unreferenced and safe to remove");
                }
                Ok(())
            }
            Err(e @ HaError::CommitUnknown { .. }) => {
                // The pointer may be in ZooKeeper: the blob must stay.
                warn!(%path, %file, "pointer commit outcome unknown; keeping its blob");
                Err(e)
            }
            Err(e) => {
                // ZooKeeper answered and applied nothing (multi-ops are atomic): the blob is ours
                // alone and can go.
                let f = file.clone();
                if let Err(del) = blocking(&self.blobs, move |b| b.delete(&f)).await {
                    warn!(error = %del, %file, "could not delete the blob of a rejected write");
                }
                Err(e)
            }
        }
    }

    /// Step 2: the fenced pointer write. Returns the blob the pointer referenced before, if any.
    async fn commit_pointer(
        &self,
        client: &Client,
        fence: &LeaderFence,
        path: &str,
        pointer: &[u8],
        mode: PutMode,
    ) -> Result<Option<String>, HaError> {
        zk::ensure_dir(client, &self.dir).await?;
        for _ in 0..CONFLICT_RETRIES {
            let existing = self.read_pointer(client, path).await?;
            if mode == PutMode::CreateOnly && existing.is_some() {
                return Err(HaError::AlreadyExists {
                    path: path.to_owned(),
                });
            }
            let version = existing.as_ref().map(|(_, v)| *v);
            let outcome = zk::commit_fenced(client, fence, path, |w| match version {
                // Version-checked, so a concurrent replacement is detected instead of lost.
                Some(v) => w.add_set_data(path, pointer, Some(v)),
                None => w.add_create(path, pointer, &zk::PERSISTENT),
            })
            .await?;
            match outcome {
                FencedOutcome::Committed => return Ok(existing.map(|(p, _)| p.file)),
                FencedOutcome::OpFailed(
                    zookeeper_client::Error::NodeExists
                    | zookeeper_client::Error::BadVersion
                    | zookeeper_client::Error::NoNode,
                ) => continue,
                FencedOutcome::OpFailed(e) => return Err(HaError::from_zk("put", path, e)),
            }
        }
        Err(HaError::Conflict {
            path: path.to_owned(),
        })
    }

    /// The data under `key`, or `None`.
    pub(crate) async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, HaError> {
        let path = self.path(key)?;
        let client = self.client().await?;
        // A concurrent replace may delete the blob between our two reads: re-read the pointer.
        for _ in 0..CONFLICT_RETRIES {
            let Some((pointer, _)) = self.read_pointer(&client, &path).await? else {
                return Ok(None);
            };
            let file = pointer.file.clone();
            match blocking(&self.blobs, move |b| b.read(&file)).await? {
                Some(data) if data.len() as u64 == pointer.len => return Ok(Some(data)),
                Some(data) => {
                    return Err(HaError::Corrupt {
                        path: pointer.file,
                        reason: format!("{} bytes, pointer says {}", data.len(), pointer.len),
                    });
                }
                None => match self.read_pointer(&client, &path).await? {
                    Some((again, _)) if again.file == pointer.file => {
                        return Err(HaError::MissingFile {
                            pointer: path,
                            file: pointer.file,
                        });
                    }
                    _ => continue,
                },
            }
        }
        Err(HaError::Conflict { path })
    }

    /// Keys present, sorted.
    pub(crate) async fn keys(&self) -> Result<Vec<String>, HaError> {
        let client = self.client().await?;
        match client.list_children(&self.dir).await {
            Ok(mut keys) => {
                keys.sort();
                Ok(keys)
            }
            Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(HaError::from_zk("list", &self.dir, e)),
        }
    }

    /// Removes `key` (pointer first, then blob), fenced. Removing a missing key succeeds.
    pub(crate) async fn remove(&self, fence: &LeaderFence, key: &str) -> Result<(), HaError> {
        let path = self.path(key)?;
        let client = self.client().await?;
        for _ in 0..CONFLICT_RETRIES {
            let Some((pointer, version)) = self.read_pointer(&client, &path).await? else {
                return Ok(());
            };
            let outcome = zk::commit_fenced(&client, fence, &path, |w| {
                w.add_delete(&path, Some(version))
            })
            .await?;
            match outcome {
                FencedOutcome::Committed => {
                    let file = pointer.file;
                    if let Err(e) = blocking(&self.blobs, move |b| b.delete(&file)).await {
                        warn!(error = %e, "could not delete the blob of a removed pointer");
                    }
                    return Ok(());
                }
                FencedOutcome::OpFailed(
                    zookeeper_client::Error::NoNode | zookeeper_client::Error::BadVersion,
                ) => {
                    continue;
                }
                FencedOutcome::OpFailed(e) => return Err(HaError::from_zk("remove", &path, e)),
            }
        }
        Err(HaError::Conflict { path })
    }

    /// The blob names referenced by all pointers in this directory.
    pub(crate) async fn referenced_files(&self) -> Result<Vec<String>, HaError> {
        let client = self.client().await?;
        // Catch up with the leader first, so no recently committed pointer is missed.
        match client.sync(&self.dir).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(e) => return Err(HaError::from_zk("sync", &self.dir, e)),
        }
        let mut files = Vec::new();
        for key in self.keys().await? {
            let path = self.path(&key)?;
            if let Some((pointer, _)) = self.read_pointer(&client, &path).await? {
                files.push(pointer.file);
            }
        }
        Ok(files)
    }

    /// The blob name a key's pointer references (tests check the invariant with it).
    pub(crate) async fn file_of(&self, key: &str) -> Result<Option<String>, HaError> {
        let path = self.path(key)?;
        let client = self.client().await?;
        Ok(self
            .read_pointer(&client, &path)
            .await?
            .map(|(p, _)| p.file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pointer_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Pointer::decode("x", &bytes);
        }

        #[test]
        fn pointer_round_trips(file in "[a-z0-9-]{1,60}", len in any::<u64>()) {
            let p = Pointer { version: POINTER_VERSION, file, len };
            prop_assert_eq!(Pointer::decode("x", &p.encode()).ok(), Some(p));
        }
    }

    #[test]
    fn pointer_round_trip_and_rejects_other_versions() {
        let p = Pointer {
            version: 1,
            file: "jobgraph-a-00".into(),
            len: 3,
        };
        assert_eq!(Pointer::decode("x", &p.encode()).unwrap(), p);
        assert!(Pointer::decode("x", br#"{"version":2,"file":"f","len":1}"#).is_err());
        assert!(Pointer::decode("x", b"junk").is_err());
    }
}
