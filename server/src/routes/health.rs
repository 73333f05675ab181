//! `/healthz` (the process answers) and `/readyz` (database reachable, schema current).

use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

/// Liveness.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let db = state.service.db();
    let ping = db.ping().await;
    let pending = tessera_service::pending_migrations(db).await;
    match (ping, pending) {
        (Ok(()), Ok(0)) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        (Ok(()), Ok(n)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({"status": "not ready", "reason": format!("{n} database migrations pending")}),
            ),
        ),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(error = ?e, "readiness check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "not ready", "reason": "database unreachable"})),
            )
        }
    }
}
