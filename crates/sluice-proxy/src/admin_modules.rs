//! Admin endpoints that manage the module list: `GET /modules`, and `GET`, `PUT`, `DELETE`
//! on `/modules/<name>` (a name with no further path; `/modules/<name>/<path>` is the
//! module's own admin endpoint). Behind the admin token, like every management endpoint.
//!
//! `PUT /modules/<name>` loads or reloads an entry. Its body is one of:
//!
//! - a `[[module]]` entry without the name, as JSON (`application/json`, or any body
//!   starting with `{`) or TOML (`application/toml`, or any other body):
//!   `kind`, `on_error`, `settings` as in the configuration file, and optionally `position`
//!   (0 runs first; default: last for a new entry, unchanged for an existing one). A missing
//!   `kind` is the existing entry's kind, or `builtin`;
//! - a `.wasm` path (`text/plain`): a Wasm plugin with that file, keeping the other settings
//!   of an existing Wasm entry of that name;
//! - nothing: reload the existing entry as it is (a plugin file changed on disk is read
//!   again).
//!
//! Answers: `201` (a new entry) or `200` (reloaded) with the entry as JSON, `400` when the
//! body or the entry is bad (the message says why; nothing changed), `404` for an unknown
//! name, `405` for other methods, `413` past 1 MiB, `415` for other content types, `501` when
//! the proxy runs without a module manager.

use crate::admin::{not_allowed, reply, text, AdminResponse};
use crate::config::{ModuleConfig, ModuleKind, OnError};
use crate::module_manager::{ModuleError, ModuleManager};
use crate::state::State;
use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Deserialize;
use std::sync::Arc;

/// Largest `PUT` body.
const MAX_BODY: usize = 1 << 20;

/// True for the paths served here: `/modules`, `/modules/` and `/modules/<name>`.
pub fn owns(path: &str) -> bool {
    match path.strip_prefix("/modules") {
        Some("" | "/") => true,
        Some(rest) => rest.strip_prefix('/').is_some_and(|name| !name.contains('/')),
        None => false,
    }
}

/// Serves one request on a path [`owns`] accepts.
pub async fn handle(state: &Arc<State>, req: Request<Incoming>) -> AdminResponse {
    let name = req.uri().path().trim_start_matches("/modules").trim_start_matches('/').to_owned();
    let manager = state.module_manager.clone();
    match (req.method(), name.is_empty(), manager) {
        (&Method::GET, true, Some(manager)) => json(StatusCode::OK, &manager.statuses()),
        (&Method::GET, true, None) => json(StatusCode::OK, &fixed_list(state)),
        (_, true, _) => not_allowed("GET"),
        (&Method::GET, false, Some(manager)) => match manager.statuses().into_iter().find(|s| s.name == name) {
            Some(status) => json(StatusCode::OK, &status),
            None => text(StatusCode::NOT_FOUND, format!("no module {name}\n")),
        },
        (&Method::PUT, false, Some(manager)) => put(manager, name, req).await,
        (&Method::DELETE, false, Some(manager)) => {
            let deleted = {
                let name = name.clone();
                tokio::task::spawn_blocking(move || manager.delete(&name)).await
            };
            match deleted {
                Ok(Ok(())) => json(StatusCode::OK, &serde_json::json!({ "name": name, "state": "unloaded" })),
                Ok(Err(e)) => error(e),
                Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "unloading panicked\n"),
            }
        }
        (&Method::GET | &Method::PUT | &Method::DELETE, false, None) => {
            text(StatusCode::NOT_IMPLEMENTED, "this proxy runs with a fixed module list (no module manager)\n")
        }
        (_, false, _) => not_allowed("GET, PUT, DELETE"),
    }
}

async fn put(manager: Arc<ModuleManager>, name: String, req: Request<Incoming>) -> AdminResponse {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    let body = match http_body_util::Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "admin request bodies are limited to 1 MiB\n"),
    };
    let existing = manager.entry(&name);
    let (config, position) = match entry_from_body(&name, content_type.as_deref(), &body, existing) {
        Ok(parsed) => parsed,
        Err((status, message)) => return text(status, format!("{message}\n")),
    };
    match tokio::task::spawn_blocking(move || manager.put(config, position).map(|new| (new, manager))).await {
        Ok(Ok((new, manager))) => {
            let status = if new { StatusCode::CREATED } else { StatusCode::OK };
            match manager.statuses().into_iter().find(|s| s.name == name) {
                Some(entry) => json(status, &entry),
                // Replaced by a concurrent change in the meantime.
                None => json(status, &serde_json::json!({ "name": name })),
            }
        }
        Ok(Err(e)) => error(e),
        Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "loading panicked\n"),
    }
}

/// A `PUT` body: the entry without its name (the URL has it).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PutBody {
    /// Optional; must match the URL when given.
    name: Option<String>,
    kind: Option<ModuleKind>,
    on_error: Option<OnError>,
    #[serde(default)]
    settings: toml::Table,
    position: Option<usize>,
}

type BodyError = (StatusCode, String);

/// The entry a `PUT` asks for, and its position.
fn entry_from_body(
    name: &str,
    content_type: Option<&str>,
    body: &Bytes,
    existing: Option<ModuleConfig>,
) -> Result<(ModuleConfig, Option<usize>), BodyError> {
    let bad = |message: String| (StatusCode::BAD_REQUEST, message);
    let text = std::str::from_utf8(body).map_err(|_| bad("the body is not UTF-8".into()))?;
    if text.trim().is_empty() {
        return existing
            .map(|entry| (entry, None))
            .ok_or_else(|| bad(format!("no module {name} to reload; send its entry (kind, settings) to load it")));
    }
    let format = match content_type {
        Some("application/json") => Format::Json,
        Some("application/toml" | "text/toml" | "text/x-toml") => Format::Toml,
        Some("text/plain") => Format::Path,
        None | Some("application/x-www-form-urlencoded" | "application/octet-stream") => {
            if text.trim_start().starts_with('{') {
                Format::Json
            } else {
                Format::Toml
            }
        }
        Some(other) => {
            return Err((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("unsupported content type {other}: send application/json, application/toml or text/plain"),
            ))
        }
    };
    let parsed: PutBody = match format {
        Format::Json => serde_json::from_str(text).map_err(|e| bad(format!("bad JSON module entry: {e}")))?,
        Format::Toml => toml::from_str(text).map_err(|e| bad(format!("bad TOML module entry: {e}")))?,
        Format::Path => return Ok((wasm_path_entry(name, text.trim(), existing), None)),
    };
    if parsed.name.as_deref().is_some_and(|n| n != name) {
        return Err(bad(format!("the body names module {:?}, the URL {name:?}", parsed.name.unwrap_or_default())));
    }
    let kind = parsed.kind.or(existing.as_ref().map(|e| e.kind)).unwrap_or_default();
    let on_error = parsed.on_error.unwrap_or_default();
    Ok((ModuleConfig { name: name.to_owned(), kind, on_error, settings: parsed.settings }, parsed.position))
}

enum Format {
    Json,
    Toml,
    Path,
}

/// A Wasm entry for the plugin at `path`, with the other settings of `existing` when it is
/// a Wasm entry too.
fn wasm_path_entry(name: &str, path: &str, existing: Option<ModuleConfig>) -> ModuleConfig {
    let mut entry = match existing {
        Some(entry) if entry.kind == ModuleKind::Wasm => entry,
        _ => ModuleConfig {
            name: name.to_owned(),
            kind: ModuleKind::Wasm,
            on_error: OnError::default(),
            settings: toml::Table::new(),
        },
    };
    entry.settings.insert("path".into(), toml::Value::String(path.to_owned()));
    entry
}

/// The list when there is no manager: the chain's modules, kind unknown.
fn fixed_list(state: &State) -> Vec<serde_json::Value> {
    state
        .modules
        .snapshot()
        .iter()
        .enumerate()
        .map(|(order, m)| serde_json::json!({ "name": m.module.name(), "order": order, "state": "loaded" }))
        .collect()
}

fn error(e: ModuleError) -> AdminResponse {
    let status = match e {
        ModuleError::NotFound(_) => StatusCode::NOT_FOUND,
        ModuleError::Invalid(_) => StatusCode::BAD_REQUEST,
    };
    text(status, format!("{e}\n"))
}

fn json<T: serde::Serialize + ?Sized>(status: StatusCode, value: &T) -> AdminResponse {
    match serde_json::to_string(value) {
        Ok(body) => reply(status, "application/json", body),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render JSON: {e}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wasm_entry() -> ModuleConfig {
        ModuleConfig {
            name: "w".into(),
            kind: ModuleKind::Wasm,
            on_error: OnError::Closed,
            settings: toml::from_str("path = \"old.wasm\"\nplugin_config = \"x\"").unwrap(),
        }
    }

    #[test]
    fn paths_with_a_single_name_are_served_here() {
        assert!(owns("/modules") && owns("/modules/") && owns("/modules/headers"));
        assert!(!owns("/modules/headers/stats") && !owns("/modulesx") && !owns("/stats"));
    }

    #[test]
    fn bodies_parse_as_json_toml_or_a_path() {
        let json = Bytes::from_static(br#"{"kind": "wasm", "settings": {"path": "a.wasm"}, "position": 0}"#);
        let (entry, position) = entry_from_body("w", Some("application/json"), &json, None).unwrap();
        assert_eq!(
            (entry.kind, entry.settings["path"].as_str(), position),
            (ModuleKind::Wasm, Some("a.wasm"), Some(0))
        );

        let toml = Bytes::from_static(b"on_error = \"closed\"\n[settings]\npath = \"b.wasm\"\n");
        let (entry, _) = entry_from_body("w", None, &toml, Some(wasm_entry())).unwrap();
        assert_eq!(entry.kind, ModuleKind::Wasm, "the kind of the existing entry");
        assert_eq!(entry.on_error, OnError::Closed);

        let (entry, _) =
            entry_from_body("w", Some("text/plain"), &Bytes::from_static(b"new.wasm\n"), Some(wasm_entry())).unwrap();
        assert_eq!(entry.settings["path"].as_str(), Some("new.wasm"));
        assert_eq!(entry.settings["plugin_config"].as_str(), Some("x"), "other settings kept");

        let (entry, _) = entry_from_body("w", None, &Bytes::new(), Some(wasm_entry())).unwrap();
        assert_eq!(entry, wasm_entry());
    }

    #[test]
    fn bad_bodies_are_client_errors() {
        let status = |ct: Option<&str>, body: &'static [u8], existing: Option<ModuleConfig>| {
            entry_from_body("w", ct, &Bytes::from_static(body), existing).unwrap_err().0
        };
        assert_eq!(status(None, b"", None), StatusCode::BAD_REQUEST);
        assert_eq!(status(None, b"{\"kind\": \"wsm\"}", None), StatusCode::BAD_REQUEST);
        assert_eq!(status(None, b"{\"sttings\": {}}", None), StatusCode::BAD_REQUEST);
        assert_eq!(status(None, b"{\"name\": \"other\"}", None), StatusCode::BAD_REQUEST);
        assert_eq!(status(None, b"not = [toml", None), StatusCode::BAD_REQUEST);
        assert_eq!(status(Some("image/png"), b"x", None), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
}
