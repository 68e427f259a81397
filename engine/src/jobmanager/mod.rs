//! The JobManager: the Dispatcher (REST API, job submission, archive), one JobMaster per job,
//! and sluice's own ResourceManager for slots. The cores are pure state machines; `service`
//! is the I/O shell that runs them.

pub mod dispatcher;
pub mod jobmaster;
pub mod resourcemanager;
pub mod restart;
pub mod service;
