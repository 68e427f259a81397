//! Network faults between a client and ZooKeeper, injected by a TCP proxy: a frozen/partitioned
//! leader, and a commit whose reply is lost.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Proxy, ZkServer, expired_sessions, follows, init_tracing, wait_until};
use tokio::time::timeout;
use zk_ha::{
    HaConfig, HaError, LeaderElection, LeaderFence, LeadershipEvent, RevokeReason,
    ZooKeeperHaServices,
};

fn services(quorum: String, storage: &std::path::Path) -> ZooKeeperHaServices {
    let config = HaConfig::new(quorum, storage)
        .with_cluster_id("partition-test")
        .with_session_timeout(Duration::from_secs(2))
        .with_connection_timeout(Duration::from_secs(1));
    ZooKeeperHaServices::new(&config).expect("valid config")
}

async fn granted(e: &mut LeaderElection, within: Duration) -> LeaderFence {
    match timeout(within, e.next_event()).await {
        Ok(Some(LeadershipEvent::Granted(f))) => f,
        other => panic!("expected a grant, got {other:?}"),
    }
}

/// The leader is cut off (as if frozen by SIGSTOP or partitioned): the server expires its session,
/// a standby takes over, and the old leader steps down on its own, while still cut off (it hears
/// nothing from ZooKeeper). After the partition heals, its old term stays fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_steps_down_and_stays_fenced() {
    init_tracing();
    let zk = ZkServer::start();
    let proxy = Proxy::start(zk.process.client_port()).await;
    let dir = tempfile::tempdir().unwrap();
    let via_proxy = services(proxy.connect_string(), dir.path());
    let direct = services(zk.connect_string(), dir.path());

    let mut a = via_proxy.start_election();
    let fa = granted(&mut a, Duration::from_secs(10)).await;
    let mut b = direct.start_election();
    // B must wait behind A.
    follows(&mut b, 0, Duration::from_secs(10)).await;

    proxy.freeze();
    let t0 = Instant::now();
    let ((a_event, a_at), (fb, b_at)) = tokio::join!(
        async {
            let ev = timeout(Duration::from_secs(15), a.next_event())
                .await
                .expect("A steps down")
                .expect("event");
            (ev, t0.elapsed())
        },
        async { (granted(&mut b, Duration::from_secs(15)).await, t0.elapsed()) },
    );
    // For the record only: how long each took is the machine's business; that each happened
    // (within the deadlines above) while A was cut off is the test's.
    eprintln!("partition: A stepped down after {a_at:?}, B was granted after {b_at:?}");
    match a_event {
        LeadershipEvent::Revoked { session_id, reason } => {
            assert_eq!(session_id, fa.session_id());
            // A cannot hear the expiry through the partition: its own clock ends the term.
            assert_eq!(reason, RevokeReason::ConnectionLost);
        }
        other => panic!("expected revocation, got {other:?}"),
    }
    assert_ne!(fb.session_id(), fa.session_id());
    assert!(!a.is_leader());
    let old_session = a.session_info().map(|s| s.id());

    proxy.thaw();
    let jobs = direct.job_graph_store();
    // A ZooKeeper slow to answer on a loaded machine is no answer: ask again until it decides
    // (the fencing is what is tested, not the server's speed).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let err = loop {
        match jobs.put(&fa, "j1", b"from the deposed leader").await {
            Err(HaError::Unavailable { .. }) if tokio::time::Instant::now() < deadline => {}
            other => break other.expect_err("fenced"),
        }
    };
    assert!(matches!(err, HaError::NotLeader { .. }), "got {err:?}");
    loop {
        match jobs.put(&fb, "j1", b"from the new leader").await {
            Err(HaError::Unavailable { .. }) if tokio::time::Instant::now() < deadline => {}
            other => break other.expect("new leader writes"),
        }
    }
    // A rejoins with a new session, as a follower behind B, and does not lead while B lives.
    wait_until(
        Duration::from_secs(15),
        "A to rejoin with a new session",
        || {
            a.session_info()
                .is_some_and(|s| Some(s.id()) != old_session)
        },
    )
    .await;
    follows(&mut a, 0, Duration::from_secs(15)).await;
    assert!(b.is_leader());
}

/// The pointer write reaches ZooKeeper but its reply is lost: the caller learns the outcome is
/// unknown, and the file the pointer may reference is kept (FLINK-22494/24543).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_commit_keeps_the_file() {
    init_tracing();
    let zk = ZkServer::start();
    let proxy = Proxy::start(zk.process.client_port()).await;
    let dir = tempfile::tempdir().unwrap();
    let direct = services(zk.connect_string(), dir.path());
    let via_proxy = services(proxy.connect_string(), dir.path());
    let mut election = direct.start_election();
    let fence = granted(&mut election, Duration::from_secs(10)).await;

    // A long key makes the pointer write the largest request on the connection, so the proxy
    // can single it out: reads name the key once, the write names it in the path and the file.
    let key = "k".repeat(150);
    let store = via_proxy.job_graph_store();
    store.put(&fence, &key, b"v1").await.expect("first write");
    let blobs_before: BTreeSet<String> = direct.blob_store().list().unwrap().into_iter().collect();

    proxy.drop_replies_after_request_larger_than(320);
    let err = store
        .put(&fence, &key, b"v2")
        .await
        .expect_err("reply was dropped");
    assert!(matches!(err, HaError::CommitUnknown { .. }), "got {err:?}");
    assert!(err.is_retryable());

    // The write did land; its file is there, the pointer names it, and the data reads back.
    let blobs_after: BTreeSet<String> = direct.blob_store().list().unwrap().into_iter().collect();
    assert_eq!(
        blobs_after.len(),
        blobs_before.len() + 1,
        "the new file must be kept"
    );
    let pointed = direct
        .job_graph_store()
        .file_of(&key)
        .await
        .unwrap()
        .expect("pointer");
    assert!(
        blobs_after.contains(&pointed),
        "pointer references a missing file"
    );
    assert!(
        !blobs_before.contains(&pointed),
        "the ambiguous write was applied"
    );
    assert_eq!(
        direct.job_graph_store().get(&key).await.unwrap().as_deref(),
        Some(&b"v2"[..])
    );
}

/// A client's retrieval loses its session during a partition and the leader changes meanwhile:
/// once the network heals it opens a new session and reports the new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieval_recovers_from_a_lost_session() {
    init_tracing();
    let zk = ZkServer::start();
    let proxy = Proxy::start(zk.process.client_port()).await;
    let dir = tempfile::tempdir().unwrap();
    let direct = services(zk.connect_string(), dir.path());
    let via_proxy = services(proxy.connect_string(), dir.path());

    let mut retrieval = via_proxy.leader_retrieval("dispatcher").unwrap();
    let mut a = direct.start_election();
    let fa = granted(&mut a, Duration::from_secs(10)).await;
    let info_a = zk_ha::LeaderInfo::new(fa.session_id()).with_address("rpc", "a:1");
    a.publish(&fa, "dispatcher", &info_a).await.unwrap();
    let seen = timeout(Duration::from_secs(5), retrieval.wait_for(|v| v.is_some()))
        .await
        .expect("sees A")
        .unwrap();
    assert_eq!(seen, Some(info_a.clone()));

    let expired = expired_sessions(zk.process.client_port());
    proxy.freeze();
    let mut b = direct.start_election();
    a.close().await;
    let fb = granted(&mut b, Duration::from_secs(5)).await;
    let info_b = zk_ha::LeaderInfo::new(fb.session_id()).with_address("rpc", "b:1");
    b.publish(&fb, "dispatcher", &info_b).await.unwrap();
    // The retrieval's session, cut off, expires on the server (the only session that can:
    // A closed its own).
    wait_until(
        Duration::from_secs(15),
        "the server to expire the cut-off session",
        || expired_sessions(zk.process.client_port()) > expired,
    )
    .await;
    // Cut off, it keeps the last value it knew (stale, but fenced by its session id).
    assert_eq!(retrieval.current(), Some(info_a));

    proxy.thaw();
    let seen = timeout(
        Duration::from_secs(15),
        retrieval.wait_for(|v| v.as_ref() == Some(&info_b)),
    )
    .await
    .expect("sees B after the partition heals")
    .unwrap();
    assert_eq!(seen, Some(info_b));
}
