//! A minimal YARN ApplicationMaster built on `yarn-am`, used by the end-to-end test.
//!
//! Started by a NodeManager as the AM container of an application submitted over REST, it
//! reads its AMRM token from `$HADOOP_TOKEN_FILE_LOCATION`, registers with the scheduler at
//! `$YARN_AM_SCHEDULER` (`host:port`), asks for one 128 MiB container, starts
//! `$DEMO_CONTAINER_COMMAND` (default `sleep 30`) in it through the NodeManager, and then:
//!
//! - `demo_am run`: waits until it runs, stops it, waits until YARN reports it complete, and
//!   unregisters with SUCCEEDED;
//! - `demo_am hold`: keeps heartbeating until YARN orders a shutdown or the process is killed;
//! - `demo_am failover` (submit with 2 attempts and keep-containers): attempt 1 starts the
//!   container and then dies without unregistering; attempt 2 finds the container in its
//!   registration (containers from previous attempts), stops it through the NodeManager with
//!   the NM token handed over at registration, and unregisters with SUCCEEDED.
//!
//! Any failure unregisters with FAILED and the error as diagnostics, and exits with 1.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use yarn_am::{
    AllocationMatcher, AmCommand, AmRmClient, Container, ContainerState, Credentials, Decision,
    FinalStatus, LaunchContext, NmClient, Resource,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const PRIORITY: i32 = 1;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let mode = std::env::args().nth(1).unwrap_or_else(|| "run".to_string());

    let scheduler =
        std::env::var("YARN_AM_SCHEDULER").unwrap_or_else(|_| "localhost:8030".to_string());
    let creds = match Credentials::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("demo_am: cannot read credentials: {e}");
            return ExitCode::FAILURE;
        }
    };
    capture_token_file();
    let token = match creds.amrm_token() {
        Ok(t) => t.clone(),
        Err(e) => {
            eprintln!("demo_am: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut rm = AmRmClient::new(scheduler, token).with_timeout(Duration::from_secs(30));
    let (host, attempt) = match yarn_am::ContainerEnv::from_env() {
        Ok(env) => {
            println!("demo_am: attempt {} on {}", env.attempt(), env.nm_host);
            (env.nm_host.clone(), env.attempt().attempt)
        }
        Err(e) => {
            eprintln!("demo_am: {e}");
            return ExitCode::FAILURE;
        }
    };
    let registration = match rm.register(&host, 0, "").await {
        Ok(r) => r,
        Err(e) => {
            // Without registration there is nothing to unregister from.
            eprintln!("demo_am: register failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match (mode.as_str(), attempt) {
        ("failover", 1) => crash_after_start(&mut rm).await,
        ("failover", _) => recover(&mut rm, registration.containers_from_previous_attempts).await,
        (m, _) => run(&mut rm, m == "hold").await,
    };
    match result {
        Ok(()) => {
            println!("demo_am: done");
            match rm
                .finish(
                    FinalStatus::Succeeded,
                    "demo container ran and was stopped",
                    None,
                    Duration::from_secs(30),
                )
                .await
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("demo_am: unregister failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("demo_am: failed: {e}");
            let _ = rm
                .finish(
                    FinalStatus::Failed,
                    &e.to_string(),
                    None,
                    Duration::from_secs(30),
                )
                .await;
            ExitCode::FAILURE
        }
    }
}

async fn run(rm: &mut AmRmClient, hold: bool) -> Result<(), BoxError> {
    let (container, mut nm) = start_one(rm).await?;
    if hold {
        loop {
            let a = rm.allocate(0.5).await?;
            if a.command == Some(AmCommand::Shutdown) {
                return Err("ResourceManager ordered shutdown".into());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    stop_and_await_completion(rm, &mut nm, &container).await
}

/// Attempt 1 of `failover`: start the container, then die as a crashing AM would.
async fn crash_after_start(rm: &mut AmRmClient) -> Result<(), BoxError> {
    let (container, _nm) = start_one(rm).await?;
    // YARN keeps across attempts only containers the RM itself has seen RUNNING, which it
    // learns from the NodeManager's next heartbeat (200 ms on the test cluster), not from our
    // own status query. Give it a few heartbeats before dying.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        rm.allocate(0.5).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    println!("demo_am: crashing on purpose with {} running", container.id);
    std::process::exit(3);
}

/// Attempt 2 of `failover`: take over the container the first attempt left running.
async fn recover(rm: &mut AmRmClient, previous: Vec<Container>) -> Result<(), BoxError> {
    println!(
        "demo_am: recovered {} container(s) from earlier attempts",
        previous.len()
    );
    let container = previous
        .into_iter()
        .next()
        .ok_or("no container survived the previous attempt")?;
    let nm_token = rm
        .nm_token(&container.node)
        .ok_or_else(|| format!("no NM token for {} after failover", container.node))?
        .clone();
    let mut nm = NmClient::new(&container.node, nm_token).with_timeout(Duration::from_secs(30));
    let status = nm.container_status(container.id).await?;
    if status.state != ContainerState::Running {
        return Err(format!("recovered container is {:?}", status.state).into());
    }
    println!("demo_am: {} is still running after failover", container.id);
    stop_and_await_completion(rm, &mut nm, &container).await
}

/// Gets one container, starts `$DEMO_CONTAINER_COMMAND` in it and waits until it runs.
async fn start_one(rm: &mut AmRmClient) -> Result<(Container, NmClient), BoxError> {
    let capability = Resource::new(128, 1);
    let mut matcher = AllocationMatcher::new();
    matcher.request(PRIORITY, capability, "worker");
    rm.set_request(PRIORITY, capability, 1);

    let container = allocate_one(rm, &mut matcher).await?;
    println!("demo_am: allocated {} on {}", container.id, container.node);
    let nm_token = rm
        .nm_token(&container.node)
        .ok_or_else(|| format!("no NM token for {}", container.node))?
        .clone();
    let mut nm = NmClient::new(&container.node, nm_token).with_timeout(Duration::from_secs(30));
    let command =
        std::env::var("DEMO_CONTAINER_COMMAND").unwrap_or_else(|_| "sleep 30".to_string());
    let launch = LaunchContext {
        commands: vec![
            command,
            "1><LOG_DIR>/stdout".into(),
            "2><LOG_DIR>/stderr".into(),
        ],
        ..Default::default()
    };
    nm.start_container(&container, &launch).await?;
    println!("demo_am: started {}", container.id);

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = nm.container_status(container.id).await?;
        match status.state {
            ContainerState::Running => break,
            ContainerState::Complete => {
                return Err(format!(
                    "container ended early: {} {}",
                    status.exit_status, status.diagnostics
                )
                .into());
            }
            _ if Instant::now() > deadline => {
                return Err("container did not reach RUNNING within 60 s".into());
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
        // Keep the RM's liveness monitor fed while we wait.
        rm.allocate(0.5).await?;
    }
    println!("demo_am: {} is running", container.id);
    Ok((container, nm))
}

/// Stops the container and waits until a heartbeat reports it complete.
async fn stop_and_await_completion(
    rm: &mut AmRmClient,
    nm: &mut NmClient,
    container: &Container,
) -> Result<(), BoxError> {
    nm.stop_container(container.id).await?;
    println!("demo_am: stop requested for {}", container.id);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = rm.allocate(1.0).await?;
        if let Some(s) = a.completed.iter().find(|s| s.id == container.id) {
            println!("demo_am: {} completed, exit status {}", s.id, s.exit_status);
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("YARN did not report the stopped container complete within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn allocate_one(
    rm: &mut AmRmClient,
    matcher: &mut AllocationMatcher<&'static str>,
) -> Result<Container, BoxError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut launched = None;
    while launched.is_none() {
        if Instant::now() > deadline {
            return Err("no container allocated within 60 s".into());
        }
        let a = rm.allocate(0.1).await?;
        for d in matcher.on_allocated(a.allocated) {
            match d {
                Decision::Launch { container, .. } if launched.is_none() => {
                    launched = Some(container)
                }
                Decision::Launch { container, .. } | Decision::Release { container } => {
                    rm.release(container.id)
                }
            }
        }
        for (p, cap, n) in matcher.outstanding() {
            rm.set_request(p, cap, n);
        }
        if launched.is_none() {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    launched.ok_or_else(|| "unreachable: loop exits only with a container".into())
}

/// With `YARN_AM_CAPTURE_DIR` set, keep a copy of the token file next to the captured frames
/// (how the crate's test fixtures were made).
fn capture_token_file() {
    if let (Some(dir), Some(src)) = (
        std::env::var_os(yarn_am::CAPTURE_DIR_ENV),
        std::env::var_os(yarn_am::TOKEN_FILE_ENV),
    ) {
        let dir = std::path::PathBuf::from(dir);
        let _ = std::fs::create_dir_all(&dir)
            .and_then(|_| std::fs::copy(src, dir.join("container_tokens")));
    }
}
