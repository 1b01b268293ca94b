//! What makes a push message one a browser takes: its body encrypted for the
//! subscription (RFC 8291's `aes128gcm`, over RFC 8188's content coding), and the
//! server's signed claim to be who the subscription was made for (RFC 8292, VAPID).
//!
//! All of it is ring's (already in the binary for rustls): ECDH and ECDSA on P-256,
//! HKDF-SHA-256 and AES-128-GCM.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use ring::{
    aead, agreement, hkdf,
    rand::{SecureRandom, SystemRandom},
    signature::{self, EcdsaKeyPair, KeyPair},
};

/// Base64url as push services and browsers write it: no padding out; in, padding
/// or none.
const B64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    base64::engine::GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// `bytes` in base64url without padding.
pub fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// Base64url (or standard base64, which some clients send) read back.
pub fn unb64(text: &str) -> Result<Vec<u8>> {
    let url_safe: String = text
        .trim()
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    B64.decode(url_safe)
        .map_err(|e| anyhow!("not base64url: {e}"))
}

/// The record size said in every message: one record holds all a push service
/// takes (4096 bytes of body).
const RECORD_SIZE: u32 = 4096;

/// The most plaintext one message carries: a record less its delimiter and tag,
/// and the header (salt, record size, key id) that shares the push service's 4096.
pub const MAX_PLAINTEXT: usize = 4096 - 16 - 4 - 1 - 65 - 16 - 1;

/// A key length for ring's HKDF.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn hkdf_expand(prk: &hkdf::Prk, info: &[&[u8]], out: &mut [u8]) -> Result<()> {
    prk.expand(info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .map_err(|_| anyhow!("HKDF refused a length"))
}

/// The content key and nonce of a message (RFC 8291 section 3.4), from the ECDH
/// secret between the server's key for this message and the browser's, the
/// subscription's auth secret, and the message's salt.
fn content_key_and_nonce(
    ecdh_secret: &[u8],
    auth: &[u8],
    ua_public: &[u8],
    as_public: &[u8],
    salt: &[u8; 16],
) -> Result<([u8; 16], [u8; 12])> {
    let prk_key = hkdf::Salt::new(hkdf::HKDF_SHA256, auth).extract(ecdh_secret);
    let mut ikm = [0u8; 32];
    hkdf_expand(
        &prk_key,
        &[b"WebPush: info\0", ua_public, as_public],
        &mut ikm,
    )?;
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(&ikm);
    let mut cek = [0u8; 16];
    hkdf_expand(&prk, &[b"Content-Encoding: aes128gcm\0"], &mut cek)?;
    let mut nonce = [0u8; 12];
    hkdf_expand(&prk, &[b"Content-Encoding: nonce\0"], &mut nonce)?;
    Ok((cek, nonce))
}

/// The message body: the header (salt, record size, the server's public key for
/// this message) and the one record, `plaintext` and its delimiter sealed.
fn seal(
    plaintext: &[u8],
    cek: [u8; 16],
    nonce: [u8; 12],
    salt: &[u8; 16],
    as_public: &[u8],
) -> Result<Vec<u8>> {
    let key = aead::UnboundKey::new(&aead::AES_128_GCM, &cek)
        .map_err(|_| anyhow!("AES-128-GCM refused the key"))?;
    let mut record = Vec::with_capacity(plaintext.len() + 17);
    record.extend_from_slice(plaintext);
    record.push(2); // the last (and only) record
    aead::LessSafeKey::new(key)
        .seal_in_place_append_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::empty(),
            &mut record,
        )
        .map_err(|_| anyhow!("AES-128-GCM could not seal the message"))?;
    let mut body = Vec::with_capacity(16 + 4 + 1 + as_public.len() + record.len());
    body.extend_from_slice(salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(as_public.len() as u8);
    body.extend_from_slice(as_public);
    body.extend_from_slice(&record);
    Ok(body)
}

/// `plaintext` encrypted for a subscription (`p256dh`, the browser's public key,
/// 65 bytes; `auth`, its 16-byte secret), with a key pair and salt made for this
/// message alone.
pub fn encrypt(plaintext: &[u8], p256dh: &[u8], auth: &[u8]) -> Result<Vec<u8>> {
    if plaintext.len() > MAX_PLAINTEXT {
        bail!(
            "a push message holds {MAX_PLAINTEXT} bytes, not {}",
            plaintext.len()
        );
    }
    if p256dh.len() != 65 || p256dh[0] != 4 {
        bail!("keys.p256dh is not an uncompressed P-256 point (65 bytes)");
    }
    if auth.len() != 16 {
        bail!("keys.auth is not 16 bytes");
    }
    let rng = SystemRandom::new();
    let mut salt = [0u8; 16];
    rng.fill(&mut salt).map_err(|_| anyhow!("no randomness"))?;
    let mine = agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &rng)
        .map_err(|_| anyhow!("could not make a P-256 key"))?;
    let as_public = mine
        .compute_public_key()
        .map_err(|_| anyhow!("could not make a P-256 key"))?;
    let as_public = as_public.as_ref().to_vec();
    let theirs = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, p256dh);
    let secret = agreement::agree_ephemeral(mine, &theirs, <[u8]>::to_vec)
        .map_err(|_| anyhow!("keys.p256dh is not a point on P-256"))?;
    let (cek, nonce) = content_key_and_nonce(&secret, auth, p256dh, &as_public, &salt)?;
    seal(plaintext, cek, nonce, &salt, &as_public)
}

/// This server's VAPID key pair: made once, kept in the user's config folder
/// (`vapid-key`, PKCS#8, mode 0600), so browsers' subscriptions outlive restarts.
pub struct Vapid {
    pair: EcdsaKeyPair,
}

impl std::fmt::Debug for Vapid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vapid")
            .field("public", &self.public_key())
            .finish_non_exhaustive()
    }
}

impl Vapid {
    /// The key pair in `file`, made there if it is absent.
    pub fn load_or_create(file: &Path) -> Result<Vapid> {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = match std::fs::read(file) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let made = EcdsaKeyPair::generate_pkcs8(alg, &rng)
                    .map_err(|_| anyhow!("could not make a P-256 key"))?;
                super::write_private(file, made.as_ref())?;
                made.as_ref().to_vec()
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
        };
        let pair = EcdsaKeyPair::from_pkcs8(alg, &pkcs8, &rng)
            .map_err(|e| anyhow!("{} is not a P-256 key in PKCS#8: {e}", file.display()))?;
        Ok(Vapid { pair })
    }

    /// The public key as browsers take it (`applicationServerKey`): the
    /// uncompressed point, base64url.
    pub fn public_key(&self) -> String {
        b64(self.pair.public_key().as_ref())
    }

    /// The `Authorization` header for a push to `audience` (the push service's
    /// origin, `https://fcm.googleapis.com`): `vapid t=JWT, k=KEY`, the JWT signed
    /// with ES256, good for 12 hours (services refuse more than 24), `sub` the
    /// contact a push service may write to.
    pub fn authorization(&self, audience: &str, subject: &str, now: i64) -> Result<String> {
        let header = b64(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({
            "aud": audience,
            "exp": now + 12 * 3600,
            "sub": subject,
        });
        let claims = b64(claims.to_string().as_bytes());
        let signed = format!("{header}.{claims}");
        let signature = self
            .pair
            .sign(&SystemRandom::new(), signed.as_bytes())
            .map_err(|_| anyhow!("could not sign the VAPID claim"))?;
        Ok(format!(
            "vapid t={signed}.{}, k={}",
            b64(signature.as_ref()),
            self.public_key()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Vec<u8> {
        unb64(text).unwrap()
    }

    /// RFC 8291's worked example (appendix A), from its ECDH secret on: the same
    /// keys, nonce and message, byte for byte.
    #[test]
    fn the_rfc_8291_example_encrypts_to_its_own_bytes() {
        let plaintext = b"When I grow up, I want to be a watermelon";
        let as_public = d(
            "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8",
        );
        let ua_public = d(
            "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
        );
        let salt: [u8; 16] = d("DGv6ra1nlYgDCS1FRnbzlw").try_into().unwrap();
        let auth = d("BTBZMqHH6r4Tts7J_aSIgg");
        let ecdh = d("kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs");
        let (cek, nonce) =
            content_key_and_nonce(&ecdh, &auth, &ua_public, &as_public, &salt).unwrap();
        assert_eq!(b64(&cek), "oIhVW04MRdy2XN9CiKLxTg");
        assert_eq!(b64(&nonce), "4h_95klXJ5E_qnoN");
        let body = seal(plaintext, cek, nonce, &salt, &as_public).unwrap();
        assert_eq!(
            b64(&body),
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vC\
             YLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLW\
             youBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        );
    }

    #[test]
    fn a_key_pair_is_made_once_and_kept_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cfg").join("vapid-key");
        let made = Vapid::load_or_create(&file).unwrap();
        let again = Vapid::load_or_create(&file).unwrap();
        assert_eq!(made.public_key(), again.public_key());
        assert_eq!(unb64(&made.public_key()).unwrap().len(), 65);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let auth = made
            .authorization("https://push.example.net", "mailto:me@example.net", 0)
            .unwrap();
        let (t, k) = auth
            .strip_prefix("vapid t=")
            .unwrap()
            .split_once(", k=")
            .unwrap();
        assert_eq!(k, made.public_key());
        let parts: Vec<&str> = t.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value = serde_json::from_slice(&unb64(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["aud"], "https://push.example.net");
        assert_eq!(claims["exp"], 12 * 3600);
        // The signature verifies under the public key it names.
        let key = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            unb64(k).unwrap(),
        );
        key.verify(
            format!("{}.{}", parts[0], parts[1]).as_bytes(),
            &unb64(parts[2]).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn bad_subscription_keys_are_refused_with_a_reason() {
        let e = encrypt(b"x", &[4; 10], &[0; 16]).unwrap_err();
        assert!(e.to_string().contains("p256dh"), "{e}");
        let mut point = vec![4u8; 65];
        point[1] = 9;
        let e = encrypt(b"x", &point, &[0; 16]).unwrap_err();
        assert!(e.to_string().contains("P-256"), "{e}");
        let e = encrypt(b"x", &point, &[0; 3]).unwrap_err();
        assert!(e.to_string().contains("auth"), "{e}");
    }
}
