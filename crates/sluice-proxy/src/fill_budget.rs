//! The memory that fills may hold together while they store their objects
//! (`cache.filling_memory`). A fill that stores keeps every byte it read from the origin
//! until its object is complete, whether or not its readers keep up; without a bound, a
//! client that asks for many large objects and reads none of them (an HTTP/2 client with a
//! zero window, say) would have the proxy hold them all, far beyond the cache's own size.
//! Past the budget, a fill stops storing: it streams to its readers in a bounded window
//! (`sluice_store::Fill::stop_keeping`), as a response too large to store does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many bytes fills that store may hold in all.
#[derive(Debug)]
pub struct FillBudget {
    held: AtomicU64,
    max: u64,
}

impl FillBudget {
    /// A budget of `max` bytes.
    pub fn new(max: u64) -> Arc<Self> {
        Arc::new(Self { held: AtomicU64::new(0), max })
    }

    /// Bytes held by fills now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// The budget.
    pub fn max(&self) -> u64 {
        self.max
    }
}

/// What one fill holds of the budget; given back when dropped (the fill stored its object,
/// failed, or stopped storing).
#[derive(Debug)]
pub struct Held {
    budget: Arc<FillBudget>,
    bytes: u64,
}

impl Held {
    pub fn new(budget: &Arc<FillBudget>) -> Self {
        Self { budget: Arc::clone(budget), bytes: 0 }
    }

    /// Takes `n` more bytes; false, and nothing taken, when the fills would then hold more
    /// than the budget (a fill that holds nothing yet may always take its first piece, so
    /// that a budget smaller than one piece does not stop every fill).
    pub fn take(&mut self, n: u64) -> bool {
        let max = self.budget.max;
        let first = self.bytes == 0;
        let taken = self
            .budget
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                let after = held.saturating_add(n);
                (after <= max || (first && held == 0)).then_some(after)
            })
            .is_ok();
        if taken {
            self.bytes += n;
        }
        taken
    }

    /// Bytes this fill holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives back everything this fill held.
    pub fn release(&mut self) {
        self.budget.held.fetch_sub(std::mem::take(&mut self.bytes), Ordering::Relaxed);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_take_up_to_the_budget_together_and_give_back_when_done() {
        let budget = FillBudget::new(100);
        let mut a = Held::new(&budget);
        let mut b = Held::new(&budget);
        assert!(a.take(60));
        assert!(b.take(40));
        assert!(!b.take(1), "full");
        assert_eq!(budget.held(), 100);
        drop(a);
        assert_eq!(budget.held(), 40);
        assert!(b.take(60));
        b.release();
        assert_eq!(budget.held(), 0);
        let mut big = Held::new(&budget);
        assert!(big.take(500), "a first piece larger than the budget, with nothing else held");
        let mut other = Held::new(&budget);
        assert!(!other.take(1));
    }
}
