//! Test support for Sluice's integration tests: a scriptable origin server ([`Origin`]) and
//! clients ([`client`]) that talk to real sockets on 127.0.0.1.

pub mod client;
mod origin;

pub use origin::{Origin, RecordedRequest, Reply};
