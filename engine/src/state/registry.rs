//! The states registered in a store: names to ids.

use std::collections::HashMap;
use std::rc::Rc;

use super::{StateError, StorageKind};

/// Identifies a registered state inside the backends.
#[derive(Clone, Debug)]
pub(crate) struct StateId {
    pub id: u32,
    pub name: Rc<str>,
}

/// Names to ids, so that the per-record path indexes vectors rather than hashing names.
#[derive(Default)]
pub(crate) struct Registry {
    states: Vec<(Rc<str>, StorageKind)>,
    ids: HashMap<Rc<str>, u32>,
}

impl Registry {
    pub(crate) fn register(
        &mut self,
        name: &str,
        kind: StorageKind,
    ) -> Result<StateId, StateError> {
        if let Some(&id) = self.ids.get(name) {
            let (name, existing) = &self.states[id as usize];
            if *existing != kind {
                return Err(StateError::KindMismatch {
                    name: name.to_string(),
                    existing: existing.name(),
                    requested: kind.name(),
                });
            }
            return Ok(StateId {
                id,
                name: name.clone(),
            });
        }
        let id = self.states.len() as u32;
        let name: Rc<str> = Rc::from(name);
        self.states.push((name.clone(), kind));
        self.ids.insert(name.clone(), id);
        Ok(StateId { id, name })
    }

    pub(crate) fn states(&self) -> &[(Rc<str>, StorageKind)] {
        &self.states
    }
}
