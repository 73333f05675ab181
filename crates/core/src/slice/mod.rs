//! A tenant's slice request against a pool: which of the pool's models can
//! serve the shape, what it costs in quota terms, how the placer sees it,
//! and how to connect to it once it exists. Shared by the server (admission)
//! and the browser (the request form validates as the user types).

pub mod alternatives;
mod connection;
mod pool;

pub use connection::{connection, mps_share, Connection, ConnectionTarget, MPS_PIPE_ROOT};
pub use pool::{label, OfferedMigProfile, PoolOffer, PoolShapeError, MAX_WHOLE_GPUS};

#[cfg(test)]
mod tests;
