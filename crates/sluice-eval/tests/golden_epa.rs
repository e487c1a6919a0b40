//! Golden tests on the real EPA-HTTP trace (shared/traces, Internet Traffic Archive, see its
//! README): every policy with a naive twin must produce the same hit/miss sequence as the
//! twin at the seed paper's sizes, and the headline miss counts are pinned.

mod naive;

use std::path::PathBuf;

use sluice_eval::sim::{run_grid, simulate, Contender, GridOptions, SizeSpec, Unit};
use sluice_eval::trace::{load, Format, ReadOptions, Trace};
use sluice_policy::Capacity;

fn traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
}

fn epa() -> Trace {
    let path = traces().join("epa-http.txt");
    load(&path, &ReadOptions::new(Format::Epa)).unwrap_or_else(|e| panic!("{e} (CI keeps shared/ beside the repo)"))
}

const PERCENTS: [f64; 6] = [10.0, 20.0, 30.0, 40.0, 50.0, 80.0];

fn capacities(trace: &Trace) -> Vec<Capacity> {
    PERCENTS.iter().map(|&p| SizeSpec::Percent(p).resolve(trace, Unit::Objects).unwrap()).collect()
}

/// The real simulator and the naive twin agree request by request.
fn same_as_naive(name: &str) {
    let trace = epa();
    let reqs: Vec<(u64, u64)> = trace.requests.iter().map(|r| (r.id, r.size)).collect();
    let contender = Contender::parse(name).unwrap();
    for cap in capacities(&trace) {
        let real = simulate(&trace, contender, cap, 42, true, None, &|_| {});
        let timeline = real.timeline.expect("asked for a timeline");
        let want = naive::run(name, cap.limit() as usize, &reqs);
        let first_diff = (0..want.len()).find(|&i| timeline.is_hit(i) != want[i]);
        assert_eq!(first_diff, None, "{name} at {cap:?} differs from the naive twin");
        assert_eq!(real.hits, want.iter().filter(|&&h| h).count() as u64);
    }
}

#[test]
fn lru_matches_naive() {
    same_as_naive("lru");
}

#[test]
fn fifo_matches_naive() {
    same_as_naive("fifo");
}

#[test]
fn lfu_matches_naive() {
    same_as_naive("lfu");
}

#[test]
fn lfu_da_and_gdsf_match_naive() {
    same_as_naive("lfu-da");
    same_as_naive("gdsf");
}

#[test]
fn maxs_matches_naive() {
    same_as_naive("maxs");
}

#[test]
fn sieve_matches_naive() {
    same_as_naive("sieve");
}

#[test]
fn s3fifo_matches_naive() {
    same_as_naive("s3-fifo");
}

#[test]
fn arc_matches_naive() {
    same_as_naive("arc");
}

#[test]
fn belady_matches_naive() {
    same_as_naive("belady");
}

/// Counts checked independently (a separate script over the raw file): 15,754 lines (the
/// last has no newline), 11,422 GET/200 requests with a size, 2,276 distinct URLs.
#[test]
fn epa_loads_as_the_seed_paper_counts_it() {
    let t = epa();
    assert_eq!((t.stats.records, t.stats.kept, t.stats.malformed), (15_754, 11_422, 0));
    assert_eq!(t.stats.filtered, 15_754 - 11_422);
    assert_eq!(t.objects, 2_276);
    assert_eq!(capacities(&t).iter().map(|c| c.limit()).collect::<Vec<_>>(), vec![228, 455, 683, 910, 1138, 1821]);
}

/// Pinned miss counts at 10..50% and 80% of distinct URLs (from the naive twins above).
/// From 30% up Belady only takes the 2,276 compulsory misses.
#[test]
fn pinned_miss_counts() {
    let t = epa();
    let caps = capacities(&t);
    let names = ["lru", "fifo", "belady"];
    let contenders: Vec<Contender> = names.iter().map(|n| Contender::parse(n).unwrap()).collect();
    let cells = run_grid(&t, &contenders, &caps, &GridOptions { threads: 2, ..GridOptions::default() });
    let got: Vec<Vec<u64>> = names
        .iter()
        .map(|n| cells.iter().filter(|c| c.contender.name() == *n).map(|c| c.result.misses()).collect())
        .collect();
    let want: [[u64; 6]; 3] = PINNED;
    assert_eq!(got, want.iter().map(|r| r.to_vec()).collect::<Vec<_>>());
}

const PINNED: [[u64; 6]; 3] = [
    [4693, 3571, 3051, 2760, 2555, 2309], // LRU
    [5110, 4089, 3535, 3165, 2914, 2521], // FIFO
    [2960, 2438, 2276, 2276, 2276, 2276], // Belady
];
