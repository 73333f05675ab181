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
    /// The configuration.
    pub config: Arc<Config>,
    /// Leptos rendering options.
    pub leptos_options: LeptosOptions,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}
