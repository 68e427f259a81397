//! What job authors use: an execution environment, `DataStream`s with their transformations,
//! keyed streams with keyed state, process functions with side outputs ([`OutputTag`]),
//! windows of event time, processing time and counts with allowed lateness, sources and sinks.
//!
//! A job is a program that builds a dataflow on a [`StreamExecutionEnvironment`]. The same
//! program runs on the JobManager (to derive the job graph) and on every TaskManager (to
//! instantiate the operators of the subtasks deployed there), so building must be deterministic:
//! it may read its arguments, but not the clock or random numbers.
//!
//! ```
//! use sluice::api::StreamExecutionEnvironment;
//! let env = StreamExecutionEnvironment::new();
//! env.from_collection(vec!["a b".to_string(), "b".to_string()])
//!     .flat_map(|line: String| line.split(' ').map(|w| (w.to_string(), 1u64)).collect::<Vec<_>>())
//!     .key_by(|pair: &(String, u64)| pair.0.clone())
//!     .sum()
//!     .map(|(word, count): (String, u64)| format!("{word} {count}"))
//!     .print();
//! ```

pub(crate) mod checkpointing;
mod co_process;
mod context;
mod count_windows;
mod env;
pub(crate) mod operators;
mod process;
mod program;
mod side;
mod sinks;
mod sort_spill;
mod sources;
pub(crate) mod stream_graph;
pub(crate) mod time;
mod triggers;
mod window_join;
mod windows;

pub use crate::checkpoint::StateDistribution;
pub use crate::common::error::TaskError;
pub use crate::config::RuntimeMode;
pub use crate::state::{AggregateFunction, TimeDomain};
pub use co_process::{
    CoProcessFunction, ConnectedStreams, IntervalJoin, IntervalJoined, JoinContext,
    KeyedCoProcessFunction, KeyedConnectedStreams, ProcessJoinFunction,
};
pub use context::RuntimeContext;
pub use count_windows::CountWindow;
pub use env::{
    CountWindowedStream, DataStream, KeyedStream, StreamExecutionEnvironment, WindowedStream,
};
pub use operators::{Collector, Context, KeyedProcessFunction};
pub use process::{ProcessContext, ProcessFunction};
pub use program::{JobProgram, ProgramRegistry};
pub use side::OutputTag;
pub use sinks::SinkFunction;
pub use sources::{SourceContext, SourceFunction};
pub use stream_graph::{JobFile, ShipStrategy};
pub use time::{
    BoundedOutOfOrderness, Stamped, WatermarkGenerator, WatermarkOutput, WatermarkStrategy,
};
pub use triggers::{
    ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountTrigger, EventTimeTrigger,
    ProcessingTimeTrigger, PurgingTrigger, Trigger,
};
pub use window_join::{JoinEqual, JoinWhere, JoinedStreams, WindowedJoin};
pub use windows::{
    EventTimeSessionWindows, EventTimeWindows, ProcessWindowFunction, ProcessingTimeSessionWindows,
    SlidingEventTimeWindows, SlidingProcessingTimeWindows, TimeWindow, TumblingEventTimeWindows,
    TumblingProcessingTimeWindows, WindowAssigner, WindowContext,
};

pub(crate) use checkpointing::{SnapshotContext, SnapshotStorage, StateInit, TaskControl};
pub(crate) use context::{ProcessingTimeService, now_ms};
pub(crate) use sources::SourceHooks;
