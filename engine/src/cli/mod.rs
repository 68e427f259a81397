pub mod client;
pub mod commands;
