//! CONNECT tunnels (RFC 9110 §9.3.6): to allowed ports only; bytes are copied both ways
//! (here and on connections that switched protocols, `crate::upgrade`) until either side
//! closes, or until no byte went either way for `client.tunnel_idle_timeout`, and the
//! transaction is logged when the tunnel ends, with the bytes copied to the client however
//! it ended. A CONNECT's origin connection takes a slot under `upstream.max_connections`
//! for as long as its tunnel lives, as every other origin connection does (an upgrade's
//! comes from the origin pool with its slot).

use crate::body::ProxyBody;
use crate::error::{Kind, ProxyError, Side};
use crate::gated::Gated;
use crate::idle::{Activity, Traffic, Watched};
use crate::outcome::ResultCode;
use crate::state::State;
use crate::txn::Txn;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// The origin side of a tunnel: the TCP connection a CONNECT opened, or an origin
/// connection that switched protocols (`crate::upgrade`).
pub trait OriginIo: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> OriginIo for T {}

/// An accepted tunnel, to be run once the answer (a CONNECT's 200, a 101) has been sent.
pub struct Tunnel {
    upgrade: hyper::upgrade::OnUpgrade,
    origin: Box<dyn OriginIo>,
    /// The origin connection's slot under `upstream.max_connections`, when the tunnel
    /// opened it; freed when the tunnel ends.
    slot: Option<OwnedSemaphorePermit>,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel").finish_non_exhaustive()
    }
}

/// Opens the connection a CONNECT asks for and returns the 200 plus the tunnel to run.
pub async fn open(
    state: &State,
    txn: &mut Txn,
    mut req: Request<Incoming>,
) -> Result<(Response<ProxyBody>, Tunnel), ProxyError> {
    let authority = req.uri().authority().cloned().ok_or_else(|| ProxyError::bad_request("CONNECT needs host:port"))?;
    txn.url = authority.to_string();
    let port = authority.port_u16().ok_or_else(|| ProxyError::bad_request("CONNECT needs a port"))?;
    if !state.config.access.connect_ports.contains(&port) {
        txn.code = ResultCode::Denied;
        return Err(ProxyError::new(Kind::Forbidden, Side::Client, format!("CONNECT to port {port} is not allowed")));
    }
    let host = authority.host().trim_start_matches('[').trim_end_matches(']');
    let timeout = state.config.upstream.connect_timeout.0;
    let slot = state.upstream.origin_slot(timeout, authority.as_str()).await?;
    let acl = state.dest_acl.as_deref();
    let origin = match tokio::time::timeout(timeout, connect_allowed(acl, host, port)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) if crate::dest_acl::is_denied(&e) => {
            txn.code = ResultCode::Denied;
            return Err(crate::dest_acl::refused(authority.as_str()));
        }
        Ok(Err(e)) => return Err(ProxyError::bad_gateway(format!("cannot connect to {authority}")).with_cause(e)),
        Err(_) => {
            return Err(ProxyError::gateway_timeout(format!("connecting to {authority} took longer than {timeout:?}")))
        }
    };
    if state.upstream.is_own_admin(&origin) {
        txn.code = ResultCode::Denied;
        return Err(crate::upstream::Upstream::own_admin_refused());
    }
    let _ = origin.set_nodelay(true);
    txn.peer = origin.peer_addr().ok().map(|a| a.ip());
    txn.code = ResultCode::Tunnel;
    let upgrade = hyper::upgrade::on(&mut req);
    let mut response = Response::new(ProxyBody::empty());
    *response.status_mut() = StatusCode::OK;
    let mut tunnel = Tunnel::new(upgrade, origin);
    tunnel.slot = Some(slot);
    Ok((response, tunnel))
}

/// Resolves `host` and connects to its addresses in turn, those the destination ACL
/// (`access.deny_destinations`) allows only: the addresses judged are the ones connected to,
/// whatever name the client gave.
async fn connect_allowed(acl: Option<&crate::dest_acl::DestAcl>, host: &str, port: u16) -> io::Result<TcpStream> {
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    let addrs = match acl {
        Some(acl) => acl.filter(host, addrs)?,
        None => addrs,
    };
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))))
}

impl Tunnel {
    /// A tunnel between the client connection `upgrade` resolves to and `origin`.
    pub fn new(upgrade: hyper::upgrade::OnUpgrade, origin: impl OriginIo + 'static) -> Self {
        Self { upgrade, origin: Box::new(origin), slot: None }
    }

    /// Copies bytes both ways until the tunnel closes, then logs the transaction with the
    /// bytes sent to the client: every byte copied, however the tunnel ends (either side
    /// closing, an error, the idle timeout, or the task dropped at shutdown; [`Ending`]).
    pub async fn run(self, state: Arc<State>, txn: Box<Txn>) {
        state.metrics.tunnels_open.fetch_add(1, Relaxed);
        let mut ending =
            Ending { state: Arc::clone(&state), txn: Some(txn), traffic: Arc::default(), completed: false };
        let url = ending.txn.as_ref().map(|txn| txn.url.clone()).unwrap_or_default();
        let mut origin = self.origin;
        match self.upgrade.await {
            Ok(upgraded) => {
                let activity = Activity::new();
                // Its bytes are counted as they pass, so that the counts survive an error or
                // the copy being dropped, which `copy_bidirectional`'s do not.
                let mut client =
                    Watched::both(TokioIo::new(upgraded), Arc::clone(&activity)).counting(Arc::clone(&ending.traffic));
                let idle = state.config.client.tunnel_idle_timeout.0;
                tokio::select! {
                    biased;
                    // (On an error the counts are lost from the result: `Watched` kept them.)
                    copied = tokio::io::copy_bidirectional(&mut client, &mut origin) => match copied {
                        Ok(_) => ending.completed = true,
                        Err(e) => tracing::debug!("tunnel {url} ended: {e}"),
                    },
                    // Both sides are closed when the copy is dropped.
                    () = Gated::new(activity.idle_for(idle)) => {
                        tracing::debug!("tunnel {url}: no bytes either way for {idle:?}; closed");
                        // Closed as configured, nothing cut short: logged `TCP_TUNNEL`, not `_ABORTED`.
                        ending.completed = true;
                    }
                }
            }
            Err(e) => tracing::debug!("tunnel {url} was never upgraded: {e}"),
        }
    }
}

/// Ends a tunnel's transaction with the bytes copied, when [`Tunnel::run`] returns or is
/// dropped (the runtime shutting down): the access log and metrics count them either way.
struct Ending {
    state: Arc<State>,
    txn: Option<Box<Txn>>,
    /// What the client sent through the tunnel (read) and got (written).
    traffic: Arc<Traffic>,
    completed: bool,
}

impl Drop for Ending {
    fn drop(&mut self) {
        self.state.metrics.tunnels_open.fetch_sub(1, Relaxed);
        let (up, down) = (self.traffic.read.load(Relaxed), self.traffic.written.load(Relaxed));
        if let Some(txn) = self.txn.take() {
            tracing::debug!("tunnel {} closed: {up} bytes from the client, {down} to it", txn.url);
            txn.complete(down, self.completed);
        }
    }
}
