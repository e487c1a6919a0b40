//! CONNECT tunnels (RFC 9110 §9.3.6): to allowed ports only; bytes are copied both ways
//! (here and on connections that switched protocols, `crate::upgrade`) until either side
//! closes, or until no byte went either way for `client.tunnel_idle_timeout`, and the
//! transaction is logged when the tunnel ends.

use crate::body::ProxyBody;
use crate::error::{Kind, ProxyError, Side};
use crate::gated::Gated;
use crate::idle::{Activity, Watched};
use crate::outcome::ResultCode;
use crate::state::State;
use crate::txn::Txn;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// The origin side of a tunnel: the TCP connection a CONNECT opened, or an origin
/// connection that switched protocols (`crate::upgrade`).
pub trait OriginIo: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> OriginIo for T {}

/// An accepted tunnel, to be run once the answer (a CONNECT's 200, a 101) has been sent.
pub struct Tunnel {
    upgrade: hyper::upgrade::OnUpgrade,
    origin: Box<dyn OriginIo>,
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
    let origin = match tokio::time::timeout(timeout, TcpStream::connect((host, port))).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(ProxyError::bad_gateway(format!("cannot connect to {authority}")).with_cause(e)),
        Err(_) => {
            return Err(ProxyError::gateway_timeout(format!("connecting to {authority} took longer than {timeout:?}")))
        }
    };
    let _ = origin.set_nodelay(true);
    txn.peer = origin.peer_addr().ok().map(|a| a.ip());
    txn.code = ResultCode::Tunnel;
    let upgrade = hyper::upgrade::on(&mut req);
    let mut response = Response::new(ProxyBody::empty());
    *response.status_mut() = StatusCode::OK;
    Ok((response, Tunnel::new(upgrade, origin)))
}

impl Tunnel {
    /// A tunnel between the client connection `upgrade` resolves to and `origin`.
    pub fn new(upgrade: hyper::upgrade::OnUpgrade, origin: impl OriginIo + 'static) -> Self {
        Self { upgrade, origin: Box::new(origin) }
    }

    /// Copies bytes both ways until the tunnel closes, then logs the transaction with the
    /// bytes sent to the client.
    pub async fn run(self, state: Arc<State>, txn: Box<Txn>) {
        state.metrics.tunnels_open.fetch_add(1, Relaxed);
        let mut origin = self.origin;
        let (to_client, completed) = match self.upgrade.await {
            Ok(upgraded) => {
                let activity = Activity::new();
                let mut client = Watched::both(TokioIo::new(upgraded), Arc::clone(&activity));
                let idle = state.config.client.tunnel_idle_timeout.0;
                tokio::select! {
                    biased;
                    copied = tokio::io::copy_bidirectional(&mut client, &mut origin) => match copied {
                        Ok((_up, down)) => (down, true),
                        Err(e) => {
                            tracing::debug!("tunnel {} ended: {e}", txn.url);
                            (0, false)
                        }
                    },
                    // Both sides are closed when the copy is dropped.
                    () = Gated::new(activity.idle_for(idle)) => {
                        tracing::debug!("tunnel {}: no bytes either way for {idle:?}; closed", txn.url);
                        (0, false)
                    }
                }
            }
            Err(e) => {
                tracing::debug!("tunnel {} was never upgraded: {e}", txn.url);
                (0, false)
            }
        };
        state.metrics.tunnels_open.fetch_sub(1, Relaxed);
        txn.complete(to_client, completed);
    }
}
