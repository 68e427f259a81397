//! The Kafka source's pure core: which subtask reads which partition, where each partition
//! starts, the offsets kept in checkpoints, and when a bounded read is done. No client, no
//! clock: the source (`source.rs`) feeds it what the brokers said and performs its answers.

use std::collections::BTreeMap;

/// One partition of one topic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition's number within the topic.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`'s partition `partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Where a partition that has no checkpointed offset starts (Flink's `OffsetsInitializer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartingOffsets {
    /// The first offset the broker still keeps.
    Earliest,
    /// The end of the partition when the source starts: only records written afterwards.
    Latest,
    /// The consumer group's committed offset; where the group has none, `fallback`.
    Committed {
        /// Where to start a partition the group never committed for.
        fallback: Box<StartingOffsets>,
    },
    /// The first record whose timestamp is at or after this many milliseconds since the
    /// epoch (the end of the partition when there is none).
    Timestamp(i64),
}

/// Where one partition's reading begins, as the source asks the client for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// At this offset (a restored position).
    Offset(i64),
    /// As the starting-offsets setting says.
    Initial(StartingOffsets),
}

/// The subtask of `parallelism` that reads `tp` on a fresh start: Flink's
/// `KafkaSourceEnumerator.getSplitOwner` — the topic's partitions are spread round-robin
/// starting at a subtask derived from the topic's hash, so that topics with few partitions do
/// not all land on subtask 0.
pub fn owner(tp: &TopicPartition, parallelism: u32) -> u32 {
    let p = parallelism.max(1) as i64;
    let start = ((java_string_hash(&tp.topic).wrapping_mul(31) & 0x7FFF_FFFF) as i64) % p;
    ((start + tp.partition as i64) % p) as u32
}

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, wrapping.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// What a subtask restored of the source's state, as the snapshot dealt it.
#[derive(Clone, Copy, Debug)]
pub enum Restored<'a> {
    /// Union list state: the positions of every subtask that took the snapshot; each subtask
    /// keeps the partitions [`owner`] gives it at the new parallelism.
    Union(&'a BTreeMap<TopicPartition, i64>),
    /// A share of split list state (snapshots of sluice before the source used union state):
    /// exactly the partitions to read, dealt by position in the state.
    Split(&'a BTreeMap<TopicPartition, i64>),
}

/// The partitions subtask `index` of `parallelism` reads and where each starts.
///
/// On a fresh start (`restored` is `None`) it owns the partitions of `known` (the partitions
/// listed when it started) that [`owner`] gives it, and starts them as `initial` says.
/// Restored from union state, it reads the restored partitions it owns from their
/// checkpointed offsets, whatever `initial` says, and the partitions of `known` it owns that
/// the snapshot did not hold from the earliest offset: nobody had read them when the
/// checkpoint was taken (Flink starts partitions discovered after the first start from the
/// earliest offset too). Restored from a split share, it reads exactly that share.
pub fn plan(
    known: &[TopicPartition],
    restored: Option<Restored<'_>>,
    initial: &StartingOffsets,
    index: u32,
    parallelism: u32,
) -> BTreeMap<TopicPartition, Start> {
    let mine = |tp: &&TopicPartition| owner(tp, parallelism) == index;
    match restored {
        Some(Restored::Split(offsets)) => offsets
            .iter()
            .map(|(tp, offset)| (tp.clone(), Start::Offset(*offset)))
            .collect(),
        Some(Restored::Union(offsets)) => {
            let mut out: BTreeMap<_, _> = offsets
                .iter()
                .filter(|(tp, _)| mine(tp))
                .map(|(tp, offset)| (tp.clone(), Start::Offset(*offset)))
                .collect();
            for tp in known.iter().filter(mine) {
                out.entry(tp.clone())
                    .or_insert(Start::Initial(StartingOffsets::Earliest));
            }
            out
        }
        None => known
            .iter()
            .filter(mine)
            .map(|tp| (tp.clone(), Start::Initial(initial.clone())))
            .collect(),
    }
}

/// Partition discovery for one subtask (Flink's periodic discovery in `KafkaSourceEnumerator`,
/// `partition.discovery.interval.ms`): every interval the source lists its topics' partitions
/// again, and the core answers which of them are new and this subtask's to read. A new
/// partition starts at its earliest offset, so records written to it before it was noticed
/// are read too. Exact through failures because the source's state is union state: a
/// restored subtask knows every partition any subtask had in the checkpoint, so a partition
/// it does not know was read by nobody as far as the checkpoint goes.
#[derive(Clone, Debug)]
pub struct Discovery {
    /// Every partition already accounted for, whoever reads it.
    accounted: std::collections::BTreeSet<TopicPartition>,
    index: u32,
    parallelism: u32,
    /// Milliseconds between listings; `None`: no periodic discovery.
    interval: Option<i64>,
    /// When the next listing is due (ms, the caller's clock).
    due: i64,
}

impl Discovery {
    /// Discovery for subtask `index` of `parallelism` that knows of `accounted` (the partitions
    /// listed at its start and those of its restored state), listing again every `interval`
    /// from `now` (ms).
    pub fn new(
        accounted: impl IntoIterator<Item = TopicPartition>,
        index: u32,
        parallelism: u32,
        interval: Option<std::time::Duration>,
        now: i64,
    ) -> Self {
        let interval = interval.map(|d| (d.as_millis().min(i64::MAX as u128 / 2) as i64).max(1));
        Discovery {
            accounted: accounted.into_iter().collect(),
            index,
            parallelism,
            interval,
            due: interval.map_or(i64::MAX, |i| now.saturating_add(i)),
        }
    }

    /// Whether a listing is due at `now`.
    pub fn due(&self, now: i64) -> bool {
        self.interval.is_some() && now >= self.due
    }

    /// The partitions listed at `now`: returns those that are new and owned by this subtask,
    /// to be read from their earliest offsets. Every new partition is accounted for from now
    /// on, whoever owns it.
    pub fn listed(&mut self, partitions: &[TopicPartition], now: i64) -> Vec<TopicPartition> {
        self.reschedule(now);
        let mut out = Vec::new();
        for tp in partitions {
            if self.accounted.insert(tp.clone()) && owner(tp, self.parallelism) == self.index {
                out.push(tp.clone());
            }
        }
        out
    }

    /// Listing failed at `now` (brokers unreachable): try again an interval later.
    pub fn failed(&mut self, now: i64) {
        self.reschedule(now);
    }

    fn reschedule(&mut self, now: i64) {
        if let Some(i) = self.interval {
            self.due = now.saturating_add(i);
        }
    }
}

/// Why restored source state was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("cannot restore the Kafka source: {0}")]
pub struct StateError(String);

/// A partition's position as one operator-state element: `u16` topic length, the topic's
/// UTF-8 bytes, `i32` partition, `i64` next offset to read, `i64` bounded mode's stopping offset
/// or -1 (little-endian). The stopping offset travels with the position so that a restored
/// bounded job still stops where the first start's end was.
pub fn encode_position(tp: &TopicPartition, next_offset: i64, stop: Option<i64>) -> Vec<u8> {
    let topic = tp.topic.as_bytes();
    let mut out = Vec::with_capacity(2 + topic.len() + ELEMENT_TAIL);
    out.extend_from_slice(&(topic.len() as u16).to_le_bytes());
    out.extend_from_slice(topic);
    out.extend_from_slice(&tp.partition.to_le_bytes());
    out.extend_from_slice(&next_offset.to_le_bytes());
    out.extend_from_slice(&stop.unwrap_or(-1).to_le_bytes());
    out
}

/// Bytes of an element after the topic: partition, next offset, stopping offset.
const ELEMENT_TAIL: usize = 4 + 8 + 8;

/// The positions a subtask restored.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RestoredPositions {
    /// The next offset to read per partition.
    pub next: BTreeMap<TopicPartition, i64>,
    /// Bounded mode's stopping offset, for the partitions a bounded job wrote.
    pub stops: BTreeMap<TopicPartition, i64>,
}

/// Reads what [`encode_position`] wrote; anything else (a foreign state, a negative offset, a
/// partition twice) is refused, since restoring it would skip or repeat input silently.
pub fn decode_positions(elements: &[Vec<u8>]) -> Result<RestoredPositions, StateError> {
    let mut out = RestoredPositions::default();
    for e in elements {
        let len = e
            .get(..2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .ok_or_else(|| StateError(format!("a position of {} bytes is too short", e.len())))?;
        if e.len() != 2 + len + ELEMENT_TAIL {
            return Err(StateError(format!(
                "a position naming a topic of {len} bytes has {} bytes, not {}",
                e.len(),
                2 + len + ELEMENT_TAIL
            )));
        }
        let topic = std::str::from_utf8(&e[2..2 + len])
            .map_err(|_| StateError("a topic name in the state is not UTF-8".into()))?;
        let rest = &e[2 + len..];
        let partition = i32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
        let offset = i64::from_le_bytes(rest[4..12].try_into().expect("8 bytes"));
        let stop = i64::from_le_bytes(rest[12..].try_into().expect("8 bytes"));
        if topic.is_empty() || partition < 0 || offset < 0 || stop < -1 {
            return Err(StateError(format!(
                "the position ({topic:?}, partition {partition}, offset {offset}, stop {stop}) is not one the source writes"
            )));
        }
        let tp = TopicPartition::new(topic, partition);
        if out.next.insert(tp.clone(), offset).is_some() {
            return Err(StateError(format!("partition {tp} appears twice")));
        }
        if stop >= 0 {
            out.stops.insert(tp, stop);
        }
    }
    Ok(out)
}

/// The positions of the partitions a subtask reads, with the bounded mode's stopping points.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Positions {
    /// The next offset to read per partition; `None` until the client resolved the start.
    next: BTreeMap<TopicPartition, Option<i64>>,
    /// Bounded mode: the offset at which each partition is done (its end when the job started).
    stop: Option<BTreeMap<TopicPartition, i64>>,
}

impl Positions {
    /// The partitions of `plan`, with the restored offsets known; unbounded.
    pub fn new(plan: &BTreeMap<TopicPartition, Start>) -> Self {
        let next = plan
            .iter()
            .map(|(tp, s)| {
                let known = match s {
                    Start::Offset(o) => Some(*o),
                    Start::Initial(_) => None,
                };
                (tp.clone(), known)
            })
            .collect();
        Positions { next, stop: None }
    }

    /// A partition found by discovery is read from now on, from where the client starts it
    /// (its earliest offset); its position is known with its first record. One already read
    /// here is left as it is.
    pub fn add(&mut self, tp: &TopicPartition) {
        self.next.entry(tp.clone()).or_insert(None);
    }

    /// Bounded mode: stop each partition at `ends` (partitions absent from it stop at once).
    pub fn bound(&mut self, ends: BTreeMap<TopicPartition, i64>) {
        self.stop = Some(ends);
    }

    /// The client resolved where `tp` starts (or told where it stands after an empty poll).
    pub fn resolved(&mut self, tp: &TopicPartition, offset: i64) {
        if let Some(n) = self.next.get_mut(tp)
            && n.is_none_or(|n| offset > n)
        {
            *n = Some(offset);
        }
    }

    /// A record at `offset` of `tp` arrived. Returns whether to emit it: `false` for a record
    /// of a partition not read here, before the position (a stale fetch after a seek), or
    /// past a bounded partition's end.
    pub fn record(&mut self, tp: &TopicPartition, offset: i64) -> bool {
        let stop = self.stop.as_ref().map(|s| s.get(tp).copied().unwrap_or(0));
        let Some(next) = self.next.get_mut(tp) else {
            return false;
        };
        if next.is_some_and(|n| offset < n) || stop.is_some_and(|s| offset >= s) {
            return false;
        }
        *next = Some(offset + 1);
        true
    }

    /// Whether a bounded read has reached every partition's end (never for an unbounded one).
    pub fn finished(&self) -> bool {
        let Some(stop) = &self.stop else {
            return false;
        };
        self.next.iter().all(|(tp, next)| {
            let end = stop.get(tp).copied().unwrap_or(0);
            end <= 0 || next.is_some_and(|n| n >= end)
        })
    }

    /// Whether bounded mode already reached `tp`'s end (its fetching can be paused).
    pub fn partition_done(&self, tp: &TopicPartition) -> bool {
        match (&self.stop, self.next.get(tp)) {
            (Some(stop), Some(next)) => {
                let end = stop.get(tp).copied().unwrap_or(0);
                end <= 0 || next.is_some_and(|n| n >= end)
            }
            _ => false,
        }
    }

    /// The operator state: one element per partition whose position is known (the source
    /// resolves every start before it reads, so that is all of them once it runs), with its
    /// stopping offset in bounded mode.
    pub fn snapshot(&self) -> Vec<Vec<u8>> {
        self.next
            .iter()
            .filter_map(|(tp, n)| {
                let stop = self.stop.as_ref().map(|s| s.get(tp).copied().unwrap_or(0));
                n.map(|n| encode_position(tp, n, stop))
            })
            .collect()
    }

    /// The offsets to commit to the consumer group: the next offset per partition.
    pub fn committable(&self) -> BTreeMap<TopicPartition, i64> {
        self.next
            .iter()
            .filter_map(|(tp, n)| n.map(|n| (tp.clone(), n)))
            .collect()
    }
}

/// Offsets snapshotted per checkpoint, committed to the consumer group when that checkpoint
/// completes (Flink commits on `notifyCheckpointComplete`, never on its own schedule).
#[derive(Debug, Default)]
pub struct PendingCommits {
    pending: BTreeMap<u64, BTreeMap<TopicPartition, i64>>,
}

impl PendingCommits {
    /// Checkpoint `id` took `offsets`.
    pub fn snapshotted(&mut self, id: u64, offsets: BTreeMap<TopicPartition, i64>) {
        self.pending.insert(id, offsets);
    }

    /// Checkpoint `id` completed: the offsets to commit (those of `id`, which subsume earlier
    /// ones), forgetting `id` and every earlier checkpoint. `None` if it took none here.
    pub fn completed(&mut self, id: u64) -> Option<BTreeMap<TopicPartition, i64>> {
        let later = self.pending.split_off(&(id + 1));
        let mut done = std::mem::replace(&mut self.pending, later);
        done.remove(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_javas() {
        // Values from Java's "...".hashCode().
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("topic"), 110_546_223);
        assert_eq!(java_string_hash("hello world"), 1_794_106_052);
        assert_eq!(java_string_hash("a-rather-long-topic-name"), 996_987_977);
    }

    #[test]
    fn owner_spreads_a_topic_round_robin_from_its_hash() {
        // "topic": (110546223 * 31) & 0x7fffffff = 3426932913 & 0x7fffffff = 1279449265.
        let start = 1_279_449_265u32 % 3;
        for p in 0..7 {
            assert_eq!(
                owner(&TopicPartition::new("topic", p), 3),
                (start + p as u32) % 3
            );
        }
        assert_eq!(owner(&TopicPartition::new("x", 5), 1), 0);
    }

    #[test]
    fn a_fresh_plan_gives_every_partition_to_exactly_one_subtask() {
        let known: Vec<TopicPartition> = ["a", "bb", "orders"]
            .iter()
            .flat_map(|t| (0..5).map(move |p| TopicPartition::new(*t, p)))
            .collect();
        for parallelism in [1, 2, 3, 4, 16] {
            let mut seen = BTreeMap::new();
            for i in 0..parallelism {
                for (tp, start) in plan(&known, None, &StartingOffsets::Earliest, i, parallelism) {
                    assert_eq!(start, Start::Initial(StartingOffsets::Earliest));
                    assert!(seen.insert(tp, i).is_none());
                }
            }
            assert_eq!(seen.len(), known.len(), "p={parallelism}");
        }
    }

    #[test]
    fn restored_offsets_win_over_the_starting_offsets() {
        let known = vec![TopicPartition::new("t", 0), TopicPartition::new("t", 1)];
        let restored: BTreeMap<_, _> = [(TopicPartition::new("t", 1), 42)].into();
        let got = plan(
            &known,
            Some(Restored::Split(&restored)),
            &StartingOffsets::Latest,
            0,
            1,
        );
        assert_eq!(
            got,
            [(TopicPartition::new("t", 1), Start::Offset(42))].into()
        );
    }

    /// Union state restored at any parallelism: every partition of the snapshot is read by
    /// exactly one subtask, its owner, from its checkpointed offset; a listed partition the
    /// snapshot lacks is read by its owner from the earliest offset.
    #[test]
    fn a_union_restore_gives_each_partition_to_its_owner_and_new_ones_start_earliest() {
        let restored: BTreeMap<_, _> = (0..8)
            .map(|p| (TopicPartition::new("in", p), 100 + p as i64))
            .collect();
        let mut known: Vec<_> = restored.keys().cloned().collect();
        known.push(TopicPartition::new("in", 8));
        known.push(TopicPartition::new("new-topic", 0));
        for parallelism in [1, 2, 3, 5, 12] {
            let mut seen = BTreeMap::new();
            for i in 0..parallelism {
                let got = plan(
                    &known,
                    Some(Restored::Union(&restored)),
                    &StartingOffsets::Latest,
                    i,
                    parallelism,
                );
                for (tp, start) in got {
                    assert_eq!(owner(&tp, parallelism), i, "{tp} at p {parallelism}");
                    let want = match restored.get(&tp) {
                        Some(o) => Start::Offset(*o),
                        None => Start::Initial(StartingOffsets::Earliest),
                    };
                    assert_eq!(start, want, "{tp} at p {parallelism}");
                    assert!(seen.insert(tp, i).is_none(), "p {parallelism}");
                }
            }
            assert_eq!(seen.len(), known.len(), "p {parallelism}");
        }
    }

    /// Discovery lists on its interval, answers each new partition once and only to its owner,
    /// and never answers a partition it accounted for at the start.
    #[test]
    fn discovery_finds_each_new_partition_once_for_its_owner() {
        let start: Vec<_> = (0..4).map(|p| TopicPartition::new("t", p)).collect();
        let interval = Some(std::time::Duration::from_millis(1000));
        let mut all: Vec<_> = (0..8).map(|p| TopicPartition::new("t", p)).collect();
        all.push(TopicPartition::new("u", 0));
        for parallelism in [1, 3] {
            let mut found = BTreeMap::new();
            for i in 0..parallelism {
                let mut d = Discovery::new(start.clone(), i, parallelism, interval, 0);
                assert!(!d.due(999));
                assert!(d.due(1000));
                for tp in d.listed(&all[..6], 1000) {
                    assert!(found.insert(tp, i).is_none());
                }
                assert!(!d.due(1999), "rescheduled from the listing");
                d.failed(2000);
                assert!(!d.due(2999) && d.due(3000));
                for tp in d.listed(&all, 3000) {
                    assert!(found.insert(tp, i).is_none(), "answered twice");
                }
                assert!(d.listed(&all, 4000).is_empty());
            }
            let want: Vec<_> = all[4..].to_vec();
            assert_eq!(found.keys().cloned().collect::<Vec<_>>(), want);
            for (tp, i) in found {
                assert_eq!(owner(&tp, parallelism), i);
            }
        }
        let d = Discovery::new(start, 0, 1, None, 0);
        assert!(!d.due(i64::MAX), "no interval: never due");
    }

    #[test]
    fn positions_round_trip_and_garbage_is_refused() {
        let tp = TopicPartition::new("in", 3);
        let e = encode_position(&tp, 17, None);
        let got = decode_positions(std::slice::from_ref(&e)).unwrap();
        assert_eq!(got.next, [(tp.clone(), 17)].into());
        assert!(got.stops.is_empty());
        let bounded = encode_position(&tp, 17, Some(30));
        let got = decode_positions(std::slice::from_ref(&bounded)).unwrap();
        assert_eq!(got.stops, [(tp, 30)].into());
        for bad in [
            vec![],
            vec![1],
            b"garbage".to_vec(),
            encode_position(&TopicPartition::new("in", -1), 0, None),
            encode_position(&TopicPartition::new("in", 0), -5, None),
            encode_position(&TopicPartition::new("in", 0), 5, Some(-7)),
            encode_position(&TopicPartition::new("", 0), 0, None),
        ] {
            assert!(
                decode_positions(std::slice::from_ref(&bad)).is_err(),
                "{bad:?}"
            );
        }
        assert!(
            decode_positions(&[e.clone(), e])
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }

    #[test]
    fn bounded_positions_finish_at_the_ends_and_drop_stale_or_late_records() {
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let plan: BTreeMap<_, _> = [
            (a.clone(), Start::Offset(5)),
            (b.clone(), Start::Initial(StartingOffsets::Earliest)),
        ]
        .into();
        let mut pos = Positions::new(&plan);
        pos.bound([(a.clone(), 7), (b.clone(), 0)].into());
        assert!(!pos.finished());
        assert!(!pos.record(&a, 4), "before the restored position");
        assert!(pos.record(&a, 5));
        assert!(!pos.finished());
        assert!(pos.record(&a, 6));
        assert!(!pos.record(&a, 7), "past the end");
        assert!(pos.partition_done(&a) && pos.partition_done(&b));
        assert!(pos.finished());
        assert!(!pos.record(&TopicPartition::new("other", 0), 0));
        // A transaction marker at the end: the position moves past it without a record.
        let mut pos = Positions::new(&plan);
        pos.bound([(a.clone(), 9), (b.clone(), 0)].into());
        pos.record(&a, 7);
        assert!(!pos.finished());
        pos.resolved(&a, 9);
        assert!(pos.finished());
        // The stopping offsets travel in the state (b's start is unresolved: not written).
        let restored = decode_positions(&pos.snapshot()).unwrap();
        assert_eq!(restored.next, [(a.clone(), 9)].into());
        assert_eq!(restored.stops, [(a.clone(), 9)].into());
    }

    #[test]
    fn snapshots_hold_resolved_positions_and_commits_follow_completed_checkpoints() {
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let plan: BTreeMap<_, _> = [
            (a.clone(), Start::Offset(5)),
            (b.clone(), Start::Initial(StartingOffsets::Latest)),
        ]
        .into();
        let mut pos = Positions::new(&plan);
        let state = pos.snapshot();
        assert_eq!(
            decode_positions(&state).unwrap().next,
            [(a.clone(), 5)].into()
        );
        pos.resolved(&b, 100);
        let state = pos.snapshot();
        assert_eq!(
            decode_positions(&state).unwrap().next,
            [(a.clone(), 5), (b.clone(), 100)].into()
        );
        pos.record(&a, 5);
        let mut commits = PendingCommits::default();
        commits.snapshotted(1, pos.committable());
        pos.record(&a, 6);
        commits.snapshotted(2, pos.committable());
        pos.record(&a, 7);
        commits.snapshotted(3, pos.committable());
        assert_eq!(
            commits.completed(2),
            Some([(a.clone(), 7), (b.clone(), 100)].into())
        );
        assert_eq!(commits.completed(1), None, "subsumed by 2");
        assert_eq!(commits.completed(3), Some([(a, 8), (b, 100)].into()));
    }
}
