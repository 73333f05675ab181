//! Sign-in: OIDC authorization code flow with PKCE, sessions in the database,
//! the middleware that resolves the signed-in user for every request, and the
//! extractors that tell handlers who is calling.

pub mod extract;
pub mod login;
pub mod oidc;
pub mod pending;
pub mod session;
pub mod viewer;
