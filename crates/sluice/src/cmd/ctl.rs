//! `sluice ctl`: content management of a running proxy, and the draining of origins of its
//! origin pools; a thin client of its admin API (docs/content.md, docs/config.md). One
//! subcommand per operation; JSON answers are printed to stdout.

use super::admin_client::{self, AdminClient, Connection};
use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use http::{header, HeaderMap, HeaderValue, Method};
use http_body_util::BodyExt;
use std::path::PathBuf;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Arguments of `sluice ctl`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Every subcommand talks to the admin API of a running `sluice serve` \
    (address and token: --admin/--token, SLUICE_ADMIN/SLUICE_ADMIN_TOKEN, or --config FILE; \
    see docs/content.md). Exit status 0 on success, 1 with the server's message otherwise.")]
pub struct Args {
    #[command(flatten)]
    connection: Connection,

    #[command(subcommand)]
    op: Op,
}

#[derive(clap::Subcommand, Debug)]
enum Op {
    /// Show every stored variant of URL: status, size, age, lifetime, freshness, hits, Vary
    /// values, tags and header fields (JSON; exit 1 when nothing is stored).
    Query {
        /// Absolute http(s) URL (the cache key).
        url: String,
    },
    /// Fetch URL through the cache (miss → origin, stored when storable; shared with
    /// concurrent requests): body to stdout, status and Cache-Status to stderr.
    Fetch(super::fetch::Args),
    /// Fetch URL into the cache without printing the body; prints status, size and cache
    /// status (JSON).
    Prefetch {
        /// Absolute http(s) URL.
        url: String,
    },
    /// Revalidate the stored URL now with a conditional request to the origin (304 freshens,
    /// 200 replaces); prints the outcome (JSON).
    Validate {
        /// Absolute http(s) URL.
        url: String,
    },
    /// Expire the stored URL now, or give it a new expiry (--ttl or --at).
    Expire {
        /// Absolute http(s) URL.
        url: String,
        /// Fresh for this many seconds from now (0: expire now).
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
        /// Fresh until this time: Unix seconds or an HTTP date.
        #[arg(long, value_name = "TIME", conflicts_with = "ttl")]
        at: Option<String>,
    },
    /// Delete stored objects: by URL, by URL prefix, or by tag (Surrogate-Key / Cache-Tag).
    #[command(group(clap::ArgGroup::new("what").required(true).args(["url", "prefix", "tag"])))]
    Delete {
        /// Absolute http(s) URL: every variant of it.
        url: Option<String>,
        /// Every object whose URL starts with this absolute URL prefix.
        #[arg(long, value_name = "URL_PREFIX")]
        prefix: Option<String>,
        /// Every object tagged TAG by its Surrogate-Key or Cache-Tag response field.
        #[arg(long)]
        tag: Option<String>,
    },
    /// Push a response for URL into the cache: served to clients with no origin fetch.
    /// The body is read from --file or stdin and streamed.
    Push {
        /// Absolute http(s) URL the response is stored under.
        url: String,
        /// A response header field, `Name: value` (repeatable), e.g.
        /// -H 'Cache-Control: max-age=300' -H 'Content-Type: text/html'.
        #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
        headers: Vec<String>,
        /// Response status (default 200).
        #[arg(long)]
        status: Option<u16>,
        /// Fresh for this many seconds, whatever the header fields say.
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
        /// Read the body from FILE (default: stdin).
        #[arg(short, long, value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Print the stored body of URL (whole or a byte range) without going to the origin.
    Read {
        /// Absolute http(s) URL.
        url: String,
        /// One byte range: FIRST-LAST, FIRST- or -SUFFIX (as in HTTP, inclusive).
        #[arg(long, allow_hyphen_values = true)]
        range: Option<String>,
        /// Write the body to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Also print the stored status and header fields to stderr.
        #[arg(short, long)]
        include: bool,
    },
    /// Show the origin pools (routes with several `origins`): each origin's state, load and
    /// failures (JSON).
    Pools,
    /// Take ORIGIN out of rotation in every origin pool that has it (or in --route's only),
    /// for maintenance or a deploy; requests in flight to it finish.
    Drain {
        /// The origin as configured, e.g. http://10.0.0.11:8080.
        origin: String,
        /// Only the pool of this route (`host/prefix`, `*` for any host, as `pools` shows).
        #[arg(long)]
        route: Option<String>,
    },
    /// Put a drained ORIGIN back into rotation.
    Undrain {
        /// The origin as configured.
        origin: String,
        /// Only the pool of this route.
        #[arg(long)]
        route: Option<String>,
    },
    /// Reload the running proxy's --config file (as SIGHUP does); prints what changed
    /// (JSON), or why the file was rejected (exit 1; the running configuration stays).
    Reload,
    /// Print the running configuration, every option with its value (TOML; the admin token
    /// redacted).
    Config,
    /// Reopen the access log at its path, after it was renamed for rotation (as SIGUSR1
    /// does).
    ReopenLog,
}

/// Runs `sluice ctl`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let client = AdminClient::resolve(&args.connection)?;
    super::runtime()?.block_on(op(&client, args.op))
}

async fn op(client: &AdminClient, op: Op) -> anyhow::Result<()> {
    use admin_client::enc;
    let json = |path: String, method: Method| async move {
        let (_, body) = client.call(method, &path).await?;
        print_json(&body)
    };
    match op {
        Op::Query { url } => json(format!("/cache?url={}", enc(&url)), Method::GET).await,
        Op::Fetch(args) => super::fetch::fetch(client, &args).await,
        Op::Prefetch { url } => json(format!("/prefetch?url={}", enc(&url)), Method::POST).await,
        Op::Validate { url } => json(format!("/cache/validate?url={}", enc(&url)), Method::POST).await,
        Op::Expire { url, ttl, at } => {
            let mut path = format!("/cache/expire?url={}", enc(&url));
            if let Some(ttl) = ttl {
                path.push_str(&format!("&ttl={ttl}"));
            }
            if let Some(at) = at {
                path.push_str(&format!("&at={}", enc(&at)));
            }
            json(path, Method::POST).await
        }
        Op::Delete { url, prefix, tag } => {
            let query = match (url, prefix, tag) {
                (Some(url), _, _) => format!("url={}", enc(&url)),
                (_, Some(prefix), _) => format!("prefix={}", enc(&prefix)),
                (_, _, Some(tag)) => format!("tag={}", enc(&tag)),
                _ => bail!("give a URL, --prefix or --tag"),
            };
            json(format!("/cache?{query}"), Method::DELETE).await
        }
        Op::Push { url, headers, status, ttl, file } => push(client, &url, &headers, status, ttl, file).await,
        Op::Read { url, range, output, include } => read(client, &url, range, output, include).await,
        Op::Pools => json("/pools".to_owned(), Method::GET).await,
        Op::Drain { origin, route } => json(drain_path("drain", &origin, route.as_deref()), Method::POST).await,
        Op::Undrain { origin, route } => json(drain_path("undrain", &origin, route.as_deref()), Method::POST).await,
        Op::Reload => json("/config/reload".to_owned(), Method::POST).await,
        Op::Config => json("/config".to_owned(), Method::GET).await,
        Op::ReopenLog => json("/log/reopen".to_owned(), Method::POST).await,
    }
}

/// `/pools/drain` or `/pools/undrain` for `origin`, in `route`'s pool or all.
fn drain_path(action: &str, origin: &str, route: Option<&str>) -> String {
    use admin_client::enc;
    let mut path = format!("/pools/{action}?origin={}", enc(origin));
    if let Some(route) = route {
        path.push_str(&format!("&route={}", enc(route)));
    }
    path
}

fn print_json(body: &[u8]) -> anyhow::Result<()> {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => println!("{}", serde_json::to_string_pretty(&value).context("formatting JSON")?),
        Err(_) => print!("{}", String::from_utf8_lossy(body)),
    }
    Ok(())
}

async fn push(
    client: &AdminClient,
    url: &str,
    headers: &[String],
    status: Option<u16>,
    ttl: Option<u64>,
    file: Option<PathBuf>,
) -> anyhow::Result<()> {
    let mut path = format!("/cache?url={}", admin_client::enc(url));
    if let Some(status) = status {
        path.push_str(&format!("&status={status}"));
    }
    if let Some(ttl) = ttl {
        path.push_str(&format!("&ttl={ttl}"));
    }
    let mut fields = HeaderMap::new();
    for text in headers {
        let (name, value) = admin_client::header_arg(text)?;
        fields.append(name, value);
    }
    let body = match &file {
        Some(file) => {
            let opened =
                tokio::fs::File::open(file).await.with_context(|| format!("cannot open {}", file.display()))?;
            let len = opened.metadata().await.with_context(|| format!("cannot read {}", file.display()))?.len();
            fields.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            reader_body(opened)
        }
        None => reader_body(tokio::io::stdin()),
    };
    let response = client.send(Method::PUT, &path, &fields, body).await?;
    let status = response.status();
    let answer = response.into_body().collect().await.context("reading the admin answer")?.to_bytes();
    if !status.is_success() {
        bail!("{status}: {}", String::from_utf8_lossy(&answer).trim());
    }
    print_json(&answer)
}

/// A request body streamed from `reader`, 64 KiB at a time.
fn reader_body(reader: impl AsyncRead + Unpin + Send + 'static) -> admin_client::Body {
    let chunks = futures_util::stream::unfold(Some(reader), |reader| async move {
        let mut reader = reader?;
        let mut buf = BytesMut::with_capacity(64 * 1024);
        match reader.read_buf(&mut buf).await {
            Ok(0) => None,
            Ok(_) => Some((Ok(hyper::body::Frame::data(buf.freeze())), Some(reader))),
            Err(e) => Some((Err(e), None)),
        }
    });
    http_body_util::StreamBody::new(chunks).boxed_unsync()
}

async fn read(
    client: &AdminClient,
    url: &str,
    range: Option<String>,
    output: Option<PathBuf>,
    include: bool,
) -> anyhow::Result<()> {
    let mut path = format!("/cache/body?url={}", admin_client::enc(url));
    if let Some(range) = range {
        path.push_str(&format!("&range={}", admin_client::enc(&range)));
    }
    let response = client.send(Method::GET, &path, &HeaderMap::new(), admin_client::empty()).await?;
    let status = response.status();
    if !status.is_success() {
        let answer = response.into_body().collect().await.context("reading the admin answer")?.to_bytes();
        bail!("{status}: {}", String::from_utf8_lossy(&answer).trim());
    }
    if include {
        let stored = response.headers().get("sluice-stored-status").and_then(|v| v.to_str().ok()).unwrap_or("?");
        eprintln!("stored status {stored}");
        for (name, value) in response.headers() {
            if name != "sluice-stored-status" {
                eprintln!("{name}: {}", String::from_utf8_lossy(value.as_bytes()));
            }
        }
    }
    let mut out: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match &output {
        Some(path) => {
            Box::new(tokio::fs::File::create(path).await.with_context(|| format!("cannot create {}", path.display()))?)
        }
        None => Box::new(tokio::io::stdout()),
    };
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        let data: Bytes = match frame.context("the body broke off")?.into_data() {
            Ok(data) => data,
            Err(_) => continue,
        };
        out.write_all(&data).await.context("writing the body")?;
    }
    out.flush().await.context("writing the body")
}
