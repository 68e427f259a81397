//! Shared test support: the crate's `testkit` (real ZooKeeper servers, a fault-injecting proxy)
//! plus logging.
#![allow(dead_code, unused_imports)] // each test binary uses a different part

pub use zk_ha::testkit::*;

/// Installs a tracing subscriber once, so failures show the library's logs (`RUST_LOG`).
pub fn init_tracing() {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "zk_ha=info".into()),
            )
            .with_test_writer()
            .try_init();
    });
}

/// Polls `check` every 20 ms until it holds; fails naming `what` once `within` has passed.
pub async fn wait_until(within: std::time::Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Waits until `e` has decided to follow more than `before` times: it read the latch directory
/// with its own node in it and found another one ahead, the listing a wrong grant would come
/// from. Then it must not lead and must have reported nothing.
pub async fn follows(e: &mut zk_ha::LeaderElection, before: u64, within: std::time::Duration) {
    let mut decisions = e.watch_follow_decisions();
    tokio::time::timeout(within, decisions.wait_for(|n| *n > before))
        .await
        .unwrap_or_else(|_| panic!("the contender did not decide to follow within {within:?}"))
        .expect("election running");
    assert!(!e.is_leader(), "a contender behind the leader leads");
    if let Ok(ev) = tokio::time::timeout(std::time::Duration::ZERO, e.next_event()).await {
        panic!("unexpected leadership event {ev:?}");
    }
}

/// Waits until `e` has seen its connection come back within its session more than `before`
/// times: the moment it could have given up its term.
pub async fn reconnected(e: &zk_ha::LeaderElection, before: u64, within: std::time::Duration) {
    let mut reconnections = e.watch_reconnections();
    tokio::time::timeout(within, reconnections.wait_for(|n| *n > before))
        .await
        .unwrap_or_else(|_| panic!("no reconnection within the session after {within:?}"))
        .expect("election running");
}

/// How many sessions the server at `port` has expired so far (`mntr`'s
/// `zk_stale_sessions_expired`).
pub fn expired_sessions(port: u16) -> u64 {
    four_letter(port, "mntr")
        .lines()
        .find_map(|l| l.strip_prefix("zk_stale_sessions_expired"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}
