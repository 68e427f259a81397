//! The control plane: messages between TaskManagers and the JobManager and the authenticated
//! connection they travel on. Separate from the data plane by design: different sockets,
//! different code. The ports open to the network (this one and the REST API's) accept through
//! `listener`, which bounds what strangers can hold; `http` serves the REST API within limits.

pub mod artifact;
pub mod http;
pub mod listener;
pub mod messages;
pub mod transport;
