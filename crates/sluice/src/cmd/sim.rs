//! `sluice sim`: trace-driven evaluation of replacement policies.
//!
//! Loads a trace, replays it through every chosen policy at every chosen cache size (in
//! parallel across cores), prints object and byte miss-ratio tables, reports Belady's
//! anomaly, and with `--out` writes `results.csv` and the figures. The logic lives in
//! `sluice-eval`; this module only parses options and prints.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use sluice_eval::plot::{self, Figure, Ratio};
use sluice_eval::report::{human_bytes, render_table, size_header, thousands, write_csv, Metric};
use sluice_eval::sim::{
    find_anomalies, run_grid, Capacity, Cell, Contender, GridOptions, LatencyModel, SizeSpec, Unit,
};
use sluice_eval::trace::{load, CsvColumns, Filter, Format, ReadOptions, Trace};

const EXAMPLES: &str = "\
Examples:
  # The seed paper's evaluation on EPA-HTTP: every policy, caches of 10-50% and 80% of the
  # distinct URLs, table on stdout, CSV and plots in sim-out/
  sluice sim --format epa ../shared/traces/epa-http.txt --policies all \\
      --sizes 10%,20%,30%,40%,50%,80% --unit objects --out sim-out/

  # Byte-sized caches on a compressed Squid log, three policies and the optimum
  sluice sim access.log.zst --unit bytes --sizes 64MiB,256MiB,1GiB --policies lru,s3-fifo,belady

  # A CSV trace whose 2nd column is the URL and 5th the size, with a header line
  sluice sim trace.csv --format csv --csv-columns key=2,size=5 --csv-header

Output: the object miss ratio table, then the byte miss ratio table (a * marks the best
online policy of each column; Belady is the offline optimum, exact for object-count
caches). With --out DIR: DIR/results.csv, and DIR/{miss-ratio,byte-miss-ratio,timeline,
access-time}.{png,svg}.";

/// Arguments of `sluice sim`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = EXAMPLES)]
pub struct Args {
    /// Trace file: plain text, gzip or zstd (recognised by content, not by name).
    #[arg(value_name = "TRACE")]
    trace: PathBuf,

    /// Trace format: auto, squid, clf (Common or Combined log), epa (ITA/EPA-HTTP), csv,
    /// oracle-general (libCacheSim binary). `auto` recognises squid, clf and epa from the
    /// first line.
    #[arg(short, long, default_value = "auto", value_name = "FORMAT")]
    format: String,

    /// CSV columns, for --format csv: `key=COL,size=COL[,method=COL][,status=COL]`, where COL
    /// is a 1-based number or a header name (names imply --csv-header). Without size, every
    /// object weighs 1 byte.
    #[arg(long, value_name = "SPEC")]
    csv_columns: Option<CsvColumns>,

    /// CSV field delimiter, one character (`\t` for tab).
    #[arg(long, default_value = ",", value_name = "CHAR")]
    csv_delimiter: String,

    /// The CSV file starts with a header line.
    #[arg(long)]
    csv_header: bool,

    /// Which requests count: `cacheable` (method GET, status 200 and a known size, where the
    /// format logs them; the seed paper's rule) or `all` (every line with a size).
    #[arg(long, default_value = "cacheable", value_name = "FILTER")]
    filter: Filter,

    /// Use only the first N kept requests.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,

    /// Policies to compare, comma-separated: lru, lfu, fifo, rand, maxs, gdsf, lfu-da,
    /// s3-fifo, sieve, arc, w-tinylfu, belady (the offline optimum), belady-size (a
    /// byte-aware heuristic), or `all` (every policy and belady; plus belady-size with
    /// --unit bytes).
    #[arg(short, long, default_value = "all", value_name = "LIST")]
    policies: String,

    /// Cache sizes, comma-separated: `N%` of the trace's distinct objects (or of their bytes
    /// with --unit bytes), an absolute count, or bytes with a suffix (64MiB, 1.5GB; --unit
    /// bytes only).
    #[arg(short, long, default_value = "10%,20%,30%,40%,50%,80%", value_delimiter = ',', value_name = "LIST")]
    sizes: Vec<SizeSpec>,

    /// What a cache size counts: `objects` (URLs, whatever their size; the seed paper's
    /// setting) or `bytes`.
    #[arg(short, long, default_value = "objects", value_name = "UNIT")]
    unit: Unit,

    /// Seed of every random choice (RAND's victims, sampling): same seed, same results.
    #[arg(long, default_value_t = 42)]
    seed: u64,

    /// Worker threads, one (policy, size) pair each at a time; 0 = one per core.
    #[arg(short, long, default_value_t = 0, value_name = "N")]
    jobs: usize,

    /// Directory for results.csv and the plots (created if missing). Without it, only the
    /// tables are printed.
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,

    /// Plot formats written into --out: comma-separated png, svg; or `none`.
    #[arg(long, default_value = "png,svg", value_name = "LIST")]
    plots: String,

    /// Latency model of the access-time estimate: milliseconds per hit.
    #[arg(long, default_value_t = 1.0, value_name = "MS")]
    hit_ms: f64,

    /// Latency model: fixed milliseconds per miss.
    #[arg(long, default_value_t = 100.0, value_name = "MS")]
    miss_ms: f64,

    /// Latency model: extra milliseconds per KiB fetched on a miss.
    #[arg(long, default_value_t = 0.1, value_name = "MS")]
    miss_ms_per_kib: f64,

    /// Progress bar on stderr: auto (when stderr is a terminal), always, never.
    #[arg(long, default_value = "auto", value_name = "WHEN", value_parser = ["auto", "always", "never"])]
    progress: String,

    /// List every malformed line (number and reason), not just how many there were.
    #[arg(short, long)]
    verbose: bool,
}

/// Runs the simulator.
pub fn run(args: Args) -> anyhow::Result<()> {
    let trace = read_trace(&args)?;
    let capacities = args.sizes.iter().map(|s| s.resolve(&trace, args.unit)).collect::<Result<Vec<_>, _>>()?;
    let contenders = Contender::parse_list(&args.policies, args.unit)?;
    let plots = plot_formats(&args.plots)?;
    let latency = LatencyModel { hit_ms: args.hit_ms, miss_ms: args.miss_ms, miss_ms_per_kib: args.miss_ms_per_kib };
    let opts = GridOptions {
        seed: args.seed,
        threads: args.jobs,
        // Hit bits feed the timeline plot and the anomaly detail; keep them when plotting or
        // when they are cheap (at most 256 MiB of bits).
        timeline: (args.out.is_some() && !plots.is_empty())
            || contenders.len() * capacities.len() * trace.requests.len() <= 1 << 31,
        progress: match args.progress.as_str() {
            "always" => true,
            "never" => false,
            _ => std::io::stderr().is_terminal(),
        },
    };

    let started = Instant::now();
    let cells = run_grid(&trace, &contenders, &capacities, &opts);
    let elapsed = started.elapsed().as_secs_f64();
    let simulated = cells.len() as f64 * trace.requests.len() as f64;
    eprintln!(
        "simulated {} runs of {} requests in {elapsed:.2} s ({:.1} M requests/s over all threads)",
        cells.len(),
        thousands(trace.requests.len() as u64),
        simulated / elapsed.max(1e-9) / 1e6
    );

    let headers: Vec<String> = args.sizes.iter().zip(&capacities).map(|(s, c)| size_header(s, *c)).collect();
    println!("{}", render_table(&cells, &headers, Metric::ObjectMissRatio));
    println!("{}", render_table(&cells, &headers, Metric::ByteMissRatio));
    report_anomalies(&cells, &headers, &capacities);

    if let Some(dir) = &args.out {
        write_outputs(
            dir,
            &plots,
            Figure { trace: &trace, cells: &cells, headers: &headers, unit: args.unit, latency },
            &args.sizes,
        )?;
    }
    Ok(())
}

fn read_trace(args: &Args) -> anyhow::Result<Trace> {
    let format = match args.format.as_str() {
        "auto" => None,
        name => Some(match name.parse::<Format>()? {
            Format::Csv(_) => Format::Csv(csv_columns(args)?),
            f => f,
        }),
    };
    let opts = ReadOptions { format, filter: args.filter, limit: args.limit };
    let started = Instant::now();
    let trace = load(&args.trace, &opts)?;
    let s = &trace.stats;
    eprintln!(
        "{}: {} lines, {} requests kept ({} filtered out, {} malformed), {} distinct objects, {} ({:.2} s)",
        trace.name,
        thousands(s.records),
        thousands(s.kept),
        thousands(s.filtered),
        thousands(s.malformed),
        thousands(trace.objects),
        human_bytes(trace.object_bytes),
        started.elapsed().as_secs_f64()
    );
    if s.malformed > 0 {
        if args.verbose {
            for (line, reason) in &s.errors {
                eprintln!("  line {line}: {reason}");
            }
            if s.malformed > s.errors.len() as u64 {
                eprintln!("  ... and {} more", s.malformed - s.errors.len() as u64);
            }
        } else {
            eprintln!("skipped {} malformed lines (run with --verbose to list them)", thousands(s.malformed));
        }
    }
    if trace.requests.is_empty() {
        bail!("no requests left in {} after filtering; try --filter all or another --format", args.trace.display());
    }
    Ok(trace)
}

fn csv_columns(args: &Args) -> anyhow::Result<CsvColumns> {
    let mut cols = args.csv_columns.clone().unwrap_or_default();
    cols.header |= args.csv_header;
    cols.delimiter = match args.csv_delimiter.as_str() {
        "\\t" | "tab" => b'\t',
        d if d.len() == 1 => d.as_bytes()[0],
        d => bail!("--csv-delimiter must be one character, got {d:?}"),
    };
    Ok(cols)
}

fn plot_formats(spec: &str) -> anyhow::Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for f in spec.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        match f.to_ascii_lowercase().as_str() {
            "none" => return Ok(Vec::new()),
            "png" => out.push("png"),
            "svg" => out.push("svg"),
            other => bail!("unknown plot format {other:?}; valid: png, svg, none"),
        }
    }
    Ok(out)
}

/// Prints every Belady's anomaly (a bigger cache missing more) between consecutive sizes.
fn report_anomalies(cells: &[Cell], headers: &[String], capacities: &[Capacity]) {
    let anomalies = find_anomalies(cells);
    if anomalies.is_empty() {
        println!("Belady's anomaly: none (no policy misses more in a bigger cache at these sizes)");
        return;
    }
    let name = |c: Capacity| {
        capacities.iter().position(|&x| x == c).map_or_else(|| c.limit().to_string(), |i| headers[i].clone())
    };
    for a in &anomalies {
        let lost = a.lost_hits.map_or(String::new(), |n| {
            format!("; {} requests hit in the smaller cache but missed in the bigger", thousands(n))
        });
        println!(
            "Belady's anomaly: {} misses more at {} than at {} ({} > {} misses{lost})",
            a.contender.label(),
            name(a.larger),
            name(a.smaller),
            thousands(a.larger_misses),
            thousands(a.smaller_misses),
        );
    }
}

fn write_outputs(dir: &Path, plots: &[&str], fig: Figure<'_>, sizes: &[SizeSpec]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let csv = dir.join("results.csv");
    let file = std::fs::File::create(&csv).with_context(|| format!("creating {}", csv.display()))?;
    write_csv(std::io::BufWriter::new(file), fig.trace, fig.cells, sizes, &fig.latency)
        .with_context(|| format!("writing {}", csv.display()))?;
    let mut written = vec![csv];
    for ext in plots {
        let path = |stem: &str| dir.join(format!("{stem}.{ext}"));
        plot::miss_ratio(&path("miss-ratio"), fig, Ratio::Object)?;
        plot::miss_ratio(&path("byte-miss-ratio"), fig, Ratio::Byte)?;
        plot::timeline(&path("timeline"), fig)?;
        plot::access_time(&path("access-time"), fig)?;
        written.extend(["miss-ratio", "byte-miss-ratio", "timeline", "access-time"].map(path));
    }
    eprintln!("wrote {}", written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    Ok(())
}
