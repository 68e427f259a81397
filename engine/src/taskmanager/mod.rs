//! The TaskManager: offers slots, runs deployed subtasks as threads, exchanges records with
//! other TaskManagers, and reports to the JobManager.

mod local_state;
mod logs;
pub(crate) mod metrics;
pub mod service;
pub(crate) mod task;
mod worker;
