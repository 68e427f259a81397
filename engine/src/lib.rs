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
pub mod logfile;
pub mod metrics;
pub mod network;
pub mod pids;
pub mod record;
pub mod rest;
pub mod rpc;
pub mod security;
pub mod state;
pub mod taskmanager;
pub mod threads;
pub mod timezone;
pub mod yarn;
