//! Many simulations at once: every (contender, capacity) pair, spread over threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_policy::belady::next_uses;
use sluice_policy::Capacity;

use super::{simulate, Contender, RunResult};
use crate::trace::Trace;

/// How to run a grid.
#[derive(Clone, Debug)]
pub struct GridOptions {
    /// Seed of every policy's random choices.
    pub seed: u64,
    /// Worker threads; 0 means one per available core.
    pub threads: usize,
    /// Keep per-request hit bits (for timeline plots and anomaly detail).
    pub timeline: bool,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

impl Default for GridOptions {
    fn default() -> Self {
        Self { seed: 42, threads: 0, timeline: false, progress: false }
    }
}

/// The result of one (contender, capacity) pair.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Who ran.
    pub contender: Contender,
    /// Index into the `capacities` given to [`run_grid`].
    pub size_index: usize,
    /// The capacity simulated.
    pub capacity: Capacity,
    /// What it measured.
    pub result: RunResult,
}

/// Simulates every contender at every capacity; returns cells contender-major, in the
/// given orders. Deterministic: the same inputs give the same cells whatever the thread
/// count.
pub fn run_grid(trace: &Trace, contenders: &[Contender], capacities: &[Capacity], opts: &GridOptions) -> Vec<Cell> {
    let jobs: Vec<(Contender, usize)> =
        contenders.iter().flat_map(|&c| (0..capacities.len()).map(move |s| (c, s))).collect();
    let next = contenders.iter().any(Contender::is_oracle).then(|| next_uses(trace.requests.iter().map(|r| r.id)));
    let bar = progress_bar(opts.progress, jobs.len() as u64 * trace.requests.len() as u64);
    let tick = |n: u64| bar.inc(n);
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(jobs.len().max(1));
    let cursor = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<Cell>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let j = cursor.fetch_add(1, Ordering::Relaxed);
                let Some(&(contender, size_index)) = jobs.get(j) else { break };
                let capacity = capacities[size_index];
                let result = simulate(trace, contender, capacity, opts.seed, opts.timeline, next.as_deref(), &tick);
                let cell = Cell { contender, size_index, capacity, result };
                if let Ok(mut d) = done.lock() {
                    d[j] = Some(cell);
                }
            });
        }
    });
    bar.finish_and_clear();
    done.into_inner().unwrap_or_default().into_iter().flatten().collect()
}

fn progress_bar(visible: bool, total: u64) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} simulating [{bar:40}] {percent:>3}% {human_pos}/{human_len} requests, {per_sec}, eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
