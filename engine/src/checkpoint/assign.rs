//! Restore assignment: which part of a snapshot each subtask of the (possibly rescaled) job
//! starts from. Flink's rules: operator state is a list of elements split into contiguous,
//! balanced ranges over the new subtasks (Flink's `RoundRobinOperatorStateRepartitioner` for
//! split-distributed list state), keyed state follows key groups, and the number of key groups
//! (max parallelism) never changes. Operator state an operator declared as union list state
//! (Flink's `getUnionListState`, [`StateDistribution::Union`]) goes whole to every new subtask
//! instead, at any parallelism. Operator state in files is split by element index, which the
//! handles record: the JobManager never reads a state file, each restoring subtask reads
//! its own slices. A snapshot's operators are matched to the new program's by their stable
//! operator ids, whatever vertex runs them now, as Flink matches `OperatorID`s.

use std::collections::BTreeMap;

use super::metadata::{CheckpointMetadata, OperatorKey, OperatorMetadata, RestoreError};
use super::topology::{TaskKey, VertexTopology};
use super::{
    OperatorRestore, OperatorStateSlice, OperatorSubtaskState, StateDistribution, TaskRestore,
};
use crate::state::OperatorStateHandle;

/// The key groups `[first, last]` that subtask `index` of `parallelism` owns, out of
/// `max_parallelism` (Flink's `KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex`).
/// Empty (`first > last`) when the parallelism exceeds the max parallelism.
pub fn key_group_range(max_parallelism: u32, parallelism: u32, index: u32) -> (u32, u32) {
    let (max_p, p, i) = (
        u64::from(max_parallelism),
        u64::from(parallelism.max(1)),
        u64::from(index),
    );
    // Flink's (i * maxP + p - 1) / p.
    let first = (i * max_p).div_ceil(p);
    let last = ((i + 1) * max_p).saturating_sub(1) / p;
    (first as u32, last as u32)
}

fn intersects(a: (u32, u32), b: (u32, u32)) -> bool {
    a.0 <= a.1 && b.0 <= b.1 && a.0 <= b.1 && b.0 <= a.1
}

/// Where an operator of the new program runs: its vertex, and the node index its subtasks
/// restore its state under.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Placement {
    vertex: usize,
    node: u32,
}

/// Where each operator of `topology` runs, under both names a snapshot may give it: its stable
/// id (metadata version 3 on) and its node index (versions 1 and 2, written when node indices
/// were the ids).
fn operator_placements(
    topology: &[VertexTopology],
) -> Result<BTreeMap<OperatorKey, Placement>, RestoreError> {
    let mut map = BTreeMap::new();
    for (v, vertex) in topology.iter().enumerate() {
        for op in &vertex.operators {
            let place = Placement {
                vertex: v,
                node: op.node,
            };
            for key in [OperatorKey::Id(op.identity.id), OperatorKey::Node(op.node)] {
                if map.insert(key, place).is_some() {
                    return Err(RestoreError::DuplicateOperator { operator: key });
                }
            }
        }
    }
    Ok(map)
}

/// Whether a snapshotted operator holds anything to restore. A stateless operator (or a
/// finished source) has entries without elements or keyed state; the new program may drop it
/// without losing anything, so it never refuses a restore (as in Flink).
fn has_state(state: &OperatorMetadata) -> bool {
    state.subtasks.values().any(|st| {
        st.operator_state.element_count() > 0
            || st
                .keyed
                .as_ref()
                .is_some_and(|k| !k.files.is_empty() || k.full_size > 0)
    })
}

/// What a restore does with a snapshot's state: what each subtask starts from, and the state
/// left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Per subtask of the new job.
    pub tasks: BTreeMap<TaskKey, TaskRestore>,
    /// Operators of the snapshot the new program lacks, whose state is not restored.
    pub skipped: Vec<SkippedOperator>,
}

/// An operator of a snapshot that the new program lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedOperator {
    /// Its id (or node index, in an old snapshot).
    pub operator: OperatorKey,
    /// Its uid, if the snapshot knows it.
    pub uid: Option<String>,
    /// Whether it had state (skipped because the job allows non-restored state) rather than
    /// none at all.
    pub had_state: bool,
}

impl std::fmt::Display for SkippedOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.operator)?;
        if let Some(uid) = &self.uid {
            write!(f, " (uid \"{uid}\")")?;
        }
        Ok(())
    }
}

/// Elements `first..first + count` of `handle` as a slice; `None` for no element, so a share
/// holds no empty slices (a restored subtask without elements still learns it was restored:
/// its operator is in the restore).
fn slice(handle: &OperatorStateHandle, first: u64, count: u64) -> Option<OperatorStateSlice> {
    if count == 0 {
        return None;
    }
    Some(match handle {
        OperatorStateHandle::Inline(elements) => OperatorStateSlice::Inline(
            elements
                .iter()
                .skip(first as usize)
                .take(count as usize)
                .cloned()
                .collect(),
        ),
        OperatorStateHandle::File { file } => OperatorStateSlice::File {
            file: file.clone(),
            first,
            count,
        },
    })
}

/// The operator state of `subtasks` (in subtask order) split over `parallelism` new subtasks:
/// the concatenation of all elements cut into contiguous ranges, the first `total % parallelism`
/// subtasks one element more than the others (Flink's split redistribution).
pub(crate) fn split_operator_state<'a>(
    subtasks: impl Iterator<Item = &'a OperatorSubtaskState>,
    parallelism: u32,
) -> Vec<Vec<OperatorStateSlice>> {
    let handles: Vec<&OperatorStateHandle> = subtasks.map(|st| &st.operator_state).collect();
    let total: u64 = handles.iter().map(|h| h.element_count()).sum();
    let p = u64::from(parallelism.max(1));
    let (base, extra) = (total / p, total % p);
    let mut out = Vec::with_capacity(p as usize);
    // The global index where each handle starts.
    let mut starts = Vec::with_capacity(handles.len());
    let mut at = 0;
    for h in &handles {
        starts.push(at);
        at += h.element_count();
    }
    let mut begin = 0;
    for i in 0..p {
        let end = begin + base + u64::from(i < extra);
        let mut slices = Vec::new();
        for (h, &start) in handles.iter().zip(&starts) {
            let stop = start + h.element_count();
            let (lo, hi) = (begin.max(start), end.min(stop));
            if lo < hi {
                slices.extend(slice(h, lo - start, hi - lo));
            }
        }
        out.push(slices);
        begin = end;
    }
    out
}

/// Every element of `subtasks` (in subtask order), as whole-handle slices: what each subtask of
/// a restore gets of union list state. Files are handed on, not read or copied.
pub(crate) fn union_operator_state<'a>(
    subtasks: impl Iterator<Item = &'a OperatorSubtaskState>,
) -> Vec<OperatorStateSlice> {
    subtasks
        .filter_map(|st| slice(&st.operator_state, 0, st.operator_state.element_count()))
        .collect()
}

/// How an operator's snapshotted state is dealt: union if any subtask recorded union (a subtask
/// that failed or finished before its operator declared the mode wrote split, and its elements
/// are dealt with the others'; dealing everything to everyone loses nothing), split otherwise,
/// which includes every snapshot taken before the mode was recorded.
fn distribution(state: &OperatorMetadata) -> StateDistribution {
    if state
        .subtasks
        .values()
        .any(|st| st.distribution == StateDistribution::Union)
    {
        StateDistribution::Union
    } else {
        StateDistribution::Split
    }
}

/// The state every subtask of `topology` starts from when restoring `metadata` (whose files are
/// relative to `metadata_dir`). Operators are matched by stable id (by node index for metadata
/// before version 3), whatever vertex they run in now. Every subtask gets an entry; an operator
/// of the new program that the snapshot lacks is absent from its `operators` (it starts empty).
/// An operator of the snapshot that the new program lacks is skipped if it had no state or
/// `allow_non_restored_state` is set (Flink's `--allowNonRestoredState`), and refuses the
/// restore otherwise. Fails too if an operator's max parallelism changed.
pub fn assign(
    metadata: &CheckpointMetadata,
    metadata_dir: &str,
    topology: &[VertexTopology],
    allow_non_restored_state: bool,
) -> Result<Assignment, RestoreError> {
    let placements = operator_placements(topology)?;
    let mut skipped = Vec::new();
    let mut out: BTreeMap<TaskKey, TaskRestore> = BTreeMap::new();
    for (v, vertex) in topology.iter().enumerate() {
        for s in 0..vertex.parallelism {
            out.insert(
                TaskKey {
                    vertex: v as u32,
                    subtask: s,
                },
                TaskRestore {
                    checkpoint_id: metadata.checkpoint_id,
                    metadata_dir: metadata_dir.to_string(),
                    operators: BTreeMap::new(),
                },
            );
        }
    }
    for (&op, state) in &metadata.operators {
        let Some(&Placement { vertex: v, node }) = placements.get(&op) else {
            let had_state = has_state(state);
            if had_state && !allow_non_restored_state {
                return Err(RestoreError::OperatorNotMapped {
                    path: metadata_dir.to_string(),
                    operator: op,
                    uid: state.uid.clone(),
                });
            }
            skipped.push(SkippedOperator {
                operator: op,
                uid: state.uid.clone(),
                had_state,
            });
            continue;
        };
        let vertex = &topology[v];
        if vertex.max_parallelism != state.max_parallelism {
            return Err(RestoreError::MaxParallelismMismatch {
                operator: op,
                uid: state.uid.clone(),
                checkpointed: state.max_parallelism,
                new: vertex.max_parallelism,
            });
        }
        let new_p = vertex.parallelism;
        let mode = distribution(state);
        let mut shares: Vec<OperatorRestore> = vec![
            OperatorRestore {
                distribution: mode,
                ..OperatorRestore::default()
            };
            new_p as usize
        ];
        if mode == StateDistribution::Union {
            let all = union_operator_state(state.subtasks.values());
            for share in &mut shares {
                share.operator_state = all.clone();
            }
        }
        if new_p == state.parallelism {
            // Same parallelism: each subtask gets exactly what it wrote, keeping any order or
            // grouping the operator relies on.
            for (&s, st) in &state.subtasks {
                if let Some(share) = shares.get_mut(s as usize) {
                    if mode == StateDistribution::Split {
                        let n = st.operator_state.element_count();
                        share.operator_state =
                            slice(&st.operator_state, 0, n).into_iter().collect();
                    }
                    share.keyed.extend(st.keyed.iter().cloned());
                }
            }
        } else if new_p > 0 {
            if mode == StateDistribution::Split {
                let split = split_operator_state(state.subtasks.values(), new_p);
                for (share, slices) in shares.iter_mut().zip(split) {
                    share.operator_state = slices;
                }
            }
            for (i, share) in shares.iter_mut().enumerate() {
                let range = key_group_range(state.max_parallelism, new_p, i as u32);
                share.keyed.extend(
                    state
                        .subtasks
                        .values()
                        .filter_map(|st| st.keyed.as_ref())
                        .filter(|k| intersects(k.key_groups, range))
                        .cloned(),
                );
            }
        }
        for (s, share) in shares.into_iter().enumerate() {
            let key = TaskKey {
                vertex: v as u32,
                subtask: s as u32,
            };
            if let Some(task) = out.get_mut(&key) {
                task.operators.insert(node, share);
            }
        }
    }
    Ok(Assignment {
        tasks: out,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::topology::TopologyOperator;
    use crate::common::ids::{OperatorId, OperatorIdentity};
    use crate::state::{KeyedStateHandle, OperatorStateFile};
    use proptest::prelude::*;

    /// The stable id the tests give the operator of node `node`.
    fn id(node: u32) -> OperatorId {
        OperatorId(0xab00 + u128::from(node))
    }

    fn vertex(parallelism: u32, max_parallelism: u32, nodes: Vec<u32>) -> VertexTopology {
        VertexTopology {
            parallelism,
            max_parallelism,
            inputs: Vec::new(),
            operators: nodes
                .into_iter()
                .map(|node| TopologyOperator {
                    node,
                    identity: OperatorIdentity {
                        id: id(node),
                        uid: None,
                    },
                })
                .collect(),
        }
    }

    fn keyed(range: (u32, u32)) -> KeyedStateHandle {
        KeyedStateHandle {
            backend: "hashmap".into(),
            key_groups: range,
            files: Vec::new(),
            checkpointed_size: 0,
            full_size: 0,
        }
    }

    /// An operator whose subtask `s` has elements `[s, e]` and the keyed handle of its own range.
    /// The subtasks `in_files` marks keep their elements in a file `f<s>` instead of inline; its
    /// element `e` stands for `[s, e]` (see [`elements`]).
    fn metadata_with(
        op: u32,
        parallelism: u32,
        max_p: u32,
        counts: &[usize],
        in_files: &[bool],
    ) -> CheckpointMetadata {
        let mut m = CheckpointMetadata::new("0".repeat(32), 4, 0, false);
        let subtasks = (0..parallelism)
            .map(|s| {
                let n = counts.get(s as usize).copied().unwrap_or(0);
                let operator_state = if in_files.get(s as usize).copied().unwrap_or(false) {
                    OperatorStateHandle::File {
                        file: OperatorStateFile {
                            path: format!("f{s}"),
                            size: 100,
                            elements: n as u64,
                        },
                    }
                } else {
                    OperatorStateHandle::Inline((0..n).map(|e| vec![s as u8, e as u8]).collect())
                };
                (
                    s,
                    OperatorSubtaskState {
                        distribution: Default::default(),
                        operator_state,
                        keyed: Some(keyed(key_group_range(max_p, parallelism, s))),
                    },
                )
            })
            .collect();
        m.operators.insert(
            OperatorKey::Id(id(op)),
            OperatorMetadata {
                uid: None,
                parallelism,
                max_parallelism: max_p,
                subtasks,
            },
        );
        m
    }

    fn metadata(op: u32, parallelism: u32, max_p: u32, counts: &[usize]) -> CheckpointMetadata {
        metadata_with(op, parallelism, max_p, counts, &[])
    }

    /// The elements slices stand for, in order: inline ones as they are, element `e` of file
    /// `f<s>` as `[s, e]`.
    fn elements(slices: &[OperatorStateSlice]) -> Vec<Vec<u8>> {
        slices
            .iter()
            .flat_map(|slice| match slice {
                OperatorStateSlice::Inline(elements) => elements.clone(),
                OperatorStateSlice::File { file, first, count } => {
                    let s: u8 = file.path[1..].parse().expect("f<s>");
                    (*first..first + count).map(|e| vec![s, e as u8]).collect()
                }
            })
            .collect()
    }

    fn key(vertex: u32, subtask: u32) -> TaskKey {
        TaskKey { vertex, subtask }
    }

    #[test]
    fn key_group_ranges_match_flink() {
        assert_eq!(key_group_range(128, 1, 0), (0, 127));
        assert_eq!(key_group_range(128, 3, 0), (0, 42));
        assert_eq!(key_group_range(128, 3, 1), (43, 85));
        assert_eq!(key_group_range(128, 3, 2), (86, 127));
        assert_eq!(key_group_range(10, 4, 3), (8, 9));
    }

    #[test]
    fn same_parallelism_gives_each_subtask_its_own_state() {
        let m = metadata_with(7, 2, 128, &[2, 1], &[true, false]);
        let topo = vec![vertex(1, 128, vec![1]), vertex(2, 128, vec![7, 8])];
        let out = assign(&m, "/c/chk-4", &topo, false).expect("assign").tasks;
        assert_eq!(out.len(), 3, "every subtask gets an entry");
        let t1 = &out[&key(1, 1)];
        assert_eq!(t1.checkpoint_id, 4);
        assert_eq!(t1.metadata_dir, "/c/chk-4");
        assert_eq!(
            t1.operators[&7].operator_state,
            vec![OperatorStateSlice::Inline(vec![vec![1, 0]])]
        );
        assert_eq!(t1.operators[&7].keyed, vec![keyed((64, 127))]);
        // The file is handed on whole, unread.
        let t0 = &out[&key(1, 0)].operators[&7].operator_state;
        assert!(
            matches!(&t0[..], [OperatorStateSlice::File { file, first: 0, count: 2 }] if file.path == "f0"),
            "{t0:?}"
        );
        assert!(
            !t1.operators.contains_key(&8),
            "an operator without state starts empty"
        );
        assert!(out[&key(0, 0)].operators.is_empty());
    }

    #[test]
    fn scale_out_1_to_3_splits_elements_into_ranges_and_shares_the_handle() {
        for in_file in [false, true] {
            let m = metadata_with(7, 1, 128, &[5], &[in_file]);
            let out = assign(&m, "/d", &[vertex(3, 128, vec![7])], false)
                .expect("assign")
                .tasks;
            let elems = |s| elements(&out[&key(0, s)].operators[&7].operator_state);
            assert_eq!(elems(0), vec![vec![0, 0], vec![0, 1]], "file: {in_file}");
            assert_eq!(elems(1), vec![vec![0, 2], vec![0, 3]]);
            assert_eq!(elems(2), vec![vec![0, 4]]);
            for s in 0..3 {
                assert_eq!(out[&key(0, s)].operators[&7].keyed, vec![keyed((0, 127))]);
            }
        }
    }

    #[test]
    fn scale_in_3_to_2_concatenates_in_subtask_order_and_intersects_key_groups() {
        let m = metadata(7, 3, 128, &[2, 1, 2]);
        let out = assign(&m, "/d", &[vertex(2, 128, vec![7])], false)
            .expect("assign")
            .tasks;
        let op = |s| out[&key(0, s)].operators[&7].clone();
        // Elements in subtask order: [0,0] [0,1] [1,0] | [2,0] [2,1].
        assert_eq!(
            elements(&op(0).operator_state),
            vec![vec![0, 0], vec![0, 1], vec![1, 0]]
        );
        assert_eq!(
            elements(&op(1).operator_state),
            vec![vec![2, 0], vec![2, 1]]
        );
        // New ranges: [0,63] and [64,127]; old: [0,42] [43,85] [86,127].
        assert_eq!(op(0).keyed, vec![keyed((0, 42)), keyed((43, 85))]);
        assert_eq!(op(1).keyed, vec![keyed((43, 85)), keyed((86, 127))]);
    }

    /// Rescaling with files: each new subtask gets (file, element range) slices, a file may be
    /// cut between two subtasks, and inline and file handles mix.
    #[test]
    fn rescale_with_files_hands_out_element_ranges_of_the_files() {
        // 2 -> 3: f0 holds 4 elements, subtask 1 has 3 inline; 7 elements -> 3, 2, 2.
        let m = metadata_with(7, 2, 128, &[4, 3], &[true, false]);
        let out = assign(&m, "/d", &[vertex(3, 128, vec![7])], false)
            .expect("assign")
            .tasks;
        let share = |s| out[&key(0, s)].operators[&7].operator_state.clone();
        let file = |s: &[OperatorStateSlice], i: usize| match &s[i] {
            OperatorStateSlice::File { file, first, count } => (file.path.clone(), *first, *count),
            other => panic!("not a file slice: {other:?}"),
        };
        assert_eq!(share(0).len(), 1);
        assert_eq!(file(&share(0), 0), ("f0".into(), 0, 3));
        assert_eq!(file(&share(1), 0), ("f0".into(), 3, 1));
        assert_eq!(share(1)[1], OperatorStateSlice::Inline(vec![vec![1, 0]]));
        assert_eq!(
            share(2),
            vec![OperatorStateSlice::Inline(vec![vec![1, 1], vec![1, 2]])]
        );

        // 3 -> 1: every file whole, in subtask order, around the inline elements.
        let m = metadata_with(7, 3, 128, &[2, 1, 3], &[true, false, true]);
        let out = assign(&m, "/d", &[vertex(1, 128, vec![7])], false)
            .expect("assign")
            .tasks;
        let all = &out[&key(0, 0)].operators[&7].operator_state;
        assert_eq!(all.len(), 3);
        assert_eq!(file(all, 0), ("f0".into(), 0, 2));
        assert_eq!(all[1], OperatorStateSlice::Inline(vec![vec![1, 0]]));
        assert_eq!(file(all, 2), ("f2".into(), 0, 3));
    }

    #[test]
    fn max_parallelism_change_is_an_error_naming_the_operator() {
        let mut m = metadata(7, 2, 128, &[1, 1]);
        m.operators.get_mut(&OperatorKey::Id(id(7))).unwrap().uid = Some("counter".into());
        let err = assign(&m, "/d", &[vertex(2, 256, vec![7])], false).unwrap_err();
        assert!(
            matches!(
                &err,
                RestoreError::MaxParallelismMismatch {
                    operator: OperatorKey::Id(o),
                    checkpointed: 128,
                    new: 256,
                    ..
                } if *o == id(7)
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains(&format!("operator {} (uid \"counter\")", id(7))),
            "{err}"
        );
    }

    /// Flink's message, with the path, the id and the uid; the flag skips the state instead.
    #[test]
    fn state_of_an_operator_the_new_program_lacks_is_refused_unless_allowed() {
        let mut m = metadata(7, 1, 128, &[1]);
        m.operators.get_mut(&OperatorKey::Id(id(7))).unwrap().uid = Some("dedup".into());
        let topology = [vertex(1, 128, vec![8])];
        let err = assign(&m, "/sp/savepoint-1", &topology, false).unwrap_err();
        assert!(
            matches!(&err, RestoreError::OperatorNotMapped { operator: OperatorKey::Id(o), .. } if *o == id(7)),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "Failed to rollback to checkpoint/savepoint /sp/savepoint-1. Cannot map checkpoint/savepoint state for operator {} (uid \"dedup\") to the new program, because the operator is not available in the new program. If you want to allow to skip this, you can set the --allowNonRestoredState option on the CLI.",
                id(7)
            )
        );
        assert!(!err.is_retryable() && !err.reveals_foreign_files());

        let allowed = assign(&m, "/sp/savepoint-1", &topology, true).expect("allowed");
        assert_eq!(
            allowed.skipped,
            [SkippedOperator {
                operator: OperatorKey::Id(id(7)),
                uid: Some("dedup".into()),
                had_state: true,
            }]
        );
        assert!(
            allowed.tasks[&key(0, 0)].operators.is_empty(),
            "the new operator starts empty"
        );
    }

    /// An operator without state (a stateless map, a finished source) may go without the flag.
    #[test]
    fn an_operator_without_state_may_go_without_the_flag() {
        let m = metadata_with(7, 2, 128, &[0, 0], &[]);
        let mut m = m;
        for st in m
            .operators
            .get_mut(&OperatorKey::Id(id(7)))
            .unwrap()
            .subtasks
            .values_mut()
        {
            st.keyed = None;
        }
        let out = assign(&m, "/d", &[vertex(2, 128, vec![8])], false).expect("no state lost");
        assert_eq!(out.skipped.len(), 1);
        assert!(!out.skipped[0].had_state);
    }

    /// Matching is by operator id: an operator that moved into another vertex (another chain,
    /// another node index) gets its state there, and a new operator starts empty.
    #[test]
    fn state_follows_the_operator_id_into_another_vertex() {
        let m = metadata(7, 2, 128, &[1, 2]);
        // The new program: the operator of id(7) is now node 9, chained behind a new node 3 in
        // vertex 1.
        let mut moved = vertex(2, 128, vec![3, 9]);
        moved.operators[1].identity.id = id(7);
        let topology = [vertex(1, 128, vec![0]), moved];
        let out = assign(&m, "/d", &topology, false).expect("assign").tasks;
        for s in 0..2 {
            let task = &out[&key(1, s)];
            assert_eq!(task.operators.keys().copied().collect::<Vec<_>>(), [9]);
            assert_eq!(task.operators[&9].keyed.len(), 1);
        }
        assert_eq!(
            elements(&out[&key(1, 1)].operators[&9].operator_state),
            [vec![1, 0], vec![1, 1]]
        );
        assert!(out[&key(0, 0)].operators.is_empty());
    }

    /// Metadata before version 3 named operators by node index: they restore onto the new
    /// program's operator of the same node index, as before.
    #[test]
    fn old_metadata_restores_by_node_index() {
        let mut m = metadata(7, 1, 128, &[1]);
        let state = m.operators.remove(&OperatorKey::Id(id(7))).unwrap();
        m.operators.insert(OperatorKey::Node(7), state);
        m.version = 2;
        let out = assign(&m, "/d", &[vertex(1, 128, vec![7])], false).expect("assign");
        assert_eq!(out.tasks[&key(0, 0)].operators[&7].keyed.len(), 1);
        let err = assign(&m, "/d", &[vertex(1, 128, vec![8])], false).unwrap_err();
        assert!(
            matches!(
                err,
                RestoreError::OperatorNotMapped {
                    operator: OperatorKey::Node(7),
                    ..
                }
            ),
            "{err}"
        );
    }

    /// `m` with every subtask's operator state recorded as union list state.
    fn as_union(mut m: CheckpointMetadata) -> CheckpointMetadata {
        for op in m.operators.values_mut() {
            for st in op.subtasks.values_mut() {
                st.distribution = StateDistribution::Union;
            }
        }
        m
    }

    /// Union list state: at the same parallelism, scaled up and scaled down, every new subtask
    /// gets every element of every old subtask in subtask order, files handed on whole; keyed
    /// state follows key groups as with split state.
    #[test]
    fn union_state_goes_whole_to_every_subtask_at_any_parallelism() {
        let want = vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![2, 0], vec![2, 1]];
        for new_p in [3, 5, 2, 1] {
            let m = as_union(metadata_with(7, 3, 128, &[2, 1, 2], &[true, false, true]));
            let out = assign(&m, "/d", &[vertex(new_p, 128, vec![7])], false)
                .expect("assign")
                .tasks;
            for s in 0..new_p {
                let op = &out[&key(0, s)].operators[&7];
                assert_eq!(op.distribution, StateDistribution::Union);
                assert_eq!(elements(&op.operator_state), want, "p 3 -> {new_p}, {s}");
                assert!(
                    matches!(&op.operator_state[0], OperatorStateSlice::File { file, first: 0, count: 2 } if file.path == "f0"),
                    "{:?}",
                    op.operator_state
                );
                let range = key_group_range(128, new_p, s);
                let expected_keyed: Vec<_> = (0..3)
                    .map(|old| keyed(key_group_range(128, 3, old)))
                    .filter(|k| intersects(k.key_groups, range))
                    .collect();
                assert_eq!(op.keyed, expected_keyed, "p 3 -> {new_p}, {s}");
            }
        }
    }

    /// A snapshot without the mode (every one taken before union state existed) and one whose
    /// subtasks all wrote split restore split, and say so; one union subtask makes it union.
    #[test]
    fn the_recorded_mode_decides_and_split_is_the_default() {
        let m = metadata(7, 2, 128, &[2, 1]);
        let out = assign(&m, "/d", &[vertex(2, 128, vec![7])], false)
            .expect("assign")
            .tasks;
        assert_eq!(
            out[&key(0, 0)].operators[&7].distribution,
            StateDistribution::Split
        );
        assert_eq!(
            elements(&out[&key(0, 1)].operators[&7].operator_state),
            [vec![1, 0]]
        );
        let mut m = metadata(7, 2, 128, &[2, 1]);
        let op = m.operators.get_mut(&OperatorKey::Id(id(7))).unwrap();
        op.subtasks.get_mut(&1).unwrap().distribution = StateDistribution::Union;
        let out = assign(&m, "/d", &[vertex(2, 128, vec![7])], false)
            .expect("assign")
            .tasks;
        for s in 0..2 {
            let op = &out[&key(0, s)].operators[&7];
            assert_eq!(op.distribution, StateDistribution::Union);
            assert_eq!(elements(&op.operator_state).len(), 3);
        }
    }

    proptest! {
        #[test]
        fn assign_never_loses_or_duplicates_an_operator_state_element(
            old_p in 1u32..6,
            new_p in 1u32..6,
            counts in proptest::collection::vec(0usize..7, 6),
            in_files in proptest::collection::vec(any::<bool>(), 6),
        ) {
            let m = metadata_with(7, old_p, 16, &counts, &in_files);
            let out = assign(&m, "/d", &[vertex(new_p, 16, vec![7])], false).expect("assign").tasks;
            // In subtask order the shares give back every element once, in the snapshot's order.
            let got: Vec<Vec<u8>> = (0..new_p)
                .flat_map(|s| elements(&out[&key(0, s)].operators[&7].operator_state))
                .collect();
            let want: Vec<Vec<u8>> = (0..old_p)
                .flat_map(|s| (0..counts[s as usize]).map(move |e| vec![s as u8, e as u8]))
                .collect();
            prop_assert_eq!(got, want);
            // Rescaled shares are balanced (at the same parallelism each subtask keeps its own);
            // no slice is empty.
            let sizes: Vec<u64> = (0..new_p)
                .map(|s| out[&key(0, s)].operators[&7].operator_state.iter().map(|x| x.element_count()).sum())
                .collect();
            if old_p != new_p {
                prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
            for s in 0..new_p {
                prop_assert!(out[&key(0, s)].operators[&7].operator_state.iter().all(|x| x.element_count() > 0));
            }
            // Every key group of every new subtask is covered by some handle it got.
            for s in 0..new_p {
                let (first, last) = key_group_range(16, new_p, s);
                let handles = &out[&key(0, s)].operators[&7].keyed;
                for g in first..=last {
                    prop_assert!(handles.iter().any(|h| (h.key_groups.0..=h.key_groups.1).contains(&g)));
                }
            }
        }
    }
}
