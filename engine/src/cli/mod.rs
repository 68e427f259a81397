mod artifact;
pub mod commands;
pub mod kubernetes;
pub mod list;
mod signals;
pub mod yarn;
