//! Leader election: a deterministic core and its async driver.

mod core;
mod driver;

pub use self::core::{LeadershipEvent, RevokeReason};
pub use self::driver::LeaderElection;
