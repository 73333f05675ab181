//! `users`: people, identified by the IdP's (issuer, subject).
use sea_orm::entity::prelude::*;
use tessera_core::ids::UserId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "users")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: UserId,
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub name: String,
    pub platform_admin: bool,
    pub created_at: DateTimeUtc,
    pub last_login_at: Option<DateTimeUtc>,
    /// A platform admin deactivated them: sign-in is refused, their
    /// sessions are over and the tokens they made are revoked.
    pub deactivated_at: Option<DateTimeUtc>,
    /// Sessions signed in before this are over ("sign out everywhere").
    pub sessions_valid_after: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
