//! Running `sluice serve` as a child process in tests: free ports, plain HTTP/1.1 exchanges,
//! signals, and waits that poll a condition with a deadline (nothing sleeps as
//! synchronisation).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `sluice` binary under test.
pub fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// A free port on 127.0.0.1 (bound, then released for sluice to take).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One HTTP/1.1 exchange on a new connection; the whole response as text.
pub fn exchange(addr: SocketAddr, request: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

/// Polls `done` for up to 30 s.
pub fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends the signal `name` (`HUP`, `USR1`, `TERM`) to `child`.
pub fn signal(child: &Child, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
}

/// Stops the server (by its pid) if the test fails half-way.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `sluice serve --config` child whose file starts with `base`: a listener and an admin
/// listener (token `t`) on free ports. Its standard error goes to `log`.
pub struct Configured {
    pub dir: tempfile::TempDir,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    /// The listener and admin sections; tests append to it and rewrite `config`.
    pub base: String,
    pub config: PathBuf,
    pub log: PathBuf,
    pub server: Server,
}

/// Starts `sluice serve --threads threads` on a [`Configured`] file holding `base` only.
pub fn serve_configured(threads: &str) -> Configured {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, admin): (SocketAddr, SocketAddr) =
        (format!("127.0.0.1:{}", free_port()).parse().unwrap(), format!("127.0.0.1:{}", free_port()).parse().unwrap());
    // Ends in `[access]`, which allows forward requests to loopback origins: a test adds
    // access settings by appending `key = value` lines.
    let base = format!(
        "[[listener]]\naddr = \"{proxy}\"\n\n[admin]\naddr = \"{admin}\"\ntoken = \"t\"\n\n[access]\nallow_destinations = [\"127.0.0.0/8\"]\n"
    );
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, &base).unwrap();
    let log = dir.path().join("stderr.log");
    let server = Server(
        sluice()
            .args(["serve", "--threads", threads, "--config"])
            .arg(&config)
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap(),
    );
    Configured { dir, proxy, admin, base, config, log, server }
}

/// The URLs in an access log file, line by line (none if it does not exist).
pub fn logged_urls(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|line| line.split_whitespace().nth(6).unwrap_or_default().to_owned()).collect()
}

/// Starts `sluice serve --threads 1` (with `extra` arguments) on `dir/sluice.toml`, with a
/// listener, an admin listener (token `t`), forward requests to loopback allowed, and
/// `access_log`; its standard error goes to `stderr`. Returns once the admin API answers,
/// with the proxy's and the admin listener's addresses.
pub fn serve_logging(
    dir: &Path,
    access_log: &Path,
    stderr: &Path,
    extra: &[&std::ffi::OsStr],
) -> (Server, SocketAddr, SocketAddr) {
    let (proxy, admin): (SocketAddr, SocketAddr) =
        (format!("127.0.0.1:{}", free_port()).parse().unwrap(), format!("127.0.0.1:{}", free_port()).parse().unwrap());
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "[[listener]]\naddr = \"{proxy}\"\n\n[admin]\naddr = \"{admin}\"\ntoken = \"t\"\n\n[access]\nallow_destinations = [\"127.0.0.1\"]\n\n[log]\naccess_log = {:?}\n",
            access_log.display().to_string()
        ),
    )
    .unwrap();
    let server = Server(
        sluice()
            .args(["serve", "--threads", "1", "--config"])
            .arg(&config)
            .args(extra)
            .stderr(Stdio::from(std::fs::File::create(stderr).unwrap()))
            .spawn()
            .unwrap(),
    );
    let health = "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    until("the admin API", || exchange(admin, health).is_ok_and(|r| r.starts_with("HTTP/1.1 200")));
    (server, proxy, admin)
}

/// A forward GET through `proxy` of `path` at the origin port `refused`, where nothing
/// listens: a `502`, logged with its URL.
pub fn get_refused(proxy: SocketAddr, refused: u16, path: &str) {
    let request = format!(
        "GET http://127.0.0.1:{refused}{path} HTTP/1.1\r\nHost: 127.0.0.1:{refused}\r\nConnection: close\r\n\r\n"
    );
    let response = exchange(proxy, &request).unwrap_or_default();
    assert!(response.starts_with("HTTP/1.1 502"), "{response}");
}
