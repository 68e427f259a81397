//! sluice: a distributed batch and stream processing engine with Apache Flink's architecture.
//!
//! One binary plays every role: `sluice jobmanager` (Dispatcher with REST API, a JobMaster per
//! job, the ResourceManager), `sluice taskmanager` (slots running subtasks as threads, exchanging
//! records with other TaskManagers over QUIC), and the client verbs (`run`, `list`, `cancel`).
//! The modules follow that architecture; see `docs/architecture.md`.

pub mod allocator;
pub mod api;
pub mod checkpoint;
/// The command line: parsing, dispatch to the roles and verbs, and what the verbs print.
pub mod cli;
pub mod common;
pub mod config;
pub mod connectors;
pub mod embedded;
pub mod examples;
pub mod graph;
pub mod ha;
pub mod jobmanager;
pub mod kubernetes;
pub mod logdir;
pub mod logfile;
pub mod metrics;
pub mod network;
pub mod pids;
pub mod record;
pub mod resource;
pub mod rest;
pub mod rpc;
pub mod security;
pub mod state;
pub mod taskmanager;
pub mod threads;
pub mod timezone;
pub mod yarn;

/// The `main` of a job artifact: a user's binary that registers its programs and hands over.
/// It answers the cluster (what it holds, a program's job graph, a worker's subtasks) and has
/// every verb of the `sluice` command line, so `my-job run -t local my-program ARGS` runs one of
/// its programs in an embedded cluster. See docs/user-code.md.
///
/// ```no_run
/// # use std::sync::Arc;
/// # struct MyJob;
/// # impl sluice::api::JobProgram for MyJob {
/// #     fn name(&self) -> &str { "my-job" }
/// #     fn description(&self) -> &str { "" }
/// #     fn usage(&self) -> &str { "" }
/// #     fn build(&self, _: &sluice::api::StreamExecutionEnvironment, _: &[String]) -> Result<String, String> { Ok("x".into()) }
/// # }
/// fn main() -> std::process::ExitCode {
///     let mut programs = sluice::api::ProgramRegistry::new();
///     programs.register(Arc::new(MyJob)).expect("one program of that name");
///     sluice::job_main(programs)
/// }
/// ```
pub fn job_main(programs: api::ProgramRegistry) -> std::process::ExitCode {
    allocator::tune();
    cli::commands::main_with(programs)
}
