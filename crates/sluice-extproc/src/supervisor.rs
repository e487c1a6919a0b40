//! Starting, watching and restarting one helper process, on a small runtime of its own.
//!
//! The supervisor spawns the helper (under `nice -n` when a nice level is configured), waits
//! until it accepts gRPC connections on its Unix socket, publishes a channel to it, and when
//! it exits (or never comes up within the startup timeout) withdraws the channel, waits an
//! exponentially growing delay and starts it again. A helper that ran at least the maximum
//! delay before it exited starts over from the initial delay. Dropping the supervisor kills
//! the helper and removes its socket.

use crate::config::ExtProcConfig;
use parking_lot::Mutex;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};
use tokio::sync::{watch, Notify, Semaphore};
use tonic::transport::{Channel, Endpoint};

/// Where the helper is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HelperState {
    /// Spawned, not yet accepting connections.
    Starting,
    /// Accepting connections; messages go to it.
    Up,
    /// Exited or failed to start; waiting out the restart delay.
    Backoff,
    /// The supervisor was shut down.
    Stopped,
}

/// The helper's state and history, as `GET /modules/<name>/status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct HelperStatus {
    pub state: HelperState,
    /// The running helper's process id (also while starting).
    pub pid: Option<u32>,
    /// How many times the helper was spawned.
    pub starts: u64,
    /// Spawns after the first.
    pub restarts: u64,
    /// Exits or failed starts since the helper last ran for a while.
    pub consecutive_failures: u32,
    /// The delay waited (or being waited) before the latest restart, in milliseconds.
    pub backoff_ms: u64,
    /// How the latest helper ended, e.g. "exit status: 3".
    pub last_exit: Option<String>,
    /// The latest start failure, e.g. "socket not ready within 10s".
    pub last_error: Option<String>,
}

/// Traffic counters, as the status endpoint shows them.
#[derive(Debug, Default)]
pub struct Counters {
    /// Messages answered by the helper.
    pub answered: AtomicU64,
    /// Transactions that went on without the helper (`on_unavailable = "bypass"`).
    pub bypassed: AtomicU64,
    /// Transactions failed for want of the helper (`on_unavailable = "fail"`).
    pub failed: AtomicU64,
    /// Messages refused because `max_in_flight` were already waiting.
    pub queue_full: AtomicU64,
    /// Messages not sent because the helper was not up.
    pub helper_down: AtomicU64,
    /// Messages whose exchange broke (stream error, protocol error) or timed out.
    pub errors: AtomicU64,
    /// Immediate responses the helper sent.
    pub immediate: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// State shared between the supervisor task, the module and its transactions.
pub struct Shared {
    pub config: ExtProcConfig,
    status: Mutex<HelperStatus>,
    channel: Mutex<Option<Channel>>,
    /// `max_in_flight` permits; a message holds one until it is answered.
    pub permits: Arc<Semaphore>,
    pub counters: Counters,
    kill: Notify,
    /// The latest kill was asked for as a restart (`POST /modules/<name>/restart`): not a
    /// failure, so the helper starts again at once and the failure count starts over.
    restart: AtomicBool,
    /// Device and inode of the socket file our helper serves on, once it was up: on drop the
    /// file is removed only if it is still that one, not a successor's (a reloaded entry
    /// starts a new supervisor on the same path while this one finishes its transactions).
    socket_file: Mutex<Option<(u64, u64)>>,
    /// The supervisor's runtime, where exchanges run.
    pub handle: tokio::runtime::Handle,
}

impl Shared {
    /// A channel to the helper while it is up.
    pub fn channel(&self) -> Option<Channel> {
        self.channel.lock().clone()
    }

    pub fn status(&self) -> HelperStatus {
        self.status.lock().clone()
    }

    /// Messages waiting for an answer now.
    pub fn in_flight(&self) -> usize {
        self.config.max_in_flight - self.permits.available_permits()
    }

    /// Kills the running helper; it is restarted as after a crash.
    pub fn kill_helper(&self) {
        self.kill.notify_one();
    }

    /// Restarts the helper: the running one is killed and a new one started at once, or,
    /// while one waits out a restart delay, the wait ends. Not counted as a failure: the
    /// failure count and the delay start over.
    pub fn restart_helper(&self) {
        self.restart.store(true, Ordering::SeqCst);
        self.kill.notify_one();
    }

    fn update(&self, f: impl FnOnce(&mut HelperStatus)) {
        f(&mut self.status.lock());
    }
}

/// Owns the runtime that supervises the helper; dropping it stops everything.
pub struct Supervisor {
    pub shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: watch::Sender<bool>,
}

impl Supervisor {
    /// Starts supervising: the helper is spawned at once, in the background.
    pub fn start(config: ExtProcConfig) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("extproc-{}", config.name))
            .enable_all()
            .build()?;
        let shared = Arc::new(Shared {
            permits: Arc::new(Semaphore::new(config.max_in_flight)),
            config,
            status: Mutex::new(HelperStatus {
                state: HelperState::Starting,
                pid: None,
                starts: 0,
                restarts: 0,
                consecutive_failures: 0,
                backoff_ms: 0,
                last_exit: None,
                last_error: None,
            }),
            channel: Mutex::new(None),
            counters: Counters::default(),
            kill: Notify::new(),
            restart: AtomicBool::new(false),
            socket_file: Mutex::new(None),
            handle: runtime.handle().clone(),
        });
        let (shutdown, watch) = watch::channel(false);
        runtime.spawn(supervise(Arc::clone(&shared), watch));
        Ok(Self { shared, runtime: Some(runtime), shutdown })
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        *self.shared.channel.lock() = None;
        self.shared.update(|s| s.state = HelperState::Stopped);
        // The supervisor task owns the child with kill_on_drop: shutting the runtime down drops
        // the task, which kills the helper. `shutdown_background` is allowed inside another
        // runtime, where the module may well be dropped.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        let ours = *self.shared.socket_file.lock();
        if ours.is_none() || socket_identity(&self.shared.config.socket) == ours {
            let _ = std::fs::remove_file(&self.shared.config.socket);
        }
    }
}

/// Device and inode of the file at `path`, if any.
fn socket_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The niceness of this process (field 19 of /proc/self/stat), 0 when unreadable.
fn own_nice() -> i32 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            // Fields after the command start at field 3 (state); nice is field 19.
            rest.split_whitespace().nth(16)?.parse().ok()
        })
        .unwrap_or(0)
}

fn command(config: &ExtProcConfig) -> Command {
    let socket = config.socket.to_string_lossy();
    let args: Vec<String> = config.args.iter().map(|a| a.replace("{socket}", &socket)).collect();
    let increment = config.nice.map_or(0, |nice| nice - own_nice());
    let mut cmd = if increment != 0 {
        // `nice` execs the helper, so the pid we get is the helper's.
        let mut cmd = Command::new("nice");
        cmd.arg("-n").arg(increment.to_string()).arg("--").arg(&config.command);
        cmd
    } else {
        Command::new(&config.command)
    };
    cmd.args(args)
        .envs(&config.env)
        .env("SLUICE_EXTPROC_SOCKET", config.socket.as_os_str())
        .env("SLUICE_EXTPROC_MAX_MESSAGE_BYTES", config.max_message_bytes().to_string())
        // A pipe Sluice never writes to: it closes when Sluice exits, however it exits, so a
        // helper that reads its stdin sees end-of-file then and can exit too.
        .stdin(Stdio::piped())
        .kill_on_drop(true);
    die_with_spawning_thread(&mut cmd);
    cmd
}

/// Has the kernel kill the helper when the thread that starts it ends (Linux's parent-death
/// signal): the supervisor's runtime thread, which ends when the module is dropped and with
/// the process however it exits. `kill_on_drop` alone misses a process that exits before its
/// runtime's background shutdown has dropped the supervisor task, and only helpers that
/// watch their stdin notice that on their own; an existing Envoy processor does not.
#[allow(unsafe_code)]
fn die_with_spawning_thread(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getppid, set_parent_process_death_signal, Pid, Signal};
        let parent = Pid::from_raw(std::process::id() as i32);
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe calls are allowed: it makes two raw system calls (prctl, getppid)
        // and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                set_parent_process_death_signal(Some(Signal::KILL))?;
                // The parent may have gone before the signal was asked for.
                if getppid() != parent {
                    return Err(std::io::Error::other("the process starting the helper is gone"));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// A channel to the gRPC server on `socket`, connected once to prove it is there; later
/// connections (after a broken one) are made on demand through the same connector.
async fn connect(socket: &Path) -> Result<Channel, tonic::transport::Error> {
    let socket: PathBuf = socket.to_owned();
    Endpoint::from_static("http://extproc.sluice.invalid")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let socket = socket.clone();
            async move { UnixStream::connect(socket).await.map(hyper_util::rt::TokioIo::new) }
        }))
        .await
}

/// Retries [`connect`] until it succeeds; the caller bounds the time.
async fn wait_ready(socket: &Path) -> Channel {
    let mut delay = Duration::from_millis(2);
    loop {
        if socket.exists() {
            if let Ok(channel) = connect(socket).await {
                return channel;
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(50));
    }
}

enum Run {
    /// The helper exited (or was killed) after this long.
    Exited(Duration),
    /// The helper could not be started or never came up.
    Failed,
    /// Killed for a restart asked for ([`Shared::restart_helper`]).
    Restarted,
    /// Shutdown.
    Stop,
}

async fn kill(child: &mut Child) -> String {
    let _ = child.start_kill();
    match child.wait().await {
        Ok(status) => status.to_string(),
        Err(e) => format!("wait failed: {e}"),
    }
}

/// One life of the helper: spawn, wait for its socket, serve until it exits.
async fn run_once(shared: &Shared, shutdown: &mut watch::Receiver<bool>) -> Run {
    let config = &shared.config;
    let _ = std::fs::remove_file(&config.socket);
    let mut child = match command(config).spawn() {
        Ok(child) => child,
        Err(e) => {
            tracing::error!("extproc {}: cannot start {}: {e}", config.name, config.command);
            shared.update(|s| {
                s.starts += 1;
                s.last_error = Some(format!("cannot start {}: {e}", config.command));
            });
            return Run::Failed;
        }
    };
    // Held for this life of the helper: `Child::wait` would close it (see `command`).
    let _stdin = child.stdin.take();
    let started = Instant::now();
    shared.update(|s| {
        s.starts += 1;
        s.pid = child.id();
        s.state = HelperState::Starting;
    });
    let startup = Duration::from_millis(config.startup_timeout_ms);
    let ready = tokio::select! {
        ready = tokio::time::timeout(startup, wait_ready(&config.socket)) => ready.ok(),
        status = child.wait() => {
            let exit = status.map_or_else(|e| format!("wait failed: {e}"), |s| s.to_string());
            tracing::warn!("extproc {}: helper exited before it was ready ({exit})", config.name);
            shared.update(|s| { s.last_exit = Some(exit); s.last_error = Some("exited before it was ready".into()); });
            return Run::Failed;
        }
        _ = shutdown.changed() => {
            kill(&mut child).await;
            return Run::Stop;
        }
    };
    let Some(channel) = ready else {
        let exit = kill(&mut child).await;
        tracing::error!("extproc {}: helper not ready on {} within {startup:?}", config.name, config.socket.display());
        shared.update(|s| {
            s.last_exit = Some(exit);
            s.last_error = Some(format!("socket not ready within {startup:?}"));
        });
        return Run::Failed;
    };
    *shared.channel.lock() = Some(channel);
    *shared.socket_file.lock() = socket_identity(&config.socket);
    shared.update(|s| s.state = HelperState::Up);
    tracing::info!("extproc {}: helper up (pid {:?}) on {}", config.name, child.id(), config.socket.display());
    let exit = tokio::select! {
        status = child.wait() => status.map_or_else(|e| format!("wait failed: {e}"), |s| s.to_string()),
        () = shared.kill.notified() => kill(&mut child).await,
        _ = shutdown.changed() => {
            *shared.channel.lock() = None;
            kill(&mut child).await;
            return Run::Stop;
        }
    };
    *shared.channel.lock() = None;
    shared.update(|s| s.last_exit = Some(exit.clone()));
    if shared.restart.swap(false, Ordering::SeqCst) {
        tracing::info!("extproc {}: helper restarted as asked ({exit})", config.name);
        return Run::Restarted;
    }
    tracing::warn!("extproc {}: helper exited ({exit})", config.name);
    Run::Exited(started.elapsed())
}

async fn supervise(shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let config = &shared.config;
    let mut failures: u32 = 0;
    loop {
        match run_once(&shared, &mut shutdown).await {
            Run::Stop => break,
            Run::Restarted => failures = 0,
            Run::Exited(ran) if ran >= Duration::from_millis(config.backoff_max_ms) => failures = 1,
            Run::Exited(_) | Run::Failed => failures = failures.saturating_add(1),
        }
        let delay = if failures == 0 { Duration::ZERO } else { config.backoff(failures) };
        shared.update(|s| {
            s.state = HelperState::Backoff;
            s.pid = None;
            s.consecutive_failures = failures;
            s.backoff_ms = delay.as_millis() as u64;
        });
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            // A restart asked for during the delay starts the helper now, failures forgotten.
            () = shared.kill.notified(), if failures > 0 => {
                if shared.restart.swap(false, Ordering::SeqCst) {
                    failures = 0;
                    shared.update(|s| { s.consecutive_failures = 0; s.backoff_ms = 0; });
                }
            }
            _ = shutdown.changed() => break,
        }
        shared.update(|s| s.restarts += 1);
    }
    shared.update(|s| {
        s.state = HelperState::Stopped;
        s.pid = None;
    });
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Whether `pid` is gone or a zombie (dead, not yet reaped).
    fn dead(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |stat| stat[stat.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
    }

    #[test]
    fn a_helper_dies_with_the_thread_that_started_it_even_if_nothing_drops_it() {
        let pid = std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let config = ExtProcConfig::new("sleep", std::env::temp_dir().join("unused.sock"));
                let mut cmd = command(&ExtProcConfig { args: vec!["1000".into()], ..config });
                let child = cmd.spawn().unwrap();
                let pid = child.id().unwrap();
                // Neither dropped (kill_on_drop) nor waited for: as when the process exits first.
                std::mem::forget(child);
                pid
            })
        })
        .join()
        .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !dead(pid) {
            assert!(std::time::Instant::now() < deadline, "the helper outlived the thread that started it");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Reaped, so the test leaves no zombie behind.
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    }
}
