//! Changes to the module list while the proxy runs: the `[[module]]` entries of a
//! (re)loaded configuration, and single entries loaded, reloaded or unloaded through the
//! admin API.
//!
//! The proxy does not know how to build a Proxy-Wasm plugin or start a helper process: a
//! [`ModuleFactory`] does (`sluice_modules::Factory`), so this crate links neither wasmtime
//! nor gRPC. The manager keeps the entries and the modules built for them, and stores a new
//! [`ModuleList`] after each change; transactions under way keep the modules they started
//! with. Changes are serialised; building happens under the manager's lock, so call the
//! changing methods off the async runtime (they block while a plugin compiles).

use crate::chain::LoadedModule;
use crate::config::ModuleConfig;
use crate::module_list::ModuleList;
use parking_lot::Mutex;
use sluice_module::Module;
use std::collections::HashSet;
use std::sync::Arc;

/// Builds the modules of `[[module]]` entries. Implemented outside the proxy.
pub trait ModuleFactory: Send + Sync {
    /// Checks an entry without starting anything that lasts (no helper process, no plugin
    /// instance): its settings, the files it names. `Err` says what is wrong, in words for
    /// the operator; the caller adds the entry's name.
    fn check(&self, entry: &ModuleConfig) -> Result<(), String>;

    /// Builds the modules of an entry, in chain order (a helper process gives two). Called
    /// for new entries and for entries replaced by a changed one of the same name; blocking.
    /// A factory may hand back the same module for a new version (a Wasm plugin is reloaded
    /// behind its handle, and transactions under way finish on the old version).
    fn build(&self, entry: &ModuleConfig) -> Result<Vec<Arc<dyn Module>>, String>;

    /// `entry` left the chain and no entry of the same name and kind replaced it: release
    /// what the factory holds for it (a Wasm plugin is unloaded). Transactions under way keep
    /// its modules until they end. Default: nothing to do (dropping the modules is enough).
    fn removed(&self, entry: &ModuleConfig, modules: &[Arc<dyn Module>]) {
        let _ = (entry, modules);
    }

    /// A one-word state for listings, e.g. `loaded`, or a helper's `up` or `backoff`.
    /// Default: `loaded`.
    fn state(&self, entry: &ModuleConfig, modules: &[Arc<dyn Module>]) -> String {
        let _ = (entry, modules);
        "loaded".to_owned()
    }
}

/// Why a change was refused. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModuleError {
    /// No entry has that name.
    #[error("no module {0}")]
    NotFound(String),
    /// The entry (or the resulting list) is not valid, or its modules could not be built.
    #[error("{0}")]
    Invalid(String),
}

/// One entry as listed by `GET /modules`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModuleStatus {
    pub name: String,
    pub kind: &'static str,
    /// Position among the entries (0 runs first).
    pub order: usize,
    pub state: String,
    pub on_error: &'static str,
    /// The names of the modules the entry put in the chain, in order.
    pub modules: Vec<String>,
    /// The entry's settings as they run (a Wasm plugin's `path` and `plugin_config`, ...).
    pub settings: toml::Table,
}

/// What a configuration (re)load did, by entry name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Changes {
    pub kept: Vec<String>,
    /// Entries with new settings that their running module took in place
    /// ([`Module::reconfigure`]).
    pub reconfigured: Vec<String>,
    pub built: Vec<String>,
    pub removed: Vec<String>,
}

#[derive(Clone)]
struct Entry {
    config: ModuleConfig,
    modules: Vec<Arc<dyn Module>>,
}

/// Keeps the `[[module]]` entries and stores the module list after each change.
pub struct ModuleManager {
    list: ModuleList,
    factory: Arc<dyn ModuleFactory>,
    entries: Mutex<Vec<Entry>>,
}

impl std::fmt::Debug for ModuleManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.entries.lock().iter().map(|e| e.config.name.clone()).collect();
        f.debug_struct("ModuleManager").field("entries", &names).finish_non_exhaustive()
    }
}

/// Checks entries without building them: each through `factory`, and names unique and
/// usable in a URL path. For `sluice serve --check-config`.
pub fn check_entries(factory: &dyn ModuleFactory, entries: &[ModuleConfig]) -> Result<(), String> {
    let mut seen = HashSet::new();
    for entry in entries {
        check_name(&entry.name)?;
        if !seen.insert(entry.name.as_str()) {
            return Err(format!("[[module]] {}: the name is used by another entry", entry.name));
        }
        factory.check(entry).map_err(|e| format!("[[module]] {} ({}): {e}", entry.name, entry.kind.as_str()))?;
    }
    check_sockets(entries.iter())
}

/// Two ext_proc entries on one `settings.socket` would end up talking to one helper (each
/// supervisor removes the socket file before it starts its own): refused, naming both.
fn check_sockets<'a>(entries: impl Iterator<Item = &'a ModuleConfig>) -> Result<(), String> {
    let mut seen: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for entry in entries.filter(|e| e.kind == crate::config::ModuleKind::Extproc) {
        let Some(socket) = entry.settings.get("socket").and_then(|v| v.as_str()) else { continue };
        if let Some(other) = seen.insert(socket, &entry.name) {
            return Err(format!(
                "[[module]] {other} and [[module]] {}: both use the socket {socket}; each helper needs its own",
                entry.name
            ));
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)) {
        return Err(format!("[[module]] name {name:?} must be a non-empty token of letters, digits, '-', '.', '_'"));
    }
    Ok(())
}

impl ModuleManager {
    /// A manager with no entries that stores into `list` (which it does not touch until the
    /// first change).
    pub fn new(list: ModuleList, factory: Arc<dyn ModuleFactory>) -> Self {
        Self { list, factory, entries: Mutex::new(Vec::new()) }
    }

    /// The list this manager stores into.
    pub fn list(&self) -> &ModuleList {
        &self.list
    }

    /// Makes the entries those of a (re)loaded configuration: entries equal to the current
    /// ones keep their modules (and instances), changed and new ones are built, entries that
    /// are gone are removed. All or nothing for the list: the names, and the settings of
    /// every changed entry but Wasm ones (whose check is a compilation), are checked before
    /// anything changes, so a bad entry leaves every module as it was, settings taken in
    /// place included. (An entry that fails only when built leaves the list as it was too,
    /// but a Wasm plugin built before it was already reloaded behind its handle, and its
    /// new version serves.)
    pub fn configure(&self, configs: &[ModuleConfig]) -> Result<Changes, ModuleError> {
        let mut entries = self.entries.lock();
        let mut names = HashSet::new();
        for config in configs {
            check_name(&config.name).map_err(ModuleError::Invalid)?;
            if !names.insert(config.name.as_str()) {
                return Err(ModuleError::Invalid(format!("two [[module]] entries are named {}", config.name)));
            }
            let changed = !entries.iter().any(|e| e.config == *config);
            if changed && config.kind == crate::config::ModuleKind::Extproc {
                check_sockets(configs.iter()).map_err(ModuleError::Invalid)?;
            }
            if changed && config.kind != crate::config::ModuleKind::Wasm {
                self.factory.check(config).map_err(|e| {
                    ModuleError::Invalid(format!("[[module]] {} ({}): {e}", config.name, config.kind.as_str()))
                })?;
            }
        }
        let mut changes = Changes::default();
        let mut next = Vec::with_capacity(configs.len());
        for config in configs {
            check_name(&config.name).map_err(ModuleError::Invalid)?;
            if let Some(same) = entries.iter().find(|e| e.config == *config) {
                changes.kept.push(config.name.clone());
                next.push(same.clone());
                continue;
            }
            if let Some(entry) = Self::reconfigured(&entries, config)? {
                changes.reconfigured.push(config.name.clone());
                next.push(entry);
                continue;
            }
            changes.built.push(config.name.clone());
            next.push(Entry { config: config.clone(), modules: self.build(config)? });
        }
        changes.removed = self.install(&mut entries, next)?;
        Ok(changes)
    }

    /// Loads entry `config` (or reloads it, when its name exists: rebuilt, so a plugin file
    /// changed on disk is read again, unless only its settings changed and its module took
    /// them in place, [`Module::reconfigure`]). A new entry goes at `position` (default:
    /// last); an existing one stays where it is unless `position` is given. True when the
    /// entry is new.
    pub fn put(&self, config: ModuleConfig, position: Option<usize>) -> Result<bool, ModuleError> {
        check_name(&config.name).map_err(ModuleError::Invalid)?;
        let mut entries = self.entries.lock();
        let mut next = entries.clone();
        let existing = next.iter().position(|e| e.config.name == config.name);
        check_sockets(next.iter().map(|e| &e.config).filter(|c| c.name != config.name).chain(std::iter::once(&config)))
            .map_err(ModuleError::Invalid)?;
        let entry = match Self::reconfigured(&entries, &config)? {
            Some(entry) => entry,
            None => Entry { modules: self.build(&config)?, config },
        };
        let at = match existing {
            Some(i) => {
                next.remove(i);
                position.unwrap_or(i)
            }
            None => position.unwrap_or(next.len()),
        };
        next.insert(at.min(next.len()), entry);
        self.install(&mut entries, next)?;
        Ok(existing.is_none())
    }

    /// Unloads entry `name`: new transactions no longer see its modules.
    pub fn delete(&self, name: &str) -> Result<(), ModuleError> {
        let mut entries = self.entries.lock();
        let mut next = entries.clone();
        let i = next.iter().position(|e| e.config.name == name).ok_or_else(|| ModuleError::NotFound(name.into()))?;
        next.remove(i);
        self.install(&mut entries, next)?;
        Ok(())
    }

    /// The entry `name`'s configuration.
    pub fn entry(&self, name: &str) -> Option<ModuleConfig> {
        self.entries.lock().iter().find(|e| e.config.name == name).map(|e| e.config.clone())
    }

    /// Every entry's configuration, in order.
    pub fn entries(&self) -> Vec<ModuleConfig> {
        self.entries.lock().iter().map(|e| e.config.clone()).collect()
    }

    /// Every entry, in order.
    pub fn statuses(&self) -> Vec<ModuleStatus> {
        let entries = self.entries.lock().clone();
        entries
            .iter()
            .enumerate()
            .map(|(order, e)| ModuleStatus {
                name: e.config.name.clone(),
                kind: e.config.kind.as_str(),
                order,
                state: self.factory.state(&e.config, &e.modules),
                on_error: match e.config.on_error {
                    crate::config::OnError::Open => "open",
                    crate::config::OnError::Closed => "closed",
                },
                modules: e.modules.iter().map(|m| m.name().to_owned()).collect(),
                settings: e.config.settings.clone(),
            })
            .collect()
    }

    /// The running entry of `config`'s name, with `config`'s settings taken in place by its
    /// module, when the kind is the same, the settings differ, the entry put one module in
    /// the chain, and that module accepted them. `Ok(None)`: build instead.
    fn reconfigured(entries: &[Entry], config: &ModuleConfig) -> Result<Option<Entry>, ModuleError> {
        let Some(running) = entries.iter().find(|e| e.config.name == config.name && e.config.kind == config.kind)
        else {
            return Ok(None);
        };
        let [module] = running.modules.as_slice() else { return Ok(None) };
        if running.config.settings == config.settings {
            return Ok(None);
        }
        match module.reconfigure(&config.settings) {
            Ok(true) => Ok(Some(Entry { config: config.clone(), modules: running.modules.clone() })),
            Ok(false) => Ok(None),
            Err(e) => Err(ModuleError::Invalid(format!("[[module]] {} ({}): {e}", config.name, config.kind.as_str()))),
        }
    }

    fn build(&self, config: &ModuleConfig) -> Result<Vec<Arc<dyn Module>>, ModuleError> {
        let modules = self
            .factory
            .build(config)
            .map_err(|e| ModuleError::Invalid(format!("[[module]] {} ({}): {e}", config.name, config.kind.as_str())))?;
        if modules.is_empty() {
            return Err(ModuleError::Invalid(format!("[[module]] {}: the factory built no module", config.name)));
        }
        Ok(modules)
    }

    /// Checks `next`, stores its list, tells the factory about entries that left; returns
    /// their names.
    fn install(&self, entries: &mut Vec<Entry>, next: Vec<Entry>) -> Result<Vec<String>, ModuleError> {
        let mut names = HashSet::new();
        for entry in &next {
            if !names.insert(entry.config.name.as_str()) {
                return Err(ModuleError::Invalid(format!("two [[module]] entries are named {}", entry.config.name)));
            }
        }
        let mut chain = Vec::new();
        let mut module_names = HashSet::new();
        for entry in &next {
            for module in &entry.modules {
                if !module_names.insert(module.name().to_owned()) {
                    return Err(ModuleError::Invalid(format!(
                        "[[module]] {}: a module named {} is already in the chain",
                        entry.config.name,
                        module.name()
                    )));
                }
                chain.push(LoadedModule { module: Arc::clone(module), on_error: entry.config.on_error.into() });
            }
        }
        self.list.store(chain);
        let previous = std::mem::replace(entries, next);
        let mut removed = Vec::new();
        for old in previous {
            let replaced = entries.iter().any(|e| e.config.name == old.config.name && e.config.kind == old.config.kind);
            if !replaced {
                self.factory.removed(&old.config, &old.modules);
                removed.push(old.config.name);
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ModuleKind, OnError};
    use sluice_module::{Txn, TxnInfo};
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Named(String);

    impl Module for Named {
        fn name(&self) -> &str {
            &self.0
        }
        fn new_txn(&self, _info: &TxnInfo) -> Option<Box<dyn Txn>> {
            None
        }
    }

    /// Builds one module named after the entry (two for `extproc`), fails on `settings.fail`.
    #[derive(Default)]
    struct Fake {
        builds: AtomicUsize,
        removed: Mutex<Vec<String>>,
    }

    impl ModuleFactory for Fake {
        fn check(&self, entry: &ModuleConfig) -> Result<(), String> {
            match entry.settings.get("fail") {
                Some(_) => Err("told to fail".into()),
                None => Ok(()),
            }
        }
        fn build(&self, entry: &ModuleConfig) -> Result<Vec<Arc<dyn Module>>, String> {
            self.check(entry)?;
            self.builds.fetch_add(1, Ordering::SeqCst);
            let mut modules: Vec<Arc<dyn Module>> = vec![Arc::new(Named(entry.name.clone()))];
            if entry.kind == ModuleKind::Extproc {
                modules.push(Arc::new(Named(format!("{}-apply", entry.name))));
            }
            Ok(modules)
        }
        fn removed(&self, entry: &ModuleConfig, _modules: &[Arc<dyn Module>]) {
            self.removed.lock().push(entry.name.clone());
        }
    }

    fn entry(name: &str, kind: ModuleKind, settings: &str) -> ModuleConfig {
        ModuleConfig { name: name.into(), kind, on_error: OnError::Open, settings: toml::from_str(settings).unwrap() }
    }

    fn chain(list: &ModuleList) -> Vec<String> {
        list.load().iter().map(|m| m.module.name().to_owned()).collect()
    }

    #[test]
    fn a_reload_keeps_unchanged_entries_and_rebuilds_changed_ones() {
        let fake = Arc::new(Fake::default());
        let list = ModuleList::default();
        let manager = ModuleManager::new(list.clone(), fake.clone());
        let a = entry("a", ModuleKind::Wasm, "x = 1");
        let b = entry("b", ModuleKind::Extproc, "");
        manager.configure(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(chain(&list), ["a", "b", "b-apply"]);
        let a_module = Arc::clone(&list.load()[0].module);

        let a2 = entry("a", ModuleKind::Wasm, "x = 2");
        let changes = manager.configure(&[b.clone(), a2]).unwrap();
        assert_eq!(changes.kept, ["b"]);
        assert_eq!(changes.built, ["a"]);
        assert!(changes.removed.is_empty(), "a was replaced, not removed");
        assert_eq!(chain(&list), ["b", "b-apply", "a"]);
        assert!(!Arc::ptr_eq(&a_module, &list.load()[2].module));
        assert_eq!(fake.builds.load(Ordering::SeqCst), 3);

        let changes = manager.configure(std::slice::from_ref(&b)).unwrap();
        assert_eq!(changes.removed, ["a"]);
        assert_eq!(*fake.removed.lock(), ["a"]);
    }

    /// A module that takes `limit` settings in place and refuses a negative one.
    struct Tunable {
        limit: Arc<Mutex<i64>>,
    }

    impl Module for Tunable {
        fn name(&self) -> &str {
            "tunable"
        }
        fn new_txn(&self, _info: &TxnInfo) -> Option<Box<dyn Txn>> {
            None
        }
        fn reconfigure(&self, settings: &toml::Table) -> Result<bool, String> {
            match settings.get("limit").and_then(toml::Value::as_integer) {
                Some(limit) if limit < 0 => Err("limit must not be negative".into()),
                Some(limit) => {
                    *self.limit.lock() = limit;
                    Ok(true)
                }
                None => Ok(false),
            }
        }
    }

    /// Builds [`Tunable`] for every entry.
    #[derive(Default)]
    struct TunableFactory {
        builds: AtomicUsize,
        /// The limit of the modules it builds (one cell for all: the tests build one).
        limit: Arc<Mutex<i64>>,
    }

    impl ModuleFactory for TunableFactory {
        fn check(&self, entry: &ModuleConfig) -> Result<(), String> {
            match entry.settings.get("fail") {
                Some(_) => Err("told to fail".into()),
                None => Ok(()),
            }
        }
        fn build(&self, _entry: &ModuleConfig) -> Result<Vec<Arc<dyn Module>>, String> {
            self.builds.fetch_add(1, Ordering::SeqCst);
            Ok(vec![Arc::new(Tunable { limit: Arc::clone(&self.limit) })])
        }
    }

    #[test]
    fn changed_settings_a_module_takes_in_place_keep_its_instance() {
        let factory = Arc::new(TunableFactory::default());
        let list = ModuleList::default();
        let manager = ModuleManager::new(list.clone(), factory.clone());
        manager.configure(&[entry("tunable", ModuleKind::Builtin, "limit = 1")]).unwrap();
        let running = Arc::clone(&list.load()[0].module);

        let changes = manager.configure(&[entry("tunable", ModuleKind::Builtin, "limit = 7")]).unwrap();
        assert_eq!((changes.reconfigured, changes.built), (vec!["tunable".to_owned()], vec![]));
        assert!(Arc::ptr_eq(&running, &list.load()[0].module), "the same instance");
        assert_eq!(manager.entry("tunable").unwrap().settings["limit"].as_integer(), Some(7));
        assert!(!manager.put(entry("tunable", ModuleKind::Builtin, "limit = 9"), None).unwrap());
        assert!(Arc::ptr_eq(&running, &list.load()[0].module));
        assert_eq!(factory.builds.load(Ordering::SeqCst), 1);

        // A later entry that is refused leaves the earlier one's settings as they were: the
        // running module is not reconfigured before the whole list is known to be good.
        let err = manager
            .configure(&[
                entry("tunable", ModuleKind::Builtin, "limit = 3"),
                entry("bad", ModuleKind::Builtin, "fail = 1"),
            ])
            .unwrap_err();
        assert!(err.to_string().contains("told to fail"), "{err}");
        assert_eq!(manager.entry("tunable").unwrap().settings["limit"].as_integer(), Some(9));
        assert_eq!(*factory.limit.lock(), 9, "the module itself kept its settings");

        // Refused settings change nothing; settings it cannot take in place rebuild it.
        let err = manager.configure(&[entry("tunable", ModuleKind::Builtin, "limit = -1")]).unwrap_err();
        assert!(err.to_string().contains("limit must not be negative"), "{err}");
        assert_eq!(manager.entry("tunable").unwrap().settings["limit"].as_integer(), Some(9));
        let changes = manager.configure(&[entry("tunable", ModuleKind::Builtin, "other = true")]).unwrap();
        assert_eq!(changes.built, ["tunable"]);
        assert!(!Arc::ptr_eq(&running, &list.load()[0].module), "rebuilt");
        assert_eq!(factory.builds.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_failed_change_leaves_the_list_as_it_was() {
        let list = ModuleList::default();
        let manager = ModuleManager::new(list.clone(), Arc::new(Fake::default()));
        manager.configure(&[entry("a", ModuleKind::Builtin, "")]).unwrap();
        let err = manager.configure(&[entry("b", ModuleKind::Wasm, "fail = true")]).unwrap_err();
        assert!(err.to_string().contains("[[module]] b (wasm): told to fail"), "{err}");
        manager.put(entry("x", ModuleKind::Extproc, ""), None).unwrap();
        let err = manager.put(entry("x-apply", ModuleKind::Builtin, ""), None).unwrap_err();
        assert!(err.to_string().contains("a module named x-apply is already in the chain"), "{err}");
        assert_eq!(manager.delete("nope"), Err(ModuleError::NotFound("nope".into())));
        assert!(matches!(manager.put(entry("a/b", ModuleKind::Builtin, ""), None), Err(ModuleError::Invalid(_))));
        manager.delete("x").unwrap();
        assert_eq!(chain(&list), ["a"]);
    }

    #[test]
    fn put_places_new_entries_and_keeps_the_place_of_reloaded_ones() {
        let list = ModuleList::default();
        let fake = Arc::new(Fake::default());
        let manager = ModuleManager::new(list.clone(), fake.clone());
        assert!(manager.put(entry("a", ModuleKind::Builtin, ""), None).unwrap());
        assert!(manager.put(entry("b", ModuleKind::Builtin, ""), Some(0)).unwrap());
        assert!(manager.put(entry("c", ModuleKind::Builtin, ""), None).unwrap());
        assert_eq!(chain(&list), ["b", "a", "c"]);
        assert!(!manager.put(entry("a", ModuleKind::Builtin, ""), None).unwrap(), "a reload");
        assert_eq!(chain(&list), ["b", "a", "c"]);
        assert_eq!(fake.builds.load(Ordering::SeqCst), 4, "a reload always rebuilds");
        manager.put(entry("a", ModuleKind::Builtin, ""), Some(9)).unwrap();
        assert_eq!(chain(&list), ["b", "c", "a"]);
        let statuses = manager.statuses();
        assert_eq!(statuses[2].order, 2);
        assert_eq!(statuses[2].kind, "builtin");
        assert_eq!(statuses[2].state, "loaded");
        assert!(fake.removed.lock().is_empty());
    }
}
