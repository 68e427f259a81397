//! The control plane: messages between TaskManagers and the JobManager and the authenticated
//! connection they travel on. Separate from the data plane by design: different sockets,
//! different code.

pub mod messages;
pub mod transport;
