//! What a job artifact does for the cluster that runs it: describe its programs, build a
//! program's job graph, and run a job's subtasks as a TaskManager's worker (see
//! `crate::taskmanager` and docs/user-code.md). The `sluice` binary answers the same way for
//! its bundled programs.

use std::io::Read;
use std::path::{Path, PathBuf};
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

/// The program of the job artifact at `path` to run: `class` when given, else its only one.
/// The artifact must be one this sluice can run (see [`crate::jobmanager::artifacts::describe`]).
pub(super) fn program_of(path: &Path, class: Option<&str>) -> Result<String> {
    let description = crate::jobmanager::artifacts::describe(path)
        .map_err(|reason| anyhow!("{} is not a usable job artifact: {reason}", path.display()))?;
    let program = description
        .program(class)
        .map_err(|reason| anyhow!("{}: {reason}", path.display()))?;
    Ok(program.name.clone())
}

/// The job project `sluice new-job` writes: its manifest and its program.
const TEMPLATE_MANIFEST: &str = include_str!("template/Cargo.toml.txt");
const TEMPLATE_MAIN: &str = include_str!("template/main.rs.txt");

/// Where this binary's sluice sources were when it was built (the template's default
/// dependency).
fn own_sources() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes a job project into `dir` (which must not exist or be empty): a Cargo project whose
/// binary is a job artifact, depending on the sluice sources at `sluice_path` (default: those
/// this binary was built from) or in the git repository `sluice_git`.
pub(super) fn new_job(
    dir: &Path,
    sluice_path: Option<PathBuf>,
    sluice_git: Option<String>,
) -> Result<std::process::ExitCode> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        bail!(
            "'{name}' cannot name a job: use letters, digits, '-' and '_', starting with a letter (it names the package and its binary)"
        );
    }
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        bail!("{} exists and is not empty", dir.display());
    }
    let (dependency, lock) = match (sluice_path, sluice_git) {
        (Some(_), Some(_)) => bail!("give --sluice-path or --sluice-git, not both"),
        (None, Some(url)) => (format!("sluice = {{ git = {url:?} }}"), None),
        (path, None) => {
            let engine = path.unwrap_or_else(own_sources);
            if !engine.join("Cargo.toml").is_file() {
                bail!(
                    "no sluice sources at {} (this binary was built from there): name them with --sluice-path DIR (the sluice package's folder: engine/ in sluice's repository) or --sluice-git URL",
                    engine.display()
                );
            }
            let engine = engine
                .canonicalize()
                .with_context(|| format!("resolving {}", engine.display()))?;
            // The same dependency versions sluice is tested with.
            let lock = engine
                .parent()
                .map(|root| root.join("Cargo.lock"))
                .filter(|lock| lock.is_file());
            (
                format!("sluice = {{ path = {:?} }}", engine.display().to_string()),
                lock,
            )
        }
    };
    std::fs::create_dir_all(dir.join("src"))
        .with_context(|| format!("creating {}", dir.display()))?;
    let fill = |text: &str| {
        text.replace("@NAME@", &name)
            .replace("@DEPENDENCY@", &dependency)
    };
    std::fs::write(dir.join("Cargo.toml"), fill(TEMPLATE_MANIFEST))?;
    std::fs::write(dir.join("src").join("main.rs"), fill(TEMPLATE_MAIN))?;
    std::fs::write(dir.join(".gitignore"), "/target\n")?;
    if let Some(lock) = lock {
        std::fs::copy(lock, dir.join("Cargo.lock"))?;
    }
    let shown = dir.display();
    println!("Created the job project {name} in {shown}.");
    println!("Build it:  cd {shown} && cargo build --release");
    println!("Artifact:  {shown}/target/release/{name}");
    println!(
        "Run it on a cluster:      sluice run [-m HOST:PORT] -p 2 {shown}/target/release/{name} [--input PATH] [--output DIR]"
    );
    println!("Run it in an embedded one: {shown}/target/release/{name} run -t local {name}");
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_job_writes_a_project_and_refuses_bad_names_and_full_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my-job");
        new_job(&dir, None, None).unwrap();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"my-job\""), "{manifest}");
        assert!(manifest.contains(&own_sources().canonicalize().unwrap().display().to_string()));
        let main = std::fs::read_to_string(dir.join("src/main.rs")).unwrap();
        assert!(main.contains("sluice::job_main(programs)") && !main.contains("@NAME@"));
        assert!(dir.join("Cargo.lock").is_file());
        let again = new_job(&dir, None, None).unwrap_err().to_string();
        assert!(again.contains("not empty"), "{again}");
        let bad = new_job(&tmp.path().join("9lives"), None, None)
            .unwrap_err()
            .to_string();
        assert!(bad.contains("cannot name a job"), "{bad}");
        let missing = new_job(
            &tmp.path().join("x"),
            Some(tmp.path().join("nowhere")),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(missing.contains("--sluice-path"), "{missing}");
        new_job(
            &tmp.path().join("g"),
            None,
            Some("https://example.invalid/sluice".into()),
        )
        .unwrap();
        let git = std::fs::read_to_string(tmp.path().join("g/Cargo.toml")).unwrap();
        assert!(
            git.contains("git = \"https://example.invalid/sluice\""),
            "{git}"
        );
    }
}
