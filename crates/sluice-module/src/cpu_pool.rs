//! A bounded pool for a module's CPU work, reachable from every phase through
//! [`crate::TxnInfo::cpu`].
//!
//! A phase must not block its transaction's task for long: CPU work (hashing a body, a
//! signature check, a decompression) goes to the pool, and the phase answers
//! [`crate::Flow::Defer`] with a future that awaits the [`CpuJob`]:
//!
//! ```no_run
//! # use sluice_module::{Flow, TxnInfo};
//! # use std::time::Duration;
//! # fn phase(info: &TxnInfo) -> Flow {
//! let Ok(job) = info.cpu.spawn(|| expensive()) else {
//!     return Flow::Continue; // the pool is saturated: fail open (or Respond 503: closed)
//! };
//! Flow::Defer {
//!     work: Box::pin(async move {
//!         match job.await {
//!             Ok(_answer) => Flow::Continue,
//!             Err(_) => Flow::Continue,
//!         }
//!     }),
//!     deadline: Duration::from_millis(200),
//! }
//! # }
//! # fn expensive() -> u64 { 42 }
//! ```
//!
//! The bounds are real: at most `threads` jobs run at once (a semaphore in front of Tokio's
//! blocking pool, whose own threads are shared with the rest of the process), and at most
//! `queue` more wait for a thread. [`CpuPool::spawn`] fails at once with [`CpuError::Full`]
//! when `threads + queue` jobs are already admitted, so a saturated pool sheds load instead
//! of growing a backlog. A job is admitted by `spawn` but started only when its [`CpuJob`] is
//! polled and a thread is free; dropping the `CpuJob` (the host drops a deferral's future when
//! the client goes away or the deadline passes) before it starts means it never runs, and
//! after it started means its result is thrown away (a running closure cannot be stopped; it
//! keeps its thread until it returns).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a [`CpuPool`] job gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuError {
    /// `threads + queue` jobs were already admitted; nothing was started. Returned by
    /// [`CpuPool::spawn`] at once.
    Full,
    /// The closure panicked.
    Panicked,
}

impl std::fmt::Display for CpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuError::Full => f.write_str("the CPU pool is full"),
            CpuError::Panicked => f.write_str("the CPU job panicked"),
        }
    }
}

impl std::error::Error for CpuError {}

/// A bounded pool of threads for modules' CPU work (see the module docs). Cheap to clone
/// (one reference count: every transaction's [`crate::TxnInfo`] carries one): clones share
/// the bounds.
#[derive(Clone)]
pub struct CpuPool {
    bounds: Arc<Bounds>,
}

struct Bounds {
    /// One permit per job allowed to run at once (`threads`).
    running: Arc<Semaphore>,
    /// One permit per job admitted, running or waiting (`threads + queue`).
    admitted: Arc<Semaphore>,
    threads: usize,
    queue: usize,
}

impl std::fmt::Debug for CpuPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuPool").field("threads", &self.bounds.threads).field("queue", &self.bounds.queue).finish()
    }
}

impl Default for CpuPool {
    /// [`CpuPool::DEFAULT_QUEUE`] waiting jobs over one thread per core.
    fn default() -> Self {
        Self::new(0, Self::DEFAULT_QUEUE)
    }
}

impl CpuPool {
    /// The default bound on jobs waiting for a thread.
    pub const DEFAULT_QUEUE: usize = 256;

    /// A pool running at most `threads` jobs at once (`0`: one per core) with at most `queue`
    /// more waiting.
    pub fn new(threads: usize, queue: usize) -> Self {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let bounds = Bounds {
            running: Arc::new(Semaphore::new(threads)),
            admitted: Arc::new(Semaphore::new(threads + queue)),
            threads,
            queue,
        };
        Self { bounds: Arc::new(bounds) }
    }

    /// How many jobs run at once at most.
    pub fn threads(&self) -> usize {
        self.bounds.threads
    }

    /// How many jobs may wait for a thread at most.
    pub fn queue(&self) -> usize {
        self.bounds.queue
    }

    /// Admits `job`, or fails at once with [`CpuError::Full`]. The returned future runs it on
    /// a pool thread when polled (inside a Tokio runtime: the host's, in a deferral) and
    /// yields its result; dropping the future cancels a job not yet started.
    pub fn spawn<T, F>(&self, job: F) -> Result<CpuJob<T>, CpuError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let admitted = Arc::clone(&self.bounds.admitted).try_acquire_owned().map_err(|_| CpuError::Full)?;
        let running = Arc::clone(&self.bounds.running);
        let work = async move {
            // Waiting here is the queue; a drop while waiting means the job never starts.
            let permit: OwnedSemaphorePermit = running.acquire_owned().await.expect("the pool never closes");
            let handle = tokio::task::spawn_blocking(move || {
                let result = job();
                drop((permit, admitted));
                result
            });
            handle.await.map_err(|_| CpuError::Panicked)
        };
        Ok(CpuJob { work: Box::pin(work) })
    }
}

/// An admitted job of a [`CpuPool`]: a future of its result.
pub struct CpuJob<T> {
    work: Pin<Box<dyn Future<Output = Result<T, CpuError>> + Send>>,
}

impl<T> std::fmt::Debug for CpuJob<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CpuJob")
    }
}

impl<T> Future for CpuJob<T> {
    type Output = Result<T, CpuError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.work.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    /// A job that tells `started` it runs, then blocks until `release` is sent to.
    fn blocker(pool: &CpuPool) -> (CpuJob<()>, mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (started_tx, started) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let job = pool
            .spawn(move || {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            })
            .unwrap();
        (job, started, release)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_runs_on_the_pool_and_yields_its_result() {
        let pool = CpuPool::new(2, 0);
        let job = pool.spawn(|| (0..1000u64).sum::<u64>()).unwrap();
        assert_eq!(job.await, Ok(499_500));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_pool_refuses_at_once_and_takes_jobs_again_when_one_ends() {
        let pool = CpuPool::new(1, 1);
        let (running, started, release) = blocker(&pool);
        let running = tokio::spawn(running);
        tokio::task::spawn_blocking(move || started.recv().unwrap()).await.unwrap();
        let queued = pool.spawn(|| 2).unwrap();
        assert_eq!(pool.spawn(|| 3).err(), Some(CpuError::Full), "one running + one queued is the bound");
        release.send(()).unwrap();
        running.await.unwrap().unwrap();
        assert_eq!(queued.await, Ok(2));
        assert_eq!(pool.spawn(|| 4).unwrap().await, Ok(4));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_dropped_while_queued_never_runs() {
        let pool = CpuPool::new(1, 1);
        let (running, started, release) = blocker(&pool);
        let running = tokio::spawn(running);
        tokio::task::spawn_blocking(move || started.recv().unwrap()).await.unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        let mut queued = pool.spawn(move || flag.store(true, Ordering::SeqCst)).unwrap();
        // Poll it once so it waits for the thread, then drop it (a cancelled deferral).
        assert!(futures_util::poll!(&mut queued).is_pending());
        drop(queued);
        release.send(()).unwrap();
        running.await.unwrap().unwrap();
        // The pool's only thread has been free since: a job queued after runs, the dropped one never did.
        assert_eq!(pool.spawn(|| 5).unwrap().await, Ok(5));
        assert!(!ran.load(Ordering::SeqCst));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_job_is_an_error_and_frees_its_place() {
        let pool = CpuPool::new(1, 0);
        let job = pool.spawn(|| -> u8 { panic!("boom") }).unwrap();
        assert_eq!(job.await, Err(CpuError::Panicked));
        assert_eq!(pool.spawn(|| 6).unwrap().await, Ok(6));
    }
}
