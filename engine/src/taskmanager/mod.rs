//! The TaskManager: offers slots, runs deployed subtasks as threads, exchanges records with
//! other TaskManagers, and reports to the JobManager.

pub mod service;
pub(crate) mod task;
