//! A question file, in any of the four formats, under any name the spool accepts.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        // The first byte picks the file's stem: seed 001's `q_` names read differently.
        let (stem, bytes) = match data.split_first() {
            Some((b, rest)) if b % 2 == 0 => ("q_agentA_123_abcd", rest),
            Some((_, rest)) => ("question-7", rest),
            None => ("empty", data),
        };
        if let Ok(q) = hitl::protocol::parse_question(bytes, stem) {
            // Ids become file names: a parsed question must never name another folder.
            assert!(hitl::protocol::is_valid_id(&q.request.id));
            assert!(hitl::protocol::is_valid_id(&q.request.agent_id));
            let answer = q.answer_file_name();
            assert!(!answer.contains('/') && answer != "." && answer != "..");
            // What the broker stores and sends on must serialise.
            serde_json::to_vec(&q.request).unwrap();
        }
    });
}
