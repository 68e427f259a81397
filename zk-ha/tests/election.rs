//! Leader election, publication and retrieval against a real ZooKeeper server.

mod common;

use std::time::Duration;

use common::{ZkServer, follows, init_tracing, reconnected, wait_until};
use tokio::time::timeout;
use zk_ha::{
    HaConfig, HaError, LeaderElection, LeaderFence, LeaderInfo, LeadershipEvent, RevokeReason,
    ZooKeeperHaServices,
};

fn services(zk: &ZkServer, storage: &std::path::Path, session: Duration) -> ZooKeeperHaServices {
    let config = HaConfig::new(zk.connect_string(), storage)
        .with_cluster_id("election-test")
        .with_session_timeout(session)
        .with_connection_timeout(Duration::from_secs(1));
    ZooKeeperHaServices::new(&config).expect("valid config")
}

async fn next(e: &mut LeaderElection, within: Duration) -> LeadershipEvent {
    match timeout(within, e.next_event()).await {
        Ok(Some(ev)) => ev,
        Ok(None) => panic!("election stopped"),
        Err(_) => panic!("no leadership event within {within:?}"),
    }
}

async fn granted(e: &mut LeaderElection, within: Duration) -> LeaderFence {
    match next(e, within).await {
        LeadershipEvent::Granted(f) => f,
        other => panic!("expected a grant, got {other:?}"),
    }
}

/// Expires a session from outside, as the server does to a frozen or partitioned client: attach
/// to the session with its id and password, then close it. The owner's client may win the
/// connection back during the handshake, so try a few times.
async fn expire_session(quorum: &str, session: zookeeper_client::SessionInfo) {
    for attempt in 0..20 {
        let thief = zookeeper_client::Client::connector()
            .with_session(session.clone())
            .with_session_timeout(Duration::from_secs(2))
            .with_connection_timeout(Duration::from_millis(500))
            .connect(quorum)
            .await;
        match thief {
            Ok(client) => {
                // Dropping the client sends CloseSession. The owner may win the session's
                // connection back before that arrives (seen under load), so only a later
                // attach answered with SessionExpired proves the session is gone.
                drop(client);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(zookeeper_client::Error::SessionExpired) => return,
            Err(e) => eprintln!("attaching to the session failed (attempt {attempt}): {e}"),
        }
    }
    panic!("could not attach to the session to expire it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_contenders_exactly_one_leader_then_handover_on_close() {
    init_tracing();
    let zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ha = services(&zk, dir.path(), Duration::from_secs(2));
    let mut a = ha.start_election();
    let fa = granted(&mut a, Duration::from_secs(10)).await;
    let mut b = ha.start_election();
    // B joins behind A and must stay a follower while A lives.
    follows(&mut b, 0, Duration::from_secs(10)).await;
    assert!(a.is_leader() && !b.is_leader());

    // A leaves: B takes over at once (A's latch node is deleted on close), with a new term.
    a.close().await;
    let fb = granted(&mut b, Duration::from_secs(5)).await;
    assert_ne!(fa.session_id(), fb.session_id());
    assert_ne!(fa.latch_path(), fb.latch_path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_revokes_hands_over_and_fences_the_old_leader() {
    init_tracing();
    let zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ha = services(&zk, dir.path(), Duration::from_secs(2));
    let jobs = ha.job_graph_store();

    let mut a = ha.start_election();
    let fa = granted(&mut a, Duration::from_secs(10)).await;
    let mut b = ha.start_election();
    follows(&mut b, 0, Duration::from_secs(10)).await;
    jobs.put(&fa, "job-1", b"graph from A")
        .await
        .expect("leader A may write");
    let session_a = a.session_info().expect("A has a session");
    let a_followed = *a.watch_follow_decisions().borrow();

    // Expire A's session from outside, as the server does to a frozen or partitioned leader:
    // attach to the session and close it.
    expire_session(&zk.connect_string(), session_a.clone()).await;

    // A hears of it and steps down at once; B takes over with a fresh term.
    match next(&mut a, Duration::from_secs(10)).await {
        LeadershipEvent::Revoked { session_id, reason } => {
            assert_eq!(session_id, fa.session_id());
            assert_eq!(reason, RevokeReason::SessionExpired);
        }
        other => panic!("expected revocation, got {other:?}"),
    }
    assert!(!a.is_leader());
    let fb = granted(&mut b, Duration::from_secs(10)).await;
    assert_ne!(fb.session_id(), fa.session_id());

    // The deposed leader's writes fail with a typed error and leave nothing behind.
    let blobs_before = ha.blob_store().list().unwrap();
    let err = jobs
        .put(&fa, "job-1", b"stale graph")
        .await
        .expect_err("stale leader must be fenced");
    assert!(matches!(err, HaError::NotLeader { .. }), "got {err:?}");
    assert!(!err.is_retryable());
    let err = jobs
        .remove(&fa, "job-1")
        .await
        .expect_err("stale leader must not delete");
    assert!(matches!(err, HaError::NotLeader { .. }), "got {err:?}");
    assert_eq!(
        ha.blob_store().list().unwrap(),
        blobs_before,
        "a refused write must not leave a blob"
    );
    let err = a
        .publish(
            &fa,
            "dispatcher",
            &LeaderInfo::new(fa.session_id()).with_address("rpc", "a:1"),
        )
        .await
        .expect_err("stale leader must not publish");
    assert!(matches!(err, HaError::NotLeader { .. }), "got {err:?}");
    assert_eq!(
        jobs.get("job-1").await.unwrap().as_deref(),
        Some(&b"graph from A"[..])
    );

    // The new leader can write; A rejoined as a follower with a new session.
    jobs.put(&fb, "job-1", b"graph from B")
        .await
        .expect("leader B may write");
    assert_eq!(
        jobs.get("job-1").await.unwrap().as_deref(),
        Some(&b"graph from B"[..])
    );
    wait_until(
        Duration::from_secs(10),
        "A to rejoin with a new session",
        || a.session_info().is_some_and(|s| s.id() != session_a.id()),
    )
    .await;
    follows(&mut a, a_followed, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_disconnect_keeps_leadership() {
    init_tracing();
    let mut zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    // Long enough to restart a JVM inside one session.
    let ha = services(&zk, dir.path(), Duration::from_secs(8));
    let mut a = ha.start_election();
    let fa = granted(&mut a, Duration::from_secs(10)).await;
    let session = a.session_info().unwrap();
    let reconnections = *a.watch_reconnections().borrow();

    // Crash and restart the server; the session survives (it is in the server's log).
    zk.restart();
    // Once the connection is back the election has weighed the outage against the term.
    reconnected(&a, reconnections, Duration::from_secs(20)).await;
    if let Ok(ev) = timeout(Duration::ZERO, a.next_event()).await {
        panic!("unexpected leadership event {ev:?}");
    }
    assert_eq!(
        a.current_fence(),
        Some(fa.clone()),
        "the term must survive a transient disconnect"
    );
    assert_eq!(a.session_info().unwrap().id(), session.id());

    // The term's fence still works after the reconnect.
    let jobs = ha.job_graph_store();
    let mut last = None;
    for _ in 0..50 {
        match jobs.put(&fa, "job-t", b"after reconnect").await {
            Ok(()) => {
                last = None;
                break;
            }
            Err(e) if e.is_retryable() => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("fenced write after reconnect failed: {e}"),
        }
    }
    assert!(last.is_none(), "write kept failing: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_longer_than_session_timeout_revokes_then_rejoins() {
    init_tracing();
    let mut zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let session_timeout = Duration::from_secs(2);
    let ha = services(&zk, dir.path(), session_timeout);
    let mut a = ha.start_election();
    let fa = granted(&mut a, Duration::from_secs(10)).await;

    // The leader cannot know whether its session outlived the outage: once the server would have
    // expired it, the leader must step down on its own, while the server is still down.
    zk.process.kill();
    let start = std::time::Instant::now();
    match next(&mut a, Duration::from_secs(15)).await {
        LeadershipEvent::Revoked { session_id, reason } => {
            assert_eq!(session_id, fa.session_id());
            assert_eq!(reason, RevokeReason::ConnectionLost);
        }
        other => panic!("expected revocation, got {other:?}"),
    }
    assert!(
        start.elapsed() >= session_timeout / 2,
        "stepped down too early: {:?}",
        start.elapsed()
    );
    assert!(!a.is_leader());

    // Back online: the contender rejoins and, alone, wins again with a new term; the old term's
    // fence stays dead.
    zk.restart();
    let fa2 = granted(&mut a, Duration::from_secs(20)).await;
    assert_ne!(fa2.session_id(), fa.session_id());
    let jobs = ha.job_graph_store();
    let err = jobs
        .put(&fa, "job-x", b"old term")
        .await
        .expect_err("old term fenced");
    assert!(matches!(err, HaError::NotLeader { .. }), "got {err:?}");
    jobs.put(&fa2, "job-x", b"new term")
        .await
        .expect("new term writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieval_follows_leader_changes() {
    init_tracing();
    let zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ha = services(&zk, dir.path(), Duration::from_secs(2));
    let mut retrieval = ha.leader_retrieval("dispatcher").unwrap();
    assert_eq!(retrieval.current(), None);
    // A second component is independent.
    let mut other = ha.leader_retrieval("resource_manager").unwrap();

    let mut a = ha.start_election();
    let fa = granted(&mut a, Duration::from_secs(10)).await;
    let info_a = LeaderInfo::new(fa.session_id())
        .with_address("rpc", "10.0.0.1:6123")
        .with_address("rest", "http://10.0.0.1:8081");
    a.publish(&fa, "dispatcher", &info_a)
        .await
        .expect("publish A");
    let seen = timeout(Duration::from_secs(5), retrieval.wait_for(|v| v.is_some()))
        .await
        .expect("sees A")
        .unwrap();
    assert_eq!(seen, Some(info_a.clone()));

    let mut b = ha.start_election();
    follows(&mut b, 0, Duration::from_secs(10)).await;
    a.close().await;
    // A's ephemeral connection info vanished with its session.
    let seen = timeout(Duration::from_secs(5), retrieval.wait_for(|v| v.is_none()))
        .await
        .expect("sees no leader")
        .unwrap();
    assert_eq!(seen, None);

    let fb = granted(&mut b, Duration::from_secs(5)).await;
    let info_b = LeaderInfo::new(fb.session_id()).with_address("rpc", "10.0.0.2:6123");
    b.publish(&fb, "dispatcher", &info_b)
        .await
        .expect("publish B");
    let seen = timeout(
        Duration::from_secs(5),
        retrieval.wait_for(|v| v.as_ref().map(|i| i.session_id) == Some(fb.session_id())),
    )
    .await
    .expect("sees B")
    .unwrap();
    assert_eq!(seen, Some(info_b.clone()));
    // The other component saw none of this; it sees only what is published for it.
    assert_eq!(other.current(), None);
    let info_rm = LeaderInfo::new(fb.session_id()).with_address("rpc", "10.0.0.2:6124");
    b.publish(&fb, "resource_manager", &info_rm)
        .await
        .expect("publish B's resource manager");
    let seen = timeout(
        Duration::from_secs(5),
        other.wait_for(|v| v.as_ref() == Some(&info_rm)),
    )
    .await
    .expect("sees the resource manager")
    .unwrap();
    assert_eq!(seen, Some(info_rm));
    assert_eq!(retrieval.current(), Some(info_b));
}

/// Three contenders started at once: at every step exactly one leads, and each hand-over brings a
/// new term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_contenders_hand_over_one_at_a_time() {
    init_tracing();
    let zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ha = services(&zk, dir.path(), Duration::from_secs(2));
    let mut contenders: Vec<LeaderElection> = (0..3).map(|_| ha.start_election()).collect();
    let mut terms = std::collections::HashSet::new();
    while !contenders.is_empty() {
        // Wait for a leader among the remaining contenders.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let leader = loop {
            let leaders: Vec<usize> = (0..contenders.len())
                .filter(|i| contenders[*i].is_leader())
                .collect();
            assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
            if let Some(&i) = leaders.first() {
                break i;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no leader among {}",
                contenders.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // Every other contender has read the latch directory and decided to follow.
        for i in (0..contenders.len()).filter(|&i| i != leader) {
            follows(&mut contenders[i], 0, Duration::from_secs(10)).await;
        }
        let n = contenders.iter().filter(|c| c.is_leader()).count();
        assert_eq!(n, 1, "leaders: {n}");
        let fence = contenders[leader]
            .current_fence()
            .expect("leader has a fence");
        assert!(terms.insert(fence.session_id()), "term id reused");
        contenders.remove(leader).close().await;
    }
    assert_eq!(terms.len(), 3);
}
