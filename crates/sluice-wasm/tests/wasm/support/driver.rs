//! Plays the proxy's part: calls a module's phases in the contract's order and honours the
//! verdicts the way the host does (`Done` stops calls, `Buffer` delivers the whole body in
//! one call, `Respond` in a request phase answers locally).

use bytes::Bytes;
use http::{request, response, StatusCode};
use sluice_module::{
    BodyChunk, CacheApi, CpuPool, Flow, LocalResponse, LogFields, LookupOutcome, LookupOverride, Module, Txn, TxnInfo,
    TxnOutcome,
};
use std::net::SocketAddr;
use std::sync::Arc;

/// A request head.
pub fn request(method: &str, uri: &str, headers: &[(&str, &str)]) -> request::Parts {
    let mut builder = http::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).unwrap().into_parts().0
}

/// A response head.
pub fn response(status: u16, headers: &[(&str, &str)]) -> response::Parts {
    let mut builder = http::Response::builder().status(status);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).unwrap().into_parts().0
}

/// Transaction info for client `192.0.2.7:4242`.
pub fn info(id: u64, cache: Arc<dyn CacheApi>) -> TxnInfo {
    TxnInfo { id, client: SocketAddr::from(([192, 0, 2, 7], 4242)), cache, cpu: CpuPool::default(), background: false }
}

/// One transaction to play: a miss (origin phases, then client phases).
pub struct Exchange {
    pub req: request::Parts,
    pub req_body: Vec<Bytes>,
    pub resp: response::Parts,
    pub resp_body: Vec<Bytes>,
}

impl Exchange {
    /// `GET uri` with `headers`, answered `200` with `body` in the given chunks.
    pub fn get(uri: &str, headers: &[(&str, &str)], body: &[&str]) -> Self {
        Self {
            req: request("GET", uri, headers),
            req_body: Vec::new(),
            resp: response(200, &[]),
            resp_body: body.iter().map(|chunk| Bytes::copy_from_slice(chunk.as_bytes())).collect(),
        }
    }
}

/// What happened.
#[derive(Default)]
pub struct Run {
    /// `new_txn` gave state.
    pub started: bool,
    /// `phase:Verdict` in call order.
    pub flows: Vec<String>,
    pub req: Option<request::Parts>,
    pub resp: Option<response::Parts>,
    pub req_body: Vec<u8>,
    pub resp_body: Vec<u8>,
    /// The response body chunk by chunk as the client got it.
    pub resp_chunks: Vec<Bytes>,
    pub responded: Option<LocalResponse>,
    /// The fields the module added to the access log line.
    pub log_fields: Vec<(String, String)>,
}

impl Run {
    pub fn header(&self, name: &str) -> Option<String> {
        self.resp.as_ref()?.headers.get(name).map(|v| v.to_str().unwrap().to_string())
    }

    pub fn req_header(&self, name: &str) -> Option<String> {
        self.req.as_ref()?.headers.get(name).map(|v| v.to_str().unwrap().to_string())
    }
}

struct Player<'a> {
    txn: Box<dyn Txn>,
    info: &'a TxnInfo,
    run: Run,
    active: bool,
}

enum Verdict {
    Go,
    Buffer,
    Respond,
}

impl Player<'_> {
    fn verdict(&mut self, phase: &str, flow: Flow, request_phase: bool) -> Verdict {
        self.run.flows.push(format!("{phase}:{flow:?}"));
        match flow {
            Flow::Continue => Verdict::Go,
            Flow::Done => {
                self.active = false;
                Verdict::Go
            }
            Flow::Buffer { .. } => Verdict::Buffer,
            Flow::Respond(response) if request_phase => {
                self.run.responded = Some(response);
                Verdict::Respond
            }
            Flow::Respond(_) => Verdict::Go,
            Flow::Defer { .. } => panic!("wasm modules never defer"),
        }
    }

    /// Runs a body phase over `chunks` (all at once when `whole`); returns the output chunks.
    fn body(
        &mut self,
        phase: &str,
        chunks: Vec<Bytes>,
        whole: bool,
        request_phase: bool,
        call: fn(&mut dyn Txn, &TxnInfo, &mut BodyChunk) -> Flow,
    ) -> (Vec<Bytes>, bool) {
        let chunks = if whole { vec![Bytes::from(chunks.concat())] } else { chunks };
        let count = chunks.len();
        let mut out = Vec::new();
        for (n, data) in chunks.into_iter().enumerate() {
            if !self.active {
                out.push(data);
                continue;
            }
            let mut chunk = BodyChunk::new(data, n + 1 == count);
            // A plugin failing in a response body callback unwinds (`PluginFailure`) for the
            // host's chain to apply the policy; played as the chain does when it is open.
            let txn = self.txn.as_mut();
            let flow = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(txn, self.info, &mut chunk)))
            {
                Ok(flow) => flow,
                Err(payload) if payload.is::<sluice_wasm::PluginFailure>() => {
                    self.run.flows.push(format!("{phase}:Failed"));
                    self.active = false;
                    out.push(chunk.into_data());
                    continue;
                }
                Err(payload) => std::panic::resume_unwind(payload),
            };
            let verdict = self.verdict(phase, flow, request_phase);
            out.push(chunk.into_data());
            if matches!(verdict, Verdict::Respond) {
                return (out, true);
            }
        }
        (out, false)
    }

    fn finish(mut self) -> Run {
        if self.active {
            let status = self.run.responded.as_ref().map(|r| r.status).unwrap_or(StatusCode::OK);
            let outcome = TxnOutcome { status, body_bytes: 0, result: "TCP_MISS", completed: true };
            self.txn.resp_done(self.info, &outcome);
            let mut fields = LogFields::default();
            self.txn.log(self.info, &outcome, &mut fields);
            self.run.log_fields = fields.fields;
        }
        self.run
    }
}

/// Plays `exchange` through `module`: request phases, cache lookup (miss), origin response
/// phases, client response phases, done, log, drop.
pub fn play(module: &dyn Module, info: &TxnInfo, exchange: Exchange) -> Run {
    let Exchange { mut req, req_body, mut resp, resp_body } = exchange;
    let Some(txn) = module.new_txn(info) else {
        return Run { req: Some(req), resp: Some(resp), resp_body: resp_body.concat(), ..Run::default() };
    };
    let mut player = Player { txn, info, run: Run { started: true, ..Run::default() }, active: true };
    let flow = player.txn.req_headers(info, &mut req);
    let verdict = player.verdict("req_headers", flow, true);
    player.run.req = Some(req);
    if matches!(verdict, Verdict::Respond) {
        return player.finish();
    }
    if !req_body.is_empty() {
        let whole = matches!(verdict, Verdict::Buffer);
        let (out, responded) = player.body("req_body", req_body, whole, true, |t, i, c| t.req_body(i, c));
        player.run.req_body = out.concat();
        if responded {
            return player.finish();
        }
    }
    if player.active {
        let flow = player.txn.cache_lookup(info, LookupOutcome::Miss, &mut LookupOverride::Keep);
        player.verdict("cache_lookup", flow, true);
    }
    if player.active {
        let mut req = player.run.req.take().unwrap();
        let flow = player.txn.req_out(info, &mut req);
        player.run.req = Some(req);
        player.verdict("req_out", flow, true);
    }
    let mut whole = false;
    if player.active {
        let flow = player.txn.origin_resp_headers(info, &mut resp);
        whole = matches!(player.verdict("origin_resp_headers", flow, false), Verdict::Buffer);
    }
    let (stored, _) = player.body("origin_resp_body", resp_body, whole, false, |t, i, c| t.origin_resp_body(i, c));
    let mut whole = false;
    if player.active {
        let flow = player.txn.client_resp_headers(info, &mut resp);
        whole = matches!(player.verdict("client_resp_headers", flow, false), Verdict::Buffer);
    }
    let (sent, _) = player.body("client_resp_body", stored, whole, false, |t, i, c| t.client_resp_body(i, c));
    player.run.resp = Some(resp);
    player.run.resp_body = sent.concat();
    player.run.resp_chunks = sent;
    player.finish()
}
