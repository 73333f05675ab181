//! `tenants`: teams that share GPUs.
use sea_orm::entity::prelude::*;
use tessera_core::ids::TenantId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tenants")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: TenantId,
    #[sea_orm(unique)]
    pub slug: tessera_core::checked::TenantSlug,
    pub name: String,
    pub cost_centre: Option<String>,
    pub created_at: DateTimeUtc,
    /// IdP groups whose members are tenant members (`None`: not yet set
    /// in the database; the configuration's apply).
    pub member_groups: Option<Groups>,
    /// IdP groups whose members are tenant admins (`None` as above).
    pub admin_groups: Option<Groups>,
    /// Bumped by every change; an edit names the revision it started from.
    pub revision: i64,
    /// Kubernetes namespaces of its workloads (`None`: not yet set in the
    /// database; the configuration's apply, else the slug).
    pub namespaces: Option<Namespaces>,
}

/// Kubernetes namespace names, as stored.
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    sea_orm::FromJsonQueryResult,
)]
pub struct Namespaces(pub Vec<tessera_core::checked::Namespace>);

/// IdP group names, as stored.
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    sea_orm::FromJsonQueryResult,
)]
pub struct Groups(pub Vec<String>);

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
