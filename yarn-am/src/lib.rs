//! A YARN client: REST for submission and status, Hadoop RPC for what an ApplicationMaster does.
