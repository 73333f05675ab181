//! Server functions of the People page (platform admins).

use super::*;

/// Everyone who has signed in, and who is looking (platform admins).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeopleList {
    /// By name.
    pub people: Vec<PersonView>,
    /// The platform admin looking (who cannot deactivate themselves).
    pub me: UserId,
}

/// Everyone who has signed in (platform admins), stamped with the time.
#[server(prefix = "/api/ui", endpoint = "list_people")]
pub async fn list_people() -> Result<Stamped<PeopleList>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let admin = who.require_platform_admin()?;
    let people = service.people(&admin).await?;
    let me = who.user_id();
    Ok(ssr::stamped(&service, PeopleList { people, me }))
}

/// Ends every session of person `id` (platform admins).
#[server(prefix = "/api/ui", endpoint = "sign_out_person")]
pub async fn sign_out_person(id: UserId) -> Result<PersonView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    who.require_platform_admin()?;
    Ok(service.sign_out_everywhere(who, id).await?)
}

/// Deactivates (`active` false) or reactivates person `id` (platform admins).
#[server(prefix = "/api/ui", endpoint = "set_person_active")]
pub async fn set_person_active(id: UserId, active: bool) -> Result<PersonView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.set_person_active(&admin, id, active).await?)
}
