//! `noop`: every phase implemented, none doing anything. Measures what the module machinery
//! itself costs per transaction (seed 000, table 5: "empty callbacks").

use sluice_module::{BodyChunk, Flow, LookupOutcome, LookupOverride, Module, Txn, TxnInfo};
use std::sync::Arc;

struct Noop;

struct NoopTxn;

impl Txn for NoopTxn {
    fn req_headers(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        Flow::Continue
    }
    fn req_body(&mut self, _: &TxnInfo, _: &mut BodyChunk) -> Flow {
        Flow::Continue
    }
    fn cache_lookup(&mut self, _: &TxnInfo, _: LookupOutcome, _: &mut LookupOverride) -> Flow {
        Flow::Continue
    }
    fn req_out(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        Flow::Continue
    }
    fn origin_resp_headers(&mut self, _: &TxnInfo, _: &mut http::response::Parts) -> Flow {
        Flow::Continue
    }
    fn origin_resp_body(&mut self, _: &TxnInfo, _: &mut BodyChunk) -> Flow {
        Flow::Continue
    }
    fn client_resp_headers(&mut self, _: &TxnInfo, _: &mut http::response::Parts) -> Flow {
        Flow::Continue
    }
    fn client_resp_body(&mut self, _: &TxnInfo, _: &mut BodyChunk) -> Flow {
        Flow::Continue
    }
}

impl Module for Noop {
    fn name(&self) -> &str {
        "noop"
    }

    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(NoopTxn))
    }
}

pub fn build(settings: &toml::Table) -> Result<Arc<dyn Module>, String> {
    crate::only_keys(settings, &[])?;
    Ok(Arc::new(Noop))
}
