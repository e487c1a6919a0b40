//! `sluice sim`: trace-driven evaluation of replacement policies.

/// Arguments of `sluice sim`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the simulator.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("sluice sim is not built yet")
}
