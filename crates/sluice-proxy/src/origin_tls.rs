//! TLS towards origins (`[upstream.tls]`): the trust anchors origin certificates are checked
//! against (Mozilla's roots, built in, and/or a private CA's PEM file), an optional client
//! certificate for origins that require mutual TLS, and ALPN: `http/1.1`, or `h2` alone for
//! the origins of routes with `http2 = true`.
//!
//! With `verify = false` any certificate is accepted (the handshake's signatures are still
//! checked against the certificate presented, so the peer holds its key): for testing
//! against self-signed origins only; Sluice warns when it builds such a connector.

use crate::config::OriginTlsConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;

/// How new connections to origins are made, from `[upstream.tls]` as read at one time.
#[derive(Clone)]
pub struct OriginTls {
    /// Offers ALPN `http/1.1`.
    pub connector: tokio_rustls::TlsConnector,
    /// The same, offering `h2` alone (`crate::upstream::Target::http2`).
    pub h2_connector: tokio_rustls::TlsConnector,
    /// When the client certificate (`client_cert`), if any, expires.
    pub client_cert_not_after: Option<std::time::SystemTime>,
}

/// The connector for `config`, its files read now. Fails on an unreadable or empty file, or
/// a client key that does not match its certificate.
pub fn connector(config: &OriginTlsConfig) -> Result<OriginTls, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if config.verify {
        builder.with_root_certificates(roots(config)?)
    } else {
        tracing::warn!("upstream.tls.verify = false: origin certificates are not checked");
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
    };
    let mut client_cert_not_after = None;
    let mut client = match (&config.client_cert, &config.client_key) {
        (Some(cert), Some(key)) => {
            let chain = crate::tls::load_certs(cert)?;
            client_cert_not_after = crate::tls::not_after(&chain[0]);
            builder
                .with_client_auth_cert(chain, crate::tls::load_key(key)?)
                .map_err(|e| format!("upstream.tls client certificate and key do not match: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    let mut h2 = client.clone();
    h2.alpn_protocols = vec![b"h2".to_vec()];
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(OriginTls {
        connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
        h2_connector: tokio_rustls::TlsConnector::from(Arc::new(h2)),
        client_cert_not_after,
    })
}

fn roots(config: &OriginTlsConfig) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    if config.builtin_roots {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    if let Some(path) = &config.ca_file {
        crate::tls::add_roots(&mut roots, &crate::tls::read(path)?, path)?;
    }
    Ok(roots)
}

/// `verify = false`: any certificate chain, any name; handshake signatures still checked.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
