//! The typed state handles keyed operators use: value, list, map, reducing and aggregating
//! state. Each acts on the store's current key.

use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;

use super::archives::decode;
use super::backend::Backend;
use super::rocks::RocksBackend;
use super::{KeyedStateStore, StateError, StateId, StorageKind};
use crate::record::Data;

/// What every state handle holds: the store and the registered state.
#[derive(Clone)]
struct Cell {
    store: KeyedStateStore,
    id: StateId,
}

impl Cell {
    fn new(store: &KeyedStateStore, name: &str, kind: StorageKind) -> Result<Self, StateError> {
        Ok(Cell {
            store: store.clone(),
            id: store.register(name, kind)?,
        })
    }

    fn get<T: Data>(&self) -> Result<Option<T>, StateError> {
        self.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => h.value_get(kg, &self.id, key),
            Backend::Rocks(r) => self.rocks_get(r, kg, key.bytes()),
        })
    }

    fn put<T: Data>(&self, value: T) -> Result<(), StateError> {
        self.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => h.value_put(kg, &self.id, key, value),
            Backend::Rocks(r) => self.rocks_put(r, kg, key.bytes(), &value),
        })
    }

    /// Replaces the value by `f(value)` and returns a copy of the new one.
    fn update<T: Data>(&self, f: impl FnOnce(Option<T>) -> T) -> Result<T, StateError> {
        self.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => h.value_update(kg, &self.id, key, f),
            Backend::Rocks(r) => {
                let new = f(self.rocks_get(r, kg, key.bytes())?);
                self.rocks_put(r, kg, key.bytes(), &new)?;
                Ok(new)
            }
        })
    }

    fn rocks_get<T: Data>(
        &self,
        r: &mut RocksBackend,
        kg: u32,
        key: &[u8],
    ) -> Result<Option<T>, StateError> {
        r.value_get(kg, &self.id, key, |v| {
            v.map(|v| decode(v, &self.id.name)).transpose()
        })?
    }

    fn rocks_put<T: Data>(
        &self,
        r: &mut RocksBackend,
        kg: u32,
        key: &[u8],
        value: &T,
    ) -> Result<(), StateError> {
        let inner = &self.store.inner;
        let mut scratch = inner.scratch.borrow_mut();
        inner.encode_into(value, &mut scratch, &self.id.name)?;
        r.value_put(kg, &self.id, key, &scratch)
    }

    fn clear(&self) -> Result<(), StateError> {
        self.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.value_delete(kg, &self.id, key);
                Ok(())
            }
            Backend::Rocks(r) => r.value_delete(kg, &self.id, key.bytes()),
        })
    }
}

/// One value per key.
#[derive(Clone)]
pub struct ValueState<T> {
    cell: Cell,
    _t: PhantomData<fn() -> T>,
}

impl<T: Data> ValueState<T> {
    /// The current key's value, if any.
    pub fn value(&self) -> Result<Option<T>, StateError> {
        self.cell.get()
    }

    /// Sets the current key's value.
    pub fn update(&self, value: T) -> Result<(), StateError> {
        self.cell.put(value)
    }

    /// Sets the current key's value to `f` of its current one and returns the new value: what
    /// `value` and then `update` do, with one look-up of the key instead of two on the hashmap
    /// backend.
    pub fn update_with(&self, f: impl FnOnce(Option<T>) -> T) -> Result<T, StateError> {
        self.cell.update(f)
    }

    /// Removes the current key's value.
    pub fn clear(&self) -> Result<(), StateError> {
        self.cell.clear()
    }

    /// [`update_with`](Self::update_with) for a batch of items in a row: for each, makes its
    /// key (`key` of it) the current key, replaces that key's value by `f(item, value)` and
    /// hands the new value to `out`. The store is borrowed once for the batch, not twice per
    /// item. The last item's key stays current.
    pub fn update_each<I, K: Hash + Data>(
        &self,
        items: impl Iterator<Item = I>,
        key: impl Fn(&I) -> K,
        mut f: impl FnMut(I, Option<T>) -> T,
        mut out: impl FnMut(T),
    ) -> Result<(), StateError> {
        let cell = &self.cell;
        cell.store
            .with_each_key(items, key, |backend, kg, k, item| {
                let new = match backend {
                    Backend::Heap(h) => h.value_update(kg, &cell.id, k, |v| f(item, v))?,
                    Backend::Rocks(r) => {
                        let new = f(item, cell.rocks_get(r, kg, k.bytes())?);
                        cell.rocks_put(r, kg, k.bytes(), &new)?;
                        new
                    }
                };
                out(new);
                Ok(())
            })
    }
}

/// A list of values per key. Stored as one archive of the whole list: `add` rewrites it, which
/// suits the short lists (window contents, pending events) keyed operators keep.
#[derive(Clone)]
pub struct ListState<T> {
    cell: Cell,
    _t: PhantomData<fn() -> T>,
}

impl<T: Data> ListState<T> {
    /// The current key's list (empty if none).
    pub fn get(&self) -> Result<Vec<T>, StateError> {
        Ok(self.cell.get::<Vec<T>>()?.unwrap_or_default())
    }

    /// Appends a value to the current key's list.
    pub fn add(&self, value: T) -> Result<(), StateError> {
        let mut list = self.get()?;
        list.push(value);
        self.cell.put(list)
    }

    /// Replaces the current key's list; an empty list clears it.
    pub fn update(&self, values: Vec<T>) -> Result<(), StateError> {
        if values.is_empty() {
            self.cell.clear()
        } else {
            self.cell.put(values)
        }
    }

    /// Removes the current key's list.
    pub fn clear(&self) -> Result<(), StateError> {
        self.cell.clear()
    }
}

/// A map per key: each entry is stored on its own, so a large map is not rewritten on `put`.
#[derive(Clone)]
pub struct MapState<UK, UV> {
    cell: Cell,
    _t: PhantomData<fn() -> (UK, UV)>,
}

impl<UK: Data, UV: Data> MapState<UK, UV> {
    /// The value under `user_key` for the current key.
    pub fn get(&self, user_key: &UK) -> Result<Option<UV>, StateError> {
        let uk = self.cell.store.inner.encode(user_key, &self.cell.id.name)?;
        let id = &self.cell.id;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => h
                .map_get(kg, id, key.bytes(), &uk)
                .map(|v| decode(v, &id.name))
                .transpose(),
            Backend::Rocks(r) => r.map_get(kg, id, key.bytes(), &uk, |v| {
                v.map(|v| decode(v, &id.name)).transpose()
            })?,
        })
    }

    /// Sets the value under `user_key` for the current key.
    pub fn put(&self, user_key: UK, value: UV) -> Result<(), StateError> {
        let id = &self.cell.id;
        let uk = self.cell.store.inner.encode(&user_key, &id.name)?;
        let v = self.cell.store.inner.encode(&value, &id.name)?;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.map_put(kg, id, key.bytes(), &uk, &v);
                Ok(())
            }
            Backend::Rocks(r) => r.map_put(kg, id, key.bytes(), &uk, &v),
        })
    }

    /// Removes `user_key` from the current key's map.
    pub fn remove(&self, user_key: &UK) -> Result<(), StateError> {
        let id = &self.cell.id;
        let uk = self.cell.store.inner.encode(user_key, &id.name)?;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.map_remove(kg, id, key.bytes(), &uk);
                Ok(())
            }
            Backend::Rocks(r) => r.map_remove(kg, id, key.bytes(), &uk),
        })
    }

    /// Whether the current key's map has `user_key`.
    pub fn contains(&self, user_key: &UK) -> Result<bool, StateError> {
        let id = &self.cell.id;
        let uk = self.cell.store.inner.encode(user_key, &id.name)?;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => Ok(h.map_get(kg, id, key.bytes(), &uk).is_some()),
            Backend::Rocks(r) => r.map_get(kg, id, key.bytes(), &uk, |v| v.is_some()),
        })
    }

    /// All entries of the current key's map, in no particular order.
    pub fn entries(&self) -> Result<Vec<(UK, UV)>, StateError> {
        let id = &self.cell.id;
        let mut out = Vec::new();
        self.cell.store.with_key(|b, kg, key| {
            let mut f = |uk: &[u8], v: &[u8]| -> Result<(), StateError> {
                out.push((decode(uk, &id.name)?, decode(v, &id.name)?));
                Ok(())
            };
            match b {
                Backend::Heap(h) => h.map_for_each(kg, id, key.bytes(), &mut f),
                Backend::Rocks(r) => r.map_for_each(kg, id, key.bytes(), &mut f),
            }
        })?;
        Ok(out)
    }

    /// Whether the current key's map has no entry.
    pub fn is_empty(&self) -> Result<bool, StateError> {
        let id = &self.cell.id;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => Ok(h.map_is_empty(kg, id, key.bytes())),
            Backend::Rocks(r) => r.map_is_empty(kg, id, key.bytes()),
        })
    }

    /// Removes the current key's map.
    pub fn clear(&self) -> Result<(), StateError> {
        let id = &self.cell.id;
        self.cell.store.with_key(|b, kg, key| match b {
            Backend::Heap(h) => {
                h.map_clear(kg, id, key.bytes());
                Ok(())
            }
            Backend::Rocks(r) => r.map_clear(kg, id, key.bytes()),
        })
    }
}

/// A value per key that `add` folds new values into.
#[derive(Clone)]
pub struct ReducingState<T> {
    cell: Cell,
    reduce: Rc<dyn Fn(T, T) -> T>,
}

impl<T: Data> ReducingState<T> {
    /// The current key's folded value, if any value was added.
    pub fn get(&self) -> Result<Option<T>, StateError> {
        self.cell.get()
    }

    /// Folds `value` into the current key's value.
    pub fn add(&self, value: T) -> Result<(), StateError> {
        self.cell.update(|acc: Option<T>| match acc {
            Some(acc) => (self.reduce)(acc, value),
            None => value,
        })?;
        Ok(())
    }

    /// Removes the current key's value.
    pub fn clear(&self) -> Result<(), StateError> {
        self.cell.clear()
    }
}

/// An aggregation with an accumulator (Flink's `AggregateFunction`): inputs `IN` are added to
/// an accumulator `ACC` (the stored state), from which the result `OUT` is computed.
pub trait AggregateFunction<IN, ACC, OUT>: 'static {
    /// A new, empty accumulator.
    fn create_accumulator(&self) -> ACC;
    /// Adds one input to the accumulator.
    fn add(&self, value: IN, accumulator: ACC) -> ACC;
    /// The result of an accumulator.
    fn get_result(&self, accumulator: ACC) -> OUT;
    /// Two accumulators as one (`a` holds the earlier inputs): how windows combine the
    /// accumulators of their slices and sessions merge.
    fn merge(&self, a: ACC, b: ACC) -> ACC;
}

/// A value per key that inputs are aggregated into through an [`AggregateFunction`].
pub struct AggregatingState<IN, ACC, OUT, F> {
    cell: Cell,
    function: Rc<F>,
    _t: PhantomData<fn(IN) -> (ACC, OUT)>,
}

impl<IN, ACC, OUT, F> Clone for AggregatingState<IN, ACC, OUT, F> {
    fn clone(&self) -> Self {
        AggregatingState {
            cell: self.cell.clone(),
            function: self.function.clone(),
            _t: PhantomData,
        }
    }
}

impl<IN, ACC: Data, OUT, F: AggregateFunction<IN, ACC, OUT>> AggregatingState<IN, ACC, OUT, F> {
    /// The result for the current key, if any input was added.
    pub fn get(&self) -> Result<Option<OUT>, StateError> {
        Ok(self
            .cell
            .get::<ACC>()?
            .map(|acc| self.function.get_result(acc)))
    }

    /// Adds `value` to the current key's accumulator.
    pub fn add(&self, value: IN) -> Result<(), StateError> {
        self.cell.update(|acc: Option<ACC>| {
            let acc = acc.unwrap_or_else(|| self.function.create_accumulator());
            self.function.add(value, acc)
        })?;
        Ok(())
    }

    /// Removes the current key's accumulator.
    pub fn clear(&self) -> Result<(), StateError> {
        self.cell.clear()
    }
}

/// The typed handles of a store.
impl KeyedStateStore {
    /// The value state `name` (the same state every time the name is used).
    pub fn value_state<T: Data>(&self, name: &str) -> Result<ValueState<T>, StateError> {
        Ok(ValueState {
            cell: Cell::new(self, name, StorageKind::Value)?,
            _t: PhantomData,
        })
    }

    /// The list state `name`.
    pub fn list_state<T: Data>(&self, name: &str) -> Result<ListState<T>, StateError> {
        Ok(ListState {
            cell: Cell::new(self, name, StorageKind::Value)?,
            _t: PhantomData,
        })
    }

    /// The map state `name`.
    pub fn map_state<UK: Data, UV: Data>(
        &self,
        name: &str,
    ) -> Result<MapState<UK, UV>, StateError> {
        Ok(MapState {
            cell: Cell::new(self, name, StorageKind::Map)?,
            _t: PhantomData,
        })
    }

    /// The reducing state `name`: `add` folds values with `reduce`.
    pub fn reducing_state<T: Data>(
        &self,
        name: &str,
        reduce: impl Fn(T, T) -> T + 'static,
    ) -> Result<ReducingState<T>, StateError> {
        Ok(ReducingState {
            cell: Cell::new(self, name, StorageKind::Value)?,
            reduce: Rc::new(reduce),
        })
    }

    /// The aggregating state `name`: `add` folds inputs into an accumulator with `function`.
    pub fn aggregating_state<IN, ACC: Data, OUT, F>(
        &self,
        name: &str,
        function: F,
    ) -> Result<AggregatingState<IN, ACC, OUT, F>, StateError>
    where
        F: AggregateFunction<IN, ACC, OUT>,
    {
        Ok(AggregatingState {
            cell: Cell::new(self, name, StorageKind::Value)?,
            function: Rc::new(function),
            _t: PhantomData,
        })
    }
}
