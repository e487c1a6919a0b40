//! The client listeners (`[[listener]]`) across configuration generations: bound at start,
//! and on each reload kept, opened or closed to match the new file, as `nginx -s reload`
//! does with its `listen` directives.
//!
//! A listener is known by a [`ListenerId`] that outlives generations: a listener of the new
//! file with the same configured address as a running one (the first with that address
//! matched to the first, and so on) keeps its id, its socket and its open connections, and
//! takes every other setting from the new file for the connections it accepts from then on.
//! A new address is bound before the new generation is swapped in (a reload that cannot
//! bind changes nothing); a listener no longer in the file stops accepting when the new
//! generation is swapped in, and its open connections are closed gracefully (HTTP/1.1 once
//! the response in progress is sent, HTTP/2 with `GOAWAY`), as at shutdown.
//!
//! The accept loops themselves are `crate::server`'s; this module owns their sockets'
//! book-keeping and their tasks.

use crate::config::ListenerConfig;
use crate::state::State;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

/// A listener's identity across generations (see the module documentation).
pub(crate) type ListenerId = u64;

/// The ids of `next`'s listeners, given the running listeners and their ids: a listener
/// keeps the id of the running one with the same configured address and the same rank among
/// the listeners with that address; the others get ids from `fresh`.
pub(crate) fn carry_ids(
    running: &[ListenerConfig],
    running_ids: &[ListenerId],
    next: &[ListenerConfig],
    mut fresh: impl FnMut() -> ListenerId,
) -> Vec<ListenerId> {
    next.iter()
        .enumerate()
        .map(|(i, lc)| {
            let rank = next[..i].iter().filter(|earlier| earlier.addr == lc.addr).count();
            let same = running.iter().zip(running_ids).filter(|(r, _)| r.addr == lc.addr).nth(rank);
            same.map_or_else(&mut fresh, |(_, &id)| id)
        })
        .collect()
}

/// Binds a listening socket on `addr` (address reuse on, so a restart does not wait for
/// the previous process's connections in `TIME_WAIT`).
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

/// Why a listener could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The OS error is in the message, not a `source()`: reports that print the error chain
    /// (`{:#}`) would otherwise say it twice.
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: SocketAddr, error: std::io::Error },
    #[error("the proxy is shutting down")]
    ShuttingDown,
}

/// A socket bound for a generation that is not serving yet.
pub(crate) struct Bound {
    id: ListenerId,
    listener: TcpListener,
    addr: SocketAddr,
}

/// What [`Listeners::open`] changed: the listeners it opened and closed (bound addresses).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ListenerChanges {
    /// The bound address of each listener of the new generation, in configuration order.
    pub listening: Vec<SocketAddr>,
    pub opened: Vec<SocketAddr>,
    pub closed: Vec<SocketAddr>,
}

/// The running proxy's client listeners and their accept loops.
pub(crate) struct Listeners {
    inner: parking_lot::Mutex<Inner>,
}

struct Inner {
    /// The bound address of each listener of the current generation.
    bound: HashMap<ListenerId, SocketAddr>,
    /// Per listener, ends (with an error) when its accept loop has closed its socket.
    sockets_open: HashMap<ListenerId, oneshot::Receiver<()>>,
    accept_loops: JoinSet<()>,
    shutdown: watch::Receiver<bool>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners").field("bound", &self.inner.lock().bound).finish_non_exhaustive()
    }
}

impl Listeners {
    /// No listener yet; `shutdown` ends every accept loop.
    pub(crate) fn new(shutdown: watch::Receiver<bool>) -> Self {
        Self {
            inner: parking_lot::Mutex::new(Inner {
                bound: HashMap::new(),
                sockets_open: HashMap::new(),
                accept_loops: JoinSet::new(),
                shutdown,
            }),
        }
    }

    /// Binds the listeners of `state` that are not open yet. Dropping the result closes
    /// them again.
    pub(crate) fn bind_new(&self, state: &State) -> Result<Vec<Bound>, ListenError> {
        let inner = self.inner.lock();
        if *inner.shutdown.borrow() {
            return Err(ListenError::ShuttingDown);
        }
        let mut fresh = Vec::new();
        for (lc, &id) in state.config.listener.iter().zip(&state.listener_ids) {
            if inner.bound.contains_key(&id) {
                continue;
            }
            let err = |error| ListenError::Bind { addr: lc.addr, error };
            let listener = bind(lc.addr).map_err(err)?;
            let addr = listener.local_addr().map_err(err)?;
            fresh.push(Bound { id, listener, addr });
        }
        Ok(fresh)
    }

    /// Makes `next` the current generation of `generations` (when given), starts serving
    /// `fresh` (bound by [`Self::bind_new`] for it) with accept loops that follow
    /// `generations`, and forgets the listeners the current generation no longer has. Their
    /// accept loops close their sockets as they see it: the returned future ends when they
    /// have.
    pub(crate) fn open(
        &self,
        fresh: Vec<Bound>,
        generations: &watch::Sender<Arc<State>>,
        next: Option<Arc<State>>,
    ) -> (ListenerChanges, impl std::future::Future<Output = ()>) {
        // Under the lock with the swap, so that `addrs` never sees a generation whose
        // listeners are not all bound yet.
        let mut inner = self.inner.lock();
        if let Some(next) = next {
            generations.send_replace(next);
        }
        let state = Arc::clone(&generations.borrow());
        let opened = fresh.iter().map(|b| b.addr).collect();
        for Bound { id, listener, addr } in fresh {
            let (socket_open, socket_closed) = oneshot::channel();
            inner.bound.insert(id, addr);
            inner.sockets_open.insert(id, socket_closed);
            let shutdown = inner.shutdown.clone();
            inner.accept_loops.spawn(crate::server::accept_loop(
                id,
                generations.subscribe(),
                listener,
                shutdown,
                socket_open,
            ));
        }
        let gone: Vec<ListenerId> = inner.bound.keys().filter(|id| !state.listener_ids.contains(id)).copied().collect();
        let mut closed = Vec::new();
        let mut closing = Vec::new();
        for id in gone {
            closed.extend(inner.bound.remove(&id));
            closing.extend(inner.sockets_open.remove(&id));
        }
        let listening = state.listener_ids.iter().map(|id| inner.bound[id]).collect();
        let sockets_closed = async move {
            for socket in closing {
                let _ = socket.await;
            }
        };
        (ListenerChanges { listening, opened, closed }, sockets_closed)
    }

    /// The bound address of each listener of the current generation of `generations`, in
    /// configuration order.
    pub(crate) fn addrs(&self, generations: &watch::Sender<Arc<State>>) -> Vec<SocketAddr> {
        let inner = self.inner.lock();
        generations.borrow().listener_ids.iter().map(|id| inner.bound[id]).collect()
    }

    /// Waits for every accept loop to end (after shutdown: each waits for its connections,
    /// up to `shutdown.drain`).
    pub(crate) async fn join(&self) {
        let mut loops = std::mem::take(&mut self.inner.lock().accept_loops);
        while loops.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listeners(addrs: &[&str]) -> Vec<ListenerConfig> {
        addrs.iter().map(|a| ListenerConfig { addr: a.parse().unwrap(), ..ListenerConfig::default() }).collect()
    }

    #[test]
    fn a_listener_keeps_its_id_by_configured_address_and_rank() {
        let running = listeners(&["127.0.0.1:0", "127.0.0.1:3128", "127.0.0.1:0"]);
        let next = listeners(&["127.0.0.1:3128", "127.0.0.1:0", "127.0.0.1:8080", "127.0.0.1:0", "127.0.0.1:0"]);
        let mut counter = 10;
        let ids = carry_ids(&running, &[1, 2, 3], &next, || {
            counter += 1;
            counter
        });
        assert_eq!(ids, [2, 1, 11, 3, 12]);
    }
}
