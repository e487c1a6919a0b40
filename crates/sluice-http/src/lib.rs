//! Pure HTTP caching logic for Sluice: no I/O, no clocks. Every function takes the time it
//! needs as an argument, so the proxy, the simulator and the tests share one implementation.
//!
//! | module | RFC |
//! |---|---|
//! | [`cache_control`] | RFC 9111 §5.2 directives, RFC 9213 `CDN-Cache-Control` |
//! | [`dates`] | RFC 9110 §5.6.7 HTTP-date |
//! | [`age`] | RFC 9111 §4.2.3 age calculation |
//! | [`freshness`] | RFC 9111 §4.2.1, §4.2.2 (heuristics) |
//! | [`storable`] | RFC 9111 §3, §3.5, §5.2.2.3 |
//! | [`reuse`] | RFC 9111 §4, §4.2.4, §5.2.1; RFC 5861 |
//! | [`validation`] | RFC 9111 §4.3 |
//! | [`conditional`] | RFC 9110 §13 (answering a client's conditionals from a stored response) |
//! | [`vary`] | RFC 9111 §4.1 |
//! | [`range`] | RFC 9110 §14 |
//! | [`invalidation`] | RFC 9111 §4.4 |
//! | [`cache_status`] | RFC 9211 |
//! | [`surrogate`] | `Surrogate-Control`, `Surrogate-Capability` (W3C Edge Architecture 1.0) |
//! | [`hop`] | RFC 9110 §7.6.1 |
//! | [`framing`] | the framing fields of a response head, kept from untrusted edits |
//! | [`forwarded`] | RFC 7239 `Forwarded` |
//! | [`key`] | cache keys |
//! | [`query`] | query normalisation of request URLs (parameters dropped, sorted) |
//! | [`target`] | RFC 3986 §6.2.2 path normalisation, RFC 9110 §7.2 `Host` syntax |
//! | [`fields`] | field lookups shared by the others |

pub mod age;
pub mod cache_control;
pub mod cache_status;
pub mod conditional;
pub mod dates;
pub mod fields;
pub mod forwarded;
pub mod framing;
pub mod freshness;
pub mod hop;
pub mod invalidation;
pub mod key;
pub mod query;
pub mod range;
pub mod reuse;
pub mod storable;
pub mod surrogate;
pub mod tags;
pub mod target;
pub mod validation;
pub mod vary;

// Shared parsing helpers; not part of the API.
mod etag;
mod parse;
mod sf;
pub mod uri_ref;

pub use cache_control::CacheControl;
