//! Deadlines on waits for an origin, on timers reused from one wait to the next.
//!
//! A `tokio::time::timeout` per request costs its timer a registration in the runtime's timer
//! wheel on the first poll and a removal when it is dropped, each under the time driver's
//! lock. Yet the waits of one connection mostly come one after another: the requests of an
//! HTTP/1.1 client connection, the exchanges on an origin connection. So each connection keeps
//! its timers in a [`TimerSlot`], and a wait takes one, moves its deadline to the wait's own
//! and gives it back when done. Moving a registered timer's deadline later is a single
//! compare-and-swap in tokio (the wheel files the timer anew when its old slot comes up), so
//! a wait on a reused timer takes no lock at all.
//!
//! A wait that finds the slot empty (others hold its timers: concurrent HTTP/2 streams,
//! pipelined requests) starts a timer of its own, which the slot keeps afterwards while it
//! holds fewer than [`KEPT`]. A timer left in its slot stays registered until its last
//! deadline passes, then fires once, waking the last task that waited on it for nothing.
//!
//! That waker keeps its task's allocation alive (a finished task's memory lives as long as a
//! waker of it does). A client connection's slot ([`TimerSlot::default`]) serves that
//! connection's own task, which outlives it, and its HTTP/2 streams, at most [`KEPT`] of
//! whose wakers it holds until the connection closes. An origin connection's slot serves
//! whichever client's task sends a request on it, and a pooled connection outlives them:
//! its timers forget the last waker when given back ([`TimerSlot::shared`]), for about 150
//! instructions per wait.

use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The most idle timers a slot keeps.
const KEPT: usize = 4;

/// A connection's idle timers, for its waits to reuse ([`TimerSlot::within`]).
#[derive(Default)]
pub struct TimerSlot {
    idle: Mutex<Vec<Pin<Box<Sleep>>>>,
    /// Timers forget the waker of their last wait when given back.
    shared: bool,
}

impl std::fmt::Debug for TimerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerSlot").field("idle", &self.idle.lock().len()).field("shared", &self.shared).finish()
    }
}

/// A wait that outlived its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl TimerSlot {
    /// A slot whose waits come from tasks that may end before it does (an origin connection's,
    /// used by the clients' tasks in turn): its timers hold no waker while idle.
    pub fn shared() -> Self {
        Self { idle: Mutex::default(), shared: true }
    }

    /// `work`, bounded by `timeout` from now: `Err(Elapsed)` if it is not done by then (and
    /// `work` is dropped). The timer comes from this slot, or is new, and goes back to it.
    pub fn within<F: Future>(&self, timeout: Duration, work: F) -> Within<'_, F, Unchanged> {
        // Not `within_then(.., Unchanged)`: `work` would move twice.
        let deadline = Instant::now() + timeout;
        Within { work, deadline, timer: None, slot: self, then: Some(Unchanged) }
    }

    /// [`Self::within`], its outcome given to `then`. One future where `within(..).map(..)`
    /// would be two: `work` (a whole transaction, kilobytes) is moved once, not twice.
    pub fn within_then<F: Future, T: Then<Result<F::Output, Elapsed>>>(
        &self,
        timeout: Duration,
        work: F,
        then: T,
    ) -> Within<'_, F, T> {
        // The deadline first: computed inside the struct expression, after `work` was moved
        // into it, it would make the compiler copy `work` once more, to drop it should the
        // addition panic.
        let deadline = Instant::now() + timeout;
        Within { work, deadline, timer: None, slot: self, then: Some(then) }
    }

    /// An idle timer set to `deadline`, or a new one.
    fn take(&self, deadline: Instant) -> Pin<Box<Sleep>> {
        let reused = self.idle.lock().pop();
        match reused {
            Some(mut timer) => {
                timer.as_mut().reset(deadline);
                timer
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        }
    }

    /// Keeps `timer` for a later wait, unless the slot is full; in a shared slot, without the
    /// waker of the task that last waited on it.
    fn give_back(&self, mut timer: Pin<Box<Sleep>>) {
        let mut idle = self.idle.lock();
        if idle.len() >= KEPT {
            return;
        }
        if self.shared {
            // Polled with a waker that does nothing, outside the task's budget (a task out of
            // budget would get `Pending` without the waker being replaced).
            let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
            let _ = std::pin::pin!(tokio::task::unconstrained(timer.as_mut())).poll(&mut cx);
        }
        idle.push(timer);
    }
}

/// What a bounded wait does with its outcome ([`TimerSlot::within_then`]): a `FnOnce` that
/// can be named in a type.
pub trait Then<In> {
    type Output;
    fn then(self, outcome: In) -> Self::Output;
}

/// The outcome as it is ([`TimerSlot::within`]).
#[derive(Debug, Clone, Copy)]
pub struct Unchanged;

impl<In> Then<In> for Unchanged {
    type Output = In;
    fn then(self, outcome: In) -> In {
        outcome
    }
}

pin_project_lite::pin_project! {
    /// The future of [`TimerSlot::within`] and [`TimerSlot::within_then`].
    pub struct Within<'a, F, T> {
        #[pin]
        work: F,
        deadline: Instant,
        // Taken from the slot on the first poll that finds the work pending (work done at
        // once costs no timer).
        timer: Option<Pin<Box<Sleep>>>,
        slot: &'a TimerSlot,
        // Taken when the outcome is known.
        then: Option<T>,
    }

    impl<'a, F, T> PinnedDrop for Within<'a, F, T> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(timer) = this.timer.take() {
                this.slot.give_back(timer);
            }
        }
    }
}

impl<F: Future, T: Then<Result<F::Output, Elapsed>>> Future for Within<'_, F, T> {
    type Output = T::Output;

    /// # Panics
    /// When polled again after it was ready.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let outcome = if let Poll::Ready(output) = this.work.poll(cx) {
            if let Some(timer) = this.timer.take() {
                this.slot.give_back(timer);
            }
            Ok(output)
        } else {
            let deadline = *this.deadline;
            let timer = this.timer.get_or_insert_with(|| this.slot.take(deadline));
            match timer.as_mut().poll(cx) {
                Poll::Ready(()) => Err(Elapsed),
                Poll::Pending => return Poll::Pending,
            }
        };
        Poll::Ready(this.then.take().expect("Within polled after it was ready").then(outcome))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_done_in_time_gives_its_output_and_its_timer_back() {
        let slot = TimerSlot::default();
        let output = slot.within(Duration::from_secs(5), async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            7
        });
        assert_eq!(output.await, Ok(7));
        assert_eq!(slot.idle.lock().len(), 1, "kept for the next wait");
        // The next wait reuses it, with its own deadline (not the first wait's).
        let started = Instant::now();
        let late = slot.within(Duration::from_secs(10), std::future::pending::<()>());
        assert_eq!(late.await, Err(Elapsed));
        assert_eq!(Instant::now() - started, Duration::from_secs(10));
        assert_eq!(slot.idle.lock().len(), 1, "the reused timer went back, no second one");
    }

    #[tokio::test(start_paused = true)]
    async fn within_then_hands_the_outcome_over_in_time_or_late() {
        struct Describe;
        impl Then<Result<u8, Elapsed>> for Describe {
            type Output = String;
            fn then(self, outcome: Result<u8, Elapsed>) -> String {
                format!("{outcome:?}")
            }
        }
        let slot = TimerSlot::default();
        assert_eq!(slot.within_then(Duration::from_secs(1), async { 7 }, Describe).await, "Ok(7)");
        let late = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            7
        };
        assert_eq!(slot.within_then(Duration::from_secs(1), late, Describe).await, "Err(Elapsed)");
        assert_eq!(slot.idle.lock().len(), 1, "the timer went back");
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waits_get_timers_of_their_own_and_the_slot_keeps_a_few() {
        let slot = TimerSlot::default();
        let waits: Vec<_> = (1..=KEPT as u64 + 2)
            .map(|i| slot.within(Duration::from_secs(i), tokio::time::sleep(Duration::from_secs(60))))
            .collect();
        let started = Instant::now();
        let outcomes = futures_util::future::join_all(waits).await;
        assert!(outcomes.iter().all(|o| *o == Err(Elapsed)));
        assert_eq!(Instant::now() - started, Duration::from_secs(KEPT as u64 + 2), "each by its own deadline");
        assert_eq!(slot.idle.lock().len(), KEPT);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_timer_of_a_shared_slot_holds_no_waker_of_the_task_that_waited_on_it() {
        struct Task;
        impl futures_util::task::ArcWake for Task {
            fn wake_by_ref(_: &std::sync::Arc<Self>) {}
        }
        let slot = TimerSlot::shared();
        let task = std::sync::Arc::new(Task);
        let waker = futures_util::task::waker(std::sync::Arc::clone(&task));
        let mut cx = Context::from_waker(&waker);
        let (done, work) = tokio::sync::oneshot::channel::<()>();
        let mut wait = Box::pin(slot.within(Duration::from_secs(5), work));
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        assert!(std::sync::Arc::strong_count(&task) > 2, "the timer holds the waker while the task waits");
        done.send(()).unwrap();
        assert!(matches!(wait.as_mut().poll(&mut cx), Poll::Ready(Ok(Ok(())))));
        drop(wait);
        drop(waker);
        assert_eq!(slot.idle.lock().len(), 1);
        assert_eq!(std::sync::Arc::strong_count(&task), 1, "the idle timer let go of the waker");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_never_polled_takes_no_timer_and_a_dropped_one_gives_its_back() {
        let slot = TimerSlot::default();
        drop(slot.within(Duration::from_secs(1), std::future::pending::<()>()));
        assert!(slot.idle.lock().is_empty());
        let mut wait = Box::pin(slot.within(Duration::from_secs(1), std::future::pending::<()>()));
        assert!(futures_util::poll!(wait.as_mut()).is_pending());
        drop(wait);
        assert_eq!(slot.idle.lock().len(), 1);
    }
}
