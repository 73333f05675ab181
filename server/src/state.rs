//! What every handler can reach.

use crate::auth::oidc::Oidc;
use crate::config::Config;
use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use std::sync::Arc;
use tessera_service::Service;

/// Shared state of the axum app.
#[derive(Clone, Debug)]
pub struct AppState {
    /// Use-cases.
    pub service: Service,
    /// Single sign-on.
    pub oidc: Arc<Oidc>,
    /// Rate limiters.
    pub limits: Arc<crate::security::limits::Limits>,
    /// The configuration.
    pub config: Arc<Config>,
    /// Encoded allocation lists, kept with the service's kept lists.
    pub list_bodies: Arc<crate::routes::list_bodies::ListBodies>,
    /// Leptos rendering options.
    pub leptos_options: LeptosOptions,
    /// Set to `true` once the server is shutting down: long polls answer at
    /// once and background tasks end after their current round.
    pub shutdown: Arc<tokio::sync::watch::Sender<bool>>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

/// Resolves once `stop` is `true` (or its sender is gone). The borrow of the
/// value ends inside, so the future stays `Send`.
pub async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}
