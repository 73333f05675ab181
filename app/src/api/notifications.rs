//! Server functions of notifications and a tenant's webhook.

use super::*;

/// The viewer's notifications, newest first.
#[server(prefix = "/api/ui", endpoint = "get_notifications")]
pub async fn get_notifications() -> Result<Stamped<NotificationsPage>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(ssr::stamped(
        &service,
        service.notifications(viewer.require()?).await?,
    ))
}

/// How many of the viewer's notifications are unread (0 when signed out).
#[server(prefix = "/api/ui", endpoint = "get_unread_notifications")]
pub async fn get_unread_notifications() -> Result<u64, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    match viewer.0.as_ref() {
        Some(who) => Ok(service.unread_notifications(who).await?),
        None => Ok(0),
    }
}

/// Marks one notification read.
#[server(prefix = "/api/ui", endpoint = "mark_notification_read")]
pub async fn mark_notification_read(id: NotificationId) -> Result<u64, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .mark_notifications_read(viewer.require()?, Some(id))
        .await?)
}

/// Marks all of the viewer's notifications read.
#[server(prefix = "/api/ui", endpoint = "mark_all_notifications_read")]
pub async fn mark_all_notifications_read() -> Result<u64, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .mark_notifications_read(viewer.require()?, None)
        .await?)
}

/// The tenant's webhook and its latest deliveries (tenant admins).
#[server(prefix = "/api/ui", endpoint = "get_webhook")]
pub async fn get_webhook(slug: String) -> Result<Stamped<Option<WebhookView>>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(ssr::stamped(
        &service,
        service
            .webhook_view(viewer.require()?, &ssr::checked("tenant", &slug)?)
            .await?,
    ))
}

/// Sets the tenant's webhook URL; the new signing secret is shown once.
#[server(prefix = "/api/ui", endpoint = "set_webhook")]
pub async fn set_webhook(slug: String, url: String) -> Result<CreatedWebhook, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .set_webhook(viewer.require()?, &ssr::checked("tenant", &slug)?, &url)
        .await?)
}

/// Removes the tenant's webhook.
#[server(prefix = "/api/ui", endpoint = "delete_webhook")]
pub async fn delete_webhook(slug: String) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .delete_webhook(viewer.require()?, &ssr::checked("tenant", &slug)?)
        .await?)
}

/// Queues a test event to the tenant's webhook.
#[server(prefix = "/api/ui", endpoint = "send_test_webhook")]
pub async fn send_test_webhook(slug: String) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .test_webhook(viewer.require()?, &ssr::checked("tenant", &slug)?)
        .await?)
}
