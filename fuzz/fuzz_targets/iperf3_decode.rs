//! Fuzzes the decoders of iperf3's control messages: any bytes, under the server's and
//! a tiny limit, must decode as parameters or results or be refused without a panic,
//! never claim more bytes than they were given, and any state byte must survive a round
//! trip, as must whatever results decode (re-encoded and decoded again).
//!
//! Run: `cargo +nightly fuzz run iperf3_decode -- -max_total_time=60` in this folder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelab::workload::net::iperf3::wire::{
    self, MAX_PARAMS_BYTES, MAX_RESULTS_BYTES, Params, Results, State,
};

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
});
