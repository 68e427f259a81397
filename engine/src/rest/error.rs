//! Errors in Flink's shape (`{"errors": ["..."]}`) and extractors whose rejections use it, so a
//! malformed request always gets a 4xx with a reason instead of axum's plain-text defaults.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::common::ids::JobId;

/// A REST error: a status and the messages of Flink's `errors` array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status (always 4xx or 5xx).
    pub status: StatusCode,
    /// What went wrong, for a human.
    pub errors: Vec<String>,
}

impl ApiError {
    /// An error with one message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            errors: vec![message.into()],
        }
    }

    /// 400: the request itself is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: the thing asked for does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 404 for a job id that is well-formed but unknown.
    pub fn job_not_found(id: JobId) -> Self {
        Self::not_found(format!("Job {id} not found"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "errors": self.errors }))).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        // A too-large body keeps its 413; every other JSON problem is the client's bad request.
        let status = match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        let reason = match &rejection {
            JsonRejection::MissingJsonContentType(_) => {
                "Bad request: the body must be JSON sent with 'Content-Type: application/json'"
                    .to_string()
            }
            other => format!("Bad request: {}", other.body_text()),
        };
        ApiError::new(status, reason)
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::bad_request(format!(
            "Bad request: invalid path parameter: {}",
            rejection.body_text()
        ))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad_request(format!(
            "Bad request: invalid query parameters: {}",
            rejection.body_text()
        ))
    }
}

/// A JSON body whose rejection is an [`ApiError`].
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let Json(value) = Json::<T>::from_request(req, state).await?;
        Ok(ApiJson(value))
    }
}

/// Query parameters whose rejection is an [`ApiError`].
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Query(value) =
            axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

/// Path parameters whose rejection is an [`ApiError`].
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(value) =
            axum::extract::Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}

/// The `:jobid` path parameter, parsed; a malformed id is a 400 naming the parameter.
#[derive(Debug, Clone, Copy)]
pub struct JobIdParam(pub JobId);

impl<S> FromRequestParts<S> for JobIdParam
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|rejection| {
                    ApiError::bad_request(format!(
                        "Bad request: invalid path parameter jobid: {}",
                        rejection.body_text()
                    ))
                })?;
        raw.parse::<JobId>().map(JobIdParam).map_err(|reason| {
            ApiError::bad_request(format!(
                "Bad request: invalid path parameter jobid: {reason}"
            ))
        })
    }
}

/// The fallback for paths no route knows, in Flink's words.
pub(super) async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("Not found: {}", uri.path()))
}

/// The fallback for a known path asked with a method it does not serve.
pub(super) async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Method {method} is not allowed for {}", uri.path()),
    )
}
