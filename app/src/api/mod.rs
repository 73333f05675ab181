//! Server functions: get the service and the viewer, call the use-case, convert
//! the result. Nothing else belongs here. One module per area, as the server's
//! REST routes (`server/src/routes/`).
// Server functions take a form's flat fields (forms post before the WASM
// has loaded), so a form with many fields makes a function with many
// arguments, here and in the client stub the macro generates.
#![allow(clippy::too_many_arguments)]

mod allocations;
mod audit;
mod budgets;
mod fleet;
mod notifications;
mod people;
mod policy;
mod quotas;
mod tokens;
mod usage;

pub use allocations::*;
pub use audit::*;
pub use budgets::*;
pub use fleet::*;
pub use notifications::*;
pub use people::*;
pub use policy::*;
pub use quotas::*;
pub use tokens::*;
pub use usage::*;

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use tessera_core::ids::{
    AllocationId, ApiTokenId, HostId, JoinTokenId, NotificationId, QuotaGrantId, QuotaRequestId,
    UserId,
};
use tessera_core::role::TokenScope;
use tessera_protocol::quotas::{
    ApprovalQueueView, CreatedWebhook, NotificationsPage, QuotaChange, QuotaRequestView,
    TenantQuotaPage, TenantQuotasView, WebhookView,
};
#[cfg(feature = "ssr")]
use tessera_protocol::views::NewAllocation;
use tessera_protocol::views::{
    AllocationActivity, AllocationView, ApiTokenView, AuditPage, AuditQuery, CreatedApiToken,
    CreatedJoinToken, FleetInsights, FleetQuery, FleetView, JoinTokenView, PersonView,
    Recommendations, RequestOptions, SliceAdvice, TenantView, ViewerView,
};

/// A view with the server's time when it was read, so relative times ("3 h
/// ago") render the same on the server and in the browser.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamped<T> {
    /// The view.
    pub value: T,
    /// When it was read.
    pub now: chrono::DateTime<chrono::Utc>,
}

#[cfg(feature = "ssr")]
mod ssr {
    use crate::error::AppError;
    use leptos::prelude::use_context;
    use tessera_service::{Service, Viewer};

    /// The service and the request's viewer.
    pub async fn ctx() -> Result<(Service, Viewer), AppError> {
        let service = use_context::<Service>().ok_or_else(|| AppError {
            status: 500,
            code: crate::error::ErrorCode::Internal,
            message: "the server is not set up correctly".to_owned(),
        })?;
        let axum::Extension(viewer) = leptos_axum::extract::<axum::Extension<Viewer>>()
            .await
            .unwrap_or_else(|_| axum::Extension(Viewer::default()));
        Ok((service, viewer))
    }

    /// The service and the viewer's access to tenant `slug` (signed in, a
    /// member or a platform admin), for the server functions of a tenant's
    /// pages.
    pub async fn in_tenant(
        slug: &str,
    ) -> Result<(Service, tessera_service::TenantActor), AppError> {
        let slug = checked("tenant", slug)?;
        let (service, viewer) = ctx().await?;
        let actor = service.tenant_actor(viewer.require()?, &slug).await?;
        Ok((service, actor))
    }

    /// A checked name (`TenantSlug`, `PoolName`) from a form's text field,
    /// or a 400 naming the field and the rule.
    pub fn checked<T>(field: &str, value: &str) -> Result<T, AppError>
    where
        T: std::str::FromStr<Err = tessera_core::checked::NameError>,
    {
        value.trim().parse().map_err(|e| invalid(field, e))
    }

    /// `value`, stamped with the time it was read.
    pub fn stamped<T>(service: &Service, value: T) -> super::Stamped<T> {
        super::Stamped {
            value,
            now: service.now(),
        }
    }

    /// A 400 naming the field, for input the page could not convert.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> AppError {
        AppError::invalid(field, message)
    }

    /// An optional whole-number field: empty is `None`.
    pub fn optional_count(field: &str, value: &str) -> Result<Option<u32>, AppError> {
        match value.trim() {
            "" => Ok(None),
            v => v
                .parse()
                .map(Some)
                .map_err(|_| invalid(field, format!("'{v}' is not a whole number"))),
        }
    }

    /// A date field ("2026-11-29") as the end of that day in UTC, within the
    /// range every database orders alike.
    pub fn end_of_day(
        field: &str,
        value: &str,
    ) -> Result<Option<tessera_protocol::timestamp::Timestamp>, AppError> {
        crate::format::end_of_day(value)
            .map_err(|m| invalid(field, m))?
            .map(tessera_protocol::timestamp::Timestamp::new)
            .transpose()
            .map_err(|e| invalid(field, e))
    }

    /// A quota amount from a form's three fields.
    pub fn amount(gpus: f64, memory_gib: f64, max_slices: u32) -> tessera_core::quota::QuotaAmount {
        tessera_core::quota::QuotaAmount {
            gpus,
            memory_gib,
            max_slices,
        }
    }
}

/// The signed-in user, if any.
#[server(prefix = "/api/ui", endpoint = "get_viewer")]
pub async fn get_viewer() -> Result<Option<ViewerView>, AppError> {
    let (_, viewer) = ssr::ctx().await?;
    Ok(viewer.0.map(|p| p.view()))
}
