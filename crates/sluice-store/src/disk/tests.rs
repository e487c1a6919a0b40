use super::*;
use crate::disk::format::HEADER_LEN;
use crate::SweepRule;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use sluice_http::freshness::LifetimeSource;
use sluice_policy::{Capacity, PolicyConfig};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::AtomicBool;
use std::time::UNIX_EPOCH;

fn meta(key: &str, vary_key: Vec<Option<String>>, len: Option<usize>) -> Arc<ObjectMeta> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.append("x-multi", HeaderValue::from_static("one"));
    headers.append("x-multi", HeaderValue::from_static("two"));
    if let Some(len) = len {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    Arc::new(ObjectMeta {
        key: key.to_owned(),
        status: StatusCode::OK,
        headers,
        vary: if vary_key.is_empty() { Vec::new() } else { vec![http::header::ACCEPT_ENCODING] },
        vary_key,
        request_time: UNIX_EPOCH + Duration::new(1_700_000_000, 1),
        response_time: UNIX_EPOCH + Duration::new(1_700_000_000, 999),
        initial_age: Duration::from_secs(3),
        lifetime: Duration::from_secs(600),
        lifetime_source: LifetimeSource::MaxAge,
        cc: sluice_http::CacheControl { max_age: Some(600), public: true, ..Default::default() },
    })
}

fn body_of(seed: u64, len: usize) -> Bytes {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

fn object(key: &str, len: usize) -> Object {
    let body = body_of(len as u64 ^ key.len() as u64, len);
    let chunks: Vec<Bytes> = body.chunks(100_000).map(Bytes::copy_from_slice).collect();
    Object::new(meta(key, Vec::new(), Some(len)), StoredBody::new(chunks))
}

fn lru(capacity: u64) -> Box<dyn Policy> {
    sluice_policy::build("lru", &PolicyConfig::new(Capacity::Bytes(capacity))).unwrap()
}

fn open(dir: &Path, capacity: u64) -> (DiskTier, RecoveryReport) {
    DiskTier::open(dir, capacity, u64::MAX, lru(capacity), WaterMarks::default()).unwrap()
}

fn found(tier: &DiskTier, key: &str) -> Arc<DiskEntry> {
    match tier.lookup(key, |_| true) {
        DiskLookup::Found(e) => e,
        other => panic!("{key}: {other:?}"),
    }
}

fn served(tier: &DiskTier, key: &str) -> Bytes {
    tier.open_body(&found(tier, key)).unwrap().read_all().unwrap()
}

fn e_id(tier: &DiskTier) -> u64 {
    tier.variants("http://v")[0].id()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn object_files(dir: &Path) -> Vec<PathBuf> {
    files_under(&dir.join("objects"))
}

fn assert_same_meta(a: &ObjectMeta, b: &ObjectMeta) {
    assert_eq!(a.key, b.key);
    assert_eq!(a.status, b.status);
    assert_eq!(a.headers, b.headers);
    assert_eq!(a.vary, b.vary);
    assert_eq!(a.vary_key, b.vary_key);
    assert_eq!(a.request_time, b.request_time);
    assert_eq!(a.response_time, b.response_time);
    assert_eq!(a.initial_age, b.initial_age);
    assert_eq!(a.lifetime, b.lifetime);
    assert_eq!(a.lifetime_source, b.lifetime_source);
    assert_eq!(a.cc, b.cc);
}

#[test]
fn restart_keeps_the_cache_byte_identical_with_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [0usize, 1, 100, 4095, 4096, 65_535, 65_536, 300_000, 1 << 20];
    let objects: Vec<Object> = (0..45).map(|i| object(&format!("http://o/{i}"), sizes[i % sizes.len()])).collect();
    {
        let (tier, report) = open(dir.path(), 1 << 30);
        assert_eq!(report.recovered, 0);
        for o in &objects {
            tier.insert(o).unwrap();
        }
        assert_eq!(tier.stats().objects, 45);
    }
    let (tier, report) = open(dir.path(), 1 << 30);
    assert_eq!(report.recovered, 45);
    assert_eq!(report.dropped_corrupt + report.dropped_incomplete + report.dropped_superseded, 0);
    assert_eq!(tier.stats().objects, 45);
    for o in &objects {
        let entry = found(&tier, &o.meta.key);
        assert_same_meta(&entry.meta, &o.meta);
        let served = tier.open_body(&entry).unwrap().read_all().unwrap();
        let expected: Vec<u8> = o.body.chunks().iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(served.as_ref(), expected.as_slice(), "{}", o.meta.key);
    }
    assert_eq!(tier.stats().verified_at_read, 45, "recovered bodies are verified at first serve");
    let entry = found(&tier, "http://o/8");
    tier.open_body(&entry).unwrap();
    assert_eq!(tier.stats().verified_at_read, 45, "and only then");
}

#[test]
fn large_bodies_start_on_a_page_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    let big = tier.insert(&object("http://big", 1 << 20)).unwrap();
    assert_eq!(tier.open_body(&big).unwrap().offset() % 4096, 0);
    let small = tier.insert(&object("http://small", 10)).unwrap();
    assert!(tier.open_body(&small).unwrap().offset() < 4096);
}

#[test]
fn variants_are_selected_and_replaced_by_newer_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    let gzip = vec![Some("gzip".to_owned())];
    let none = vec![None];
    for (vk, len) in [(gzip.clone(), 10), (none.clone(), 20), (gzip.clone(), 30)] {
        let o = Object::new(meta("http://v", vk, None), StoredBody::new(vec![body_of(len, len as usize)]));
        tier.insert(&o).unwrap();
    }
    assert_eq!(tier.variants("http://v").len(), 2);
    assert_eq!(tier.entry(e_id(&tier)).map(|e| e.meta.key.clone()).as_deref(), Some("http://v"));
    let DiskLookup::Found(e) = tier.lookup("http://v", |m| m.vary_key == gzip) else { panic!() };
    assert_eq!(e.body_len(), 30);
    assert!(matches!(tier.lookup("http://v", |_| false), DiskLookup::VaryMiss));
    assert!(matches!(tier.lookup("http://nope", |_| true), DiskLookup::Miss));
    assert_eq!(object_files(dir.path()).len(), 2, "the replaced file was deleted");
    drop(tier);
    let (tier, report) = open(dir.path(), 1 << 30);
    assert_eq!(report.recovered, 2);
    let DiskLookup::Found(e) = tier.lookup("http://v", |m| m.vary_key == gzip) else { panic!() };
    assert_eq!(e.body_len(), 30);
}

#[test]
fn an_older_generation_left_behind_is_superseded_at_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    let old = tier.insert(&object("http://r", 100)).unwrap();
    let old_copy = std::fs::read(old.path()).unwrap();
    let new = tier.insert(&object("http://r", 200)).unwrap();
    drop(tier);
    // As if the unlink of the old file had not reached the disk before a crash.
    std::fs::write(old.path(), old_copy).unwrap();
    let (tier, report) = open(dir.path(), 1 << 30);
    assert_eq!((report.recovered, report.dropped_superseded), (1, 1));
    assert_eq!(found(&tier, "http://r").generation(), new.generation());
    assert!(!old.path().exists());
}

#[test]
fn of_two_writes_of_a_variant_the_one_ticketed_later_is_kept_whichever_commits_last() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    let (older, newer) = (object("http://t", 100), object("http://t", 200));
    let older_ticket = tier.ticket();
    let newer_ticket = tier.ticket();
    let kept = tier.insert_ticketed(&newer, newer_ticket).unwrap();
    assert_eq!(tier.insert_ticketed(&older, older_ticket).unwrap_err(), NotStored::Superseded);
    assert_eq!(found(&tier, "http://t").generation(), kept.generation());
    assert_eq!(found(&tier, "http://t").body_len(), 200);
    assert_eq!(object_files(dir.path()).len(), 1, "the superseded file is gone");

    // The same for streamed writes: the order is the order of `begin`, not of `commit`.
    let mut first = tier.begin(meta("http://s", Vec::new(), None)).unwrap();
    let mut second = tier.begin(meta("http://s", Vec::new(), None)).unwrap();
    second.write_chunk(b"second").unwrap();
    second.commit().unwrap();
    first.write_chunk(b"first").unwrap();
    assert_eq!(first.commit().unwrap_err(), NotStored::Superseded);
    assert_eq!(found(&tier, "http://s").body_len(), 6);
    drop(tier);
    let (tier, report) = open(dir.path(), 1 << 30);
    assert_eq!(report.recovered, 2);
    assert_eq!(found(&tier, "http://s").body_len(), 6, "and so after a restart");
}

#[test]
fn remove_entry_removes_that_copy_only() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    let old = tier.insert(&object("http://e", 100)).unwrap();
    let new = tier.insert(&object("http://e", 200)).unwrap();
    assert!(!tier.remove_entry(&old), "replaced already");
    assert_eq!(found(&tier, "http://e").generation(), new.generation());
    assert!(tier.remove_entry(&new));
    assert!(matches!(tier.lookup("http://e", |_| true), DiskLookup::Miss));
    assert!(!new.path().exists());
    assert!(!tier.remove_entry(&new), "gone already");
    assert_eq!(tier.stats().objects, 0);
}

/// Flips one byte of the single stored object at `at(file_len, body_offset)`.
fn flip(dir: &Path, at: impl Fn(u64, u64) -> u64) {
    let files = object_files(dir);
    assert_eq!(files.len(), 1);
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&files[0]).unwrap();
    let len = file.metadata().unwrap().len();
    let mut header = [0u8; HEADER_LEN];
    file.read_exact_at(&mut header, 0).unwrap();
    let body_offset = format::Header::decode(&header).unwrap().body_offset;
    let pos = at(len, body_offset);
    let mut b = [0u8];
    file.read_exact_at(&mut b, pos).unwrap();
    file.write_all_at(&[b[0] ^ 0x01], pos).unwrap();
}

#[test]
fn corrupt_headers_and_metadata_are_dropped_at_recovery() {
    for (what, at) in [
        ("magic", (|_, _| 0) as fn(u64, u64) -> u64),
        ("header field", |_, _| 30),
        ("header checksum", |_, _| HEADER_LEN as u64 - 1),
        ("metadata", |_, _| HEADER_LEN as u64 + 5),
    ] {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path(), 1 << 30).0.insert(&object("http://c", 100_000)).unwrap());
        flip(dir.path(), at);
        let (tier, report) = open(dir.path(), 1 << 30);
        assert_eq!(report.dropped_corrupt, 1, "{what}");
        assert_eq!(report.recovered, 0, "{what}");
        assert!(matches!(tier.lookup("http://c", |_| true), DiskLookup::Miss), "{what}");
        assert!(object_files(dir.path()).is_empty(), "{what}: file deleted");
    }
}

#[test]
fn a_corrupt_body_is_refused_before_any_byte_is_served() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), 1 << 30).0.insert(&object("http://b", 1 << 20)).unwrap());
    flip(dir.path(), |len, _| len - 1);
    let (tier, report) = open(dir.path(), 1 << 30);
    assert_eq!(report.recovered, 1, "bodies are checked lazily");
    let entry = found(&tier, "http://b");
    assert!(matches!(tier.open_body(&entry), Err(ReadError::Corrupt)));
    assert!(matches!(tier.lookup("http://b", |_| true), DiskLookup::Miss));
    assert!(object_files(dir.path()).is_empty());
    assert_eq!(tier.stats().corrupt_at_read, 1);
    assert_eq!(tier.stats().objects, 0);
    assert_eq!(tier.stats().bytes, 0);
}

#[test]
fn with_checks_at_open_a_corrupt_body_is_dropped_at_recovery() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), 1 << 30).0.insert(&object("http://b", 5000)).unwrap());
    flip(dir.path(), |_, body| body + 17);
    let config = DiskConfig { body_check: BodyCheck::AtOpen, ..DiskConfig::new(1 << 30, u64::MAX) };
    let (tier, report) = DiskTier::open_with(dir.path(), config, lru(1 << 30)).unwrap();
    assert_eq!((report.recovered, report.dropped_corrupt), (0, 1));
    assert_eq!(tier.stats().objects, 0);
}

#[test]
fn corruption_while_running_is_caught_at_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = DiskConfig { body_check: BodyCheck::EveryServe, ..DiskConfig::new(1 << 30, u64::MAX) };
    let (tier, _) = DiskTier::open_with(dir.path(), config, lru(1 << 30)).unwrap();
    tier.insert(&object("http://h", 10_000)).unwrap();
    tier.insert(&object("http://b", 10_000)).unwrap();
    assert_eq!(served(&tier, "http://h").len(), 10_000);
    // A header flipped under a running tier (the index holds the metadata, the header is
    // re-read at every open).
    let h = found(&tier, "http://h");
    let file = std::fs::OpenOptions::new().write(true).open(h.path()).unwrap();
    file.write_all_at(b"X", 3).unwrap();
    assert!(matches!(tier.open_body(&h), Err(ReadError::Corrupt)));
    // A body flipped after it was served once: EveryServe checks again.
    let b = found(&tier, "http://b");
    tier.open_body(&b).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(b.path()).unwrap();
    file.write_all_at(b"X", b.charge().min(b.path().metadata().unwrap().len()) - 1).unwrap();
    assert!(matches!(tier.open_body(&b), Err(ReadError::Corrupt)));
    assert_eq!(tier.stats().objects, 0);
}

#[test]
fn truncated_extended_and_temporary_files_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (tier, _) = open(dir.path(), 1 << 30);
        tier.insert(&object("http://t", 50_000)).unwrap();
        tier.insert(&object("http://x", 50_000)).unwrap();
        tier.insert(&object("http://tiny", 50_000)).unwrap();
        let t = found(&tier, "http://t");
        std::fs::OpenOptions::new().write(true).open(t.path()).unwrap().set_len(30_000).unwrap();
        let x = found(&tier, "http://x");
        std::fs::OpenOptions::new().append(true).open(x.path()).unwrap().write_all(b"junk").unwrap();
        let tiny = found(&tier, "http://tiny");
        std::fs::OpenOptions::new().write(true).open(tiny.path()).unwrap().set_len(10).unwrap();
    }
    // A write in progress that never committed.
    std::fs::write(dir.path().join("tmp").join("0000000000000001-1-0.tmp"), body_of(1, 1000)).unwrap();
    std::fs::write(dir.path().join("objects").join("README"), "not ours").unwrap();
    let (tier, report) = open(dir.path(), 1 << 30);
    assert_eq!(report.recovered, 0);
    assert_eq!(report.dropped_incomplete, 3, "{report:?}");
    assert_eq!(report.dropped_corrupt, 1, "{report:?}");
    assert_eq!(report.ignored, 1);
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    assert_eq!(tier.stats().objects, 0);
    assert!(dir.path().join("objects").join("README").exists());
}

#[test]
fn a_writer_dropped_or_aborted_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    let mut w = tier.begin(meta("http://a", Vec::new(), None)).unwrap();
    w.write_chunk(b"partial").unwrap();
    w.abort();
    let mut w = tier.begin(meta("http://a", Vec::new(), None)).unwrap();
    w.write_chunk(b"partial").unwrap();
    drop(w);
    assert!(files_under(dir.path()).iter().all(|p| p.ends_with("LOCK")));
    assert!(matches!(tier.lookup("http://a", |_| true), DiskLookup::Miss));
}

#[test]
fn a_second_process_cannot_open_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (_tier, _) = open(dir.path(), 1 << 30);
    let err = DiskTier::open(dir.path(), 1 << 30, u64::MAX, lru(1 << 30), WaterMarks::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
}

#[test]
fn too_large_objects_are_refused_up_front_or_while_streaming() {
    let dir = tempfile::tempdir().unwrap();
    let config = DiskConfig { max_object: 100_000, ..DiskConfig::new(1 << 30, u64::MAX) };
    let (tier, _) = DiskTier::open_with(dir.path(), config, lru(1 << 30)).unwrap();
    assert_eq!(tier.begin(meta("http://l", Vec::new(), Some(200_000))).unwrap_err(), NotStored::TooLarge);
    let mut w = tier.begin(meta("http://l", Vec::new(), None)).unwrap();
    w.write_chunk(&body_of(1, 60_000)).unwrap();
    assert_eq!(w.write_chunk(&body_of(2, 60_000)).unwrap_err(), NotStored::TooLarge);
    assert_eq!(w.commit().unwrap_err(), NotStored::Aborted);
    assert_eq!(tier.stats().rejected_too_large, 2);
    assert!(object_files(dir.path()).is_empty());
    assert!(files_under(&dir.path().join("tmp")).is_empty());
}

#[test]
fn water_marks_hold_and_evicted_files_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let capacity = 1 << 20;
    let water = WaterMarks::new(0.9, 0.6).unwrap();
    let (tier, _) = DiskTier::open(dir.path(), capacity, 50, lru(capacity), water).unwrap();
    for i in 0..200 {
        tier.insert(&object(&format!("http://w/{i}"), 1000 + (i * 997) % 40_000)).unwrap();
        let s = tier.stats();
        assert!(s.bytes <= s.high_water_bytes, "{s:?}");
        assert!(s.objects <= 45, "{s:?}");
        assert_eq!(object_files(dir.path()).len() as u64, s.objects);
    }
    let s = tier.stats();
    assert!(s.evictions > 0);
    assert!(matches!(tier.lookup("http://w/199", |_| true), DiskLookup::Found(_)));
    assert!(matches!(tier.lookup("http://w/0", |_| true), DiskLookup::Miss));
    drop(tier);
    // Reopened with a smaller capacity: evicted to fit the new marks.
    let (tier, report) = DiskTier::open(dir.path(), capacity / 4, 50, lru(capacity / 4), water).unwrap();
    assert!(report.evicted > 0);
    assert!(tier.stats().bytes <= tier.stats().high_water_bytes);
    assert_eq!(object_files(dir.path()).len() as u64, tier.stats().objects);
}

#[test]
fn purges_are_durable_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    for key in ["http://a/x/1", "http://a/x/2", "http://a/y/1"] {
        tier.insert(&object(key, 100)).unwrap();
    }
    assert_eq!(tier.remove_prefix("http://a/x/"), 2);
    assert_eq!(tier.remove("http://a/y/1"), 1);
    assert_eq!(tier.remove("http://a/y/1"), 0);
    assert_eq!(tier.stats().objects, 0);
    assert_eq!(tier.stats().bytes, 0);
    drop(tier);
    assert_eq!(open(dir.path(), 1 << 30).1.recovered, 0);
}

/// A hook that fails writes with ENOSPC while `full` is set.
fn enospc_hook(full: Arc<AtomicBool>) -> WriteHook {
    Arc::new(move |_| {
        if full.load(Ordering::SeqCst) {
            Err(io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error()))
        } else {
            Ok(())
        }
    })
}

#[test]
fn disk_full_stops_admission_and_reads_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let full = Arc::new(AtomicBool::new(false));
    let config = DiskConfig {
        full_backoff: Duration::from_millis(300),
        write_hook: Some(enospc_hook(Arc::clone(&full))),
        ..DiskConfig::new(1 << 30, u64::MAX)
    };
    let (tier, _) = DiskTier::open_with(dir.path(), config, lru(1 << 30)).unwrap();
    for i in 0..20 {
        tier.insert(&object(&format!("http://f/{i}"), 50_000)).unwrap();
    }
    let before = tier.stats();
    // A streaming write hits ENOSPC mid-body: not stored, temp file gone.
    let mut w = tier.begin(meta("http://f/new", Vec::new(), None)).unwrap();
    full.store(true, Ordering::SeqCst);
    assert_eq!(w.write_chunk(&body_of(3, 1000)).unwrap_err(), NotStored::Full);
    let s = tier.stats();
    assert_eq!(s.full_events, 1);
    assert!(s.admission_paused);
    assert_eq!(s.limit_bytes, before.bytes, "the limit shrinks to what the disk held");
    assert!(s.bytes <= s.low_water_bytes, "and usage to its low-water mark");
    // Admission stays closed during the pause, without touching the disk.
    full.store(false, Ordering::SeqCst);
    assert_eq!(tier.insert(&object("http://f/new", 1000)).unwrap_err(), NotStored::Full);
    assert_eq!(tier.begin(meta("http://f/new", Vec::new(), None)).unwrap_err(), NotStored::Full);
    // Reads keep working for what is still stored.
    let still: Vec<_> =
        (0..20).filter(|i| matches!(tier.lookup(&format!("http://f/{i}"), |_| true), DiskLookup::Found(_))).collect();
    assert!(!still.is_empty());
    for i in &still {
        assert_eq!(served(&tier, &format!("http://f/{i}")).len(), 50_000);
    }
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    // After the pause, admission resumes with the configured limit.
    std::thread::sleep(Duration::from_millis(350));
    tier.insert(&object("http://f/new", 1000)).unwrap();
    assert_eq!(tier.stats().limit_bytes, 1 << 30);
    assert!(!tier.stats().admission_paused);
}

#[test]
fn sendfile_moves_the_exact_body_through_a_tcp_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    let o = object("http://s", 3 * (1 << 20) + 123);
    let entry = tier.insert(&o).unwrap();
    let body = tier.open_body(&entry).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got
    });
    let (socket, _) = listener.accept().unwrap();
    let range = body.slice(1000..body.len());
    let head = body.slice(0..1000);
    assert_eq!(sendfile_to(&socket, head.file(), head.offset(), head.len()).unwrap(), 1000);
    assert_eq!(sendfile_to(&socket, range.file(), range.offset(), range.len()).unwrap(), range.len());
    drop(socket);
    let got = reader.join().unwrap();
    let expected: Vec<u8> = o.body.chunks().iter().flat_map(|c| c.iter().copied()).collect();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "bytes differ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_sendfile_stream_and_persist_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    // Tee a fill to disk while it arrives; commit on completion.
    let fill = crate::Fill::new(None);
    let reader = fill.reader();
    let task = tier.persist(meta("http://p", Vec::new(), None), reader);
    let expected = body_of(9, 2 * (1 << 20) + 7);
    for chunk in expected.chunks(16 * 1024) {
        fill.push(Bytes::copy_from_slice(chunk));
        tokio::task::yield_now().await;
    }
    fill.complete();
    let entry = task.await.unwrap().unwrap();
    assert_eq!(entry.body_len(), expected.len() as u64);
    // A failed fill is abandoned.
    let failed = crate::Fill::new(None);
    let task = tier.persist(meta("http://q", Vec::new(), None), failed.reader());
    failed.push(Bytes::from_static(b"half"));
    failed.fail("origin reset");
    assert_eq!(task.await.unwrap().unwrap_err(), NotStored::Aborted);
    assert!(matches!(tier.lookup("http://q", |_| true), DiskLookup::Miss));
    // Stream path.
    let body = tier.open_body_async(Arc::clone(&entry)).await.unwrap();
    let streamed = body.clone().into_stream().collect().await.unwrap().to_bytes();
    assert!(streamed == expected);
    // In steps that start small (a stalled reader holds little) and grow to 256 KiB.
    let mut stream = body.clone().into_stream();
    let mut steps = Vec::new();
    while let Some(frame) = stream.frame().await {
        steps.push(frame.unwrap().into_data().unwrap().len());
    }
    let full = [16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10];
    let expected_steps: Vec<usize> = full
        .iter()
        .chain(std::iter::repeat(&(256 << 10)))
        .scan(expected.len(), |left, &step| {
            (*left > 0).then(|| {
                let n = step.min(*left);
                *left -= n;
                n
            })
        })
        .collect();
    assert_eq!(steps, expected_steps);
    // Zero-copy path on a tokio socket.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        got
    });
    let (socket, _) = listener.accept().await.unwrap();
    assert_eq!(send_body(&socket, &body).await.unwrap(), expected.len() as u64);
    drop(socket);
    assert!(client.await.unwrap() == expected);
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    let loaded = tier.load(&entry).unwrap();
    assert_eq!(loaded.body.len(), expected.len() as u64);
}

#[test]
fn water_marks_hold_under_concurrent_load() {
    let dir = tempfile::tempdir().unwrap();
    let capacity = 2 << 20;
    let water = WaterMarks::new(0.9, 0.7).unwrap();
    let (tier, _) = DiskTier::open(dir.path(), capacity, 200, lru(capacity), water).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (tier, stop) = (tier.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut samples = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let s = tier.stats();
                assert!(s.bytes <= s.high_water_bytes, "{s:?}");
                assert!(s.objects <= 180, "{s:?}");
                samples += 1;
            }
            samples
        })
    };
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let tier = tier.clone();
            std::thread::spawn(move || {
                let mut x = t + 1;
                let (mut stored, mut superseded, mut served) = (0, 0, 0);
                for _ in 0..150 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let key = format!("http://load/{}", (x >> 33) % 64);
                    let len = ((x >> 20) % 120_000) as usize;
                    let body = body_of(x, len);
                    let o = Object::new(meta(&key, Vec::new(), None), StoredBody::new(vec![body.clone()]));
                    match tier.insert(&o) {
                        Ok(_) => stored += 1,
                        Err(NotStored::Superseded) => superseded += 1,
                        Err(e) => panic!("{e}"),
                    }
                    let probe = format!("http://load/{}", (x >> 40) % 64);
                    if let DiskLookup::Found(e) = tier.lookup(&probe, |_| true) {
                        match tier.open_body(&e) {
                            Ok(b) => {
                                assert_eq!(b.read_all().unwrap().len() as u64, e.body_len());
                                served += 1;
                            }
                            Err(ReadError::Gone) => {} // evicted or replaced meanwhile
                            Err(other) => panic!("{other}"),
                        }
                    }
                }
                (stored, superseded, served)
            })
        })
        .collect();
    let totals: Vec<(u32, u32, u32)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    assert!(monitor.join().unwrap() > 0);
    let s = tier.stats();
    assert!(s.evictions > 0, "{s:?} {totals:?}");
    assert_eq!(object_files(dir.path()).len() as u64, s.objects, "files on disk are exactly the index");
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    drop(tier);
    let (tier, report) = DiskTier::open(dir.path(), capacity, 200, lru(capacity), water).unwrap();
    assert_eq!(report.recovered, s.objects);
    assert_eq!(report.dropped_corrupt + report.dropped_incomplete + report.dropped_superseded, 0);
    assert_eq!(tier.stats().bytes, s.bytes);
}

#[test]
fn verified_files_are_kept_open_within_the_budget_and_released_with_their_entries() {
    let dir = tempfile::tempdir().unwrap();
    let config = DiskConfig { open_files: 1, ..DiskConfig::new(1 << 30, u64::MAX) };
    let (tier, _) = DiskTier::open_with(dir.path(), config, lru(1 << 30)).unwrap();
    let a = object("http://a", 10_000);
    let a_body = Bytes::from(a.body.chunks().concat());
    tier.insert(&a).unwrap();
    tier.insert(&object("http://b", 10_000)).unwrap();
    assert!(tier.kept_open(&found(&tier, "http://a")).is_none(), "nothing kept before a serve");

    assert_eq!(served(&tier, "http://a"), a_body);
    assert_eq!(tier.stats().open_files, 1);
    // The next hit needs no open: the kept file even survives the path going away.
    std::fs::rename(found(&tier, "http://a").path(), dir.path().join("moved")).unwrap();
    let kept = tier.kept_open(&found(&tier, "http://a")).expect("kept open");
    assert_eq!(kept.read_all().unwrap(), a_body);
    // The budget is full: b is served but not kept.
    served(&tier, "http://b");
    assert!(tier.kept_open(&found(&tier, "http://b")).is_none());
    assert_eq!(tier.stats().open_files, 1);

    // Removing a releases its slot once the last body using the file is gone.
    std::fs::rename(dir.path().join("moved"), found(&tier, "http://a").path()).unwrap();
    tier.remove("http://a");
    assert_eq!(tier.stats().open_files, 0);
    assert_eq!(kept.read_all().unwrap(), a_body, "a body in use outlives the removal");
    served(&tier, "http://b");
    assert_eq!(tier.stats().open_files, 1, "the freed slot is b's now");
}

#[test]
fn with_checks_at_every_serve_nothing_is_kept_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = DiskConfig { body_check: BodyCheck::EveryServe, ..DiskConfig::new(1 << 30, u64::MAX) };
    let (tier, _) = DiskTier::open_with(dir.path(), config, lru(1 << 30)).unwrap();
    tier.insert(&object("http://a", 1_000)).unwrap();
    served(&tier, "http://a");
    served(&tier, "http://a");
    assert_eq!(tier.stats().open_files, 0);
    assert!(tier.kept_open(&found(&tier, "http://a")).is_none());
}

#[test]
fn sweep_deletes_stale_idle_entries_and_keeps_busy_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 24);
    for key in ["http://a/idle", "http://a/busy", "http://a/elsewhere"] {
        tier.insert(&object(key, 100)).unwrap();
    }
    for _ in 0..3 {
        found(&tier, "http://a/busy");
    }
    let rule = SweepRule { grace: Duration::from_secs(60), min_hits_per_hour: 1.0 };
    // `meta` responses are 3 s old at 1_700_000_000 with a 600 s lifetime.
    let fresh = UNIX_EPOCH + Duration::from_secs(1_700_000_000 + 100);
    let (report, purge) = tier.sweep(fresh, &rule, |_| 0);
    assert_eq!((report.examined, report.kept_fresh, purge.len()), (3, 3, 0));
    purge.finish();
    let past_grace = UNIX_EPOCH + Duration::from_secs(1_700_000_000 + 600 + 60 + 10);
    let elsewhere = |m: &ObjectMeta| if m.key.ends_with("elsewhere") { 5 } else { 0 };
    let (report, purge) = tier.sweep(past_grace, &rule, elsewhere);
    assert_eq!((report.examined, report.removed, report.kept_busy), (3, 1, 2));
    assert!(report.removed_bytes >= 4096);
    assert!(matches!(tier.lookup("http://a/idle", |_| true), DiskLookup::Miss), "forgotten at once");
    assert_eq!(object_files(dir.path()).len(), 3, "files go with finish()");
    assert_eq!(purge.finish(), 1);
    assert_eq!(object_files(dir.path()).len(), 2);
    let stats = tier.stats();
    assert_eq!((stats.objects, stats.swept), (2, 1));
    drop(tier);
    let (_, report) = open(dir.path(), 1 << 24);
    assert_eq!(report.recovered, 2, "nothing comes back after a restart");
}

#[test]
fn a_touched_copy_is_evicted_after_untouched_ones() {
    let dir = tempfile::tempdir().unwrap();
    // Room for two 12 KiB files below the high-water mark, not three.
    let (tier, _) = open(dir.path(), 30 << 10);
    tier.insert(&object("http://a", 10_000)).unwrap();
    tier.insert(&object("http://b", 10_000)).unwrap();
    assert!(tier.touch("http://a", |_| true), "a is there to touch");
    assert!(!tier.touch("http://missing", |_| true));
    let hits_before = found(&tier, "http://a").hits();
    tier.insert(&object("http://c", 10_000)).unwrap();
    assert!(matches!(tier.lookup("http://b", |_| true), DiskLookup::Miss), "b was the least recently used");
    assert_eq!(found(&tier, "http://a").hits(), hits_before + 1, "a touch is not a hit");
}

#[test]
fn files_with_an_objects_name_that_are_not_regular_files_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (fifo, directory) = {
        let (tier, _) = open(dir.path(), 1 << 30);
        tier.insert(&object("http://fifo", 1000)).unwrap();
        tier.insert(&object("http://dir", 1000)).unwrap();
        (found(&tier, "http://fifo").path().to_owned(), found(&tier, "http://dir").path().to_owned())
    };
    std::fs::remove_file(&fifo).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::fs::remove_file(&directory).unwrap();
    std::fs::create_dir(&directory).unwrap();
    // Opening the FIFO would block the start for good; the directory would fail it.
    let (tier, report) = open(dir.path(), 1 << 30);
    assert_eq!((report.recovered, report.ignored), (0, 2), "{report:?}");
    assert_eq!(tier.stats().objects, 0);
}

#[test]
fn a_file_cut_short_under_the_running_tier_is_never_served_short() {
    let dir = tempfile::tempdir().unwrap();
    let (tier, _) = open(dir.path(), 1 << 30);
    tier.insert(&object("http://kept", 50_000)).unwrap();
    tier.insert(&object("http://cold", 50_000)).unwrap();
    served(&tier, "http://kept");
    let kept = found(&tier, "http://kept");
    assert!(tier.kept_open(&kept).is_some(), "served once, so kept open");
    let cold = found(&tier, "http://cold");
    for entry in [&kept, &cold] {
        std::fs::OpenOptions::new().write(true).open(entry.path()).unwrap().set_len(30_000).unwrap();
    }
    // The kept file is checked for its length at every serve, the cold one at its open.
    assert!(tier.kept_open(&kept).is_none());
    assert!(matches!(tier.open_body(&kept), Err(ReadError::Gone | ReadError::Corrupt)));
    assert!(matches!(tier.open_body(&cold), Err(ReadError::Corrupt)));
    assert_eq!(tier.stats().objects, 0, "both dropped: the next request fetches again");
}
