//! Zero-copy micro-benchmark: 4 MiB objects from the disk tier over loopback TCP.
//!
//! ```text
//! cargo run --release -p sluice-store --example disk_sendfile_bench [-- OBJECTS SENDS]
//! cargo run --release -p sluice-store --example disk_sendfile_bench -- --serve 127.0.0.1:8090 [--copy]
//! ```
//!
//! Default mode: one server thread sends `SENDS` bodies (round-robin over `OBJECTS` 4 MiB
//! objects) to one client thread that reads and discards them, three ways:
//!
//! - `sendfile`: disk tier hit, `open_body` + `sendfile(2)` (page cache to socket);
//! - `memory`: the body already in memory (`Bytes`), `write(2)` from it (one copy);
//! - `read+write`: disk tier hit read with `pread` into a buffer, then `write` (two copies).
//!
//! It prints bytes/s and the server thread's CPU time per object
//! (`CLOCK_THREAD_CPUTIME_ID`), i.e. what the proxy's worker pays per hit.
//!
//! `--serve` runs a minimal HTTP/1.1 keep-alive server over the tier (one thread per
//! connection; `GET /N` serves object N) so a load generator such as `wrk` can compare it
//! with nginx on the same files; `--copy` serves with read+write instead of sendfile.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use rustix::time::{clock_gettime, ClockId};
use sluice_http::freshness::LifetimeSource;
use sluice_policy::{Capacity, PolicyConfig};
use sluice_store::disk::{sendfile_to, DiskConfig, DiskLookup, DiskTier};
use sluice_store::{Object, ObjectMeta, StoredBody};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

const OBJECT: usize = 4 << 20;

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn key(i: usize) -> String {
    format!("http://bench.test/{i}")
}

fn fill(tier: &DiskTier, objects: usize) -> Vec<Bytes> {
    (0..objects)
        .map(|i| {
            let body: Bytes = (0..OBJECT).map(|b| (b * 31 + i) as u8).collect::<Vec<u8>>().into();
            let meta = ObjectMeta {
                key: key(i),
                status: StatusCode::OK,
                headers: HeaderMap::new(),
                vary: Vec::new(),
                vary_key: Vec::new(),
                request_time: UNIX_EPOCH,
                response_time: UNIX_EPOCH,
                initial_age: Duration::ZERO,
                lifetime: Duration::from_secs(3600),
                lifetime_source: LifetimeSource::MaxAge,
                cc: Default::default(),
            };
            tier.insert(&Object::new(Arc::new(meta), StoredBody::new(vec![body.clone()]))).expect("stored");
            body
        })
        .collect()
}

fn hit(tier: &DiskTier, i: usize) -> sluice_store::disk::DiskBody {
    let DiskLookup::Found(entry) = tier.lookup(&key(i), |_| true) else { panic!("miss") };
    tier.open_body(&entry).expect("body")
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    Sendfile,
    Memory,
    ReadWrite,
}

fn run(way: Way, tier: &DiskTier, bodies: &[Bytes], sends: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let total = (sends * OBJECT) as u64;
    let client = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0u64;
        while got < total {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "server closed early");
            got += n as u64;
        }
    });
    let (mut socket, _) = listener.accept().unwrap();
    let mut scratch = vec![0u8; 256 << 10];
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    for n in 0..sends {
        let i = n % bodies.len();
        match way {
            Way::Sendfile => {
                let body = hit(tier, i);
                sendfile_to(&socket, body.file(), body.offset(), body.len()).unwrap();
            }
            Way::Memory => socket.write_all(&bodies[i]).unwrap(),
            Way::ReadWrite => {
                let body = hit(tier, i);
                let mut at = 0;
                while at < body.len() {
                    let n = scratch.len().min((body.len() - at) as usize);
                    body.file().read_exact_at(&mut scratch[..n], body.offset() + at).unwrap();
                    socket.write_all(&scratch[..n]).unwrap();
                    at += n as u64;
                }
            }
        }
    }
    let cpu = thread_cpu() - cpu0;
    client.join().unwrap();
    let wall = t0.elapsed();
    println!(
        "{:<11} {sends:>5} x 4 MiB  {:>7.2} GiB/s  server CPU {:>7.1} us/object  {:>6.0} objects per CPU second",
        format!("{way:?}"),
        total as f64 / wall.as_secs_f64() / (1u64 << 30) as f64,
        cpu.as_secs_f64() * 1e6 / sends as f64,
        sends as f64 / cpu.as_secs_f64(),
    );
}

fn serve(tier: DiskTier, addr: &str, copy: bool) {
    let listener = TcpListener::bind(addr).unwrap();
    println!(
        "serving {} objects on http://{addr}/N ({})",
        tier.stats().objects,
        if copy { "read+write" } else { "sendfile" }
    );
    for socket in listener.incoming() {
        let Ok(mut socket) = socket else { continue };
        let tier = tier.clone();
        std::thread::spawn(move || {
            let _ = socket.set_nodelay(true);
            let mut buf = Vec::with_capacity(4096);
            let mut chunk = [0u8; 4096];
            let mut scratch = vec![0u8; 256 << 10];
            loop {
                let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    match socket.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                    continue;
                };
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                buf.drain(..end + 4);
                let path = head.split_whitespace().nth(1).unwrap_or("/");
                let i: usize = path.trim_start_matches('/').parse().unwrap_or(0);
                let DiskLookup::Found(entry) = tier.lookup(&key(i), |_| true) else {
                    let _ = socket.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
                    continue;
                };
                let Ok(body) = tier.open_body(&entry) else { return };
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                if socket.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let sent = if copy {
                    let mut at = 0;
                    while at < body.len() {
                        let n = scratch.len().min((body.len() - at) as usize);
                        if body.file().read_exact_at(&mut scratch[..n], body.offset() + at).is_err()
                            || socket.write_all(&scratch[..n]).is_err()
                        {
                            return;
                        }
                        at += n as u64;
                    }
                    Ok(at)
                } else {
                    sendfile_to(&socket, body.file(), body.offset(), body.len())
                };
                if sent.is_err() {
                    return;
                }
            }
        });
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = tempfile::tempdir().unwrap();
    let capacity = 1 << 34;
    let policy = sluice_policy::build("lru", &PolicyConfig::new(Capacity::Bytes(capacity))).unwrap();
    let (tier, _) = DiskTier::open_with(dir.path(), DiskConfig::new(capacity, u64::MAX), policy).unwrap();
    if let Some(at) = args.iter().position(|a| a == "--serve") {
        fill(&tier, 16);
        serve(tier, &args[at + 1], args.iter().any(|a| a == "--copy"));
        return;
    }
    let objects: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(16);
    let sends: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let bodies = fill(&tier, objects);
    // Reopen, so the bodies count as recovered and unverified: the first hit on each reads
    // and checks the whole body (the page cache is warm, as after a quick restart).
    drop(tier);
    let policy = sluice_policy::build("lru", &PolicyConfig::new(Capacity::Bytes(capacity))).unwrap();
    let (tier, report) = DiskTier::open_with(dir.path(), DiskConfig::new(capacity, u64::MAX), policy).unwrap();
    let t0 = Instant::now();
    for i in 0..objects {
        hit(&tier, i);
    }
    println!(
        "recovered {} objects in {:?}; first-serve verification {:.0} us per 4 MiB object",
        report.recovered,
        report.elapsed,
        t0.elapsed().as_secs_f64() * 1e6 / objects as f64
    );
    println!("{objects} objects of 4 MiB, {sends} sends each way, one server and one client thread, loopback TCP");
    for way in [Way::Sendfile, Way::Memory, Way::ReadWrite, Way::Sendfile] {
        run(way, &tier, &bodies, sends);
    }
}
