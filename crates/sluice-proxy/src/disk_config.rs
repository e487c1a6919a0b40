//! `[cache.disk]`: the disk tier under the memory tier (see `docs/store.md`). Without `dir`
//! there is no disk tier and the cache is memory only (the default).

use crate::units::Size;
use serde::{Deserialize, Serialize};
use sluice_store::disk::{DiskConfig, WaterMarks};
use std::path::PathBuf;

/// The disk tier's settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiskCacheConfig {
    /// Directory of the tier (created if missing; one process at a time). `None`: no disk
    /// tier.
    pub dir: Option<PathBuf>,
    /// Disk bytes the tier may use (files are charged in whole 4 KiB blocks).
    pub size: Size,
    /// Objects the tier may hold; each costs about 3 KiB of memory for the index. `None`: no
    /// limit besides `size`.
    pub max_entries: Option<u64>,
    /// Eviction starts when an admission would take usage above `high_water × size` (or
    /// `× max_entries`) and evicts down to `low_water ×` the limit.
    pub high_water: f64,
    pub low_water: f64,
    /// Largest object written to disk. `None`: `cache.max_object`.
    pub max_object: Option<Size>,
    /// Disk hits with bodies up to this size are read into memory and promoted into the
    /// memory tier; larger ones are streamed from their file. Never more than what the
    /// memory tier accepts.
    pub promote_max: Size,
    /// Disk hits that are streamed (not promoted) go to plaintext HTTP/1.x clients with
    /// `sendfile(2)`, from the page cache to the socket without a copy through user space,
    /// unless a module sees the body. `false` reads them in 256 KiB steps instead.
    pub sendfile: bool,
    /// Verified object files kept open for later disk hits, which then open and check
    /// nothing (like nginx's `open_file_cache`). Each costs a descriptor; 0 keeps none.
    pub open_files: usize,
    /// Disk hits an object needs (counted since it was written or recovered) before it is
    /// promoted; until then it is streamed from its file. 1: promote on the first hit.
    pub promote_min_hits: u64,
    /// Replacement policy of the disk tier. `None`: `cache.policy`.
    pub policy: Option<String>,
}

impl Default for DiskCacheConfig {
    fn default() -> Self {
        Self {
            dir: None,
            size: Size(10 << 30),
            max_entries: None,
            high_water: 0.95,
            low_water: 0.90,
            max_object: None,
            promote_max: Size(1 << 20),
            sendfile: true,
            open_files: 1024,
            promote_min_hits: 1,
            policy: None,
        }
    }
}

impl DiskCacheConfig {
    /// Checks what the types cannot; the message names the offending key.
    pub fn validate(&self) -> Result<(), String> {
        if self.dir.is_none() {
            return Ok(());
        }
        if self.dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
            return Err("cache.disk.dir must not be empty (leave it out for no disk tier)".into());
        }
        if self.size.0 == 0 {
            return Err("cache.disk.size must be more than 0".into());
        }
        if self.promote_min_hits == 0 {
            return Err("cache.disk.promote_min_hits must be at least 1".into());
        }
        if self.max_entries == Some(0) {
            return Err("cache.disk.max_entries must be more than 0".into());
        }
        if WaterMarks::new(self.high_water, self.low_water).is_none() {
            return Err(format!(
                "cache.disk: water marks must satisfy 0 < low_water <= high_water <= 1 (got {} and {})",
                self.low_water, self.high_water
            ));
        }
        if let Some(name) = &self.policy {
            if sluice_policy::describe(name).is_none() {
                return Err(format!("cache.disk.policy: unknown policy {name:?}"));
            }
        }
        Ok(())
    }

    /// The tier's settings, with `cache.max_object` as the default object limit.
    pub fn tier_config(&self, cache_max_object: u64) -> DiskConfig {
        let water = WaterMarks::new(self.high_water, self.low_water).unwrap_or_default();
        DiskConfig {
            max_object: self.max_object.map_or(cache_max_object, |s| s.0),
            water,
            open_files: self.open_files,
            ..DiskConfig::new(self.size.0, self.max_entries.unwrap_or(u64::MAX))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_have_no_disk_tier_and_validate() {
        let c = DiskCacheConfig::default();
        assert!(c.dir.is_none());
        assert_eq!(c.validate(), Ok(()));
        let tier = c.tier_config(64 << 20);
        assert_eq!(tier.max_object, 64 << 20);
        assert_eq!(tier.capacity_bytes, 10 << 30);
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let base = DiskCacheConfig { dir: Some("/tmp/x".into()), ..DiskCacheConfig::default() };
        let water = DiskCacheConfig { high_water: 0.5, low_water: 0.9, ..base.clone() };
        assert!(water.validate().unwrap_err().contains("water"));
        let size = DiskCacheConfig { size: Size(0), ..base.clone() };
        assert!(size.validate().unwrap_err().contains("cache.disk.size"));
        let promote = DiskCacheConfig { promote_min_hits: 0, ..base.clone() };
        assert!(promote.validate().unwrap_err().contains("promote_min_hits"));
        let policy = DiskCacheConfig { policy: Some("nope".into()), ..base };
        assert!(policy.validate().unwrap_err().contains("cache.disk.policy"));
    }
}
