//! Disk full for real: the tier on a 4 MiB tmpfs with a configured capacity far above it.
//! Needs permission to mount (root); skipped otherwise. The same behaviour is also tested
//! with an injected ENOSPC in the crate's unit tests, which always run.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use sluice_http::freshness::LifetimeSource;
use sluice_policy::{Capacity, PolicyConfig};
use sluice_store::disk::{DiskConfig, DiskLookup, DiskTier, NotStored};
use sluice_store::{Object, ObjectMeta, StoredBody};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Option<Mount> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(at.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn object(key: &str, len: usize) -> Object {
    let meta = ObjectMeta {
        key: key.to_owned(),
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        vary: Vec::new(),
        vary_key: Vec::new(),
        request_time: UNIX_EPOCH,
        response_time: UNIX_EPOCH,
        initial_age: Duration::ZERO,
        lifetime: Duration::from_secs(60),
        lifetime_source: LifetimeSource::MaxAge,
        cc: Default::default(),
    };
    let body = Bytes::from(vec![key.len() as u8; len]);
    Object::new(Arc::new(meta), StoredBody::new(vec![body]))
}

#[test]
fn a_full_filesystem_stops_admission_without_failing_reads() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_mount) = Mount::tmpfs(dir.path(), "4m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let capacity = 1 << 30;
    let policy = sluice_policy::build("lru", &PolicyConfig::new(Capacity::Bytes(capacity))).unwrap();
    let config = DiskConfig { full_backoff: Duration::from_millis(200), ..DiskConfig::new(capacity, u64::MAX) };
    let (tier, _) = DiskTier::open_with(dir.path(), config, policy).unwrap();

    let mut stored = Vec::new();
    let mut outcome = Ok(());
    for i in 0..100 {
        let key = format!("http://full/{i}");
        match tier.insert(&object(&key, 256 << 10)) {
            Ok(_) => stored.push(key),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    assert_eq!(outcome, Err(NotStored::Full), "the 4 MiB tmpfs filled up");
    assert!(!stored.is_empty());
    let s = tier.stats();
    assert_eq!(s.full_events, 1);
    assert!(s.admission_paused);
    assert!(s.limit_bytes < capacity, "the byte limit shrank to what the disk holds: {s:?}");
    assert!(std::fs::read_dir(dir.path().join("tmp")).unwrap().next().is_none(), "failed write cleaned up");

    // Admission is closed during the pause; reads of what is stored keep working.
    assert_eq!(tier.insert(&object("http://full/late", 1000)).unwrap_err(), NotStored::Full);
    let mut served = 0;
    for key in &stored {
        if let DiskLookup::Found(entry) = tier.lookup(key, |_| true) {
            let body = tier.open_body(&entry).unwrap().read_all().unwrap();
            assert_eq!(body.len(), 256 << 10);
            served += 1;
        }
    }
    assert!(served > 0, "reads keep working");

    // After the pause the tier admits again: the eviction at ENOSPC made room.
    std::thread::sleep(Duration::from_millis(250));
    tier.insert(&object("http://full/after", 256 << 10)).unwrap();
    eprintln!("stored {} objects before ENOSPC; {served} still served; stats {:?}", stored.len(), tier.stats());
}
