//! `sluice fetch URL`: seed 002's RPC fetch. Asks a running proxy's admin API
//! (`POST /fetch`) for URL through its cache, writes the body to stdout (or `-o FILE`) as it
//! arrives, and reports the status and cache status on stderr.

use super::admin_client::{self, AdminClient, Connection};
use anyhow::{bail, Context};
use http::{HeaderMap, Method};
use http_body_util::BodyExt;
use std::path::PathBuf;
use tokio::io::AsyncWriteExt;

/// Arguments of `sluice fetch`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Needs a running `sluice serve`: the fetch is made by its cache, through its admin API \
    (POST /fetch). Address and token: --admin/--token, SLUICE_ADMIN/SLUICE_ADMIN_TOKEN, or --config FILE \
    (docs/content.md). Exit status 0 for a response below 400, 1 otherwise.")]
pub struct Command {
    #[command(flatten)]
    pub args: Args,

    #[command(flatten)]
    pub connection: Connection,
}

/// What to fetch and where to write it (`sluice fetch`, `sluice ctl fetch`).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Absolute http(s) URL to fetch through the cache.
    pub url: String,

    /// Write the body to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Say nothing on stderr (the exit status still tells success).
    #[arg(short, long)]
    pub quiet: bool,
}

/// Runs `sluice fetch`.
pub fn run(command: Command) -> anyhow::Result<()> {
    let client = AdminClient::resolve(&command.connection)?;
    super::runtime()?.block_on(fetch(&client, &command.args))
}

/// Fetches through `client` and writes what `args` asks for. Exit status: success for a
/// response below 400; an error (after writing the body) otherwise.
pub async fn fetch(client: &AdminClient, args: &Args) -> anyhow::Result<()> {
    let path = format!("/fetch?url={}", admin_client::enc(&args.url));
    let response = client.send(Method::POST, &path, &HeaderMap::new(), admin_client::empty()).await?;
    let status = response.status();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (cache_status, result) = (header("cache-status"), header("sluice-result"));
    let Some(result) = result else {
        // The admin API's own refusal (bad URL, token...), not a fetched response.
        let body = response.into_body().collect().await.context("reading the admin answer")?.to_bytes();
        bail!("{status}: {}", String::from_utf8_lossy(&body).trim());
    };
    let mut out: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match &args.output {
        Some(path) => {
            Box::new(tokio::fs::File::create(path).await.with_context(|| format!("cannot create {}", path.display()))?)
        }
        None => Box::new(tokio::io::stdout()),
    };
    let mut body = response.into_body();
    let mut size = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.with_context(|| format!("the body broke off after {size} bytes"))?;
        if let Ok(data) = frame.into_data() {
            size += data.len() as u64;
            out.write_all(&data).await.context("writing the body")?;
        }
    }
    out.flush().await.context("writing the body")?;
    if !args.quiet {
        eprintln!("{status} ({size} bytes) {result}");
        eprintln!("Cache-Status: {}", cache_status.as_deref().unwrap_or("(none in the response)"));
    }
    if status.is_client_error() || status.is_server_error() {
        bail!("{} answered {status}", args.url);
    }
    Ok(())
}
