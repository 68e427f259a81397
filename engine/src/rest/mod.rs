//! The Dispatcher's REST API (Flink-compatible paths and fields) and the web UI.

use std::sync::Arc;

use axum::Router;

use crate::jobmanager::service::JobManagerShared;

/// All REST routes, with and without the `/v1` prefix.
pub fn router(shared: Arc<JobManagerShared>) -> Router {
    Router::new().with_state(shared)
}
