//! Whether a request that may switch protocols (`CONNECT`, or `Upgrade` in HTTP/1.1) did:
//! told by the service, which answers it, to the connection's framing guard
//! ([`crate::framing::StrictHttp1`]), which must then pass every byte after it through
//! untouched (a tunnel is blind, RFC 9110 §9.3.6) or, when the switch was refused, go on
//! reading them as HTTP/1. The guard holds what follows such a request until it knows; hyper
//! serves an HTTP/1 connection's requests one after the other, so the answer it waits for is
//! the one the service gives next ([`SwitchOutcome::may_switch`] names the requests both
//! sides count).

use futures_util::task::AtomicWaker;
use http::{Method, Version};
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

const UNDECIDED: u8 = 0;
const SWITCHED: u8 = 1;
const REFUSED: u8 = 2;

/// The outcome of the last request on an HTTP/1 connection that may switch protocols.
#[derive(Debug, Default)]
pub struct SwitchOutcome {
    state: AtomicU8,
    waiter: AtomicWaker,
}

impl SwitchOutcome {
    /// Whether a request may switch protocols, by the rule the guard applies to its head:
    /// `CONNECT`, or an HTTP/1.1 request with `Upgrade`.
    pub fn may_switch(method: &Method, version: Version, has_upgrade: bool) -> bool {
        version <= Version::HTTP_11 && (method == Method::CONNECT || (has_upgrade && version == Version::HTTP_11))
    }

    /// The guard let such a request through: its outcome is not known yet.
    pub(crate) fn expect(&self) {
        self.state.store(UNDECIDED, Ordering::Release);
    }

    /// The service answered such a request: `switched` when the connection now carries a
    /// tunnel or another protocol (`101`, a `2xx` to `CONNECT`).
    pub fn decide(&self, switched: bool) {
        self.state.store(if switched { SWITCHED } else { REFUSED }, Ordering::Release);
        self.waiter.wake();
    }

    /// The outcome, once the service gave it.
    pub(crate) fn decided(&self) -> Option<bool> {
        match self.state.load(Ordering::Acquire) {
            SWITCHED => Some(true),
            REFUSED => Some(false),
            _ => None,
        }
    }

    /// Waits for the outcome (the guard, holding what the client sent after the request).
    pub(crate) fn poll_decided(&self, cx: &mut Context<'_>) -> Poll<bool> {
        if let Some(switched) = self.decided() {
            return Poll::Ready(switched);
        }
        self.waiter.register(cx.waker());
        self.decided().map_or(Poll::Pending, Poll::Ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outcome_is_waited_for_until_decided_then_reset_for_the_next_request() {
        let outcome = SwitchOutcome::default();
        outcome.expect();
        let waker = futures_util::task::noop_waker();
        assert_eq!(outcome.poll_decided(&mut Context::from_waker(&waker)), Poll::Pending);
        outcome.decide(true);
        assert_eq!(outcome.poll_decided(&mut Context::from_waker(&waker)), Poll::Ready(true));
        outcome.expect();
        assert_eq!(outcome.decided(), None);
        outcome.decide(false);
        assert_eq!(outcome.decided(), Some(false));
    }

    #[test]
    fn connect_and_http11_upgrades_may_switch() {
        assert!(SwitchOutcome::may_switch(&Method::CONNECT, Version::HTTP_10, false));
        assert!(SwitchOutcome::may_switch(&Method::GET, Version::HTTP_11, true));
        assert!(!SwitchOutcome::may_switch(&Method::GET, Version::HTTP_10, true));
        assert!(!SwitchOutcome::may_switch(&Method::GET, Version::HTTP_11, false));
        assert!(!SwitchOutcome::may_switch(&Method::CONNECT, Version::HTTP_2, false));
    }
}
