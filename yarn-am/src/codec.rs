//! Hadoop IPC framing, with no I/O: what goes on the socket and how to take it apart.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes; inside, each protobuf
//! message is preceded by its length as a base-128 varint (Java's `writeDelimitedTo`).

use crate::error::DecodeError;
use crate::proto;

/// Largest frame accepted from a server. Hadoop's own client default
/// (`ipc.maximum.response.length`) is 128 MiB; a length above that means a corrupt stream or a
/// peer that is not speaking Hadoop RPC, and must not make us allocate gigabytes.
pub const MAX_FRAME_LEN: usize = 128 * 1024 * 1024;

/// The connection preamble: `hrpc`, version 9, service class 0, auth protocol SASL (-33).
pub(crate) const PREAMBLE: [u8; 7] = [b'h', b'r', b'p', b'c', 9, 0, 0xDF];

/// Call id of SASL exchange frames (`AuthProtocol.SASL.callId`).
pub(crate) const SASL_CALL_ID: i32 = -33;
/// Call id of the connection context (`CONNECTION_CONTEXT_CALL_ID`).
pub(crate) const CONNECTION_CONTEXT_CALL_ID: i32 = -3;

/// Appends `value` as a protobuf base-128 varint.
pub fn encode_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a protobuf base-128 varint from the front of `buf`; returns it and the bytes used.
///
/// Rejects truncated input and encodings longer than 10 bytes or overflowing 64 bits.
pub fn decode_varint(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
    let mut value: u64 = 0;
    for (i, &b) in buf.iter().enumerate() {
        if i == 9 && b > 1 {
            return Err(DecodeError::new("varint overflows 64 bits"));
        }
        value |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
        if i == 9 {
            break;
        }
    }
    if buf.len() >= 10 {
        Err(DecodeError::new("varint longer than 10 bytes"))
    } else {
        Err(DecodeError::new("truncated varint"))
    }
}

/// Splits one varint-length-delimited message off the front of `buf`: `(message, rest)`.
pub fn split_delimited(buf: &[u8]) -> Result<(&[u8], &[u8]), DecodeError> {
    let (len, used) = decode_varint(buf)?;
    let rest = &buf[used..];
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= rest.len())
        .ok_or_else(|| {
            DecodeError::new(format!(
                "delimited message claims {len} bytes, {} remain",
                rest.len()
            ))
        })?;
    Ok(rest.split_at(len))
}

/// Builds one frame from protobuf messages: the 4-byte length, then each message delimited.
pub fn encode_frame(messages: &[&dyn MessageBytes]) -> Vec<u8> {
    let mut body = Vec::new();
    for m in messages {
        let bytes = m.to_bytes();
        encode_varint(bytes.len() as u64, &mut body);
        body.extend_from_slice(&bytes);
    }
    let mut frame = Vec::with_capacity(body.len() + 4);
    // Frames we build are tiny (requests of an AM); the cast cannot truncate in practice and
    // a server would reject an oversize frame anyway.
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Reads a frame's length prefix and checks it against [`MAX_FRAME_LEN`].
pub fn decode_frame_len(prefix: [u8; 4]) -> Result<usize, DecodeError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_FRAME_LEN {
        return Err(DecodeError::new(format!(
            "frame of {len} bytes exceeds the {MAX_FRAME_LEN}-byte limit"
        )));
    }
    Ok(len)
}

/// Anything that serializes to bytes; lets [`encode_frame`] take prost messages of different
/// types in one slice.
pub trait MessageBytes {
    /// The serialized message (without length prefix).
    fn to_bytes(&self) -> Vec<u8>;
}

impl<M: prost::Message> MessageBytes for M {
    fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

/// The outcome a server reports in a response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseStatus {
    /// The call succeeded; a response message follows.
    Success,
    /// The call failed; the connection stays usable.
    Error,
    /// The call failed and the server closes the connection.
    Fatal,
}

/// One decoded response frame (the bytes after the 4-byte length).
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseFrame {
    /// The call id this answers (negative for SASL: -33).
    pub call_id: i32,
    /// Success, error or fatal.
    pub status: ResponseStatus,
    /// The Java exception class, on error.
    pub exception_class: Option<String>,
    /// The exception message, on error.
    pub error_message: Option<String>,
    /// The delimited response message's bytes (empty on error).
    pub body: Vec<u8>,
}

impl ResponseFrame {
    /// Decodes the payload of a response frame: the delimited `RpcResponseHeaderProto`, then
    /// (on success) the delimited response message.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let (header_bytes, rest) = split_delimited(payload)?;
        let header: proto::RpcResponseHeaderProto = prost::Message::decode(header_bytes)?;
        let status = match header.status {
            proto::RPC_STATUS_SUCCESS => ResponseStatus::Success,
            proto::RPC_STATUS_ERROR => ResponseStatus::Error,
            proto::RPC_STATUS_FATAL => ResponseStatus::Fatal,
            other => return Err(DecodeError::new(format!("unknown RPC status {other}"))),
        };
        let body = if status == ResponseStatus::Success && !rest.is_empty() {
            let (body, _trailing) = split_delimited(rest)?;
            body.to_vec()
        } else {
            Vec::new()
        };
        Ok(ResponseFrame {
            call_id: header.call_id as i32,
            status,
            exception_class: header.exception_class_name,
            error_message: header.error_msg,
            body,
        })
    }
}

/// The request header every frame from the client starts with.
pub(crate) fn request_header(
    call_id: i32,
    client_id: &[u8],
    retry: i32,
) -> proto::RpcRequestHeaderProto {
    proto::RpcRequestHeaderProto {
        rpc_kind: Some(proto::RPC_PROTOCOL_BUFFER),
        rpc_op: Some(proto::RPC_FINAL_PACKET),
        call_id,
        client_id: client_id.to_vec(),
        retry_count: Some(retry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varint_known_values() {
        let mut v = Vec::new();
        encode_varint(300, &mut v);
        assert_eq!(v, [0xAC, 0x02]);
        assert_eq!(decode_varint(&v), Ok((300, 2)));
        assert!(decode_varint(&[0x80]).is_err());
        assert!(decode_varint(&[0xFF; 11]).is_err());
        assert!(
            decode_varint(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]).is_err()
        );
    }

    #[test]
    fn frame_len_limit() {
        assert_eq!(decode_frame_len([0, 0, 1, 0]), Ok(256));
        assert!(decode_frame_len([0xFF, 0xFF, 0xFF, 0xFF]).is_err());
    }

    #[test]
    fn garbage_payloads_are_errors() {
        for bytes in [
            &b""[..],
            &[0x05, 1, 2][..],
            &[0x03, 0x08, 0x01][..],
            &[0x02, 0x10, 0x07][..],
            &[0xFF; 3][..],
        ] {
            assert!(ResponseFrame::decode(bytes).is_err(), "{bytes:?}");
        }
    }

    proptest! {
        #[test]
        fn varint_roundtrip(x in any::<u64>()) {
            let mut v = Vec::new();
            encode_varint(x, &mut v);
            prop_assert_eq!(decode_varint(&v), Ok((x, v.len())));
            prop_assert_eq!(v.len(), prost::encoding::encoded_len_varint(x));
        }

        #[test]
        fn varint_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = decode_varint(&bytes);
        }

        #[test]
        fn response_frame_roundtrip(call_id in any::<i32>(), status in 0i32..3, body in proptest::collection::vec(any::<u8>(), 0..64),
                                    class in proptest::option::of("[a-zA-Z.]{1,20}")) {
            let header = proto::RpcResponseHeaderProto {
                call_id: call_id as u32,
                status,
                exception_class_name: class.clone(),
                ..Default::default()
            };
            let mut payload = Vec::new();
            let h = prost::Message::encode_to_vec(&header);
            encode_varint(h.len() as u64, &mut payload);
            payload.extend_from_slice(&h);
            encode_varint(body.len() as u64, &mut payload);
            payload.extend_from_slice(&body);
            let frame = ResponseFrame::decode(&payload).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(frame.call_id, call_id);
            prop_assert_eq!(frame.exception_class, class);
            if status == 0 { prop_assert_eq!(frame.body, body); } else { prop_assert!(frame.body.is_empty()); }
        }

        #[test]
        fn encode_frame_is_length_prefixed(call_id in any::<i32>(), client in proptest::collection::vec(any::<u8>(), 0..16)) {
            let header = request_header(call_id, &client, -1);
            let frame = encode_frame(&[&header]);
            let len = decode_frame_len([frame[0], frame[1], frame[2], frame[3]]).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(len, frame.len() - 4);
            let (msg, rest) = split_delimited(&frame[4..]).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(rest.is_empty());
            let back: proto::RpcRequestHeaderProto = prost::Message::decode(msg).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back.call_id, call_id);
            prop_assert_eq!(back.client_id, client);
        }

        #[test]
        fn response_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ResponseFrame::decode(&bytes);
        }
    }
}
