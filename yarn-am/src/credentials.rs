//! Hadoop's token storage file, as a NodeManager writes it for every container at
//! `$HADOOP_TOKEN_FILE_LOCATION`.
//!
//! Layout: `HDTS`, a format byte, then either Hadoop Writables (format 0: vint count, and per
//! token Text alias, vint-length identifier, vint-length password, Text kind, Text service;
//! then vint count of secret keys, each Text alias and vint-length bytes) or one
//! varint-delimited `CredentialsProto` (format 1).

use std::path::Path;

use crate::error::{CredentialsError, DecodeError};
use crate::proto;
use crate::types::{AMRM_TOKEN_KIND, Token};

/// Environment variable through which a NodeManager names the container's credentials file.
pub const TOKEN_FILE_ENV: &str = "HADOOP_TOKEN_FILE_LOCATION";

/// The tokens and secret keys of a Hadoop credentials file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// Tokens by alias, in file order.
    pub tokens: Vec<(String, Token)>,
    /// Secret keys by alias, in file order.
    pub secrets: Vec<(String, Vec<u8>)>,
}

impl Credentials {
    /// Reads the file named by `HADOOP_TOKEN_FILE_LOCATION`.
    pub fn from_env() -> Result<Self, CredentialsError> {
        let path = std::env::var_os(TOKEN_FILE_ENV).ok_or(CredentialsError::NoTokenFile)?;
        Self::read(Path::new(&path))
    }

    /// Reads and parses a credentials file.
    pub fn read(path: &Path) -> Result<Self, CredentialsError> {
        let bytes = std::fs::read(path).map_err(|source| CredentialsError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self::parse(&bytes)?)
    }

    /// Parses the bytes of a credentials file (either format).
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        let rest = bytes
            .strip_prefix(b"HDTS")
            .ok_or_else(|| DecodeError::new("credentials file does not start with HDTS"))?;
        let (&format, rest) = rest
            .split_first()
            .ok_or_else(|| DecodeError::new("credentials file ends after its magic"))?;
        match format {
            0 => parse_writable(rest),
            1 => parse_proto(rest),
            other => Err(DecodeError::new(format!(
                "unknown credentials format {other} (0 = Writable, 1 = protobuf)"
            ))),
        }
    }

    /// The first token of `kind`.
    pub fn token_of_kind(&self, kind: &str) -> Option<&Token> {
        self.tokens.iter().map(|(_, t)| t).find(|t| t.kind == kind)
    }

    /// The ApplicationMaster's token for the scheduler (`YARN_AM_RM_TOKEN`).
    pub fn amrm_token(&self) -> Result<&Token, CredentialsError> {
        self.token_of_kind(AMRM_TOKEN_KIND)
            .ok_or_else(|| CredentialsError::MissingToken(AMRM_TOKEN_KIND.to_string()))
    }

    /// Serializes in the Writable format (format 0), as Hadoop writes by default. Useful to
    /// hand tokens on to containers in [`crate::LaunchContext::tokens`].
    pub fn to_writable_bytes(&self) -> Vec<u8> {
        let mut out = b"HDTS\0".to_vec();
        write_vint(self.tokens.len() as i64, &mut out);
        for (alias, t) in &self.tokens {
            write_bytes(alias.as_bytes(), &mut out);
            write_bytes(&t.identifier, &mut out);
            write_bytes(&t.password, &mut out);
            write_bytes(t.kind.as_bytes(), &mut out);
            write_bytes(t.service.as_bytes(), &mut out);
        }
        write_vint(self.secrets.len() as i64, &mut out);
        for (alias, s) in &self.secrets {
            write_bytes(alias.as_bytes(), &mut out);
            write_bytes(s, &mut out);
        }
        out
    }
}

fn parse_writable(mut buf: &[u8]) -> Result<Credentials, DecodeError> {
    let mut creds = Credentials::default();
    let n = read_count(&mut buf)?;
    for _ in 0..n {
        let alias = read_text(&mut buf)?;
        let identifier = read_bytes(&mut buf)?.to_vec();
        let password = read_bytes(&mut buf)?.to_vec();
        let kind = read_text(&mut buf)?;
        let service = read_text(&mut buf)?;
        creds.tokens.push((
            alias,
            Token {
                identifier,
                password,
                kind,
                service,
            },
        ));
    }
    // Older writers stop after the tokens; treat a missing secrets section as empty.
    if !buf.is_empty() {
        let n = read_count(&mut buf)?;
        for _ in 0..n {
            let alias = read_text(&mut buf)?;
            let value = read_bytes(&mut buf)?.to_vec();
            creds.secrets.push((alias, value));
        }
    }
    Ok(creds)
}

fn parse_proto(buf: &[u8]) -> Result<Credentials, DecodeError> {
    let (msg, _rest) = crate::codec::split_delimited(buf)?;
    let p: proto::CredentialsProto = prost::Message::decode(msg)?;
    Ok(Credentials {
        tokens: p
            .tokens
            .iter()
            .filter_map(|kv| {
                kv.token
                    .as_ref()
                    .map(|t| (kv.alias.clone(), Token::from_proto(t)))
            })
            .collect(),
        secrets: p
            .secrets
            .iter()
            .map(|kv| (kv.alias.clone(), kv.secret.clone().unwrap_or_default()))
            .collect(),
    })
}

/// Decodes Hadoop's `WritableUtils.readVLong` zero-compressed integer from the front of `buf`.
pub fn read_vlong(buf: &mut &[u8]) -> Result<i64, DecodeError> {
    let (&first, rest) = buf
        .split_first()
        .ok_or_else(|| DecodeError::new("truncated variable-length integer"))?;
    let first = first as i8;
    if first >= -112 {
        *buf = rest;
        return Ok(i64::from(first));
    }
    let negative = first < -120;
    let len = if negative {
        (-119 - i32::from(first)) as usize
    } else {
        (-111 - i32::from(first)) as usize
    };
    // len counts the first byte too; the value has len - 1 bytes, at most 8.
    let n = len - 1;
    if rest.len() < n {
        return Err(DecodeError::new("truncated variable-length integer"));
    }
    let mut v: i64 = 0;
    for &b in &rest[..n] {
        v = (v << 8) | i64::from(b);
    }
    *buf = &rest[n..];
    Ok(if negative { !v } else { v })
}

/// Encodes Hadoop's `WritableUtils.writeVLong`.
pub fn write_vint(value: i64, out: &mut Vec<u8>) {
    if (-112..=127).contains(&value) {
        out.push(value as u8);
        return;
    }
    let (mut v, mut len) = (value, -112i32);
    if v < 0 {
        v = !v;
        len = -120;
    }
    let mut tmp = v;
    while tmp != 0 {
        tmp >>= 8;
        len -= 1;
    }
    out.push(len as u8);
    let n = if len < -120 {
        -(len + 120)
    } else {
        -(len + 112)
    };
    for idx in (0..n).rev() {
        out.push((v >> (idx * 8)) as u8);
    }
}

fn read_count(buf: &mut &[u8]) -> Result<usize, DecodeError> {
    let n = read_vlong(buf)?;
    // Each entry takes at least one byte: a count beyond the remaining length is corrupt and
    // must not drive a huge loop.
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= buf.len())
        .ok_or_else(|| DecodeError::new(format!("impossible entry count {n}")))
}

fn read_bytes<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let len = read_vlong(buf)?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= buf.len())
        .ok_or_else(|| DecodeError::new(format!("field of {len} bytes, {} remain", buf.len())))?;
    let (head, rest) = buf.split_at(len);
    *buf = rest;
    Ok(head)
}

fn read_text(buf: &mut &[u8]) -> Result<String, DecodeError> {
    let bytes = read_bytes(buf)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::new("Text field is not UTF-8"))
}

fn write_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    write_vint(bytes.len() as i64, out);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vint_known_encodings() {
        // Values from Hadoop's WritableUtils: one byte for -112..=127, else a length marker.
        let mut v = Vec::new();
        write_vint(127, &mut v);
        write_vint(128, &mut v);
        write_vint(-113, &mut v);
        assert_eq!(v, [0x7F, 0x8F, 0x80, 0x87, 0x70]);
        let mut s = &v[..];
        assert_eq!(read_vlong(&mut s), Ok(127));
        assert_eq!(read_vlong(&mut s), Ok(128));
        assert_eq!(read_vlong(&mut s), Ok(-113));
        assert!(s.is_empty());
    }

    #[test]
    fn garbage_is_an_error() {
        for b in [
            &b""[..],
            b"HDTS",
            b"HDTS\x07",
            b"HDTS\x00\x05",
            b"HDTS\x00\x01\x05ab",
            b"HDTS\x01\x09\x0a",
        ] {
            assert!(Credentials::parse(b).is_err(), "{b:?}");
        }
    }

    #[test]
    fn protobuf_format() {
        let storage = proto::CredentialsProto {
            tokens: vec![proto::CredentialsKvProto {
                alias: "am".into(),
                token: Some(proto::TokenProto {
                    identifier: vec![1, 2],
                    password: vec![3],
                    kind: AMRM_TOKEN_KIND.into(),
                    service: "rm:8030".into(),
                }),
                secret: None,
            }],
            secrets: vec![proto::CredentialsKvProto {
                alias: "s".into(),
                token: None,
                secret: Some(vec![9, 9]),
            }],
        };
        let mut bytes = b"HDTS\x01".to_vec();
        bytes.extend_from_slice(&prost::Message::encode_length_delimited_to_vec(&storage));
        let c = Credentials::parse(&bytes).expect("protobuf credentials");
        let t = c.amrm_token().expect("AMRM token");
        assert_eq!(
            (t.identifier.as_slice(), t.service.as_str()),
            (&[1u8, 2][..], "rm:8030")
        );
        assert_eq!(c.secrets, vec![("s".to_string(), vec![9, 9])]);
        assert!(Credentials::parse(&bytes[..bytes.len() - 1]).is_err());
    }

    fn token() -> impl Strategy<Value = (String, Token)> {
        (
            "[a-z0-9:._]{0,30}",
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::collection::vec(any::<u8>(), 0..40),
            "[A-Za-z_]{0,20}",
            "[a-z0-9:.]{0,30}",
        )
            .prop_map(|(alias, identifier, password, kind, service)| {
                (
                    alias,
                    Token {
                        identifier,
                        password,
                        kind,
                        service,
                    },
                )
            })
    }

    proptest! {
        #[test]
        fn vint_roundtrip(x in any::<i64>()) {
            let mut v = Vec::new();
            write_vint(x, &mut v);
            let mut s = &v[..];
            prop_assert_eq!(read_vlong(&mut s), Ok(x));
            prop_assert!(s.is_empty());
        }

        #[test]
        fn writable_roundtrip(tokens in proptest::collection::vec(token(), 0..4)) {
            let c = Credentials { tokens, secrets: vec![("k".into(), vec![1, 2, 3])] };
            let parsed = Credentials::parse(&c.to_writable_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(parsed, c);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut input = b"HDTS".to_vec();
            input.extend_from_slice(&bytes);
            let _ = Credentials::parse(&input);
        }
    }
}
