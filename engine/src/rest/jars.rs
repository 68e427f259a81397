//! Flink's jar calls for sluice's job artifacts: `POST /jars/upload` (multipart, field
//! `jarfile`), `GET /jars`, `POST /jars/:id/run` and `DELETE /jars/:id`, with Flink's request
//! and response shapes. An artifact's id is its content key; the uploaded file's name is shown,
//! never used as a path.

use axum::Json;
use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::error::{ApiError, ApiPath};
use super::{Shared, allow_non_restored_state, submit_program, switched_on};
use crate::jobmanager::artifacts::{ArtifactError, StoredArtifact};
use crate::jobmanager::service::now_ms;
use crate::rpc::messages::ProgramSpec;

fn artifact_error(e: ArtifactError) -> ApiError {
    match e {
        ArtifactError::Unknown(_) => ApiError::not_found(e.to_string()),
        ArtifactError::Refused { .. } | ArtifactError::Plan(_) => {
            ApiError::bad_request(e.to_string())
        }
        ArtifactError::Io { .. } => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn entry(a: &StoredArtifact) -> Value {
    json!({
        "id": a.id,
        "name": a.name,
        "uploaded": a.uploaded,
        "size": a.size,
        "sluiceVersion": a.description.sluice_version,
        "entry": a.description.programs.iter().map(|p| json!({
            "name": p.name,
            "description": p.description,
        })).collect::<Vec<_>>(),
    })
}

/// `GET /jars`.
pub(super) async fn list(State(shared): State<Shared>) -> Json<Value> {
    let store = shared.artifacts().clone();
    let files = tokio::task::spawn_blocking(move || store.list())
        .await
        .unwrap_or_default();
    let rest = &shared.config().rest;
    Json(json!({
        "address": format!(
            "{}://{}:{}",
            shared.config().security.rest_ssl.scheme(),
            rest.address,
            rest.port
        ),
        "files": files.iter().map(entry).collect::<Vec<_>>(),
    }))
}

/// `POST /jars/upload`: the artifact arrives in the multipart field `jarfile`, is written to
/// the store's directory as it comes, and is kept only if it describes itself as an artifact
/// this cluster can run.
pub(super) async fn upload(
    State(shared): State<Shared>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Json<Value>, ApiError> {
    let mut multipart = multipart.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Err(refused) = switched_on(shared.config().rest.submit_enabled, "web.submit.enable") {
        // Read what the client sends (at most rest.server.max-content-length) before refusing,
        // so it gets the answer instead of a connection closed under its upload.
        while let Ok(Some(mut field)) = multipart.next_field().await {
            while let Ok(Some(_)) = field.chunk().await {}
        }
        return Err(refused);
    }
    let too_large = |e: axum::extract::multipart::MultipartError| {
        ApiError::new(
            e.status(),
            format!(
                "the upload failed: {} (rest.server.max-content-length is {} bytes)",
                e.body_text(),
                shared.config().rest.max_content_length
            ),
        )
    };
    let store = shared.artifacts().clone();
    while let Some(mut field) = multipart.next_field().await.map_err(too_large)? {
        if field.name() != Some("jarfile") {
            continue;
        }
        let name = field.file_name().unwrap_or("artifact").to_string();
        let part = store
            .dir()
            .join(format!("upload-{:016x}.part", rand::random::<u64>()));
        let io_err = |e: std::io::Error| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot store the upload: {e}"),
            )
        };
        let mut file = tokio::fs::File::create(&part).await.map_err(io_err)?;
        let written = async {
            while let Some(chunk) = field.chunk().await.map_err(too_large)? {
                file.write_all(&chunk).await.map_err(io_err)?;
            }
            file.flush().await.map_err(io_err)
        }
        .await;
        drop(file);
        if let Err(e) = written {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(e);
        }
        let added = {
            let (store, part) = (store.clone(), part.clone());
            tokio::task::spawn_blocking(move || store.add(&name, &part, now_ms()))
                .await
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        };
        let _ = tokio::fs::remove_file(&part).await;
        let stored = added.map_err(artifact_error)?;
        tracing::info!(id = %stored.id, name = %stored.name, bytes = stored.size, "job artifact uploaded");
        return Ok(Json(json!({
            "filename": format!("{}/{}", store.location(), stored.id),
            "status": "success",
        })));
    }
    Err(ApiError::bad_request(
        "the upload has no file in the multipart field 'jarfile'",
    ))
}

/// `DELETE /jars/:id`.
pub(super) async fn delete(
    State(shared): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    switched_on(shared.config().rest.submit_enabled, "web.submit.enable")?;
    let store = shared.artifacts().clone();
    let in_use = shared.artifacts_in_use().contains(&id);
    tokio::task::spawn_blocking(move || store.remove(&id, in_use))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(artifact_error)?;
    Ok(Json(json!({})))
}

/// The body of `POST /jars/:id/run` (Flink's `JarRunRequestBody`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunRequest {
    /// The program to run; may be left out when the artifact has one.
    #[serde(default)]
    entry_class: Option<String>,
    /// The program's arguments, one string (split at blanks).
    #[serde(default)]
    program_args: Option<String>,
    /// The program's arguments as a list (wins over `programArgs`).
    #[serde(default)]
    program_args_list: Option<Vec<String>>,
    #[serde(default)]
    parallelism: Option<u32>,
    #[serde(default)]
    savepoint_path: Option<String>,
    /// Flink's flag to skip the state of operators the job no longer has instead of refusing
    /// the restore (`execution.savepoint.ignore-unclaimed-state` for the job).
    #[serde(default, rename = "allowNonRestoredState")]
    allow_non_restored_state: Option<bool>,
    /// Job-scoped configuration keys (checkpointing, state backend, restart strategy).
    #[serde(default)]
    flink_configuration: std::collections::BTreeMap<String, String>,
}

/// `POST /jars/:id/run`.
pub(super) async fn run(
    State(shared): State<Shared>,
    ApiPath(id): ApiPath<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    switched_on(shared.config().rest.submit_enabled, "web.submit.enable")?;
    // Flink's clients may send no body at all.
    let request: RunRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RunRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("Bad request: {e}")))?
    };
    let store = shared.artifacts().clone();
    let stored = {
        let id = id.clone();
        tokio::task::spawn_blocking(move || store.get(&id))
            .await
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
            .map_err(artifact_error)?
    };
    let program = stored
        .description
        .program(request.entry_class.as_deref())
        .map_err(ApiError::bad_request)?;
    let args = match (request.program_args_list, request.program_args) {
        (Some(list), _) => list,
        (None, Some(text)) => text.split_whitespace().map(str::to_string).collect(),
        (None, None) => Vec::new(),
    };
    let mut spec = ProgramSpec::new(program.name.clone(), args);
    spec.artifact = Some(stored.id);
    let mut overrides: Vec<(String, String)> = request.flink_configuration.into_iter().collect();
    allow_non_restored_state(&mut overrides, request.allow_non_restored_state);
    submit_program(
        &shared,
        spec,
        request.parallelism,
        overrides,
        request.savepoint_path,
    )
    .await
}
