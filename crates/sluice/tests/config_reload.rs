//! SIGHUP reloads the whole `--config` file of a running `sluice serve` (as `nginx -s
//! reload` and `squid -k reconfigure` do): access rules change for the next connection, a
//! listener added to the file is listened on, settings that need a restart are named in the log and keep their values, and a file that
//! does not parse changes nothing. Waits poll a condition with a deadline; nothing sleeps as
//! synchronisation.

mod common;

use common::{exchange, free_port, serve_configured, signal, until, Configured};
use std::path::Path;

fn log_has(log: &Path, text: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|l| l.contains(text))
}

#[test]
fn sighup_reloads_the_configuration_file() {
    let Configured { dir: _dir, proxy, admin, base, config, log, mut server } = serve_configured("1");
    let health = "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    until("the admin API", || exchange(admin, health).is_ok_and(|r| r.starts_with("HTTP/1.1 200")));
    // An origin that refuses connections: 502 while the client is allowed, 403 once not.
    let refused = free_port();
    let get =
        format!("GET http://127.0.0.1:{refused}/x HTTP/1.1\r\nHost: 127.0.0.1:{refused}\r\nConnection: close\r\n\r\n");
    let status = || exchange(proxy, &get).unwrap_or_default().get(..12).unwrap_or_default().to_owned();
    assert_eq!(status(), "HTTP/1.1 502");

    let extra = format!("127.0.0.1:{}", free_port());
    let reloaded =
        format!("{base}allow = [\"10.0.0.0/8\"]\n\n[[listener]]\naddr = \"{extra}\"\n\n[cache]\nmemory = \"1GiB\"\n");
    std::fs::write(&config, reloaded).unwrap();
    signal(&server.0, "HUP");
    // The reload's last log line, written after the others (a read between two of its lines
    // would see only the first).
    until("the restart warning in the log", || {
        log_has(&log, "keep their running values until a restart: cache.memory")
    });
    assert!(log_has(&log, "SIGHUP: configuration reloaded from"));
    assert!(log_has(&log, &format!("SIGHUP: listening on {extra}")));
    assert_eq!(status(), "HTTP/1.1 403", "loopback is no longer allowed");
    let on_extra = exchange(extra.parse().unwrap(), &get).unwrap_or_default();
    assert!(on_extra.starts_with("HTTP/1.1 403"), "the new listener serves, by the new rules: {on_extra}");

    std::fs::write(&config, format!("{base}[access\n")).unwrap();
    signal(&server.0, "HUP");
    until("the refusal in the log", || log_has(&log, "the running configuration is unchanged"));
    assert_eq!(status(), "HTTP/1.1 403", "the last good configuration runs on");

    signal(&server.0, "TERM");
    let exit = server.0.wait().unwrap();
    assert!(exit.success(), "{exit}: {}", std::fs::read_to_string(&log).unwrap_or_default());
}

#[test]
fn sluice_ctl_reload_reloads_the_file_and_reports_a_rejected_one() {
    let Configured { dir: _dir, proxy, admin, base, config, log, server: _server } = serve_configured("1");
    let health = "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    until("the admin API", || exchange(admin, health).is_ok_and(|r| r.starts_with("HTTP/1.1 200")));
    // The admin address and token as flags: the file may not parse.
    let admin_flag = admin.to_string();
    let ctl = || common::sluice().args(["ctl", "--admin", &admin_flag, "--token", "t", "reload"]).output().unwrap();
    let get = "GET http://127.0.0.1:1/x HTTP/1.1\r\nHost: 127.0.0.1:1\r\nConnection: close\r\n\r\n";
    let status = || exchange(proxy, get).unwrap_or_default().get(..12).unwrap_or_default().to_owned();

    std::fs::write(&config, format!("{base}allow = [\"10.0.0.0/8\"]\n")).unwrap();
    let reloaded = ctl();
    assert!(reloaded.status.success(), "{}", String::from_utf8_lossy(&reloaded.stderr));
    let report: serde_json::Value = serde_json::from_slice(&reloaded.stdout).unwrap();
    assert_eq!(report["path"], config.display().to_string());
    assert_eq!(report["listeners"]["listening"], serde_json::json!([proxy.to_string()]));
    assert_eq!(status(), "HTTP/1.1 403", "the new access rules");
    let running = common::sluice().args(["ctl", "--admin", &admin_flag, "--token", "t", "config"]).output().unwrap();
    let running = String::from_utf8_lossy(&running.stdout);
    assert!(running.contains("allow = [\"10.0.0.0/8\"]") && running.contains("token = \"(redacted)\""), "{running}");

    std::fs::write(&config, format!("{base}[access\n")).unwrap();
    let rejected = ctl();
    assert!(!rejected.status.success());
    let why = String::from_utf8_lossy(&rejected.stderr);
    assert!(why.contains("400") && why.contains("configuration rejected, nothing changed"), "{why}");
    assert_eq!(status(), "HTTP/1.1 403", "the last good configuration runs on");
    assert!(log_has(&log, "configuration reloaded"), "the reload is logged");
}
