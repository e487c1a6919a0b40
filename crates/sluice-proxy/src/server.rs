//! Listeners: accept, TLS, HTTP/1.1 (keep-alive, pipelining, upgrades for CONNECT) and
//! HTTP/2 (h2c prior knowledge, or ALPN over TLS), graceful shutdown, and the hand-over of
//! listeners and open connections to each new configuration generation
//! (`crate::generation`).

use crate::admin::Admin;
use crate::config::{Config, ListenerConfig};
use crate::framing::{Speaks, StrictHttp1, HYPER_MAX_HEADERS};
use crate::gated::Gated;
use crate::generation::Generations;
use crate::idle::{Activity, Watched};
use crate::listeners::{ListenError, ListenerId};
use crate::options_form::OptionsForms;
use crate::service::{self, ConnInfo};
use crate::state::State;
use crate::stream_exec::SpawnBoxed;
use crate::zero_copy::{SendfileQueue, ZeroCopyStream};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error("{0}")]
    State(#[from] crate::state::StateError),
    #[error("admin token file {path}: {source}")]
    TokenFile { path: std::path::PathBuf, source: std::io::Error },
}

/// A running proxy.
#[derive(Debug)]
pub struct Running {
    /// The admin listener's address, when enabled.
    pub admin: Option<SocketAddr>,
    /// The admin bearer token (configured or generated).
    pub admin_token: String,
    generations: Arc<Generations>,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Running {
    /// The current generation: the configuration new connections are served with, and
    /// everything built from it, over the store, metrics and modules every generation
    /// shares.
    pub fn state(&self) -> Arc<State> {
        self.generations.current()
    }

    /// The bound address of each `[[listener]]` of the current generation, in configuration
    /// order (ports given as 0 are the ones the system chose).
    pub fn listeners(&self) -> Vec<SocketAddr> {
        self.generations.listener_addrs()
    }

    /// The current generation and configuration reloads (`crate::generation`).
    pub fn generations(&self) -> &Arc<Generations> {
        &self.generations
    }

    /// Stops accepting, lets in-flight requests finish (up to `shutdown.drain`), waits for
    /// the disk tier's background writes and deletions, closes the access logs (every
    /// line of a transaction that ended before is written, or counted dropped when its
    /// write failed), then returns.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
        self.generations.join_listeners().await;
        let state = self.state();
        state.store.flush().await;
        state.access_logs.close().await;
    }
}

/// Binds every listener and starts serving. Ports given as 0 are chosen by the OS (see
/// [`Running::listeners`]).
pub async fn start(state: State) -> Result<Running, StartError> {
    let state = Arc::new(state);
    let config: &Config = &state.config;
    let (shutdown, shutdown_rx) = watch::channel(false);
    let generations = Arc::new(Generations::new(Arc::clone(&state), shutdown_rx.clone()));
    generations.open_listeners()?;
    let mut tasks = JoinSet::new();
    crate::timers::spawn(&state, &shutdown_rx, &mut tasks);
    crate::sweep::spawn(generations.subscribe(), &shutdown_rx, &mut tasks);
    crate::origin_pool::spawn_checks(generations.subscribe(), &shutdown_rx, &mut tasks);
    let admin_listener = if config.admin.enabled {
        let err = |error| ListenError::Bind { addr: config.admin.addr, error };
        let listener = crate::listeners::bind(config.admin.addr).map_err(err)?;
        let addr = listener.local_addr().map_err(err)?;
        // Neither origin requests nor tunnels may reach it through the proxy.
        state.upstream.set_own_admin(addr);
        Some((listener, addr))
    } else {
        None
    };
    let admin_token = admin_token(config, admin_listener.as_ref().map(|(_, addr)| addr.port()))?;
    let admin = if let Some((listener, addr)) = admin_listener {
        let admin = Arc::new(Admin { generations: Arc::clone(&generations), token: admin_token.clone() });
        tasks.spawn(admin_loop(admin, listener, shutdown_rx.clone()));
        Some(addr)
    } else {
        None
    };
    Ok(Running { admin, admin_token, generations, shutdown, tasks })
}

/// The admin token: the configured one, or one generated and written to the token file of
/// the admin listener on `port` (none without a listener).
fn admin_token(config: &Config, port: Option<u16>) -> Result<String, StartError> {
    if let Some(token) = &config.admin.token {
        return Ok(token.clone());
    }
    let token = crate::admin::generate_token();
    if let Some(port) = port {
        let path = config.admin.token_path(port);
        write_private(&path, &token).map_err(|source| StartError::TokenFile { path: path.clone(), source })?;
        tracing::info!("admin token written to {}", path.display());
    }
    Ok(token)
}

fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")
}

/// The largest request head hyper accepts (its read buffer limit: at least 8 KiB, which
/// `Config::validate` enforces); the framing guard holds heads up to the same size.
fn max_head(state: &State) -> usize {
    state.config.client.max_header_bytes.0.max(8192) as usize
}

fn http_builder(state: &State) -> auto::Builder<SpawnBoxed> {
    let mut builder = auto::Builder::new(SpawnBoxed);
    builder
        .http1()
        .keep_alive(true)
        .half_close(false)
        .max_buf_size(max_head(state))
        // Body buffers reach the stream as yielded, never copied (which zero-copy needs:
        // see `crate::zero_copy`); hyper's automatic choice for a TCP stream, made explicit.
        .writev(true)
        // No timer per request head (hyper's default with a timer): the connection's idle
        // timer bounds head reads instead (`crate::idle`).
        .header_read_timeout(None::<std::time::Duration>);
    // hyper parses into stack arrays of its default size (100 fields); any other limit, even
    // a smaller one, makes it fill (and above 100, allocate) two arrays per request.
    if state.config.client.max_header_fields != HYPER_MAX_HEADERS {
        builder.http1().max_headers(state.config.client.max_header_fields);
    }
    // The same limit on a request head as in HTTP/1 (h2 answers 431 past it). HTTP/2 has no
    // idle timer of its own in hyper: `serve` closes idle connections.
    let max_header_list = u32::try_from(state.config.client.max_header_bytes.0).unwrap_or(u32::MAX);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(256).max_header_list_size(max_header_list);
    // WebSocket (and the other upgrades allowed) over HTTP/2 by extended CONNECT, RFC 8441
    // (`crate::upgrade`).
    if !state.config.access.upgrade_protocols.is_empty() {
        builder.http2().enable_connect_protocol();
    }
    // Which protocols a connection may speak is held by the framing guard (`Speaks`):
    // `serve_connection_with_upgrades` reads it from the first bytes and ignores
    // `http1_only`.
    builder
}

/// Accepts the connections of the listener `id` (`crate::listeners`) on `listener`, each
/// served by the generation current when it was accepted, until the proxy shuts down or a
/// generation no longer has the listener. Then it closes `listener` (and drops
/// `socket_open`), has the connections close gracefully, and waits for them to finish (at
/// shutdown, up to `shutdown.drain`).
pub(crate) async fn accept_loop(
    id: ListenerId,
    mut generations: watch::Receiver<Arc<State>>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    socket_open: tokio::sync::oneshot::Sender<()>,
) {
    // Every connection task holds its setup, and every setup a clone of `open`; the drain
    // below ends when all are gone.
    let (open, mut closed) = mpsc::channel::<()>(1);
    // Tells this listener's connections to close gracefully.
    let (closing, closing_rx) = watch::channel(false);
    let Some(mut setup) = ConnSetup::new(id, &mut generations, &closing_rx, &open) else { return };
    let retired = 'accepting: loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors and the like: back off briefly rather than spin.
                    tracing::warn!("accept on {}: {e}", setup.lc.addr);
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            Ok(()) = generations.changed() => {
                match ConnSetup::new(id, &mut generations, &closing_rx, &open) {
                    Some(next) => setup = next,
                    None => break true,
                }
                continue;
            }
            _ = shutdown.changed() => break false,
        };
        // A slot under `client.max_connections` before serving it and accepting the next
        // (`crate::conn_limit`); reloads and shutdown are still heard meanwhile.
        let limit = Arc::clone(&setup.state.connection_limit);
        let slot = match limit.try_take() {
            Some(slot) => slot,
            None => {
                let waiting = limit.take();
                tokio::pin!(waiting);
                loop {
                    tokio::select! {
                        slot = &mut waiting => break slot,
                        Ok(()) = generations.changed() => {
                            match ConnSetup::new(id, &mut generations, &closing_rx, &open) {
                                Some(next) => setup = next,
                                None => break 'accepting true,
                            }
                        }
                        _ = shutdown.changed() => break 'accepting false,
                    }
                }
            }
        };
        let _ = stream.set_nodelay(true);
        setup.state.metrics.client_connections.fetch_add(1, Relaxed);
        let setup = Arc::clone(&setup);
        if setup.lc.proxy_protocol {
            tokio::spawn(async move {
                setup.run_proxied(stream, peer).await;
                drop(slot);
            });
        } else {
            tokio::spawn(async move {
                setup.run(stream, peer).await;
                drop(slot);
            });
        }
    };
    let addr = listener.local_addr().map_or_else(|_| setup.lc.addr.to_string(), |a| a.to_string());
    drop(listener);
    drop(socket_open);
    let _ = closing.send(true);
    drop(setup);
    drop(open);
    if retired {
        tracing::info!("listener {addr} closed: no longer in the configuration");
        tokio::select! {
            _ = closed.recv() => return,
            _ = shutdown.wait_for(|&stop| stop) => {}
        }
    }
    let drain = generations.borrow().config.shutdown.drain.0;
    if tokio::time::timeout(drain, closed.recv()).await.is_err() {
        tracing::warn!("listener {addr}: connections still open after {drain:?}; closing them");
    }
}

/// What every connection of one listener is served with, in one generation.
struct ConnSetup {
    state: Arc<State>,
    /// Follows the generations from this one on: a connection's requests move to the
    /// current one after a reload ([`Serving`]).
    generations: watch::Receiver<Arc<State>>,
    lc: ListenerConfig,
    builder: auto::Builder<SpawnBoxed>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    max_head: usize,
    /// Disk bodies go out with `sendfile` on this listener's connections.
    zero_copy: bool,
    /// Turns true when the connections should close gracefully: at shutdown, or when the
    /// listener is closed by a reload.
    closing: watch::Receiver<bool>,
    /// Dropped with the last connection (each holds this setup): the listener's drain waits
    /// for that.
    _open: mpsc::Sender<()>,
}

impl ConnSetup {
    /// The setup of the listener `id` in the current generation (which `generations` marks
    /// seen); `None` when that generation does not have it.
    fn new(
        id: ListenerId,
        generations: &mut watch::Receiver<Arc<State>>,
        closing: &watch::Receiver<bool>,
        open: &mpsc::Sender<()>,
    ) -> Option<Arc<Self>> {
        let state = Arc::clone(&generations.borrow_and_update());
        let index = state.listener_ids.iter().position(|&listener| listener == id)?;
        let lc = state.config.listener[index].clone();
        let tls = state.listener_tls[index].as_ref().map(|tls| tls.acceptor.clone());
        Some(Arc::new(ConnSetup {
            builder: http_builder(&state),
            max_head: max_head(&state),
            zero_copy: tls.is_none() && state.config.cache.disk.dir.is_some() && state.config.cache.disk.sendfile,
            generations: generations.clone(),
            closing: closing.clone(),
            lc,
            tls,
            state,
            _open: open.clone(),
        }))
    }

    /// Serves a connection whose client is `client`: TLS first on a TLS listener, then HTTP.
    async fn run(self: Arc<Self>, stream: tokio::net::TcpStream, client: SocketAddr) {
        let state = &self.state;
        let queue = self.zero_copy.then(SendfileQueue::default);
        let options_forms = Arc::new(OptionsForms::default());
        let switches = Arc::new(crate::switch_outcome::SwitchOutcome::default());
        let mut conn = ConnInfo {
            client,
            client_ip: service::client_ip_value(client.ip()),
            mode: self.lc.mode,
            tls: self.tls.is_some(),
            allowed: state.client_acl.allows(client.ip()),
            forwards_clients: state.forwarded_for_acl.allows(client.ip()),
            from_trusted_peer: state.forwarded_for_acl.allows(client.ip()),
            zero_copy: queue.clone(),
            activity: Some(Activity::new()),
            options_forms: Some(Arc::clone(&options_forms)),
            switches: Some(Arc::clone(&switches)),
            cancels: Some(Arc::default()),
            timers: Default::default(),
            client_cert: None,
        };
        match &self.tls {
            None => {
                let conn = Arc::new(conn);
                let stream = ZeroCopyStream::new(stream, queue.unwrap_or_default());
                let speaks = if self.lc.h2c { Speaks::Either } else { Speaks::Http1 };
                let guarded = StrictHttp1::new(stream, self.max_head)
                    .noting_options(options_forms)
                    .noting_switches(switches)
                    .speaking(speaks);
                serve(&self, conn, guarded).await
            }
            Some(acceptor) => {
                let handshake_timeout = state.config.client.header_read_timeout.0;
                let failure = match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        let session = tls.get_ref().1;
                        let kind = match session.handshake_kind() {
                            Some(rustls::HandshakeKind::Resumed) => &state.metrics.tls_handshakes_resumed,
                            _ => &state.metrics.tls_handshakes_full,
                        };
                        kind.fetch_add(1, Relaxed);
                        // HTTP/2 over TLS only when ALPN chose it (RFC 9113 §3.3).
                        let h2 = session.alpn_protocol() == Some(b"h2".as_slice());
                        let speaks = if h2 { Speaks::Http2 } else { Speaks::Http1 };
                        let verified = session.peer_certificates().and_then(|chain| chain.first());
                        conn.client_cert = verified.and_then(crate::client_cert::forwarded_value).map(Arc::new);
                        let conn = Arc::new(conn);
                        let guarded = StrictHttp1::new(tls, self.max_head)
                            .noting_options(options_forms)
                            .noting_switches(switches)
                            .speaking(speaks);
                        return serve(&self, conn, guarded).await;
                    }
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "timed out".to_owned(),
                };
                state.metrics.tls_handshake_failures.fetch_add(1, Relaxed);
                tracing::debug!("TLS handshake from {client}: {failure}");
            }
        }
    }

    /// Reads the PROXY protocol header a trusted balancer at `peer` starts the connection
    /// with (within `client.header_read_timeout`), then serves it as the client it names;
    /// closes it otherwise.
    async fn run_proxied(self: Arc<Self>, mut stream: tokio::net::TcpStream, peer: SocketAddr) {
        let metrics = &self.state.metrics;
        if !self.state.proxy_protocol_acl.allows(peer.ip()) {
            metrics.client_proxy_protocol_errors.fetch_add(1, Relaxed);
            tracing::info!("{peer} is not in access.proxy_protocol_from: connection closed");
            return;
        }
        let timeout = self.state.config.client.header_read_timeout.0;
        let client = match tokio::time::timeout(timeout, crate::proxy_protocol::read_header(&mut stream)).await {
            Ok(Ok(named)) => named.unwrap_or(peer),
            Ok(Err(e)) => {
                metrics.client_proxy_protocol_errors.fetch_add(1, Relaxed);
                tracing::info!("connection from {peer} closed: {e}");
                return;
            }
            Err(_) => {
                metrics.client_proxy_protocol_errors.fetch_add(1, Relaxed);
                tracing::info!("connection from {peer} closed: no PROXY protocol header within {timeout:?}");
                return;
            }
        };
        self.run(stream, client).await
    }
}

/// Serves one client connection until it ends, each request by the current generation
/// ([`Serving`]). It is shut down gracefully (HTTP/1: closed once the response in progress
/// is sent; HTTP/2: `GOAWAY`, open streams finish) when the proxy shuts down, or when it has
/// been idle for `client.header_read_timeout`: no request in progress, no response waiting on
/// its origin, and no response written to it (see [`crate::idle`]). That idle timer also bounds the
/// time a client has to deliver a complete request head, the first on the connection or a
/// later one; a connection closed that way gets no response. A connection still open one
/// more timeout after an idle close began is dropped.
async fn serve<I>(setup: &ConnSetup, conn: Arc<ConnInfo>, io: I)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (state, builder, mut shutdown) = (&setup.state, &setup.builder, setup.closing.clone());
    let activity = conn.activity.clone().unwrap_or_default();
    let serving = Serving {
        accepted: (Arc::clone(state), Arc::clone(&conn)),
        generations: setup.generations.clone(),
        moved: parking_lot::Mutex::new(None),
    };
    // `handle`'s future is returned as it is, not wrapped (it marks the connection busy
    // itself, and counts the HTTP/2 requests a client cancels, `crate::cancels`): hyper then
    // builds the large future in its own slot instead of moving it there.
    let cancels = conn.cancels.clone().unwrap_or_default();
    let service = service_fn(move |req| {
        let (state, conn) = serving.next();
        service::handle(state, conn, req)
    });
    let io = TokioIo::new(Watched::writes(io, Arc::clone(&activity)));
    let connection = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(connection);
    let idle_timeout = state.config.client.header_read_timeout.0;
    let mut shutting_down = *shutdown.borrow();
    let mut idle_closing = false;
    // Set when the connection is closed for its cancelled requests: dropped at this instant.
    let mut cut_off: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    if shutting_down {
        connection.as_mut().graceful_shutdown();
    }
    state.metrics.client_connections_open.fetch_add(1, Relaxed);
    let result = loop {
        // The connection first, and the rare events gated: each wake of this task (one per
        // read or write) polls only the connection, not the timer or the shutdown watch.
        tokio::select! {
            biased;
            result = connection.as_mut() => break result,
            _ = Gated::new(shutdown.wait_for(|&stop| stop)), if !shutting_down => {
                shutting_down = true;
                connection.as_mut().graceful_shutdown();
            }
            () = Gated::new(cancels.tripped.notified()), if cut_off.is_none() => {
                tracing::info!(
                    "client {}: {} requests cancelled (HTTP/2 rapid reset?); connection closed",
                    conn.client,
                    cancels.cancelled_count()
                );
                state.metrics.client_cancel_closes.fetch_add(1, Relaxed);
                shutting_down = true;
                cut_off = Some(Box::pin(tokio::time::sleep(crate::cancels::GRACE)));
                connection.as_mut().graceful_shutdown();
            }
            () = async { cut_off.as_mut().expect("set").await }, if cut_off.is_some() => {
                tracing::debug!("client {}: still open after closing for its cancellations; dropped", conn.client);
                break Ok(());
            }
            () = Gated::new(activity.idle_for(idle_timeout)), if !shutting_down || idle_closing => {
                if idle_closing {
                    // Still open a timeout after the graceful close began: an HTTP/2 client
                    // that does not answer the GOAWAY's PING, for one. Dropped.
                    tracing::debug!("client {}: still idle after closing gracefully; dropped", conn.client);
                    break Ok(());
                }
                tracing::debug!("client {}: idle for {idle_timeout:?}; closing", conn.client);
                (shutting_down, idle_closing) = (true, true);
                // The grace period starts now, not at the last write.
                activity.touch();
                connection.as_mut().graceful_shutdown();
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!("client {}: {e}", conn.client);
        crate::refused::note(state, conn.client, &*e);
    }
    state.metrics.client_connections_open.fetch_sub(1, Relaxed);
}

/// Which generation serves a connection's next request: the one it was accepted in, until a
/// reload; then the current one, with the connection's view of it (the client's access
/// decided by its ACL; the rest as accepted).
struct Serving {
    accepted: (Arc<State>, Arc<ConnInfo>),
    /// Has seen the generation the connection was accepted in.
    generations: watch::Receiver<Arc<State>>,
    /// The current generation and the connection's view of it, once a reload came.
    moved: parking_lot::Mutex<Option<(Arc<State>, Arc<ConnInfo>)>>,
}

impl Serving {
    fn next(&self) -> (Arc<State>, Arc<ConnInfo>) {
        // One atomic load a request while no reload came.
        if !self.generations.has_changed().unwrap_or(false) {
            return (Arc::clone(&self.accepted.0), Arc::clone(&self.accepted.1));
        }
        let current = Arc::clone(&self.generations.borrow());
        let mut moved = self.moved.lock();
        match &*moved {
            Some((state, conn)) if Arc::ptr_eq(state, &current) => (Arc::clone(state), Arc::clone(conn)),
            _ => {
                let conn = Arc::new(self.accepted.1.under(&current));
                *moved = Some((Arc::clone(&current), Arc::clone(&conn)));
                (current, conn)
            }
        }
    }
}

async fn admin_loop(admin: Arc<Admin>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            _ = shutdown.changed() => return,
        };
        let admin = Arc::clone(&admin);
        tokio::spawn(async move {
            let service = service_fn(move |req| Arc::clone(&admin).handle(req));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
