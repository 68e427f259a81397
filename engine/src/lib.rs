//! sluice engine
