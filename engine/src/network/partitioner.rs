//! How records choose a consumer: round-robin, broadcast, or by key through key groups
//! (the key hash and key groups themselves are in [`crate::common::keys`]).

use std::hash::Hash;
use std::sync::Arc;

use crate::common::keys::KeyHash;

/// Hashes a record's key with the given function.
pub(crate) type KeyHasher<T> = Arc<dyn Fn(&T, KeyHash) -> u64 + Send + Sync>;

/// How a typed network output picks channels.
pub(crate) enum ChannelSelector<T> {
    /// Next channel each record (the one channel of a forward edge).
    RoundRobin,
    /// Every channel.
    Broadcast,
    /// By key group of the key's hash, with the job's [`KeyHash`].
    Key(KeyHasher<T>),
}

impl<T> Clone for ChannelSelector<T> {
    fn clone(&self) -> Self {
        match self {
            ChannelSelector::RoundRobin => ChannelSelector::RoundRobin,
            ChannelSelector::Broadcast => ChannelSelector::Broadcast,
            ChannelSelector::Key(f) => ChannelSelector::Key(f.clone()),
        }
    }
}

impl<T: 'static> ChannelSelector<T> {
    pub(crate) fn by_key<K: Hash + 'static>(key: Arc<dyn Fn(&T) -> K + Send + Sync>) -> Self {
        ChannelSelector::Key(Arc::new(move |t: &T, hash: KeyHash| hash.hash(&key(t))))
    }
}
