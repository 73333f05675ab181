//! Platform admins create and change tenants: name, cost centre, and the
//! IdP groups whose members get its roles at their next sign-in.

use crate::audit::Actor;
use crate::entity::{allocation, membership, tenant};
use crate::events::{DomainEvent, TenantFields, TenantRef};
use crate::{PlatformAdmin, Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Set};
use tessera_core::checked::Namespace;
use tessera_core::lifecycle::AllocationPhase;
use tessera_protocol::views::{TenantAdminView, TenantEdit};

/// Most IdP groups per role of a tenant.
const MAX_GROUPS: usize = 50;
/// Most Kubernetes namespaces of a tenant.
const MAX_NAMESPACES: usize = 20;

/// Checks an edit; returns its fields, trimmed.
fn checked(edit: &TenantEdit) -> Result<TenantFields, ServiceError> {
    let name = edit.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ServiceError::invalid("name", "must be 1-200 characters"));
    }
    let cost_centre = edit
        .cost_centre
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    if cost_centre.is_some_and(|c| c.chars().count() > 100) {
        return Err(ServiceError::invalid(
            "cost_centre",
            "must be at most 100 characters",
        ));
    }
    let groups = |field: &str, list: &[String]| -> Result<Vec<String>, ServiceError> {
        let mut out: Vec<String> = Vec::new();
        for g in list.iter().map(|g| g.trim()).filter(|g| !g.is_empty()) {
            if g.chars().count() > 200 || g.chars().any(char::is_control) {
                return Err(ServiceError::invalid(
                    field,
                    format!("'{g}' is not a group name (at most 200 printable characters)"),
                ));
            }
            if !out.iter().any(|x| x == g) {
                out.push(g.to_owned());
            }
        }
        if out.len() > MAX_GROUPS {
            return Err(ServiceError::invalid(
                field,
                format!("at most {MAX_GROUPS} groups"),
            ));
        }
        Ok(out)
    };
    let mut namespaces: Vec<Namespace> = Vec::new();
    for n in edit
        .namespaces
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
    {
        let ns =
            Namespace::parse(n).map_err(|e| ServiceError::invalid("namespaces", e.to_string()))?;
        if !namespaces.contains(&ns) {
            namespaces.push(ns);
        }
    }
    if namespaces.len() > MAX_NAMESPACES {
        return Err(ServiceError::invalid(
            "namespaces",
            format!("at most {MAX_NAMESPACES} namespaces"),
        ));
    }
    Ok(TenantFields {
        name: name.to_owned(),
        cost_centre: cost_centre.map(str::to_owned),
        member_groups: groups("member_groups", &edit.member_groups)?,
        admin_groups: groups("admin_groups", &edit.admin_groups)?,
        namespaces,
    })
}

/// The namespaces a tenant's workloads run in: those set, else its slug
/// (when the slug is a valid namespace name).
pub(crate) fn namespaces_in_force(
    slug: &tessera_core::checked::TenantSlug,
    set: &[Namespace],
) -> Vec<Namespace> {
    if set.is_empty() {
        Namespace::parse(slug).ok().into_iter().collect()
    } else {
        set.to_vec()
    }
}

impl Service {
    /// Refuses namespaces another tenant runs in (a namespace's quota and
    /// claims belong to one tenant), and none at all where the slug is no
    /// namespace name.
    pub(crate) async fn namespaces_free<C: sea_orm::ConnectionTrait>(
        &self,
        conn: &C,
        slug: &tessera_core::checked::TenantSlug,
        wanted: &[Namespace],
    ) -> Result<(), ServiceError> {
        let wanted = namespaces_in_force(slug, wanted);
        if wanted.is_empty() {
            return Err(ServiceError::invalid(
                "namespaces",
                format!(
                    "the slug '{slug}' is not a Kubernetes namespace name (lowercase letters, digits and dashes, starting and ending with a letter or digit, at most 63): name the tenant's namespaces"
                ),
            ));
        }
        for other in tenant::Entity::find()
            .filter(tenant::Column::Slug.ne(slug))
            .all(conn)
            .await?
        {
            let theirs = namespaces_in_force(&other.slug, &self.tenant_fields(&other).namespaces);
            if let Some(ns) = wanted.iter().find(|n| theirs.contains(n)) {
                return Err(ServiceError::Conflict(format!(
                    "namespace '{ns}' belongs to tenant '{}'; a namespace serves one tenant",
                    other.slug
                )));
            }
        }
        Ok(())
    }
}

impl Service {
    /// Every tenant with its groups, members and live slices.
    pub async fn tenants_admin(
        &self,
        _admin: &PlatformAdmin<'_>,
    ) -> Result<Vec<TenantAdminView>, ServiceError> {
        let rows = tenant::Entity::find()
            .order_by_asc(tenant::Column::Name)
            .all(&self.db)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for t in rows {
            out.push(self.tenant_admin_view(t).await?);
        }
        Ok(out)
    }

    async fn tenant_admin_view(&self, t: tenant::Model) -> Result<TenantAdminView, ServiceError> {
        let members = membership::Entity::find()
            .filter(membership::Column::TenantId.eq(t.id))
            .count(&self.db)
            .await?;
        let live = allocation::Entity::find()
            .filter(allocation::Column::TenantId.eq(t.id))
            .filter(allocation::Column::State.is_in(AllocationPhase::CAPACITY))
            .count(&self.db)
            .await?;
        let f = self.tenant_fields(&t);
        let namespaces = namespaces_in_force(&t.slug, &f.namespaces)
            .into_iter()
            .map(String::from)
            .collect();
        Ok(TenantAdminView {
            slug: t.slug.into(),
            name: f.name,
            cost_centre: f.cost_centre,
            member_groups: f.member_groups,
            admin_groups: f.admin_groups,
            namespaces,
            revision: t.revision,
            members: u32::try_from(members).unwrap_or(u32::MAX),
            live_slices: u32::try_from(live).unwrap_or(u32::MAX),
        })
    }

    /// Creates a tenant. People get its roles at their next sign-in.
    pub async fn create_tenant(
        &self,
        admin: &PlatformAdmin<'_>,
        edit: &TenantEdit,
    ) -> Result<TenantAdminView, ServiceError> {
        let slug = tessera_core::checked::TenantSlug::parse(edit.slug.trim())
            .map_err(|e| ServiceError::invalid("slug", e.to_string()))?;
        let fields = checked(edit)?;
        let mut w = self.begin_locked(crate::write::TENANTS_LOCK).await?;
        let taken = tenant::Entity::find()
            .filter(tenant::Column::Slug.eq(&slug))
            .one(w.db())
            .await?
            .is_some();
        if taken {
            return Err(ServiceError::Conflict(format!(
                "there is already a tenant '{slug}'"
            )));
        }
        self.namespaces_free(w.db(), &slug, &fields.namespaces)
            .await?;
        let t = super::insert_tenant(&mut w, &slug, fields, self.now()).await?;
        w.commit(self, &Actor::User(admin.principal())).await?;
        self.tenant_admin_view(t).await
    }

    /// Changes a tenant's name, cost centre or groups (its slug stays).
    /// Role changes reach people at their next sign-in.
    pub async fn update_tenant(
        &self,
        admin: &PlatformAdmin<'_>,
        slug: &tessera_core::checked::TenantSlug,
        edit: &TenantEdit,
    ) -> Result<TenantAdminView, ServiceError> {
        let revision = edit.revision.ok_or_else(|| {
            ServiceError::invalid(
                "revision",
                "name the revision you edited (from GET /api/v1/tenants)",
            )
        })?;
        let fields = checked(edit)?;
        let mut w = self.begin_locked(crate::write::TENANTS_LOCK).await?;
        let t = tenant::Entity::find()
            .filter(tenant::Column::Slug.eq(slug))
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("tenant '{slug}'")))?;
        if t.revision != revision {
            return Err(ServiceError::Conflict(format!(
                "tenant '{slug}' was changed since you loaded it; reload and make your change again"
            )));
        }
        let before = self.tenant_fields(&t);
        if before == fields {
            return self.tenant_admin_view(t).await;
        }
        self.namespaces_free(w.db(), slug, &fields.namespaces)
            .await?;
        let mut a: tenant::ActiveModel = t.clone().into();
        a.name = Set(fields.name.clone());
        a.cost_centre = Set(fields.cost_centre.clone());
        a.member_groups = Set(Some(tenant::Groups(fields.member_groups.clone())));
        a.admin_groups = Set(Some(tenant::Groups(fields.admin_groups.clone())));
        a.namespaces = Set(Some(tenant::Namespaces(fields.namespaces.clone())));
        a.revision = Set(t.revision + 1);
        // The revision guards the row against a concurrent edit on another
        // replica as well: only the write that still sees it wins.
        let updated = tenant::Entity::update_many()
            .set(a)
            .filter(tenant::Column::Id.eq(t.id))
            .filter(tenant::Column::Revision.eq(revision))
            .exec(w.db())
            .await?;
        if updated.rows_affected != 1 {
            return Err(ServiceError::Conflict(format!(
                "tenant '{slug}' was changed since you loaded it; reload and make your change again"
            )));
        }
        let t = tenant::Entity::find_by_id(t.id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("tenant '{slug}'")))?;
        w.emit(DomainEvent::TenantUpdated {
            tenant: TenantRef::of(&t),
            before,
            after: fields,
        });
        w.commit(self, &Actor::User(admin.principal())).await?;
        self.tenant_admin_view(t).await
    }
}
