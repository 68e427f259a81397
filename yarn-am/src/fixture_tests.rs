//! Tests against bytes captured from a real Hadoop 3.5.0 MiniYARNCluster
//! (tests/fixtures/mini-yarn-3.5.0, see its README).

use std::path::{Path, PathBuf};

use crate::codec::{self, ResponseFrame, ResponseStatus};
use crate::credentials::Credentials;
use crate::proto;
use crate::sasl;
use crate::types::{AMRM_TOKEN_KIND, Token};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mini-yarn-3.5.0")
}

/// Frames of one protocol, in wire order: (sequence, is_inbound, bytes).
fn frames(protocol: &str) -> Vec<(u32, bool, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir()).expect("fixture dir") {
        let name = e.expect("entry").file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_suffix(".bin") else {
            continue;
        };
        let mut parts = rest.splitn(3, '-');
        let (Some(seq), Some(proto_name), Some(direction)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if proto_name == protocol {
            let bytes = std::fs::read(dir().join(&name)).expect("fixture");
            out.push((
                seq.parse().expect("sequence number"),
                direction == "in",
                bytes,
            ));
        }
    }
    out.sort_by_key(|f| f.0);
    out
}

/// The messages inside a frame we sent (length prefix included).
fn split_out_frame(frame: &[u8]) -> Vec<Vec<u8>> {
    let len = codec::decode_frame_len([frame[0], frame[1], frame[2], frame[3]]).expect("length");
    assert_eq!(len, frame.len() - 4);
    let mut rest = &frame[4..];
    let mut msgs = Vec::new();
    while !rest.is_empty() {
        let (m, r) = codec::split_delimited(rest).expect("delimited");
        msgs.push(m.to_vec());
        rest = r;
    }
    msgs
}

fn sasl_in(bytes: &[u8]) -> proto::RpcSaslProto {
    let f = ResponseFrame::decode(bytes).expect("response frame");
    assert_eq!(f.call_id, codec::SASL_CALL_ID);
    assert_eq!(f.status, ResponseStatus::Success);
    prost::Message::decode(f.body.as_slice()).expect("RpcSaslProto")
}

fn amrm_token() -> Token {
    let bytes = std::fs::read(dir().join("container_tokens")).expect("token file");
    Credentials::parse(&bytes)
        .expect("credentials")
        .amrm_token()
        .expect("AMRM token")
        .clone()
}

/// Replays a captured SASL exchange: the server's challenge parses, our response recomputes
/// bit for bit from the token and the cnonce we sent, and the server's rspauth (which only a
/// server that accepted our response and knows the password can produce) verifies.
fn check_sasl_exchange(protocol: &str, token: &Token) {
    let f = frames(protocol);
    assert_eq!(f[0].2, codec::PREAMBLE.to_vec(), "preamble");
    let negotiate_out = split_out_frame(&f[1].2);
    let header: proto::RpcRequestHeaderProto =
        prost::Message::decode(negotiate_out[0].as_slice()).expect("header");
    assert_eq!(header.call_id, codec::SASL_CALL_ID);

    let offer = sasl_in(&f[2].2);
    assert_eq!(offer.state, proto::SASL_NEGOTIATE);
    let auth = offer
        .auths
        .iter()
        .find(|a| a.method == "TOKEN" && a.mechanism == "DIGEST-MD5")
        .expect("TOKEN/DIGEST-MD5 offered");
    assert_eq!(auth.server_id.as_deref(), Some("default"));
    assert_eq!(auth.protocol.as_deref(), Some(""));
    let challenge = sasl::DigestChallenge::parse(auth.challenge.as_deref().expect("challenge"))
        .expect("challenge parses");
    assert_eq!(challenge.realms, ["default"]);
    assert_eq!(challenge.qop, ["auth"]);
    assert_eq!(challenge.charset.as_deref(), Some("utf-8"));

    let initiate_out = split_out_frame(&f[3].2);
    let initiate: proto::RpcSaslProto =
        prost::Message::decode(initiate_out[1].as_slice()).expect("INITIATE");
    assert_eq!(initiate.state, proto::SASL_INITIATE);
    let sent = String::from_utf8(initiate.token.expect("response token")).expect("utf-8");
    let directives: std::collections::HashMap<String, String> = sasl::parse_directives(&sent)
        .expect("our response parses")
        .into_iter()
        .collect();
    let (user, pass) = sasl::token_credentials(&token.identifier, &token.password);
    assert_eq!(directives["username"], user);
    assert_eq!(directives["digest-uri"], "/default");
    let recomputed =
        sasl::digest_response(&challenge, &user, &pass, "/default", &directives["cnonce"])
            .expect("response");
    assert_eq!(
        recomputed.message, sent,
        "DIGEST-MD5 response must be reproducible"
    );

    let success = sasl_in(&f[4].2);
    assert_eq!(success.state, proto::SASL_SUCCESS);
    sasl::verify_rspauth(
        &success.token.expect("rspauth"),
        &recomputed.expected_rspauth,
    )
    .expect("server's rspauth proves it accepted our digest");
    // A different password must not verify.
    let wrong = sasl::digest_response(
        &challenge,
        &user,
        "wrong",
        "/default",
        &directives["cnonce"],
    )
    .expect("response");
    assert!(
        sasl::verify_rspauth(
            &sasl_in(&f[4].2).token.unwrap_or_default(),
            &wrong.expected_rspauth
        )
        .is_err()
    );
}

#[test]
fn credentials_file_from_a_real_node_manager() {
    let bytes = std::fs::read(dir().join("container_tokens")).expect("token file");
    assert_eq!(
        &bytes[..5],
        b"HDTS\0",
        "Hadoop 3.5 writes the Writable format"
    );
    let creds = Credentials::parse(&bytes).expect("parses");
    assert_eq!(creds.tokens.len(), 1);
    let t = creds.amrm_token().expect("AMRM token");
    assert_eq!(t.kind, AMRM_TOKEN_KIND);
    assert_eq!(t.password.len(), 20, "HMAC-SHA1 password");
    // Re-encoding gives the very same bytes.
    assert_eq!(creds.to_writable_bytes(), bytes);
    for cut in 0..bytes.len() {
        let _ = Credentials::parse(&bytes[..cut]);
    }
}

#[test]
fn sasl_with_the_resource_manager() {
    check_sasl_exchange("ApplicationMasterProtocolPB", &amrm_token());
}

#[test]
fn sasl_with_a_node_manager_using_the_nm_token_from_allocate() {
    let nm_token = frames("ApplicationMasterProtocolPB")
        .iter()
        .filter(|f| f.1)
        .filter_map(|f| ResponseFrame::decode(&f.2).ok())
        .filter(|f| f.call_id >= 0 && f.status == ResponseStatus::Success)
        .filter_map(|f| prost::Message::decode(f.body.as_slice()).ok())
        .find_map(|r: proto::AllocateResponseProto| {
            r.nm_tokens.first().and_then(|t| t.token.clone())
        })
        .expect("an allocate response carried an NM token");
    check_sasl_exchange(
        "ContainerManagementProtocolPB",
        &Token::from_proto(&nm_token),
    );
}

#[test]
fn register_and_allocate_responses_decode() {
    let f = frames("ApplicationMasterProtocolPB");
    let ins: Vec<ResponseFrame> = f
        .iter()
        .filter(|f| f.1)
        .map(|f| ResponseFrame::decode(&f.2).expect("every captured frame decodes"))
        .collect();
    let register: proto::RegisterApplicationMasterResponseProto =
        prost::Message::decode(ins[2].body.as_slice()).expect("register response");
    let max = register.maximum_capability.expect("maximum capability");
    assert_eq!((max.memory, max.virtual_cores), (Some(4096), Some(8)));
    assert_eq!(register.queue.as_deref(), Some("root.default"));
    let allocated: Vec<proto::ContainerProto> = ins[3..]
        .iter()
        .filter_map(|f| prost::Message::decode(f.body.as_slice()).ok())
        .flat_map(|r: proto::AllocateResponseProto| r.allocated_containers)
        .collect();
    assert_eq!(allocated.len(), 1, "demo_am asked for one container");
    let c = crate::types::Container::from_proto(&allocated[0]);
    assert_eq!(c.priority, 1);
    assert!(c.resource.memory_mb >= 128);
    assert!(c.token.is_some(), "a container token to start it with");
}

#[test]
fn truncated_captured_frames_never_panic() {
    for protocol in [
        "ApplicationMasterProtocolPB",
        "ContainerManagementProtocolPB",
    ] {
        for (_, inbound, bytes) in frames(protocol) {
            if inbound {
                for cut in 0..bytes.len() {
                    let _ = ResponseFrame::decode(&bytes[..cut]);
                }
            }
        }
    }
}
