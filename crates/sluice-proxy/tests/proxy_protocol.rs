//! Listeners behind a TCP load balancer (`proxy_protocol = true`): the PROXY protocol header
//! (versions 1 and 2) names the client, whose address the ACL, `X-Forwarded-For` and the
//! metrics then see; connections without a valid header, or from a peer not trusted to send
//! one, are closed unanswered. Real clients: raw sockets and curl's `--haproxy-protocol`.

mod common;

use common::admin::{admin, json};
use common::{curl, Harness};
use sluice_proxy::config::{Config, Mode, TlsConfig};
use sluice_testkit::Reply;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A reverse proxy whose listener expects PROXY headers, serving `/p` (never stored) with
/// `tweak` applied; clients in 203.0.113.0/24 and 2001:db8::/32 are allowed besides loopback.
async fn behind_a_balancer(tweak: impl FnOnce(&mut Config)) -> Harness {
    let h = Harness::build(Mode::Reverse, |c| {
        c.listener[0].proxy_protocol = true;
        c.access.allow.extend(["203.0.113.0/24", "2001:db8::/32"].map(|net| net.parse::<ipnet::IpNet>().unwrap()));
        tweak(c);
    })
    .await;
    h.origin.on("/p", Reply::ok("served").header("Cache-Control", "no-store"));
    h
}

/// Opens a connection, writes `prefix` and a GET of `/p`, and returns all that comes back.
async fn exchange(h: &Harness, prefix: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    stream.write_all(prefix).await.unwrap();
    stream.write_all(b"GET /p HTTP/1.1\r\nHost: site\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A version 2 PROXY header for a TCP client at `ip`:`port` (IPv4 or IPv6).
fn v2_header(client: std::net::SocketAddr) -> Vec<u8> {
    let mut bytes = b"\r\n\r\n\0\r\nQUIT\n\x21".to_vec();
    let mut block = Vec::new();
    match client.ip() {
        std::net::IpAddr::V4(ip) => {
            bytes.push(0x11);
            block.extend(ip.octets());
            block.extend([127, 0, 0, 1]);
        }
        std::net::IpAddr::V6(ip) => {
            bytes.push(0x21);
            block.extend(ip.octets());
            block.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        }
    }
    block.extend(client.port().to_be_bytes());
    block.extend(443u16.to_be_bytes());
    bytes.extend((block.len() as u16).to_be_bytes());
    bytes.extend(block);
    bytes
}

fn forwarded_for(h: &Harness) -> String {
    h.origin.last_request("/p").unwrap().header("x-forwarded-for").unwrap().to_owned()
}

async fn proxy_protocol_errors(h: &Harness) -> u64 {
    json(&admin(h, "GET", "/stats", &[], None).await)["client"]["proxy_protocol_errors"].as_u64().unwrap()
}

#[tokio::test]
async fn a_version_1_header_names_the_client() {
    let h = behind_a_balancer(|_| {}).await;
    let answer = exchange(&h, b"PROXY TCP4 203.0.113.7 127.0.0.1 51234 80\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(forwarded_for(&h), "203.0.113.7");
}

#[tokio::test]
async fn a_version_2_header_names_the_client() {
    let h = behind_a_balancer(|_| {}).await;
    let answer = exchange(&h, &v2_header("[2001:db8::9]:40000".parse().unwrap())).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(forwarded_for(&h), "2001:db8::9");
    let local = b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00";
    assert!(exchange(&h, local).await.starts_with("HTTP/1.1 200"));
    assert_eq!(forwarded_for(&h), "127.0.0.1", "LOCAL: the balancer speaks for itself");
}

#[tokio::test]
async fn the_access_list_judges_the_client_the_header_names() {
    let h = behind_a_balancer(|_| {}).await;
    let answer = exchange(&h, b"PROXY TCP4 198.51.100.1 127.0.0.1 51234 80\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 403"), "198.51.100.0/24 is not allowed: {answer}");
    assert_eq!(h.origin.hits("/p"), 0);
}

#[tokio::test]
async fn a_connection_without_a_valid_header_is_closed_unanswered() {
    let h = behind_a_balancer(|_| {}).await;
    for prefix in [&b""[..], b"PROXY TCP4 203.0.113.7\r\n", b"PROXY TCP4 999.0.0.1 127.0.0.1 1 2\r\n"] {
        assert_eq!(exchange(&h, prefix).await, "", "{}", String::from_utf8_lossy(prefix));
    }
    assert_eq!(h.origin.hits("/p"), 0);
    assert_eq!(proxy_protocol_errors(&h).await, 3);
}

#[tokio::test]
async fn only_trusted_balancers_may_name_clients() {
    let h = behind_a_balancer(|c| c.access.proxy_protocol_from = vec!["10.0.0.0/8".parse().unwrap()]).await;
    assert_eq!(
        exchange(&h, b"PROXY TCP4 203.0.113.7 127.0.0.1 51234 80\r\n").await,
        "",
        "loopback is not trusted here"
    );
    assert_eq!(h.origin.hits("/p"), 0);
    assert_eq!(proxy_protocol_errors(&h).await, 1);
}

#[tokio::test]
async fn curl_speaks_the_proxy_protocol_in_plain_text_and_before_tls() {
    let h = behind_a_balancer(|_| {}).await;
    let url = format!("http://{}/p", h.addr());
    assert_eq!(curl(&["--haproxy-protocol", &url]).await, "served");
    assert_eq!(forwarded_for(&h), "127.0.0.1", "curl names its own address");
    assert_eq!(curl(&[&url]).await, "", "without the header: closed");

    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert, pem) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, key.cert.pem()).unwrap();
    std::fs::write(&pem, key.signing_key.serialize_pem()).unwrap();
    let h = behind_a_balancer(move |c| c.listener[0].tls = Some(TlsConfig::single(cert, pem))).await;
    let url = format!("https://localhost:{}/p", h.addr().port());
    let resolve = format!("localhost:{}:127.0.0.1", h.addr().port());
    assert_eq!(curl(&["-k", "--resolve", &resolve, "--haproxy-protocol", &url]).await, "served");
    assert_eq!(h.origin.last_request("/p").unwrap().header("x-forwarded-proto"), Some("https"));
}
