//! The client side of SASL DIGEST-MD5 (RFC 2831) as Hadoop's TOKEN authentication uses it,
//! with no I/O.
//!
//! Hadoop (`SaslRpcClient`/`SaslRpcServer`) feeds the JDK's DIGEST-MD5 with: username =
//! base64(token identifier), password = base64(token password), realm and server name
//! `"default"`, protocol `""` (so digest-uri `"/default"`), qop `auth` (no wrapping).

use base64::Engine as _;
use md5::{Digest, Md5};

use crate::error::DecodeError;

/// The server's DIGEST-MD5 challenge, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DigestChallenge {
    /// Realms offered (Hadoop offers exactly one: `default`).
    pub realms: Vec<String>,
    /// The server nonce.
    pub nonce: String,
    /// Qualities of protection offered (`auth`, `auth-int`, `auth-conf`).
    pub qop: Vec<String>,
    /// `utf-8` when the server accepts UTF-8 user names and passwords.
    pub charset: Option<String>,
    /// Must be `md5-sess`.
    pub algorithm: String,
}

impl DigestChallenge {
    /// Parses a challenge such as
    /// `realm="default",nonce="abc",qop="auth",charset=utf-8,algorithm=md5-sess`.
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| DecodeError::new("DIGEST-MD5 challenge is not UTF-8"))?;
        let mut ch = DigestChallenge::default();
        let mut nonce = None;
        let mut algorithm = None;
        for (key, value) in parse_directives(text)? {
            match key.to_ascii_lowercase().as_str() {
                "realm" => ch.realms.push(value),
                // RFC 2831: a second nonce makes the challenge invalid.
                "nonce" if nonce.is_some() => {
                    return Err(DecodeError::new("DIGEST-MD5 challenge repeats nonce"));
                }
                "nonce" => nonce = Some(value),
                "qop" => ch.qop.extend(
                    value
                        .split(',')
                        .map(|q| q.trim().to_string())
                        .filter(|q| !q.is_empty()),
                ),
                "charset" => ch.charset = Some(value),
                "algorithm" => algorithm = Some(value),
                // maxbuf, cipher, stale and future directives do not change what we send.
                _ => {}
            }
        }
        ch.nonce = nonce.ok_or_else(|| DecodeError::new("DIGEST-MD5 challenge has no nonce"))?;
        ch.algorithm =
            algorithm.ok_or_else(|| DecodeError::new("DIGEST-MD5 challenge has no algorithm"))?;
        if !ch.algorithm.eq_ignore_ascii_case("md5-sess") {
            return Err(DecodeError::new(format!(
                "DIGEST-MD5 algorithm {} is not md5-sess",
                ch.algorithm
            )));
        }
        if ch.qop.is_empty() {
            // RFC 2831 2.1.1: absent qop means "auth".
            ch.qop.push("auth".to_string());
        }
        Ok(ch)
    }
}

/// Splits `key=value,key="quoted, value",...` into pairs, undoing backslash escapes.
pub(crate) fn parse_directives(text: &str) -> Result<Vec<(String, String)>, DecodeError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while matches!(chars.peek(), Some(c) if c.is_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(DecodeError::new(format!("directive {key:?} has no value")));
        }
        let key = key.trim().to_string();
        if key.is_empty() {
            return Err(DecodeError::new("empty directive name"));
        }
        while matches!(chars.peek(), Some(c) if c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            let mut closed = false;
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some(e) => value.push(e),
                        None => break,
                    },
                    '"' => {
                        closed = true;
                        break;
                    }
                    c => value.push(c),
                }
            }
            if !closed {
                return Err(DecodeError::new(format!("unterminated quote in {key}")));
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
            value = value.trim().to_string();
        }
        out.push((key, value));
    }
}

/// The client's answer to a challenge, and what the server must prove back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestResponse {
    /// The bytes to send (the SASL INITIATE/RESPONSE token).
    pub message: String,
    /// The `rspauth` value a genuine server returns on success.
    pub expected_rspauth: String,
}

/// Computes the RFC 2831 digest response for qop `auth`.
///
/// `username` and `password` are used as given (for Hadoop tokens: the base64 of the token's
/// identifier and password, see [`token_credentials`]). The realm is the challenge's first,
/// as the JDK's client picks the default realm.
pub fn digest_response(
    challenge: &DigestChallenge,
    username: &str,
    password: &str,
    digest_uri: &str,
    cnonce: &str,
) -> Result<DigestResponse, DecodeError> {
    if !challenge.qop.iter().any(|q| q == "auth") {
        return Err(DecodeError::new(format!(
            "server requires qop {:?}; only auth is supported",
            challenge.qop
        )));
    }
    let realm = challenge.realms.first().map(String::as_str).unwrap_or("");
    let nc = "00000001";
    let response = response_value(
        challenge,
        realm,
        username,
        password,
        digest_uri,
        cnonce,
        nc,
        "AUTHENTICATE",
    );
    let expected_rspauth = response_value(
        challenge, realm, username, password, digest_uri, cnonce, nc, "",
    );
    let mut message = String::new();
    if challenge
        .charset
        .as_deref()
        .is_some_and(|c| c.eq_ignore_ascii_case("utf-8"))
    {
        message.push_str("charset=utf-8,");
    }
    message.push_str(&format!(
        "username=\"{}\",realm=\"{}\",nonce=\"{}\",nc={nc},cnonce=\"{}\",digest-uri=\"{}\",maxbuf=65536,response={response},qop=auth",
        quote(username),
        quote(realm),
        quote(&challenge.nonce),
        quote(cnonce),
        quote(digest_uri)
    ));
    Ok(DigestResponse {
        message,
        expected_rspauth,
    })
}

/// The `response` (method `AUTHENTICATE`) or `rspauth` (method empty) value of RFC 2831 2.1.2.1.
#[allow(clippy::too_many_arguments)]
fn response_value(
    challenge: &DigestChallenge,
    realm: &str,
    username: &str,
    password: &str,
    digest_uri: &str,
    cnonce: &str,
    nc: &str,
    method: &str,
) -> String {
    let inner = Md5::digest(format!("{username}:{realm}:{password}").as_bytes());
    let mut a1 = inner.to_vec();
    a1.extend_from_slice(format!(":{}:{cnonce}", challenge.nonce).as_bytes());
    let ha1 = hex(&Md5::digest(&a1));
    let ha2 = hex(&Md5::digest(format!("{method}:{digest_uri}").as_bytes()));
    hex(&Md5::digest(
        format!("{ha1}:{}:{nc}:{cnonce}:auth:{ha2}", challenge.nonce).as_bytes(),
    ))
}

/// Checks the server's final message (`rspauth=...`) against what a server that knows the
/// token password would send; a mismatch means we are talking to an impostor.
pub fn verify_rspauth(server_final: &[u8], expected: &str) -> Result<(), DecodeError> {
    let text = std::str::from_utf8(server_final)
        .map_err(|_| DecodeError::new("DIGEST-MD5 rspauth is not UTF-8"))?;
    let got = parse_directives(text)?
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("rspauth"))
        .map(|(_, v)| v)
        .ok_or_else(|| DecodeError::new("server's final DIGEST-MD5 message lacks rspauth"))?;
    if got == expected {
        Ok(())
    } else {
        Err(DecodeError::new(
            "server's rspauth does not match: it does not know the token",
        ))
    }
}

/// Hadoop's SASL user name and password for a token: base64 of its identifier and password.
pub fn token_credentials(identifier: &[u8], password: &[u8]) -> (String, String) {
    let b64 = base64::engine::general_purpose::STANDARD;
    (b64.encode(identifier), b64.encode(password))
}

fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of RFC 2831 section 4 (IMAP, user chris, password secret).
    #[test]
    fn rfc2831_example() {
        let ch = DigestChallenge::parse(
            br#"realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",qop="auth",algorithm=md5-sess,charset=utf-8"#,
        )
        .expect("valid challenge");
        let r = digest_response(
            &ch,
            "chris",
            "secret",
            "imap/elwood.innosoft.com",
            "OA6MHXh6VqTrRk",
        )
        .expect("auth offered");
        assert!(
            r.message
                .contains("response=d388dad90d4bbd760a152321f2143af7"),
            "{}",
            r.message
        );
        assert_eq!(r.expected_rspauth, "ea40f60335c427b5527b84dbabcdfffd");
        assert!(
            verify_rspauth(
                b"rspauth=ea40f60335c427b5527b84dbabcdfffd",
                &r.expected_rspauth
            )
            .is_ok()
        );
        assert!(verify_rspauth(b"rspauth=00", &r.expected_rspauth).is_err());
    }

    #[test]
    fn quoted_commas_and_escapes() {
        let ch =
            DigestChallenge::parse(br#"nonce="a\"b,c", qop="auth,auth-int" ,algorithm=md5-sess"#)
                .expect("valid");
        assert_eq!(ch.nonce, "a\"b,c");
        assert_eq!(ch.qop, ["auth", "auth-int"]);
    }

    #[test]
    fn bad_challenges_are_errors() {
        for c in [
            &b"nonce"[..],
            b"nonce=\"x",
            b"realm=x",
            b"nonce=x,algorithm=md5",
            &[0xFF, 0xFE],
        ] {
            assert!(DigestChallenge::parse(c).is_err(), "{c:?}");
        }
        let ch =
            DigestChallenge::parse(b"nonce=x,qop=auth-conf,algorithm=md5-sess").expect("valid");
        assert!(digest_response(&ch, "u", "p", "/default", "c").is_err());
    }
}
