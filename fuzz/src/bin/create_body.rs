//! A body of the native `POST /api/v1/requests`, read as the server reads it.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(serde_json::Value::Object(body)) = serde_json::from_slice(data)
            && let Ok(create) = hitl::api::CreateRequest::from_json(body)
        {
            serde_json::to_vec(&create).unwrap();
        }
    });
}
