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

/// Whether the caller prefers JSON to YAML: the `Accept` media ranges
/// (case-insensitive, with their `q`; `q=0` refuses) that name either, the
/// highest `q` winning and, at equal `q`, the first listed. YAML when
/// neither is named (`*/*`, none, or others).
fn wants_json(headers: &HeaderMap) -> bool {
    let mut best: Option<(f32, bool)> = None;
    for range in headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let json = match media.as_str() {
            "application/json" => true,
            "application/yaml" | "application/x-yaml" | "text/yaml" => false,
            _ => continue,
        };
        let q = parts
            .filter_map(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .or_else(|| p.trim().strip_prefix("Q="))
            })
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, json));
        }
    }
    best.is_some_and(|(_, json)| json)
}

/// The documents as YAML (an attachment named `stem.yaml`) or a JSON list.
fn documents(docs: &Documents, headers: &HeaderMap, stem: &str) -> Result<Response, ApiError> {
    // Built per caller and per request, answered by `Accept`.
    let fresh = [
        (header::VARY, "Accept".to_owned()),
        (header::CACHE_CONTROL, "private, no-store".to_owned()),
    ];
    if wants_json(headers) {
        let list = axum::Json(KubernetesList {
            api_version: "v1".to_owned(),
            kind: "List".to_owned(),
            items: docs.0.clone(),
        });
        return Ok((fresh, list).into_response());
    }
    let yaml = docs
        .to_yaml()
        .map_err(|e| ServiceError::internal(e.to_string()))?;
    Ok((
        fresh,
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
/// plugin's resources, from its quota in force; the `PriorityClass`es of the priority classes open to it. A platform admin
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

#[cfg(test)]
mod tests {
    use super::wants_json;
    use axum::http::{header, HeaderMap, HeaderValue};

    fn accept(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn json_only_when_preferred() {
        for (values, json) in [
            (&[][..], false),
            (&["*/*"][..], false),
            (&["application/json"][..], true),
            (&["Application/JSON"][..], true),
            (&["application/yaml, application/json"][..], false),
            (&["application/json, application/yaml"][..], true),
            (&["application/json;q=0, application/yaml"][..], false),
            (&["application/json;q=0"][..], false),
            (
                &["application/yaml;q=0.5, application/json;q=0.9"][..],
                true,
            ),
            (&["text/html", "application/json; q=0.8"][..], true),
            (&["application/json;q=oops"][..], true),
        ] {
            assert_eq!(wants_json(&accept(values)), json, "{values:?}");
        }
    }
}
