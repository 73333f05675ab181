//! Tessera's pure domain: no I/O, no clock, no async. Builds for wasm32 so the
//! browser validates with the same rules as the server.
