//! TLS listeners: certificates from PEM files, ALPN for h2 and http/1.1.

use crate::config::TlsConfig;
use std::sync::Arc;

/// Builds a TLS acceptor from the configured PEM certificate chain and private key.
pub fn acceptor(config: &TlsConfig) -> Result<tokio_rustls::TlsAcceptor, String> {
    let read = |path: &std::path::Path| std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()));
    let cert_pem = read(&config.cert)?;
    let key_pem = read(&config.key)?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", config.cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no certificate", config.cert.display()));
    }
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| format!("{}: {e}", config.key.display()))?
        .ok_or_else(|| format!("{} holds no private key", config.key.display()))?;
    let mut server = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("certificate and key do not match: {e}"))?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(server)))
}
