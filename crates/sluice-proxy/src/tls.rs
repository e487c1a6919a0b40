//! TLS listeners: certificates from PEM files, chosen by the name a client asks for
//! ([`crate::sni`]), client certificates ([`crate::client_cert`]), session resumption, ALPN
//! for h2 and http/1.1, and when each certificate expires (in `/metrics`, and a warning when
//! it is near). The PEM loaders serve the origin side too (`crate::origin_tls`).

use crate::config::TlsConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A listener's TLS: its acceptor, when each of its certificates expires, and its session
/// resumption.
#[derive(Clone)]
pub struct ListenerTls {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// Its certificates, `tls.cert` first, then those of `tls.sni`.
    pub certificates: Vec<CertificateFile>,
    pub resumption: Resumption,
}

/// Sessions a listener's TLS 1.2 session cache holds (the oldest go first).
const SESSION_CACHE_ENTRIES: usize = 16 * 1024;

/// A listener's session resumption, so that a returning client's handshake skips the
/// certificate and the server's signature (RFC 8446 §2.2): TLS 1.3 tickets sealed with keys
/// that rotate every 6 hours (rustls's `Ticketer`, ChaCha20-Poly1305), and a cache of TLS 1.2
/// sessions ([`SESSION_CACHE_ENTRIES`]). One listener's, never shared with another: rustls leaves it
/// to the server not to resume a session under other settings than it began with (a session
/// begun without a client certificate must not resume where one is required). A reload
/// carries it over to the listener's next generation, so clients resume across reloads too,
/// unless the listener's client certificate settings changed ([`listener`]).
#[derive(Clone)]
pub struct Resumption {
    ticketer: Arc<dyn rustls::server::ProducesTickets>,
    sessions: Arc<dyn rustls::server::StoresServerSessions>,
    /// What the sessions' clients were held to: the SHA-256 of `tls.client_ca`'s contents
    /// and `client_cert_required` (zero without client certificates).
    client_auth: [u8; 32],
}

impl Resumption {
    fn new(client_auth: [u8; 32]) -> Result<Self, String> {
        let ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| format!("TLS session tickets: {e}"))?;
        let sessions = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES);
        Ok(Self { ticketer, sessions, client_auth })
    }
}

/// What a listener holds its clients to, as [`Resumption::client_auth`] records it: the
/// contents of its `client_ca` file, if any, and `client_cert_required`.
fn client_auth(client_ca: Option<&[u8]>, required: bool) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let Some(pem) = client_ca else { return [0; 32] };
    let mut digest = Sha256::new();
    digest.update(pem);
    digest.update([u8::from(required)]);
    digest.finalize().into()
}

/// A certificate a listener serves.
#[derive(Debug, Clone)]
pub struct CertificateFile {
    pub path: std::path::PathBuf,
    /// The leaf certificate's `notAfter` (`None` if it cannot be read).
    pub not_after: Option<SystemTime>,
}

impl CertificateFile {
    /// `"<path> has expired"` or `"<path> expires in N hours"` when it ends within
    /// [`EXPIRY_WARNING`] of `now` (as a reload logs it; `--check-config` prints it).
    pub fn expiry_warning(&self, now: SystemTime) -> Option<String> {
        let warning = expiry_warning(self.not_after?, now)?;
        Some(format!("{} {warning}", self.path.display()))
    }
}

/// A certificate this close to its end is warned about when it is loaded.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

/// Builds a listener's TLS from the configured PEM certificate chains and private keys: `cert`
/// for clients that ask for no name (SNI) or one no `sni` certificate lists
/// ([`crate::sni::ByName`]); client certificates asked for and checked with `client_ca`
/// ([`crate::client_cert`]); sessions resumed through `carried` (the listener's previous
/// generation's) when it held clients to the same, else through a new [`Resumption`]. Fails
/// on an unreadable file, a key that does not match its certificate, an `sni` certificate
/// that lists no DNS name, or a `client_ca` without a CA certificate.
pub fn listener(config: &TlsConfig, carried: Option<Resumption>) -> Result<ListenerTls, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Read once: its contents both make the verifier and tell whether sessions may carry over.
    let client_ca = match &config.client_ca {
        Some(path) => Some((path, read(path)?)),
        None => None,
    };
    let client_auth = client_auth(client_ca.as_ref().map(|(_, pem)| pem.as_slice()), config.client_cert_required);
    let resumption = match carried.filter(|carried| carried.client_auth == client_auth) {
        Some(carried) => carried,
        None => Resumption::new(client_auth)?,
    };
    let certified = |cert: &Path, key: &Path| -> Result<Arc<CertifiedKey>, String> {
        let certified = CertifiedKey::from_der(load_certs(cert)?, load_key(key)?, &provider)
            .map_err(|e| format!("{}: cannot be used with {}: {e}", key.display(), cert.display()))?;
        Ok(Arc::new(certified))
    };
    let file =
        |path: &Path, key: &CertifiedKey| CertificateFile { path: path.to_owned(), not_after: not_after(&key.cert[0]) };
    let default = certified(&config.cert, &config.key)?;
    let mut certificates = vec![file(&config.cert, &default)];
    let mut by_name = crate::sni::ByName::new(Arc::clone(&default));
    by_name.add(&default, &crate::sni::dns_names(&default.cert[0]));
    for pair in &config.sni {
        let key = certified(&pair.cert, &pair.key)?;
        let names = crate::sni::dns_names(&key.cert[0]);
        if names.is_empty() {
            return Err(format!("{}: lists no DNS name (subjectAltName) to be chosen by", pair.cert.display()));
        }
        by_name.add(&key, &names);
        certificates.push(file(&pair.cert, &key));
    }
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match &client_ca {
        Some((path, pem)) => {
            let mut roots = rustls::RootCertStore::empty();
            add_roots(&mut roots, pem, path)?;
            let verifier = crate::client_cert::verifier(roots, config.client_cert_required, provider)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut server = builder.with_cert_resolver(Arc::new(by_name));
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    server.ticketer = Arc::clone(&resumption.ticketer);
    server.session_storage = Arc::clone(&resumption.sessions);
    Ok(ListenerTls { acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)), certificates, resumption })
}

/// When `cert` stops being valid.
pub(crate) fn not_after(cert: &CertificateDer<'_>) -> Option<SystemTime> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let seconds = u64::try_from(parsed.validity().not_after.timestamp()).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Warns when `whose` certificate (`listener 0.0.0.0:443`), ending at `not_after`, has
/// expired or will within [`EXPIRY_WARNING`] of `now`.
pub(crate) fn warn_if_expiring(whose: &str, not_after: Option<SystemTime>, now: SystemTime) {
    if let Some(warning) = not_after.and_then(|not_after| expiry_warning(not_after, now)) {
        tracing::warn!("the TLS certificate of {whose} {warning}");
    }
}

fn expiry_warning(not_after: SystemTime, now: SystemTime) -> Option<String> {
    match not_after.duration_since(now) {
        Err(_) => Some("has expired".to_owned()),
        Ok(left) if left < EXPIRY_WARNING => Some(format!("expires in {} hours", left.as_secs() / 3600)),
        Ok(_) => None,
    }
}

/// When the listeners' certificates and the `upstream.tls` client certificate expire, for
/// `/metrics` (empty without any).
pub(crate) fn prometheus(state: &crate::state::State) -> String {
    use std::fmt::Write as _;
    let seconds = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut out = String::new();
    if let Some(not_after) = state.upstream.client_cert_not_after() {
        let _ = writeln!(
            out,
            "# HELP sluice_upstream_client_certificate_expiry_timestamp_seconds When the upstream.tls client certificate expires.\n\
             # TYPE sluice_upstream_client_certificate_expiry_timestamp_seconds gauge\n\
             sluice_upstream_client_certificate_expiry_timestamp_seconds {}",
            seconds(not_after)
        );
    }
    let mut listeners = String::new();
    let served =
        state.config.listener.iter().zip(&state.listener_tls).filter_map(|(lc, tls)| Some((lc, tls.as_ref()?)));
    for (lc, tls) in served {
        for certificate in &tls.certificates {
            let Some(not_after) = certificate.not_after else { continue };
            if listeners.is_empty() {
                listeners.push_str(
                    "# HELP sluice_tls_certificate_expiry_timestamp_seconds When a listener's certificate expires.\n\
                     # TYPE sluice_tls_certificate_expiry_timestamp_seconds gauge\n",
                );
            }
            let _ = writeln!(
                listeners,
                "sluice_tls_certificate_expiry_timestamp_seconds{{listener=\"{}\",certificate=\"{}\"}} {}",
                lc.addr,
                crate::pool_metrics::escape(&certificate.path.display().to_string()),
                seconds(not_after)
            );
        }
    }
    out + &listeners
}

/// The certificates of a PEM file, in order (at least one).
pub(crate) fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    parse_certs(&read(path)?, path)
}

/// The certificates of PEM text `pem`, read from `path` (named in errors), in order (at least
/// one).
fn parse_certs(pem: &[u8], path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no certificate", path.display()));
    }
    Ok(certs)
}

/// Adds the CA certificates of PEM text `pem`, read from `path`, to `roots`: trust anchors of
/// origins (`upstream.tls.ca_file`) or of client certificates (`tls.client_ca`).
pub(crate) fn add_roots(roots: &mut rustls::RootCertStore, pem: &[u8], path: &Path) -> Result<(), String> {
    for cert in parse_certs(pem, path)? {
        roots.add(cert).map_err(|e| format!("{}: not a CA certificate: {e}", path.display()))?;
    }
    Ok(())
}

/// The (first) private key of a PEM file.
pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path)?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| format!("{}: {e}", path.display()))?
        .ok_or_else(|| format!("{} holds no private key", path.display()))
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_warned_about_within_two_weeks_of_its_end_and_after() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(expiry_warning(now + 30 * day, now), None);
        assert_eq!(expiry_warning(now + 3 * day, now).as_deref(), Some("expires in 72 hours"));
        assert_eq!(expiry_warning(now - day, now).as_deref(), Some("has expired"));
    }

    #[test]
    fn the_expiry_is_read_from_the_leaf_certificate() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 5, 17);
        let cert = params.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap();
        let expected = UNIX_EPOCH + Duration::from_secs(1_936_742_400); // 2031-05-17T00:00:00Z
        assert_eq!(not_after(cert.der()), Some(expected));
    }
}
