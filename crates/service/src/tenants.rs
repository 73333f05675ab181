//! Tenant pages.

use crate::entity::{membership, user};
use crate::{Principal, Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tessera_core::ids::UserId;
use tessera_protocol::views::{MemberView, TenantRole, TenantView};

impl Service {
    /// A tenant's home: visible to its members and to platform admins. Anyone
    /// else gets `NotFound`, so tenant names don't leak.
    pub async fn tenant_view(
        &self,
        who: &Principal,
        slug: &tessera_core::checked::TenantSlug,
    ) -> Result<TenantView, ServiceError> {
        let t = Self::tenant_by_slug(&self.db, slug).await?;
        if who.role_in(t.id).is_none() && !who.platform_admin {
            return Err(ServiceError::not_found(format!("tenant '{slug}'")));
        }
        let ms = membership::Entity::find()
            .filter(membership::Column::TenantId.eq(t.id))
            .all(&self.db)
            .await?;
        let user_ids: Vec<UserId> = ms.iter().map(|m| m.user_id).collect();
        let users = user::Entity::find()
            .filter(user::Column::Id.is_in(user_ids))
            .all(&self.db)
            .await?;
        let mut members: Vec<MemberView> = ms
            .iter()
            .filter_map(|m| {
                let u = users.iter().find(|u| u.id == m.user_id)?;
                Some(MemberView {
                    name: u.name.clone(),
                    email: u.email.clone(),
                    role: m.role,
                    last_login_at: u.last_login_at,
                })
            })
            .collect();
        members.sort_by(|a, b| b.role.cmp(&a.role).then_with(|| a.name.cmp(&b.name)));
        let actor = self.tenant_actor(who, slug).await?;
        let allocations = self.list_allocations(&actor).await?;
        let quotas = self.quota_views(t.id).await?;
        let budgets = self
            .budgets(
                who,
                &tessera_protocol::views::BudgetQuery {
                    tenant: Some(slug.to_string()),
                },
            )
            .await?;
        Ok(TenantView {
            slug: t.slug.into(),
            name: t.name,
            cost_centre: t.cost_centre,
            members,
            allocations,
            quotas,
            can_request: actor.can_request(),
            can_manage_tokens: who.role_in(t.id) == Some(TenantRole::TenantAdmin),
            budgets,
        })
    }
}
