//! Test support for Sluice's integration tests: a scriptable origin server ([`Origin`]) and
//! clients ([`client`]) that talk to real sockets on 127.0.0.1, and message bodies as they
//! go over the wire ([`wire`]) for tests that generate them, and Go peers of
//! interoperability tests ([`go`]).

pub mod client;
pub mod go;
mod origin;
pub mod wire;

pub use origin::{Origin, RecordedRequest, Reply};
