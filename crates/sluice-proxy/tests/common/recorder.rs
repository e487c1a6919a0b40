//! A module that records every call it gets, for tests of phase order: each transaction's
//! calls go to a shared [`Journal`], tagged with the transaction id.

use sluice_module::{BodyChunk, FailurePolicy, Flow, LogFields, LookupOutcome, LookupOverride, Module, Txn, TxnInfo};
use sluice_module::{Resolution, TxnOutcome};
use sluice_proxy::LoadedModule;
use std::sync::{Arc, Mutex};

/// A recorder's calls on a miss that goes through every phase, in order.
pub const MISS: [&str; 12] = [
    "new_txn",
    "req_headers",
    "cache_lookup:Miss",
    "resolve",
    "req_out",
    "origin_resp_headers:200",
    "client_resp_headers:200",
    "origin_resp_body:end",
    "client_resp_body:end",
    "resp_done:TCP_MISS",
    "log",
    "drop",
];

/// The calls of [`MISS`] up to and including `last`, then `then`: a miss that a verdict or an
/// abort cut short.
pub fn miss_through(last: &str, then: &[&str]) -> Vec<String> {
    let end = MISS.iter().position(|call| *call == last).unwrap_or_else(|| panic!("{last} is not a call of MISS"));
    seq(&MISS[..=end]).into_iter().chain(seq(then)).collect()
}

/// `items` as owned strings, to compare with a journal.
pub fn seq(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Takes the journal once the transaction has ended (its state dropped).
pub async fn take(h: &super::Harness, journal: &Journal) -> Vec<String> {
    h.eventually("the transaction state to drop", |_| journal.entries().last().is_some_and(|l| l == "drop")).await;
    journal.take()
}

/// The calls recorded, in order, with the id of the transaction each belongs to.
#[derive(Clone, Default)]
pub struct Journal(Arc<Mutex<Vec<(u64, String)>>>);

impl Journal {
    pub fn note(&self, id: u64, what: impl Into<String>) {
        self.0.lock().unwrap().push((id, what.into()));
    }

    /// Every call recorded so far, in order.
    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|(_, what)| what.clone()).collect()
    }

    /// How many states were dropped so far.
    pub fn drops(&self) -> usize {
        self.0.lock().unwrap().iter().filter(|(_, what)| what == "drop").count()
    }

    /// Takes every call recorded so far, in order.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap()).into_iter().map(|(_, what)| what).collect()
    }

    /// Takes every call recorded so far, one list per transaction, in the order the
    /// transactions started.
    pub fn take_by_txn(&self) -> Vec<Vec<String>> {
        let mut by_txn: Vec<(u64, Vec<String>)> = Vec::new();
        for (id, what) in std::mem::take(&mut *self.0.lock().unwrap()) {
            match by_txn.iter_mut().find(|(i, _)| *i == id) {
                Some((_, calls)) => calls.push(what),
                None => by_txn.push((id, vec![what])),
            }
        }
        by_txn.into_iter().map(|(_, calls)| calls).collect()
    }
}

/// `(phase, verdict)`: answer `verdict()` instead of `Continue` in the phase named `phase` (a
/// header phase, or a body phase on its last piece).
pub type Script = (&'static str, fn() -> Flow);

/// Records every call of every transaction in its journal (`new_txn:background` for a
/// background revalidation, `resp_done` with `:aborted` when the outcome is not complete).
/// Its `log` adds `recorder=1`.
pub struct Recorder {
    pub journal: Journal,
    pub script: Option<Script>,
}

impl Recorder {
    /// A recorder writing to `journal`, loaded with `on_error`.
    pub fn loaded(journal: &Journal, on_error: FailurePolicy) -> LoadedModule {
        LoadedModule { module: Arc::new(Recorder { journal: journal.clone(), script: None }), on_error }
    }

    /// A recorder that answers `verdict()` in `phase`.
    pub fn scripted(journal: &Journal, phase: &'static str, verdict: fn() -> Flow) -> LoadedModule {
        let module = Recorder { journal: journal.clone(), script: Some((phase, verdict)) };
        LoadedModule { module: Arc::new(module), on_error: FailurePolicy::Open }
    }
}

struct RecorderTxn {
    id: u64,
    journal: Journal,
    script: Option<Script>,
}

impl RecorderTxn {
    fn note(&self, what: impl Into<String>) {
        self.journal.note(self.id, what);
    }

    /// The verdict for `phase`: the scripted one, or `Continue`.
    fn verdict(&self, phase: &str) -> Flow {
        match self.script {
            Some((scripted, verdict)) if scripted == phase => verdict(),
            _ => Flow::Continue,
        }
    }
}

impl Txn for RecorderTxn {
    fn req_headers(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        self.note("req_headers");
        self.verdict("req_headers")
    }
    fn req_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        if chunk.is_end() {
            self.note("req_body:end");
            return self.verdict("req_body");
        }
        Flow::Continue
    }
    fn cache_lookup(&mut self, _: &TxnInfo, outcome: LookupOutcome, _: &mut LookupOverride) -> Flow {
        self.note(format!("cache_lookup:{outcome:?}"));
        self.verdict("cache_lookup")
    }
    fn resolve(&mut self, _: &TxnInfo, _: &Resolution) -> Flow {
        self.note("resolve");
        self.verdict("resolve")
    }
    fn req_out(&mut self, _: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        self.note("req_out");
        self.verdict("req_out")
    }
    fn origin_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        self.note(format!("origin_resp_headers:{}", resp.status.as_u16()));
        self.verdict("origin_resp_headers")
    }
    fn origin_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        if chunk.is_end() {
            self.note("origin_resp_body:end");
            return self.verdict("origin_resp_body");
        }
        Flow::Continue
    }
    fn client_resp_headers(&mut self, _: &TxnInfo, resp: &mut http::response::Parts) -> Flow {
        self.note(format!("client_resp_headers:{}", resp.status.as_u16()));
        self.verdict("client_resp_headers")
    }
    fn client_resp_body(&mut self, _: &TxnInfo, chunk: &mut BodyChunk) -> Flow {
        if chunk.is_end() {
            self.note("client_resp_body:end");
            return self.verdict("client_resp_body");
        }
        Flow::Continue
    }
    fn resp_done(&mut self, _: &TxnInfo, outcome: &TxnOutcome) {
        let aborted = if outcome.completed { "" } else { ":aborted" };
        self.note(format!("resp_done:{}{aborted}", outcome.result));
    }
    fn log(&mut self, _: &TxnInfo, _: &TxnOutcome, fields: &mut LogFields) {
        fields.add("recorder", "1");
        self.note("log");
    }
}

impl Drop for RecorderTxn {
    fn drop(&mut self) {
        self.note("drop");
    }
}

impl Module for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn new_txn(&self, info: &TxnInfo) -> Option<Box<dyn Txn>> {
        self.journal.note(info.id, if info.background { "new_txn:background" } else { "new_txn" });
        Some(Box::new(RecorderTxn { id: info.id, journal: self.journal.clone(), script: self.script }))
    }
}
