//! Start a test cluster and keep it running; writes a kubeconfig.
//!
//! `cargo run -p ctrlkit-testcluster --example serve -- /tmp/tc.kubeconfig`
//! then `kubectl --kubeconfig /tmp/tc.kubeconfig get pods`.

use ctrlkit_testcluster::{TestCluster, TestClusterConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "testcluster.kubeconfig".into());
    let cluster = TestCluster::start(TestClusterConfig::default()).await?;
    cluster.write_kubeconfig(std::path::Path::new(&path))?;
    println!(
        "serving on {}; kubeconfig written to {path}",
        cluster.base_url()
    );
    std::future::pending::<()>().await;
    Ok(())
}
