#!/usr/bin/env bash
# A profile-guided (PGO) release build of `sluice`, the build to run in production and to
# benchmark: the compiler lays out, inlines and splits hot from cold code by how the proxy
# actually runs. On 1 KiB cache hits it runs about a quarter fewer instructions than the plain
# release build and serves 13-15% more requests per CPU second (docs/benchmarks.md,
# "Profile-guided build").
#
#   scripts/build-pgo.sh          # -> target/pgo/sluice (about 12 minutes on 2 cores)
#
# 1. builds `sluice` instrumented (-Cprofile-generate) into target/pgo-generate;
# 2. runs the training workload, bench/pgo/train.sh, against it (loopback only);
# 3. merges the raw profiles with llvm-profdata of rustc's own LLVM version;
# 4. builds `sluice` again with -Cprofile-use into target/pgo-use and copies it to
#    target/pgo/sluice.
# The normal target/ build is left alone (each step has its own target directory).
#
# llvm-profdata must match rustc's LLVM major version: rustup's `llvm-tools` component when
# installed, else `llvm-profdata-<major>` from the Debian package `llvm-<major>` (installed
# here when missing; NO_INSTALL=1 fails instead).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
log() { printf '[build-pgo] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
source bench/lib.sh # install_missing

llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[[ -n $llvm_major ]] || die "cannot tell rustc's LLVM version (rustc -vV)"

# The llvm-profdata that reads this rustc's raw profiles.
profdata_tool() {
    local rustup_tool
    rustup_tool=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata
    if [[ -x $rustup_tool ]]; then echo "$rustup_tool"; return; fi
    command -v "llvm-profdata-$llvm_major" >/dev/null || install_missing "llvm-$llvm_major" ||
        die "no llvm-profdata-$llvm_major (rustup component add llvm-tools, or the Debian package llvm-$llvm_major)"
    command -v "llvm-profdata-$llvm_major"
}
profdata=$(profdata_tool)

profiles=$ROOT/target/pgo-profiles
rm -rf "$profiles"
mkdir -p "$profiles"

log "1/4 instrumented build (target/pgo-generate)"
CARGO_TARGET_DIR=$ROOT/target/pgo-generate RUSTFLAGS="-Cprofile-generate=$profiles/raw" \
    cargo build --release --locked -p sluice --quiet
# Build scripts and proc macros were instrumented too and may have written profiles while
# building: only the training's count.
rm -rf "$profiles/raw"

log "2/4 training (bench/pgo/train.sh)"
bench/pgo/train.sh "$ROOT/target/pgo-generate/release/sluice"
compgen -G "$profiles/raw/*.profraw" >/dev/null || die "the training wrote no profile"

log "3/4 merging the profiles ($profdata)"
"$profdata" merge -o "$profiles/merged.profdata" "$profiles"/raw/*.profraw
# Named by its content: cargo does not look into the file a flag names, so a new profile must
# change the flags to rebuild what an old one built.
profile=$profiles/sluice-$(sha256sum "$profiles/merged.profdata" | cut -c1-16).profdata
mv "$profiles/merged.profdata" "$profile"

log "4/4 optimized build (target/pgo-use)"
CARGO_TARGET_DIR=$ROOT/target/pgo-use RUSTFLAGS="-Cprofile-use=$profile" \
    cargo build --release --locked -p sluice --quiet
mkdir -p target/pgo
cp target/pgo-use/release/sluice target/pgo/sluice
log "built target/pgo/sluice"
