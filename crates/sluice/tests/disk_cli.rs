//! `[cache.disk]` from the command line: `--check-config` and start-up errors.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn config(dir: &std::path::Path, extra: &str) -> String {
    format!(
        "[[listener]]\naddr = \"127.0.0.1:0\"\n\n[admin]\nenabled = false\n\n[cache.disk]\ndir = {:?}\nsize = \"64MiB\"\n{extra}",
        dir.display().to_string()
    )
}

#[test]
fn check_config_validates_the_disk_section() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.toml");
    std::fs::write(&good, config(&tmp.path().join("cache"), "max_entries = 1000\npromote_max = \"256KiB\"\n")).unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&good).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, config(&tmp.path().join("cache"), "high_water = 0.5\nlow_water = 0.9\n")).unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("water marks"), "{err}");
}

#[test]
fn a_directory_held_by_another_process_stops_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("sluice.toml");
    std::fs::write(&path, config(&tmp.path().join("cache"), "")).unwrap();
    let mut first = sluice().args(["serve", "--config"]).arg(&path).stderr(Stdio::piped()).spawn().unwrap();
    // Wait (bounded) until the first process is serving, so it holds the directory.
    let stderr = first.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("listening on") {
                let _ = tx.send(());
            }
        }
    });
    let serving = rx.recv_timeout(Duration::from_secs(20));
    let started = Instant::now();
    let second = sluice().args(["serve", "--config"]).arg(&path).output().unwrap();
    let _ = first.kill();
    let _ = first.wait();
    assert!(serving.is_ok(), "the first process did not start");
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("cache.disk.dir") && err.contains("locked by another process"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
}
