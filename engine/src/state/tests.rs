use std::collections::BTreeMap;

use proptest::prelude::*;

use super::archives::decode;
use super::memory::MemorySplit;
use super::*;
use crate::common::keys::{KeyHash, key_group, operator_index_for_key_group};

const MAX_P: u32 = 128;
const BOTH: [BackendKind; 2] = [BackendKind::HashMap, BackendKind::RocksDb];

/// A checkpoint directory layout like the coordinator's: `<base>/job/chk-<id>` beside
/// `<base>/job/shared`, and local directories for the stores.
struct Env {
    dir: tempfile::TempDir,
    storage: LocalFileStorage,
}

impl Env {
    fn new() -> Self {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
            storage: LocalFileStorage,
        }
    }

    fn base(&self) -> String {
        self.dir.path().to_string_lossy().into_owned()
    }

    fn settings(&self, kind: BackendKind, name: &str) -> BackendSettings {
        BackendSettings {
            kind,
            local_dir: self.dir.path().join("local").join(name),
            incremental: true,
            rocks_memory: None,
            key_hash: KeyHash::CURRENT,
        }
    }

    fn checkpoint(&self, id: u64) -> SnapshotLocation {
        SnapshotLocation {
            checkpoint_id: id,
            kind: SnapshotKind::Checkpoint,
            dir: format!("{}/job/chk-{id}", self.base()),
            shared_dir: Some(format!("{}/job/shared", self.base())),
        }
    }

    fn savepoint(&self, id: u64) -> SnapshotLocation {
        SnapshotLocation {
            checkpoint_id: id,
            kind: SnapshotKind::Savepoint,
            dir: format!("{}/savepoint-{id}", self.base()),
            shared_dir: None,
        }
    }

    fn open(
        &self,
        kind: BackendKind,
        name: &str,
        range: KeyGroupRange,
        restore: &[KeyedStateHandle],
        metadata_dir: &str,
    ) -> Result<KeyedStateStore, StateError> {
        KeyedStateStore::open(
            &self.settings(kind, name),
            MAX_P,
            range,
            restore,
            &self.storage,
            metadata_dir,
        )
    }

    fn fresh(&self, kind: BackendKind, name: &str) -> KeyedStateStore {
        self.open(kind, name, KeyGroupRange::new(0, MAX_P - 1), &[], "")
            .expect("open")
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Avg;

impl AggregateFunction<u64, (u64, u64), f64> for Avg {
    fn create_accumulator(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add(&self, value: u64, (sum, n): (u64, u64)) -> (u64, u64) {
        (sum + value, n + 1)
    }
    fn get_result(&self, (sum, n): (u64, u64)) -> f64 {
        sum as f64 / n as f64
    }
    fn merge(&self, (s1, n1): (u64, u64), (s2, n2): (u64, u64)) -> (u64, u64) {
        (s1 + s2, n1 + n2)
    }
}

#[test]
fn key_group_ranges_are_the_inverse_of_operator_index_exhaustively() {
    for max_p in [1, 2, 7, 128, 1000] {
        for p in 1..=max_p.min(64) {
            let mut next = 0;
            for i in 0..p {
                let r = KeyGroupRange::for_subtask(max_p, p, i);
                assert_eq!(r.first, next, "ranges are contiguous");
                for kg in r.first..=r.last {
                    assert_eq!(operator_index_for_key_group(max_p, p, kg), i);
                }
                next = r.last + 1;
            }
            assert_eq!(next, max_p, "ranges cover every key group");
        }
    }
}

proptest! {
    #[test]
    fn every_key_group_belongs_to_exactly_the_subtask_the_partitioner_names(
        max_p in 1u32..=MAX_MAX_PARALLELISM,
        p_seed in any::<u32>(),
        kg_seed in any::<u32>(),
    ) {
        let p = 1 + p_seed % max_p;
        let kg = kg_seed % max_p;
        let owner = operator_index_for_key_group(max_p, p, kg);
        let owners: Vec<u32> = (0..p)
            .filter(|&i| KeyGroupRange::for_subtask(max_p, p, i).contains(kg))
            .collect();
        prop_assert_eq!(owners, vec![owner]);
    }
}

#[test]
fn key_group_range_helpers() {
    let r = KeyGroupRange::new(4, 9);
    assert!(r.contains(4) && r.contains(9) && !r.contains(10) && !r.contains(3));
    assert!(r.intersects(&KeyGroupRange::new(9, 12)));
    assert!(!r.intersects(&KeyGroupRange::new(10, 12)));
    assert_eq!(
        r.intersection(&KeyGroupRange::new(0, 5)),
        Some(KeyGroupRange::new(4, 5))
    );
    assert_eq!(r.len(), 6);
}

#[test]
fn backend_kind_parses_case_insensitively_and_lists_choices() {
    assert_eq!(
        "HashMap".parse::<BackendKind>().ok(),
        Some(BackendKind::HashMap)
    );
    assert_eq!(
        "rocksdb".parse::<BackendKind>().ok(),
        Some(BackendKind::RocksDb)
    );
    assert_eq!(
        " ROCKSDB ".parse::<BackendKind>().ok(),
        Some(BackendKind::RocksDb)
    );
    let err = "memory".parse::<BackendKind>().err().map(|e| e.to_string());
    let err = err.unwrap_or_default();
    assert!(err.contains("hashmap") && err.contains("rocksdb"), "{err}");
    assert_eq!(BackendKind::RocksDb.name(), "rocksdb");
}

#[test]
fn every_state_type_works_on_both_backends() -> Result<(), StateError> {
    let env = Env::new();
    for kind in BOTH {
        let store = env.fresh(kind, kind.name());
        let value = store.value_state::<u64>("count")?;
        assert!(matches!(value.value(), Err(StateError::NoCurrentKey)));
        store.set_current_key(&"a".to_string())?;
        assert_eq!(value.value()?, None);
        value.update(1)?;
        // The same name gives the same state.
        assert_eq!(store.value_state::<u64>("count")?.value()?, Some(1));
        store.set_current_key(&"b".to_string())?;
        assert_eq!(value.value()?, None);
        value.update(7)?;
        store.set_current_key(&"a".to_string())?;
        assert_eq!(value.value()?, Some(1));
        value.clear()?;
        assert_eq!(value.value()?, None);

        let list = store.list_state::<String>("list")?;
        assert_eq!(list.get()?, Vec::<String>::new());
        list.add("x".into())?;
        list.add("y".into())?;
        assert_eq!(list.get()?, vec!["x".to_string(), "y".to_string()]);
        list.update(vec!["z".into()])?;
        assert_eq!(list.get()?, vec!["z".to_string()]);
        list.clear()?;
        assert!(list.get()?.is_empty());

        let map = store.map_state::<u32, String>("map")?;
        assert!(map.is_empty()?);
        map.put(1, "one".into())?;
        map.put(2, "two".into())?;
        map.put(2, "deux".into())?;
        assert_eq!(map.get(&2)?, Some("deux".to_string()));
        assert!(map.contains(&1)? && !map.contains(&3)?);
        let mut entries = map.entries()?;
        entries.sort();
        assert_eq!(
            entries,
            vec![(1, "one".to_string()), (2, "deux".to_string())]
        );
        store.set_current_key(&"b".to_string())?;
        assert!(map.is_empty()?, "map state is per key");
        store.set_current_key(&"a".to_string())?;
        map.remove(&1)?;
        assert_eq!(map.get(&1)?, None);
        assert!(!map.is_empty()?);
        map.clear()?;
        assert!(map.is_empty()? && map.entries()?.is_empty());

        let max = store.reducing_state::<i64>("max", |a, b| a.max(b))?;
        assert_eq!(max.get()?, None);
        for v in [3, -1, 9, 4] {
            max.add(v)?;
        }
        assert_eq!(max.get()?, Some(9));
        max.clear()?;
        assert_eq!(max.get()?, None);

        let avg = store.aggregating_state("avg", Avg)?;
        assert_eq!(avg.get()?, None);
        for v in [2, 4, 9] {
            avg.add(v)?;
        }
        assert_eq!(avg.get()?, Some(5.0));

        assert!(matches!(
            store.map_state::<u32, u32>("count"),
            Err(StateError::KindMismatch { .. })
        ));
        // A key of another subtask's key groups is refused.
        let narrow = env.open(
            kind,
            &format!("{kind}-narrow"),
            KeyGroupRange::new(0, 0),
            &[],
            "",
        )?;
        let foreign = (0u64..)
            .find(|k| subtask_for_key(k, MAX_P, MAX_P) != 0)
            .unwrap_or(1);
        assert!(matches!(
            narrow.set_current_key(&foreign),
            Err(StateError::KeyGroupOutOfRange { .. })
        ));
    }
    Ok(())
}

#[test]
fn update_with_and_keys_longer_than_a_table_entry_holds_inline() -> Result<(), StateError> {
    let env = Env::new();
    for kind in BOTH {
        let store = env.fresh(kind, &format!("long-{kind}"));
        let count = store.value_state::<u64>("count")?;
        // Keys whose archives share their first 16 bytes and differ after them, and short ones.
        let prefix = "p".repeat(40);
        let keys: Vec<String> = (0..50)
            .map(|i| format!("{prefix}{i}"))
            .chain((0..50).map(|i| i.to_string()))
            .collect();
        for round in 1..=3u64 {
            for key in &keys {
                store.set_current_key(key)?;
                let new = count.update_with(|old| old.unwrap_or(0) + round)?;
                assert_eq!(new, (1..=round).sum::<u64>(), "{kind} {key}");
            }
        }
        for key in &keys {
            store.set_current_key(key)?;
            assert_eq!(count.value()?, Some(6), "{kind} {key}");
        }
        // One name used for states of two types: a clear error, not garbage.
        if kind == BackendKind::HashMap {
            let wrong = store.value_state::<String>("count")?;
            let err = wrong.value().unwrap_err().to_string();
            assert!(
                err.contains("count") && err.contains("another type"),
                "{err}"
            );
        }
    }
    Ok(())
}

/// A batch through `update_each` leaves what the same records one by one would: the same new
/// values in order, the same state, and the last record's key current.
#[test]
fn update_each_is_update_with_record_by_record() -> Result<(), StateError> {
    let env = Env::new();
    for kind in BOTH {
        let batched = env.fresh(kind, &format!("each-{kind}"));
        let single = env.fresh(kind, &format!("single-{kind}"));
        let (sum_b, sum_s) = (
            batched.value_state::<u64>("sum")?,
            single.value_state::<u64>("sum")?,
        );
        let records: Vec<(String, u64)> =
            (0..300u64).map(|i| (format!("key-{}", i % 7), i)).collect();
        let mut out_b = Vec::new();
        sum_b.update_each(
            records.clone().into_iter(),
            |(k, _)| k.clone(),
            |(_, v), old| old.unwrap_or(0) + v,
            |new| out_b.push(new),
        )?;
        let mut out_s = Vec::new();
        for (k, v) in &records {
            single.set_current_key(k)?;
            out_s.push(sum_s.update_with(|old| old.unwrap_or(0) + v)?);
        }
        assert_eq!(out_b, out_s, "{kind}");
        assert_eq!(
            sum_b.value()?,
            sum_s.value()?,
            "{kind}: the last key is current"
        );
        for k in 0..7 {
            batched.set_current_key(&format!("key-{k}"))?;
            single.set_current_key(&format!("key-{k}"))?;
            assert_eq!(sum_b.value()?, sum_s.value()?, "{kind} key-{k}");
        }
        // A key of another subtask's key groups stops the batch with the error.
        let narrow = env.open(
            kind,
            &format!("narrow-{kind}"),
            KeyGroupRange::new(0, 0),
            &[],
            "",
        )?;
        let sum_n = narrow.value_state::<u64>("sum")?;
        let err = sum_n
            .update_each(
                (0..100u64).map(|i| (i, i)),
                |(k, _)| *k,
                |(_, v), _| v,
                |_| {},
            )
            .unwrap_err();
        assert!(
            matches!(err, StateError::KeyGroupOutOfRange { .. }),
            "{err}"
        );
    }
    Ok(())
}

#[test]
fn set_current_key_uses_the_partitioners_key_group() -> Result<(), StateError> {
    let env = Env::new();
    for hash in [KeyHash::Fnv1a, KeyHash::Words] {
        let settings = BackendSettings {
            key_hash: hash,
            ..env.settings(BackendKind::HashMap, &format!("kg-{hash:?}"))
        };
        let all = KeyGroupRange::new(0, MAX_P - 1);
        let store = KeyedStateStore::open(&settings, MAX_P, all, &[], &env.storage, "")?;
        let mut differ = false;
        for k in 0u64..100 {
            store.set_current_key(&k)?;
            let expected = key_group(hash.hash(&k), MAX_P);
            assert_eq!(store.current_key_group(), Some(expected), "{hash:?}");
            differ |= expected != key_group(KeyHash::Fnv1a.hash(&k), MAX_P);
        }
        // The two functions place keys differently: a restored job must keep its own.
        assert_eq!(differ, hash != KeyHash::Fnv1a);
    }
    Ok(())
}

/// Writes `n` keys with a value, a list and a map entry each.
fn fill(store: &KeyedStateStore, keys: impl Iterator<Item = u64>) -> Result<(), StateError> {
    let value = store.value_state::<u64>("v")?;
    let list = store.list_state::<u64>("l")?;
    let map = store.map_state::<u64, String>("m")?;
    for k in keys {
        store.set_current_key(&k)?;
        value.update(k * 10)?;
        list.add(k)?;
        list.add(k + 1)?;
        map.put(k, format!("k{k}"))?;
    }
    Ok(())
}

/// Checks the state `fill` wrote for `keys`.
fn check(store: &KeyedStateStore, keys: impl Iterator<Item = u64>) -> Result<(), StateError> {
    let value = store.value_state::<u64>("v")?;
    let list = store.list_state::<u64>("l")?;
    let map = store.map_state::<u64, String>("m")?;
    for k in keys {
        store.set_current_key(&k)?;
        assert_eq!(value.value()?, Some(k * 10), "key {k}");
        assert_eq!(list.get()?, vec![k, k + 1], "key {k}");
        assert_eq!(map.entries()?, vec![(k, format!("k{k}"))], "key {k}");
    }
    Ok(())
}

/// Keys per value state of a store, decoded.
fn value_keys(store: &KeyedStateStore) -> Result<Vec<u64>, StateError> {
    let mut keys = Vec::new();
    for e in store.entries()? {
        if e.state == "v" {
            keys.push(decode::<u64>(&e.key, "key")?);
            assert_eq!(Some(e.key_group), {
                let k = decode::<u64>(&e.key, "key")?;
                Some(key_group(KeyHash::CURRENT.hash(&k), MAX_P))
            });
        }
    }
    keys.sort();
    Ok(keys)
}

#[test]
fn snapshot_and_restore_round_trip_on_both_backends_and_across_them() -> Result<(), StateError> {
    let env = Env::new();
    let all = KeyGroupRange::new(0, MAX_P - 1);
    for (i, from) in BOTH.into_iter().enumerate() {
        let store = env.fresh(from, &format!("src-{from}"));
        fill(&store, 0..500)?;
        let loc = env.checkpoint(10 + i as u64);
        let handle = store.snapshot(&loc, &env.storage, &format!("op1-sub0-att{i}"))?;
        assert_eq!(handle.backend, from.name());
        assert_eq!(handle.key_groups, (0, MAX_P - 1));
        assert!(handle.full_size > 0 && handle.checkpointed_size == handle.full_size);
        // Changes after the snapshot are not in it.
        store.set_current_key(&0u64)?;
        store.value_state::<u64>("v")?.update(12345)?;
        for to in BOTH {
            let name = format!("dst-{from}-{to}");
            let restored = env.open(to, &name, all, std::slice::from_ref(&handle), &loc.dir)?;
            check(&restored, 0..500)?;
            assert_eq!(value_keys(&restored)?, (0..500).collect::<Vec<_>>());
        }
    }
    Ok(())
}

#[test]
fn rescaling_keeps_every_key_exactly_once_in_the_right_subtask() -> Result<(), StateError> {
    let env = Env::new();
    let keys = 0u64..2000;
    for kind in BOTH {
        // 1 -> 3
        let one = env.fresh(kind, &format!("{kind}-one"));
        fill(&one, keys.clone())?;
        let loc1 = env.checkpoint(1);
        let h1 = one.snapshot(&loc1, &env.storage, &format!("{kind}-op-sub0"))?;
        let mut three = Vec::new();
        let mut seen = BTreeMap::new();
        for i in 0..3 {
            let range = KeyGroupRange::for_subtask(MAX_P, 3, i);
            let name = format!("{kind}-three-{i}");
            let s = env.open(kind, &name, range, std::slice::from_ref(&h1), &loc1.dir)?;
            for k in value_keys(&s)? {
                assert_eq!(subtask_for_key(&k, MAX_P, 3), i, "key {k} in subtask {i}");
                assert!(seen.insert(k, i).is_none(), "key {k} twice");
            }
            check(
                &s,
                keys.clone().filter(|k| subtask_for_key(k, MAX_P, 3) == i),
            )?;
            three.push(s);
        }
        assert_eq!(seen.len(), keys.clone().count());

        // 3 -> 2: every new subtask gets the handles intersecting its range.
        let loc2 = env.checkpoint(2);
        let mut handles = Vec::new();
        for (i, s) in three.iter().enumerate() {
            handles.push(s.snapshot(&loc2, &env.storage, &format!("{kind}-op-sub{i}"))?);
        }
        let mut seen = BTreeMap::new();
        for i in 0..2 {
            let range = KeyGroupRange::for_subtask(MAX_P, 2, i);
            let mine: Vec<KeyedStateHandle> = handles
                .iter()
                .filter(|h| KeyGroupRange::from_tuple(h.key_groups).intersects(&range))
                .cloned()
                .collect();
            assert!(mine.len() >= 2, "3 -> 2 restores from two old subtasks");
            let s = env.open(kind, &format!("{kind}-two-{i}"), range, &mine, &loc2.dir)?;
            for k in value_keys(&s)? {
                assert_eq!(subtask_for_key(&k, MAX_P, 2), i, "key {k} in subtask {i}");
                assert!(seen.insert(k, i).is_none(), "key {k} twice");
            }
            check(
                &s,
                keys.clone().filter(|k| subtask_for_key(k, MAX_P, 2) == i),
            )?;
        }
        assert_eq!(seen.len(), keys.clone().count());
    }
    Ok(())
}

/// Writes `keys` with an incompressible 100-byte value so that SSTs have a real size.
fn fill_values(
    store: &KeyedStateStore,
    keys: impl Iterator<Item = u64>,
    salt: u64,
) -> Result<(), StateError> {
    let v = store.value_state::<Vec<u8>>("blob")?;
    for k in keys {
        store.set_current_key(&k)?;
        let mut x = k ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let bytes = (0..100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        v.update(bytes)?;
    }
    Ok(())
}

#[test]
fn incremental_checkpoints_upload_only_new_ssts() -> Result<(), StateError> {
    let env = Env::new();
    let store = env.fresh(BackendKind::RocksDb, "inc");
    fill_values(&store, 0..50_000, 0)?;
    let loc1 = env.checkpoint(1);
    let h1 = store.snapshot(&loc1, &env.storage, "op-sub0-att0")?;
    assert_eq!(h1.checkpointed_size, h1.full_size);
    let shared1: Vec<&StateFile> = h1.files.iter().filter(|f| f.shared).collect();
    assert!(!shared1.is_empty(), "SSTs go to the shared directory");
    for f in &shared1 {
        assert!(
            f.path.starts_with("../shared/") && f.path.ends_with(".sst"),
            "{}",
            f.path
        );
    }

    // Not confirmed yet: the next checkpoint must upload again rather than reference.
    let h_unconfirmed = store.snapshot(&env.checkpoint(2), &env.storage, "op-sub0-att0")?;
    assert_eq!(h_unconfirmed.checkpointed_size, h_unconfirmed.full_size);

    store.notify_checkpoint_complete(2);
    // ~1% of the keys change.
    fill_values(&store, (0..50_000).step_by(100), 1)?;
    let loc3 = env.checkpoint(3);
    let h3 = store.snapshot(&loc3, &env.storage, "op-sub0-att0")?;
    assert!(
        h3.checkpointed_size * 10 < h3.full_size,
        "uploaded {} of {}",
        h3.checkpointed_size,
        h3.full_size
    );
    let shared2: Vec<&String> = h_unconfirmed
        .files
        .iter()
        .filter(|f| f.shared)
        .map(|f| &f.path)
        .collect();
    let referenced = h3
        .files
        .iter()
        .filter(|f| shared2.contains(&&f.path))
        .count();
    assert_eq!(
        referenced,
        shared2.len(),
        "unchanged SSTs are referenced, not re-uploaded"
    );
    let private: u64 = h3.files.iter().filter(|f| !f.shared).map(|f| f.size).sum();
    let new_shared: u64 = h3
        .files
        .iter()
        .filter(|f| f.shared && !shared2.contains(&&f.path))
        .map(|f| f.size)
        .sum();
    assert_eq!(h3.checkpointed_size, private + new_shared);

    // The incremental checkpoint restores, and continues incrementally from its SSTs.
    store.notify_checkpoint_complete(3);
    let restored = KeyedStateStore::open(
        &env.settings(BackendKind::RocksDb, "inc-restored"),
        MAX_P,
        KeyGroupRange::new(0, MAX_P - 1),
        std::slice::from_ref(&h3),
        &env.storage,
        &loc3.dir,
    )?;
    let blob = restored.value_state::<Vec<u8>>("blob")?;
    let original = store.value_state::<Vec<u8>>("blob")?;
    for k in (0..50_000).step_by(777) {
        restored.set_current_key(&k)?;
        store.set_current_key(&k)?;
        assert_eq!(blob.value()?, original.value()?);
    }
    let h4 = restored.snapshot(&env.checkpoint(4), &env.storage, "op-sub0-att1")?;
    assert!(h4.checkpointed_size * 10 < h4.full_size, "{h4:?}");
    Ok(())
}

#[test]
fn savepoints_are_self_contained() -> Result<(), StateError> {
    let env = Env::new();
    for kind in BOTH {
        let store = env.fresh(kind, &format!("sp-{kind}"));
        fill(&store, 0..300)?;
        let loc = env.savepoint(7);
        let h = store.snapshot(&loc, &env.storage, &format!("{kind}-op"))?;
        assert!(
            h.files.iter().all(|f| !f.shared && !f.path.contains("..")),
            "{h:?}"
        );
        assert_eq!(h.checkpointed_size, h.full_size);
        let r = env.open(
            kind,
            &format!("sp-{kind}-r"),
            KeyGroupRange::new(0, MAX_P - 1),
            &[h],
            &loc.dir,
        )?;
        check(&r, 0..300)?;
    }
    Ok(())
}

#[test]
fn missing_truncated_and_corrupted_files_are_named() -> Result<(), StateError> {
    let env = Env::new();
    let all = KeyGroupRange::new(0, MAX_P - 1);
    for (i, kind) in BOTH.into_iter().enumerate() {
        let store = env.fresh(kind, &format!("bad-{kind}"));
        fill(&store, 0..100)?;
        let loc = env.checkpoint(20 + i as u64);
        let h = store.snapshot(&loc, &env.storage, &format!("{kind}-op"))?;
        let file = &h.files[h.files.len() - 1];
        let path = storage::join(&loc.dir, &file.path);
        let bytes = env
            .storage
            .read(&path)
            .map_err(|e| StateError::io("read", &path, e))?;

        // Truncated.
        env.storage
            .write(&path, &bytes[..bytes.len() - 1])
            .map_err(|e| StateError::io("write", &path, e))?;
        let err = env
            .open(kind, "r1", all, std::slice::from_ref(&h), &loc.dir)
            .err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains(&path) && msg.contains("bytes"), "{msg}");

        // Missing.
        env.storage
            .delete_file(&path)
            .map_err(|e| StateError::io("delete", &path, e))?;
        let err = env
            .open(kind, "r2", all, std::slice::from_ref(&h), &loc.dir)
            .err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains(&path) && msg.contains("does not exist"),
            "{msg}"
        );

        if kind == BackendKind::HashMap {
            // Same size, one byte flipped: the checksum catches it.
            let mut flipped = bytes.clone();
            let mid = flipped.len() / 2;
            flipped[mid] ^= 0x40;
            env.storage
                .write(&path, &flipped)
                .map_err(|e| StateError::io("write", &path, e))?;
            let err = env
                .open(kind, "r3", all, std::slice::from_ref(&h), &loc.dir)
                .err();
            assert!(
                matches!(&err, Some(StateError::Corrupted { path: p, .. }) if *p == path),
                "{err:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn dropping_the_store_deletes_its_local_directory() -> Result<(), StateError> {
    let env = Env::new();
    for kind in BOTH {
        let store = env.fresh(kind, &format!("drop-{kind}"));
        fill(&store, 0..10)?;
        let clone = store.clone();
        let dir = env.settings(kind, &format!("drop-{kind}")).local_dir;
        assert!(dir.exists());
        drop(store);
        assert!(dir.exists(), "clones share the store");
        drop(clone);
        assert!(!dir.exists());
    }
    Ok(())
}

#[test]
fn restore_refuses_unknown_backends_and_a_changed_max_parallelism() -> Result<(), StateError> {
    let env = Env::new();
    let store = env.fresh(BackendKind::HashMap, "mp");
    fill(&store, 0..10)?;
    let loc = env.checkpoint(1);
    let h = store.snapshot(&loc, &env.storage, "op")?;
    let err = KeyedStateStore::open(
        &env.settings(BackendKind::HashMap, "mp2"),
        MAX_P * 2,
        KeyGroupRange::new(0, MAX_P * 2 - 1),
        std::slice::from_ref(&h),
        &env.storage,
        &loc.dir,
    )
    .err();
    assert!(
        matches!(&err, Some(StateError::Config(m)) if m.contains("max parallelism")),
        "{err:?}"
    );
    let mut other = h.clone();
    other.backend = "memory".into();
    let all = KeyGroupRange::new(0, MAX_P - 1);
    let err = env
        .open(BackendKind::HashMap, "mp3", all, &[other], &loc.dir)
        .err();
    assert!(
        matches!(err, Some(StateError::UnknownBackend { .. })),
        "{err:?}"
    );
    Ok(())
}

#[test]
fn rocksdb_instances_sharing_a_small_slot_budget_keep_every_value() -> Result<(), StateError> {
    let env = Env::new();
    // 256 KiB for the slot: a write-back cache of 96 KiB, far less than the state, so the
    // buffers write through and drop their clean entries again and again.
    let memory = RocksMemory::budget(256 << 10, 0.5);
    let settings = |name: &str| BackendSettings {
        rocks_memory: Some(memory.clone()),
        ..env.settings(BackendKind::RocksDb, name)
    };
    let all = KeyGroupRange::new(0, MAX_P - 1);
    let open = |name: &str, restore: &[KeyedStateHandle], dir: &str| {
        KeyedStateStore::open(&settings(name), MAX_P, all, restore, &env.storage, dir)
    };
    let (a, b) = (open("a", &[], "")?, open("b", &[], "")?);
    let (ca, cb) = (a.value_state::<u64>("c")?, b.value_state::<u64>("c")?);
    // Key k is counted k % 3 + 1 times in `a` and twice in `b`, interleaved.
    for round in 0..3u64 {
        for k in 0..4000u64 {
            if round <= k % 3 {
                a.set_current_key(&k)?;
                ca.update(ca.value()?.unwrap_or(0) + 1)?;
            }
            if round < 2 {
                b.set_current_key(&k)?;
                cb.update(cb.value()?.unwrap_or(0) + 1)?;
            }
        }
    }
    let value_cache = MemorySplit::of(256 << 10, 0.5).value_cache;
    assert!(
        memory.value_cache_usage()
            <= value_cache + 2 * MemorySplit::of(256 << 10, 0.5).dirty_limit(),
        "the slot's write-back caches stay near their share: {} bytes",
        memory.value_cache_usage()
    );
    let counts = |store: &KeyedStateStore, expect: &dyn Fn(u64) -> u64| -> Result<(), StateError> {
        let c = store.value_state::<u64>("c")?;
        for k in 0..4000u64 {
            store.set_current_key(&k)?;
            assert_eq!(c.value()?, Some(expect(k)), "key {k}");
        }
        store.set_current_key(&5000u64)?;
        assert_eq!(c.value()?, None, "a key never written");
        Ok(())
    };
    counts(&a, &|k| k % 3 + 1)?;
    counts(&b, &|_| 2)?;
    // A snapshot holds every count, and restores within the same budget.
    let loc = env.checkpoint(1);
    let handle = a.snapshot(&loc, &env.storage, "op1-sub0-att0")?;
    drop((ca, cb, a, b));
    assert_eq!(
        memory.value_cache_usage(),
        0,
        "closed stores give their share back"
    );
    let restored = open("restored", std::slice::from_ref(&handle), &loc.dir)?;
    counts(&restored, &|k| k % 3 + 1)?;
    Ok(())
}

#[test]
fn timers_fire_in_time_order_once_per_key_and_timestamp_and_survive_a_rescaled_restore()
-> Result<(), StateError> {
    let env = Env::new();
    for kind in BOTH {
        let store = env.fresh(kind, &format!("timers-{kind}"));
        let mut timers = Timers::open(&store)?;
        for key in 0u64..40 {
            store.set_current_key(&key)?;
            timers.register(TimeDomain::EventTime, 1_000 + key as i64)?;
            // A second timer at the same time is the same timer.
            timers.register(TimeDomain::EventTime, 1_000 + key as i64)?;
            timers.register(TimeDomain::ProcessingTime, 50_000 - key as i64)?;
        }
        store.set_current_key(&7u64)?;
        timers.delete(TimeDomain::EventTime, 1_007)?;
        assert_eq!(timers.len(TimeDomain::EventTime), 39);
        // Due up to 1004: keys 0..=4, earliest first, each with its key made current.
        let mut fired = Vec::new();
        while let Some(ts) = timers.pop(TimeDomain::EventTime, 1_004)? {
            fired.push((ts, store.current_key::<u64>()?));
        }
        assert_eq!(
            fired,
            (0..5).map(|k| (1_000 + k as i64, k)).collect::<Vec<_>>()
        );
        assert_eq!(timers.next(TimeDomain::EventTime), Some(1_005));

        // Checkpoint, then restore at parallelism 2: each half gets the timers of its keys.
        let loc = env.checkpoint(1);
        let h = store.snapshot(&loc, &env.storage, &format!("timers-{kind}-op"))?;
        let mut restored = Vec::new();
        for subtask in 0..2 {
            let range = KeyGroupRange::for_subtask(MAX_P, 2, subtask);
            let s = env.open(
                kind,
                &format!("timers-{kind}-r{subtask}"),
                range,
                std::slice::from_ref(&h),
                &loc.dir,
            )?;
            let mut t = Timers::open(&s)?;
            while let Some(ts) = t.pop(TimeDomain::EventTime, i64::MAX)? {
                let key = s.current_key::<u64>()?;
                assert!(range.contains(s.current_key_group().unwrap()));
                restored.push((ts, key));
            }
            assert_eq!(
                t.len(TimeDomain::ProcessingTime),
                (0u64..40)
                    .filter(|k| range.contains(key_group(KeyHash::CURRENT.hash(k), MAX_P)))
                    .count()
            );
        }
        restored.sort();
        let expected: Vec<(i64, u64)> = (5..40)
            .filter(|&k| k != 7)
            .map(|k| (1_000 + k as i64, k))
            .collect();
        assert_eq!(restored, expected, "{kind}");
    }
    Ok(())
}
