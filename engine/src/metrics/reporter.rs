//! Flink's Prometheus reporter: `GET /metrics` on the first free port of
//! `metrics.reporter.prom.port`, answering what a render function produces at scrape time.

use std::net::TcpListener;
use std::sync::Arc;

/// `metrics.reporter.prom.port`: a port or an inclusive range of ports (`9250-9260`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// The first port tried.
    pub first: u16,
    /// The last port tried.
    pub last: u16,
}

impl PortRange {
    /// Parses `9249` or `9250-9260`; the error says what is wrong.
    pub fn parse(raw: &str) -> Result<PortRange, String> {
        let port = |s: &str| {
            s.trim()
                .parse::<u16>()
                .map_err(|_| format!("'{}' is not a port (0 to 65535)", s.trim()))
        };
        let range = match raw.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => {
                let p = port(raw)?;
                PortRange { first: p, last: p }
            }
        };
        if range.first > range.last {
            return Err(format!(
                "the range {}-{} is empty: its first port must not exceed its last",
                range.first, range.last
            ));
        }
        Ok(range)
    }

    /// Binds the first port of the range that is free on `host`; the error names the range.
    pub fn bind(&self, host: &str) -> std::io::Result<TcpListener> {
        let mut last_error = None;
        for port in self.first..=self.last {
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
                self
            ),
        ))
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
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
    fn parses_ports_and_ranges() {
        assert_eq!(
            PortRange::parse("9249").unwrap(),
            PortRange {
                first: 9249,
                last: 9249
            }
        );
        assert_eq!(
            PortRange::parse(" 9250 - 9260 ").unwrap(),
            PortRange {
                first: 9250,
                last: 9260
            }
        );
        assert!(PortRange::parse("9260-9250").unwrap_err().contains("empty"));
        assert!(PortRange::parse("http").unwrap_err().contains("'http'"));
        assert!(PortRange::parse("70000").is_err());
    }

    #[test]
    fn binds_the_first_free_port_of_the_range() {
        let taken = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let range = PortRange {
            first: port,
            last: port.saturating_add(20),
        };
        let next = range.bind("127.0.0.1").unwrap();
        assert!(next.local_addr().unwrap().port() > port);
        let single = PortRange {
            first: port,
            last: port,
        };
        let err = single.bind("127.0.0.1").unwrap_err();
        assert!(
            err.to_string().contains("metrics.reporter.prom.port"),
            "{err}"
        );
    }
}
