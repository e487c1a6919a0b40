//! The `sluice` command line: one binary, one subcommand per job.

mod cmd;

use clap::{Parser, Subcommand};

/// mimalloc rather than glibc's malloc: a request allocates and frees dozens of small blocks
/// (header maps, bytes, boxed futures), and mimalloc's per-thread free lists cut a 1 KiB hit
/// by 6% and a pass-through by 9% of their user-space instructions (docs/benchmarks.md,
/// "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sluice: a programmable caching HTTP proxy and cooperative CDN node.
#[derive(Parser, Debug)]
#[command(name = "sluice", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the proxy (forward and/or reverse caching proxy, admin API).
    Serve(cmd::serve::Args),
    /// Replay a trace through replacement policies and report miss ratios.
    Sim(Box<cmd::sim::Args>),
    /// Manage a running proxy's cache content: query, fetch, prefetch, validate, expire,
    /// delete (by URL, prefix or tag), push, read. A client of its admin API.
    Ctl(cmd::ctl::Args),
    /// Fetch a URL through a running proxy's cache (its admin API's POST /fetch): body to
    /// stdout, cache status to stderr.
    Fetch(cmd::fetch::Command),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => cmd::serve::run(args),
        Command::Sim(args) => cmd::sim::run(*args),
        Command::Ctl(args) => cmd::ctl::run(args),
        Command::Fetch(args) => cmd::fetch::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
