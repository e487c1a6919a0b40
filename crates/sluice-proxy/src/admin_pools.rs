//! Admin endpoints of the origin pools (`[[route]] origins`), behind the admin token:
//!
//! - `GET /pools`: each pool's route and origins, as `/stats` shows them (`[]` without any);
//! - `POST /pools/drain?origin=URL` and `POST /pools/undrain?origin=URL`: take the origin out
//!   of rotation in every pool that has it (requests in flight finish), or put it back;
//!   `&route=LABEL` (`host/prefix`, `*` for any host, as `/pools` shows it) limits it to one
//!   pool. Answers the routes changed as JSON, `404` when no pool has the origin, `400`
//!   without a valid `origin`.

use crate::admin::{not_allowed, reply, text, AdminResponse};
use crate::admin_content::params::Query;
use crate::route::Origin;
use crate::state::State;
use http::{Method, Request, StatusCode};

/// True for the paths served here.
pub fn owns(path: &str) -> bool {
    matches!(path, "/pools" | "/pools/drain" | "/pools/undrain")
}

/// Serves one request on a path [`owns`] accepts.
pub fn handle<B>(state: &State, req: &Request<B>) -> AdminResponse {
    let drain = match (req.method(), req.uri().path()) {
        (&Method::GET, "/pools") => {
            let pools = crate::pool_metrics::json(&state.routes).unwrap_or_else(|| serde_json::json!([]));
            return reply(StatusCode::OK, "application/json", pools.to_string());
        }
        (&Method::POST, "/pools/drain") => true,
        (&Method::POST, "/pools/undrain") => false,
        (_, "/pools") => return not_allowed("GET"),
        _ => return not_allowed("POST"),
    };
    let query = Query::parse(req.uri().query());
    if let Some(unknown) = query.unknown(&["origin", "route"]) {
        return text(StatusCode::BAD_REQUEST, format!("unknown parameter {unknown:?}\n"));
    }
    let origin = match query.get("origin").map(Origin::parse) {
        Some(Ok(origin)) => origin,
        Some(Err(e)) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        None => return text(StatusCode::BAD_REQUEST, "give the origin: ?origin=http://host:port\n"),
    };
    let route = query.get("route");
    let changed: Vec<&str> = state
        .routes
        .pools()
        .filter(|pool| route.is_none_or(|label| pool.label == label))
        .filter(|pool| pool.drain(&origin, drain))
        .map(|pool| pool.label.as_str())
        .collect();
    if changed.is_empty() {
        return text(StatusCode::NOT_FOUND, "no origin pool has that origin\n");
    }
    reply(StatusCode::OK, "application/json", serde_json::json!({ "drained": drain, "routes": changed }).to_string())
}
