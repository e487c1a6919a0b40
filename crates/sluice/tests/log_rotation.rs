//! Rotating the access log of a running `sluice serve` as logrotate does it: the file is
//! renamed, then the proxy is asked to reopen it, by `SIGUSR1` (as nginx, and Squid's
//! `squid -k rotate`), by `POST /log/reopen` on the admin listener, or by `sluice ctl
//! reopen-log`. Lines written before
//! stay in the renamed file, later ones go to a new file at the configured path, none is lost.
//! The signal goes to the process id of `--pid-file`, as a logrotate script sends it.
//! Waits poll a condition with a deadline; nothing sleeps as synchronisation.

mod common;

use common::{exchange, free_port, get_refused, logged_urls as logged, serve_logging, signal, sluice, until};

#[test]
fn the_access_log_is_reopened_on_sigusr1_and_by_the_admin_api() {
    let dir = tempfile::tempdir().unwrap();
    let access = dir.path().join("access.log");
    let stderr = dir.path().join("stderr.log");
    let pid_file = dir.path().join("sluice.pid");
    let (mut server, proxy, admin) =
        serve_logging(dir.path(), &access, &stderr, &["--pid-file".as_ref(), pid_file.as_os_str()]);
    let config = dir.path().join("sluice.toml");
    // Each request goes to an origin that refuses connections: a 502, logged with its URL.
    let refused = free_port();
    let get = |path: &str| get_refused(proxy, refused, path);
    let url = |path: &str| format!("http://127.0.0.1:{refused}{path}");
    until("the pid file", || std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n')));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert_eq!(pid.trim(), server.0.id().to_string());

    get("/one");
    until("the first line", || logged(&access) == [url("/one")]);
    let first = dir.path().join("access.log.1");
    std::fs::rename(&access, &first).unwrap();
    get("/two");
    until("the second line, in the renamed file", || logged(&first) == [url("/one"), url("/two")]);
    let usr1 = std::process::Command::new("kill").args(["-USR1", pid.trim()]).status().unwrap();
    assert!(usr1.success());
    until("the reopen", || std::fs::read_to_string(&stderr).is_ok_and(|l| l.contains("SIGUSR1: access log reopened")));
    get("/three");
    until("a line in the new file", || logged(&access) == [url("/three")]);

    let second = dir.path().join("access.log.2");
    std::fs::rename(&access, &second).unwrap();
    let reopen = "POST /log/reopen HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let answer = exchange(admin, reopen).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("access log reopened\n"), "{answer}");
    get("/four");
    until("a line in the newest file", || logged(&access) == [url("/four")]);
    assert_eq!(logged(&second), [url("/three")]);
    assert_eq!(logged(&first), [url("/one"), url("/two")]);

    // `sluice ctl reopen-log` asks the same, with the admin address and token of the file.
    let third = dir.path().join("access.log.3");
    std::fs::rename(&access, &third).unwrap();
    let ctl = sluice().args(["ctl", "--config"]).arg(&config).arg("reopen-log").output().unwrap();
    assert!(ctl.status.success(), "{}", String::from_utf8_lossy(&ctl.stderr));
    get("/five");
    until("a line in the file reopened by ctl", || logged(&access) == [url("/five")]);
    assert_eq!(logged(&third), [url("/four")]);

    let unauthorized =
        exchange(admin, "POST /log/reopen HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert!(unauthorized.unwrap().starts_with("HTTP/1.1 401"));

    signal(&server.0, "TERM");
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status}: {}", std::fs::read_to_string(&stderr).unwrap_or_default());
    assert!(!pid_file.exists(), "the pid file goes with a clean stop");
}
