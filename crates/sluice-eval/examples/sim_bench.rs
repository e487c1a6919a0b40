//! Simulator benchmark (not a test): single-thread requests per second of each policy on a
//! seeded Zipf trace, and the heap bytes each policy holds per resident object.
//!
//! Run through `bench/sim/run.sh` (release build). Options: `--requests N` (default
//! 10,000,000), `--objects N` (1,000,000), `--alpha A` (1.0), `--seed S` (42), `--sizes
//! P,P` (percent of objects; 1,10), `--policies LIST` (all), `--repeat N` (3: best of N).

// The one unsafe item: a counting wrapper around the system allocator, to measure memory.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sluice_eval::report::thousands;
use sluice_eval::sim::{simulate, Contender, Unit};
use sluice_eval::trace::{Request, Trace};
use sluice_policy::{Capacity, PolicyConfig};

/// Live heap bytes, maintained by [`Counting`].
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: forwards every call to `System` unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Opts {
    requests: usize,
    objects: usize,
    alpha: f64,
    seed: u64,
    sizes: Vec<f64>,
    policies: String,
    repeat: usize,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        requests: 10_000_000,
        objects: 1_000_000,
        alpha: 1.0,
        seed: 42,
        sizes: vec![1.0, 10.0],
        policies: "all".into(),
        repeat: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.replace('_', "").parse::<f64>().map_err(|_| format!("bad number {v:?} for {flag}"));
        match flag.as_str() {
            "--requests" => o.requests = num(&value)? as usize,
            "--objects" => o.objects = num(&value)? as usize,
            "--alpha" => o.alpha = num(&value)?,
            "--seed" => o.seed = num(&value)? as u64,
            "--sizes" => o.sizes = value.split(',').map(|s| num(s.trim_end_matches('%'))).collect::<Result<_, _>>()?,
            "--policies" => o.policies = value,
            "--repeat" => o.repeat = (num(&value)? as usize).max(1),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(o)
}

/// A seeded Zipf(`alpha`) trace over `objects` ids (popularity ranks shuffled over ids).
fn zipf_trace(o: &Opts) -> Trace {
    let mut rng = ChaCha8Rng::seed_from_u64(o.seed);
    let mut cdf = Vec::with_capacity(o.objects);
    let mut sum = 0.0;
    for rank in 1..=o.objects {
        sum += 1.0 / (rank as f64).powf(o.alpha);
        cdf.push(sum);
    }
    let mut ids: Vec<u64> = (0..o.objects as u64).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.gen_range(0..=i));
    }
    let requests = (0..o.requests)
        .map(|_| {
            let u = rng.gen::<f64>() * sum;
            let rank = cdf.partition_point(|&c| c < u).min(o.objects - 1);
            Request { id: ids[rank], size: 4096 }
        })
        .collect::<Vec<_>>();
    let mut trace = Trace { name: "zipf".into(), requests, objects: o.objects as u64, ..Trace::default() };
    trace.object_bytes = trace.objects * 4096;
    trace
}

/// Heap bytes per resident object of `c` after serving the trace at `capacity`.
fn bytes_per_object(c: Contender, trace: &Trace, capacity: Capacity) -> Option<f64> {
    let Contender::Policy(info) = c else { return None };
    let mut resident = vec![false; trace.objects as usize];
    let mut used = 0;
    let before = LIVE.load(Ordering::Relaxed);
    let mut policy = info.build(&PolicyConfig::new(capacity).with_seed(1));
    for r in &trace.requests {
        if resident[r.id as usize] {
            policy.on_hit(r.id, r.size);
            continue;
        }
        policy.on_miss(r.id, r.size);
        while used + 1 > capacity.limit() {
            let Some(v) = policy.evict() else { break };
            resident[v as usize] = false;
            used -= 1;
        }
        policy.on_insert(r.id, r.size);
        resident[r.id as usize] = true;
        used += 1;
    }
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    Some(bytes as f64 / policy.len().max(1) as f64)
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sim_bench: {e}");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let trace = zipf_trace(&o);
    println!(
        "trace: Zipf alpha={} over {} objects, {} requests, seed {} (generated in {:.1} s)",
        o.alpha,
        thousands(o.objects as u64),
        thousands(o.requests as u64),
        o.seed,
        started.elapsed().as_secs_f64()
    );
    let contenders = match Contender::parse_list(&o.policies, Unit::Objects) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sim_bench: {e}");
            std::process::exit(2);
        }
    };
    println!("single thread, object-count capacity, best of {} runs; memory at the largest size\n", o.repeat);
    print!("{:<24}", "policy");
    for p in &o.sizes {
        print!("  {:>22}", format!("{p}%: M req/s (miss)"));
    }
    println!("  {:>14}", "bytes/object");
    for &c in &contenders {
        print!("{:<24}", c.label());
        for &p in &o.sizes {
            let capacity = Capacity::Objects(((o.objects as f64 * p / 100.0) as u64).max(1));
            let mut best = f64::MAX;
            let mut miss = 0.0;
            for _ in 0..o.repeat {
                let t = Instant::now();
                let r = simulate(&trace, c, capacity, o.seed, false, None, &|_| {});
                best = best.min(t.elapsed().as_secs_f64());
                miss = r.miss_ratio();
            }
            print!("  {:>22}", format!("{:.1} ({miss:.4})", o.requests as f64 / best / 1e6));
        }
        let largest = o.sizes.iter().copied().fold(0.0, f64::max);
        let capacity = Capacity::Objects(((o.objects as f64 * largest / 100.0) as u64).max(1));
        match bytes_per_object(c, &trace, capacity) {
            Some(b) => println!("  {b:>14.1}"),
            None => println!("  {:>14}", "n/a (offline)"),
        }
    }
}
