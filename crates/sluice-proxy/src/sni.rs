//! A TLS listener's certificate chosen by the name its client asks for (SNI, RFC 6066 §3):
//! each certificate serves the DNS names its subjectAltName lists, `*.example.com` any one
//! label under `example.com` (RFC 6125 §6.4.3); the listener's first certificate serves the
//! clients that ask for no name or another one.

use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::sync::Arc;

/// Certificates by name.
#[derive(Debug)]
pub(crate) struct ByName {
    default: Arc<CertifiedKey>,
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// By the name under the wildcard: `example.com` for `*.example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
}

impl ByName {
    /// `default` for every name, until [`ByName::add`] gives names to others.
    pub(crate) fn new(default: Arc<CertifiedKey>) -> Self {
        Self { default, exact: HashMap::new(), wildcard: HashMap::new() }
    }

    /// Serves `key` for `names` (as [`dns_names`] reads them), except those an earlier
    /// certificate has already taken.
    pub(crate) fn add(&mut self, key: &Arc<CertifiedKey>, names: &[String]) {
        for name in names {
            let map = match name.strip_prefix("*.") {
                Some(parent) => self.wildcard.entry(parent.to_owned()),
                None => self.exact.entry(name.clone()),
            };
            map.or_insert_with(|| Arc::clone(key));
        }
    }

    /// The certificate for a client asking for `name` (lower case, as rustls gives it).
    fn choose(&self, name: Option<&str>) -> &Arc<CertifiedKey> {
        let Some(name) = name else { return &self.default };
        self.exact
            .get(name)
            .or_else(|| name.split_once('.').and_then(|(_, parent)| self.wildcard.get(parent)))
            .unwrap_or(&self.default)
    }
}

impl ResolvesServerCert for ByName {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(self.choose(hello.server_name())))
    }
}

/// The DNS names of `cert`'s subjectAltName, lower case, without a final dot (none when it
/// cannot be read).
pub(crate) fn dns_names(cert: &CertificateDer<'_>) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else { return Vec::new() };
    let Ok(Some(san)) = parsed.subject_alternative_name() else { return Vec::new() };
    san.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(name) => Some(name.trim_end_matches('.').to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Arc<CertifiedKey> {
        let cert = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        let der = rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let provider = rustls::crypto::ring::default_provider();
        Arc::new(CertifiedKey::from_der(vec![cert.cert.der().clone()], der, &provider).unwrap())
    }

    #[test]
    fn rfc6066_3_a_name_gets_the_certificate_listing_it_and_others_the_default() {
        let (default, a, wild, taken) = (key("default.test"), key("a.test"), key("*.b.test"), key("a.test"));
        let mut by_name = ByName::new(Arc::clone(&default));
        by_name.add(&a, &dns_names(&a.cert[0]));
        by_name.add(&wild, &dns_names(&wild.cert[0]));
        by_name.add(&taken, &["a.test".to_owned()]);
        let chosen = |name| by_name.choose(name).cert[0].clone();
        assert_eq!(chosen(Some("a.test")), a.cert[0], "the first to list a name keeps it");
        assert_eq!(chosen(Some("x.b.test")), wild.cert[0]);
        assert_eq!(chosen(None), default.cert[0], "no name asked for");
        assert_eq!(chosen(Some("other.test")), default.cert[0]);
    }

    #[test]
    fn rfc6125_6_4_3_a_wildcard_covers_one_label_only() {
        let (default, wild) = (key("default.test"), key("*.b.test"));
        let mut by_name = ByName::new(Arc::clone(&default));
        by_name.add(&wild, &dns_names(&wild.cert[0]));
        assert_eq!(by_name.choose(Some("b.test")).cert[0], default.cert[0]);
        assert_eq!(by_name.choose(Some("y.x.b.test")).cert[0], default.cert[0]);
    }

    #[test]
    fn names_are_read_from_the_subject_alt_name() {
        let cert =
            rcgen::generate_simple_self_signed(vec!["WWW.Example.COM.".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        assert_eq!(dns_names(cert.cert.der()), ["www.example.com"], "IP addresses are not names");
    }
}
