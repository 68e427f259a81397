//! sluice on native Kubernetes: the JobManager as a Deployment's pod, TaskManager pods on
//! demand, owned by that Deployment, and the client side of `sluice kubernetes-session` /
//! `run -t kubernetes-session` / `run -t kubernetes-application`.
//!
//! - [`client`]: a small client of the API server (kubeconfig or in-cluster credentials,
//!   get/create/patch/delete, list and watch);
//! - [`specs`]: the cluster's objects (Deployment, Service, Secret, TaskManager pods) and what
//!   a pod's status means, as pure functions with unit tests;
//! - [`jobmanager`]: the JobManager pod's process (`sluice kubernetes-jobmanager`): a normal
//!   JobManager plus the loop that carries out `crate::resource::pool`'s decisions with pods;
//! - [`session`]: starting, finding and stopping a session from a client;
//! - [`application`]: starting an application cluster (one job, gone when the job ends) and
//!   waiting for its job from a client.
//!
//! The command-line verbs are in `crate::cli::kubernetes`.

pub mod application;
pub mod client;
pub mod error;
pub mod jobmanager;
pub mod session;
pub mod specs;

pub use error::KubeError;
