//! Restore assignment: which part of a snapshot each subtask of the (possibly rescaled) job
//! starts from. Flink's rules: operator state is a list of elements redistributed round-robin,
//! keyed state follows key groups, and the number of key groups (max parallelism) never changes.

use std::collections::BTreeMap;

use super::metadata::{CheckpointMetadata, RestoreError};
use super::topology::{TaskKey, VertexTopology};
use super::{OperatorRestore, TaskRestore};

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

/// Which vertex each operator id belongs to.
pub(crate) fn operator_vertices(
    topology: &[VertexTopology],
) -> Result<BTreeMap<u32, usize>, RestoreError> {
    let mut map = BTreeMap::new();
    for (v, vertex) in topology.iter().enumerate() {
        for &op in &vertex.operators {
            if map.insert(op, v).is_some() {
                return Err(RestoreError::DuplicateOperator { operator: op });
            }
        }
    }
    Ok(map)
}

/// The state every subtask of `topology` starts from when restoring `metadata` (whose files are
/// relative to `metadata_dir`). Every subtask gets an entry; an operator of the new program that
/// the snapshot lacks is absent from its `operators` (it starts empty). Fails if the snapshot
/// holds an operator the new program lacks, or one whose max parallelism changed.
pub fn assign(
    metadata: &CheckpointMetadata,
    metadata_dir: &str,
    topology: &[VertexTopology],
) -> Result<BTreeMap<TaskKey, TaskRestore>, RestoreError> {
    let vertices = operator_vertices(topology)?;
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
        let Some(&v) = vertices.get(&op) else {
            return Err(RestoreError::OperatorNotMapped {
                checkpoint_id: metadata.checkpoint_id,
                operator: op,
            });
        };
        let vertex = &topology[v];
        if vertex.max_parallelism != state.max_parallelism {
            return Err(RestoreError::MaxParallelismMismatch {
                operator: op,
                checkpointed: state.max_parallelism,
                new: vertex.max_parallelism,
            });
        }
        let new_p = vertex.parallelism;
        let mut shares: Vec<OperatorRestore> = vec![OperatorRestore::default(); new_p as usize];
        if new_p == state.parallelism {
            // Same parallelism: each subtask gets exactly what it wrote, keeping any order or
            // grouping the operator relies on.
            for (&s, st) in &state.subtasks {
                if let Some(share) = shares.get_mut(s as usize) {
                    share.operator_state = st.operator_state.clone();
                    share.keyed.extend(st.keyed.iter().cloned());
                }
            }
        } else if new_p > 0 {
            let elements = state
                .subtasks
                .values()
                .flat_map(|st| st.operator_state.iter());
            for (j, element) in elements.enumerate() {
                shares[j % new_p as usize]
                    .operator_state
                    .push(element.clone());
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
                task.operators.insert(op, share);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::OperatorSubtaskState;
    use crate::checkpoint::metadata::OperatorMetadata;
    use crate::state::KeyedStateHandle;
    use proptest::prelude::*;

    fn vertex(parallelism: u32, max_parallelism: u32, operators: Vec<u32>) -> VertexTopology {
        VertexTopology {
            parallelism,
            max_parallelism,
            inputs: Vec::new(),
            operators,
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
    fn metadata(op: u32, parallelism: u32, max_p: u32, elements: &[usize]) -> CheckpointMetadata {
        let mut m = CheckpointMetadata::new("0".repeat(32), 4, 0, false);
        let subtasks = (0..parallelism)
            .map(|s| {
                let n = elements.get(s as usize).copied().unwrap_or(0);
                (
                    s,
                    OperatorSubtaskState {
                        operator_state: (0..n).map(|e| vec![s as u8, e as u8]).collect(),
                        keyed: Some(keyed(key_group_range(max_p, parallelism, s))),
                    },
                )
            })
            .collect();
        m.operators.insert(
            op,
            OperatorMetadata {
                parallelism,
                max_parallelism: max_p,
                subtasks,
            },
        );
        m
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
        let m = metadata(7, 2, 128, &[2, 1]);
        let topo = vec![vertex(1, 128, vec![1]), vertex(2, 128, vec![7, 8])];
        let out = assign(&m, "/c/chk-4", &topo).expect("assign");
        assert_eq!(out.len(), 3, "every subtask gets an entry");
        let t1 = &out[&key(1, 1)];
        assert_eq!(t1.checkpoint_id, 4);
        assert_eq!(t1.metadata_dir, "/c/chk-4");
        assert_eq!(t1.operators[&7].operator_state, vec![vec![1, 0]]);
        assert_eq!(t1.operators[&7].keyed, vec![keyed((64, 127))]);
        assert!(
            !t1.operators.contains_key(&8),
            "an operator without state starts empty"
        );
        assert!(out[&key(0, 0)].operators.is_empty());
    }

    #[test]
    fn scale_out_1_to_3_round_robins_elements_and_shares_the_handle() {
        let m = metadata(7, 1, 128, &[5]);
        let out = assign(&m, "/d", &[vertex(3, 128, vec![7])]).expect("assign");
        let elems = |s| out[&key(0, s)].operators[&7].operator_state.clone();
        assert_eq!(elems(0), vec![vec![0, 0], vec![0, 3]]);
        assert_eq!(elems(1), vec![vec![0, 1], vec![0, 4]]);
        assert_eq!(elems(2), vec![vec![0, 2]]);
        for s in 0..3 {
            assert_eq!(out[&key(0, s)].operators[&7].keyed, vec![keyed((0, 127))]);
        }
    }

    #[test]
    fn scale_in_3_to_2_concatenates_in_subtask_order_and_intersects_key_groups() {
        let m = metadata(7, 3, 128, &[2, 1, 2]);
        let out = assign(&m, "/d", &[vertex(2, 128, vec![7])]).expect("assign");
        let op = |s| out[&key(0, s)].operators[&7].clone();
        // Elements in subtask order: [0,0] [0,1] [1,0] [2,0] [2,1].
        assert_eq!(
            op(0).operator_state,
            vec![vec![0, 0], vec![1, 0], vec![2, 1]]
        );
        assert_eq!(op(1).operator_state, vec![vec![0, 1], vec![2, 0]]);
        // New ranges: [0,63] and [64,127]; old: [0,42] [43,85] [86,127].
        assert_eq!(op(0).keyed, vec![keyed((0, 42)), keyed((43, 85))]);
        assert_eq!(op(1).keyed, vec![keyed((43, 85)), keyed((86, 127))]);
    }

    #[test]
    fn max_parallelism_change_is_an_error_naming_the_operator() {
        let m = metadata(7, 2, 128, &[1, 1]);
        let err = assign(&m, "/d", &[vertex(2, 256, vec![7])]).unwrap_err();
        assert!(
            matches!(
                err,
                RestoreError::MaxParallelismMismatch {
                    operator: 7,
                    checkpointed: 128,
                    new: 256
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("operator 7"), "{err}");
    }

    #[test]
    fn an_operator_the_new_program_lacks_is_an_error() {
        let m = metadata(7, 1, 128, &[1]);
        let err = assign(&m, "/d", &[vertex(1, 128, vec![8])]).unwrap_err();
        assert!(
            matches!(err, RestoreError::OperatorNotMapped { operator: 7, .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("cannot be mapped to the new program"),
            "{err}"
        );
    }

    proptest! {
        #[test]
        fn assign_never_loses_or_duplicates_an_operator_state_element(
            old_p in 1u32..6,
            new_p in 1u32..6,
            counts in proptest::collection::vec(0usize..7, 6),
        ) {
            let m = metadata(7, old_p, 16, &counts);
            let out = assign(&m, "/d", &[vertex(new_p, 16, vec![7])]).expect("assign");
            let mut got: Vec<Vec<u8>> = out
                .values()
                .flat_map(|t| t.operators[&7].operator_state.clone())
                .collect();
            let mut want: Vec<Vec<u8>> = m.operators[&7]
                .subtasks
                .values()
                .flat_map(|s| s.operator_state.clone())
                .collect();
            got.sort();
            want.sort();
            prop_assert_eq!(got, want);
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
