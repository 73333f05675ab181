//! A user's notification centre: list, unread count, mark read.

use crate::entity::notification;
use crate::{Principal, Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect};
use tessera_core::ids::NotificationId;
use tessera_protocol::quotas::{NotificationView, NotificationsPage};

/// Most notifications listed at once.
const PAGE: u64 = 100;

impl Service {
    /// The caller's notifications, newest first, with the unread count.
    pub async fn notifications(&self, who: &Principal) -> Result<NotificationsPage, ServiceError> {
        let rows = notification::Entity::find()
            .filter(notification::Column::UserId.eq(who.user_id))
            .order_by_desc(notification::Column::Id)
            .limit(PAGE)
            .all(&self.db)
            .await?;
        Ok(NotificationsPage {
            items: rows
                .into_iter()
                .map(|n| NotificationView {
                    id: n.id,
                    kind: n.kind,
                    title: n.title,
                    body: n.body,
                    link: n.link,
                    created_at: n.created_at,
                    read: n.read_at.is_some(),
                })
                .collect(),
            unread: self.unread_notifications(who).await?,
        })
    }

    /// How many of the caller's notifications are unread.
    pub async fn unread_notifications(&self, who: &Principal) -> Result<u64, ServiceError> {
        Ok(notification::Entity::find()
            .filter(notification::Column::UserId.eq(who.user_id))
            .filter(notification::Column::ReadAt.is_null())
            .count(&self.db)
            .await?)
    }

    /// Marks one of the caller's notifications read (`Some(id)`), or all of
    /// them (`None`). Another user's notification is a 404. Reading is the
    /// reader's own view, not a change to shared state, so it is not audited.
    pub async fn mark_notifications_read(
        &self,
        who: &Principal,
        id: Option<NotificationId>,
    ) -> Result<u64, ServiceError> {
        let now = self.now();
        let w = self.begin_write().await?;
        let mut update = notification::Entity::update_many()
            .col_expr(notification::Column::ReadAt, Expr::value(now))
            .filter(notification::Column::UserId.eq(who.user_id))
            .filter(notification::Column::ReadAt.is_null());
        if let Some(id) = id {
            let mine = notification::Entity::find_by_id(id)
                .filter(notification::Column::UserId.eq(who.user_id))
                .one(w.db())
                .await?;
            if mine.is_none() {
                return Err(ServiceError::not_found(format!("notification {id}")));
            }
            update = update.filter(notification::Column::Id.eq(id));
        }
        let n = update.exec(w.db()).await?.rows_affected;
        w.commit(self, &crate::audit::Actor::User(who)).await?;
        Ok(n)
    }
}
