//! A respond body (seed 004's and the native API's), against a request of each kind:
//! whatever it is read as must fit that request, as the broker checks every reply.

use hitl::{api::RespondBody, protocol::Kind, server::seed004::reply_for};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Ok(body) = serde_json::from_slice::<RespondBody>(data) else {
            return;
        };
        for kind in Kind::ALL {
            let request = hitl_fuzz::request_of(kind);
            if let Ok(reply) = reply_for(&request, &body) {
                assert_eq!(
                    reply.fits(&request),
                    Ok(()),
                    "{kind:?} {body:?} -> {reply:?}"
                );
            }
        }
    });
}
