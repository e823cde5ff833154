//! The records of the control plane, as stored and as the admin API shows them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a revision is, without its content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RevisionMeta {
    /// Revision number, from 1, never reused.
    pub number: u64,
    /// SHA-256 of the content, hex.
    pub hash: String,
    /// Token name that made it.
    pub author: String,
    /// Why.
    pub message: String,
    /// Unix seconds.
    pub created: i64,
}

/// An immutable revision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Revision {
    /// Number, hash, author, message, time.
    #[serde(flatten)]
    pub meta: RevisionMeta,
    /// The published sections. Kept as JSON, which nodes read in a few milliseconds; the
    /// canonical YAML that is hashed and shown in diffs is made from it on demand.
    #[schema(schema_with = document_schema)]
    pub document: serde_json::Value,
}

/// The document operators edit; its version guards against lost updates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Draft {
    /// Incremented by every change, from 1.
    pub version: u64,
    /// The published sections, as a JSON object.
    #[schema(schema_with = document_schema)]
    pub document: serde_json::Value,
    /// Token name of the last change.
    pub updated_by: String,
    /// Unix seconds of the last change.
    pub updated: i64,
}

/// Which revision runs where.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Releases {
    /// The revision every node runs unless one of its labels has a staged one.
    #[schema(required = true)]
    pub released: Option<u64>,
    /// Revisions staged to labels.
    pub staged: BTreeMap<String, u64>,
    /// Incremented by every change.
    pub seq: u64,
    /// Names the store's history that `seq` counts in: a store that lost its data and started
    /// again has a new one. Empty for the local store, whose history is its directory.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub epoch: String,
}

impl Releases {
    /// The revision a node with `labels` should run: the first of its labels with a staged
    /// revision, else the released one.
    pub fn target_for(&self, labels: &[String]) -> Option<u64> {
        labels.iter().find_map(|l| self.staged.get(l).copied()).or(self.released)
    }
}

/// What was done to the releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A revision released to every node.
    Release,
    /// An earlier revision released again.
    Rollback,
    /// A revision staged to a label.
    Stage,
    /// A label's stage removed; its nodes follow the release again.
    Unstage,
}

/// One change of the releases.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Event {
    /// Unix seconds.
    pub at: i64,
    /// Token name.
    pub who: String,
    /// What.
    pub action: Action,
    /// The revision released, rolled back to, staged or unstaged.
    pub revision: u64,
    /// The label of a stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A revision a node could not apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApplyError {
    /// The revision.
    pub revision: u64,
    /// Unix seconds.
    pub at: i64,
    /// Every error, with its path.
    pub errors: Vec<String>,
}

/// How a node fares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// It reaches the store and runs its target.
    Ok,
    /// It cannot reach the store, or runs something other than its target.
    Degraded,
}

/// What a node says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeReport {
    /// Node id.
    pub id: String,
    /// Its labels.
    pub labels: Vec<String>,
    /// The revision it runs; none when it runs its file alone.
    #[schema(required = true)]
    pub revision: Option<u64>,
    /// That revision's hash.
    #[schema(required = true)]
    pub hash: Option<String>,
    /// The revision it should run by the releases.
    #[schema(required = true)]
    pub target: Option<u64>,
    /// Its configuration generation (1 at start, +1 per applied change).
    pub generation: u64,
    /// The last revision it refused, while that is still its target.
    #[schema(required = true)]
    pub last_error: Option<ApplyError>,
    /// `ok`, or `degraded` while it cannot reach the store or runs something other than its target.
    pub health: Health,
    /// Gatehouse version.
    pub version: String,
    /// Unix seconds it started.
    pub started: i64,
    /// Unix seconds of this report.
    pub updated: i64,
}

/// A document's schema: the `Document` component of the admin API's OpenAPI document (for
/// `#[schema(schema_with = ...)]` on fields holding one).
pub fn document_schema() -> utoipa::openapi::Ref {
    utoipa::openapi::Ref::from_schema_name("Document")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_with_a_stage_wins_over_the_release() {
        let r =
            Releases { released: Some(3), staged: [("canary".to_string(), 5)].into(), seq: 2, ..Releases::default() };
        assert_eq!(r.target_for(&["canary".into()]), Some(5));
        assert_eq!(r.target_for(&["blue".into(), "canary".into()]), Some(5));
        assert_eq!(r.target_for(&["blue".into()]), Some(3));
        assert_eq!(r.target_for(&[]), Some(3));
        assert_eq!(Releases::default().target_for(&["canary".into()]), None);
    }
}
