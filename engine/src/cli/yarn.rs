//! The YARN verbs of the command line: `sluice yarn-session` (its flags in Flink's spelling,
//! what it prints, Ctrl-C kills the session) and `sluice run -t yarn-application`. The YARN
//! client itself is [`crate::yarn::client`].

use std::time::Duration;

use super::signals::Interrupt;
use crate::config::Config;
use crate::yarn::client::{ResourceManager, attach, deploy, kill, list, remove_staging_dir};
use crate::yarn::properties::{read_properties, write_properties};
use crate::yarn::{ApplicationJob, YarnError};

/// `sluice yarn-session`'s flags (Flink's names; `-nm`, `-tm`, ... also work with one dash).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SessionArgs {
    /// Detached: start the session, write the properties file and return.
    #[arg(short = 'd', long = "detached")]
    pub detached: bool,
    /// The application's name in YARN (yarn.application.name).
    #[arg(long = "nm", value_name = "NAME")]
    pub name: Option<String>,
    /// Slots per TaskManager (taskmanager.numberOfTaskSlots).
    #[arg(short = 's', long = "slots", value_name = "SLOTS")]
    pub slots: Option<u32>,
    /// TaskManager container memory, e.g. 1024 (MB) or 1g (taskmanager.memory.process.size).
    #[arg(long = "tm", value_name = "MEM")]
    pub taskmanager_memory: Option<String>,
    /// JobManager container memory (jobmanager.memory.process.size).
    #[arg(long = "jm", value_name = "MEM")]
    pub jobmanager_memory: Option<String>,
    /// The YARN queue (yarn.application.queue).
    #[arg(long = "qu", value_name = "QUEUE")]
    pub queue: Option<String>,
    /// Attaches to a running session instead of starting one.
    #[arg(long = "id", value_name = "APPID")]
    pub application_id: Option<String>,
    /// Lists the sluice applications YARN runs, then exits.
    #[arg(long = "list", conflicts_with_all = ["kill"])]
    pub list: bool,
    /// Kills the session (-id APPID, else the one in the properties file), then exits.
    #[arg(long = "kill")]
    pub kill: bool,
}

/// Flags Flink spells with one dash and several letters; clap wants two dashes for them.
const FLINK_LONG_FLAGS: [&str; 5] = ["-nm", "-tm", "-jm", "-qu", "-id"];

/// Rewrites `-nm NAME` to `--nm NAME` (and `-tm`, `-jm`, `-qu`, `-id`) after `yarn-session`,
/// so Flink's spelling of `yarn-session` flags works unchanged.
pub fn flink_style_args(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut in_session = false;
    args.into_iter()
        .map(|a| {
            if a == "yarn-session" {
                in_session = true;
            } else if in_session && FLINK_LONG_FLAGS.iter().any(|f| a == *f) {
                let mut long = std::ffi::OsString::from("-");
                long.push(&a);
                return long;
            }
            a
        })
        .collect()
}

/// A memory size from the command line: a plain number is MB (as Flink's `-tm 1024`).
fn memory_arg(raw: &str) -> String {
    if !raw.is_empty() && raw.chars().all(|c| c.is_ascii_digit()) {
        format!("{raw}m")
    } else {
        raw.to_string()
    }
}

/// `sluice yarn-session`.
pub async fn session(
    mut config: Config,
    args: SessionArgs,
) -> anyhow::Result<std::process::ExitCode> {
    if args.list {
        let apps = list(&config).await?;
        if apps.is_empty() {
            println!("No running sluice applications.");
        }
        for a in apps {
            println!(
                "{}\t{:?}\t{}\t{}\t{}",
                a.id, a.state, a.name, a.queue, a.am_rpc_address
            );
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    if args.kill {
        let id = match &args.application_id {
            Some(id) => id.clone(),
            None => read_properties()
                .map(|(id, _)| id)
                .ok_or_else(|| YarnError::NoSession("give -id APPID".into()))?,
        };
        kill(&config, &id).await?;
        println!("Killed YARN application {id}.");
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let sets = [
        ("yarn.application.name", args.name.clone()),
        (
            "taskmanager.numberOfTaskSlots",
            args.slots.map(|s| s.to_string()),
        ),
        (
            "taskmanager.memory.process.size",
            args.taskmanager_memory.as_deref().map(memory_arg),
        ),
        (
            "jobmanager.memory.process.size",
            args.jobmanager_memory.as_deref().map(memory_arg),
        ),
        ("yarn.application.queue", args.queue.clone()),
    ];
    for (key, value) in sets {
        if let Some(v) = value {
            config.set(key, &v)?;
        }
    }
    let mut interrupt = Interrupt::install()?;
    let session = match &args.application_id {
        Some(id) => attach(&config, id).await?,
        None => {
            let s = deploy(&config, None).await?;
            println!(
                "YARN application {} is RUNNING; its JobManager answered {} ms after submission.",
                s.application_id,
                s.startup.as_millis()
            );
            s
        }
    };
    if interrupt.happened() && args.application_id.is_none() {
        kill(&config, &session.application_id).await?;
        println!(
            "Interrupted: killed YARN application {}.",
            session.application_id
        );
        return Ok(std::process::ExitCode::FAILURE);
    }
    println!(
        "JobManager Web Interface: {}://{}",
        config.security.rest_ssl.scheme(),
        session.rest_address
    );
    let path = write_properties(&session)?;
    if args.detached {
        println!(
            "Wrote {}: `sluice run -t yarn-session ...` finds this session.",
            path.display()
        );
        println!(
            "Stop it with `sluice yarn-session -id {} --kill`.",
            session.application_id
        );
        return Ok(std::process::ExitCode::SUCCESS);
    }
    println!("Press Ctrl-C to stop the session (kills the YARN application).");
    let ended = watch(&config, &session.application_id, &mut interrupt).await?;
    match ended {
        Some(e) => {
            let _ = std::fs::remove_file(&path);
            Err(e.into())
        }
        None => {
            kill(&config, &session.application_id).await?;
            println!("Killed YARN application {}.", session.application_id);
            Ok(std::process::ExitCode::SUCCESS)
        }
    }
}

/// `sluice run -t yarn-application JOB ARGS`: a YARN application whose JobManager runs this
/// one job and ends with it (FINISHED/SUCCEEDED when the job finishes, FAILED when it fails,
/// KILLED when it is cancelled). Without `detached`, waits for the end; exit code 0 only on
/// SUCCEEDED.
pub async fn run_application(
    mut config: Config,
    job: ApplicationJob,
    detached: bool,
) -> anyhow::Result<std::process::ExitCode> {
    if config.yarn.application_name == Config::default().yarn.application_name {
        config.set("yarn.application.name", &format!("sluice: {}", job.name))?;
    }
    let mut interrupt = Interrupt::install()?;
    let session = deploy(&config, Some(&job)).await?;
    let id = &session.application_id;
    match &job.artifact {
        Some(path) => println!(
            "Submitted YARN application {id} running {} from {}.",
            job.name,
            path.display()
        ),
        None => println!("Submitted YARN application {id} running {}.", job.name),
    }
    if !session.rest_address.is_empty() {
        println!(
            "JobManager Web Interface: {}://{}",
            config.security.rest_ssl.scheme(),
            session.rest_address
        );
    }
    if detached && !interrupt.happened() {
        println!("Stop it with `sluice yarn-session -id {id} --kill`.");
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let rm = ResourceManager::connect(&config)?;
    let report = tokio::select! {
        r = rm.wait_until_ended(id) => r?,
        _ = interrupt.wait() => {
            kill(&config, id).await?;
            println!("Killed YARN application {id}.");
            return Ok(std::process::ExitCode::FAILURE);
        }
    };
    remove_staging_dir(&config, id).await;
    println!(
        "YARN application {id} ended {:?}/{:?}: {}",
        report.state, report.final_status, report.diagnostics
    );
    Ok(if report.final_status == yarn_am::FinalStatus::Succeeded {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// Waits for Ctrl-C or SIGTERM (`None`), or for the application to end on its own (its error).
async fn watch(
    config: &Config,
    id: &str,
    interrupt: &mut Interrupt,
) -> Result<Option<YarnError>, YarnError> {
    let rm = ResourceManager::connect(config)?;
    loop {
        tokio::select! {
            _ = interrupt.wait() => return Ok(None),
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
        if let Some(ended) = rm.ended(id).await {
            return Ok(Some(ended));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_spellings_of_session_flags_are_accepted() {
        let args: Vec<std::ffi::OsString> = [
            "sluice",
            "-nm",
            "x",
            "yarn-session",
            "-nm",
            "n",
            "-tm",
            "512",
            "-d",
            "-id",
            "a",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let out: Vec<String> = flink_style_args(args)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            out,
            [
                "sluice",
                "-nm",
                "x",
                "yarn-session",
                "--nm",
                "n",
                "--tm",
                "512",
                "-d",
                "--id",
                "a"
            ]
        );
        assert_eq!(memory_arg("512"), "512m");
        assert_eq!(memory_arg("1g"), "1g");
    }
}
