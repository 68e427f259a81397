//! The Kubernetes verbs of the command line: `sluice kubernetes-session` (start a session,
//! `--kill` one), `sluice run -t kubernetes-application` and the hidden
//! `sluice kubernetes-jobmanager` the JobManager pod runs. The client itself is
//! [`crate::kubernetes::session`] and [`crate::kubernetes::application`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::bail;

use super::signals::Interrupt;
use crate::api::ProgramRegistry;
use crate::config::Config;
use crate::kubernetes::application;
use crate::kubernetes::session::{cluster_id_or_new, delete_cluster, deploy, kill};
use crate::kubernetes::specs::JOB_ARG;
use crate::resource::application::ApplicationJob;

/// How a job artifact inside the image is named, as in Flink (`local:///opt/job/my-job`).
const LOCAL_SCHEME: &str = "local://";

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
    let session = deploy(&config, &id, None).await?;
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

/// `sluice kubernetes-jobmanager`'s flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct JobManagerArgs {
    /// An application cluster's one job (hex-encoded JSON, written by
    /// `run -t kubernetes-application`).
    #[arg(long = "job", value_name = "HEX")]
    pub job: Option<String>,
}

impl JobManagerArgs {
    /// The application's job, if this JobManager runs one.
    pub fn job(&self) -> anyhow::Result<Option<ApplicationJob>> {
        self.job
            .as_deref()
            .map(|hex| ApplicationJob::decode(JOB_ARG, hex).map_err(anyhow::Error::msg))
            .transpose()
    }
}

/// The job of `run -t kubernetes-application TARGET`: a bundled program of `programs`, or with
/// `local:///path` a job artifact inside the image (`class` picks its program; without it the
/// JobManager runs its only one). A file on this machine is refused: the pods run what the
/// image holds.
pub fn application_job(
    programs: &ProgramRegistry,
    target: String,
    class: Option<String>,
    args: Vec<String>,
    parallelism: Option<u32>,
    overrides: Vec<(String, String)>,
    savepoint: Option<String>,
) -> anyhow::Result<ApplicationJob> {
    let (name, artifact) = if let Some(path) = target.strip_prefix(LOCAL_SCHEME) {
        if !path.starts_with('/') {
            bail!(
                "{target}: a job artifact in the image is named by its absolute path, e.g. local:///opt/job/my-job"
            );
        }
        (class.unwrap_or_default(), Some(PathBuf::from(path)))
    } else if programs.find(&target).is_some() {
        if class.is_some() {
            bail!("-c/--class names a program of a job artifact; {target} is a bundled program");
        }
        (target, None)
    } else if target.contains('/') || Path::new(&target).exists() {
        bail!(
            "{target} is a file on this machine, but a Kubernetes application runs what its image (kubernetes.container.image) holds: put the job artifact into the image and name it local:///path/in/the/image"
        );
    } else {
        let names: Vec<&str> = programs.iter().map(|p| p.name()).collect();
        bail!(
            "there is no bundled program '{target}' (there are: {}); a job artifact in the image is named local:///path/in/the/image",
            names.join(", ")
        );
    };
    Ok(ApplicationJob {
        name,
        args,
        parallelism,
        overrides,
        savepoint,
        artifact,
    })
}

/// `sluice run -t kubernetes-application`: starts a cluster of its own for `job`; detached,
/// returns once the job is submitted; else waits for the job's end, reports it and deletes the
/// cluster (which its JobManager would do a little later anyway).
pub async fn run_application(
    config: Config,
    job: ApplicationJob,
    detached: bool,
) -> anyhow::Result<std::process::ExitCode> {
    let ns = config.kubernetes.namespace.clone();
    let id = cluster_id_or_new(&config);
    let started = Instant::now();
    // Ctrl-C or SIGTERM while the cluster starts, or while an attached run waits for its job,
    // deletes the cluster (as it kills a YARN application): nothing runs on unattended.
    let mut interrupt = Interrupt::install()?;
    let app = tokio::select! {
        app = application::start(&config, &id, &job) => app?,
        _ = interrupt.wait() => return interrupted(&config, &id).await,
    };
    let what = match (&job.artifact, job.name.as_str()) {
        (Some(path), "") => format!("the program of {LOCAL_SCHEME}{}", path.display()),
        (Some(path), name) => format!("{name} from {LOCAL_SCHEME}{}", path.display()),
        (None, name) => name.to_string(),
    };
    println!(
        "Kubernetes application cluster {id} started in namespace {ns} running {what} in {:.1} s.",
        app.session.startup.as_secs_f64()
    );
    println!(
        "JobManager REST endpoint: {}://{}",
        config.security.rest_ssl.scheme(),
        app.session.rest_address
    );
    let job_id = app.status.job_id.clone().unwrap_or_default();
    if !job_id.is_empty() {
        println!("Job has been submitted with JobID {job_id}");
    }
    if detached && app.status.end.is_none() {
        println!(
            "The cluster goes when its job ends; stop it sooner with `sluice kubernetes-session -D kubernetes.cluster-id={id} --kill`."
        );
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let end = match app.status.end {
        Some(end) => Ok(end),
        None => tokio::select! {
            end = application::wait_for_end(&config, &id) => end,
            _ = interrupt.wait() => return interrupted(&config, &id).await,
        },
    };
    // Read: the cluster has served its purpose.
    let deleted = delete_cluster(&config, &id).await;
    let end = end?;
    if let Err(e) = deleted {
        eprintln!(
            "warning: cannot delete the application cluster {id} (its JobManager deletes it shortly): {e}"
        );
    }
    let job_name = if job_id.is_empty() {
        format!("of {what}")
    } else {
        job_id.clone()
    };
    let code = if end.state == "FINISHED" {
        println!("Program execution finished");
        println!("Job with JobID {job_id} has finished.");
        println!("Job Runtime: {} ms", started.elapsed().as_millis());
        std::process::ExitCode::SUCCESS
    } else {
        let how = if end.state == "CANCELED" {
            "was cancelled"
        } else {
            "failed"
        };
        eprintln!("Job {job_name} {how}.");
        for cause in &end.causes {
            eprintln!("Caused by: {cause}");
        }
        std::process::ExitCode::FAILURE
    };
    println!("Kubernetes application cluster {id} is deleted.");
    Ok(code)
}

/// Deletes the application cluster `id` after Ctrl-C or SIGTERM; the run fails.
async fn interrupted(config: &Config, id: &str) -> anyhow::Result<std::process::ExitCode> {
    delete_cluster(config, id).await?;
    eprintln!("Interrupted: the Kubernetes application cluster {id} and its job are deleted.");
    Ok(std::process::ExitCode::FAILURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(target: &str, class: Option<&str>) -> anyhow::Result<ApplicationJob> {
        application_job(
            &crate::examples::bundled(),
            target.into(),
            class.map(str::to_string),
            vec!["--x".into()],
            Some(2),
            Vec::new(),
            None,
        )
    }

    #[test]
    fn an_application_runs_a_bundled_program_or_an_artifact_in_the_image() {
        let bundled = job("wordcount", None).unwrap();
        assert_eq!(
            (bundled.name.as_str(), bundled.artifact),
            ("wordcount", None)
        );
        let in_image = job("local:///opt/job/my-job", Some("sum")).unwrap();
        assert_eq!(in_image.name, "sum");
        assert_eq!(in_image.artifact, Some(PathBuf::from("/opt/job/my-job")));
        assert_eq!(job("local:///opt/job/my-job", None).unwrap().name, "");
        let refused =
            |target: &str, class: Option<&str>| job(target, class).unwrap_err().to_string();
        assert!(refused("local://opt/x", None).contains("absolute path"));
        assert!(
            refused("./target/release/my-job", None)
                .contains("put the job artifact into the image")
        );
        assert!(refused("Cargo.toml", None).contains("local:///path/in/the/image"));
        assert!(refused("nope", None).contains("there is no bundled program 'nope'"));
        assert!(refused("wordcount", Some("x")).contains("bundled program"));
    }
}
