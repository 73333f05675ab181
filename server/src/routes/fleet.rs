//! `/api/v1/fleet` and `/api/v1/hosts/...`: the fleet and platform admins'
//! decisions about hosts and GPUs (cordon, drain, maintenance, resume,
//! decommission). Platform admins only, signed in (the session cookie).

use super::extract::{JsonBody, PathParams, QueryParams};
use super::openapi::{BadRequest, Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::Person;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tessera_core::ids::HostId;
use tessera_protocol::views::{
    FleetFilter, FleetInsights, FleetView, InsightsQuery, OpsRequest, OpsView,
};
use tessera_service::ServiceError;

/// A YAML document as a download named `filename`.
pub fn yaml<T: serde::Serialize>(doc: &T, filename: &str) -> Result<Response, ApiError> {
    let text = serde_yaml_ng::to_string(doc)
        .map_err(|e| ServiceError::internal(format!("YAML of {filename}: {e}")))?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "application/yaml; charset=utf-8".to_owned(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        text,
    )
        .into_response())
}

/// One page (50, by name) of the hosts that match the filters, with their
/// status, admins' decisions and GPUs (health, MIG instances, who holds
/// what); the whole fleet's numbers; and the pools.
#[utoipa::path(
    get, path = "/fleet", tag = "fleet",
    params(FleetFilter),
    responses((status = 200, description = "The fleet", body = FleetView),
              BadRequest, Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn get_fleet(
    State(state): State<AppState>,
    QueryParams(filter): QueryParams<FleetFilter>,
    Person(p): Person,
) -> Result<Json<FleetView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.fleet_view(&admin, &filter).await?))
}

/// The fleet's insights over the last 7, 30 (default) or 90 days: a
/// utilisation heat map (hosts × GPUs, latest telemetry), each pool's
/// daily allocation against its capacity with the trend and the day it
/// would fill, and the queue per day (requests, waits, refusals). The heat
/// map shows one page of 50 hosts, filtered as the fleet listing is.
#[utoipa::path(
    get, path = "/fleet/insights", tag = "fleet",
    params(InsightsQuery),
    responses((status = 200, description = "The insights", body = FleetInsights),
              BadRequest, Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn get_fleet_insights(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<InsightsQuery>,
    Person(p): Person,
) -> Result<Json<FleetInsights>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(
        state
            .service
            .fleet_insights(&admin, q.days.unwrap_or(30), &q.heat())
            .await?,
    ))
}

/// Cordon, drain (with a deadline), put into maintenance, resume or
/// decommission a host. Draining re-queues its placed slices at once and
/// tells the owners of running ones when they end; maintenance and
/// decommissioning need it empty. Answers the host's new state (`null`
/// once decommissioned).
#[utoipa::path(
    post, path = "/hosts/{id}/operations", tag = "fleet",
    params(("id" = i64, Path, description = "Host id")),
    request_body = OpsRequest,
    responses((status = 200, description = "The host's new state", body = Option<OpsView>),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn operate_host(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<HostId>,
    JsonBody(req): JsonBody<OpsRequest>,
) -> Result<Json<Option<OpsView>>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.operate_host(&admin, id, &req).await?))
}

/// The same for one GPU of a host (decommissioning is for hosts only).
#[utoipa::path(
    post, path = "/hosts/{id}/gpus/{index}/operations", tag = "fleet",
    params(("id" = i64, Path, description = "Host id"),
           ("index" = u32, Path, description = "GPU index on the host")),
    request_body = OpsRequest,
    responses((status = 200, description = "The GPU's new state", body = Option<OpsView>),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn operate_gpu(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams((id, index)): PathParams<(HostId, u32)>,
    JsonBody(req): JsonBody<OpsRequest>,
) -> Result<Json<Option<OpsView>>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(
        state.service.operate_gpu(&admin, id, index, &req).await?,
    ))
}

/// The host's MIG layout as NVIDIA mig-parted's `v1` config
/// (`nvidia-mig-parted apply -f FILE -c tessera-<host>`).
#[utoipa::path(
    get, path = "/hosts/{id}/mig-parted.yaml", tag = "fleet",
    params(("id" = i64, Path, description = "Host id")),
    responses((status = 200, description = "mig-parted config", content_type = "application/yaml", body = tessera_core::k8s::MigPartedConfig),
              Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn host_mig_parted(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<HostId>,
) -> Result<Response, ApiError> {
    host_yaml(&state, &p, id, "mig-parted", |k| &k.mig_parted).await
}

/// The NVIDIA device plugin's sharing config (time-slicing and MPS
/// replicas) for the host's shared GPUs (its `--config-file`).
#[utoipa::path(
    get, path = "/hosts/{id}/device-plugin.yaml", tag = "fleet",
    params(("id" = i64, Path, description = "Host id")),
    responses((status = 200, description = "device plugin config", content_type = "application/yaml", body = tessera_core::k8s::DevicePluginConfig),
              Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn host_device_plugin(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<HostId>,
) -> Result<Response, ApiError> {
    host_yaml(&state, &p, id, "device-plugin", |k| &k.device_plugin).await
}

/// One of a host's Kubernetes documents, as `<host>-<name>.yaml` (platform admins).
async fn host_yaml<T: serde::Serialize>(
    state: &AppState,
    p: &tessera_service::Principal,
    id: HostId,
    name: &str,
    doc: impl Fn(&tessera_service::k8s::HostK8s) -> &T,
) -> Result<Response, ApiError> {
    let admin = p.require_platform_admin()?;
    let k8s = state.service.host_k8s(&admin, id).await?;
    yaml(doc(&k8s), &format!("{}-{name}.yaml", k8s.hostname))
}
