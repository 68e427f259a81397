//! sluice engine
pub mod config;
