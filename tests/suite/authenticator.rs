//! A software WebAuthn authenticator for black-box tests of passkeys
//! (docs/SECURITY.md, "Passkey step-up"): it answers the daemon's
//! `navigator.credentials.create` and `.get` options as a browser with a
//! platform authenticator would, with the JSON the page's `toJSON` sends.
//!
//! ES256 keys (`p256`), `none` attestation, user presence and verification
//! set, a signature counter that moves on every use. The CBOR it needs (an
//! attestation object and a COSE key) is written by hand: a few maps.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Authenticator data flags: user present, user verified, attested
/// credential data included.
const UP: u8 = 0x01;
const UV: u8 = 0x04;
const AT: u8 = 0x40;

/// One credential the authenticator holds.
struct Credential {
    id: Vec<u8>,
    key: SigningKey,
    counter: u32,
    user_handle: Vec<u8>,
}

/// A platform authenticator in a browser whose page is at `origin`.
pub struct Authenticator {
    origin: String,
    credentials: Vec<Credential>,
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(text: &Value) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(text.as_str().expect("base64url text")).expect("base64url")
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("random");
    bytes
}

/// A CBOR item's head: its major type and its length or value.
fn head(major: u8, value: u64, out: &mut Vec<u8>) {
    let major = major << 5;
    match value {
        0..=23 => out.push(major | value as u8),
        24..=0xff => out.extend([major | 24, value as u8]),
        0x100..=0xffff => {
            out.push(major | 25);
            out.extend((value as u16).to_be_bytes());
        }
        _ => {
            out.push(major | 26);
            out.extend((value as u32).to_be_bytes());
        }
    }
}

fn cbor_int(value: i64, out: &mut Vec<u8>) {
    if value >= 0 { head(0, value as u64, out) } else { head(1, (-1 - value) as u64, out) }
}

fn cbor_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    head(2, bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn cbor_text(text: &str, out: &mut Vec<u8>) {
    head(3, text.len() as u64, out);
    out.extend_from_slice(text.as_bytes());
}

/// The COSE_Key of an ES256 public key (RFC 9053: kty EC2, alg -7, crv P-256).
fn cose_key(key: &SigningKey) -> Vec<u8> {
    let point = key.verifying_key().to_encoded_point(false);
    let mut out = Vec::new();
    head(5, 5, &mut out);
    cbor_int(1, &mut out);
    cbor_int(2, &mut out);
    cbor_int(3, &mut out);
    cbor_int(-7, &mut out);
    cbor_int(-1, &mut out);
    cbor_int(1, &mut out);
    cbor_int(-2, &mut out);
    cbor_bytes(point.x().expect("x"), &mut out);
    cbor_int(-3, &mut out);
    cbor_bytes(point.y().expect("y"), &mut out);
    out
}

impl Authenticator {
    pub fn new(origin: &str) -> Self {
        Self { origin: origin.to_owned(), credentials: Vec::new() }
    }

    /// How many credentials it holds.
    pub fn len(&self) -> usize {
        self.credentials.len()
    }

    /// The id of its `at`-th credential, base64url.
    pub fn credential_id(&self, at: usize) -> String {
        b64(&self.credentials[at].id)
    }

    fn client_data(&self, kind: &str, challenge: &Value) -> Vec<u8> {
        json!({"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": false})
            .to_string()
            .into_bytes()
    }

    /// Answers creation options (`{"publicKey": {...}}`) with a new
    /// credential: the `RegisterPublicKeyCredential` JSON.
    pub fn create(&mut self, options: &Value) -> Value {
        let options = &options["publicKey"];
        let rp_id = options["rp"]["id"].as_str().expect("rp id");
        let credential = Credential {
            id: random::<32>().to_vec(),
            key: SigningKey::from_bytes(&random::<32>().into()).expect("a key"),
            counter: 1,
            user_handle: unb64(&options["user"]["id"]),
        };
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(UP | UV | AT);
        auth_data.extend(credential.counter.to_be_bytes());
        auth_data.extend([0u8; 16]); // AAGUID: none
        auth_data.extend((credential.id.len() as u16).to_be_bytes());
        auth_data.extend(&credential.id);
        auth_data.extend(cose_key(&credential.key));
        let mut attestation = Vec::new();
        head(5, 3, &mut attestation);
        cbor_text("fmt", &mut attestation);
        cbor_text("none", &mut attestation);
        cbor_text("attStmt", &mut attestation);
        head(5, 0, &mut attestation);
        cbor_text("authData", &mut attestation);
        cbor_bytes(&auth_data, &mut attestation);
        let client_data = self.client_data("webauthn.create", &options["challenge"]);
        let id = b64(&credential.id);
        self.credentials.push(credential);
        json!({
            "id": id, "rawId": id, "type": "public-key",
            "response": {"attestationObject": b64(&attestation),
                         "clientDataJSON": b64(&client_data), "transports": ["internal"]},
            "clientExtensionResults": {},
        })
    }

    /// Answers request options (`{"publicKey": {...}}`) with an assertion of
    /// its `at`-th credential: the `PublicKeyCredential` JSON.
    pub fn get(&mut self, options: &Value, at: usize) -> Value {
        let options = &options["publicKey"];
        let rp_id = options["rpId"].as_str().expect("rp id");
        let client_data = self.client_data("webauthn.get", &options["challenge"]);
        let credential = &mut self.credentials[at];
        credential.counter += 1;
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(UP | UV);
        auth_data.extend(credential.counter.to_be_bytes());
        let mut signed = auth_data.clone();
        signed.extend(Sha256::digest(&client_data));
        let signature: Signature = credential.key.sign(&signed);
        let id = b64(&credential.id);
        json!({
            "id": id, "rawId": id, "type": "public-key",
            "response": {"authenticatorData": b64(&auth_data),
                         "clientDataJSON": b64(&client_data),
                         "signature": b64(signature.to_der().as_bytes()),
                         "userHandle": b64(&credential.user_handle)},
            "clientExtensionResults": {},
        })
    }
}
