//! The Kubernetes verbs of the command line: `sluice kubernetes-session` (start a session,
//! `--kill` one) and the hidden `sluice kubernetes-jobmanager` the JobManager pod runs. The
//! client itself is [`crate::kubernetes::session`].

use crate::config::Config;
use crate::kubernetes::session::{cluster_id_or_new, deploy, kill};

/// `sluice kubernetes-session`'s flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SessionArgs {
    /// Stops the session -D kubernetes.cluster-id names (deletes its Deployment and so every
    /// pod, Service and Secret of it), then exits.
    #[arg(long = "kill")]
    pub kill: bool,
}

/// `sluice kubernetes-session`: starts a session and returns once its REST API answers
/// (sessions on Kubernetes are detached, as Flink's).
pub async fn session(config: Config, args: SessionArgs) -> anyhow::Result<std::process::ExitCode> {
    let ns = config.kubernetes.namespace.clone();
    if args.kill {
        let id = kill(&config).await?;
        println!("Deleted the Kubernetes session {id} (Deployment {id} in namespace {ns}).");
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let id = cluster_id_or_new(&config);
    let session = deploy(&config, &id).await?;
    println!(
        "Kubernetes session {id} started in namespace {ns} in {:.1} s.",
        session.startup.as_secs_f64()
    );
    println!(
        "JobManager REST endpoint: {}://{}",
        config.security.rest_ssl.scheme(),
        session.rest_address
    );
    println!(
        "Submit jobs with `sluice run -t kubernetes-session -D kubernetes.cluster-id={id} ...`;"
    );
    println!(
        "stop the session with `sluice kubernetes-session -D kubernetes.cluster-id={id} --kill`."
    );
    Ok(std::process::ExitCode::SUCCESS)
}
