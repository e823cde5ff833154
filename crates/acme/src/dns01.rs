//! DNS-01 (RFC 8555 §8.4) through RFC 2136 dynamic updates signed with TSIG (RFC 8945): the TXT
//! record `_acme-challenge.NAME` added at the zone's primary before the CA is asked to validate,
//! and removed once the order is over. BIND, Knot and PowerDNS all take such updates; hickory's
//! client builds and signs them.

use crate::error::AcmeError;
use gatehouse_config::{Rfc2136, TsigAlgorithm};
use hickory_net::client::{Client, ClientHandle};
use hickory_net::proto::op::ResponseCode;
use hickory_net::proto::rr::rdata::TXT;
use hickory_net::proto::rr::{Name, RData, Record, TSigner};
use hickory_net::runtime::TokioRuntimeProvider;
use hickory_net::udp::UdpClientStream;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

/// Longest wait for the server's answer to one update.
const UPDATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads a TSIG secret from `text`: the base64 alone, BIND's `secret "…";` or Knot's
/// `secret: …`.
pub fn tsig_secret(text: &str) -> Option<Vec<u8>> {
    let candidate = match text.find("secret") {
        Some(at) => text[at + "secret".len()..]
            .trim_start_matches(|c: char| c.is_whitespace() || c == ':' || c == '"')
            .split(|c: char| c.is_whitespace() || c == '"' || c == ';')
            .next()?,
        None => text.trim(),
    };
    let decoded = data_encoding::BASE64.decode(candidate.as_bytes()).ok()?;
    (!decoded.is_empty()).then_some(decoded)
}

/// An RFC 2136 primary and the key it takes updates with.
pub struct Updater {
    server: SocketAddr,
    zone: Name,
    signer: TSigner,
    ttl: u32,
    /// Waited after an update, for secondaries.
    pub propagation_wait: Duration,
}

impl Updater {
    /// The updater of `r`, with the key's `secret` (read from `r.key_file`).
    pub fn new(r: &Rfc2136, secret: Vec<u8>) -> Result<Updater, String> {
        let server = r.server.parse().map_err(|_| format!("`{}` is not IP:port", r.server))?;
        let zone = Name::from_str(&format!("{}.", r.zone.trim_end_matches('.'))).map_err(|e| e.to_string())?;
        let algorithm = match r.key_algorithm {
            TsigAlgorithm::HmacSha256 => hickory_net::proto::rr::rdata::tsig::TsigAlgorithm::HmacSha256,
            TsigAlgorithm::HmacSha384 => hickory_net::proto::rr::rdata::tsig::TsigAlgorithm::HmacSha384,
            TsigAlgorithm::HmacSha512 => hickory_net::proto::rr::rdata::tsig::TsigAlgorithm::HmacSha512,
        };
        let key_name = Name::from_str(&r.key_name).map_err(|e| format!("key_name: {e}"))?;
        let signer = TSigner::new(secret, algorithm, key_name, 300).map_err(|e| e.to_string())?;
        Ok(Updater {
            server,
            zone,
            signer,
            ttl: u32::try_from(r.ttl.0.as_secs()).unwrap_or(60),
            propagation_wait: r.propagation_wait.0,
        })
    }

    /// The record name that answers for `name` (a wildcard's is its parent's).
    pub fn record_name(name: &str) -> String {
        format!("_acme-challenge.{}.", name.trim_start_matches("*."))
    }

    async fn client(&self) -> Result<Client<TokioRuntimeProvider>, AcmeError> {
        let stream = UdpClientStream::builder(self.server, TokioRuntimeProvider::default())
            .with_timeout(Some(UPDATE_TIMEOUT))
            .with_signer(Some(self.signer.clone()))
            .build();
        let (client, background) = Client::<TokioRuntimeProvider>::from_sender(stream);
        tokio::spawn(background);
        Ok(client)
    }

    fn record(&self, fqdn: &str, value: &str) -> Result<Record, AcmeError> {
        let name = Name::from_str(fqdn).map_err(|e| AcmeError::Local(format!("{fqdn}: {e}")))?;
        Ok(Record::from_rdata(name, self.ttl, RData::TXT(TXT::new(vec![value.to_string()]))))
    }

    /// Adds the TXT record `fqdn` holding `value` (beside any other value it holds: a name and
    /// its wildcard share one).
    pub async fn add(&self, fqdn: &str, value: &str) -> Result<(), AcmeError> {
        let record = self.record(fqdn, value)?;
        let mut client = self.client().await?;
        let answer = client.append(record, self.zone.clone(), false).await;
        Self::check(answer, "add", fqdn)
    }

    /// Removes the TXT value `value` of `fqdn`.
    pub async fn remove(&self, fqdn: &str, value: &str) -> Result<(), AcmeError> {
        let record = self.record(fqdn, value)?;
        let mut client = self.client().await?;
        let answer = client.delete_by_rdata(record, self.zone.clone()).await;
        Self::check(answer, "remove", fqdn)
    }

    fn check(
        answer: Result<hickory_net::proto::op::DnsResponse, hickory_net::NetError>,
        what: &str,
        fqdn: &str,
    ) -> Result<(), AcmeError> {
        match answer {
            Ok(r) if r.response_code == ResponseCode::NoError => Ok(()),
            Ok(r) => Err(AcmeError::Local(format!("dns01: the server refused to {what} {fqdn}: {}", r.response_code))),
            Err(e) => Err(AcmeError::Local(format!("dns01: cannot {what} {fqdn}: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_read_as_the_servers_tools_write_them() {
        let raw = "c2VjcmV0LWtleS1ieXRlcw==";
        let want = b"secret-key-bytes".to_vec();
        assert_eq!(tsig_secret(raw), Some(want.clone()));
        let bind = "key \"gatehouse\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0LWtleS1ieXRlcw==\";\n};\n";
        assert_eq!(tsig_secret(bind), Some(want.clone()));
        let knot = "key:\n  - id: gatehouse\n    algorithm: hmac-sha256\n    secret: c2VjcmV0LWtleS1ieXRlcw==\n";
        assert_eq!(tsig_secret(knot), Some(want));
        assert_eq!(tsig_secret("not base64 !"), None);
    }

    #[test]
    fn a_wildcard_is_validated_at_its_parent() {
        assert_eq!(Updater::record_name("*.apps.example.com"), "_acme-challenge.apps.example.com.");
        assert_eq!(Updater::record_name("www.example.com"), "_acme-challenge.www.example.com.");
    }
}
