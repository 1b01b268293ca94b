//! A body of the native `POST /api/v1/requests`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(body) = serde_json::from_slice::<hitl::api::CreateRequest>(data) {
            serde_json::to_vec(&body).unwrap();
        }
    });
}
