//! Reading a vertex's inputs: all channels of all its input gates, in whatever order buffers
//! arrive, until every channel has ended.

use std::time::Duration;

use super::buffer::{Buffer, NetBuffer};

/// What the next read from the inputs gave.
#[derive(Debug)]
pub(crate) enum GateEvent {
    /// A buffer of records from one channel.
    Buffer(Buffer),
    /// Every channel has ended.
    Finished,
    /// Nothing arrived within the timeout.
    Timeout,
    /// A channel's producer side vanished without ending it.
    Broken(usize),
}

/// The union of all input channels of one subtask.
pub(crate) struct InputGate {
    channels: Vec<flume::Receiver<NetBuffer>>,
    ended: Vec<bool>,
    open: usize,
    next: usize,
    names: Vec<String>,
}

impl InputGate {
    /// `names` describe each channel's producer for error messages.
    pub(crate) fn new(channels: Vec<flume::Receiver<NetBuffer>>, names: Vec<String>) -> Self {
        let n = channels.len();
        InputGate {
            channels,
            ended: vec![false; n],
            open: n,
            next: 0,
            names,
        }
    }

    /// Describes channel `i`'s producer.
    pub(crate) fn channel_name(&self, i: usize) -> &str {
        self.names.get(i).map(String::as_str).unwrap_or("?")
    }

    fn accept(&mut self, i: usize, item: Result<NetBuffer, ()>) -> Option<GateEvent> {
        match item {
            Ok(NetBuffer::Data(buf)) => Some(GateEvent::Buffer(buf)),
            Ok(NetBuffer::EndOfPartition) => {
                self.ended[i] = true;
                self.open -= 1;
                if self.open == 0 {
                    Some(GateEvent::Finished)
                } else {
                    None
                }
            }
            Err(()) => Some(GateEvent::Broken(i)),
        }
    }

    /// The next buffer from any open channel, waiting at most `timeout`.
    pub(crate) fn next(&mut self, timeout: Duration) -> GateEvent {
        if self.open == 0 {
            return GateEvent::Finished;
        }
        // Fast path: poll each open channel once, round-robin, so no channel starves.
        let n = self.channels.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if self.ended[i] {
                continue;
            }
            match self.channels[i].try_recv() {
                Ok(item) => {
                    self.next = (i + 1) % n;
                    if let Some(ev) = self.accept(i, Ok(item)) {
                        return ev;
                    }
                    return self.next(timeout);
                }
                Err(flume::TryRecvError::Empty) => {}
                Err(flume::TryRecvError::Disconnected) => return GateEvent::Broken(i),
            }
        }
        let mut selector = flume::Selector::new();
        for (i, rx) in self.channels.iter().enumerate() {
            if !self.ended[i] {
                selector = selector.recv(rx, move |r| (i, r.map_err(|_| ())));
            }
        }
        match selector.wait_timeout(timeout) {
            Ok((i, item)) => self.accept(i, item).unwrap_or(GateEvent::Timeout),
            Err(_) => GateEvent::Timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rkyv::util::AlignedVec;

    #[test]
    fn gate_reads_all_channels_until_all_end() {
        let (tx1, rx1) = flume::bounded(4);
        let (tx2, rx2) = flume::bounded(4);
        let mut gate = InputGate::new(vec![rx1, rx2], vec!["a".into(), "b".into()]);
        let mut buf = AlignedVec::new();
        buf.extend_from_slice(&[1, 2, 3]);
        tx1.send(NetBuffer::Data(Buffer::local(buf.clone())))
            .unwrap();
        tx1.send(NetBuffer::EndOfPartition).unwrap();
        tx2.send(NetBuffer::Data(Buffer::local(buf))).unwrap();
        let mut buffers = 0;
        loop {
            match gate.next(Duration::from_millis(10)) {
                GateEvent::Buffer(_) => buffers += 1,
                GateEvent::Timeout => tx2.send(NetBuffer::EndOfPartition).unwrap(),
                GateEvent::Finished => break,
                GateEvent::Broken(i) => panic!("broken {i}"),
            }
        }
        assert_eq!(buffers, 2);
    }

    #[test]
    fn vanished_producer_is_reported() {
        let (tx, rx) = flume::bounded::<NetBuffer>(1);
        let mut gate = InputGate::new(vec![rx], vec!["p".into()]);
        drop(tx);
        assert!(matches!(
            gate.next(Duration::from_millis(10)),
            GateEvent::Broken(0)
        ));
    }
}
