//! Injected time. Freshness, ages and generated `Date` headers read wall time only through a
//! [`Clock`], so tests move time forward instead of sleeping. (`.clippy.toml` bans
//! `SystemTime::now` elsewhere.)

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to; for tests. Starts at the system time, truncated to
/// whole seconds (HTTP dates have one-second resolution).
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<SystemTime>>,
}

impl Default for ManualClock {
    fn default() -> Self {
        let secs = SystemClock.now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        Self { now: Arc::new(Mutex::new(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))) }
    }
}

impl ManualClock {
    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        *self.now.lock() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock()
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;
