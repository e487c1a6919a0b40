//! Client certificates on TLS listeners (mutual TLS, `tls.client_ca`): the verifier that asks
//! for and checks them, and the verified certificate as origins are told of it
//! (`headers.forward_client_cert`): an `X-Forwarded-Client-Cert` element in Envoy's format,
//! `Hash=<SHA-256 of the certificate, hex>;Subject="<distinguished name>";URI=<uri>;DNS=<name>`,
//! one `URI` and `DNS` per subjectAltName of those kinds.

use http::{HeaderName, HeaderValue};
use rustls::pki_types::CertificateDer;
use rustls::server::danger::ClientCertVerifier;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::sync::Arc;

/// The verified client certificate of a request's connection, as [`forwarded_value`] makes
/// it: an extension of the requests of connections that have one.
#[derive(Debug, Clone)]
pub(crate) struct Verified(pub Arc<HeaderValue>);

/// The field origins learn the client's certificate from.
pub const X_FORWARDED_CLIENT_CERT: HeaderName = HeaderName::from_static("x-forwarded-client-cert");

/// A verifier of client certificates issued by the CAs of `roots` (`tls.client_ca`); clients
/// without one are refused when `required`, let in otherwise.
pub(crate) fn verifier(
    roots: rustls::RootCertStore,
    required: bool,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let builder = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    let builder = if required { builder } else { builder.allow_unauthenticated() };
    builder.build().map_err(|e| e.to_string())
}

/// `cert` (a verified client's end-entity certificate) as an `X-Forwarded-Client-Cert`
/// element; `None` when it cannot be parsed.
pub(crate) fn forwarded_value(cert: &CertificateDer<'_>) -> Option<HeaderValue> {
    use x509_parser::extensions::GeneralName;
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let mut value = String::from("Hash=");
    for byte in Sha256::digest(cert.as_ref()) {
        let _ = write!(value, "{byte:02x}");
    }
    let subject = parsed.subject().to_string();
    value.push_str(";Subject=\"");
    for c in subject.chars() {
        if matches!(c, '"' | '\\') {
            value.push('\\');
        }
        value.push(c);
    }
    value.push('"');
    if let Ok(Some(san)) = parsed.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::URI(uri) => {
                    let _ = write!(value, ";URI={uri}");
                }
                GeneralName::DNSName(dns) => {
                    let _ = write!(value, ";DNS={dns}");
                }
                _ => {}
            }
        }
    }
    // A name that is not visible ASCII leaves no usable field: none is sent.
    HeaderValue::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_element_names_the_hash_subject_uris_and_dns_names() {
        let mut params = rcgen::CertificateParams::new(vec!["peer-a.internal".to_owned()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CommonName, "peer \"a\"");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "Sluice");
        params.subject_alt_names.push(rcgen::SanType::URI("spiffe://sluice.test/peer-a".try_into().unwrap()));
        let cert = params.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap();
        let value = forwarded_value(cert.der()).unwrap();
        let hash: String = Sha256::digest(cert.der().as_ref()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            value.to_str().unwrap(),
            format!(
                "Hash={hash};Subject=\"CN=peer \\\"a\\\", O=Sluice\";DNS=peer-a.internal;URI=spiffe://sluice.test/peer-a"
            )
        );
    }
}
