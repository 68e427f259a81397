//! Refuses state-changing requests a web page made an operator's browser send. The REST API is
//! not authenticated (as in Flink), so a page on any site could otherwise submit or cancel jobs
//! on a JobManager the browser can reach, loopback included: with a cross-site form or fetch
//! (the browser adds an `Origin` that is not the JobManager's), or by DNS rebinding (the page's
//! own host name made to resolve to the JobManager: the `Host` is then a name the JobManager is
//! not known by). Reads stay open: a cross-site page cannot read the answers, and Flink's
//! dashboard and monitoring tools only read.

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Shared;
use super::error::ApiError;

/// Host names every JobManager answers to: the loopback names.
const LOOPBACK_NAMES: [&str; 2] = ["localhost", "localhost.localdomain"];

/// Whether a request with this method, `Host` and `Origin` may change state. `known` lists the
/// names the server is configured to be reached by (`rest.address`, `rest.bind-address`); any
/// IP address and the loopback names are accepted too, since a page cannot make a browser send
/// an IP address it was not loaded from. `Err` says why not.
pub(super) fn check(
    method: &Method,
    host: Option<&str>,
    origin: Option<&str>,
    known: &[&str],
) -> Result<(), String> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    // Every browser sends a Host; a client without one is not a browser.
    let Some(host) = host else {
        return Ok(());
    };
    let name = host_name(host);
    let is_ip = name.parse::<std::net::IpAddr>().is_ok();
    let is_known = LOOPBACK_NAMES
        .iter()
        .chain(known)
        .any(|k| k.eq_ignore_ascii_case(name));
    if !is_ip && !is_known {
        return Err(format!(
            "Forbidden: this JobManager is not known as {host:?}; state-changing requests must \
             address it by an IP address, localhost or rest.address"
        ));
    }
    if let Some(origin) = origin {
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if !authority.is_some_and(|a| a.eq_ignore_ascii_case(host)) {
            return Err(format!(
                "Forbidden: a request from the origin {origin:?} may not change state on {host:?}"
            ));
        }
    }
    Ok(())
}

/// The name or address part of a `Host` value: without the port, and an IPv6 address without
/// its brackets.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The middleware: answers 403 with Flink's `{"errors": [...]}` when [`check`] refuses.
pub(super) async fn cross_site_guard(
    State(shared): State<Shared>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST).or_else(|| request.uri().authority().map(|a| a.as_str()));
    let rest = &shared.config().rest;
    let known = [rest.address.as_str(), rest.bind_address.as_str()];
    match check(request.method(), host, text(header::ORIGIN), &known) {
        Ok(()) => next.run(request).await,
        Err(reason) => ApiError::new(axum::http::StatusCode::FORBIDDEN, reason).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: [&str; 2] = ["jm.example.org", "0.0.0.0"];

    #[test]
    fn reads_are_always_allowed() {
        for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert_eq!(
                check(&method, Some("evil.test"), Some("http://evil.test"), &KNOWN),
                Ok(())
            );
        }
    }

    #[test]
    fn writes_need_a_known_host_and_a_matching_origin() {
        for method in [Method::POST, Method::PATCH, Method::DELETE, Method::PUT] {
            for host in [
                "localhost:8081",
                "LOCALHOST",
                "127.0.0.1:8081",
                "[::1]:8081",
                "10.1.2.3",
                "jm.example.org:8081",
            ] {
                assert_eq!(check(&method, Some(host), None, &KNOWN), Ok(()), "{host}");
                let origin = format!("http://{host}");
                assert_eq!(
                    check(&method, Some(host), Some(&origin), &KNOWN),
                    Ok(()),
                    "{host}"
                );
            }
            // DNS rebinding: the attacker's name, resolved to the JobManager.
            let e = check(&method, Some("rebind.evil.test:8081"), None, &KNOWN).unwrap_err();
            assert!(e.contains("rebind.evil.test"), "{e}");
            // A cross-site request to a JobManager by its right name.
            for origin in [
                "http://evil.test",
                "null",
                "http://localhost:9999",
                "file://",
            ] {
                let e = check(&method, Some("localhost:8081"), Some(origin), &KNOWN).unwrap_err();
                assert!(e.contains(origin), "{e}");
            }
        }
        // No Host at all: not a browser.
        assert_eq!(check(&Method::POST, None, None, &KNOWN), Ok(()));
    }

    #[test]
    fn host_names_lose_their_port_and_brackets() {
        assert_eq!(host_name("localhost:8081"), "localhost");
        assert_eq!(host_name("[::1]:8081"), "::1");
        assert_eq!(host_name("[::1]"), "::1");
        assert_eq!(host_name("example.org"), "example.org");
    }
}
