//! Side outputs (Flink's `OutputTag` and `ctx.output(tag, value)`): a process function emits
//! records of other types, or of the same type for another purpose, beside its main output;
//! each tag read with `get_side_output` becomes a stream of its own.
//!
//! A node of the stream graph has its main output and one output per tag that some stream
//! reads; each goes to its own consumers (chained or across the network, with their own
//! partitioning). What a function emits to a tag is gathered in that tag's buffer and handed on
//! as one batch when the operator hands on its main batch, so side records keep their order
//! with the watermarks and barriers that follow them. A tag nobody reads has no buffer: what is
//! emitted to it is dropped, as in Flink.

use std::any::{Any, TypeId};
use std::marker::PhantomData;

use crate::common::error::TaskError;

/// Names a side output and the type of its records (Flink's `OutputTag`). Two tags are the
/// same output when their names and types are equal.
pub struct OutputTag<T> {
    id: String,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for OutputTag<T> {
    fn clone(&self) -> Self {
        OutputTag {
            id: self.id.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for OutputTag<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OutputTag({}: {})", self.id, std::any::type_name::<T>())
    }
}

impl<T: 'static> OutputTag<T> {
    /// A tag named `id` for records of type `T`.
    pub fn new(id: impl Into<String>) -> Self {
        OutputTag {
            id: id.into(),
            _t: PhantomData,
        }
    }

    /// The tag's name.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// Pushes a batch of side-output records to their consumers, leaving it empty.
pub(crate) type PushBatch<Y> = Box<dyn FnMut(&mut Vec<Y>) -> Result<(), TaskError>>;

/// A side output's records gathered during a batch, of the type they travel as (`X` or, on a
/// stream with timestamps, `(timestamp, X)`), and how they are handed on.
pub(crate) struct SideBuffer<Y> {
    pub(crate) records: Vec<Y>,
    pub(crate) push: PushBatch<Y>,
}

/// A [`SideBuffer`] with its record type erased.
pub(crate) trait AnySideBuffer {
    /// Hands the gathered records on.
    fn flush(&mut self) -> Result<(), TaskError>;
    fn as_any(&mut self) -> &mut dyn Any;
}

impl<Y: 'static> AnySideBuffer for SideBuffer<Y> {
    fn flush(&mut self) -> Result<(), TaskError> {
        if self.records.is_empty() {
            return Ok(());
        }
        (self.push)(&mut self.records)
    }
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

/// One side output of an operator, as the function emits to it.
pub(crate) struct Side {
    pub(crate) tag: String,
    /// The type `X` of the tag's records.
    pub(crate) record_type: TypeId,
    /// Records travel as `(timestamp, X)`.
    pub(crate) stamped: bool,
    pub(crate) buffer: Box<dyn AnySideBuffer>,
}

/// The side outputs of one operator instance that some stream reads (none for most).
#[derive(Default)]
pub(crate) struct SideOutputs {
    sides: Vec<Side>,
}

impl SideOutputs {
    pub(crate) fn new(sides: Vec<Side>) -> Self {
        SideOutputs { sides }
    }

    /// Emits `value` to `tag`'s output; `timestamp` is the record's on a stream with
    /// timestamps. Dropped if no stream reads the tag.
    pub(crate) fn emit<X: 'static>(
        &mut self,
        tag: &OutputTag<X>,
        timestamp: Option<i64>,
        value: X,
    ) -> Result<(), TaskError> {
        let want = TypeId::of::<X>();
        let Some(side) = self
            .sides
            .iter_mut()
            .find(|s| s.record_type == want && s.tag == tag.id)
        else {
            return Ok(());
        };
        let pushed = if side.stamped {
            side.buffer
                .as_any()
                .downcast_mut::<SideBuffer<(i64, X)>>()
                .map(|b| b.records.push((timestamp.unwrap_or(i64::MIN), value)))
        } else {
            side.buffer
                .as_any()
                .downcast_mut::<SideBuffer<X>>()
                .map(|b| b.records.push(value))
        };
        pushed.ok_or_else(|| {
            TaskError::Setup(format!(
                "side output '{}' was built for another record type than {}",
                tag.id,
                std::any::type_name::<X>()
            ))
        })
    }

    /// Hands every side output's gathered records on (called where the operator hands on its
    /// main batch, so side records precede the events that follow them).
    #[inline]
    pub(crate) fn flush(&mut self) -> Result<(), TaskError> {
        for side in &mut self.sides {
            side.buffer.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn side<Y: 'static>(tag: &str, x: TypeId, stamped: bool, got: Rc<RefCell<Vec<Y>>>) -> Side {
        Side {
            tag: tag.into(),
            record_type: x,
            stamped,
            buffer: Box::new(SideBuffer::<Y> {
                records: Vec::new(),
                push: Box::new(move |batch| {
                    got.borrow_mut().append(batch);
                    Ok(())
                }),
            }),
        }
    }

    #[test]
    fn records_reach_the_tag_of_their_name_and_type_when_flushed_and_others_are_dropped() {
        let words = Rc::new(RefCell::new(Vec::<String>::new()));
        let stamped = Rc::new(RefCell::new(Vec::<(i64, u32)>::new()));
        let mut sides = SideOutputs::new(vec![
            side("words", TypeId::of::<String>(), false, words.clone()),
            side("late", TypeId::of::<u32>(), true, stamped.clone()),
        ]);
        sides
            .emit(&OutputTag::new("words"), None, "a".to_string())
            .unwrap();
        sides.emit(&OutputTag::new("late"), Some(7), 1u32).unwrap();
        // Nobody reads these: a tag of another name, or of the same name and another type.
        sides.emit(&OutputTag::new("other"), Some(7), 2u32).unwrap();
        sides.emit(&OutputTag::new("words"), None, 3u32).unwrap();
        assert!(words.borrow().is_empty(), "held until the flush");
        sides.flush().unwrap();
        assert_eq!(*words.borrow(), ["a"]);
        assert_eq!(*stamped.borrow(), [(7, 1)]);
    }
}
