//! Change notification: an inotify watcher (the `notify` crate) on a served directory drops
//! the cached responses of a file from the store as soon as the file is modified, created,
//! renamed, deleted or has its metadata changed, so the next request reads it anew.
//!
//! Cached responses are found by key: a file's cache key is that of its `file://` URI
//! (`file_path::key`), whatever route or host it was requested through. Events about a
//! directory (created, removed, renamed) also drop every key below it, and so does a lost
//! event queue (inotify overflow: everything under the root). Symbolic links are not
//! followed into other trees; a change seen only through a link is caught by validation
//! when the cached response expires.
//!
//! The watcher runs on a thread of its own and stops when it is dropped.

use super::file_path;
use super::inflight::Inflight;
use crate::tiers::Tiers;
use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::path::Path;
use std::sync::Arc;

/// Starts watching `root` (canonical) and everything below it. A change marks the reads
/// in flight (`inflight`) before it removes keys from `store`, so that a read either is
/// marked or has stored its object before the removal.
pub fn start(root: &Path, store: Arc<Tiers>, inflight: Arc<Inflight>) -> notify::Result<RecommendedWatcher> {
    let root_key = file_path::key(root);
    let handler = move |event: notify::Result<Event>| match event {
        Ok(event) => invalidate(&store, &inflight, &root_key, &event),
        Err(e) => {
            tracing::warn!("file watcher for {root_key}: {e}; dropping every cached file below it");
            inflight.changed(&root_key, true);
            store.remove_prefix(&format!("{root_key}/"));
        }
    };
    let mut watcher = RecommendedWatcher::new(handler, notify::Config::default().with_follow_symlinks(false))?;
    watcher.watch(root, RecursiveMode::Recursive)?;
    Ok(watcher)
}

/// Drops what `event` makes out of date.
fn invalidate(store: &Tiers, inflight: &Inflight, root_key: &str, event: &Event) {
    if event.need_rescan() {
        inflight.changed(root_key, true);
        let removed = store.remove_prefix(&format!("{root_key}/"));
        tracing::debug!("file watcher: events lost; dropped {removed} object(s) below {root_key}");
        return;
    }
    let tree = match event.kind {
        // Reads (including our own), except the end of a write.
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => false,
        EventKind::Access(_) => return,
        EventKind::Create(CreateKind::Folder) | EventKind::Remove(RemoveKind::Folder) => true,
        // A rename may move a whole directory; a generic event may be about one.
        EventKind::Modify(ModifyKind::Name(_)) | EventKind::Any | EventKind::Other => true,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => false,
    };
    for path in &event.paths {
        let key = file_path::key(path);
        inflight.changed(&key, tree);
        let mut removed = store.remove(&key);
        if tree {
            removed += store.remove_prefix(&format!("{key}/"));
        }
        tracing::debug!("file watcher: {:?} {}: dropped {removed} object(s)", event.kind, path.display());
    }
}
