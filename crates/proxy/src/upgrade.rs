//! Protocol switches (WebSocket and other `Upgrade`s): once the upstream answers 101, the two
//! upgraded connections are spliced together until either side closes.

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

/// Splices the client's and the upstream's upgraded connections in a task of their own.
pub(crate) fn tunnel(client: OnUpgrade, upstream: OnUpgrade) {
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(pair) => pair,
            Err(e) => {
                tracing::debug!(error = %e, "upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut upstream = TokioIo::new(upstream);
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            tracing::debug!(error = %e, "upgraded connection ended");
        }
    });
}
