//! A settings file (`.helpers/config.toml`, the user's `config.toml`).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = hitl::config::Settings::from_toml(text);
        }
    });
}
