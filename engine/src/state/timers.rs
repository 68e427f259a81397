//! The timers of a keyed operator: at most one per key, time domain and timestamp. Each key's
//! timers are keyed state (a map state per domain), so they are part of checkpoints and
//! savepoints in either backend and move with their key group when the parallelism changes;
//! an in-memory queue ordered by time, rebuilt from that state when the operator opens, finds
//! the ones that are due.

use std::collections::BTreeSet;

use super::archives::decode;
use super::error::StateError;
use super::handles::MapState;
use super::store::KeyedStateStore;

/// Which clock a timer follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeDomain {
    /// Fires when the watermark reaches its timestamp.
    EventTime,
    /// Fires when the wall clock reaches its timestamp.
    ProcessingTime,
}

const EVENT_TIMERS: &str = "_timers-event";
const PROCESSING_TIMERS: &str = "_timers-processing";

/// The timers of one domain.
struct Queue {
    /// Each key's timers (timestamp → `true`).
    state: MapState<i64, bool>,
    /// Every timer of this subtask: (timestamp, key group, key archive), earliest first.
    due: BTreeSet<(i64, u32, Vec<u8>)>,
}

/// The event-time and processing-time timers of one keyed operator of one subtask.
pub struct Timers {
    store: KeyedStateStore,
    event: Queue,
    processing: Queue,
}

impl Timers {
    /// Opens the timers of the operator whose keyed state is `store`, with those it was
    /// restored with.
    pub fn open(store: &KeyedStateStore) -> Result<Timers, StateError> {
        let mut event = Queue {
            state: store.map_state(EVENT_TIMERS)?,
            due: BTreeSet::new(),
        };
        let mut processing = Queue {
            state: store.map_state(PROCESSING_TIMERS)?,
            due: BTreeSet::new(),
        };
        for entry in store.entries()? {
            let queue = match entry.state.as_str() {
                EVENT_TIMERS => &mut event,
                PROCESSING_TIMERS => &mut processing,
                _ => continue,
            };
            let Some(user_key) = &entry.user_key else {
                continue;
            };
            let timestamp: i64 = decode(user_key, &entry.state)?;
            queue.due.insert((timestamp, entry.key_group, entry.key));
        }
        Ok(Timers {
            store: store.clone(),
            event,
            processing,
        })
    }

    fn queue(&mut self, domain: TimeDomain) -> &mut Queue {
        match domain {
            TimeDomain::EventTime => &mut self.event,
            TimeDomain::ProcessingTime => &mut self.processing,
        }
    }

    fn current(&self) -> Result<(u32, Vec<u8>), StateError> {
        self.store
            .current_key_archive()
            .ok_or_else(|| StateError::Config("timers need a current key".into()))
    }

    /// Sets a timer at `timestamp` for the current key (again: no second timer).
    pub fn register(&mut self, domain: TimeDomain, timestamp: i64) -> Result<(), StateError> {
        let (key_group, key) = self.current()?;
        let queue = self.queue(domain);
        if queue.due.insert((timestamp, key_group, key)) {
            queue.state.put(timestamp, true)?;
        }
        Ok(())
    }

    /// Removes the current key's timer at `timestamp`, if it has one.
    pub fn delete(&mut self, domain: TimeDomain, timestamp: i64) -> Result<(), StateError> {
        let (key_group, key) = self.current()?;
        let queue = self.queue(domain);
        if queue.due.remove(&(timestamp, key_group, key)) {
            queue.state.remove(&timestamp)?;
        }
        Ok(())
    }

    /// The earliest timer of `domain`, if any.
    pub fn next(&self, domain: TimeDomain) -> Option<i64> {
        let queue = match domain {
            TimeDomain::EventTime => &self.event,
            TimeDomain::ProcessingTime => &self.processing,
        };
        queue.due.first().map(|t| t.0)
    }

    /// Takes the earliest timer of `domain` at or before `time`: makes its key the current
    /// key, removes it and returns its timestamp. `None` when no timer is due.
    pub fn pop(&mut self, domain: TimeDomain, time: i64) -> Result<Option<i64>, StateError> {
        let store = self.store.clone();
        let queue = self.queue(domain);
        match queue.due.first() {
            Some(first) if first.0 <= time => {}
            _ => return Ok(None),
        }
        let Some((timestamp, key_group, key)) = queue.due.pop_first() else {
            return Ok(None);
        };
        store.set_current_key_bytes(key_group, &key)?;
        queue.state.remove(&timestamp)?;
        Ok(Some(timestamp))
    }

    /// How many timers of `domain` are set.
    pub fn len(&self, domain: TimeDomain) -> usize {
        match domain {
            TimeDomain::EventTime => self.event.due.len(),
            TimeDomain::ProcessingTime => self.processing.due.len(),
        }
    }

    /// Whether no timer is set.
    pub fn is_empty(&self) -> bool {
        self.event.due.is_empty() && self.processing.due.is_empty()
    }
}
