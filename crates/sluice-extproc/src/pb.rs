//! The Envoy ext_proc v3 messages and service, generated from the wire-compatible subset in
//! `proto/` by `scripts/regen-proto.sh` (protox + tonic-prost-build) and checked in, so the
//! build needs no protobuf compiler. Package paths mirror the protobuf packages.

#![allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all, unreachable_pub)]

/// `envoy.*`
pub mod envoy {
    /// `envoy.type.*`
    pub mod r#type {
        /// `envoy.type.v3`: `HttpStatus`.
        pub mod v3 {
            include!("pb/envoy.type.v3.rs");
        }
    }

    /// `envoy.config.*`
    pub mod config {
        /// `envoy.config.core.*`
        pub mod core {
            /// `envoy.config.core.v3`: `HeaderValue`, `HeaderValueOption`, `HeaderMap`.
            pub mod v3 {
                include!("pb/envoy.config.core.v3.rs");
            }
        }
    }

    /// `envoy.service.*`
    pub mod service {
        /// `envoy.service.ext_proc.*`
        pub mod ext_proc {
            /// `envoy.service.ext_proc.v3`: the `ExternalProcessor` service and its messages.
            pub mod v3 {
                include!("pb/envoy.service.ext_proc.v3.rs");
            }
        }
    }
}
