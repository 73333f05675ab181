//! What the request form offers a tenant: its pools, quotas and use.

use crate::entity::{gpu, tenant};
use crate::TenantActor;
use crate::{Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tessera_core::ids::{HostId, TenantId};

use tessera_protocol::views::{PoolChoice, PriorityChoice, QuotaView, RequestOptions};

impl Service {
    /// Quota and use per pool for a tenant (pools with a quota or with use).
    pub async fn quota_views(&self, tenant_id: TenantId) -> Result<Vec<QuotaView>, ServiceError> {
        let now = self.now();
        let mut out = Vec::new();
        for p in &self.pools(&self.db).await? {
            let v = Self::quota_view(&self.db, tenant_id, &p.name, now).await?;
            if !v.quota.is_zero() || v.usage.slices > 0 {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// What the request form offers the tenant.
    pub async fn request_options(
        &self,
        actor: &TenantActor,
    ) -> Result<RequestOptions, ServiceError> {
        let t = tenant::Entity::find_by_id(actor.tenant_id)
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("tenant '{}'", actor.tenant_slug)))?;
        let now = self.now();
        let online = self.online_host_ids().await?;
        let gpus = gpu::Entity::find()
            .filter(gpu::Column::HostId.is_in(online))
            .all(&self.db)
            .await?;
        let queues = self.queues(&self.db).await?;
        let specs = self.pools(&self.db).await?;
        let hostnames: std::collections::BTreeMap<HostId, String> =
            crate::entity::host::Entity::find()
                .all(&self.db)
                .await?
                .into_iter()
                .map(|h| (h.id, h.hostname.into()))
                .collect();
        let mut pools = Vec::new();
        for p in &specs {
            let (quota, usage) =
                Self::quota_and_usage(&self.db, actor.tenant_id, &p.name, now).await?;
            let gpus_online = gpus
                .iter()
                .filter(|g| {
                    let host = hostnames.get(&g.host_id).map_or("", String::as_str);
                    crate::pools::pool_of(&specs, host, &g.model).map(|x| x.name.as_str())
                        == Some(p.name.as_str())
                })
                .count();
            pools.push(PoolChoice {
                offer: Self::pool_offer(p),
                description: p.description.clone(),
                isolation: p.isolation,
                gpus_online: u32::try_from(gpus_online).unwrap_or(u32::MAX),
                quota,
                usage,
                borrowed: Self::qos_usage_of(
                    &self.db,
                    actor.tenant_id,
                    &p.name,
                    tessera_core::schedule::QosClass::Burstable,
                )
                .await?,
                borrowable: {
                    let (quota, usage) = Self::pool_quota_use(&self.db, &p.name, now).await?;
                    tessera_core::quota::headroom(&quota, &usage)
                },
                preemption_grace_minutes: p.preemption_grace_minutes,
                queued: queues
                    .get(&p.name)
                    .map_or(0, |q| u32::try_from(q.len()).unwrap_or(u32::MAX)),
                priority_classes: self
                    .settings
                    .priority_classes
                    .offered(&t.slug, &p.name)
                    .into_iter()
                    .map(|c| PriorityChoice {
                        name: c.name.clone(),
                        value: c.value,
                        description: c.description.clone(),
                        default: c.default,
                    })
                    .collect(),
            });
        }
        Ok(RequestOptions {
            tenant: t.slug.into(),
            tenant_name: t.name,
            pools,
        })
    }
}
