//! The operators behind the `DataStream` methods. Each one is an [`Output`] of its input type
//! that pushes into the next operator's `Output`, so a chain of operators is a chain of direct
//! calls inside one thread.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use super::context::TaskError;
use super::sinks::SinkFunction;

/// Where an operator sends its results: the next operator of the chain, several of them, or a
/// network writer.
pub(crate) trait Output<T> {
    /// Takes one record.
    fn push(&mut self, record: T) -> Result<(), TaskError>;
    /// The input has ended: emit what is held back, then pass the end on.
    fn finish(&mut self) -> Result<(), TaskError>;
}

/// A boxed output of records of type `T`.
pub(crate) type BoxOutput<T> = Box<dyn Output<T>>;

pub(crate) struct Map<F, O> {
    pub(crate) f: Arc<F>,
    pub(crate) next: BoxOutput<O>,
}

impl<I, O, F: Fn(I) -> O> Output<I> for Map<F, O> {
    fn push(&mut self, record: I) -> Result<(), TaskError> {
        self.next.push((self.f)(record))
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.next.finish()
    }
}

pub(crate) struct Filter<F, T> {
    pub(crate) f: Arc<F>,
    pub(crate) next: BoxOutput<T>,
}

impl<T, F: Fn(&T) -> bool> Output<T> for Filter<F, T> {
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        if (self.f)(&record) {
            self.next.push(record)
        } else {
            Ok(())
        }
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.next.finish()
    }
}

pub(crate) struct FlatMap<F, O> {
    pub(crate) f: Arc<F>,
    pub(crate) next: BoxOutput<O>,
}

impl<I, O, It: IntoIterator<Item = O>, F: Fn(I) -> It> Output<I> for FlatMap<F, O> {
    fn push(&mut self, record: I) -> Result<(), TaskError> {
        for out in (self.f)(record) {
            self.next.push(out)?;
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.next.finish()
    }
}

/// A keyed reduce over in-memory keyed state. In streaming mode every input emits the key's new
/// aggregate; in batch mode only the final aggregates are emitted, at the end of the input.
pub(crate) struct KeyedReduce<T, K, KF: ?Sized, RF: ?Sized> {
    pub(crate) key: Arc<KF>,
    pub(crate) reduce: Arc<RF>,
    pub(crate) state: HashMap<K, T>,
    pub(crate) batch: bool,
    pub(crate) next: BoxOutput<T>,
}

impl<T: Clone, K: Hash + Eq, KF: Fn(&T) -> K + ?Sized, RF: Fn(T, T) -> T + ?Sized> Output<T>
    for KeyedReduce<T, K, KF, RF>
{
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        let key = (self.key)(&record);
        let value = match self.state.remove(&key) {
            Some(acc) => (self.reduce)(acc, record),
            None => record,
        };
        if self.batch {
            self.state.insert(key, value);
            Ok(())
        } else {
            self.state.insert(key, value.clone());
            self.next.push(value)
        }
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        if self.batch {
            for (_, value) in self.state.drain() {
                self.next.push(value)?;
            }
        }
        self.next.finish()
    }
}

/// Hands records to a user sink; the end of the chain.
pub(crate) struct Sink<S> {
    pub(crate) sink: S,
}

impl<T, S: SinkFunction<T>> Output<T> for Sink<S> {
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        self.sink.invoke(record)
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        self.sink.finish()
    }
}

/// Copies each record to several outputs (an operator with more than one consumer).
pub(crate) struct Fanout<T> {
    pub(crate) outputs: Vec<BoxOutput<T>>,
}

impl<T: Clone> Output<T> for Fanout<T> {
    fn push(&mut self, record: T) -> Result<(), TaskError> {
        if let Some((last, rest)) = self.outputs.split_last_mut() {
            for out in rest {
                out.push(record.clone())?;
            }
            last.push(record)?;
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        for out in &mut self.outputs {
            out.finish()?;
        }
        Ok(())
    }
}

/// Drops everything: the output of a sink.
pub(crate) struct Discard;

impl<T> Output<T> for Discard {
    fn push(&mut self, _record: T) -> Result<(), TaskError> {
        Ok(())
    }
    fn finish(&mut self) -> Result<(), TaskError> {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Collects what reaches it, for operator tests.
    pub(crate) struct Collect<T>(pub(crate) Rc<RefCell<Vec<T>>>, pub(crate) Rc<RefCell<bool>>);

    impl<T> Output<T> for Collect<T> {
        fn push(&mut self, record: T) -> Result<(), TaskError> {
            self.0.borrow_mut().push(record);
            Ok(())
        }
        fn finish(&mut self) -> Result<(), TaskError> {
            *self.1.borrow_mut() = true;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Collect;
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[test]
    fn keyed_reduce_streams_running_values_or_final_ones_in_batch() {
        for batch in [false, true] {
            let got = Rc::new(RefCell::new(Vec::new()));
            let done = Rc::new(RefCell::new(false));
            let mut op = KeyedReduce {
                key: Arc::new(|t: &(char, u64)| t.0),
                reduce: Arc::new(|a: (char, u64), b: (char, u64)| (a.0, a.1 + b.1)),
                state: HashMap::new(),
                batch,
                next: Box::new(Collect(got.clone(), done.clone())),
            };
            for r in [('a', 1), ('b', 1), ('a', 2)] {
                op.push(r).unwrap();
            }
            op.finish().unwrap();
            let mut out = got.borrow().clone();
            out.sort();
            if batch {
                assert_eq!(out, vec![('a', 3), ('b', 1)]);
            } else {
                assert_eq!(out, vec![('a', 1), ('a', 3), ('b', 1)]);
            }
            assert!(*done.borrow());
        }
    }

    #[test]
    fn chain_of_map_filter_flat_map() {
        let got = Rc::new(RefCell::new(Vec::new()));
        let done = Rc::new(RefCell::new(false));
        let sink: BoxOutput<u32> = Box::new(Collect(got.clone(), done));
        let filter: BoxOutput<u32> = Box::new(Filter {
            f: Arc::new(|x: &u32| x.is_multiple_of(2)),
            next: sink,
        });
        let flat: BoxOutput<u32> = Box::new(FlatMap {
            f: Arc::new(|x: u32| vec![x, x + 1]),
            next: filter,
        });
        let mut map: BoxOutput<u32> = Box::new(Map {
            f: Arc::new(|x: u32| x * 10),
            next: flat,
        });
        for x in 0..3 {
            map.push(x).unwrap();
        }
        assert_eq!(*got.borrow(), vec![0, 10, 20]);
    }
}
