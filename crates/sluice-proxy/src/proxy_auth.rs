//! Proxy authentication (`[proxy_auth]`): forward-proxy requests (absolute-form requests and
//! `CONNECT`) must carry `Proxy-Authorization` with the Basic scheme (RFC 9110 §11.7.2,
//! RFC 7617) naming a user of an htpasswd file with bcrypt hashes (`htpasswd -B`), or get
//! `407` with a `Proxy-Authenticate` challenge. Requests a reverse route takes are not
//! proxy requests: they are left to the origin.
//!
//! bcrypt is slow on purpose (tens of milliseconds a check at the usual costs), so:
//! checks run on blocking threads, at most one per core at a time, never on the event loop;
//! and a credential that passed is remembered for `cache_ttl` by the SHA-256 of the header
//! value (never the password itself). A user unknown to the file costs a check as well, so
//! its answer takes as long as a wrong password's. The file is looked at (its modification
//! time) at most once a second, and read again when it changed: users added, removed or
//! given a new password take effect then, and what was remembered is forgotten.

use crate::clock::SharedClock;
use base64::Engine;
use http::{HeaderMap, HeaderValue};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::Semaphore;

/// `[proxy_auth]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyAuthConfig {
    /// An htpasswd file: `user:hash` per line, bcrypt hashes (`$2y$`, `$2b$`, `$2a$`);
    /// blank lines and lines starting with `#` are skipped.
    pub users_file: PathBuf,
    /// The realm of the challenge.
    #[serde(default = "default_realm")]
    pub realm: String,
    /// How long a credential that passed is remembered.
    #[serde(default = "default_cache_ttl")]
    pub cache_ttl: crate::units::Dur,
}

fn default_realm() -> String {
    "Sluice".into()
}

fn default_cache_ttl() -> crate::units::Dur {
    crate::units::Dur(Duration::from_secs(3600))
}

/// The users of the file, as last read.
struct Users {
    hashes: HashMap<String, String>,
    /// A hash of a random password at the first user's cost, checked for unknown users so
    /// that their answer takes as long as a wrong password's.
    dummy: String,
    modified: Option<SystemTime>,
    /// When the file's modification time was last looked at.
    looked: SystemTime,
}

/// A credential that passed, until `until`.
struct Passed {
    user: Arc<str>,
    until: SystemTime,
}

/// Checks `Proxy-Authorization` against the users file.
pub struct ProxyAuth {
    file: PathBuf,
    challenge: HeaderValue,
    ttl: Duration,
    users: Mutex<Users>,
    passed: Mutex<HashMap<[u8; 32], Passed>>,
    /// Bounds the bcrypt checks running at once.
    checks: Arc<Semaphore>,
    clock: SharedClock,
}

impl std::fmt::Debug for ProxyAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyAuth").field("file", &self.file).finish_non_exhaustive()
    }
}

impl ProxyAuth {
    /// Reads the users file; fails on a file that cannot be read or has a line that is not
    /// `user:bcrypt-hash`.
    pub fn load(config: &ProxyAuthConfig, clock: SharedClock) -> Result<Self, String> {
        let (hashes, modified) = read_users(&config.users_file)?;
        let dummy = dummy_hash(&hashes);
        let realm = config.realm.replace(['\\', '"'], "");
        let challenge = HeaderValue::try_from(format!("Basic realm=\"{realm}\", charset=\"UTF-8\""))
            .map_err(|_| format!("proxy_auth.realm {:?} cannot be sent in a header", config.realm))?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Self {
            file: config.users_file.clone(),
            challenge,
            ttl: config.cache_ttl.0,
            users: Mutex::new(Users { hashes, dummy, modified, looked: clock.now() }),
            passed: Mutex::default(),
            checks: Arc::new(Semaphore::new(cores)),
            clock,
        })
    }

    /// The `Proxy-Authenticate` value of a `407`.
    pub fn challenge(&self) -> HeaderValue {
        self.challenge.clone()
    }

    /// The user whose credential `headers` carry (`Proxy-Authorization: Basic ...`), if it
    /// is valid.
    pub async fn user(&self, headers: &HeaderMap) -> Option<Arc<str>> {
        let value = headers.get(http::header::PROXY_AUTHORIZATION)?;
        self.refresh();
        let key: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        let now = self.clock.now();
        if let Some(passed) = self.passed.lock().get(&key).filter(|p| p.until > now) {
            return Some(Arc::clone(&passed.user));
        }
        let (user, password) = basic_credentials(value)?;
        let (known, hash) = {
            let users = self.users.lock();
            match users.hashes.get(&user) {
                Some(hash) => (true, hash.clone()),
                None => (false, users.dummy.clone()),
            }
        };
        let _permit = self.checks.acquire().await.ok()?;
        let valid = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false)).await.ok()?;
        if !(known && valid) {
            return None;
        }
        let user: Arc<str> = user.into();
        let mut passed = self.passed.lock();
        // Forget expired credentials now and then, so that the map stays small.
        if passed.len() >= 1024 {
            passed.retain(|_, p| p.until > now);
        }
        passed.insert(key, Passed { user: Arc::clone(&user), until: now + self.ttl });
        Some(user)
    }

    /// Reads the file again when its modification time changed (looked at once a second at
    /// most), forgetting the credentials that passed. A file that cannot be read leaves the
    /// users as they were.
    fn refresh(&self) {
        let now = self.clock.now();
        let mut users = self.users.lock();
        if now.duration_since(users.looked).is_ok_and(|since| since < Duration::from_secs(1)) {
            return;
        }
        users.looked = now;
        let modified = std::fs::metadata(&self.file).and_then(|m| m.modified()).ok();
        if modified == users.modified {
            return;
        }
        match read_users(&self.file) {
            Ok((hashes, modified)) => {
                tracing::info!("proxy_auth: {} re-read ({} users)", self.file.display(), hashes.len());
                let dummy = dummy_hash(&hashes);
                *users = Users { hashes, dummy, modified, looked: now };
                self.passed.lock().clear();
            }
            Err(e) => tracing::warn!("proxy_auth: {e}; users unchanged"),
        }
    }
}

/// A bcrypt hash of a random password, at the cost of one of `hashes` (10 without any).
fn dummy_hash(hashes: &HashMap<String, String>) -> String {
    let cost = hashes.values().next().and_then(|h| h.get(4..6)).and_then(|c| c.parse().ok()).unwrap_or(10);
    let password: [u8; 16] = rand::random();
    bcrypt::hash(password, cost).unwrap_or_default()
}

/// The user and password of a `Basic` credential.
fn basic_credentials(value: &HeaderValue) -> Option<(String, String)> {
    let text = value.to_str().ok()?.trim();
    let (scheme, token) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(token.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The users and hashes of an htpasswd file, and its modification time.
fn read_users(path: &Path) -> Result<(HashMap<String, String>, Option<SystemTime>), String> {
    let err = |e: std::io::Error| format!("proxy_auth.users_file {}: {e}", path.display());
    let text = std::fs::read_to_string(path).map_err(err)?;
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let mut users = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("proxy_auth.users_file {} line {}: {why}", path.display(), number + 1);
        let (user, hash) = line.split_once(':').ok_or_else(|| bad("not `user:hash`"))?;
        if !["$2y$", "$2b$", "$2a$"].iter().any(|prefix| hash.starts_with(prefix)) {
            return Err(bad("the hash is not bcrypt (make the file with `htpasswd -B`)"));
        }
        users.insert(user.to_owned(), hash.to_owned());
    }
    Ok((users, modified))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn basic(user_password: &str) -> HeaderMap {
        let token = base64::engine::general_purpose::STANDARD.encode(user_password);
        let mut headers = HeaderMap::new();
        headers.insert(http::header::PROXY_AUTHORIZATION, HeaderValue::try_from(format!("Basic {token}")).unwrap());
        headers
    }

    fn auth(dir: &tempfile::TempDir, lines: &str, clock: &ManualClock) -> Result<ProxyAuth, String> {
        let file = dir.path().join("users");
        std::fs::write(&file, lines).unwrap();
        let config = ProxyAuthConfig { users_file: file, realm: "Team \"x\"".into(), cache_ttl: default_cache_ttl() };
        ProxyAuth::load(&config, Arc::new(clock.clone()))
    }

    #[tokio::test]
    async fn a_user_of_the_file_passes_with_the_right_password_only() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::default();
        let hash = bcrypt::hash("secret", 4).unwrap();
        let auth = auth(&dir, &format!("# team\n\nann:{hash}\n"), &clock).unwrap();
        assert_eq!(auth.challenge(), "Basic realm=\"Team x\", charset=\"UTF-8\"");
        assert_eq!(auth.user(&basic("ann:secret")).await.as_deref(), Some("ann"));
        assert_eq!(auth.user(&basic("ann:secret")).await.as_deref(), Some("ann"), "remembered");
        assert_eq!(auth.user(&basic("ann:wrong")).await, None);
        assert_eq!(auth.user(&basic("bob:secret")).await, None);
        assert_eq!(auth.user(&basic("annsecret")).await, None, "no colon");
        assert_eq!(auth.user(&HeaderMap::new()).await, None);
        let mut bearer = HeaderMap::new();
        bearer.insert(http::header::PROXY_AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert_eq!(auth.user(&bearer).await, None);
    }

    #[tokio::test]
    async fn a_changed_file_takes_effect_and_forgets_what_passed() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::default();
        let auth = auth(&dir, &format!("ann:{}\n", bcrypt::hash("old", 4).unwrap()), &clock).unwrap();
        assert!(auth.user(&basic("ann:old")).await.is_some());
        let file = dir.path().join("users");
        std::fs::write(&file, format!("ann:{}\n", bcrypt::hash("new", 4).unwrap())).unwrap();
        // A modification time later than the first read's, whatever the file system's
        // resolution.
        let later = std::fs::metadata(&file).unwrap().modified().unwrap() + Duration::from_secs(5);
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(later).unwrap();
        assert!(auth.user(&basic("ann:old")).await.is_some(), "looked at once a second at most");
        clock.advance(Duration::from_secs(2));
        assert_eq!(auth.user(&basic("ann:old")).await, None);
        assert!(auth.user(&basic("ann:new")).await.is_some());
    }

    #[test]
    fn only_bcrypt_files_load() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::default();
        assert!(auth(&dir, "ann:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", &clock).unwrap_err().contains("htpasswd -B"));
        assert!(auth(&dir, "just a line\n", &clock).unwrap_err().contains("line 1"));
        let missing = ProxyAuthConfig {
            users_file: dir.path().join("none"),
            realm: default_realm(),
            cache_ttl: default_cache_ttl(),
        };
        assert!(ProxyAuth::load(&missing, Arc::new(clock)).is_err());
    }

    #[test]
    fn unknown_users_are_checked_against_a_hash_of_the_files_cost() {
        let hashes = HashMap::from([("ann".to_owned(), bcrypt::hash("x", 5).unwrap())]);
        let dummy = dummy_hash(&hashes);
        assert!(dummy.starts_with("$2b$05$"), "{dummy}");
        assert!(matches!(bcrypt::verify("", &dummy), Ok(false)));
    }
}
