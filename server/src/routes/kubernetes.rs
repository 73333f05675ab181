//! Kubernetes objects for a tenant's workloads: the DRA claim of an
//! allocation, and the bundle of a tenant's namespaces. YAML (what
//! `kubectl apply -f` reads; the default) or, with `Accept:
//! application/json`, a `v1` `List`.

use super::extract::PathParams;
use super::openapi::{Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::ApiCaller;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use tessera_core::checked::TenantSlug;
use tessera_core::ids::AllocationId;
use tessera_k8s::Documents;
use tessera_service::ServiceError;

/// A `v1` `List` of Kubernetes objects (the JSON form).
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct KubernetesList {
    /// `v1`.
    #[serde(rename = "apiVersion")]
    api_version: String,
    /// `List`.
    kind: String,
    /// The objects, in apply order.
    #[schema(value_type = Vec<Object>)]
    items: Vec<serde_json::Value>,
}

/// Whether the caller asked for JSON rather than YAML.
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .find(|m| {
            matches!(
                *m,
                "application/json" | "application/yaml" | "application/x-yaml" | "text/yaml"
            )
        })
        == Some("application/json")
}

/// The documents as YAML (an attachment named `stem.yaml`) or a JSON list.
fn documents(docs: &Documents, headers: &HeaderMap, stem: &str) -> Result<Response, ApiError> {
    if wants_json(headers) {
        return Ok(axum::Json(KubernetesList {
            api_version: "v1".to_owned(),
            kind: "List".to_owned(),
            items: docs.0.clone(),
        })
        .into_response());
    }
    let yaml = docs
        .to_yaml()
        .map_err(|e| ServiceError::internal(e.to_string()))?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "application/yaml; charset=utf-8".to_owned(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{stem}.yaml\""),
            ),
        ],
        yaml,
    )
        .into_response())
}

/// The DRA `ResourceClaim` that binds a pod to exactly this slice's
/// device(s) (by UUID, on NVIDIA's DRA driver), with its MPS or
/// time-slicing limits, and a check pod on the placed node that uses it.
/// 409 until the slice is active.
#[utoipa::path(
    get, path = "/allocations/{id}/kubernetes", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    responses((status = 200, description = "The claim and a check pod", content(
                  (String = "application/yaml"),
                  (KubernetesList = "application/json"))),
              Unauthorized, Forbidden, NotFound, Conflict),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn allocation_kubernetes(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    let claim = state.service.allocation_kubernetes(&actor, id).await?;
    let docs = claim
        .documents()
        .map_err(|e| ServiceError::internal(e.to_string()))?;
    documents(&docs, &headers, &tessera_k8s::claim::claim_name(id))
}

/// The tenant's Kubernetes bundle: per namespace a `Namespace`, a
/// `ResourceQuota` on DRA devices per device class and on the device
/// plugin's resources, from its quota in force, and a `LimitRange`; the
/// `PriorityClass`es of the priority classes open to it. A platform admin
/// applies it (priority classes are cluster-wide).
#[utoipa::path(
    get, path = "/tenants/{slug}/kubernetes", tag = "allocations",
    params(("slug" = String, Path, description = "Tenant slug")),
    responses((status = 200, description = "The tenant's bundle", content(
                  (String = "application/yaml"),
                  (KubernetesList = "application/json"))),
              Unauthorized, Forbidden, NotFound),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn tenant_kubernetes(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(slug): PathParams<TenantSlug>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = caller.in_tenant(&state, Some(&slug)).await?;
    let bundle = state.service.tenant_kubernetes(&actor).await?;
    let docs = bundle
        .documents()
        .map_err(|e| ServiceError::internal(e.to_string()))?;
    documents(&docs, &headers, &format!("{slug}-kubernetes"))
}
