//! Stable operator ids, as Flink's `StreamGraphHasherV2` derives them: what checkpoints and
//! savepoints address an operator's state by, so that a new version of a program finds the
//! state of its old operators.
//!
//! An operator with a uid gets the uid's hash. Any other gets a hash of its place in the
//! dataflow: its position in a breadth-first walk from the sources, how many outputs it has,
//! and the ids of its inputs in order. The same program therefore gets the same ids every time,
//! and an operator keeps its id as long as nothing upstream of it (nor the walk's order up to
//! it) changes; operators added further downstream, or in another branch visited later, leave
//! it alone. Node indices, chaining and parallelism do not enter the hash: an operator that
//! moves into or out of a chain keeps its id.

use std::collections::{BTreeMap, VecDeque};

use super::GraphError;
use crate::common::ids::{OperatorId, OperatorIdentity};

/// One node of the stream graph as the hasher sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeShape {
    /// Its name, for errors.
    pub(crate) name: String,
    /// The uid the program gave it.
    pub(crate) uid: Option<String>,
    /// The nodes its inputs come from, in input order (a node may appear twice).
    pub(crate) inputs: Vec<usize>,
    /// The nodes its outputs go to, in output order.
    pub(crate) outputs: Vec<usize>,
}

/// The stable id of every node, by node index. Refuses two operators with one uid, naming it,
/// and (astronomically unlikely) two operators whose ids collide.
pub(crate) fn operator_ids(nodes: &[NodeShape]) -> Result<Vec<OperatorIdentity>, GraphError> {
    let mut by_uid: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, node) in nodes.iter().enumerate() {
        if let Some(uid) = node.uid.as_deref()
            && let Some(first) = by_uid.insert(uid, index)
        {
            return Err(GraphError::DuplicateUid {
                uid: uid.to_string(),
                first: nodes[first].name.clone(),
                second: node.name.clone(),
            });
        }
    }
    let mut ids: Vec<Option<OperatorId>> = vec![None; nodes.len()];
    let mut hashed = 0u32;
    // Sources in node order first; a node is hashed once all its inputs are, and queued again
    // by each input that gets hashed before it is ready.
    let mut queue: VecDeque<usize> = (0..nodes.len())
        .filter(|&n| nodes[n].inputs.is_empty())
        .collect();
    let mut queued: Vec<bool> = vec![false; nodes.len()];
    for &n in &queue {
        queued[n] = true;
    }
    while let Some(n) = queue.pop_front() {
        queued[n] = false;
        if ids[n].is_some() {
            continue;
        }
        let node = &nodes[n];
        let inputs: Option<Vec<OperatorId>> = node.inputs.iter().map(|&i| ids[i]).collect();
        let Some(inputs) = inputs else {
            // An input is not hashed yet: that input queues this node again when it is.
            continue;
        };
        let id = match node.uid.as_deref() {
            Some(uid) => OperatorId::from_uid(uid),
            None => generated(hashed, node.outputs.len(), &inputs),
        };
        ids[n] = Some(id);
        hashed += 1;
        for &target in &node.outputs {
            if ids[target].is_none() && !queued[target] {
                queued[target] = true;
                queue.push_back(target);
            }
        }
    }
    let mut seen: BTreeMap<OperatorId, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(nodes.len());
    for (index, (node, id)) in nodes.iter().zip(ids).enumerate() {
        let Some(id) = id else {
            // Not reachable from a source: job_graph refuses such a node before asking.
            return Err(GraphError::Unconnected(node.name.clone()));
        };
        if let Some(first) = seen.insert(id, index) {
            return Err(GraphError::OperatorIdCollision {
                id: id.to_string(),
                first: nodes[first].name.clone(),
                second: node.name.clone(),
            });
        }
        out.push(OperatorIdentity {
            id,
            uid: node.uid.clone(),
        });
    }
    Ok(out)
}

/// The id of an operator without a uid: its place in the walk, its number of outputs, and its
/// inputs' ids in order (Flink hashes the same three things).
fn generated(position: u32, outputs: usize, inputs: &[OperatorId]) -> OperatorId {
    let position = position.to_be_bytes();
    let outputs = (outputs as u64).to_be_bytes();
    let inputs: Vec<u8> = inputs.iter().flat_map(|i| i.0.to_be_bytes()).collect();
    OperatorId::digest(&[b"sluice-operator-node\0", &position, &outputs, &inputs])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StreamExecutionEnvironment;

    fn shape(name: &str, uid: Option<&str>, inputs: &[usize], outputs: &[usize]) -> NodeShape {
        NodeShape {
            name: name.into(),
            uid: uid.map(str::to_string),
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
        }
    }

    /// The ids of the job graph's operators by node index.
    fn ids_of(env: StreamExecutionEnvironment) -> Vec<OperatorIdentity> {
        let job = env.into_graph().job_graph("t", 2).expect("a job graph");
        let mut by_node = BTreeMap::new();
        for v in &job.vertices {
            for (n, id) in v.nodes.iter().zip(&v.operators) {
                by_node.insert(*n, id.clone());
            }
        }
        by_node.into_values().collect()
    }

    /// source -> map -> keyed sum -> sink, with `extra` applied to the summed stream before
    /// the sink and uids on the stateful operators when `uids`.
    fn program(uids: bool, extra_map: bool) -> StreamExecutionEnvironment {
        let env = StreamExecutionEnvironment::new();
        let mut source = env.from_sequence(0, 10);
        if uids {
            source = source.uid("numbers");
        }
        let mut sums = source
            .map(|n: u64| (n % 3, n))
            .key_by(|r: &(u64, u64)| r.0)
            .sum();
        if uids {
            sums = sums.uid("sums");
        }
        if extra_map {
            sums = sums.map(|r: (u64, u64)| r);
        }
        sums.discard();
        env
    }

    #[test]
    fn the_same_program_gets_the_same_ids_every_time() {
        for uids in [false, true] {
            let first = ids_of(program(uids, false));
            assert_eq!(first, ids_of(program(uids, false)), "uids: {uids}");
            let distinct: std::collections::BTreeSet<_> = first.iter().map(|i| i.id).collect();
            assert_eq!(distinct.len(), first.len(), "ids are distinct: {first:?}");
        }
    }

    #[test]
    fn a_uid_decides_the_id_whatever_the_dataflow() {
        let with = ids_of(program(true, false));
        assert_eq!(with[0].id, OperatorId::from_uid("numbers"));
        assert_eq!(with[0].uid.as_deref(), Some("numbers"));
        assert_eq!(with[2].id, OperatorId::from_uid("sums"));
        let without = ids_of(program(false, false));
        assert_ne!(with[2].id, without[2].id);
        assert_eq!(without[2].uid, None);
        // The map between the source and the sum goes: generated ids downstream of it change,
        // the uids' do not.
        let env = StreamExecutionEnvironment::new();
        env.from_sequence(0, 10)
            .uid("numbers")
            .key_by(|n: &u64| n % 3)
            .reduce(|a, b| a + b)
            .uid("sums")
            .discard();
        let changed = ids_of(env);
        assert_eq!(changed[0].id, with[0].id);
        assert_eq!(changed[1].id, with[2].id);
    }

    #[test]
    fn an_operator_added_downstream_leaves_the_upstream_ids_alone() {
        let before = ids_of(program(false, false));
        let after = ids_of(program(false, true));
        assert_eq!(after.len(), before.len() + 1);
        // Source, map and sum keep their ids; the sink's input changed, so its id did.
        assert_eq!(after[..3], before[..3]);
        assert_ne!(after[4].id, before[3].id);
    }

    #[test]
    fn an_operator_moved_out_of_its_chain_keeps_its_id() {
        let build = |rebalance: bool| {
            let env = StreamExecutionEnvironment::new();
            let source = env.from_sequence(0, 10);
            let source = if rebalance {
                source.rebalance()
            } else {
                source
            };
            source.map(|n: u64| n + 1).discard();
            env
        };
        let (chained, apart) = (build(false), build(true));
        let graph = chained.into_graph().job_graph("t", 2).expect("graph");
        assert_eq!(graph.vertices.len(), 1);
        let graph2 = apart.into_graph().job_graph("t", 2).expect("graph");
        assert_eq!(graph2.vertices.len(), 2);
        assert_eq!(
            graph.vertices[0].operators[1],
            graph2.vertices[1].operators[0]
        );
    }

    #[test]
    fn two_operators_with_one_uid_are_refused_naming_the_uid() {
        let env = StreamExecutionEnvironment::new();
        env.from_sequence(0, 10)
            .uid("twice")
            .map(|n: u64| n)
            .uid("twice")
            .discard();
        let err = env.into_graph().job_graph("t", 1).unwrap_err();
        assert!(matches!(&err, GraphError::DuplicateUid { uid, .. } if uid == "twice"));
        assert!(err.to_string().contains("\"twice\""), "{err}");
    }

    #[test]
    fn a_node_waits_for_all_its_inputs_and_input_order_counts() {
        // 0 and 1 are sources; 2 reads 0 then 1; 3 reads 1 then 0.
        let nodes = vec![
            shape("a", None, &[], &[2, 3]),
            shape("b", None, &[], &[2, 3]),
            shape("c", None, &[0, 1], &[]),
            shape("d", None, &[1, 0], &[]),
        ];
        let ids = operator_ids(&nodes).expect("ids");
        assert_ne!(ids[2].id, ids[3].id);
        assert_eq!(ids, operator_ids(&nodes).expect("ids"));
        // A chain whose input is reached late: 3 reads from 2, which waits for 1.
        let nodes = vec![
            shape("a", None, &[], &[2]),
            shape("b", None, &[], &[3]),
            shape("c", None, &[0, 3], &[]),
            shape("d", None, &[1], &[2]),
        ];
        let ids = operator_ids(&nodes).expect("ids");
        assert_eq!(ids.len(), 4);
    }
}
