//! `/api/v1/draft`: the document operators edit, whole or by entity (sites and their routes,
//! upstreams and their targets, services, apps, plans). Every write names the draft version it
//! read in `If-Match`; a write without it is refused (428), one against an older version too
//! (412), so two operators cannot overwrite each other silently.

use super::api::{diff_body, field, unrouted, Answer, Api, ApiError, Call, Reply};
use crate::bodies::{Document, NewTarget, TargetChange};
use gatehouse_config::PUBLISHED_SECTIONS;
use gatehouse_control::{document, Draft};
use http::{Method, StatusCode};
use serde_json::{json, Map, Value};

/// Each app key in `doc` replaced by its `key_hmac` (`admin.app_keys: hmac`), once its
/// characters are checked as the file check does.
fn mac_app_keys(doc: &mut Value, mac: &(dyn Fn(&[u8]) -> String + Send + Sync)) -> Result<(), ApiError> {
    let apps = doc.get_mut("apps").and_then(Value::as_object_mut).into_iter().flatten();
    let mut errors = Vec::new();
    for (id, app) in apps {
        let Some(app) = app.as_object_mut() else { continue };
        let Some(Value::String(key)) = app.get("key") else { continue };
        if let Err(e) = gatehouse_config::check_app_key(key) {
            errors.push(field(&format!("apps.{id}.key"), e.to_string()));
            continue;
        }
        let hmac = mac(key.as_bytes());
        app.remove("key");
        app.remove("key_sha256");
        app.insert("key_hmac".into(), json!(hmac));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(errors))
    }
}

fn section_of(s: &str) -> Result<&str, ApiError> {
    PUBLISHED_SECTIONS.iter().find(|p| **p == s).copied().ok_or_else(|| {
        ApiError::not_found(format!("no section `{s}`; expected one of {}", PUBLISHED_SECTIONS.join(", ")))
    })
}

fn entries<'a>(doc: &'a mut Value, section: &str) -> Result<&'a mut Map<String, Value>, ApiError> {
    let root = doc.as_object_mut().ok_or_else(|| ApiError::bad("the draft is not an object"))?;
    let v = root.entry(section).or_insert_with(|| json!({}));
    v.as_object_mut().ok_or_else(|| ApiError::bad(format!("`{section}` is not a map")))
}

fn list<'a>(entry: &'a mut Value, key: &str) -> Result<&'a mut Vec<Value>, ApiError> {
    let obj = entry.as_object_mut().ok_or_else(|| ApiError::bad("the entry is not an object"))?;
    let v = obj.entry(key).or_insert_with(|| json!([]));
    v.as_array_mut().ok_or_else(|| ApiError::bad(format!("`{key}` is not a list")))
}

fn object_body(c: &Call) -> Result<Value, ApiError> {
    let v = c.json()?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(ApiError::bad("the body must be a JSON object"))
    }
}

impl Api {
    pub(super) async fn draft_call(&self, c: &Call, segs: &[&str]) -> Answer {
        // Nothing is named so: there is nothing there (a new entry's name is judged as a field).
        if segs.get(1).is_some_and(|n| !gatehouse_config::valid_name(n))
            && !(c.method == Method::PUT && segs.len() == 2)
        {
            return Err(ApiError::not_found(
                "no entry has that name: names are 1 to 128 letters, digits, `-`, `_` and `.`",
            ));
        }
        match (&c.method, segs) {
            (&Method::GET, []) => {
                let d = self.current_draft().await?;
                let version = d.version;
                let body = json!(Draft { document: document::redact(&d.document, None), ..d });
                Ok(Reply { etag: Some(version), ..Reply::ok(body) })
            }
            (&Method::PUT, []) => {
                let doc = json!(c.body::<Document>()?);
                self.edit(c, move |d| {
                    *d = doc;
                    Ok(json!({"replaced": "document"}))
                })
                .await
            }
            (&Method::GET, ["diff"]) => self.diff_draft(c).await,
            (&Method::GET, [section]) => {
                let section = section_of(section)?;
                let d = self.current_draft().await?;
                let shown = document::redact(&d.document, None);
                let body = shown.get(section).cloned().unwrap_or_else(|| json!({}));
                Ok(Reply { etag: Some(d.version), ..Reply::ok(body) })
            }
            (&Method::GET, [section, name]) => {
                let section = section_of(section)?;
                let d = self.current_draft().await?;
                let shown = document::redact(&d.document, None);
                let entry = shown.get(section).and_then(|s| s.get(*name)).cloned();
                let entry = entry.ok_or_else(|| ApiError::not_found(format!("no {section} entry `{name}`")))?;
                Ok(Reply { etag: Some(d.version), ..Reply::ok(entry) })
            }
            (&Method::PUT, [section, name]) => {
                let section = section_of(section)?.to_string();
                if let Some(why) = gatehouse_config::name_error(name) {
                    return Err(ApiError::invalid(vec![field(&format!("{section}.{name}"), why.into())]));
                }
                let (name, entry) = (name.to_string(), object_body(c)?);
                self.edit(c, move |d| {
                    let created = entries(d, &section)?.insert(name.clone(), entry).is_none();
                    Ok(json!({ "section": section, "name": name, "created": created }))
                })
                .await
            }
            (&Method::DELETE, [section, name]) => {
                let section = section_of(section)?.to_string();
                let name = name.to_string();
                self.edit(c, move |d| {
                    entries(d, &section)?
                        .remove(&name)
                        .ok_or_else(|| ApiError::not_found(format!("no {section} entry `{name}`")))?;
                    Ok(json!({ "section": section, "name": name, "deleted": true }))
                })
                .await
            }
            (_, ["upstreams", name, "targets", rest @ ..]) => self.targets(c, name, rest).await,
            (_, ["sites", name, "routes", rest @ ..]) => self.routes(c, name, rest).await,
            _ => Err(unrouted(c)),
        }
    }

    /// Applies `f` to the draft the caller read (`If-Match`), checks and keeps the result.
    async fn edit(&self, c: &Call, f: impl FnOnce(&mut Value) -> Result<Value, ApiError>) -> Answer {
        let precondition = c.if_match.as_ref().ok_or_else(|| {
            ApiError::new(
                StatusCode::PRECONDITION_REQUIRED,
                "send If-Match with the draft version you read (GET /api/v1/draft)",
            )
        })?;
        let draft = self.current_draft().await?;
        if !precondition.matches(draft.version) {
            return Err(gatehouse_control::StoreError::Conflict { current: draft.version }.into());
        }
        let expected = draft.version;
        let mut doc = draft.document.clone();
        let mut audit = f(&mut doc)?;
        if let Some(mac) = &self.app_key_mac {
            mac_app_keys(&mut doc, mac.as_ref())?;
        }
        let doc = document::normalise(doc, Some(&draft.document)).map_err(ApiError::invalid)?;
        // Before validation, which reads the files.
        super::draft_files::check(&draft.document, &doc, &self.file_roots, &self.config_dir)?;
        self.validate(&doc)?;
        let saved = self.store.put_draft(expected, doc, &c.who).await?;
        audit["draft_version"] = json!(saved.version);
        let body = json!(crate::bodies::DraftWritten {
            version: saved.version,
            document: document::redact(&saved.document, None)
        });
        Ok(Reply { status: 200, body, etag: Some(saved.version), audit })
    }

    async fn diff_draft(&self, c: &Call) -> Answer {
        let draft = self.current_draft().await?;
        let against = match c.int_param("against", 1, super::api::MAX_INT)? {
            Some(n) => Some(n),
            None => self.store.releases().await?.released,
        };
        let (from, name) = match against {
            Some(n) => {
                let rev =
                    self.store.revision(n).await?.ok_or_else(|| ApiError::not_found(format!("no revision {n}")))?;
                (rev.document, format!("revision {n}"))
            }
            None => (json!({}), "nothing".to_string()),
        };
        Ok(Reply { etag: Some(draft.version), ..Reply::ok(diff_body(&from, &draft.document, &name, "draft", c)?) })
    }

    async fn targets(&self, c: &Call, upstream: &str, rest: &[&str]) -> Answer {
        let up = upstream.to_string();
        let missing = move |u: &str| ApiError::not_found(format!("no upstream `{u}`"));
        match (&c.method, rest) {
            (&Method::GET, []) => {
                let d = self.current_draft().await?;
                let t = d.document.get("upstreams").and_then(|s| s.get(&up)).ok_or_else(|| missing(&up))?;
                Ok(Reply { etag: Some(d.version), ..Reply::ok(t.get("targets").cloned().unwrap_or(json!([]))) })
            }
            (&Method::POST, []) => {
                let target: NewTarget = c.body()?;
                let address = target.address.clone();
                let target = json!(target);
                self.edit(c, move |d| {
                    let entry = entries(d, "upstreams")?.get_mut(&up).ok_or_else(|| missing(&up))?;
                    let targets = list(entry, "targets")?;
                    if targets.iter().any(|t| t.get("address").and_then(Value::as_str) == Some(address.as_str())) {
                        return Err(ApiError::conflict(format!("upstream `{up}` already has target {address}")));
                    }
                    targets.push(target);
                    Ok(json!({ "upstream": up, "added": address }))
                })
                .await
                .map(|r| Reply { status: 201, ..r })
            }
            (m, [address]) => {
                let address = address.to_string();
                let find = |targets: &[Value], a: &str| {
                    targets.iter().position(|t| t.get("address").and_then(Value::as_str) == Some(a))
                };
                match *m {
                    Method::GET => {
                        let d = self.current_draft().await?;
                        let t = d.document.get("upstreams").and_then(|s| s.get(&up)).ok_or_else(|| missing(&up))?;
                        let targets = t.get("targets").and_then(Value::as_array).cloned().unwrap_or_default();
                        let i = find(&targets, &address).ok_or_else(|| ApiError::not_found("no such target"))?;
                        Ok(Reply { etag: Some(d.version), ..Reply::ok(targets[i].clone()) })
                    }
                    Method::PUT | Method::DELETE => {
                        let put = match *m {
                            Method::PUT => Some(c.body::<TargetChange>()?),
                            _ => None,
                        };
                        if put.as_ref().and_then(|t| t.address.as_ref()).is_some_and(|a| *a != address) {
                            return Err(ApiError::invalid(vec![field(
                                "address",
                                format!(
                                    "the path names target {address}: move a target by removing it and adding another"
                                ),
                            )]));
                        }
                        self.edit(c, move |d| {
                            let entry = entries(d, "upstreams")?.get_mut(&up).ok_or_else(|| missing(&up))?;
                            let targets = list(entry, "targets")?;
                            let i = find(targets, &address).ok_or_else(|| ApiError::not_found("no such target"))?;
                            match put {
                                Some(t) => {
                                    targets[i] = json!(TargetChange { address: Some(address.clone()), ..t });
                                    Ok(json!({ "upstream": up, "replaced": address }))
                                }
                                None => {
                                    targets.remove(i);
                                    Ok(json!({ "upstream": up, "removed": address }))
                                }
                            }
                        })
                        .await
                    }
                    _ => Err(unrouted(c)),
                }
            }
            _ => Err(unrouted(c)),
        }
    }

    async fn routes(&self, c: &Call, site: &str, rest: &[&str]) -> Answer {
        let site = site.to_string();
        let missing = move |s: &str| ApiError::not_found(format!("no site `{s}`"));
        match (&c.method, rest) {
            (&Method::GET, []) => {
                let d = self.current_draft().await?;
                let s = d.document.get("sites").and_then(|s| s.get(&site)).ok_or_else(|| missing(&site))?;
                Ok(Reply { etag: Some(d.version), ..Reply::ok(s.get("routes").cloned().unwrap_or(json!([]))) })
            }
            (&Method::POST, []) => {
                let route = object_body(c)?;
                self.edit(c, move |d| {
                    let entry = entries(d, "sites")?.get_mut(&site).ok_or_else(|| missing(&site))?;
                    let routes = list(entry, "routes")?;
                    routes.push(route);
                    Ok(json!({ "site": site, "added_route": routes.len() - 1 }))
                })
                .await
                .map(|r| Reply { status: 201, ..r })
            }
            (m, [index]) => {
                let i: usize = index.parse().map_err(|_| ApiError::bad("routes are addressed by index from 0"))?;
                match *m {
                    Method::GET => {
                        let d = self.current_draft().await?;
                        let s = d.document.get("sites").and_then(|s| s.get(&site)).ok_or_else(|| missing(&site))?;
                        let r = s.get("routes").and_then(|r| r.get(i)).cloned();
                        let r = r.ok_or_else(|| ApiError::not_found(format!("site `{site}` has no route {i}")))?;
                        Ok(Reply { etag: Some(d.version), ..Reply::ok(r) })
                    }
                    Method::PUT | Method::DELETE => {
                        let put = if *m == Method::PUT { Some(object_body(c)?) } else { None };
                        self.edit(c, move |d| {
                            let entry = entries(d, "sites")?.get_mut(&site).ok_or_else(|| missing(&site))?;
                            let routes = list(entry, "routes")?;
                            if i >= routes.len() {
                                return Err(ApiError::not_found(format!("site `{site}` has no route {i}")));
                            }
                            match put {
                                Some(r) => routes[i] = r,
                                None => {
                                    routes.remove(i);
                                }
                            }
                            Ok(json!({ "site": site, "route": i }))
                        })
                        .await
                    }
                    _ => Err(unrouted(c)),
                }
            }
            _ => Err(unrouted(c)),
        }
    }
}
