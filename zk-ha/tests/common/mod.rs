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
