//! A Bash tool call's command line: read as bash reads it (`guard::shell`), then
//! judged (`guard::danger`). Neither may panic or hang on any text. The parser's
//! own panics are caught by `shell::read` (and asked about), so they are not
//! crashes here: `fuzz_nohook`; a panic that escapes still is. A plain line, read
//! without the parser, must read exactly as the parser reads it.

use std::path::Path;

use hitl::guard::{danger, shell};

fn main() {
    afl::fuzz_nohook!(|data: &[u8]| {
        let (cwd, home) = (Path::new("/p/sub"), Some(Path::new("/home/u")));
        if let Ok(text) = std::str::from_utf8(data)
            && shell::is_plain(text)
        {
            assert_eq!(
                shell::read(text, cwd, home),
                shell::read_with_parser(text, cwd, home),
                "the plain reader and the parser differ"
            );
        }
        if let Ok(text) = std::str::from_utf8(data)
            && let Ok(line) = shell::read(text, cwd, home)
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
