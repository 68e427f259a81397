//! The fenced HA stores against a real ZooKeeper server.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{ZkServer, init_tracing};
use tokio::time::timeout;
use zk_ha::{
    HaConfig, HaError, LeaderElection, LeaderFence, LeaderSessionId, LeadershipEvent,
    ZooKeeperHaServices,
};

struct Fixture {
    _zk: ZkServer,
    _dir: tempfile::TempDir,
    ha: ZooKeeperHaServices,
    election: LeaderElection,
    fence: LeaderFence,
}

async fn leader() -> Fixture {
    init_tracing();
    let zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = HaConfig::new(zk.connect_string(), dir.path().join("ha"))
        .with_cluster_id("stores-test")
        .with_session_timeout(Duration::from_secs(2));
    let ha = ZooKeeperHaServices::new(&config).unwrap();
    let mut election = ha.start_election();
    let fence = match timeout(Duration::from_secs(10), election.next_event()).await {
        Ok(Some(LeadershipEvent::Granted(f))) => f,
        other => panic!("expected a grant, got {other:?}"),
    };
    Fixture {
        _zk: zk,
        _dir: dir,
        ha,
        election,
        fence,
    }
}

/// Every pointer's file exists, and (`exact`) no other blob lies around.
fn blobs(ha: &ZooKeeperHaServices) -> BTreeSet<String> {
    ha.blob_store().list().unwrap().into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_graph_store_round_trip_and_pointer_implies_file() {
    let f = leader().await;
    let store = f.ha.job_graph_store();
    assert_eq!(store.job_ids().await.unwrap(), Vec::<String>::new());
    assert_eq!(store.get("j1").await.unwrap(), None);

    store.put(&f.fence, "j1", b"graph one").await.unwrap();
    store.put(&f.fence, "j2", b"graph two").await.unwrap();
    assert_eq!(
        store.job_ids().await.unwrap(),
        vec!["j1".to_owned(), "j2".to_owned()]
    );
    assert_eq!(
        store.get("j1").await.unwrap().as_deref(),
        Some(&b"graph one"[..])
    );

    let file_j1 = store.file_of("j1").await.unwrap().expect("pointer");
    let file_j2 = store.file_of("j2").await.unwrap().expect("pointer");
    assert_eq!(
        blobs(&f.ha),
        BTreeSet::from([file_j1.clone(), file_j2.clone()]),
        "pointers and files match one to one"
    );

    // Replacing writes a new file, moves the pointer, then deletes the old file.
    store.put(&f.fence, "j1", b"graph one, v2").await.unwrap();
    let file_j1_v2 = store.file_of("j1").await.unwrap().expect("pointer");
    assert_ne!(file_j1_v2, file_j1);
    assert_eq!(blobs(&f.ha), BTreeSet::from([file_j1_v2, file_j2.clone()]));
    assert_eq!(
        store.get("j1").await.unwrap().as_deref(),
        Some(&b"graph one, v2"[..])
    );

    // Removing deletes the pointer, then the file; removing again is fine.
    store.remove(&f.fence, "j1").await.unwrap();
    store.remove(&f.fence, "j1").await.unwrap();
    assert_eq!(store.get("j1").await.unwrap(), None);
    assert_eq!(blobs(&f.ha), BTreeSet::from([file_j2]));

    // A fresh services object (a new JobManager) sees the same state.
    let other = ZooKeeperHaServices::new(
        &HaConfig::new(f._zk.connect_string(), f._dir.path().join("ha"))
            .with_cluster_id("stores-test"),
    )
    .unwrap();
    assert_eq!(
        other.job_graph_store().job_ids().await.unwrap(),
        vec!["j2".to_owned()]
    );
    assert_eq!(
        other.job_graph_store().get("j2").await.unwrap().as_deref(),
        Some(&b"graph two"[..])
    );

    // Invalid ids never reach ZooKeeper or the filesystem.
    let err = store.put(&f.fence, "../evil", b"x").await.unwrap_err();
    assert!(matches!(err, HaError::Invalid { .. }), "got {err:?}");
    drop(f.election);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_file_behind_a_pointer_is_reported() {
    let f = leader().await;
    let store = f.ha.job_graph_store();
    store.put(&f.fence, "j1", b"graph").await.unwrap();
    let file = store.file_of("j1").await.unwrap().unwrap();
    f.ha.blob_store().delete(&file).unwrap();
    let err = store.get("j1").await.unwrap_err();
    assert!(matches!(err, HaError::MissingFile { .. }), "got {err:?}");
    assert!(!err.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_store_retains_latest_and_subsumes_older() {
    let f = leader().await;
    let store = f.ha.checkpoint_store("job-a").unwrap();
    assert_eq!(store.latest().await.unwrap(), None);
    let mut removed = Vec::new();
    for id in 1..=5u64 {
        removed.extend(
            store
                .add(&f.fence, id, format!("meta {id}").as_bytes(), 3)
                .await
                .unwrap(),
        );
    }
    assert_eq!(removed, vec![1, 2]);
    assert_eq!(store.ids().await.unwrap(), vec![3, 4, 5]);
    let latest = store.latest().await.unwrap().unwrap();
    assert_eq!((latest.id, latest.metadata.as_slice()), (5, &b"meta 5"[..]));
    let two: Vec<u64> = store
        .latest_n(2)
        .await
        .unwrap()
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(two, vec![4, 5]);
    assert_eq!(store.get(4).await.unwrap().as_deref(), Some(&b"meta 4"[..]));

    // Exactly the retained checkpoints have files.
    let mut files = BTreeSet::new();
    for id in [3, 4, 5] {
        files.insert(store.file_of(id).await.unwrap().unwrap());
    }
    assert_eq!(blobs(&f.ha), files);

    // Adding the same checkpoint again (a retry after an unknown outcome) is a no-op.
    assert_eq!(
        store.add(&f.fence, 5, b"meta 5", 3).await.unwrap(),
        Vec::<u64>::new()
    );
    assert_eq!(blobs(&f.ha), files);
    // Adding an id twice with other content is refused and leaves no file.
    let err = store.add(&f.fence, 5, b"again", 3).await.unwrap_err();
    assert!(matches!(err, HaError::AlreadyExists { .. }), "got {err:?}");
    assert_eq!(blobs(&f.ha), files);

    // Stores of different jobs are separate.
    let other = f.ha.checkpoint_store("job-b").unwrap();
    assert_eq!(other.ids().await.unwrap(), Vec::<u64>::new());
    store.remove(&f.fence, 3).await.unwrap();
    assert_eq!(store.ids().await.unwrap(), vec![4, 5]);

    // Cleaning up the job removes its checkpoints, their files and its counter.
    let counter = f.ha.checkpoint_id_counter("job-a").unwrap();
    counter.set(&f.fence, 6).await.unwrap();
    f.ha.remove_job_data(&f.fence, "job-a").await.unwrap();
    f.ha.remove_job_data(&f.fence, "job-a").await.unwrap();
    assert_eq!(store.ids().await.unwrap(), Vec::<u64>::new());
    assert_eq!(counter.get().await.unwrap(), 1);
    assert_eq!(blobs(&f.ha), BTreeSet::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_id_counter_never_repeats() {
    let f = leader().await;
    let counter = f.ha.checkpoint_id_counter("job-a").unwrap();
    assert_eq!(counter.get().await.unwrap(), 1);
    assert_eq!(counter.get_and_increment(&f.fence).await.unwrap(), 1);
    assert_eq!(counter.get_and_increment(&f.fence).await.unwrap(), 2);

    // Concurrent increments (two handles, so two ZooKeeper clients) race on the node version.
    let other = ZooKeeperHaServices::new(
        &HaConfig::new(f._zk.connect_string(), f._dir.path().join("ha"))
            .with_cluster_id("stores-test"),
    )
    .unwrap()
    .checkpoint_id_counter("job-a")
    .unwrap();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let c = if i % 2 == 0 {
            counter.clone()
        } else {
            other.clone()
        };
        let fence = f.fence.clone();
        tasks.push(tokio::spawn(
            async move { c.get_and_increment(&fence).await },
        ));
    }
    let mut ids = BTreeSet::new();
    for t in tasks {
        assert!(
            ids.insert(t.await.unwrap().unwrap()),
            "an id was handed out twice"
        );
    }
    assert_eq!(ids, (3..13).collect());
    assert_eq!(counter.get().await.unwrap(), 13);

    counter.set(&f.fence, 100).await.unwrap();
    assert_eq!(counter.get_and_increment(&f.fence).await.unwrap(), 100);
    assert!(
        counter.set(&f.fence, 50).await.is_err(),
        "the counter must never go back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_result_store_records_each_job_once() {
    let f = leader().await;
    let results = f.ha.job_result_store();
    assert!(!results.contains("j1").await.unwrap());
    results.put(&f.fence, "j1", b"FINISHED").await.unwrap();
    assert!(results.contains("j1").await.unwrap());
    assert_eq!(
        results.get("j1").await.unwrap().as_deref(),
        Some(&b"FINISHED"[..])
    );
    let err = results.put(&f.fence, "j1", b"FAILED").await.unwrap_err();
    assert!(matches!(err, HaError::AlreadyExists { .. }), "got {err:?}");
    assert_eq!(results.job_ids().await.unwrap(), vec!["j1".to_owned()]);
    results.remove(&f.fence, "j1").await.unwrap();
    assert!(!results.contains("j1").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_with_a_stale_or_forged_fence_are_refused() {
    let f = leader().await;
    let jobs = f.ha.job_graph_store();
    jobs.put(&f.fence, "j1", b"good").await.unwrap();
    // Some job data for the stale leader to try to delete.
    f.ha.checkpoint_id_counter("j1")
        .unwrap()
        .get_and_increment(&f.fence)
        .await
        .unwrap();
    let before = blobs(&f.ha);

    // Same latch node, other version: an earlier term of the same contender (FLINK-11665).
    let earlier_term = LeaderFence::from_parts(
        f.fence.latch_path().to_owned(),
        0,
        LeaderSessionId::from_u128(1),
    );
    // A latch node that does not exist: a term whose session is gone.
    let gone = LeaderFence::from_parts(
        format!("{}/latch-dead-0000000000", f.ha.layout().latch_dir()),
        1,
        LeaderSessionId::from_u128(2),
    );
    for stale in [&earlier_term, &gone] {
        let e = jobs.put(stale, "j1", b"evil").await.unwrap_err();
        assert!(matches!(e, HaError::NotLeader { .. }), "put: {e:?}");
        let e = jobs.remove(stale, "j1").await.unwrap_err();
        assert!(matches!(e, HaError::NotLeader { .. }), "remove: {e:?}");
        let e =
            f.ha.checkpoint_store("j1")
                .unwrap()
                .add(stale, 1, b"m", 1)
                .await
                .unwrap_err();
        assert!(matches!(e, HaError::NotLeader { .. }), "checkpoint: {e:?}");
        let e =
            f.ha.checkpoint_id_counter("j1")
                .unwrap()
                .get_and_increment(stale)
                .await
                .unwrap_err();
        assert!(matches!(e, HaError::NotLeader { .. }), "counter: {e:?}");
        let e =
            f.ha.job_result_store()
                .put(stale, "j1", b"r")
                .await
                .unwrap_err();
        assert!(matches!(e, HaError::NotLeader { .. }), "result: {e:?}");
        let e = f.ha.remove_job_data(stale, "j1").await.unwrap_err();
        assert!(
            matches!(e, HaError::NotLeader { .. }),
            "remove job data: {e:?}"
        );
    }
    assert_eq!(jobs.get("j1").await.unwrap().as_deref(), Some(&b"good"[..]));
    assert_eq!(blobs(&f.ha), before, "refused writes leave no files behind");
    assert_eq!(
        f.ha.checkpoint_id_counter("j1")
            .unwrap()
            .get()
            .await
            .unwrap(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collection_deletes_only_unreferenced_old_blobs() {
    let f = leader().await;
    f.ha.job_graph_store()
        .put(&f.fence, "j1", b"graph")
        .await
        .unwrap();
    f.ha.job_result_store()
        .put(&f.fence, "j0", b"result")
        .await
        .unwrap();
    f.ha.checkpoint_store("j1")
        .unwrap()
        .add(&f.fence, 7, b"meta", 1)
        .await
        .unwrap();
    let referenced = blobs(&f.ha);
    assert_eq!(referenced.len(), 3);
    // An orphan, as left by an ambiguous commit that did not land.
    let orphan =
        f.ha.blob_store()
            .write_new("jobgraph-j9", b"orphan")
            .unwrap();

    // Too young to be sure: kept.
    let removed =
        f.ha.collect_garbage(&f.fence, Duration::from_secs(3600))
            .await
            .unwrap();
    assert!(removed.is_empty());
    // Old enough: only the orphan goes.
    let removed =
        f.ha.collect_garbage(&f.fence, Duration::ZERO)
            .await
            .unwrap();
    assert_eq!(removed, vec![orphan]);
    assert_eq!(blobs(&f.ha), referenced);
    assert_eq!(
        f.ha.job_graph_store().get("j1").await.unwrap().as_deref(),
        Some(&b"graph"[..])
    );

    // A stale leader may not collect.
    let stale = LeaderFence::from_parts(
        f.fence.latch_path().to_owned(),
        0,
        LeaderSessionId::from_u128(1),
    );
    f.ha.blob_store()
        .write_new("jobgraph-j9", b"orphan")
        .unwrap();
    let e =
        f.ha.collect_garbage(&stale, Duration::ZERO)
            .await
            .unwrap_err();
    assert!(matches!(e, HaError::NotLeader { .. }), "got {e:?}");
    assert_eq!(blobs(&f.ha).len(), 4);
}
