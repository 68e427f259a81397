//! The vocabulary every layer above the configuration shares: identifiers, keys and key groups,
//! and the task error. Nothing here imports from another module of the crate except `config`;
//! see "Layers" in `docs/architecture.md`.

pub mod error;
pub mod ids;
pub mod keys;
pub mod log_text;
