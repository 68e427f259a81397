//! Matching allocated containers to pending requests: a deterministic core with no I/O.
//!
//! YARN grants containers asynchronously, possibly more than still wanted (a request was
//! cancelled while the grant was in flight) and possibly bigger than asked (it rounds up to
//! its minimum allocation). The matcher decides, for each granted container, which pending
//! request it serves (launch it) or that nothing wants it (release it).

use std::collections::{BTreeMap, VecDeque};

use crate::types::{Container, Resource};

/// What to do with one allocated container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<T> {
    /// Start the container for this request.
    Launch {
        /// The container to start.
        container: Container,
        /// The caller's tag of the request it serves.
        request: T,
    },
    /// Nothing is waiting for it: give it back.
    Release {
        /// The container to release.
        container: Container,
    },
}

/// Pending requests by (priority, capability), oldest first.
///
/// Use one priority per resource profile (as Flink does): YARN matches grants to asks by
/// priority, and the capability of a grant may exceed the ask.
#[derive(Debug, Clone)]
pub struct AllocationMatcher<T> {
    pending: BTreeMap<(i32, Resource), VecDeque<T>>,
}

impl<T> Default for AllocationMatcher<T> {
    fn default() -> Self {
        AllocationMatcher {
            pending: BTreeMap::new(),
        }
    }
}

impl<T> AllocationMatcher<T> {
    /// An empty matcher.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a pending request for one container.
    pub fn request(&mut self, priority: i32, capability: Resource, tag: T) {
        self.pending
            .entry((priority, capability))
            .or_default()
            .push_back(tag);
    }

    /// Withdraws the newest pending request of (priority, capability), returning its tag.
    pub fn cancel(&mut self, priority: i32, capability: Resource) -> Option<T> {
        self.pending.get_mut(&(priority, capability))?.pop_back()
    }

    /// Decides for each allocated container, oldest request first.
    pub fn on_allocated(
        &mut self,
        containers: impl IntoIterator<Item = Container>,
    ) -> Vec<Decision<T>> {
        containers
            .into_iter()
            .map(|container| {
                let slot = self.pending.iter_mut().find(|((p, cap), q)| {
                    *p == container.priority && !q.is_empty() && container.resource.fits(cap)
                });
                match slot.and_then(|(_, q)| q.pop_front()) {
                    Some(request) => Decision::Launch { container, request },
                    None => Decision::Release { container },
                }
            })
            .collect()
    }

    /// Outstanding counts per (priority, capability), including zero for profiles whose
    /// requests were all served or cancelled, so a caller can tell YARN the new count
    /// (e.g. with [`crate::AmRmClient::set_request`]).
    pub fn outstanding(&self) -> impl Iterator<Item = (i32, Resource, i32)> + '_ {
        self.pending
            .iter()
            .map(|(&(p, cap), q)| (p, cap, i32::try_from(q.len()).unwrap_or(i32::MAX)))
    }

    /// Number of pending requests in all profiles.
    pub fn pending_len(&self) -> usize {
        self.pending.values().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};

    fn container(seq: i64, priority: i32, mem: i64) -> Container {
        Container {
            id: ContainerId {
                attempt: ApplicationAttemptId {
                    application: ApplicationId {
                        cluster_timestamp: 1,
                        id: 1,
                    },
                    attempt: 1,
                },
                id: seq,
            },
            node: NodeId {
                host: "n".into(),
                port: 1,
            },
            node_http_address: String::new(),
            resource: Resource::new(mem, 1),
            priority,
            token: None,
        }
    }

    #[test]
    fn matches_oldest_request_of_same_priority() {
        let mut m = AllocationMatcher::new();
        m.request(1, Resource::new(100, 1), "tm-a");
        m.request(1, Resource::new(100, 1), "tm-b");
        m.request(2, Resource::new(500, 1), "big");
        let d = m.on_allocated([container(2, 1, 128), container(3, 2, 512)]);
        assert!(matches!(
            &d[0],
            Decision::Launch {
                request: "tm-a",
                ..
            }
        ));
        assert!(matches!(&d[1], Decision::Launch { request: "big", .. }));
        let left: Vec<_> = m.outstanding().collect();
        assert_eq!(
            left,
            [(1, Resource::new(100, 1), 1), (2, Resource::new(500, 1), 0)]
        );
    }

    #[test]
    fn surplus_wrong_priority_and_too_small_are_released() {
        let mut m = AllocationMatcher::new();
        m.request(1, Resource::new(256, 1), 7u32);
        let d = m.on_allocated([
            container(2, 3, 512),
            container(3, 1, 128),
            container(4, 1, 256),
            container(5, 1, 256),
        ]);
        let kinds: Vec<bool> = d
            .iter()
            .map(|d| matches!(d, Decision::Launch { .. }))
            .collect();
        assert_eq!(kinds, [false, false, true, false]);
        assert_eq!(m.pending_len(), 0);
    }

    proptest::proptest! {
        /// Whatever YARN grants: one decision per container, a launch only for a pending
        /// request of the same priority that the container fits, never more launches than
        /// requests, and pending + launched == requested per profile.
        #[test]
        fn decisions_are_consistent(
            requests in proptest::collection::vec((1i32..4, 1i64..4), 0..12),
            grants in proptest::collection::vec((1i32..5, 0i64..5), 0..16),
        ) {
            let mut m = AllocationMatcher::new();
            for (i, &(p, mem)) in requests.iter().enumerate() {
                m.request(p, Resource::new(mem * 100, 1), i);
            }
            let containers: Vec<Container> = grants
                .iter()
                .enumerate()
                .map(|(i, &(p, mem))| container(i as i64, p, mem * 100))
                .collect();
            let decisions = m.on_allocated(containers.clone());
            proptest::prop_assert_eq!(decisions.len(), containers.len());
            let mut launched = std::collections::HashSet::new();
            for d in &decisions {
                if let Decision::Launch { container, request } = d {
                    let (p, mem) = requests[*request];
                    proptest::prop_assert_eq!(container.priority, p);
                    proptest::prop_assert!(container.resource.fits(&Resource::new(mem * 100, 1)));
                    proptest::prop_assert!(launched.insert(*request), "request served twice");
                }
            }
            proptest::prop_assert_eq!(launched.len() + m.pending_len(), requests.len());
        }
    }

    #[test]
    fn cancelled_request_releases_late_grant() {
        let mut m = AllocationMatcher::new();
        m.request(1, Resource::new(64, 1), ());
        assert_eq!(m.cancel(1, Resource::new(64, 1)), Some(()));
        assert!(matches!(
            m.on_allocated([container(2, 1, 64)])[0],
            Decision::Release { .. }
        ));
        assert_eq!(m.cancel(1, Resource::new(64, 1)), None);
    }
}
