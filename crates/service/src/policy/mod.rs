//! Pools and tenants: the configuration seeds them on first start; after
//! that the database owns them and platform admins edit them
//! ([`pool_admin`], [`tenant_admin`]). Every use-case reads them from the database, in
//! its own transaction, so every server replica sees a change at once.

mod pool_admin;
mod tenant_admin;

pub(crate) use tenant_admin::namespaces_in_force;

use crate::audit::Actor;
use crate::entity::{pool, tenant};
use crate::events::{DomainEvent, TenantFields, TenantRef};
use crate::identity::{Directory, TenantSpec};
use crate::pools::PoolSpec;
use crate::runtime::fleet_index::NO_POOL_EPOCH;
use crate::write::Write;
use crate::{Service, ServiceError};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};

impl Service {
    /// The pools in force, in the order that decides which pool a GPU joins.
    pub(crate) async fn pools<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<Vec<PoolSpec>, ServiceError> {
        Ok(pool_rows(conn)
            .await?
            .into_iter()
            .map(|p| p.spec.0)
            .collect())
    }

    /// The pools in force and their capacity epochs, in one read: what a
    /// write in the admission turn reads first (see [`PoolsInForce`]).
    pub(crate) async fn pools_in_force<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<PoolsInForce, ServiceError> {
        let rows = pool_rows(conn).await?;
        let epochs = rows
            .iter()
            .map(|p| (p.name.clone(), p.capacity_epoch))
            .collect();
        Ok(PoolsInForce {
            specs: rows.into_iter().map(|p| p.spec.0).collect(),
            epochs,
        })
    }

    /// The pool called `name`, or a 400 that lists the pools.
    pub(crate) fn pool_named<'a>(
        pools: &'a [PoolSpec],
        field: &str,
        name: &str,
    ) -> Result<&'a PoolSpec, ServiceError> {
        pools.iter().find(|p| p.name == name).ok_or_else(|| {
            let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
            ServiceError::invalid(
                field,
                format!(
                    "there is no pool '{name}'; choose one of: {}",
                    names.join(", ")
                ),
            )
        })
    }

    /// The tenants with the IdP groups that grant their roles, and the
    /// platform-admin groups (those stay in the configuration: nobody can
    /// lock the admins out from the UI).
    pub(crate) async fn directory<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<Directory, ServiceError> {
        let rows = tenant::Entity::find()
            .order_by_asc(tenant::Column::Id)
            .all(conn)
            .await?;
        Ok(Directory {
            platform_admin_groups: self.settings.directory.platform_admin_groups.clone(),
            tenants: rows
                .into_iter()
                .map(|t| {
                    let f = self.tenant_fields(&t);
                    TenantSpec {
                        slug: t.slug,
                        name: f.name,
                        cost_centre: f.cost_centre,
                        member_groups: f.member_groups,
                        admin_groups: f.admin_groups,
                        namespaces: f.namespaces,
                        quotas: Vec::new(),
                    }
                })
                .collect(),
        })
    }

    /// A tenant's editable fields. Groups the database has never set are
    /// the configuration's (a database from before it owned them).
    pub(crate) fn tenant_fields(&self, t: &tenant::Model) -> TenantFields {
        let seed = self
            .settings
            .directory
            .tenants
            .iter()
            .find(|s| s.slug == t.slug);
        let groups = |stored: &Option<tenant::Groups>, seeded: fn(&TenantSpec) -> &Vec<String>| {
            stored
                .as_ref()
                .map(|g| g.0.clone())
                .or_else(|| seed.map(|s| seeded(s).clone()))
                .unwrap_or_default()
        };
        TenantFields {
            name: t.name.clone(),
            cost_centre: t.cost_centre.clone(),
            member_groups: groups(&t.member_groups, |s| &s.member_groups),
            admin_groups: groups(&t.admin_groups, |s| &s.admin_groups),
            namespaces: t
                .namespaces
                .as_ref()
                .map(|n| n.0.clone())
                .or_else(|| seed.map(|s| s.namespaces.clone()))
                .unwrap_or_default(),
        }
    }

    /// Seeds what the database lacks from the configuration, at start-up:
    /// pools, tenants (with their groups) and starting quotas, each
    /// audited. What the database has stays as platform admins left it.
    pub async fn seed_policy(&self) -> Result<(), ServiceError> {
        crate::pools::validate_pools(&self.settings.pools)?;
        crate::identity::validate_directory(&self.settings.directory)?;
        let now = self.now();
        let mut w = self.begin_write().await?;
        let existing = pool_rows(w.db()).await?;
        let mut position = existing.iter().map(|p| p.position).max().unwrap_or(0);
        for spec in &self.settings.pools {
            if existing.iter().any(|p| p.name == spec.name) {
                continue;
            }
            position += 1;
            pool::ActiveModel {
                name: Set(spec.name.clone()),
                position: Set(position),
                spec: Set(pool::StoredPool(spec.clone())),
                revision: Set(1),
                created_at: Set(now),
                updated_at: Set(now),
                ..Default::default()
            }
            .insert(w.db())
            .await?;
            w.emit(DomainEvent::PoolCreated { spec: spec.clone() });
        }
        for spec in &self.settings.directory.tenants {
            let exists = tenant::Entity::find()
                .filter(tenant::Column::Slug.eq(&spec.slug))
                .one(w.db())
                .await?
                .is_some();
            if exists {
                continue;
            }
            let fields = TenantFields {
                name: spec.name.clone(),
                cost_centre: spec.cost_centre.clone(),
                member_groups: spec.member_groups.clone(),
                admin_groups: spec.admin_groups.clone(),
                namespaces: spec.namespaces.clone(),
            };
            self.namespaces_free(w.db(), &spec.slug, &fields.namespaces)
                .await
                .map_err(|e| {
                    ServiceError::invalid(
                        format!("directory.tenants[{}].namespaces", spec.slug),
                        e.to_string(),
                    )
                })?;
            insert_tenant(&mut w, &spec.slug, fields, now).await?;
        }
        self.sync_quotas(&mut w, now).await?;
        w.commit(self, &Actor::System).await?;
        Ok(())
    }
}

/// The pools in force, with the capacity epoch each had when they were
/// read (see [`crate::runtime::fleet_index`]): read first in a write,
/// the epochs are never newer than what the write reads after them.
#[derive(Debug, Clone)]
pub(crate) struct PoolsInForce {
    /// In the order that decides which pool a GPU joins.
    pub specs: Vec<PoolSpec>,
    /// Pool name → capacity epoch.
    epochs: std::collections::BTreeMap<tessera_core::checked::PoolName, i64>,
}

impl PoolsInForce {
    /// The pool called `name`, or a 400 that lists the pools.
    pub fn named(&self, field: &str, name: &str) -> Result<&PoolSpec, ServiceError> {
        Service::pool_named(&self.specs, field, name)
    }

    /// The capacity epoch of pool `name` when it was read
    /// ([`NO_POOL_EPOCH`] for a pool that was not there).
    pub fn epoch(&self, name: &str) -> i64 {
        self.epochs.get(name).copied().unwrap_or(NO_POOL_EPOCH)
    }
}

/// The pool rows, in order.
pub(crate) async fn pool_rows<C: ConnectionTrait>(
    conn: &C,
) -> Result<Vec<pool::Model>, ServiceError> {
    Ok(pool::Entity::find()
        .order_by_asc(pool::Column::Position)
        .order_by_asc(pool::Column::Id)
        .all(conn)
        .await?)
}

/// Creates a tenant (audited).
async fn insert_tenant(
    w: &mut Write,
    slug: &tessera_core::checked::TenantSlug,
    fields: TenantFields,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<tenant::Model, ServiceError> {
    let t = tenant::ActiveModel {
        slug: Set(slug.clone()),
        name: Set(fields.name.clone()),
        cost_centre: Set(fields.cost_centre.clone()),
        member_groups: Set(Some(tenant::Groups(fields.member_groups.clone()))),
        admin_groups: Set(Some(tenant::Groups(fields.admin_groups.clone()))),
        namespaces: Set(Some(tenant::Namespaces(fields.namespaces.clone()))),
        revision: Set(1),
        created_at: Set(now),
        ..Default::default()
    }
    .insert(w.db())
    .await?;
    w.emit(DomainEvent::TenantCreated {
        tenant: TenantRef::of(&t),
        fields,
    });
    Ok(t)
}
