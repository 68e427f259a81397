//! The exactly-once Kafka sink's pure core: a write-ahead log of checkpoint intervals. The
//! records of one checkpoint interval are kept (and checkpointed) until the checkpoint
//! completes; then they are written in one Kafka transaction that also commits a marker (the
//! interval's id) to a consumer group of the subtask that wrote them. A restored subtask reads
//! that marker and writes only the restored intervals after it, so no interval is written twice
//! or lost. No client, no clock, no random numbers: `sink.rs` does the I/O and draws the token.
//! See docs/kafka.md ("Exactly once").

/// One record as the sink writes it, its topic resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutRecord {
    /// The topic.
    pub topic: String,
    /// The key, if any.
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
}

/// Names one checkpoint interval of one writer attempt: the attempt's random token (so a job
/// restarted from an old savepoint, whose checkpoint ids repeat, never matches an earlier
/// run's marker) and the checkpoint that sealed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntervalId {
    /// Drawn once per writer attempt.
    pub token: u64,
    /// The checkpoint whose barrier ended the interval.
    pub checkpoint: u64,
}

/// What the consumer-group offset's metadata starts with; the rest is `token checkpoint`.
const MARKER_PREFIX: &str = "sluice-kafka-sink";

impl IntervalId {
    /// The offset metadata that records this interval as committed.
    pub fn marker(&self) -> String {
        format!("{MARKER_PREFIX} {:016x} {}", self.token, self.checkpoint)
    }

    /// Reads what [`IntervalId::marker`] wrote; `None` for anything else.
    pub fn parse_marker(metadata: &str) -> Option<IntervalId> {
        let mut parts = metadata.split(' ');
        if parts.next() != Some(MARKER_PREFIX) {
            return None;
        }
        let token = u64::from_str_radix(parts.next()?, 16).ok()?;
        let checkpoint = parts.next()?.parse().ok()?;
        parts
            .next()
            .is_none()
            .then_some(IntervalId { token, checkpoint })
    }
}

/// The records between two checkpoint barriers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Its id.
    pub id: IntervalId,
    /// Its records in the order the sink took them.
    pub records: Vec<OutRecord>,
}

/// What one writer (an origin subtask) had not committed when a checkpoint was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The subtask that wrote the intervals; its transactional id and consumer group are
    /// derived from it.
    pub origin: u32,
    /// The last interval the writer knew committed (its marker was in the group then).
    pub last_committed: Option<IntervalId>,
    /// Sealed intervals not yet known committed, oldest first.
    pub intervals: Vec<Interval>,
}

/// Why restored sink state was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("cannot restore the Kafka sink: {0}")]
pub struct StateError(String);

/// What a restored origin's intervals need, given the marker its group holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Every restored interval is committed already.
    Done,
    /// Write the intervals from this index on (in one transaction).
    WriteFrom(usize),
    /// The group lost its marker although the writer had committed before: Kafka expired the
    /// group's offsets (`offsets.retention.minutes`). Written again from the start; intervals
    /// that had committed appear twice.
    MarkerLost,
}

/// Decides what a restored origin needs. Commits are in order and each commits every sealed
/// interval up to a checkpoint, so a marker naming restored interval `i` means `0..=i` are
/// committed and the rest are not. A marker naming none of them is older (or from another
/// run): none is committed. (A marker from after the restored checkpoint only exists when a
/// job is restored from an older checkpoint than its latest, which reprocesses on purpose.)
pub fn recover(pending: &Pending, marker: Option<IntervalId>) -> Recovery {
    if pending.intervals.is_empty() {
        return Recovery::Done;
    }
    match marker {
        Some(m) => match pending.intervals.iter().position(|i| i.id == m) {
            Some(i) if i + 1 == pending.intervals.len() => Recovery::Done,
            Some(i) => Recovery::WriteFrom(i + 1),
            None => Recovery::WriteFrom(0),
        },
        None if pending.last_committed.is_some() => Recovery::MarkerLost,
        None => Recovery::WriteFrom(0),
    }
}

/// One subtask's write-ahead log.
#[derive(Debug)]
pub struct WriteAhead {
    origin: u32,
    token: u64,
    open: Vec<OutRecord>,
    sealed: Vec<Interval>,
    last_committed: Option<IntervalId>,
}

impl WriteAhead {
    /// An empty log of subtask `origin`, whose intervals carry `token`.
    pub fn new(origin: u32, token: u64) -> Self {
        WriteAhead {
            origin,
            token,
            open: Vec::new(),
            sealed: Vec::new(),
            last_committed: None,
        }
    }

    /// Takes one record into the open interval.
    pub fn add(&mut self, record: OutRecord) {
        self.open.push(record);
    }

    /// A checkpoint barrier: seals the open interval (if it has records) and returns the
    /// operator state, one element (or none when nothing waits).
    pub fn snapshot(&mut self, checkpoint: u64) -> Vec<Vec<u8>> {
        if !self.open.is_empty() {
            self.sealed.push(Interval {
                id: IntervalId {
                    token: self.token,
                    checkpoint,
                },
                records: std::mem::take(&mut self.open),
            });
        }
        if self.sealed.is_empty() {
            return Vec::new();
        }
        vec![encode(&self.origin, self.last_committed, &self.sealed)]
    }

    /// Checkpoint `checkpoint` completed: the sealed intervals it covers, to be written in one
    /// transaction whose marker is the last one's id (`None`: nothing to write).
    pub fn to_commit(&self, checkpoint: u64) -> Option<(&[Interval], IntervalId)> {
        let n = self
            .sealed
            .iter()
            .take_while(|i| i.id.checkpoint <= checkpoint)
            .count();
        (n > 0).then(|| (&self.sealed[..n], self.sealed[n - 1].id))
    }

    /// The transaction with marker `marker` committed: drops the intervals up to it.
    pub fn committed(&mut self, marker: IntervalId) {
        if let Some(i) = self.sealed.iter().position(|i| i.id == marker) {
            self.sealed.drain(..=i);
            self.last_committed = Some(marker);
        }
    }

    /// A restored subtask committed (or found committed) its own intervals up to `marker`.
    pub fn recovered(&mut self, marker: IntervalId) {
        self.last_committed = Some(marker);
    }

    /// The sealed intervals waiting for their checkpoint.
    #[cfg(test)]
    pub fn sealed_len(&self) -> usize {
        self.sealed.len()
    }
}

/// The state element: version byte 1, `u32` origin, last committed (flag byte, `u64` token,
/// `u64` checkpoint), `u32` interval count, then per interval `u64` token, `u64` checkpoint,
/// `u32` record count and per record: topic (`u32` length + bytes), key (`i32` length, -1 for
/// none, + bytes), value (`u32` length + bytes); little-endian.
fn encode(origin: &u32, last: Option<IntervalId>, intervals: &[Interval]) -> Vec<u8> {
    let size: usize = intervals
        .iter()
        .flat_map(|i| &i.records)
        .map(|r| 12 + r.topic.len() + r.key.as_ref().map_or(0, Vec::len) + r.value.len())
        .sum();
    let mut out = Vec::with_capacity(32 + 20 * intervals.len() + size);
    out.push(1);
    out.extend_from_slice(&origin.to_le_bytes());
    match last {
        Some(id) => {
            out.push(1);
            out.extend_from_slice(&id.token.to_le_bytes());
            out.extend_from_slice(&id.checkpoint.to_le_bytes());
        }
        None => out.extend_from_slice(&[0; 17]),
    }
    out.extend_from_slice(&(intervals.len() as u32).to_le_bytes());
    for interval in intervals {
        out.extend_from_slice(&interval.id.token.to_le_bytes());
        out.extend_from_slice(&interval.id.checkpoint.to_le_bytes());
        out.extend_from_slice(&(interval.records.len() as u32).to_le_bytes());
        for r in &interval.records {
            out.extend_from_slice(&(r.topic.len() as u32).to_le_bytes());
            out.extend_from_slice(r.topic.as_bytes());
            match &r.key {
                Some(k) => {
                    out.extend_from_slice(&(k.len() as i32).to_le_bytes());
                    out.extend_from_slice(k);
                }
                None => out.extend_from_slice(&(-1i32).to_le_bytes()),
            }
            out.extend_from_slice(&(r.value.len() as u32).to_le_bytes());
            out.extend_from_slice(&r.value);
        }
    }
    out
}

/// A cursor over a state element that fails with a [`StateError`] when it runs short.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StateError> {
        if self.0.len() < n {
            return Err(StateError(
                "a pending-intervals element is truncated".into(),
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, StateError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, StateError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, StateError> {
        Ok(i32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, StateError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn bytes(&mut self, n: usize) -> Result<Vec<u8>, StateError> {
        Ok(self.take(n)?.to_vec())
    }
}

/// Reads what [`WriteAhead::snapshot`] wrote; anything else is refused (restoring it would
/// lose or repeat output silently).
pub fn decode(element: &[u8]) -> Result<Pending, StateError> {
    let mut r = Reader(element);
    let version = r.u8()?;
    if version != 1 {
        return Err(StateError(format!(
            "a pending-intervals element has version {version}, not 1 (not this sink's state)"
        )));
    }
    let origin = r.u32()?;
    let flag = r.u8()?;
    let (token, checkpoint) = (r.u64()?, r.u64()?);
    let last_committed = match flag {
        0 => None,
        1 => Some(IntervalId { token, checkpoint }),
        f => return Err(StateError(format!("bad last-committed flag {f}"))),
    };
    let count = r.u32()?;
    let mut intervals = Vec::new();
    for _ in 0..count {
        let id = IntervalId {
            token: r.u64()?,
            checkpoint: r.u64()?,
        };
        let n = r.u32()?;
        let mut records = Vec::new();
        for _ in 0..n {
            let len = r.u32()? as usize;
            let topic = String::from_utf8(r.bytes(len)?)
                .map_err(|_| StateError("a topic name in the state is not UTF-8".into()))?;
            let key = match r.i32()? {
                -1 => None,
                k if k >= 0 => Some(r.bytes(k as usize)?),
                k => return Err(StateError(format!("bad key length {k}"))),
            };
            let len = r.u32()? as usize;
            let value = r.bytes(len)?;
            records.push(OutRecord { topic, key, value });
        }
        intervals.push(Interval { id, records });
    }
    if !r.0.is_empty() {
        return Err(StateError(format!(
            "{} bytes after the last interval",
            r.0.len()
        )));
    }
    if intervals
        .windows(2)
        .any(|w| w[0].id.checkpoint >= w[1].id.checkpoint)
    {
        return Err(StateError(
            "the pending intervals are not in checkpoint order".into(),
        ));
    }
    Ok(Pending {
        origin,
        last_committed,
        intervals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(v: &str) -> OutRecord {
        OutRecord {
            topic: "out".into(),
            key: Some(v.as_bytes().to_vec()),
            value: v.as_bytes().to_vec(),
        }
    }

    fn values(intervals: &[Interval]) -> Vec<String> {
        intervals
            .iter()
            .flat_map(|i| &i.records)
            .map(|r| String::from_utf8(r.value.clone()).unwrap())
            .collect()
    }

    #[test]
    fn a_completed_checkpoint_commits_every_interval_up_to_it_in_one_transaction() {
        let mut log = WriteAhead::new(3, 7);
        log.add(rec("a"));
        assert_eq!(log.snapshot(1).len(), 1);
        log.add(rec("b"));
        log.snapshot(2);
        // An empty interval is not sealed; the sealed ones stay in the state.
        assert_eq!(log.snapshot(3).len(), 1);
        log.add(rec("c"));
        log.snapshot(4);
        assert!(log.to_commit(0).is_none());
        // Checkpoint 1's notification was lost (or 1 was aborted): 3 commits both.
        let (intervals, marker) = log.to_commit(3).unwrap();
        assert_eq!(values(intervals), ["a", "b"]);
        assert_eq!(
            marker,
            IntervalId {
                token: 7,
                checkpoint: 2
            }
        );
        log.committed(marker);
        assert_eq!(log.sealed_len(), 1);
        let (intervals, _) = log.to_commit(4).unwrap();
        assert_eq!(values(intervals), ["c"]);
    }

    #[test]
    fn the_state_element_round_trips_and_garbage_is_refused() {
        let mut log = WriteAhead::new(2, 0xdead_beef);
        log.add(rec("a"));
        log.add(OutRecord {
            topic: "other".into(),
            key: None,
            value: vec![0, 255],
        });
        log.snapshot(5);
        let marker = log.to_commit(5).unwrap().1;
        log.committed(marker);
        log.add(rec("b"));
        let element = log.snapshot(6).remove(0);
        let pending = decode(&element).unwrap();
        assert_eq!(pending.origin, 2);
        assert_eq!(pending.last_committed, Some(marker));
        assert_eq!(values(&pending.intervals), ["b"]);
        assert!(decode(&element[..element.len() - 1]).is_err());
        let mut longer = element.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        assert!(
            decode(b"\x02")
                .unwrap_err()
                .to_string()
                .contains("version 2")
        );
    }

    #[test]
    fn markers_parse_back_and_foreign_metadata_is_no_marker() {
        let id = IntervalId {
            token: 0x0123_4567_89ab_cdef,
            checkpoint: 42,
        };
        assert_eq!(IntervalId::parse_marker(&id.marker()), Some(id));
        assert_eq!(IntervalId::parse_marker(""), None);
        assert_eq!(IntervalId::parse_marker("sluice-kafka-sink 12"), None);
        assert_eq!(
            IntervalId::parse_marker(&format!("{} x", id.marker())),
            None
        );
    }

    fn pending(ids: &[(u64, u64)], last: Option<IntervalId>) -> Pending {
        Pending {
            origin: 0,
            last_committed: last,
            intervals: ids
                .iter()
                .map(|&(token, checkpoint)| Interval {
                    id: IntervalId { token, checkpoint },
                    records: vec![rec("x")],
                })
                .collect(),
        }
    }

    #[test]
    fn recovery_writes_exactly_the_intervals_after_the_groups_marker() {
        let id = |token, checkpoint| IntervalId { token, checkpoint };
        let p = pending(&[(1, 4), (1, 5), (1, 6)], Some(id(1, 3)));
        // The commit of 4..5 happened before the failure, 6 did not.
        assert_eq!(recover(&p, Some(id(1, 5))), Recovery::WriteFrom(2));
        assert_eq!(recover(&p, Some(id(1, 6))), Recovery::Done);
        // The marker is the one the writer knew: nothing restored committed.
        assert_eq!(recover(&p, Some(id(1, 3))), Recovery::WriteFrom(0));
        // Another run's marker with the same checkpoint id is not ours.
        assert_eq!(recover(&p, Some(id(9, 6))), Recovery::WriteFrom(0));
        // Kafka expired the group's offsets.
        assert_eq!(recover(&p, None), Recovery::MarkerLost);
        assert_eq!(
            recover(&pending(&[(1, 4)], None), None),
            Recovery::WriteFrom(0)
        );
        assert_eq!(recover(&pending(&[], None), None), Recovery::Done);
    }
}
