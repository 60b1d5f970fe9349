//! Throughput benchmark (placeholder, filled in later).
fn main() {}
