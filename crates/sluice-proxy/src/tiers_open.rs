//! Opening the disk tier at start-up from `[cache.disk]`: recovery of what a previous run
//! stored, and clear errors for a directory that cannot be used.

use crate::config::CacheConfig;
use sluice_store::disk::DiskTier;
use std::io;

/// Opens (creating if needed) and recovers the disk tier `cache.disk` names, or `None` when
/// it names no directory. Blocking: recovery reads the header and metadata of every file.
/// Errors name the directory and the reason (not writable, locked by another process…).
pub fn open_disk(cache: &CacheConfig) -> Result<Option<DiskTier>, String> {
    let disk = &cache.disk;
    let Some(dir) = &disk.dir else { return Ok(None) };
    let policy_name = disk.policy.as_deref().unwrap_or(&cache.policy);
    let policy_config = sluice_policy::PolicyConfig::new(sluice_policy::Capacity::Bytes(disk.size.0));
    let policy = sluice_policy::build(policy_name, &policy_config).map_err(|e| format!("cache.disk.policy: {e}"))?;
    let config = disk.tier_config(cache.max_object.0);
    let (tier, report) = DiskTier::open_with(dir, config, policy).map_err(|e| {
        let why = match e.kind() {
            io::ErrorKind::WouldBlock => "it is locked by another process (one Sluice per directory)".to_owned(),
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                format!("it is not writable ({e})")
            }
            _ => e.to_string(),
        };
        format!("cache.disk.dir {}: cannot open the disk tier: {why}", dir.display())
    })?;
    tracing::info!("disk tier {}: {report:?}", dir.display());
    Ok(Some(tier))
}
