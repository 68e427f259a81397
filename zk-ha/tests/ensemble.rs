//! Behaviour on a 3-node ZooKeeper ensemble.

mod common;

use std::time::Duration;

use common::{ZkEnsemble, init_tracing, reconnected};
use tokio::time::timeout;
use zk_ha::{HaConfig, LeadershipEvent, ZooKeeperHaServices};

/// Killing the ensemble's leader moves the client to another server within the session: the
/// sluice leader keeps its term and its fenced writes keep working (no job restart). The same
/// holds for a restart of the whole ensemble within the session timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_leader_loss_and_full_restart_do_not_revoke_leadership() {
    init_tracing();
    let mut ensemble = ZkEnsemble::start(3);
    let zk_leader = ensemble.wait_leader(Duration::from_secs(30));
    let dir = tempfile::tempdir().unwrap();
    let config = HaConfig::new(ensemble.connect_string(), dir.path())
        .with_cluster_id("ensemble-test")
        .with_session_timeout(Duration::from_secs(8))
        .with_connection_timeout(Duration::from_secs(1));
    let ha = ZooKeeperHaServices::new(&config).unwrap();
    let mut election = ha.start_election();
    let fence = match timeout(Duration::from_secs(15), election.next_event()).await {
        Ok(Some(LeadershipEvent::Granted(f))) => f,
        other => panic!("expected a grant, got {other:?}"),
    };
    let jobs = ha.job_graph_store();
    jobs.put(&fence, "j1", b"before").await.unwrap();

    // Losing its leader makes every server drop its clients until a new quorum forms, so the
    // election's connection goes and comes back within the session.
    let reconnections = *election.watch_reconnections().borrow();
    ensemble.members[zk_leader].kill();
    let new_zk_leader = ensemble.wait_leader(Duration::from_secs(30));
    assert_ne!(new_zk_leader, zk_leader);

    // The write goes through once the remaining two servers have formed a quorum.
    let mut result = Err(None);
    for _ in 0..100 {
        match jobs.put(&fence, "j1", b"after").await {
            Ok(()) => {
                result = Ok(());
                break;
            }
            Err(e) if e.is_retryable() => {
                result = Err(Some(e));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("fenced write failed after the ZooKeeper leader died: {e}"),
        }
    }
    assert!(result.is_ok(), "write kept failing: {result:?}");
    assert_eq!(
        jobs.get("j1").await.unwrap().as_deref(),
        Some(&b"after"[..])
    );
    reconnected(&election, reconnections, Duration::from_secs(30)).await;
    if let Ok(ev) = timeout(Duration::ZERO, election.next_event()).await {
        panic!("leadership changed although the session lived: {ev:?}");
    }
    assert_eq!(election.current_fence(), Some(fence.clone()));

    // Restart the whole ensemble within the session timeout: sessions are in the servers' logs,
    // so the term survives this too.
    let reconnections = *election.watch_reconnections().borrow();
    for m in ensemble.members.iter_mut() {
        m.kill();
    }
    for m in ensemble.members.iter_mut() {
        m.restart();
    }
    ensemble.wait_leader(Duration::from_secs(30));
    let mut result = Err(None);
    for _ in 0..100 {
        match jobs.put(&fence, "j1", b"after full restart").await {
            Ok(()) => {
                result = Ok(());
                break;
            }
            Err(e) if e.is_retryable() => {
                result = Err(Some(e));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("fenced write failed after the ensemble restarted: {e}"),
        }
    }
    assert!(result.is_ok(), "write kept failing: {result:?}");
    reconnected(&election, reconnections, Duration::from_secs(30)).await;
    if let Ok(ev) = timeout(Duration::ZERO, election.next_event()).await {
        panic!("leadership changed across a full ensemble restart within the session: {ev:?}");
    }
    assert_eq!(election.current_fence(), Some(fence));
}
