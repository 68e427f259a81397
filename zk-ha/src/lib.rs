//! High availability services on ZooKeeper: leader election, leader retrieval and fenced stores.
