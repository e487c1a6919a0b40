//! Proxy-Wasm ABI 0.2.1 numbers: statuses, map and buffer kinds, log levels.
//!
//! The values are those of the ABI specification (and of the `proxy-wasm` Rust SDK).

/// A host call's result (`WasmResult` in the specification), returned to the guest as `i32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Status {
    Ok = 0,
    NotFound = 1,
    BadArgument = 2,
    ParseFailure = 4,
    InvalidMemoryAccess = 6,
    Empty = 7,
    CasMismatch = 8,
    InternalFailure = 10,
    Unimplemented = 12,
}

impl Status {
    /// The status as a guest `i32`.
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// A header map a host call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapType {
    RequestHeaders,
    RequestTrailers,
    ResponseHeaders,
    ResponseTrailers,
    /// The response headers of an HTTP call (`proxy_on_http_call_response`).
    HttpCallResponseHeaders,
    /// A gRPC stream's initial metadata (`proxy_on_grpc_receive_initial_metadata`).
    GrpcReceiveInitialMetadata,
    /// A gRPC stream's trailing metadata (`proxy_on_grpc_receive_trailing_metadata`).
    GrpcReceiveTrailingMetadata,
    /// HTTP-call trailers: Sluice has none.
    Other,
}

impl MapType {
    /// Decodes the guest's map type; `None` for a number the ABI does not define.
    pub fn from_guest(value: i32) -> Option<Self> {
        Some(match value {
            0 => Self::RequestHeaders,
            1 => Self::RequestTrailers,
            2 => Self::ResponseHeaders,
            3 => Self::ResponseTrailers,
            6 => Self::HttpCallResponseHeaders,
            4 => Self::GrpcReceiveInitialMetadata,
            5 => Self::GrpcReceiveTrailingMetadata,
            7 => Self::Other,
            _ => return None,
        })
    }
}

/// A buffer a host call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferType {
    RequestBody,
    ResponseBody,
    VmConfiguration,
    PluginConfiguration,
    /// The response body of an HTTP call (`proxy_on_http_call_response`).
    HttpCallResponseBody,
    /// The answer to a gRPC call, or a gRPC stream's message (`proxy_on_grpc_receive`).
    GrpcReceiveBuffer,
    /// Stream data, foreign-call data: Sluice has none.
    Other,
}

impl BufferType {
    /// Decodes the guest's buffer type; `None` for a number the ABI does not define.
    pub fn from_guest(value: i32) -> Option<Self> {
        Some(match value {
            0 => Self::RequestBody,
            1 => Self::ResponseBody,
            6 => Self::VmConfiguration,
            7 => Self::PluginConfiguration,
            4 => Self::HttpCallResponseBody,
            5 => Self::GrpcReceiveBuffer,
            2 | 3 | 8 => Self::Other,
            _ => return None,
        })
    }
}

/// A plugin log level (`proxy_log`, `proxy_get_log_level`); in configuration `"trace"` ...
/// `"critical"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace = 0,
    Debug = 1,
    #[default]
    Info = 2,
    #[serde(alias = "warning")]
    Warn = 3,
    Error = 4,
    Critical = 5,
}

impl LogLevel {
    /// Decodes the guest's level; out-of-range values count as `Critical`.
    pub fn from_guest(value: i32) -> Self {
        match value {
            i32::MIN..=0 => Self::Trace,
            1 => Self::Debug,
            2 => Self::Info,
            3 => Self::Warn,
            4 => Self::Error,
            _ => Self::Critical,
        }
    }

    /// The level's name, as shown in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trace => "trace",
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
            Self::Critical => "critical",
        }
    }
}

/// What a headers or body callback returned: `0` continues, anything else stops iteration
/// (`StopIteration`, `StopIterationAndBuffer`, `StopAllIterationAndBuffer`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Continue,
    Pause,
}

impl Action {
    /// Decodes a callback's return value.
    pub fn from_guest(value: i32) -> Self {
        if value == 0 {
            Self::Continue
        } else {
            Self::Pause
        }
    }
}

/// The exports a Proxy-Wasm 0.2.x plugin must have (one of the ABI markers).
pub const ABI_MARKERS: [&str; 2] = ["proxy_abi_version_0_2_1", "proxy_abi_version_0_2_0"];
