//! The modules' `resolve` phase: before a request goes to an origin, the modules see the
//! origin's host and port and may pin the addresses to connect to, answer locally, or defer
//! for an asynchronous lookup of their own (docs/modules.md, "Resolving origins").

use crate::error::ProxyError;
use crate::source::Dest;
use crate::txn::{module_phase, Txn};
use sluice_module::{LocalResponse, Resolution, Subject};
use std::sync::Arc;

/// What the `resolve` phase decided.
pub enum Resolved {
    /// Connect as the destination says (the system resolver decides).
    Unchanged,
    /// Connect to the origin at the addresses a module pinned (boxed: the caller keeps it
    /// across the origin exchange, and an inline `Dest` would enlarge every caller's future).
    Pinned(Box<Dest>),
    /// A module answered the request itself.
    Respond(Box<LocalResponse>),
}

/// Runs the `resolve` phase for a request about to go to `dest`. Only origins resolve: a
/// file source, or a transaction no module takes part in, is [`Resolved::Unchanged`] at no
/// cost (the phase itself is boxed, so it adds a pointer, not its state, to the caller's
/// future).
pub async fn resolve(txn: &mut Txn, dest: &Dest) -> Result<Resolved, ProxyError> {
    match dest {
        Dest::Origin(target) if !txn.modules.is_empty() => Box::pin(run(txn, target)).await,
        _ => Ok(Resolved::Unchanged),
    }
}

async fn run(txn: &mut Txn, target: &crate::upstream::Target) -> Result<Resolved, ProxyError> {
    let resolution = Resolution::new(&target.host, target.port);
    if let Some(local) =
        module_phase!(txn, Respond, Subject::Resolution(&resolution), |m, info| m.resolve(info, &resolution))?.respond
    {
        return Ok(Resolved::Respond(local));
    }
    let addrs = resolution.addrs();
    if addrs.is_empty() {
        return Ok(Resolved::Unchanged);
    }
    let mut pinned = target.clone();
    pinned.pinned = Some(Arc::from(addrs));
    Ok(Resolved::Pinned(Box::new(Dest::Origin(pinned))))
}
