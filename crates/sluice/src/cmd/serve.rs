//! `sluice serve`: run the proxy.

use anyhow::Context;
use sluice_proxy::clock::{Clock, SystemClock};
use sluice_proxy::config::Config;
use sluice_proxy::module_manager::check_entries;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `sluice serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (TOML). Without one, Sluice runs a forward caching proxy on
    /// 127.0.0.1:3128 with a 256 MiB memory cache and its admin API on 127.0.0.1:3129.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Check the configuration file and exit (0 when valid).
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    check_config: Option<PathBuf>,

    /// Print the effective configuration (defaults filled in) as TOML and exit.
    #[arg(long)]
    print_config: bool,

    /// Worker threads (default: one per core). One runs the proxy as a single event loop.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,

    /// Write the process id to FILE once every listener is open (for signals: `kill -USR1
    /// $(cat FILE)` reopens the access log, `-HUP` reloads the configuration file, `-TERM`
    /// stops); removed on a clean stop.
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
}

/// What `--check-config` checks of the files a configuration names beyond what loading it
/// does (TLS files, users files and modules are checked by building them): each `files`
/// route's root is a directory, and the access log's directory exists (the log itself is
/// created at start-up, not here).
fn check_paths(config: &Config) -> anyhow::Result<()> {
    for route in &config.route {
        if let Some(files) = &route.files {
            match std::fs::metadata(&files.root) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    anyhow::bail!("route `{}`: files.root {} is not a directory", route.label(), files.root.display())
                }
                Err(e) => anyhow::bail!("route `{}`: files.root {}: {e}", route.label(), files.root.display()),
            }
        }
    }
    if let Some(log) = &config.log.access_log {
        let dir = log.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            anyhow::bail!("log.access_log {}: its directory {} does not exist", log.display(), dir.display());
        }
    }
    Ok(())
}

/// Raises the soft limit on open descriptors to the hard limit, as proxies do (nginx's
/// `worker_rlimit_nofile`): every client, origin connection and kept-open disk file takes
/// one, and the usual soft default (1024) is far below what a busy proxy needs.
fn raise_descriptor_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::warn!("cannot raise the open-file limit: {e}");
        }
    }
}

/// Runs the proxy until SIGTERM or SIGINT, then drains in-flight requests.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(path) = &args.check_config {
        let config = Config::load(path)?;
        check_entries(&sluice_modules::Factory::default(), &config.module)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if let Some(auth) = &config.proxy_auth {
            sluice_proxy::proxy_auth::ProxyAuth::load(auth, Arc::new(SystemClock))
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        }
        for listener in &config.listener {
            if let Some(tls) = &listener.tls {
                let built = sluice_proxy::tls::listener(tls, None)
                    .map_err(|e| anyhow::anyhow!("{}: TLS for {}: {e}", path.display(), listener.addr))?;
                for certificate in &built.certificates {
                    if let Some(warning) = certificate.expiry_warning(SystemClock.now()) {
                        eprintln!("{}: warning: TLS for {}: {warning}", path.display(), listener.addr);
                    }
                }
            }
        }
        sluice_proxy::origin_tls::connector(&config.upstream.tls)
            .map_err(|e| anyhow::anyhow!("{}: upstream.tls: {e}", path.display()))?;
        check_paths(&config).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        for warning in config.warnings() {
            eprintln!("{}: warning: {warning}", path.display());
        }
        println!("{}: configuration is valid", path.display());
        return Ok(());
    }
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if args.print_config {
        // Secrets are not shown (as `GET /config` does not show them).
        print!("{}", toml::to_string_pretty(&config.redacted()).context("rendering the configuration")?);
        return Ok(());
    }
    init_tracing();
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    raise_descriptor_limit();
    let runtime = runtime(args.threads).enable_all().build().context("starting the runtime")?;
    runtime.block_on(serve(config, args.pid_file))
}

/// The runtime for `threads` workers (by default one per core). One worker is a
/// current-thread runtime: one event loop, like an nginx worker process, without the
/// work-stealing scheduler's bookkeeping (its queue atomics, its poll-time averages) on every
/// wake-up. More share a multi-thread runtime.
fn runtime(threads: Option<usize>) -> tokio::runtime::Builder {
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if threads <= 1 {
        return tokio::runtime::Builder::new_current_thread();
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(threads);
    builder
}

async fn serve(config: Config, pid_file: Option<PathBuf>) -> anyhow::Result<()> {
    // The handlers first: a signal that comes while the proxy starts (or as soon as the pid
    // file names the process) must not find the default action, which ends the process.
    let signals = Signals::install()?;
    let mut state = sluice_proxy::State::new(config, Arc::new(SystemClock), Vec::new())?;
    // Modules load at start-up, before anything is served: blocking the thread that drives
    // this future (not a worker of a multi-thread runtime) is fine.
    sluice_modules::Factory::attach(&mut state)?;
    let running = sluice_proxy::start(state).await?;
    for (listener, addr) in running.state().config.listener.iter().zip(running.listeners()) {
        tracing::info!(
            "listening on {addr} ({:?}{})",
            listener.mode,
            if listener.tls.is_some() { ", TLS" } else { "" }
        );
    }
    if let Some(admin) = running.admin {
        tracing::info!("admin API on http://{admin}/ (metrics at /metrics)");
    }
    if let Some(pid_file) = &pid_file {
        std::fs::write(pid_file, format!("{}\n", std::process::id()))
            .with_context(|| format!("writing the pid file {}", pid_file.display()))?;
    }
    signals.wait(&running).await;
    tracing::info!("shutting down: draining in-flight requests");
    running.shutdown().await;
    if let Some(pid_file) = &pid_file {
        if let Err(e) = std::fs::remove_file(pid_file) {
            tracing::warn!("cannot remove the pid file {}: {e}", pid_file.display());
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// The signals `sluice serve` handles.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            hup: signal(SignalKind::hangup()).context("installing the SIGHUP handler")?,
            usr1: signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")?,
        })
    }

    /// Waits for SIGTERM or SIGINT; on SIGHUP, reloads the configuration file (as
    /// `nginx -s reload` and `squid -k reconfigure` do); on SIGUSR1, reopens the access log
    /// (log rotation, as nginx and `squid -k rotate` do).
    async fn wait(mut self, running: &sluice_proxy::Running) {
        loop {
            tokio::select! {
                _ = self.term.recv() => return,
                _ = self.int.recv() => return,
                _ = self.hup.recv() => reload(running).await,
                _ = self.usr1.recv() => reopen_access_log(&running.state()).await,
            }
        }
    }
}

/// SIGUSR1: the access log file is opened anew at its path.
async fn reopen_access_log(state: &sluice_proxy::State) {
    match &state.access_log {
        None => tracing::warn!("SIGUSR1: no access log is configured; nothing to reopen"),
        Some(log) => match log.reopen().await {
            Ok(()) => tracing::info!("SIGUSR1: access log reopened"),
            Err(e) => tracing::error!("SIGUSR1: cannot reopen the access log ({e}); writing on to the old file"),
        },
    }
}

/// SIGHUP: the `--config` file becomes the running configuration (see
/// `sluice_proxy::generation`); on any error nothing changes.
async fn reload(running: &sluice_proxy::Running) {
    match running.generations().reload_file().await {
        Ok(report) => {
            let modules = report.modules.map(|m| {
                format!(
                    "; modules kept {:?}, reconfigured {:?}, built {:?}, removed {:?}",
                    m.kept, m.reconfigured, m.built, m.removed
                )
            });
            tracing::info!(
                "SIGHUP: configuration reloaded from {}{}",
                report.path.display(),
                modules.unwrap_or_default()
            );
            for addr in &report.listeners.opened {
                tracing::info!("SIGHUP: listening on {addr}");
            }
            for addr in &report.listeners.closed {
                tracing::info!("SIGHUP: no longer listening on {addr}; its connections close gracefully");
            }
            if !report.restart_needed.is_empty() {
                tracing::warn!(
                    "SIGHUP: these settings changed but keep their running values until a restart: {}",
                    report.restart_needed.join(", ")
                );
            }
        }
        Err(e) => tracing::error!("SIGHUP: {e}; the running configuration is unchanged"),
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| "info".into());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
}
