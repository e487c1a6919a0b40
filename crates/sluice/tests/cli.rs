//! The `sluice` command line as users run it.

use std::process::Command;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

#[test]
fn check_config_accepts_a_valid_file_and_names_the_problem_in_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[cache]\nmemory = \"64MiB\"\n\n[[module]]\nname = \"add-headers\"\n").unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&good).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("configuration is valid"));

    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "[cache]\nmemroy = \"64MiB\"\n").unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&typo).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("typo.toml") && err.contains("memroy"), "{err}");

    let module = dir.path().join("module.toml");
    std::fs::write(&module, "[[module]]\nname = \"nope\"\n").unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&module).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("built-in modules: noop"));

    let users = dir.path().join("users");
    std::fs::write(&users, "ann:plaintext\n").unwrap();
    let auth = dir.path().join("auth.toml");
    std::fs::write(&auth, format!("[proxy_auth]\nusers_file = {:?}\n", users.display().to_string())).unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&auth).output().unwrap();
    assert!(!out.status.success(), "a users file that is not bcrypt is caught before start");
    assert!(String::from_utf8_lossy(&out.stderr).contains("htpasswd -B"));

    let origin_ca = dir.path().join("origin-ca.toml");
    std::fs::write(&origin_ca, "[upstream.tls]\nca_file = \"/nonexistent/ca.pem\"\n").unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&origin_ca).output().unwrap();
    assert!(!out.status.success(), "an unreadable CA file is caught before start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("upstream.tls") && err.contains("cannot read /nonexistent/ca.pem"), "{err}");

    let files = dir.path().join("files.toml");
    std::fs::write(&files, "[[route]]\nfiles = { root = \"/nonexistent/dir\" }\n").unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&files).output().unwrap();
    assert!(!out.status.success(), "a files root that is not there is caught before start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("route `*/`: files.root /nonexistent/dir"), "{err}");
    assert!(err.contains("files.toml"), "{err}");

    let log = dir.path().join("log.toml");
    std::fs::write(&log, "[log]\naccess_log = \"/nonexistent/dir/access.log\"\n").unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&log).output().unwrap();
    assert!(!out.status.success(), "an access log that cannot be created is caught before start");
    assert!(String::from_utf8_lossy(&out.stderr).contains("its directory /nonexistent/dir does not exist"));

    // A certificate ending within 14 days: valid, with a warning.
    let (cert, key) = (dir.path().join("soon.pem"), dir.path().join("soon.key"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "5"])
        .args(["-subj", "/CN=soon.test", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let tls = dir.path().join("tls.toml");
    let listener = format!("[[listener]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = {cert:?}, key = {key:?} }}\n");
    std::fs::write(&tls, listener).unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&tls).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: TLS for 127.0.0.1:0:") && err.contains("soon.pem expires in"), "{err}");

    let unused = dir.path().join("unused.toml");
    std::fs::write(&unused, "[[route]]\norigin = \"http://127.0.0.1:9\"\n").unwrap();
    let out = sluice().args(["serve", "--check-config"]).arg(&unused).output().unwrap();
    assert!(out.status.success(), "valid, with a warning");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: [[route]] entries are configured but no [[listener]]"), "{err}");
}

#[test]
fn print_config_shows_the_embedded_defaults() {
    let out = sluice().args(["serve", "--print-config"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("addr = \"127.0.0.1:3128\""), "{text}");
    assert!(text.contains("memory = \"256MiB\""), "{text}");
}

#[test]
fn print_config_redacts_the_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sluice.toml");
    std::fs::write(&file, "[admin]\ntoken = \"s3cret-admin-token\"\n").unwrap();
    let out = sluice().args(["serve", "--print-config", "--config"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("s3cret-admin-token"), "{text}");
    assert!(text.contains("token = \"(redacted)\""), "as GET /config shows it: {text}");
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["serve", "sim"] {
        let out = sluice().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success(), "{sub} --help");
        assert!(!out.stdout.is_empty());
    }
}
