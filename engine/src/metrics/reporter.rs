//! Flink's Prometheus reporter: `GET /metrics` on the first free port of
//! `metrics.reporter.prom.port`, answering what a render function produces at scrape time.

use std::net::TcpListener;
use std::sync::Arc;

pub use crate::config::PortRange;

/// Binds the first port of the range that is free on `host`; the error names the range.
pub fn bind(range: &PortRange, host: &str) -> std::io::Result<TcpListener> {
    let mut last_error = None;
    for port in range.first..=range.last {
        match TcpListener::bind((host, port)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last_error = Some(e),
        }
    }
    let e = last_error.map_or_else(|| "no port tried".to_string(), |e| e.to_string());
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!(
            "no free port in metrics.reporter.prom.port {} on {host}: {e}",
            range
        ),
    ))
}

/// Renders the exposition text of a scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// The reporter's routes: `GET /metrics` (and `/`, as Flink's reporter answers any path).
pub fn router(render: Render) -> axum::Router {
    let handler = move || {
        let render = render.clone();
        async move {
            let text = tokio::task::spawn_blocking(move || render())
                .await
                .unwrap_or_else(|e| format!("# the metrics could not be rendered: {e}\n"));
            (
                [(
                    axum::http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                text,
            )
        }
    };
    axum::Router::new()
        .route("/metrics", axum::routing::get(handler.clone()))
        .route("/", axum::routing::get(handler))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_the_first_free_port_of_the_range() {
        let taken = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let range = PortRange {
            first: port,
            last: port.saturating_add(20),
        };
        let next = bind(&range, "127.0.0.1").unwrap();
        assert!(next.local_addr().unwrap().port() > port);
        let single = PortRange {
            first: port,
            last: port,
        };
        let err = bind(&single, "127.0.0.1").unwrap_err();
        assert!(
            err.to_string().contains("metrics.reporter.prom.port"),
            "{err}"
        );
    }
}
