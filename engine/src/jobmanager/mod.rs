//! The JobManager: the Dispatcher (job submission, archive), one JobMaster per job, and
//! sluice's own ResourceManager for slots. The cores (`dispatcher`, `jobmaster`,
//! `resourcemanager`, `restart`, and the checkpoint coordinator in `crate::checkpoint`) are
//! pure state machines; `service` runs them, `endpoint` speaks the TaskManager protocol,
//! `leadership` is the ZooKeeper HA part and `process` starts it all.

pub mod adaptive;
pub mod artifacts;
pub mod dispatcher;
pub mod endpoint;
pub mod ha_state;
pub mod jobmaster;
pub mod leadership;
pub mod log_requests;
pub mod metrics;
pub mod process;
pub mod resourcemanager;
pub mod restart;
pub mod service;

pub use process::{JobManager, StartError};
