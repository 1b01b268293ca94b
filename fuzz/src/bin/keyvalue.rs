//! Seed 003's KEY=VALUE files (`question`, `answer`, `inbox/request`, …): any text
//! is read without a panic, and what is read, written again, reads back the same.

use hitl::mailbox::keyvalue::KeyValues;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(text) = std::str::from_utf8(data) {
            let kv = KeyValues::parse(text);
            if let Ok(again) = kv.to_text() {
                assert_eq!(KeyValues::parse(&again), kv, "written back from {text:?}");
            }
        }
    });
}
