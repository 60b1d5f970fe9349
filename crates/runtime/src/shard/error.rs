//! Why a shard member could not start or leave cleanly.

use ctrlkit_informer::InformerError;

/// Why a [`ShardMember`](super::ShardMember) could not be made, run, or
/// leave its ring cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// The configuration is invalid.
    #[error("invalid shard configuration: {why}")]
    Config {
        /// What is wrong.
        why: String,
    },
    /// The informer over the ring's Leases could not start.
    #[error("cannot start the shard ring's Lease informer")]
    Informer(#[source] InformerError),
    /// On shutdown the member's Lease could not be released; it expires
    /// instead, and its slots move one lease duration later.
    #[error("cannot release the shard Lease {lease}; it will expire instead")]
    Release {
        /// The member's Lease.
        lease: String,
        /// What the API server answered.
        #[source]
        source: kube::Error,
    },
}
