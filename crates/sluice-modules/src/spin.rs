//! `spin`: spends a set amount of pure CPU work on every transaction, at `req_headers`, in a
//! loop that keeps its state in registers (no memory touched, no allocation). It calibrates the
//! module benchmarks: it adds instructions and nothing else, so its cost in time, against its
//! cost in instructions, shows how much of another module's time overhead its instructions
//! explain (docs/benchmarks.md, "Instructions against time").
//!
//! Setting: `iterations` (default 1000), loop turns per transaction. The compiler unrolls the
//! loop: on x86-64 a turn is about one instruction, and a transaction about 900 more (the
//! module chain's own cost), so `iterations = 5600` adds about 6,500 instructions per hit,
//! what an empty Proxy-Wasm plugin adds (`bench/modules/callgrind.sh none spin-5600`).

use sluice_module::{Flow, Module, Txn, TxnInfo};
use std::sync::Arc;

struct Spin {
    iterations: u64,
}

struct SpinTxn {
    iterations: u64,
}

impl Txn for SpinTxn {
    fn req_headers(&mut self, info: &TxnInfo, _: &mut http::request::Parts) -> Flow {
        std::hint::black_box(spin(std::hint::black_box(info.id), std::hint::black_box(self.iterations)));
        Flow::Continue
    }
}

/// `iterations` turns of a multiply-add recurrence from `seed`: no closed form the compiler
/// could substitute, no memory touched.
fn spin(seed: u64, iterations: u64) -> u64 {
    let mut x = seed;
    for i in 0..iterations {
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(i);
    }
    x
}

impl Module for Spin {
    fn name(&self) -> &str {
        "spin"
    }

    fn new_txn(&self, _: &TxnInfo) -> Option<Box<dyn Txn>> {
        Some(Box::new(SpinTxn { iterations: self.iterations }))
    }
}

pub fn build(settings: &toml::Table) -> Result<Arc<dyn Module>, String> {
    crate::only_keys(settings, &["iterations"])?;
    let iterations = match settings.get("iterations") {
        None => 1000,
        Some(value) => value
            .as_integer()
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| format!("`iterations` must be a non-negative integer, not {value}"))?,
    };
    Ok(Arc::new(Spin { iterations }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn the_recurrence_turns_as_often_as_asked() {
        assert_eq!(spin(7, 0), 7);
        assert_eq!(spin(7, 1), 7u64.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        assert_ne!(spin(7, 1000), spin(7, 1001));
    }

    #[test]
    fn iterations_must_be_a_non_negative_integer() {
        assert!(build(&settings("")).is_ok());
        assert!(build(&settings("iterations = 5600")).is_ok());
        let negative = build(&settings("iterations = -1")).err().unwrap();
        assert!(negative.contains("non-negative"), "{negative}");
        assert!(build(&settings("iterations = \"many\"")).is_err());
        let unknown = build(&settings("turns = 3")).err().unwrap();
        assert!(unknown.contains("unknown setting `turns`"), "{unknown}");
    }
}
