//! Which records count as cacheable requests.

use super::Record;

/// Which records [`super::load`] keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Filter {
    /// Requests a shared cache could have stored: method GET, status 200 and a known size
    /// (fields a format does not log are not checked). The seed paper's rule: "GET requests
    /// with status 200 and a size, one cacheable object per URL".
    #[default]
    Cacheable,
    /// Every well-formed record with a known size.
    All,
}

impl Filter {
    /// True when `record` is kept.
    pub fn keeps(self, record: &Record<'_>) -> bool {
        if record.size.is_none() {
            return false;
        }
        match self {
            Filter::All => true,
            Filter::Cacheable => {
                record.method.is_none_or(|m| m.eq_ignore_ascii_case("GET")) && record.status.is_none_or(|s| s == 200)
            }
        }
    }
}

impl std::str::FromStr for Filter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cacheable" => Ok(Filter::Cacheable),
            "all" => Ok(Filter::All),
            _ => Err(format!("unknown filter {s:?}; valid filters: cacheable, all")),
        }
    }
}
