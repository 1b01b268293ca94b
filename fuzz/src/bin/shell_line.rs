//! A Bash tool call's command line: read as bash reads it (`claude::shell`), then
//! judged (`claude::danger`). Neither may panic or hang on any text. The parser's
//! own panics are caught by `shell::read` (and asked about), so they are not
//! crashes here: `fuzz_nohook`; a panic that escapes still is.

use std::path::Path;

use hitl::claude::{danger, shell};

fn main() {
    afl::fuzz_nohook!(|data: &[u8]| {
        if let Ok(text) = std::str::from_utf8(data)
            && let Ok(line) = shell::read(text, Path::new("/p/sub"), Some(Path::new("/home/u")))
        {
            let never = |_: &Path| false;
            let scope = danger::Scope {
                project: Path::new("/p"),
                home: Some(Path::new("/home/u")),
                safe_delete: &never,
                secrets: &[],
            };
            let _ = danger::judge(&line, &scope);
        }
    });
}
