//! Shared helpers for the ctrlkit benches and the workload driver.
