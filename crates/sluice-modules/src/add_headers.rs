//! `add-headers`: adds header fields to every response towards clients (hits included).
//!
//! ```toml
//! [[module]]
//! name = "add-headers"
//! settings = { headers = { "X-Frame-Options" = "DENY", "X-Served-By" = "edge-1" } }
//! ```
//! Without settings it adds four headers `X-Sluice-1` .. `X-Sluice-4` (the benchmark's
//! "adding four headers on every transaction").
//!
//! The configured fields are built once, at configuration time, over static memory
//! ([`interned`]): each transaction then copies them into the response without allocating or
//! touching a reference count.

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use sluice_module::{Flow, Module, Txn, TxnInfo};
use std::sync::{Arc, Mutex};

/// Header fields to add, in order.
type Fields = &'static [(HeaderName, HeaderValue)];

struct AddHeaders {
    headers: Fields,
}

struct AddHeadersTxn {
    headers: Fields,
}

impl Txn for AddHeadersTxn {
    fn client_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        for (name, value) in self.headers {
            // Both clones copy a pointer to static memory.
            resp.headers.append(name.clone(), value.clone());
        }
        Flow::Done
    }
}

impl Module for AddHeaders {
    fn name(&self) -> &str {
        "add-headers"
    }

    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(AddHeadersTxn { headers: self.headers }))
    }
}

pub fn build(settings: &toml::Table) -> Result<Arc<dyn Module>, String> {
    crate::only_keys(settings, &["headers"])?;
    let headers: Vec<(HeaderName, HeaderValue)> = match settings.get("headers") {
        None => ["x-sluice-1", "x-sluice-2", "x-sluice-3", "x-sluice-4"]
            .into_iter()
            .map(|name| (HeaderName::from_static(name), HeaderValue::from_static("1")))
            .collect(),
        Some(toml::Value::Table(table)) => table
            .iter()
            .map(|(name, value)| {
                let name =
                    HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("invalid header name `{name}`"))?;
                let text = value.as_str().ok_or_else(|| format!("header `{name}` needs a string value"))?;
                let value = HeaderValue::from_str(text).map_err(|_| format!("invalid value for header `{name}`"))?;
                Ok((name, value))
            })
            .collect::<Result<_, String>>()?,
        Some(_) => return Err("`headers` must be a table of name = \"value\"".into()),
    };
    Ok(Arc::new(AddHeaders { headers: interned(headers) }))
}

/// `fields` in static memory, names and values included, so that cloning them is free. Each
/// distinct list is leaked once per process and shared by every module built with it (a
/// configuration reload that keeps the list costs nothing more).
fn interned(fields: Vec<(HeaderName, HeaderValue)>) -> Fields {
    static LISTS: Mutex<Vec<Fields>> = Mutex::new(Vec::new());
    let mut lists = LISTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(list) = lists.iter().find(|list| ***list == fields[..]) {
        return list;
    }
    let list: Fields =
        Vec::leak(fields.into_iter().map(|(name, value)| (static_name(name), static_value(value))).collect());
    lists.push(list);
    list
}

/// The same name, over static memory (standard names already are).
fn static_name(name: HeaderName) -> HeaderName {
    let text: &'static str = String::leak(name.as_str().to_owned());
    HeaderName::from_static(text)
}

/// The same value, over static memory.
fn static_value(value: HeaderValue) -> HeaderValue {
    let bytes: &'static [u8] = Vec::leak(value.as_bytes().to_vec());
    HeaderValue::from_maybe_shared(Bytes::from_static(bytes)).expect("the bytes of a valid value")
}
