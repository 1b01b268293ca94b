//! Seed 003's KEY=VALUE files (`question`, `answer`, `inbox/request`, …): any text
//! is read without a panic, and what is read, written again, reads back the same;
//! read as a question and as an answer, it makes a request's text and an ending that
//! are written and read back the same way.

use hitl::mailbox::{
    keyvalue::KeyValues,
    question::{Ending, Question},
};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(text) = std::str::from_utf8(data) {
            let kv = KeyValues::parse(text);
            if let Ok(again) = kv.to_text() {
                assert_eq!(KeyValues::parse(&again), kv, "written back from {text:?}");
            }
            let question = Question::read(&kv);
            let _ = question.shown();
            if question.pairs().to_text().is_ok() {
                let ending = Ending::read(&kv, Some(&question));
                if let Ok(answer) = ending.pairs().to_text() {
                    assert_eq!(
                        Ending::read(&KeyValues::parse(&answer), Some(&question)),
                        ending,
                        "the answer to {text:?}"
                    );
                }
            }
        }
    });
}
