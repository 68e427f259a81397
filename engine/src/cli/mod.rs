mod artifact;
pub mod commands;
pub mod list;
mod signals;
pub mod yarn;
