//! Sign-in: OIDC authorization code flow with PKCE, sessions in the database, and
//! the middleware that resolves the signed-in user for every request.

pub mod oidc;
pub mod session;
pub mod viewer;
