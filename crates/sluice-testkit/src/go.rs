//! Go programs of interoperability tests (a peer built on another project's own library, such
//! as grpc-go or Envoy's Go API), built with the Go toolchain.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the Go module in `dir` into `$CARGO_TARGET_DIR/<output>` (else `target/<output>`
/// under `workspace`) and returns the binary's path. Go is looked for in `$GO`, on `PATH`,
/// then at `/usr/local/go/bin/go`: the first that is Go 1.21 or later (which fetches the
/// toolchain `go.mod` names by itself); modules come from the Go module proxy.
/// `scripts/install-deps.sh` installs Go where it is missing. Panics when the build fails.
pub fn build(dir: &Path, workspace: &Path, output: &str) -> PathBuf {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(target) => PathBuf::from(target),
        None => workspace.join("target"),
    };
    let binary = target.join(output);
    let go = std::env::var_os("GO")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("go"), PathBuf::from("/usr/local/go/bin/go")])
        .find(|go| usable(go))
        .expect("Go 1.21 or later is needed to build an interoperability peer: run scripts/install-deps.sh");
    let built = Command::new(go)
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(dir)
        .output()
        .expect("run go build");
    assert!(
        built.status.success(),
        "building the Go program in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    binary
}

/// Whether `go` runs and is Go 1.21 or later, as `scripts/install-deps.sh` checks.
fn usable(go: &Path) -> bool {
    let Ok(out) = Command::new(go).args(["env", "GOVERSION"]).output() else { return false };
    let version = String::from_utf8_lossy(&out.stdout);
    let minor =
        version.trim().strip_prefix("go1.").and_then(|rest| rest.split(['.', 'r', 'b']).next()?.parse::<u32>().ok());
    out.status.success() && minor.is_some_and(|minor| minor >= 21)
}
