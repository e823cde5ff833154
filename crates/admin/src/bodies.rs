//! The API's answers that are records of its own, typed so that their schemas in the OpenAPI
//! document are derived from them ([`crate::api::openapi`]); the JSON they make is what the API
//! sends.

use gatehouse_control::{Event, NodeReport, Releases, RevisionMeta};
use serde::Serialize;
use std::collections::BTreeMap;

/// `GET /revisions`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct RevisionList {
    /// Every revision, oldest first.
    pub revisions: Vec<RevisionMeta>,
    /// The revision every node runs unless a label of its has a staged one; null before the first
    /// release.
    #[schema(required = true)]
    pub released: Option<u64>,
    /// Revisions staged to labels.
    pub staged: BTreeMap<String, u64>,
}

/// What a release, rollback, stage or unstage did.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ReleaseChange {
    /// The releases after the change.
    pub releases: Releases,
    /// The change.
    pub event: Event,
}

/// `GET /releases`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ReleaseHistory {
    /// The revision every node runs unless a label of its has a staged one.
    #[schema(required = true)]
    pub released: Option<u64>,
    /// Revisions staged to labels.
    pub staged: BTreeMap<String, u64>,
    /// Counts changes of the releases.
    pub seq: u64,
    /// The last 100 changes, newest first.
    pub history: Vec<Event>,
}

/// The draft after a change, secrets redacted.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DraftWritten {
    /// Its version, which is its new `ETag`.
    pub version: u64,
    /// The published sections.
    #[schema(schema_with = gatehouse_control::document_schema)]
    pub document: serde_json::Value,
}

/// `GET` and `PUT /log-level`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct LogLevel {
    /// The filter in force.
    pub level: String,
    /// `log.level` of the configuration in force.
    pub configured: String,
}

/// A node as `GET /nodes` shows it: its last report, and whether that is old.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Node)]
pub struct NodeView {
    /// Its last report.
    #[serde(flatten)]
    pub report: NodeReport,
    /// No report for three poll intervals.
    pub stale: bool,
}

/// `GET /nodes`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct NodeList {
    /// Every node that reported, by id.
    pub nodes: Vec<NodeView>,
}
