//! Protocol switches (WebSocket and other `Upgrade`s): once the endpoint answers 101, the client's
//! upgraded connection and the endpoint's raw connection are spliced until either side closes.

use bytes::Bytes;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Splices the client's upgraded connection with the endpoint's, in a task of their own. `early`
/// holds bytes the endpoint sent right after its 101 head.
pub(crate) fn tunnel(client: OnUpgrade, mut upstream: TcpStream, early: Bytes) {
    tokio::spawn(async move {
        let client = match client.await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "client upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        if !early.is_empty() && client.write_all(&early).await.is_err() {
            return;
        }
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            tracing::debug!(error = %e, "upgraded connection ended");
        }
    });
}
