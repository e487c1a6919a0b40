//! Built-in modules, compiled in and enabled by name in `[[module]]` configuration.
//!
//! | name | what it does |
//! |---|---|
//! | `noop` | implements every phase and does nothing: the cost of the module machinery |
//! | `add-headers` | adds configured header fields to every response towards clients |
//! | `body-copy` | copies every response body chunk towards clients (a body-editing module's cost) |
//! | `spin` | spends a set number of loop turns of pure CPU work per transaction (benchmark calibration) |
//!
//! The sample modules of seed 000 (ad remover, compressor, transcoder, injector, content
//! manager, ICAP client) join this table as they are written.
//!
//! [`Factory`] builds the modules of a `[[module]]` entry of any kind: a built-in module from
//! this table, a Proxy-Wasm plugin, or an ext_proc helper process.

mod add_headers;
mod body_copy;
mod factory;
mod noop;
mod spin;

pub use factory::Factory;

use sluice_module::Module;
use std::sync::Arc;

/// Builds one module.
type Constructor = fn(&toml::Table) -> Result<Arc<dyn Module>, String>;

/// Every built-in module, by name.
const BUILTINS: &[(&str, Constructor)] = &[
    ("noop", noop::build),
    ("add-headers", add_headers::build),
    ("body-copy", body_copy::build),
    ("spin", spin::build),
];

/// Names of the built-in modules.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|(name, _)| *name)
}

/// Builds the built-in module `name` with its `settings` table. The error names the valid
/// modules when `name` is unknown, or says what is wrong with the settings.
pub fn build(name: &str, settings: &toml::Table) -> Result<Arc<dyn Module>, String> {
    match BUILTINS.iter().find(|(n, _)| *n == name) {
        Some((_, constructor)) => constructor(settings).map_err(|e| format!("module {name}: {e}")),
        None => Err(format!("unknown module {name:?}; built-in modules: {}", names().collect::<Vec<_>>().join(", "))),
    }
}

/// Rejects settings keys a module does not know.
fn only_keys(settings: &toml::Table, known: &[&str]) -> Result<(), String> {
    match settings.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(format!("unknown setting `{key}` (known: {})", known.join(", "))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn unknown_modules_list_the_valid_names() {
        let err = super::build("nope", &toml::Table::new()).err().unwrap();
        assert!(err.contains("noop") && err.contains("add-headers") && err.contains("body-copy"), "{err}");
    }
}
