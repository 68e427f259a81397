//! A contender that leads, publishes its address and counts checkpoints while it leads.
//!
//! ```text
//! scripts/zookeeper.sh start /tmp/zk 2181 &
//! cargo run -p zk-ha --example contender -- 127.0.0.1:2181 /tmp/ha host-a:6123
//! cargo run -p zk-ha --example contender -- 127.0.0.1:2181 /tmp/ha host-b:6123   # standby
//! ```
//! Kill the leader (Ctrl-C or `kill -9`) and watch the standby take over.

use std::time::Duration;

use zk_ha::{HaConfig, HaError, LeaderInfo, LeadershipEvent, ZooKeeperHaServices};

#[tokio::main]
async fn main() -> Result<(), HaError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "zk_ha=info".into()),
        )
        .init();
    let mut args = std::env::args().skip(1);
    let quorum = args.next().unwrap_or_else(|| "127.0.0.1:2181".into());
    let storage = args.next().unwrap_or_else(|| "/tmp/sluice-ha".into());
    let address = args.next().unwrap_or_else(|| "localhost:6123".into());

    let ha = ZooKeeperHaServices::new(&HaConfig::new(quorum, storage))?;
    let mut retrieval = ha.leader_retrieval("dispatcher")?;
    let mut election = ha.start_election();
    let counter = ha.checkpoint_id_counter("example-job")?;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            event = election.next_event() => match event {
                Some(LeadershipEvent::Granted(fence)) => {
                    println!("granted: term {}", fence.session_id());
                    let me = LeaderInfo::new(fence.session_id()).with_address("rpc", address.clone());
                    election.publish(&fence, "dispatcher", &me).await?;
                }
                Some(LeadershipEvent::Revoked { session_id, reason }) => {
                    println!("revoked: term {session_id} ({reason:?})");
                }
                None => return Ok(()),
            },
            leader = retrieval.changed() => println!("leader is now {:?}", leader?),
            _ = ticker.tick() => {
                if let Some(fence) = election.current_fence() {
                    match counter.get_and_increment(&fence).await {
                        Ok(id) => println!("checkpoint {id}"),
                        Err(e) => println!("checkpoint refused: {e} (retryable: {})", e.is_retryable()),
                    }
                }
            }
        }
    }
}
