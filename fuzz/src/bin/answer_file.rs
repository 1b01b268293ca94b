//! An answer file, as an asker or the broker reads one another responder wrote.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(a) = serde_json::from_slice::<hitl::protocol::Answer>(data) {
            let _ = a.exit_code();
            serde_json::to_vec(&a).unwrap();
        }
    });
}
