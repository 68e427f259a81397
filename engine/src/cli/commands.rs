//! The `sluice` command line: the two process kinds and Flink's client verbs.

use crate::checkpoint::AfterSavepoint;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser, Subcommand};

use crate::common::ids::JobId;
use crate::config::Config;
use crate::embedded::EmbeddedCluster;
use crate::rest::client::RestClient;
use crate::security::ClusterSecret;
use crate::taskmanager::service::TaskManager;

/// sluice: distributed batch and stream processing with Flink's architecture.
#[derive(Parser, Debug)]
#[command(name = "sluice", version, about)]
pub struct Cli {
    /// Configuration directory holding config.yaml (default: $SLUICE_CONF_DIR, else ./conf if
    /// it has a config.yaml, else built-in defaults).
    #[arg(long, global = true, value_name = "DIR")]
    pub config_dir: Option<PathBuf>,
    /// Overrides a configuration key, e.g. `-D rest.port=8082`.
    #[arg(short = 'D', global = true, value_name = "KEY=VALUE")]
    pub dynamic: Vec<String>,
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Runs a JobManager (Dispatcher, REST API and web UI, JobMasters, ResourceManager).
    Jobmanager,
    /// Runs a TaskManager that registers with the JobManager.
    Taskmanager {
        /// The JobManager's RPC address (default: jobmanager.rpc.address:jobmanager.rpc.port).
        #[arg(long, value_name = "HOST:PORT")]
        jobmanager: Option<String>,
    },
    /// Submits a job: a bundled example's name, then its arguments.
    Run(RunArgs),
    /// Lists running and scheduled jobs (with -a also finished ones).
    List {
        #[command(flatten)]
        target: Target,
        /// Also show terminated jobs.
        #[arg(short = 'a', long = "all")]
        all: bool,
    },
    /// Cancels a job.
    Cancel {
        #[command(flatten)]
        target: Target,
        /// The job's id.
        job_id: String,
    },
    /// Takes a savepoint of a running job (into DIR or execution.checkpointing.savepoint-dir).
    Savepoint {
        #[command(flatten)]
        target: Target,
        /// The job's id.
        job_id: String,
        /// Where the savepoint goes.
        target_directory: Option<String>,
    },
    /// Stops a job with a savepoint: the job ends FINISHED and can resume from the savepoint.
    Stop {
        #[command(flatten)]
        target: Target,
        /// Where the savepoint goes (default: execution.checkpointing.savepoint-dir).
        #[arg(short = 'p', long = "savepointPath", value_name = "DIR")]
        savepoint_path: Option<String>,
        /// Sends the watermark to the end of time before the savepoint, so that every
        /// event-time window and timer fires (for a job that ends for good).
        #[arg(short = 'd', long)]
        drain: bool,
        /// The job's id.
        job_id: String,
    },
    /// Lists the bundled example jobs and their arguments.
    Examples,
    /// Starts a sluice session cluster on YARN (the JobManager as ApplicationMaster,
    /// TaskManager containers on demand), or attaches to, lists or kills sessions.
    YarnSession(super::yarn::SessionArgs),
    /// The JobManager as YARN ApplicationMaster (started by a NodeManager, not by hand).
    #[command(hide = true)]
    YarnAppmaster,
    /// Starts a sluice session cluster on Kubernetes (a JobManager Deployment, TaskManager
    /// pods on demand) named by -D kubernetes.cluster-id, or stops one (--kill).
    KubernetesSession(super::kubernetes::SessionArgs),
    /// The JobManager pod of a Kubernetes cluster (started by its Deployment, not by hand).
    #[command(hide = true)]
    KubernetesJobmanager(super::kubernetes::JobManagerArgs),
    /// Writes a new job project: a Cargo project whose binary is a job artifact to submit with
    /// `sluice run`.
    NewJob {
        /// The project's folder (its name names the job and the binary).
        dir: PathBuf,
        /// The sluice package to depend on (its folder: engine/ in sluice's repository;
        /// default: the sources this binary was built from).
        #[arg(long, value_name = "DIR")]
        sluice_path: Option<PathBuf>,
        /// Depend on sluice from this git repository instead.
        #[arg(long, value_name = "URL")]
        sluice_git: Option<String>,
    },
    /// Prints what this binary holds, as a job artifact (read by the JobManager on upload).
    #[command(name = "sluice-describe", hide = true)]
    Describe,
    /// Prints a program's job graph as JSON (run by the JobManager for a submission).
    #[command(name = "sluice-plan", hide = true)]
    Plan {
        /// The program.
        program: String,
        /// Its default parallelism.
        parallelism: u32,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Runs one job's subtasks for the TaskManager that started this process (the cluster's
    /// secret comes on standard input, the TaskManager's address in SLUICE_WORKER_PARENT).
    #[command(name = "sluice-worker", hide = true)]
    Worker {
        /// The job.
        job: String,
    },
    /// Checks the output of the `counting` example: every record exactly once.
    CheckCounting {
        /// The number of records the job emitted.
        #[arg(long)]
        records: u64,
        /// The number of keys.
        #[arg(long)]
        keys: u64,
        /// The job ran with `--window-ms W`: check its per-window lines.
        #[arg(long = "window-ms", value_name = "W")]
        window_ms: Option<u64>,
        /// The job's output directory.
        dir: PathBuf,
    },
}

/// Where the JobManager's REST API is.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// The JobManager's REST address (default: rest.address:rest.port from the configuration);
    /// `yarn-session`: the YARN session in the properties file `sluice yarn-session -d` wrote.
    #[arg(short = 'm', long = "jobmanager", value_name = "HOST:PORT")]
    pub jobmanager: Option<String>,
}

/// `sluice run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: Target,
    /// `local`: run in an embedded cluster in this process; `remote` (default when -m is given
    /// or a cluster answers at the configured address); `yarn-session`: the YARN session
    /// started with `sluice yarn-session -d`; `yarn-application`: a YARN application of its own
    /// that ends with the job; `kubernetes-session`: the Kubernetes session
    /// -D kubernetes.cluster-id names; `kubernetes-application`: a Kubernetes cluster of its
    /// own that ends with the job (a job artifact then is `local:///path/in/the/image`).
    #[arg(
        short = 't',
        long = "target",
        value_name = "local|remote|yarn-session|yarn-application|kubernetes-session|kubernetes-application"
    )]
    pub deployment: Option<String>,
    /// Parallelism of the job's operators (default: parallelism.default).
    #[arg(short = 'p', long = "parallelism")]
    pub parallelism: Option<u32>,
    /// Starts the job from a savepoint or a retained checkpoint directory.
    #[arg(short = 's', long = "fromSavepoint", value_name = "PATH")]
    pub from_savepoint: Option<String>,
    /// With -s: skip the state of operators the program no longer has instead of refusing the
    /// restore (sets execution.savepoint.ignore-unclaimed-state for the job).
    #[arg(short = 'n', long = "allowNonRestoredState")]
    pub allow_non_restored_state: bool,
    /// Detached: print the job id and return instead of waiting for the result.
    #[arg(short = 'd', long = "detached")]
    pub detached: bool,
    /// With a job artifact that holds several programs: the one to run (Flink's entry class).
    #[arg(short = 'c', long = "class", value_name = "PROGRAM")]
    pub class: Option<String>,
    /// The job: a job artifact's path (a binary built with `sluice::job_main`, e.g.
    /// `./target/release/my-job`; `local:///opt/job/my-job` for one inside the image of a
    /// Kubernetes application), or a bundled program's name (see `sluice examples`).
    pub job: String,
    /// The job's arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// The configuration directory: the flag, then `$SLUICE_CONF_DIR`, then `./conf`.
fn conf_dir(flag: &Option<PathBuf>) -> Option<PathBuf> {
    if let Some(dir) = flag {
        return Some(dir.clone());
    }
    if let Some(dir) = std::env::var_os("SLUICE_CONF_DIR") {
        return Some(PathBuf::from(dir));
    }
    let local = PathBuf::from("conf");
    local
        .join(crate::config::CONFIG_FILE_NAME)
        .is_file()
        .then_some(local)
}

/// Logs to stderr; a daemon whose stderr is a file (`scripts/daemon.sh` redirects it) writes
/// that file itself, rolled over by `log.file.max-size` and `log.file.max-count`.
fn init_logging(default: &str, rotate: Option<&crate::config::LogOptions>, worker: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    if worker {
        // A job worker's lines are logged again by its TaskManager, which adds the time.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .without_time()
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .try_init();
        return;
    }
    use std::io::IsTerminal;
    let rotating = rotate.and_then(|log| {
        let path = crate::logdir::stderr_file()?;
        crate::logfile::RotatingFile::open(&path, log.file_max_size, log.file_max_count, true).ok()
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match rotating {
        Some(file) => builder
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .try_init(),
        None => builder
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
}

/// Runs the command line of the `sluice` binary: its programs are the bundled examples.
pub fn main() -> std::process::ExitCode {
    main_with(crate::examples::bundled())
}

/// Runs the command line of a binary whose programs are `programs`: the `sluice` binary, or a
/// user's job artifact (`crate::job_main`), which so has every verb too.
pub fn main_with(programs: crate::api::ProgramRegistry) -> std::process::ExitCode {
    let cli = Cli::parse_from(super::yarn::flink_style_args(std::env::args_os()));
    let worker = matches!(cli.command, Command::Worker { .. });
    let server = worker
        || matches!(
            cli.command,
            Command::Jobmanager
                | Command::Taskmanager { .. }
                | Command::YarnAppmaster
                | Command::KubernetesJobmanager(_)
        );
    // The configuration first: the daemons' log rotation is configured there. An unreadable
    // one is reported as `execute` reports it.
    let dir = conf_dir(&cli.config_dir);
    let log = Config::load(dir.as_deref(), &cli.dynamic)
        .ok()
        .map(|c| c.log);
    init_logging(
        if server { "info" } else { "warn" },
        log.as_ref().filter(|_| server && !worker),
        worker,
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(execute(cli, std::sync::Arc::new(programs))) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn execute(
    cli: Cli,
    programs: std::sync::Arc<crate::api::ProgramRegistry>,
) -> Result<std::process::ExitCode> {
    if let Command::Worker { job } = &cli.command {
        // Exactly the configuration its TaskManager handed down, no file of its own.
        let config = Config::load(None, &cli.dynamic)?;
        return super::artifact::worker(config, programs, job).await;
    }
    let dir = conf_dir(&cli.config_dir);
    let config = Config::load(dir.as_deref(), &cli.dynamic)?;
    match cli.command {
        Command::Describe => super::artifact::describe(&programs),
        Command::NewJob {
            dir,
            sluice_path,
            sluice_git,
        } => super::artifact::new_job(&dir, sluice_path, sluice_git),
        Command::Plan {
            program,
            parallelism,
            args,
        } => super::artifact::plan(&programs, program, parallelism, args),
        Command::Worker { .. } => unreachable!("handled above"),
        Command::Jobmanager => {
            let secret = ClusterSecret::resolve(&config, dir.as_deref())?;
            let jm = crate::rest::start_jobmanager(config, secret, programs).await?;
            println!(
                "JobManager REST endpoint: {}://{}",
                jm.shared.config().security.rest_ssl.scheme(),
                jm.rest_address
            );
            wait_for_shutdown().await;
            drop(jm);
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Taskmanager { jobmanager } => {
            let secret = ClusterSecret::resolve(&config, dir.as_deref())?;
            let jobmanager_given = jobmanager.is_some();
            let address = jobmanager.unwrap_or_else(|| {
                format!(
                    "{}:{}",
                    config.jobmanager.rpc_address, config.jobmanager.rpc_port
                )
            });
            let ha = crate::ha::services(&config)?;
            let tm = TaskManager::start(config, secret, programs).await?;
            let worker = tm.clone();
            let work = async move {
                match (ha, jobmanager_given) {
                    (Some(ha), false) => worker.run_ha(ha).await,
                    _ => worker.run(address).await,
                }
            };
            tokio::select! {
                err = work => {
                    tm.shutdown();
                    Err(anyhow!(err))
                }
                _ = wait_for_shutdown() => {
                    tm.shutdown();
                    Ok(std::process::ExitCode::SUCCESS)
                }
            }
        }
        Command::YarnAppmaster => {
            let code = crate::yarn::am::run(config, dir.as_deref(), programs).await?;
            Ok(std::process::ExitCode::from(code))
        }
        Command::YarnSession(args) => super::yarn::session(config, args).await,
        Command::KubernetesJobmanager(args) => {
            let job = args.job()?;
            let code =
                crate::kubernetes::jobmanager::run(config, dir.as_deref(), programs, job).await?;
            Ok(std::process::ExitCode::from(code))
        }
        Command::KubernetesSession(args) => super::kubernetes::session(config, args).await,
        Command::CheckCounting {
            records,
            keys,
            window_ms,
            dir,
        } => {
            // An hdfs:// directory is read with blocking calls, which must not run on a worker
            // of this runtime.
            let shown = dir.display().to_string();
            let report = tokio::task::spawn_blocking(move || {
                crate::examples::check_counting_dir(records, keys, window_ms, &dir)
            })
            .await
            .context("the output check stopped")?
            .with_context(|| format!("cannot read the output directory {shown}"))?;
            print!("{report}");
            Ok(if report.is_exactly_once() {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            })
        }
        Command::Examples => {
            for p in programs.iter() {
                println!(
                    "{}\n    {}\n    arguments: {}",
                    p.name(),
                    p.description(),
                    p.usage()
                );
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::List { target, all } => {
            let client =
                RestClient::from_config(&target_address(&config, &target).await?, &config)?;
            let jobs = client.jobs_overview().await?;
            let offset =
                crate::timezone::local_utc_offset_seconds(crate::jobmanager::service::now_ms());
            print!("{}", super::list::format_list(&jobs, all, offset));
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Cancel { target, job_id } => {
            let id: JobId = job_id.parse().map_err(|e: String| anyhow!(e))?;
            let client =
                RestClient::from_config(&target_address(&config, &target).await?, &config)?;
            client.cancel(id).await?;
            println!("Cancelled job {id}.");
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Savepoint {
            target,
            job_id,
            target_directory,
        } => {
            let id: JobId = job_id.parse().map_err(|e: String| anyhow!(e))?;
            let client =
                RestClient::from_config(&target_address(&config, &target).await?, &config)?;
            println!("Triggering savepoint for job {id}.");
            let request = client
                .trigger_savepoint(
                    id,
                    target_directory.as_deref().map(absolute_path).as_deref(),
                    AfterSavepoint::Run,
                )
                .await?;
            println!("Waiting for response...");
            savepoint_outcome(client.await_savepoint(id, &request).await?)
        }
        Command::Stop {
            target,
            savepoint_path,
            drain,
            job_id,
        } => {
            let id: JobId = job_id.parse().map_err(|e: String| anyhow!(e))?;
            let client =
                RestClient::from_config(&target_address(&config, &target).await?, &config)?;
            println!("Suspending job \"{id}\" with a savepoint.");
            let request = client
                .trigger_savepoint(
                    id,
                    savepoint_path.as_deref().map(absolute_path).as_deref(),
                    if drain {
                        AfterSavepoint::Drain
                    } else {
                        AfterSavepoint::Stop
                    },
                )
                .await?;
            savepoint_outcome(client.await_savepoint(id, &request).await?)
        }
        Command::Run(args) => {
            let mut job_config = job_scoped(&cli.dynamic);
            if args.allow_non_restored_state {
                job_config.push((
                    crate::jobmanager::service::ALLOW_NON_RESTORED_STATE_KEY.to_string(),
                    "true".to_string(),
                ));
            }
            run(config, args, job_config, programs).await
        }
    }
}

/// The `-D` overrides a job may carry to the cluster (checkpointing, state, restart strategy).
fn job_scoped(dynamic: &[String]) -> Vec<(String, String)> {
    dynamic
        .iter()
        .filter_map(|d| d.split_once('='))
        .filter(|(k, _)| {
            crate::jobmanager::service::JOB_SCOPED_PREFIXES
                .iter()
                .any(|p| k.trim().starts_with(p))
        })
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .collect()
}

fn savepoint_outcome(outcome: Result<String, String>) -> Result<std::process::ExitCode> {
    match outcome {
        Ok(path) => {
            println!("Savepoint completed. Path: {path}");
            println!("You can resume your program from this savepoint with the run command (-s).");
            Ok(std::process::ExitCode::SUCCESS)
        }
        Err(cause) => bail!("the savepoint failed: {cause}"),
    }
}

/// The JobManager's REST address: `-m`, else (with ZooKeeper HA) the leader's as published,
/// else `rest.address:rest.port`.
async fn rest_address(config: &Config, target: &Target) -> Result<String> {
    if let Some(m) = &target.jobmanager {
        return Ok(m.clone());
    }
    if let Some(leader) = crate::ha::leader_rest_address(config)
        .await
        .map_err(|e| anyhow!(e))?
    {
        return Ok(leader);
    }
    Ok(format!("{}:{}", config.rest.address, config.rest.port))
}

/// [`rest_address`], with `-m yarn-session` resolved through the YARN properties file.
async fn target_address(config: &Config, target: &Target) -> Result<String> {
    if target.jobmanager.as_deref() == Some("yarn-session") {
        return Ok(crate::yarn::client::find_session(config)
            .await?
            .rest_address);
    }
    rest_address(config, target).await
}

async fn wait_for_shutdown() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

async fn run(
    config: Config,
    args: RunArgs,
    job_config: Vec<(String, String)>,
    programs: std::sync::Arc<crate::api::ProgramRegistry>,
) -> Result<std::process::ExitCode> {
    if args.deployment.as_deref() == Some("kubernetes-application") {
        let job = super::kubernetes::application_job(
            &programs,
            args.job,
            args.class,
            args.args,
            args.parallelism,
            job_config,
            args.from_savepoint,
        )?;
        return super::kubernetes::run_application(config, job, args.detached).await;
    }
    let artifact = super::artifact::artifact_path(&args.job, &programs)?;
    if args.deployment.as_deref() == Some("yarn-application") {
        // With an artifact, the application's processes run the artifact itself: it is a
        // whole sluice with the job's programs as its bundled ones.
        let name = match &artifact {
            Some(path) => super::artifact::program_of(path, args.class.as_deref())?,
            None if args.class.is_some() => bail!(
                "-c/--class names a program of a job artifact; {} is a bundled program",
                args.job
            ),
            None => args.job,
        };
        let job = crate::yarn::ApplicationJob {
            name,
            args: args.args,
            parallelism: args.parallelism,
            overrides: job_config,
            savepoint: args.from_savepoint,
            artifact,
        };
        return super::yarn::run_application(config, job, args.detached).await;
    }
    let local = match args.deployment.as_deref() {
        Some("local") => true,
        Some("remote") | Some("yarn-session") | Some("kubernetes-session") => false,
        Some(other) => {
            bail!(
                "unknown deployment target '{other}': use 'local', 'remote', 'yarn-session', 'yarn-application', 'kubernetes-session' or 'kubernetes-application'"
            )
        }
        // Without -m, fall back to an embedded cluster when nothing answers at the configured address.
        None => {
            args.target.jobmanager.is_none()
                && match rest_address(&config, &args.target).await {
                    Ok(address) => !cluster_answers(&address, &config).await?,
                    Err(_) => true,
                }
        }
    };
    if local && args.detached {
        bail!(
            "an embedded (local) cluster lives only as long as this command: -d needs a running cluster (-m HOST:PORT)"
        );
    }
    let parallelism = args.parallelism.unwrap_or(config.parallelism_default);
    let (_cluster, address) = if local {
        // The embedded cluster gets one slot per subtask; say what was asked, not the slot key.
        if !(1..=crate::config::MAX_PARALLELISM).contains(&parallelism) {
            bail!(
                "parallelism {parallelism} is out of range: must be between 1 and {}",
                crate::config::MAX_PARALLELISM
            );
        }
        let cluster =
            EmbeddedCluster::start_running(config.clone(), 1, parallelism, (*programs).clone())
                .await
                .context("starting the embedded cluster")?;
        let address = cluster.rest_address();
        (Some(cluster), address)
    } else if args.deployment.as_deref() == Some("yarn-session") {
        let session = crate::yarn::client::find_session(&config).await?;
        (None, session.rest_address)
    } else if args.deployment.as_deref() == Some("kubernetes-session") {
        (
            None,
            crate::kubernetes::session::find_session(&config).await?,
        )
    } else {
        (None, target_address(&config, &args.target).await?)
    };
    let client = RestClient::from_config(&address, &config)?;
    let started = Instant::now();
    let job_args = absolute_path_args(&args.args);
    let savepoint = args.from_savepoint.as_deref().map(absolute_path);
    let job_id = match &artifact {
        Some(path) => {
            let id = client
                .upload_artifact(path)
                .await
                .with_context(|| format!("uploading the job artifact {}", path.display()))?;
            client
                .run_artifact(
                    &id,
                    args.class.as_deref(),
                    &job_args,
                    args.parallelism.or(Some(parallelism)),
                    &job_config,
                    savepoint.as_deref(),
                )
                .await?
        }
        None => {
            if args.class.is_some() {
                bail!(
                    "-c/--class names a program of a job artifact; {} is a bundled program",
                    args.job
                );
            }
            client
                .submit_with(
                    &args.job,
                    &job_args,
                    args.parallelism.or(Some(parallelism)),
                    &job_config,
                    savepoint.as_deref(),
                )
                .await?
        }
    };
    println!("Job has been submitted with JobID {job_id}");
    if args.detached {
        return Ok(std::process::ExitCode::SUCCESS);
    }
    loop {
        let state = client.job_state(job_id).await?;
        match state.as_str() {
            "FINISHED" => {
                println!("Program execution finished");
                println!("Job with JobID {job_id} has finished.");
                println!("Job Runtime: {} ms", started.elapsed().as_millis());
                return Ok(std::process::ExitCode::SUCCESS);
            }
            "FAILED" | "CANCELED" => {
                let causes = client.exceptions(job_id).await.unwrap_or_default();
                eprintln!(
                    "Job {job_id} {}.",
                    if state == "FAILED" {
                        "failed"
                    } else {
                        "was cancelled"
                    }
                );
                for cause in causes {
                    eprintln!("Caused by: {cause}");
                }
                return Ok(std::process::ExitCode::FAILURE);
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Whether a JobManager answers at `address`. A client that cannot be built for want of usable
/// TLS files is an error: falling back to an embedded cluster would hide it.
async fn cluster_answers(address: &str, config: &Config) -> Result<bool> {
    let client = match RestClient::from_config(address, config) {
        Ok(client) => client,
        Err(e @ crate::rest::client::ClientError::Tls(_)) => return Err(e.into()),
        Err(_) => return Ok(false),
    };
    Ok(
        tokio::time::timeout(Duration::from_secs(2), client.overview())
            .await
            .is_ok_and(|r| r.is_ok()),
    )
}

/// The arguments the bundled programs read as paths: the JobManager refuses relative paths
/// (they would mean its own working directory), so the CLI resolves them against its own.
const PATH_ARGUMENTS: [&str; 2] = ["--input", "--output"];

/// `args` with the value of each of [`PATH_ARGUMENTS`] made absolute.
fn absolute_path_args(args: &[String]) -> Vec<String> {
    let mut out = args.to_vec();
    for i in 1..out.len() {
        if PATH_ARGUMENTS.contains(&out[i - 1].as_str()) && !out[i].starts_with("--") {
            out[i] = absolute_path(&out[i]);
        }
    }
    out
}

/// A relative plain path made absolute against the working directory; URIs, absolute and empty
/// paths are left as they are.
fn absolute_path(raw: &str) -> String {
    let path = std::path::Path::new(raw);
    if raw.is_empty() || path.is_absolute() || raw.contains(':') {
        return raw.to_string();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(path).display().to_string(),
        Err(_) => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_input_and_output_paths_become_absolute() {
        let cwd = std::env::current_dir().unwrap();
        let args: Vec<String> = ["--input", "README.md", "--output", "/tmp/o", "--rate", "5"]
            .map(String::from)
            .to_vec();
        let out = absolute_path_args(&args);
        assert_eq!(out[1], cwd.join("README.md").display().to_string());
        assert_eq!(&out[2..], &args[2..]);
        assert_eq!(absolute_path("file:///x"), "file:///x");
        assert_eq!(absolute_path(""), "");
    }
}
