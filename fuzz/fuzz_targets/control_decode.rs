//! Fuzzes the net control protocol's decoder: any bytes, under both the server's and a
//! tiny frame limit, must decode or be refused without a panic, never claim more bytes
//! than it was given, and whatever decodes must survive a round trip.
//!
//! Run: `cargo +nightly fuzz run control_decode -- -max_total_time=60` in this folder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelab::workload::net::{MAX_REQUEST_BYTES, Message, decode, encode};

fuzz_target!(|data: &[u8]| {
    for limit in [MAX_REQUEST_BYTES, 64] {
        if let Ok((message, used)) = decode(data, limit) {
            assert!(used <= data.len());
            assert!(used - 4 <= limit);
            // Results carry floats, which JSON may print a last digit apart; the rest
            // must come back exactly.
            if !matches!(message, Message::Results(_)) {
                let frame = encode(&message);
                assert_eq!(decode(&frame, usize::MAX).map(|(m, _)| m), Ok(message));
            }
        }
    }
});
