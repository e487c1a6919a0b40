//! kill -9 during writes never yields a corrupt hit.
//!
//! The test binary re-runs itself as a writer (`crash_writer_child`, activated by an
//! environment variable) that stores objects in a loop and prints each acknowledged commit;
//! the parent kills it with SIGKILL at a seeded random moment, reopens the directory, and
//! checks that recovery left no temporary file, that every indexed object verifies and is
//! exactly what the writer meant to write, and (in rounds without eviction) that every
//! acknowledged write survived.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sluice_policy::{Capacity, PolicyConfig};
use sluice_store::disk::{DiskConfig, DiskLookup, DiskTier, NotStored};
use sluice_store::{Object, ObjectMeta, StoredBody};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

const DIR_VAR: &str = "SLUICE_DISK_CRASH_DIR";
const ROUND_VAR: &str = "SLUICE_DISK_CRASH_ROUND";
const KEYS: u64 = 48;
const ROUNDS: u64 = 12;

/// Byte capacity per round: even rounds never evict (so durability of acknowledged writes
/// can be checked exactly), odd rounds evict constantly.
fn capacity(round: u64) -> u64 {
    if round.is_multiple_of(2) {
        1 << 34
    } else {
        2 << 20
    }
}

fn open(dir: &Path, round: u64) -> (DiskTier, sluice_store::disk::RecoveryReport) {
    let cap = capacity(round);
    let policy = sluice_policy::build("lru", &PolicyConfig::new(Capacity::Bytes(cap))).unwrap();
    DiskTier::open_with(dir, DiskConfig::new(cap, u64::MAX), policy).unwrap()
}

/// What write `(round, i)` stores: its key and body are functions of the pair, and the pair
/// is in a header, so a reader can tell exactly what a stored object should be.
fn intended(round: u64, i: u64) -> (String, Bytes) {
    let mut rng = ChaCha8Rng::seed_from_u64(round << 32 | i);
    let key = format!("http://crash.test/{}", rng.gen_range(0..KEYS));
    let len = if rng.gen_bool(0.1) { rng.gen_range(0..(1 << 20)) } else { rng.gen_range(0..(96 << 10)) };
    // A random 4 KiB block repeated, each copy stamped with its index: cheap to make in a
    // debug build, so the writer spends its time writing, and no two blocks are alike.
    let mut block = [0u8; 4096];
    rng.fill(&mut block[..]);
    let mut body = Vec::with_capacity(len);
    for k in 0..len.div_ceil(4096) {
        let n = (len - body.len()).min(4096);
        let start = body.len();
        body.extend_from_slice(&block[..n]);
        let stamp = (k as u32).to_le_bytes();
        let m = n.min(4);
        body[start..start + m].copy_from_slice(&stamp[..m]);
    }
    (key, body.into())
}

fn meta(key: &str, round: u64, i: u64) -> Arc<ObjectMeta> {
    let mut headers = HeaderMap::new();
    headers.insert("x-write", HeaderValue::from_str(&format!("{round}:{i}")).unwrap());
    Arc::new(ObjectMeta {
        request_time: UNIX_EPOCH + Duration::from_secs(round),
        response_time: UNIX_EPOCH + Duration::from_secs(i),
        ..ObjectMeta::ok(key, headers, Duration::from_secs(60))
    })
}

fn write_of(meta: &ObjectMeta) -> (u64, u64) {
    let v = meta.headers["x-write"].to_str().unwrap();
    let (r, i) = v.split_once(':').unwrap();
    (r.parse().unwrap(), i.parse().unwrap())
}

/// The writer: does nothing unless started by the parent test.
#[test]
fn crash_writer_child() {
    let Ok(dir) = std::env::var(DIR_VAR) else { return };
    let round: u64 = std::env::var(ROUND_VAR).unwrap().parse().unwrap();
    let (tier, _) = open(Path::new(&dir), round);
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(round);
    for i in 0.. {
        let (key, body) = intended(round, i);
        let meta = meta(&key, round, i);
        let outcome = if rng.gen_bool(0.2) {
            let chunks = body.chunks(50_000).map(Bytes::copy_from_slice).collect();
            tier.insert(&Object::new(meta, StoredBody::new(chunks)))
        } else {
            let mut writer = tier.begin(meta).unwrap();
            let mut rest = &body[..];
            while !rest.is_empty() {
                let n = rng.gen_range(1..=rest.len().min(64 << 10));
                writer.write_chunk(&rest[..n]).unwrap();
                rest = &rest[n..];
            }
            if rng.gen_bool(0.1) {
                writer.abort();
                continue;
            }
            writer.commit()
        };
        match outcome {
            Ok(_) => {
                writeln!(out, "C {i}").unwrap();
                out.flush().unwrap();
            }
            Err(NotStored::TooLarge) => {}
            Err(e) => panic!("write {i}: {e}"),
        }
    }
}

#[derive(Debug, Default)]
struct Totals {
    acknowledged: u64,
    recovered: u64,
    dropped_incomplete: u64,
    dropped_corrupt: u64,
    dropped_superseded: u64,
    served: u64,
}

#[test]
fn kill_9_during_writes_never_yields_a_corrupt_hit() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    let mut totals = Totals::default();
    for round in 0..ROUNDS {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["crash_writer_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(DIR_VAR, dir.path())
            .env(ROUND_VAR, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Wait until the child has recovered and starts writing, then let it write a while.
        // (libtest prints "test crash_writer_child ... " before the test's own output.)
        for line in lines.by_ref() {
            if line.unwrap().ends_with("READY") {
                break;
            }
        }
        let reader = std::thread::spawn(move || {
            lines
                .map_while(Result::ok)
                .filter_map(|l| l.strip_prefix("C ").map(|i| i.parse::<u64>().unwrap()))
                .collect()
        });
        let run = Duration::from_millis(rng.gen_range(30..300));
        let started = Instant::now();
        std::thread::sleep(run);
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(status.code().is_none(), "the writer died of the signal, not on its own: {status:?}");
        let acknowledged: Vec<u64> = reader.join().unwrap();
        let tmp_left = std::fs::read_dir(dir.path().join("tmp")).unwrap().count();

        let (tier, report) = open(dir.path(), round);
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0, "temporary files are gone");
        assert_eq!(report.dropped_incomplete as usize, tmp_left, "{report:?}");
        assert_eq!(report.dropped_corrupt, 0, "kill -9 cannot corrupt a committed file: {report:?}");

        // Everything indexed verifies and is exactly what the writer meant.
        let mut served = 0;
        let mut found: HashMap<String, (u64, u64)> = HashMap::new();
        for k in 0..KEYS {
            let key = format!("http://crash.test/{k}");
            let DiskLookup::Found(entry) = tier.lookup(&key, |_| true) else { continue };
            let (r, i) = write_of(&entry.meta);
            let (want_key, want_body) = intended(r, i);
            assert_eq!(want_key, key);
            let body = tier.open_body(&entry).unwrap_or_else(|e| panic!("{key}: {e}")).read_all().unwrap();
            assert!(body == want_body, "{key}: body of write {r}:{i} differs");
            found.insert(key, (r, i));
            served += 1;
        }
        assert_eq!(served, tier.stats().objects, "every indexed object was served");
        let files = walk(&dir.path().join("objects"));
        assert_eq!(files as u64, tier.stats().objects, "no file on disk outside the index");

        // Without eviction, every acknowledged write survived (or a newer write of its key).
        if capacity(round) > 1 << 33 {
            let mut last: HashMap<String, u64> = HashMap::new();
            for &i in &acknowledged {
                last.insert(intended(round, i).0, i);
            }
            for (key, i) in last {
                let got = found.get(&key).copied();
                assert!(
                    got.is_some_and(|w| w >= (round, i)),
                    "{key}: acknowledged write {round}:{i} lost, found {got:?}"
                );
            }
        }
        eprintln!(
            "round {round}: ran {:?}, {} acknowledged, recovered {}, dropped incomplete {} / corrupt {} / superseded {}, served {served}",
            started.elapsed(),
            acknowledged.len(),
            report.recovered,
            report.dropped_incomplete,
            report.dropped_corrupt,
            report.dropped_superseded,
        );
        totals.acknowledged += acknowledged.len() as u64;
        totals.recovered += report.recovered;
        totals.dropped_incomplete += report.dropped_incomplete;
        totals.dropped_corrupt += report.dropped_corrupt;
        totals.dropped_superseded += report.dropped_superseded;
        totals.served += served;
    }
    eprintln!("{ROUNDS} rounds: {totals:?}");
    assert!(totals.acknowledged > 0, "the writer made progress");
    assert!(totals.dropped_incomplete > 0, "some kill landed mid-write");
}

fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).map(|p| if p.is_dir() { walk(&p) } else { 1 }).sum()
}
