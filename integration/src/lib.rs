//! Helpers for sluice's end-to-end tests: start real processes, wait for them, clean up.
