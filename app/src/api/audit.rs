//! Server functions of the audit log.

use super::*;

/// A page of the audit log (platform admins: all; tenant admins: their tenants).
#[server(prefix = "/api/ui", endpoint = "get_audit")]
pub async fn get_audit(query: AuditQuery) -> Result<AuditPage, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let filter = query
        .filter()
        .map_err(|(field, message)| AppError::invalid(field, message))?;
    Ok(service.audit_log(viewer.require()?, &filter).await?)
}
