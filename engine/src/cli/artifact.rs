//! What a job artifact does for the cluster that runs it: describe its programs, build a
//! program's job graph, and run a job's subtasks as a TaskManager's worker (see
//! `crate::taskmanager` and docs/user-code.md). The `sluice` binary answers the same way for
//! its bundled programs.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};

use crate::api::ProgramRegistry;
use crate::config::Config;
use crate::graph::PlanAnswer;
use crate::rpc::artifact::{ArtifactDescription, ProgramInfo, WORKER_PARENT_ENV};
use crate::rpc::messages::ProgramSpec;
use crate::security::ClusterSecret;
use crate::taskmanager::service::TaskManager;

/// Prints the artifact's description as JSON.
pub(super) fn describe(programs: &ProgramRegistry) -> Result<std::process::ExitCode> {
    let description = ArtifactDescription::current(
        programs
            .iter()
            .map(|p| ProgramInfo {
                name: p.name().to_string(),
                description: p.description().to_string(),
                usage: p.usage().to_string(),
            })
            .collect(),
    );
    println!("{}", serde_json::to_string(&description)?);
    Ok(std::process::ExitCode::SUCCESS)
}

/// Prints the job graph of `program` (or why there is none) as JSON; a panicking program is
/// an answer too.
pub(super) fn plan(
    programs: &ProgramRegistry,
    program: String,
    parallelism: u32,
    args: Vec<String>,
) -> Result<std::process::ExitCode> {
    let spec = ProgramSpec::new(program, args);
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::graph::build_job_graph(programs, &spec, parallelism)
    }));
    let answer = match built {
        Ok(Ok(graph)) => PlanAnswer::Graph(graph),
        Ok(Err(e)) => PlanAnswer::Error(e.to_string()),
        Err(panic) => PlanAnswer::Error(format!(
            "program {} panicked while building its dataflow: {}",
            spec.name,
            panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)")
        )),
    };
    println!("{}", serde_json::to_string(&answer)?);
    Ok(std::process::ExitCode::SUCCESS)
}

/// Runs as the worker of `job` for the TaskManager named in [`WORKER_PARENT_ENV`], until that
/// TaskManager ends the connection.
pub(super) async fn worker(
    config: Config,
    programs: Arc<ProgramRegistry>,
    job: &str,
) -> Result<std::process::ExitCode> {
    let job = job.parse().map_err(|e: String| anyhow!(e))?;
    let parent = std::env::var(WORKER_PARENT_ENV).with_context(|| {
        format!("{WORKER_PARENT_ENV} is not set: only a TaskManager starts workers")
    })?;
    let mut secret = String::new();
    std::io::stdin()
        .take(4096)
        .read_to_string(&mut secret)
        .context("reading the cluster secret from standard input")?;
    let secret = ClusterSecret::from_hex(&secret)
        .ok_or_else(|| anyhow!("standard input holds no cluster secret"))?;
    let tm = TaskManager::start_worker(config, secret, programs, job).await?;
    let served = tm.clone().serve_parent(&parent).await;
    tm.shutdown();
    served.map_err(|e| anyhow!("the connection to the TaskManager at {parent}: {e}"))?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Whether `job` names a job artifact rather than a program of `programs`: a path with a `/`,
/// or an existing file that is no program's name. An artifact path must be a file.
pub(super) fn artifact_path(job: &str, programs: &ProgramRegistry) -> Result<Option<PathBuf>> {
    let path = PathBuf::from(job);
    let looks_like_path = job.contains('/');
    if !looks_like_path && (programs.find(job).is_some() || !path.is_file()) {
        return Ok(None);
    }
    if !path.is_file() {
        bail!("the job artifact {job} does not exist or is not a file");
    }
    Ok(Some(path))
}
