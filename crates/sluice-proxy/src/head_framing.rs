//! The host frames every message it sends (docs/modules.md, "Framing is the host's"). The
//! fields that frame a body are kept from untrusted edits where they are written: the
//! Proxy-Wasm host's header calls and ext_proc's mutations take them through
//! `sluice_http::framing`, so a head no module edits costs nothing here; compiled-in Rust
//! modules, the operator's own code, keep to the contract. What the host checks after a
//! response-header phase is the one thing no field write can undo: a status that cannot
//! carry the body the response has.

use crate::error::{Kind, ProxyError, Side};
use http::{response, StatusCode};

/// A response head's status as the host set it, taken before a module phase that may edit
/// the head.
pub(crate) struct FramedStatus {
    status: StatusCode,
}

impl FramedStatus {
    /// The status of `parts` now.
    #[inline]
    pub(crate) fn of(parts: &response::Parts) -> Self {
        Self { status: parts.status }
    }

    /// Checks the phase's change of status: the module's to make, but not to or from one
    /// without a body (1xx, 204, 304) or outside 200-599; that is refused as the module's
    /// failure (500), since the host could not frame the body for it.
    #[inline]
    pub(crate) fn check(self, parts: &response::Parts) -> Result<(), ProxyError> {
        if parts.status == self.status || (has_body(parts.status) && has_body(self.status)) {
            return Ok(());
        }
        Err(ProxyError::new(
            Kind::Internal,
            Side::Module,
            format!(
                "a module changed the response's status from {} to {}; the host cannot frame the body for it",
                self.status.as_u16(),
                parts.status.as_u16()
            ),
        ))
    }
}

/// Whether a response with `status` carries a body and is one a proxy sends on (200-599).
fn has_body(status: StatusCode) -> bool {
    (200..=599).contains(&status.as_u16()) && sluice_http::framing::status_has_body(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Response;

    #[test]
    fn a_status_that_cannot_carry_the_body_is_refused() {
        for (from, to, allowed) in [
            (200, 404, true),
            (503, 200, true),
            (200, 204, false),
            (200, 304, false),
            (204, 200, false),
            (200, 101, false),
            (200, 999, false),
        ] {
            let mut parts = Response::builder().status(from).body(()).unwrap().into_parts().0;
            let before = FramedStatus::of(&parts);
            parts.status = StatusCode::from_u16(to).unwrap();
            assert_eq!(before.check(&parts).is_ok(), allowed, "{from} -> {to}");
        }
        let same = Response::builder().status(304).body(()).unwrap().into_parts().0;
        assert!(FramedStatus::of(&same).check(&same).is_ok(), "unchanged");
    }
}
