//! The executor hyper spawns each HTTP/2 request stream on.

use std::future::Future;

/// Spawns each future on the current tokio runtime behind a `Box`.
///
/// hyper's HTTP/2 server spawns every request stream as a task of its own holding the
/// service's future (`service::handle`'s, several KiB). tokio moves a task's future by
/// value on its way in (`spawn`, the task cell) and writes its stage in place when it
/// completes, each a copy of the whole future; boxed, each of those moves a pointer, and
/// the future is copied once, into the box. On 1 KiB hits over HTTP/2 that is about a
/// tenth of the proxy's CPU (docs/benchmarks.md, "TLS and HTTP/2 towards clients").
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SpawnBoxed;

impl<F> hyper::rt::Executor<F> for SpawnBoxed
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        tokio::spawn(Box::pin(future));
    }
}

#[cfg(test)]
mod tests {
    use super::SpawnBoxed;
    use hyper::rt::Executor;

    #[tokio::test]
    async fn the_future_runs_on_the_current_runtime() {
        let (done, ran) = tokio::sync::oneshot::channel();
        SpawnBoxed.execute(async move {
            let _ = done.send(tokio::runtime::Handle::current().id());
        });
        assert_eq!(ran.await.expect("the spawned future ran"), tokio::runtime::Handle::current().id());
    }
}
