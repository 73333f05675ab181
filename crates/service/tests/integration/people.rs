//! People: API tokens follow the person who made them, deactivation, and
//! signing a person out everywhere.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use chrono::Duration;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tessera_core::role::TokenScope;
use tessera_service::entity::audit_event;
use tessera_service::ServiceError;

/// Who made the token and what it gets refused with, in one place.
async fn check(f: &Fixture, secret: &str) -> Result<(), ServiceError> {
    f.service.authenticate_api_token(secret).await.map(|_| ())
}

/// The `after` of the newest audit row with `action`.
async fn last_audit(f: &Fixture, action: &str) -> serde_json::Value {
    audit_event::Entity::find()
        .all(f.service.db())
        .await
        .unwrap()
        .into_iter()
        .rev()
        .find(|e| e.action.as_str() == action)
        .unwrap_or_else(|| panic!("no {action} in the audit log"))
        .after
        .unwrap_or_default()
}

#[tokio::test]
async fn a_token_follows_the_person_who_made_it() {
    let f = fixture().await;
    let lead = f.login("lee", &["vision", "vision-leads"]).await;
    let actor = f
        .service
        .tenant_actor(&lead, &slug("vision"))
        .await
        .unwrap();
    let made = f
        .service
        .create_api_token(&lead, &actor, "ci", None, TokenScope::Request)
        .await
        .unwrap();
    let system = f
        .service
        .create_api_token_as_system(&slug("vision"), "bench", None, TokenScope::Request)
        .await
        .unwrap();
    check(&f, &made.secret).await.unwrap();

    // The creator has not signed in for longer than the bound: their
    // roles are stale, so the token is suspended until they sign in again.
    f.clock.advance(Duration::days(31));
    let err = check(&f, &made.secret).await.unwrap_err();
    assert!(
        matches!(&err, ServiceError::SuspendedApiToken(why) if why.contains("has not signed in for 30 days")),
        "{err:?}"
    );
    assert_eq!(err.status(), 401);
    let listed = f.service.list_api_tokens(&lead, &actor).await.unwrap();
    let row = listed.iter().find(|t| t.id == made.token.id).unwrap();
    assert!(row.suspended.as_deref().unwrap().contains("signed in"));
    let bench = listed.iter().find(|t| t.id == system.token.id).unwrap();
    assert_eq!(bench.suspended, None, "a command-line token follows nobody");
    check(&f, &system.secret).await.unwrap();
    let lead = f.login("lee", &["vision", "vision-leads"]).await;
    check(&f, &made.secret).await.unwrap();

    // Removed from the tenant behind Tessera's back (as another path to
    // the same rows would): refused within the second the check is cached.
    f.behind_the_back(format!(
        "DELETE FROM memberships WHERE user_id = {}",
        lead.user_id()
    ))
    .await;
    f.clock.advance(Duration::seconds(2));
    let err = check(&f, &made.secret).await.unwrap_err();
    assert!(
        matches!(&err, ServiceError::SuspendedApiToken(why) if why.contains("no longer belongs")),
        "{err:?}"
    );

    // A sign-in that shows the group is gone revokes the token for good,
    // audited; coming back to the group does not bring it back.
    f.login("lee", &["vision"]).await; // a member now: tenant kept
    f.clock.advance(Duration::seconds(2));
    check(&f, &made.secret).await.unwrap();
    f.login("lee", &[]).await;
    f.clock.advance(Duration::seconds(2));
    let err = check(&f, &made.secret).await.unwrap_err();
    assert!(matches!(err, ServiceError::InvalidApiToken), "{err:?}");
    assert_eq!(last_audit(&f, "api_token.revoke").await["name"], "ci");
    let lead = f.login("lee", &["vision", "vision-leads"]).await;
    f.clock.advance(Duration::seconds(2));
    assert!(matches!(
        check(&f, &made.secret).await.unwrap_err(),
        ServiceError::InvalidApiToken
    ));
    check(&f, &system.secret).await.unwrap();
    let listed = f.service.list_api_tokens(&lead, &actor).await.unwrap();
    let row = listed.iter().find(|t| t.id == made.token.id).unwrap();
    assert!(row.revoked_at.is_some() && row.suspended.is_none());
}

#[tokio::test]
async fn deactivating_a_person_refuses_sign_in_ends_sessions_and_revokes_their_tokens() {
    let f = fixture().await;
    let root = f.admin().await;
    let admin = root.require_platform_admin().unwrap();
    let lead = f.login("lee", &["vision", "vision-leads"]).await;
    let actor = f
        .service
        .tenant_actor(&lead, &slug("vision"))
        .await
        .unwrap();
    let made = f
        .service
        .create_api_token(&lead, &actor, "ci", None, TokenScope::Request)
        .await
        .unwrap();
    let people = f.service.people(&admin).await.unwrap();
    let lee = people.iter().find(|p| p.id == lead.user_id()).unwrap();
    assert_eq!((lee.api_tokens, lee.deactivated_at), (1, None));
    assert_eq!(lee.tenants.len(), 1);

    // Nobody deactivates themselves; members cannot see the list.
    let err = f
        .service
        .set_person_active(&admin, root.user_id(), false)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err}");
    assert_eq!(lead.require_platform_admin().unwrap_err().status(), 403);

    let audits = f.count("audit_events").await;
    let lee = f
        .service
        .set_person_active(&admin, lead.user_id(), false)
        .await
        .unwrap();
    assert!(lee.deactivated_at.is_some());
    assert_eq!(lee.api_tokens, 0);
    // One access change and one token revocation.
    assert_eq!(f.count("audit_events").await, audits + 2);
    let after = last_audit(&f, "user.deactivate").await;
    assert_eq!(after["api_tokens_revoked"], 1, "{after}");
    assert!(matches!(
        check(&f, &made.secret).await.unwrap_err(),
        ServiceError::InvalidApiToken
    ));
    let err = f
        .service
        .login(&claims("lee", &["vision", "vision-leads"]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403, "{err}");
    assert!(err.to_string().contains("deactivated"), "{err}");
    let err = f.service.principal(lead.user_id()).await.unwrap_err();
    assert!(matches!(err, ServiceError::Unauthenticated), "{err:?}");
    let err = f
        .service
        .set_person_active(&admin, lead.user_id(), false)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409);

    // Reactivated: they sign in again; their revoked token stays revoked.
    let lee = f
        .service
        .set_person_active(&admin, lead.user_id(), true)
        .await
        .unwrap();
    assert!(lee.deactivated_at.is_none());
    f.login("lee", &["vision", "vision-leads"]).await;
    f.clock.advance(Duration::seconds(2));
    assert!(check(&f, &made.secret).await.is_err());
    let actions = f.audit_actions().await;
    assert!(
        actions.iter().any(|a| a == "user.reactivate"),
        "{actions:?}"
    );
}

#[tokio::test]
async fn signing_out_everywhere_ends_the_sessions_signed_in_before_it() {
    let f = fixture().await;
    let bob = f.login("bob", &["vision"]).await;
    let nora = f.login("nora", &["nlp"]).await;
    let root = f.admin().await;
    let signed_in = f.service.now();
    let session = |at| f.service.session_principal(bob.user_id(), Some(at));
    session(signed_in).await.unwrap();

    // Only the person themselves or a platform admin.
    let err = f
        .service
        .sign_out_everywhere(&nora, bob.user_id())
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403, "{err}");
    session(signed_in).await.unwrap();

    f.clock.advance(Duration::minutes(5));
    let me = f
        .service
        .sign_out_everywhere(&bob, bob.user_id())
        .await
        .unwrap();
    assert!(me.sessions_valid_after.is_some());
    let err = session(signed_in).await.unwrap_err();
    assert!(matches!(err, ServiceError::Unauthenticated), "{err:?}");
    // A sign-in afterwards (even within the same second) is a new session.
    session(f.service.now()).await.unwrap();
    f.clock.advance(Duration::seconds(1));
    let again = f.service.now();
    session(again).await.unwrap();

    // A platform admin may end anyone's sessions.
    f.clock.advance(Duration::minutes(1));
    f.service
        .sign_out_everywhere(&root, bob.user_id())
        .await
        .unwrap();
    assert!(session(again).await.is_err());
    let audited = audit_event::Entity::find()
        .filter(audit_event::Column::TargetId.eq(bob.user_id().to_string()))
        .all(f.service.db())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action.as_str() == "user.sign_out_everywhere")
        .count();
    assert_eq!(audited, 2);
}

#[tokio::test]
async fn the_audit_log_is_a_hash_chain_that_names_the_first_edited_row() {
    let f = fixture().await;
    let root = f.admin().await;
    let admin = root.require_platform_admin().unwrap();
    for who in ["bob", "nora", "lee"] {
        let p = f.login(who, &["vision"]).await;
        f.service
            .sign_out_everywhere(&p, p.user_id())
            .await
            .unwrap();
    }
    let people = f.service.people(&admin).await.unwrap();
    assert!(people.len() >= 4);
    let ok = f.service.verify_audit_chain().await.unwrap();
    let bob = people.iter().find(|p| p.name == "User bob").unwrap().id;
    let member = f.service.principal(bob).await.unwrap();
    let page = f.service.audit_log(&member, &Default::default()).await;
    assert!(
        page.map_or(true, |p| p.chain.is_none()),
        "only platform admins"
    );
    let rows = f.count("audit_events").await as u64;
    assert_eq!(ok.broken, None, "{ok:?}");
    assert_eq!((ok.verified, ok.unchained), (rows, 0));
    assert!(rows >= 8, "{rows}");

    // One row edited behind Tessera's back: the walk stops there.
    let ids: Vec<i64> = audit_event::Entity::find()
        .all(f.service.db())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let (third, last) = (ids[2], ids[ids.len() - 1]);
    let actor = audit_event::Entity::find_by_id(third)
        .one(f.service.db())
        .await
        .unwrap()
        .unwrap()
        .actor;
    f.behind_the_back(format!(
        "UPDATE audit_events SET actor = 'mallory' WHERE id = {third}"
    ))
    .await;
    let bad = f.service.verify_audit_chain().await.unwrap();
    // The platform admin's audit page says where it breaks.
    let page = f
        .service
        .audit_log(&root, &Default::default())
        .await
        .unwrap();
    let chain = page.chain.expect("platform admins see the chain");
    assert_eq!(chain.broken.map(|b| b.0), Some(Some(third)));
    let broken = bad.broken.expect("an edited row breaks the chain");
    assert_eq!(broken.row, Some(third), "{broken:?}");
    assert_eq!(bad.verified, 2);
    assert_eq!(bad.verified_up_to, Some(ids[1]));

    // Put back, the chain holds again; the last row removed: the end is cut.
    f.behind_the_back(format!(
        "UPDATE audit_events SET actor = '{}' WHERE id = {third}",
        actor.replace('\'', "''")
    ))
    .await;
    let again = f.service.verify_audit_chain().await.unwrap();
    assert_eq!((again.broken, again.verified), (None, rows));
    f.behind_the_back(format!("DELETE FROM audit_events WHERE id = {last}"))
        .await;
    let cut = f.service.verify_audit_chain().await.unwrap();
    let broken = cut.broken.expect("a removed last row breaks the chain");
    assert!(broken.reason.contains("removed at the end"), "{broken:?}");
    assert_eq!(cut.verified, rows - 1);
}

/// Audited writes racing on two replicas of one database append to one
/// chain: every row links to the one before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_racing_keep_one_audit_chain() {
    let f = fixture().await;
    let replica = tessera_service::Service::new(
        f.service.db().clone(),
        f.service.settings().clone(),
        f.clock.clone(),
    );
    let mut people = Vec::new();
    for i in 0..8 {
        people.push(f.login(&format!("p{i}"), &["vision"]).await);
    }
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let service = if i % 2 == 0 {
                f.service.clone()
            } else {
                replica.clone()
            };
            let who = people[i % people.len()].clone();
            tokio::spawn(async move { service.sign_out_everywhere(&who, who.user_id()).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let report = replica.verify_audit_chain().await.unwrap();
    assert_eq!(report.broken, None, "{report:?}");
    assert_eq!(report.verified, f.count("audit_events").await as u64);
    assert_eq!(count_of(&f, "user.sign_out_everywhere").await, 40);
}

async fn count_of(f: &Fixture, action: &str) -> usize {
    f.audit_actions()
        .await
        .iter()
        .filter(|a| a.as_str() == action)
        .count()
}

#[tokio::test]
async fn a_read_only_token_looks_and_changes_nothing() {
    use crate::common::agent::{ask, h100, mig, Agent};
    let f = fixture().await;
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-1e0")]).await;
    let lead = f.login("lee", &["vision", "vision-leads"]).await;
    let actor = f
        .service
        .tenant_actor(&lead, &slug("vision"))
        .await
        .unwrap();
    let slice = f
        .service
        .request_allocation(&actor, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    let made = f
        .service
        .create_api_token(&lead, &actor, "dashboard", None, TokenScope::Read)
        .await
        .unwrap();
    assert_eq!(made.token.scope, TokenScope::Read);
    assert_eq!(
        last_audit(&f, "api_token.create").await["scope"],
        serde_json::json!("read")
    );
    let reader = f
        .service
        .authenticate_api_token(&made.secret)
        .await
        .unwrap();
    assert!(!reader.can_request());

    // It sees what a member sees.
    let listed = f.service.list_allocations(&reader).await.unwrap();
    assert_eq!(listed.iter().map(|a| a.id).collect::<Vec<_>>(), [slice.id]);
    f.service.get_allocation(&reader, slice.id).await.unwrap();
    let audited = audit_event::Entity::find()
        .all(f.service.db())
        .await
        .unwrap()
        .len();

    // Every change is refused, with the way out.
    let refusals = [
        f.service
            .request_allocation(&reader, &ask("h100-mig", mig("1g.10gb"), 4))
            .await
            .map(|_| ()),
        f.service
            .extend_allocation(&reader, slice.id, 1)
            .await
            .map(|_| ()),
        f.service
            .keep_allocation(&reader, slice.id, "still training")
            .await
            .map(|_| ()),
        f.service
            .requeue_allocation(&reader, slice.id)
            .await
            .map(|_| ()),
        f.service
            .release_allocation(&reader, slice.id)
            .await
            .map(|_| ()),
    ];
    for r in refusals {
        let err = r.unwrap_err();
        assert!(
            matches!(&err, ServiceError::Forbidden(why) if why.contains("read-only") && why.contains("scope `request`")),
            "{err:?}"
        );
        assert_eq!(err.status(), 403);
    }
    let after = audit_event::Entity::find()
        .all(f.service.db())
        .await
        .unwrap()
        .len();
    assert_eq!(after, audited, "nothing was written");
    assert_eq!(
        f.service
            .get_allocation(&actor, slice.id)
            .await
            .unwrap()
            .state,
        slice.state,
        "the slice is untouched"
    );

    // A request-scoped token of the same tenant releases it.
    let writer = f
        .service
        .create_api_token(&lead, &actor, "ci", None, TokenScope::Request)
        .await
        .unwrap();
    let writer = f
        .service
        .authenticate_api_token(&writer.secret)
        .await
        .unwrap();
    f.service
        .release_allocation(&writer, slice.id)
        .await
        .unwrap();
    let scopes: Vec<_> = f
        .service
        .list_api_tokens(&lead, &actor)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.name, t.scope))
        .collect();
    assert_eq!(
        scopes,
        [
            ("ci".to_owned(), TokenScope::Request),
            ("dashboard".to_owned(), TokenScope::Read)
        ]
    );
}

/// Retention deletes the rows older than `keep_days`, oldest first, and
/// records it; the rows kept still verify, from the anchor it left.
#[tokio::test]
async fn audit_retention_deletes_old_rows_and_keeps_the_chain() {
    let f = fixture().await;
    let mut settings = f.service.settings().clone();
    settings.audit.keep_days = Some(30);
    let kept = tessera_service::Service::new(f.service.db().clone(), settings, f.clock.clone());
    let sign_out = |who: &'static str| {
        let f = &f;
        async move {
            let p = f.login(who, &["vision"]).await;
            f.service
                .sign_out_everywhere(&p, p.user_id())
                .await
                .unwrap();
        }
    };
    sign_out("bob").await;
    sign_out("nora").await;
    let old = f.count("audit_events").await as u64;
    f.clock.advance(Duration::days(20));
    sign_out("lee").await;
    let young = f.count("audit_events").await as u64 - old;
    assert!(old >= 4 && young >= 2, "{old} {young}");

    // Nothing is old enough yet; without a retention nothing ever is.
    assert_eq!(kept.prune_audit().await.unwrap(), 0);
    f.clock.advance(Duration::days(15));
    assert_eq!(
        f.service.prune_audit().await.unwrap(),
        0,
        "no retention set"
    );
    let before = f.service.verify_audit_chain().await.unwrap();
    let last_old = before.verified_up_to.unwrap() - young as i64;

    assert_eq!(kept.prune_audit().await.unwrap(), old);
    let left = audit_event::Entity::find()
        .all(f.service.db())
        .await
        .unwrap();
    assert_eq!(
        left.len() as u64,
        young + 1,
        "the young rows and the prune row"
    );
    assert!(left.iter().all(|e| e.id > last_old));
    let prune = last_audit(&f, "audit.prune").await;
    assert_eq!(prune["rows"], serde_json::json!(old));
    assert_eq!(prune["through"], serde_json::json!(last_old));
    assert_eq!(prune["keep_days"], serde_json::json!(30));
    let report = f.service.verify_audit_chain().await.unwrap();
    assert_eq!(report.broken, None, "{report:?}");
    assert_eq!(
        (report.verified, report.pruned, report.pruned_through),
        (young + 1, old, Some(last_old))
    );
    assert_eq!(
        kept.prune_audit().await.unwrap(),
        0,
        "nothing more to delete"
    );

    // Deleting the oldest kept row behind Tessera's back is still caught:
    // the next row no longer links to the anchor.
    let (first, second) = (left[0].id, left[1].id);
    f.behind_the_back(format!("DELETE FROM audit_events WHERE id = {first}"))
        .await;
    let bad = f.service.verify_audit_chain().await.unwrap();
    assert_eq!(bad.broken.map(|b| b.row), Some(Some(second)));
}
