//! A body of seed 004's `POST /events`, down to the request it asks for.

use hitl::server::seed004::{HitlSpec, request_from_spec};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Ok(serde_json::Value::Object(mut body)) = serde_json::from_slice(data) else {
            return;
        };
        let Some(spec) = body.remove("humanInTheLoop") else {
            return;
        };
        let Ok(spec) = serde_json::from_value::<HitlSpec>(spec) else {
            return;
        };
        if let Ok(r) = request_from_spec(&spec, "app", "session") {
            // A request it makes has options when its kind needs them, and a deadline
            // that does not overflow.
            assert!(!r.kind.needs_options() || !r.options.is_empty());
            let _ = r.deadline();
            serde_json::to_vec(&r).unwrap();
        }
    });
}
