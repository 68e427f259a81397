//! Starting a JobManager process's services: binds the RPC and REST ports, sets up HA, and
//! spawns the tasks that serve TaskManagers, drive the cores' time, record ended jobs and serve
//! REST. The REST API itself lives above the JobManager (`crate::rest`); it is handed in as a
//! function that builds the router, so this layer does not depend on it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::info;

use super::endpoint::accept_loop;
use super::ha_state::HaRuntime;
use super::leadership::{leadership, recorder, watch_leader};
use super::service::{JobManagerShared, driver};
use crate::api::ProgramRegistry;
use crate::config::Config;
use crate::rpc::http::{self, HttpLimits};
use crate::rpc::transport::{self, RpcError};
use crate::security::ClusterSecret;
use crate::state::{FileSystems, StateStorage};

/// A running JobManager.
pub struct JobManager {
    /// Shared state.
    pub shared: Arc<JobManagerShared>,
    /// Where the REST API listens.
    pub rest_address: SocketAddr,
    /// The port of the Prometheus reporter, if `metrics.reporter.prom.*` asks for one.
    pub reporter_port: Option<u16>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for JobManager {
    fn drop(&mut self) {
        self.shared.stop();
        for t in &self.tasks {
            t.abort();
        }
        self.shared.artifacts().remove_own();
    }
}

/// Why a JobManager could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A port could not be bound.
    #[error("cannot listen on {what} {addr}: {source}")]
    Bind {
        /// Which endpoint.
        what: &'static str,
        /// Where.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// TLS setup failed.
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// The configuration asks for something this version cannot do.
    #[error("{0}")]
    Unsupported(String),
    /// The REST API's TLS files (`security.ssl.rest.*`) are missing or unusable.
    // The cause is part of the message (not a `source`), so it is printed once.
    #[error("cannot serve the REST API over TLS: {0}")]
    RestTls(crate::security::SecurityError),
}

async fn bind(what: &'static str, host: &str, port: u16) -> Result<TcpListener, StartError> {
    let addr = format!("{host}:{port}");
    TcpListener::bind(&addr)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })
}

/// Opens the Prometheus reporter's port (the first free one of `metrics.reporter.prom.port`) on
/// the RPC bind host and serves scrapes.
fn start_reporter(
    shared: &Arc<JobManagerShared>,
    limits: HttpLimits,
) -> Result<(u16, tokio::task::JoinHandle<()>), StartError> {
    let config = shared.config();
    let range = config.metrics.prometheus_port;
    let failed = |source| StartError::Bind {
        what: "the Prometheus reporter's port",
        addr: format!("{}:{range}", config.jobmanager.bind_host),
        source,
    };
    let listener = crate::metrics::bind(&range, &config.jobmanager.bind_host).map_err(failed)?;
    listener.set_nonblocking(true).map_err(failed)?;
    let listener = TcpListener::from_std(listener).map_err(failed)?;
    let port = listener.local_addr().map_err(failed)?.port();
    let host = config.jobmanager.rpc_address.clone();
    let reporter = shared.clone();
    let render: crate::metrics::Render =
        Arc::new(move || super::metrics::exposition(&reporter, &host));
    info!(port, "Prometheus reporter listening");
    // Prometheus scrapes plain HTTP, as from Flink's reporter; security.ssl.rest.* is the
    // REST API's.
    let server = tokio::spawn(http::serve(
        listener,
        crate::metrics::router(render),
        limits,
        None,
    ));
    Ok((port, server))
}

impl JobManager {
    /// Binds the RPC and REST endpoints and starts serving jobs of `programs`; `rest` builds
    /// the REST API's router (`crate::rest::router`).
    pub async fn start(
        config: Config,
        secret: ClusterSecret,
        programs: Arc<ProgramRegistry>,
        rest: impl FnOnce(Arc<JobManagerShared>) -> axum::Router,
    ) -> Result<JobManager, StartError> {
        // The REST API's certificates are read before any port is bound: a JobManager with a
        // missing or malformed file does not start, rather than serve without TLS.
        let rest_tls =
            crate::security::rest_tls::server_config(&config).map_err(StartError::RestTls)?;
        let rpc = bind(
            "the RPC port",
            &config.jobmanager.bind_host,
            config.jobmanager.rpc_port,
        )
        .await?;
        let rest_listener =
            bind("the REST port", &config.rest.bind_address, config.rest.port).await?;
        let rpc_address = rpc.local_addr().map_err(|source| StartError::Bind {
            what: "the RPC port",
            addr: String::new(),
            source,
        })?;
        let rest_address = rest_listener
            .local_addr()
            .map_err(|source| StartError::Bind {
                what: "the REST port",
                addr: String::new(),
                source,
            })?;
        let ha = crate::ha::services(&config)
            .map_err(|e| StartError::Unsupported(format!("high availability: {e}")))?
            .map(HaRuntime::new);
        // Checkpoints, savepoints and HA metadata live on the local (or a mounted, shared)
        // file system or on HDFS, by their directories' schemes.
        let storage: Arc<dyn StateStorage> = Arc::new(FileSystems::new());
        if let Some(dir) = &config.checkpointing.savepoint_dir {
            let (storage, root) = (storage.clone(), dir.clone());
            let removed = tokio::task::spawn_blocking(move || {
                crate::checkpoint::io::remove_abandoned_savepoints(
                    storage.as_ref(),
                    &root,
                    crate::pids::alive,
                )
            })
            .await
            .unwrap_or_default();
            for dir in removed {
                info!(dir = %crate::common::log_text::clip(&dir), "removed a savepoint its JobManager never completed");
            }
        }
        // With HA the artifacts live beside the HA stores' files, for the next leader; on HDFS
        // with a local cache of this process's own for the executables it runs.
        let ha_dir = crate::ha::artifact_dir(&config);
        let artifacts = match (config.rest.upload_dir.clone(), ha_dir) {
            (Some(dir), _) => super::artifacts::ArtifactStore::open_for_process(Some(dir)),
            (None, Some(dir)) if crate::config::HdfsUri::parse(&dir).is_some() => {
                super::artifacts::ArtifactStore::open_for_process(None)
                    .map(|store| store.with_remote(storage.clone(), dir))
            }
            (None, dir) => {
                super::artifacts::ArtifactStore::open_for_process(dir.map(PathBuf::from))
            }
        }
        .map_err(|e| StartError::Unsupported(e.to_string()))?;
        let shared = Arc::new(JobManagerShared::new(
            config,
            programs,
            Arc::new(artifacts),
            storage,
            rpc_address,
            ha,
        ));
        let acceptor = transport::acceptor()?;
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(accept_loop(
            rpc,
            acceptor,
            secret,
            shared.clone(),
        )));
        tasks.push(tokio::spawn(driver(shared.clone())));
        let router = rest(shared.clone());
        let rest_options = &shared.config().rest;
        let limits = HttpLimits {
            header_read_timeout: rest_options.header_read_timeout,
            idle_timeout: rest_options.idle_timeout,
            max_connections: rest_options.max_connections,
        };
        tasks.push(tokio::spawn(http::serve(
            rest_listener,
            router,
            limits,
            rest_tls,
        )));
        let reporter_port = if shared.config().metrics.prometheus {
            let (port, server) = start_reporter(&shared, limits)?;
            tasks.push(server);
            Some(port)
        } else {
            None
        };
        if shared.has_ha() {
            let host = |configured: &str, bound: SocketAddr| {
                let h = if configured.is_empty() || configured == "0.0.0.0" {
                    bound.ip().to_string()
                } else {
                    configured.to_string()
                };
                format!("{h}:{}", bound.port())
            };
            let rpc = host(&shared.config().jobmanager.rpc_address, rpc_address);
            let rest = format!(
                "{}://{}",
                shared.config().security.rest_ssl.scheme(),
                host(&shared.config().rest.address, rest_address)
            );
            tasks.push(tokio::spawn(leadership(shared.clone(), rpc, rest)));
            tasks.push(tokio::spawn(watch_leader(shared.clone())));
        }
        tasks.push(tokio::spawn(recorder(shared.clone())));
        info!(%rpc_address, %rest_address, ha = shared.has_ha(), "JobManager started");
        Ok(JobManager {
            shared,
            rest_address,
            reporter_port,
            tasks,
        })
    }
}
