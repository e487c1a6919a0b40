//! TLS listeners. With several certificates (`tls.sni`, `crate::sni`): each client gets the
//! certificate that lists the name it asks for (SNI), wildcards one label deep, and the
//! listener's `cert` when it asks for no name or another one; every certificate's end is in
//! `/metrics`; a certificate without a DNS name or with a key of another is refused at start.
//! Session resumption (`tls::Resumption`): a returning client resumes, over TLS 1.3 tickets
//! and TLS 1.2 session IDs, after a reload too, but not once the listener asks for client
//! certificates. Client certificates (`tls.client_ca`): required or optional, checked against
//! the CA, and forwarded to origins (`headers.forward_client_cert`) in place of whatever the
//! client sent. Real handshakes on 127.0.0.1 by rustls clients, which report the certificate
//! they got and how the handshake went.

mod common;

use common::admin::admin;
use common::Harness;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, HandshakeKind, SignatureScheme};
use sluice_proxy::config::{CertKeyConfig, Config, ListenerConfig, Mode, TlsConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A self-signed certificate for `names`, written to `<file>.pem` and `<file>.key` in `dir`.
fn issue(dir: &Path, file: &str, names: &[&str]) -> (CertKeyConfig, CertificateDer<'static>) {
    let pair = rcgen::generate_simple_self_signed(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    let (cert, key) = (dir.join(format!("{file}.pem")), dir.join(format!("{file}.key")));
    std::fs::write(&cert, pair.cert.pem()).unwrap();
    std::fs::write(&key, pair.signing_key.serialize_pem()).unwrap();
    (CertKeyConfig { cert, key }, pair.cert.der().clone())
}

/// Accepts any certificate (the handshake's signatures still checked) and reports the one
/// the server presented.
#[derive(Debug)]
struct Presented {
    provider: Arc<rustls::crypto::CryptoProvider>,
    got: parking_lot::Mutex<Option<CertificateDer<'static>>>,
}

impl ServerCertVerifier for Presented {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.got.lock() = Some(end_entity.clone().into_owned());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS client of `versions` that accepts any certificate ([`Presented`] tells which) and
/// keeps sessions to resume (rustls's default, in memory).
fn client(versions: &[&'static rustls::SupportedProtocolVersion]) -> (Arc<rustls::ClientConfig>, Arc<Presented>) {
    client_with(versions, None)
}

/// [`client`], presenting the certificate chain and key `identity` when asked for one.
fn client_with(
    versions: &[&'static rustls::SupportedProtocolVersion],
    identity: Option<(Vec<CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>)>,
) -> (Arc<rustls::ClientConfig>, Arc<Presented>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(Presented { provider: Arc::clone(&provider), got: parking_lot::Mutex::new(None) });
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone());
    let config = match identity {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    (Arc::new(config), verifier)
}

/// The certificate `addr` presents to a client asking for `name` (an IP address: no SNI).
async fn presented(addr: std::net::SocketAddr, name: &str) -> CertificateDer<'static> {
    let (config, verifier) = client(rustls::DEFAULT_VERSIONS);
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.expect("handshake");
    let got = verifier.got.lock().take();
    got.expect("a certificate")
}

/// A `GET /r` over a new TLS connection to `addr` as `site.test` with `config`: how the
/// handshake went, once the whole response was read (a TLS 1.3 client gets its tickets then).
async fn get_over_tls(config: &Arc<rustls::ClientConfig>, addr: std::net::SocketAddr) -> HandshakeKind {
    let (kind, status) = request_over_tls(config, addr, &[]).await.expect("a response");
    assert_eq!(status, 200);
    kind
}

/// [`get_over_tls`] with `headers`: how the handshake went and the response's status, or
/// why there was none.
async fn request_over_tls(
    config: &Arc<rustls::ClientConfig>,
    addr: std::net::SocketAddr,
    headers: &[(&str, &str)],
) -> Result<(HandshakeKind, u16), Box<dyn std::error::Error + Send + Sync>> {
    use http_body_util::BodyExt;
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from("site.test")?;
    let tls = tokio_rustls::TlsConnector::from(Arc::clone(config)).connect(name, tcp).await?;
    let kind = tls.get_ref().1.handshake_kind().expect("handshake done");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    let mut req = http::Request::get("/r").header("host", "site.test");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let response = sender.send_request(req.body(http_body_util::Empty::<bytes::Bytes>::new())?).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await?;
    Ok((kind, status))
}

#[tokio::test]
async fn each_client_gets_the_certificate_for_the_name_it_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let (default, default_der) = issue(dir.path(), "default", &["www.example.test"]);
    let (shop, shop_der) = issue(dir.path(), "shop", &["shop.test", "www.shop.test"]);
    let (wild, wild_der) = issue(dir.path(), "wild", &["*.apps.test"]);
    let paths: Vec<PathBuf> = [&default, &shop, &wild].iter().map(|pair| pair.cert.clone()).collect();
    let tls = TlsConfig { sni: vec![shop, wild], ..TlsConfig::single(default.cert, default.key) };
    let h = Harness::build(Mode::Reverse, move |c| c.listener[0].tls = Some(tls)).await;

    assert_eq!(presented(h.addr(), "shop.test").await, shop_der);
    assert_eq!(presented(h.addr(), "WWW.Shop.Test").await, shop_der, "names compare without case");
    assert_eq!(presented(h.addr(), "billing.apps.test").await, wild_der);
    assert_eq!(presented(h.addr(), "www.example.test").await, default_der);
    assert_eq!(presented(h.addr(), "x.billing.apps.test").await, default_der, "a wildcard is one label");
    assert_eq!(presented(h.addr(), "unknown.test").await, default_der);
    assert_eq!(presented(h.addr(), "127.0.0.1").await, default_der, "no SNI");

    // Each one's end is in /metrics (rcgen's default: 4096-01-01).
    let metrics = admin(&h, "GET", "/metrics", &[], None).await.text();
    for path in paths {
        let line = format!(
            "sluice_tls_certificate_expiry_timestamp_seconds{{listener=\"127.0.0.1:0\",certificate=\"{}\"}} 67090118400\n",
            path.display()
        );
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

#[tokio::test]
async fn returning_clients_resume_their_sessions_across_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let (site, _) = issue(dir.path(), "site", &["site.test"]);
    let h =
        Harness::build(Mode::Reverse, move |c| c.listener[0].tls = Some(TlsConfig::single(site.cert, site.key))).await;
    h.origin.on("/r", sluice_testkit::Reply::ok("again").header("Cache-Control", "max-age=60"));
    for versions in [&[&rustls::version::TLS13], &[&rustls::version::TLS12]] {
        let (config, _) = client(versions);
        assert_eq!(get_over_tls(&config, h.addr()).await, HandshakeKind::Full, "{versions:?}");
        assert_eq!(get_over_tls(&config, h.addr()).await, HandshakeKind::Resumed, "{versions:?}");
        let config_now = h.proxy.state().config.clone();
        h.proxy.generations().reload(config_now).await.expect("reloaded");
        assert_eq!(get_over_tls(&config, h.addr()).await, HandshakeKind::Resumed, "{versions:?} after a reload");
    }
    // Counted when each handshake ends, before its request is read.
    let metrics = admin(&h, "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("sluice_tls_handshakes_total{kind=\"full\"} 2\n"), "{metrics}");
    assert!(metrics.contains("sluice_tls_handshakes_total{kind=\"resumed\"} 4\n"), "{metrics}");
}

#[tokio::test]
async fn more_returning_clients_resume_than_a_session_cache_holds() {
    // 300 clients, each with sessions of its own, all come back: TLS 1.3 tickets carry their
    // sessions, where rustls's default cache (256 sessions, two per connection) would have
    // forgotten most of them.
    let dir = tempfile::tempdir().unwrap();
    let (site, _) = issue(dir.path(), "site", &["site.test"]);
    let h =
        Harness::build(Mode::Reverse, move |c| c.listener[0].tls = Some(TlsConfig::single(site.cert, site.key))).await;
    h.origin.on("/r", sluice_testkit::Reply::ok("again").header("Cache-Control", "max-age=60"));
    let clients: Vec<_> = (0..300).map(|_| client(&[&rustls::version::TLS13]).0).collect();
    for config in &clients {
        assert_eq!(get_over_tls(config, h.addr()).await, HandshakeKind::Full);
    }
    let mut resumed = 0;
    for config in &clients {
        resumed += usize::from(get_over_tls(config, h.addr()).await == HandshakeKind::Resumed);
    }
    assert_eq!(resumed, clients.len());
}

/// A certificate authority for client certificates, its PEM file in `dir`, and a client
/// certificate it issued for `peer-a` (chain and key).
struct ClientPki {
    ca_file: PathBuf,
    peer: (Vec<CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>),
}

impl ClientPki {
    /// Its client's certificate chain and key, to present.
    fn identity(&self) -> (Vec<CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>) {
        (self.peer.0.clone(), self.peer.1.clone_key())
    }
}

fn client_pki(dir: &Path, name: &str) -> ClientPki {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_file = dir.join(format!("{name}-ca.pem"));
    std::fs::write(&ca_file, ca.self_signed(&ca_key).unwrap().pem()).unwrap();
    let mut peer = rcgen::CertificateParams::new(vec!["peer-a.internal".to_owned()]).unwrap();
    peer.distinguished_name = rcgen::DistinguishedName::new();
    peer.distinguished_name.push(rcgen::DnType::CommonName, "peer-a");
    peer.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let peer_key = rcgen::KeyPair::generate().unwrap();
    let cert = peer.signed_by(&peer_key, &rcgen::Issuer::new(ca, &ca_key)).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(peer_key.serialize_der()).unwrap();
    ClientPki { ca_file, peer: (vec![cert.der().clone()], key) }
}

/// A reverse proxy whose TLS listener asks for client certificates of `pki`'s CA (refusing
/// clients without one when `required`) and forwards them, in front of an origin answering
/// `/r`.
async fn mutual_tls(dir: &Path, pki: &ClientPki, required: bool) -> Harness {
    let (site, _) = issue(dir, "site", &["site.test"]);
    let tls = TlsConfig {
        client_ca: Some(pki.ca_file.clone()),
        client_cert_required: required,
        ..TlsConfig::single(site.cert, site.key)
    };
    let h = Harness::build(Mode::Reverse, move |c| {
        c.listener[0].tls = Some(tls);
        c.headers.forward_client_cert = true;
    })
    .await;
    h.origin.on("/r", sluice_testkit::Reply::ok("for peers").header("Cache-Control", "no-store"));
    h
}

#[tokio::test]
async fn a_required_client_certificate_is_checked_and_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let pki = client_pki(dir.path(), "peers");
    let h = mutual_tls(dir.path(), &pki, true).await;

    let (peer, _) = client_with(rustls::DEFAULT_VERSIONS, Some(pki.identity()));
    let spoof = [("x-forwarded-client-cert", "Hash=00;Subject=\"CN=admin\"")];
    assert_eq!(request_over_tls(&peer, h.addr(), &spoof).await.unwrap().1, 200);
    let forwarded = h.origin.last_request("/r").unwrap();
    let forwarded = forwarded.header("x-forwarded-client-cert").expect("the verified certificate");
    assert!(forwarded.starts_with("Hash="), "{forwarded}");
    assert!(forwarded.ends_with(";Subject=\"CN=peer-a\";DNS=peer-a.internal"), "{forwarded}");

    for versions in [&[&rustls::version::TLS13], &[&rustls::version::TLS12]] {
        let (anonymous, _) = client_with(versions, None);
        assert!(request_over_tls(&anonymous, h.addr(), &[]).await.is_err(), "{versions:?} without a certificate");
        let stranger = client_pki(dir.path(), "strangers");
        let (stranger, _) = client_with(versions, Some(stranger.identity()));
        assert!(request_over_tls(&stranger, h.addr(), &[]).await.is_err(), "{versions:?} from another CA");
    }
    assert_eq!(h.origin.hits("/r"), 1);
    // The proxy counts a refusal after sending its alert, which the client may read first.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let metrics = admin(&h, "GET", "/metrics", &[], None).await.text();
        if metrics.contains("sluice_tls_handshake_failures_total 4\n") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "four refused handshakes: {metrics}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_optional_client_certificate_lets_clients_without_one_in() {
    let dir = tempfile::tempdir().unwrap();
    let pki = client_pki(dir.path(), "peers");
    let h = mutual_tls(dir.path(), &pki, false).await;
    let (anonymous, _) = client(rustls::DEFAULT_VERSIONS);
    let spoof = [("x-forwarded-client-cert", "Hash=00;Subject=\"CN=admin\"")];
    assert_eq!(request_over_tls(&anonymous, h.addr(), &spoof).await.unwrap().1, 200);
    assert_eq!(h.origin.last_request("/r").unwrap().header("x-forwarded-client-cert"), None, "no spoofing");
    let (peer, _) = client_with(rustls::DEFAULT_VERSIONS, Some(pki.identity()));
    assert_eq!(request_over_tls(&peer, h.addr(), &[]).await.unwrap().1, 200);
    assert!(h.origin.last_request("/r").unwrap().header("x-forwarded-client-cert").is_some());
}

#[tokio::test]
async fn sessions_begun_without_client_certificates_do_not_resume_once_they_are_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (site, _) = issue(dir.path(), "site", &["site.test"]);
    let tls = TlsConfig::single(site.cert, site.key);
    let h = Harness::build(Mode::Reverse, |c| c.listener[0].tls = Some(tls)).await;
    h.origin.on("/r", sluice_testkit::Reply::ok("again").header("Cache-Control", "max-age=60"));
    let (config, _) = client(&[&rustls::version::TLS13]);
    get_over_tls(&config, h.addr()).await;
    assert_eq!(get_over_tls(&config, h.addr()).await, HandshakeKind::Resumed);

    let pki = client_pki(dir.path(), "peers");
    let mut asking = h.proxy.state().config.clone();
    let listener_tls = asking.listener[0].tls.as_mut().unwrap();
    (listener_tls.client_ca, listener_tls.client_cert_required) = (Some(pki.ca_file), false);
    h.proxy.generations().reload(asking).await.expect("reloaded");
    assert_eq!(get_over_tls(&config, h.addr()).await, HandshakeKind::Full, "the old session is not resumed");
}

/// Starting a proxy whose listener has `tls`: the error's text.
fn start_error(tls: TlsConfig) -> String {
    let mut config = Config {
        listener: vec![ListenerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            mode: Mode::Reverse,
            tls: Some(tls),
            ..ListenerConfig::default()
        }],
        ..Config::default()
    };
    config.admin.enabled = false;
    config.route =
        vec![sluice_proxy::config::RouteConfig { origin: Some("http://127.0.0.1:9".into()), ..Default::default() }];
    let clock = Arc::new(sluice_proxy::clock::ManualClock::default());
    match sluice_proxy::State::new(config, clock, Vec::new()) {
        Ok(_) => panic!("started"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_certificate_without_a_name_or_with_another_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (default, _) = issue(dir.path(), "default", &["www.example.test"]);
    let (by_ip, _) = issue(dir.path(), "by-ip", &["192.0.2.7"]);
    let tls = TlsConfig { sni: vec![by_ip], ..TlsConfig::single(default.cert.clone(), default.key.clone()) };
    let err = start_error(tls);
    assert!(err.contains("by-ip.pem: lists no DNS name"), "{err}");

    let (other, _) = issue(dir.path(), "other", &["other.test"]);
    let mismatched = CertKeyConfig { cert: other.cert, key: default.key.clone() };
    let err = start_error(TlsConfig { sni: vec![mismatched], ..TlsConfig::single(default.cert, default.key) });
    assert!(err.contains("default.key: cannot be used with") && err.contains("other.pem"), "{err}");
}
