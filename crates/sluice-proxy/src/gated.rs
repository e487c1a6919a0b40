//! A future that is polled only when its own waker has fired.
//!
//! A connection task races its connection against rare events (shutdown, the idle timer) in
//! one `select!`. Every wake of the task, one per read or write, polls every branch, and
//! polling a `tokio::time::Sleep` or a `watch` change costs a few hundred instructions each
//! time although it is almost never ready. [`Gated`] skips that: it polls its future once,
//! with a waker of its own, and then only after that waker fired.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Wraps a future so that polling it is free until the future itself asked to be polled.
///
/// Contract: the output is the wrapped future's; it is the same as polling it directly,
/// provided the future wakes through the waker it is given (every well-behaved future does).
/// Creating one allocates; make one per wait, not per poll.
pub struct Gated<F> {
    future: Pin<Box<F>>,
    gate: Arc<Gate>,
    waker: Waker,
}

/// Whether the wrapped future's waker fired since it was last polled, and the task to wake.
#[derive(Debug)]
struct Gate {
    fired: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<F: Future> Gated<F> {
    pub fn new(future: F) -> Self {
        // Fired at first, so the first poll reaches the future and registers its waker.
        let gate = Arc::new(Gate { fired: AtomicBool::new(true), task: AtomicWaker::new() });
        let waker = Waker::from(Arc::clone(&gate));
        Self { future: Box::pin(future), gate, waker }
    }
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        // Registered before the flag is read, so a wake between the two is not lost.
        this.gate.task.register(cx.waker());
        if !this.gate.fired.swap(false, Ordering::Acquire) {
            return Poll::Pending;
        }
        this.future.as_mut().poll(&mut Context::from_waker(&this.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its polls; ready once `ready` is set, and wakes through the waker it was given.
    struct Counted {
        polls: Arc<AtomicUsize>,
        ready: Arc<AtomicBool>,
        waker: Arc<std::sync::Mutex<Option<Waker>>>,
    }

    impl Future for Counted {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            if self.ready.load(Ordering::Relaxed) {
                return Poll::Ready(());
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[test]
    fn the_future_is_polled_first_and_then_only_after_its_waker_fired() {
        let polls = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let inner_waker = Arc::new(std::sync::Mutex::new(None));
        let counted = Counted { polls: Arc::clone(&polls), ready: Arc::clone(&ready), waker: Arc::clone(&inner_waker) };
        let mut gated = Gated::new(counted);
        let outer = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(Arc::clone(&outer));
        let mut cx = Context::from_waker(&waker);

        assert!(Pin::new(&mut gated).poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), 1);
        for _ in 0..5 {
            assert!(Pin::new(&mut gated).poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::Relaxed), 1, "polled again although its waker did not fire");

        ready.store(true, Ordering::Relaxed);
        inner_waker.lock().unwrap().take().expect("the future kept a waker").wake();
        assert!(outer.0.load(Ordering::Relaxed), "the task was not woken");
        assert!(Pin::new(&mut gated).poll(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::Relaxed), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_gated_timer_fires_inside_select() {
        let sleep = Gated::new(tokio::time::sleep(std::time::Duration::from_secs(5)));
        let never = std::future::pending::<()>();
        let won = tokio::select! {
            biased;
            () = never => "pending",
            () = sleep => "timer",
        };
        assert_eq!(won, "timer");
    }

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}
