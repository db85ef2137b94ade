//! Fuzzes the decoders of iperf3's control messages: any bytes, under the server's and
//! a tiny limit, must decode as parameters or results or be refused without a panic,
//! never claim more bytes than they were given, and any state byte must survive a round
//! trip, as must whatever results decode (re-encoded and decoded again). The
//! authentication messages too: any bytes as a token's plaintext, as a token (text, and
//! sealed bytes in base64) checked against a key made once, and as an authorized-users
//! file, are read or refused without a panic, and credentials that read back
//! re-encode to themselves.
//!
//! Run: `cargo +nightly fuzz run iperf3_decode -- -max_total_time=60` in this folder.

#![no_main]

use std::sync::OnceLock;

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use ratelab::workload::net::iperf3::auth::{
    self, Authority, AuthorizedUsers, Credentials, Padding,
};
use ratelab::workload::net::iperf3::wire::{
    self, MAX_PARAMS_BYTES, MAX_RESULTS_BYTES, Params, Results, State,
};

/// Servers of one small key, made once, with each padding, and a user who is in.
fn authorities() -> &'static [Authority; 2] {
    static MADE: OnceLock<[Authority; 2]> = OnceLock::new();
    MADE.get_or_init(|| {
        let key = rsa::PrivateKey::new(&mut rand::rng(), 1024).expect("a key");
        let users = AuthorizedUsers::parse(&format!("mario,{}", auth::password_hash("mario", "rossi")));
        [
            Authority::new(key.clone(), Padding::Oaep, users.clone(), 10),
            Authority::new(key, Padding::Pkcs1, users, 10),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    if let Some(&first) = data.first() {
        assert_eq!(State::from_byte(first).byte(), first);
    }
    let _ = wire::looks_like_cookie(data);
    for limit in [MAX_PARAMS_BYTES, 64] {
        if let Ok((params, used)) = wire::decode::<Params>(data, limit) {
            assert!(used <= data.len() && used - 4 <= limit);
            let _ = (params.direction(), params.bytes());
        }
    }
    for limit in [MAX_RESULTS_BYTES, 64] {
        if let Ok((results, used)) = wire::decode::<Results>(data, limit) {
            assert!(used <= data.len() && used - 4 <= limit);
            let again = wire::frame(&results);
            let (back, _) = wire::decode::<Results>(&again, usize::MAX).expect("re-encoded results decode");
            assert_eq!(back.streams.len(), results.streams.len());
        }
    }
    if let Ok(credentials) = Credentials::parse(data) {
        if let Ok(text) = credentials.plaintext() {
            assert_eq!(Credentials::parse(text.as_bytes()), Ok(credentials));
        }
    }
    let text = String::from_utf8_lossy(data);
    let users = AuthorizedUsers::parse(&text);
    let _ = users.admits("mario", "rossi");
    let sealed = base64::engine::general_purpose::STANDARD.encode(data);
    for authority in authorities() {
        let _ = authority.check(&text, 0);
        let _ = authority.check(&sealed, 0);
    }
});
