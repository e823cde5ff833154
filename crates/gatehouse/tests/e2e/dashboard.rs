//! The Grafana dashboard (`deploy/grafana/gatehouse.json`) and `docs/metrics.md` against what a
//! running gateway exports: a metric or label renamed in the code fails here, not silently in a
//! Grafana panel that stays empty or a page that describes what no longer exists.

use crate::common::{head, start, targets, HOST};
use gatehouse_testkit::Backend;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const DASHBOARD: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/gatehouse.json"));
const METRICS_DOC: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md"));

/// Labels Prometheus adds to every series when it scrapes; the exposition never carries them.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// The label names of a selector or a series, `{` already read: `a="x",b=~"y"}`. Values may hold
/// `,` `=` `}` and escaped quotes.
fn label_names(body: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
        let mut name = String::new();
        while let Some(c) = chars.next_if(|c| is_name_char(*c)) {
            name.push(c);
        }
        if name.is_empty() {
            return names;
        }
        names.push(name);
        while chars.next_if(|c| "=!~ ".contains(*c)).is_some() {}
        if chars.next() != Some('"') {
            return names;
        }
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => break,
                _ => {}
            }
        }
    }
}

/// Series name → every label name seen on it, from the Prometheus text format.
fn exported(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = out.entry(line[..end].to_string()).or_default();
        if let Some(body) = line[end..].strip_prefix('{') {
            labels.extend(label_names(body));
        }
    }
    out
}

/// Every PromQL string in the dashboard: panel targets, annotations and variable definitions.
fn queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "definition", Value::String(q)) => out.push(q.clone()),
                    _ => queries(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The metrics a query reads, each with the label names its selector matches on.
fn selectors(query: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = query[at..].find("gatehouse_") {
        let start = at + found;
        let len = query[start..].find(|c| !is_name_char(c)).unwrap_or(query.len() - start);
        let name = &query[start..start + len];
        at = start + len;
        let labels = query[at..].strip_prefix('{').map(label_names).unwrap_or_default();
        out.push((name.to_string(), labels));
    }
    out
}

/// Label names a query groups or picks by: `by (a, b)` and the second argument of `label_values`.
fn grouping(query: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in query.match_indices("by (") {
        let list = &query[i + 4..];
        let list = &list[..list.find(')').unwrap_or(list.len())];
        out.extend(list.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()));
    }
    if let Some(args) = query.strip_prefix("label_values(") {
        if let Some(label) = args.trim_end_matches(')').rsplit(',').next() {
            out.push(label.trim().to_string());
        }
    }
    out
}

#[test]
fn the_dashboard_and_the_metrics_page_name_only_what_the_gateway_exports() {
    let backend = Backend::start("b");
    let yaml = format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\nservices:\n  api: {{path: /api, upstream: u, auth: app_key}}\napps:\n  shop: {{key: K-shop, grants: {{api: ~}}}}\n",
        head(""),
        targets(&[&backend]),
    );
    let gw = start(&yaml);
    let text = gw.metrics();
    let series = exported(&text);

    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let mut all = Vec::new();
    queries(&dashboard, &mut all);
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for q in &all {
        let read = selectors(q);
        let mut available: BTreeSet<&str> = TARGET_LABELS.into_iter().collect();
        for (name, labels) in &read {
            used.insert(name.clone());
            let Some(has) = series.get(name) else {
                problems.push(format!("`{name}` is not exported (in `{q}`)"));
                continue;
            };
            available.extend(has.iter().map(String::as_str));
            for l in labels.iter().filter(|l| !TARGET_LABELS.contains(&l.as_str()) && !has.contains(*l)) {
                problems.push(format!("`{name}` has no label `{l}` (in `{q}`)"));
            }
        }
        for l in grouping(q).iter().filter(|l| !available.contains(l.as_str())) {
            problems.push(format!("no metric of `{q}` has the label `{l}`"));
        }
    }
    assert!(problems.is_empty(), "{}\n--- /metrics ---\n{text}", problems.join("\n"));
    assert!(used.len() >= 30, "the dashboard reads only {} metrics: {used:?}", used.len());

    // Importable: every panel asks the data source the user picks.
    let uses_variable = |p: &Value| p["type"] == "row" || p["datasource"]["uid"] == "${DS_PROMETHEUS}";
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.iter().all(uses_variable), "a panel names a fixed data source");
    let vars = dashboard["templating"]["list"].as_array().expect("templating");
    assert!(vars
        .iter()
        .any(|v| v["name"] == "DS_PROMETHEUS" && v["type"] == "datasource" && v["query"] == "prometheus"));
    let ids: BTreeSet<u64> = panels.iter().filter_map(|p| p["id"].as_u64()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");

    // Every exported family is on the metrics page.
    let families = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next());
    let undocumented: Vec<&str> = families.filter(|f| !METRICS_DOC.contains(&format!("`{f}"))).collect();
    assert!(undocumented.is_empty(), "docs/metrics.md does not list {undocumented:?}");
}

#[test]
fn query_parsing() {
    let q = r#"sum by (route, le) (rate(gatehouse_x_bucket{job=~"$job",route!="a,b"}[5m])) / gatehouse_y"#;
    let read = selectors(q);
    assert_eq!(read[0], ("gatehouse_x_bucket".to_string(), vec!["job".to_string(), "route".to_string()]));
    assert_eq!(read[1], ("gatehouse_y".to_string(), vec![]));
    assert_eq!(grouping(q), ["route", "le"]);
    assert_eq!(grouping("label_values(gatehouse_z{job=~\"$job\"}, service)"), ["service"]);
    let m = exported("# TYPE a counter\na{x=\"1,y=\\\"2\",z=\"\"} 3\nb 1\n");
    assert_eq!(m["a"], ["x", "z"].iter().map(|s| s.to_string()).collect());
    assert!(m["b"].is_empty());
}
