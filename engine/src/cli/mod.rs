pub mod commands;
pub mod list;
