//! The memory tier's replacement policy, from the shared policy crate.

use sluice_policy::Policy;

/// Builds the named policy for a tier of `capacity` bytes.
pub fn build(name: &str, capacity: u64) -> Result<Box<dyn Policy>, String> {
    let config = sluice_policy::PolicyConfig::new(sluice_policy::Capacity::Bytes(capacity));
    sluice_policy::build(name, &config).map_err(|e| format!("cache.policy: {e}"))
}
