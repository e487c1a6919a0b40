//! `body-copy`: copies every chunk of every response body towards clients into a new buffer
//! (the benchmark's "copying every response body": what a body-editing module costs).

use bytes::Bytes;
use sluice_module::{BodyChunk, BodyEdits, Flow, Module, Txn, TxnInfo};
use std::sync::Arc;

struct BodyCopy;

struct BodyCopyTxn;

impl Txn for BodyCopyTxn {
    fn edits_body(&self) -> BodyEdits {
        BodyEdits { client_response: true, ..BodyEdits::default() }
    }

    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        let copy = Bytes::copy_from_slice(chunk.data());
        chunk.replace(copy);
        Flow::Continue
    }
}

impl Module for BodyCopy {
    fn name(&self) -> &str {
        "body-copy"
    }

    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(BodyCopyTxn))
    }
}

pub fn build(settings: &toml::Table) -> Result<Arc<dyn Module>, String> {
    crate::only_keys(settings, &[])?;
    Ok(Arc::new(BodyCopy))
}
