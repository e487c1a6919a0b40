//! Dense ids for object keys.

use std::collections::HashMap;

use sluice_policy::ObjectId;

use super::{Key, Trace};

/// Maps each distinct key to the next dense id and tracks each object's largest size.
#[derive(Default)]
pub(crate) struct Interner {
    text: HashMap<Box<str>, ObjectId>,
    ids: HashMap<u64, ObjectId>,
    max_size: Vec<u64>,
}

impl Interner {
    /// The dense id of `key` (assigned on first sight); records `size`.
    pub(crate) fn id(&mut self, key: Key<'_>, size: u64) -> ObjectId {
        let next = self.max_size.len() as ObjectId;
        let id = match key {
            Key::Text(t) => match self.text.get(t) {
                Some(&id) => id,
                None => {
                    self.text.insert(t.into(), next);
                    next
                }
            },
            Key::Id(k) => *self.ids.entry(k).or_insert(next),
        };
        if id == next {
            self.max_size.push(size);
        } else {
            let m = &mut self.max_size[id as usize];
            *m = (*m).max(size);
        }
        id
    }

    /// Stores the object count and footprint in `trace`.
    pub(crate) fn finish(self, trace: &mut Trace) {
        trace.objects = self.max_size.len() as u64;
        trace.object_bytes = self.max_size.iter().sum();
    }
}
