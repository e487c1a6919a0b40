//! JSON shapes of the content endpoints.

use serde_json::{json, Map, Value};
use sluice_module::ObjectInfo;
use std::time::SystemTime;

/// One stored variant: `status`, `size`, `age_s`, `lifetime_s`, `ttl_s` (lifetime − age,
/// negative when stale), `fresh`, `hits`, `stored_at` (Unix seconds), `vary` (request
/// field → value or null), `tags`, `headers` (name → list of values).
pub fn variant(info: &ObjectInfo) -> Value {
    let mut headers = Map::new();
    for (name, value) in &info.headers {
        let value = Value::String(String::from_utf8_lossy(value.as_bytes()).into_owned());
        match headers.get_mut(name.as_str()) {
            Some(Value::Array(values)) => values.push(value),
            _ => {
                headers.insert(name.as_str().to_owned(), Value::Array(vec![value]));
            }
        }
    }
    let vary: Map<String, Value> = info
        .vary
        .iter()
        .map(|(name, value)| (name.clone(), value.clone().map_or(Value::Null, Value::String)))
        .collect();
    json!({
        "status": info.status.as_u16(),
        "size": info.size,
        "age_s": info.age.as_secs(),
        "lifetime_s": info.lifetime.as_secs(),
        "ttl_s": info.lifetime.as_secs() as i64 - info.age.as_secs() as i64,
        "fresh": info.is_fresh(),
        "hits": info.hits,
        "stored_at": info.stored_at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "vary": vary,
        "tags": sluice_http::tags::tags(&info.headers),
        "headers": headers,
    })
}

/// [`variant`] plus `state`: where it is held (`memory`, `disk`, or `suspended`: metadata
/// kept without a body, `size` 0, revalidated or fetched by its next request).
pub fn listed(info: &ObjectInfo, state: &str) -> Value {
    let mut value = variant(info);
    value["state"] = Value::String(state.to_owned());
    value
}
