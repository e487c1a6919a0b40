//! How a transaction was served: Squid's result codes, used by the access log and metrics.

/// Squid's `%Ss` result codes, as Sluice uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultCode {
    /// Nothing was served (malformed request, error before any lookup).
    None,
    /// Fresh hit from memory.
    MemHit,
    /// Fresh hit from the disk tier (after a memory miss).
    DiskHit,
    /// Client conditional answered 304 from the cache.
    ImsHit,
    /// Stale response served while it is revalidated in the background, or because the
    /// request allowed it (`max-stale`). Sluice-specific; analysers that look for `HIT`
    /// count it as a hit.
    StaleHit,
    /// Fetched from the origin (also for uncacheable pass-through requests).
    Miss,
    /// The client asked to bypass the cache (`no-cache`).
    ClientRefreshMiss,
    /// Stale; the origin confirmed it (304).
    RefreshUnmodified,
    /// Stale; the origin sent a new response.
    RefreshModified,
    /// Stale; validation failed and the stale response was served (`stale-if-error`).
    RefreshFailOld,
    /// Stale; validation failed and the error was served.
    RefreshFailErr,
    /// Refused by an ACL.
    Denied,
    /// A CONNECT tunnel.
    Tunnel,
}

impl ResultCode {
    /// All codes, for metrics.
    pub const ALL: [ResultCode; 13] = [
        ResultCode::None,
        ResultCode::MemHit,
        ResultCode::DiskHit,
        ResultCode::ImsHit,
        ResultCode::StaleHit,
        ResultCode::Miss,
        ResultCode::ClientRefreshMiss,
        ResultCode::RefreshUnmodified,
        ResultCode::RefreshModified,
        ResultCode::RefreshFailOld,
        ResultCode::RefreshFailErr,
        ResultCode::Denied,
        ResultCode::Tunnel,
    ];

    /// The code as Squid writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultCode::None => "NONE",
            ResultCode::MemHit => "TCP_MEM_HIT",
            ResultCode::DiskHit => "TCP_HIT",
            ResultCode::ImsHit => "TCP_IMS_HIT",
            ResultCode::StaleHit => "TCP_STALE_HIT",
            ResultCode::Miss => "TCP_MISS",
            ResultCode::ClientRefreshMiss => "TCP_CLIENT_REFRESH_MISS",
            ResultCode::RefreshUnmodified => "TCP_REFRESH_UNMODIFIED",
            ResultCode::RefreshModified => "TCP_REFRESH_MODIFIED",
            ResultCode::RefreshFailOld => "TCP_REFRESH_FAIL_OLD",
            ResultCode::RefreshFailErr => "TCP_REFRESH_FAIL_ERR",
            ResultCode::Denied => "TCP_DENIED",
            ResultCode::Tunnel => "TCP_TUNNEL",
        }
    }

    /// True when the response came from the cache without a full fetch.
    pub fn is_hit(self) -> bool {
        matches!(
            self,
            ResultCode::MemHit
                | ResultCode::DiskHit
                | ResultCode::ImsHit
                | ResultCode::StaleHit
                | ResultCode::RefreshUnmodified
        )
    }

    /// Its place in [`ResultCode::ALL`].
    pub(crate) fn index(self) -> usize {
        Self::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }
}

/// Per-code counters.
#[derive(Debug, Default)]
pub struct ResultCounters {
    counts: [std::sync::atomic::AtomicU64; 13],
}

impl ResultCounters {
    pub fn add(&self, code: ResultCode) {
        self.counts[code.index()].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn get(&self, code: ResultCode) -> u64 {
        self.counts[code.index()].load(std::sync::atomic::Ordering::Relaxed)
    }
}
