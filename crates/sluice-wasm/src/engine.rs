//! The process-wide wasmtime engine and its epoch ticker.
//!
//! One [`Engine`] serves every plugin: it holds the compiler settings, and its epoch counter
//! drives every callback deadline. A background thread (`sluice-wasm-epoch`, started with the
//! engine, living as long as the process) advances the epoch every [`EPOCH_TICK`]; a callback
//! whose store deadline the epoch passes traps with `Trap::Interrupt`.

use std::sync::OnceLock;
use std::time::Duration;
use wasmtime::{Config, Engine, OptLevel};

/// How often the epoch advances: the granularity of callback deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The shared engine, created (with its ticker thread) on first use.
pub(crate) fn engine() -> Result<&'static Engine, String> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    ENGINE.get_or_init(new_engine).as_ref().map_err(Clone::clone)
}

fn new_engine() -> Result<Engine, String> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.cranelift_opt_level(OptLevel::Speed);
    // Fill function tables when an instance starts (rare: instances live long) instead of on
    // first use, so that every indirect call (the SDKs dispatch callbacks through trait
    // objects) skips the "initialized yet?" check.
    config.table_lazy_init(false);
    let engine = Engine::new(&config).map_err(|err| format!("cannot create the wasm engine: {err}"))?;
    let ticker = engine.clone();
    std::thread::Builder::new()
        .name("sluice-wasm-epoch".to_string())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            ticker.increment_epoch();
        })
        .map_err(|err| format!("cannot start the wasm epoch thread: {err}"))?;
    Ok(engine)
}

/// The epoch deadline (in ticks beyond the current epoch) that lets a callback run at least
/// `limit`: one tick more than `limit` rounds up to, as the current tick may be nearly over.
pub(crate) fn ticks_for(limit: Duration) -> u64 {
    let ticks = limit.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
    u64::try_from(ticks).unwrap_or(u64::MAX / 2).saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_add_a_tick() {
        assert_eq!(ticks_for(Duration::from_millis(50)), 11);
        assert_eq!(ticks_for(Duration::from_millis(51)), 12);
        assert_eq!(ticks_for(Duration::from_millis(1)), 2);
    }
}
