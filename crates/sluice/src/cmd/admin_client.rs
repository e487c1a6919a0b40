//! The admin API client behind `sluice ctl` and `sluice fetch`: where the admin listener is,
//! its token, and one HTTP/1.1 request to it.
//!
//! Address: `--admin ADDR`, else `$SLUICE_ADMIN`, else `[admin] addr` of `--config FILE`,
//! else `127.0.0.1:3129`. Token: `--token TOKEN`, else `$SLUICE_ADMIN_TOKEN`, else
//! `[admin] token` of the configuration, else the token file the proxy writes when it
//! generates one (`[admin] token_file`, default `$TMPDIR/sluice-admin-<port>.token`).

use anyhow::{bail, Context};
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use sluice_proxy::config::Config;
use std::net::SocketAddr;
use std::path::PathBuf;

/// How to reach the admin API (flattened into every subcommand that talks to it).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Connection {
    /// Admin API address [env: SLUICE_ADMIN] [default: the config's, or 127.0.0.1:3129].
    #[arg(long, value_name = "ADDR", global = true)]
    pub admin: Option<SocketAddr>,

    /// Admin bearer token [env: SLUICE_ADMIN_TOKEN] [default: the config's, or the token
    /// file a running proxy wrote].
    #[arg(long, value_name = "TOKEN", global = true)]
    pub token: Option<String>,

    /// Read the admin address and token from this configuration file.
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
}

/// A resolved admin endpoint.
#[derive(Debug)]
pub struct AdminClient {
    pub addr: SocketAddr,
    token: String,
    /// The file the token was read from, when it came from one (named when it is refused).
    token_file: Option<std::path::PathBuf>,
}

/// A request body for [`AdminClient::send`].
pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// An empty request body.
pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

impl AdminClient {
    /// Resolves the address and token (see the module documentation).
    pub fn resolve(connection: &Connection) -> anyhow::Result<Self> {
        let config = match &connection.config {
            Some(path) => Some(Config::load(path)?),
            None => None,
        };
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let addr = match (connection.admin, env("SLUICE_ADMIN")) {
            (Some(addr), _) => addr,
            (None, Some(text)) => {
                text.trim().parse().with_context(|| format!("SLUICE_ADMIN={text} is not an address"))?
            }
            (None, None) => config.as_ref().map_or_else(|| Config::default().admin.addr, |c| c.admin.addr),
        };
        let (token, token_file) = match (&connection.token, env("SLUICE_ADMIN_TOKEN")) {
            (Some(token), _) => (token.clone(), None),
            (None, Some(token)) => (token, None),
            (None, None) => match config.as_ref().and_then(|c| c.admin.token.clone()) {
                Some(token) => (token, None),
                None => {
                    let admin = config.as_ref().map_or_else(|| Config::default().admin, |c| c.admin.clone());
                    let file = admin.token_path(addr.port());
                    let token = std::fs::read_to_string(&file).with_context(|| {
                        format!(
                            "no admin token: give --token or SLUICE_ADMIN_TOKEN, or a --config with [admin] token \
                             (could not read the token file {})",
                            file.display()
                        )
                    })?;
                    (token.trim().to_owned(), Some(file))
                }
            },
        };
        Ok(Self { addr, token, token_file })
    }

    /// Sends one request to `path_and_query` and returns the response head and its
    /// streaming body.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Body,
    ) -> anyhow::Result<Response<Incoming>> {
        let stream = tokio::net::TcpStream::connect(self.addr)
            .await
            .with_context(|| format!("cannot connect to the admin API at {} (is sluice serve running?)", self.addr))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.context("admin API handshake")?;
        tokio::spawn(conn);
        let mut request = Request::builder().method(method).uri(path_and_query);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let request = request
            .header(http::header::HOST, self.addr.to_string())
            .header(http::header::AUTHORIZATION, format!("Bearer {}", self.token))
            .body(body)
            .context("building the admin request")?;
        let response = sender.send_request(request).await.with_context(|| format!("admin request {path_and_query}"))?;
        if let Some(file) = self.token_file.as_ref().filter(|_| response.status() == StatusCode::UNAUTHORIZED) {
            bail!(
                "401 Unauthorized: the admin API at {} refused the token read from {} (written by another \
                 sluice serve?); give --token, SLUICE_ADMIN_TOKEN or --config",
                self.addr,
                file.display()
            );
        }
        Ok(response)
    }

    /// Sends a request and reads the whole answer; fails with the server's message on a
    /// status of 400 or more.
    pub async fn call(&self, method: Method, path_and_query: &str) -> anyhow::Result<(StatusCode, Bytes)> {
        let response = self.send(method, path_and_query, &HeaderMap::new(), empty()).await?;
        let status = response.status();
        let body = response.into_body().collect().await.context("reading the admin answer")?.to_bytes();
        if status.is_client_error() || status.is_server_error() {
            bail!("{}: {}", status, String::from_utf8_lossy(&body).trim());
        }
        Ok((status, body))
    }
}

/// Percent-encodes a query parameter value.
pub fn enc(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Parses `Name: value` (curl's `-H` syntax).
pub fn header_arg(text: &str) -> anyhow::Result<(HeaderName, HeaderValue)> {
    let (name, value) = text.split_once(':').with_context(|| format!("header {text:?} is not `Name: value`"))?;
    let name =
        HeaderName::from_bytes(name.trim().as_bytes()).with_context(|| format!("bad header name in {text:?}"))?;
    let value = HeaderValue::from_str(value.trim()).with_context(|| format!("bad header value in {text:?}"))?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_encoded_for_the_query() {
        assert_eq!(enc("http://a/b?c=d&e"), "http%3A%2F%2Fa%2Fb%3Fc%3Dd%26e");
    }

    #[test]
    fn header_arguments_are_curl_style() {
        let (name, value) = header_arg("Cache-Control: max-age=60").unwrap();
        assert_eq!((name.as_str(), value.to_str().unwrap()), ("cache-control", "max-age=60"));
        assert!(header_arg("no colon").is_err());
    }
}
