//! TLS towards `https://` origins (`[upstream.tls]`, `crate::origin_tls`): a private CA's
//! certificates are trusted through `ca_file` and refused without it, `verify = false`
//! accepts a self-signed origin, a client certificate reaches an origin that requires mutual
//! TLS, a route's `tls_name` reaches an origin addressed by IP whose certificate names a
//! host, and a reload reads the files again. The origin is a test origin behind a real TLS
//! terminator (rustls) on 127.0.0.1, with certificates made by rcgen.

mod common;

use common::Harness;
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use sluice_proxy::config::{Mode, OriginTlsConfig, RouteConfig};
use sluice_testkit::{Origin, Reply};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A certificate authority, and the PEM files of what it signed, in `dir`.
struct Pki {
    dir: tempfile::TempDir,
    ca: CertificateParams,
    ca_key: KeyPair,
}

impl Pki {
    fn new() -> Self {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_key = KeyPair::generate().unwrap();
        let pki = Self { dir: tempfile::tempdir().unwrap(), ca, ca_key };
        std::fs::write(pki.path("ca.pem"), pki.ca.self_signed(&pki.ca_key).unwrap().pem()).unwrap();
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A certificate for `127.0.0.1` (server) or a client, signed by the CA, written to
    /// `<name>.pem` and `<name>.key`; returns both as rustls types.
    fn issue(
        &self,
        name: &str,
        usage: ExtendedKeyUsagePurpose,
    ) -> (Vec<rustls::pki_types::CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>) {
        self.issue_for(name, "127.0.0.1", usage)
    }

    /// [`Pki::issue`] for the subject name `subject` (a DNS name or an IP address).
    fn issue_for(
        &self,
        name: &str,
        subject: &str,
        usage: ExtendedKeyUsagePurpose,
    ) -> (Vec<rustls::pki_types::CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>) {
        let mut params = CertificateParams::new(vec![subject.to_owned()]).unwrap();
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &Issuer::new(self.ca.clone(), &self.ca_key)).unwrap();
        std::fs::write(self.path(&format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
        let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        (vec![cert.der().clone()], der)
    }

    /// Trust anchors: this CA.
    fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.self_signed(&self.ca_key).unwrap().der().clone()).unwrap();
        roots
    }
}

/// A TLS terminator on 127.0.0.1 in front of `origin`, with `cert`; when `clients` is given,
/// it requires a client certificate signed by them.
async fn tls_front(
    origin: SocketAddr,
    cert: (Vec<rustls::pki_types::CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>),
    clients: Option<rustls::RootCertStore>,
) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match clients {
        Some(roots) => builder.with_client_cert_verifier(
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap(),
        ),
        None => builder.with_no_client_auth(),
    };
    let config = builder.with_single_cert(cert.0, cert.1).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut plain) = tokio::net::TcpStream::connect(origin).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

/// A test origin answering `/s`, never stored (its `Date` from a clock of its own: nothing
/// here is cached).
async fn origin() -> Origin {
    let clock = sluice_proxy::clock::ManualClock::default();
    let origin = Origin::start(move || sluice_proxy::clock::Clock::now(&clock)).await;
    origin.on("/s", Reply::ok("over tls").header("Cache-Control", "no-store"));
    origin
}

/// A reverse proxy to `https://front`, with `tls` as `[upstream.tls]`.
async fn proxy_to(front: SocketAddr, tls: OriginTlsConfig) -> Harness {
    Harness::build(Mode::Reverse, move |c| {
        c.route[0].origin = Some(format!("https://{front}"));
        c.upstream.tls = tls;
    })
    .await
}

fn trusting(ca: &Path) -> OriginTlsConfig {
    OriginTlsConfig { ca_file: Some(ca.to_owned()), ..OriginTlsConfig::default() }
}

#[tokio::test]
async fn an_origin_signed_by_a_private_ca_is_trusted_through_ca_file_only() {
    let pki = Pki::new();
    let origin = origin().await;
    let front = tls_front(origin.addr, pki.issue("server", ExtendedKeyUsagePurpose::ServerAuth), None).await;
    let h = proxy_to(front, OriginTlsConfig::default()).await;
    let refused = h.get("/s").await;
    assert_eq!(refused.status, 502, "Mozilla's roots do not know the CA: {}", refused.text());
    // A reverse proxy's client is not told the origin's address or certificate names.
    assert_eq!(refused.text(), "502 Bad Gateway: the origin gave no usable answer\n");
    assert_eq!(origin.hits("/s"), 0);

    let mut config = h.proxy.state().config.clone();
    config.upstream.tls = trusting(&pki.path("ca.pem"));
    h.proxy.generations().reload(config).await.expect("reloaded");
    assert_eq!(h.get("/s").await.text(), "over tls");
}

#[tokio::test]
async fn verify_false_accepts_a_self_signed_origin() {
    let self_signed = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(self_signed.signing_key.serialize_der()).unwrap();
    let origin = origin().await;
    let front = tls_front(origin.addr, (vec![self_signed.cert.der().clone()], key), None).await;
    let h = proxy_to(front, OriginTlsConfig { verify: false, ..Default::default() }).await;
    assert_eq!(h.get("/s").await.text(), "over tls");
}

#[tokio::test]
async fn a_client_certificate_reaches_an_origin_that_requires_one() {
    let pki = Pki::new();
    let server = pki.issue("server", ExtendedKeyUsagePurpose::ServerAuth);
    pki.issue("client", ExtendedKeyUsagePurpose::ClientAuth);
    let origin = origin().await;
    let front = tls_front(origin.addr, server, Some(pki.roots())).await;
    let h = proxy_to(front, trusting(&pki.path("ca.pem"))).await;
    assert_eq!(h.get("/s").await.status, 502, "no client certificate: refused by the origin");

    let mut config = h.proxy.state().config.clone();
    config.upstream.tls.client_cert = Some(pki.path("client.pem"));
    config.upstream.tls.client_key = Some(pki.path("client.key"));
    h.proxy.generations().reload(config).await.expect("reloaded");
    assert_eq!(h.get("/s").await.text(), "over tls");

    // Its end is in /metrics (rcgen's default: 4096-01-01).
    let metrics = common::admin::admin(&h, "GET", "/metrics", &[], None).await.text();
    assert!(metrics.contains("sluice_upstream_client_certificate_expiry_timestamp_seconds 67090118400\n"), "{metrics}");
}

#[tokio::test]
async fn a_reload_reads_the_ca_file_again_and_rejects_an_unusable_one() {
    let (old, new) = (Pki::new(), Pki::new());
    let server = new.issue("server", ExtendedKeyUsagePurpose::ServerAuth);
    let bundle = old.path("bundle.pem");
    std::fs::copy(old.path("ca.pem"), &bundle).unwrap();
    let origin = origin().await;
    let front = tls_front(origin.addr, server, None).await;
    let h = proxy_to(front, trusting(&bundle)).await;
    assert_eq!(h.get("/s").await.status, 502, "signed by a CA the bundle does not hold yet");
    let config = h.proxy.state().config.clone();

    std::fs::copy(new.path("ca.pem"), &bundle).unwrap();
    h.proxy.generations().reload(config.clone()).await.expect("the same file, read again");
    assert_eq!(h.get("/s").await.text(), "over tls");

    std::fs::write(&bundle, "not a certificate").unwrap();
    let err = h.proxy.generations().reload(config).await.unwrap_err();
    assert!(err.to_string().contains("holds no certificate"), "{err}");
    assert_eq!(h.get("/s").await.text(), "over tls", "the running configuration stays");
}

#[tokio::test]
async fn a_routes_tls_name_is_asked_for_and_checked_instead_of_the_origins_address() {
    let pki = Pki::new();
    let origin = origin().await;
    // The certificate names a host; the route addresses the origin by IP.
    let front =
        tls_front(origin.addr, pki.issue_for("named", "origin.internal", ExtendedKeyUsagePurpose::ServerAuth), None)
            .await;
    let ca = pki.path("ca.pem");
    let route = |prefix: &str, tls_name: Option<&str>, pooled: bool| RouteConfig {
        path_prefix: prefix.into(),
        origin: (!pooled).then(|| format!("https://{front}")),
        origins: if pooled { vec![format!("https://{front}")] } else { Vec::new() },
        tls_name: tls_name.map(str::to_owned),
        ..RouteConfig::default()
    };
    let h = Harness::build(Mode::Reverse, |c| {
        c.upstream.tls = trusting(&ca);
        c.route = vec![
            route("/", None, false),
            route("/named/", Some("origin.internal"), false),
            route("/pool/", Some("origin.internal"), true),
            route("/wrong/", Some("other.internal"), false),
        ];
    })
    .await;
    for path in ["/s", "/named/s", "/pool/s", "/wrong/s"] {
        origin.on(path, Reply::ok("over tls").header("Cache-Control", "no-store"));
    }
    assert_eq!(h.get("/s").await.status, 502, "the certificate does not name 127.0.0.1");
    let named = h.get("/named/s").await;
    assert_eq!((named.status.as_u16(), named.text().as_str()), (200, "over tls"));
    assert_eq!(h.get("/pool/s").await.status, 200, "pool members ask for it too");
    assert_eq!(h.get("/wrong/s").await.status, 502, "and it is checked");

    // Only for https:// origins, and only a name TLS can carry.
    let check = common::check_route;
    assert!(check("origin = \"https://10.0.0.5\"\ntls_name = \"origin.internal\"").is_ok());
    let plain = check("origin = \"http://10.0.0.5\"\ntls_name = \"origin.internal\"").unwrap_err();
    assert!(plain.contains("tls_name but no https:// origin"), "{plain}");
    let bad = check("origin = \"https://10.0.0.5\"\ntls_name = \"not a name\"").unwrap_err();
    assert!(bad.contains("not a DNS name"), "{bad}");
}
