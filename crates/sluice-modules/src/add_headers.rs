//! `add-headers`: adds header fields to every response towards clients (hits included).
//!
//! ```toml
//! [[module]]
//! name = "add-headers"
//! settings = { headers = { "X-Frame-Options" = "DENY", "X-Served-By" = "edge-1" } }
//! ```
//! Without settings it adds four headers `X-Sluice-1` .. `X-Sluice-4` (the benchmark's
//! "adding four headers on every transaction").

use http::{HeaderName, HeaderValue};
use sluice_module::{Flow, Module, Txn, TxnInfo};
use std::sync::Arc;

struct AddHeaders {
    headers: Arc<[(HeaderName, HeaderValue)]>,
}

struct AddHeadersTxn {
    headers: Arc<[(HeaderName, HeaderValue)]>,
}

impl Txn for AddHeadersTxn {
    fn client_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        for (name, value) in self.headers.iter() {
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
        Some(Box::new(AddHeadersTxn { headers: Arc::clone(&self.headers) }))
    }
}

pub fn build(settings: &toml::Table) -> Result<Arc<dyn Module>, String> {
    crate::only_keys(settings, &["headers"])?;
    let headers: Vec<(HeaderName, HeaderValue)> = match settings.get("headers") {
        None => (1..=4)
            .map(|i| {
                (
                    HeaderName::from_bytes(format!("x-sluice-{i}").as_bytes()).expect("valid"),
                    HeaderValue::from_static("1"),
                )
            })
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
    Ok(Arc::new(AddHeaders { headers: headers.into() }))
}
