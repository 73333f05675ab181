//! Random secrets (join tokens, host credentials) and their stored hashes.
//!
//! Secrets are 256 random bits, so a plain SHA-256 is a sufficient hash: there is
//! nothing to brute-force.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// A new secret with a readable prefix, e.g. `tsj_3f9a...`.
pub fn generate(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("{prefix}_{}", hex::encode(bytes))
}

/// The hex SHA-256 of a secret, as stored.
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_unique_prefixed_and_hash_stably() {
        let a = generate("tsj");
        let b = generate("tsj");
        assert_ne!(a, b);
        assert!(a.starts_with("tsj_"));
        assert_eq!(a.len(), 4 + 64);
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash(&a).len(), 64);
    }
}
