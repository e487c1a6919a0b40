//! The modules' `resolve` phase: before a request goes to an origin, the modules see the
//! origin's host and port and may pin the addresses to connect to, answer locally, or defer
//! for an asynchronous lookup of their own (docs/modules.md, "Resolving origins").

use crate::error::ProxyError;
use crate::source::Dest;
use crate::txn::{module_phase, Txn};
use sluice_module::{LocalResponse, Resolution, Subject};
use std::sync::Arc;

/// What the `resolve` phase decided.
pub enum Resolved<'a> {
    /// Connect there.
    Connect(Connect<'a>),
    /// A module answered the request itself.
    Respond(Box<LocalResponse>),
}

/// Where to connect.
pub enum Connect<'a> {
    /// The destination as given (the system resolver decides).
    Given(&'a Dest),
    /// The origin at the addresses a module pinned (boxed: the caller keeps it across the
    /// origin exchange, and an inline `Dest` would enlarge every caller's future).
    Pinned(Box<Dest>),
}

impl std::ops::Deref for Connect<'_> {
    type Target = Dest;

    fn deref(&self) -> &Dest {
        match self {
            Connect::Given(dest) => dest,
            Connect::Pinned(dest) => dest,
        }
    }
}

/// Runs the `resolve` phase for a request about to go to `dest`. Only origins resolve: a
/// file source, or a transaction no module takes part in, connects as given at no cost (the
/// phase itself is boxed, so it adds a pointer, not its state, to the caller's future).
/// For an origin pool the phase sees the origin chosen first; addresses a module pins there
/// are where the request goes, with no failover to the pool's other origins.
pub async fn resolve<'a>(txn: &mut Txn, dest: &'a Dest) -> Result<Resolved<'a>, ProxyError> {
    match dest.origin() {
        Some(target) if !txn.modules.is_empty() => Box::pin(run(txn, dest, target)).await,
        _ => Ok(Resolved::Connect(Connect::Given(dest))),
    }
}

async fn run<'a>(txn: &mut Txn, dest: &'a Dest, target: &crate::upstream::Target) -> Result<Resolved<'a>, ProxyError> {
    let resolution = Resolution::new(&target.host, target.port);
    if let Some(local) =
        module_phase!(txn, Respond, Subject::Resolution(&resolution), |m, info| m.resolve(info, &resolution))?.respond
    {
        return Ok(Resolved::Respond(local));
    }
    let addrs = resolution.addrs();
    if addrs.is_empty() {
        return Ok(Resolved::Connect(Connect::Given(dest)));
    }
    let mut pinned = target.clone();
    pinned.pinned = Some(Arc::from(addrs));
    Ok(Resolved::Connect(Connect::Pinned(Box::new(Dest::Origin(pinned)))))
}
