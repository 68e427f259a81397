//! What every active resource provider (YARN, Kubernetes) shares: the decisions about
//! TaskManager workers as a pure core ([`pool`]). Each provider adapts its own notion of a
//! worker (a YARN container, a Kubernetes pod) to it and carries out its actions. Both run
//! application clusters, whose one job is an [`application::ApplicationJob`].

pub mod application;
pub mod pool;
