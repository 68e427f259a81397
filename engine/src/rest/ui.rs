//! The web UI: one page, a script and a stylesheet, embedded in the binary. The page polls the
//! REST API; it needs nothing else from the server.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::Shared;

const INDEX_HTML: &str = include_str!("../web/index.html");
const APP_JS: &str = include_str!("../web/app.js");
const STYLE_CSS: &str = include_str!("../web/style.css");

/// Adds the UI's routes.
pub(super) fn routes(router: Router<Shared>) -> Router<Shared> {
    router
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/web/app.js", get(app_js))
        .route("/web/style.css", get(style_css))
}

async fn index() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        INDEX_HTML,
    )
}

async fn app_js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        APP_JS,
    )
}

async fn style_css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        STYLE_CSS,
    )
}
