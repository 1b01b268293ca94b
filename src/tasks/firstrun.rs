//! Claude Code's first-run screens in a new folder: "Is this a project you trust?"
//! and "New MCP server found in this project". Each is a menu whose cursor is the
//! same `❯` as the input prompt's, on "No, exit" at first: a task typed in then
//! would choose it and end the session. hitl recognises them before it types,
//! asks the person (an approval of origin `task`), and makes their choice: the cursor
//! moved to the option (Up/Down, counted from the screen), checked to be there, then
//! Enter. It never chooses for them; a refused trust ends the session.

/// A first-run screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    /// Trust this folder (its files, hooks and `.mcp.json`).
    Trust,
    /// Use a new MCP server of the project's `.mcp.json`.
    McpServer,
}

/// The trust screen's options: yes (newer and older wording), then no.
const TRUST_YES: [&str; 2] = ["Yes, I trust this folder", "Yes, proceed"];
const TRUST_NO: &str = "No, exit";
/// The MCP screen's options: this one, then none (the third, "all future ones", is
/// never chosen for the person).
const MCP_YES: &str = "Use this MCP server";
const MCP_NO: &str = "Continue without using this MCP server";
const MCP_ALL: &str = "Use this and all future MCP servers in this project";

impl Screen {
    /// Which screen `screen` (a pane's text) shows, if one.
    pub fn recognise(screen: &str) -> Option<Screen> {
        let has_option = |o: &str| menu_lines(screen).iter().any(|(_, text)| text == o);
        if TRUST_YES.iter().any(|o| has_option(o)) && has_option(TRUST_NO) {
            return Some(Screen::Trust);
        }
        if has_option(MCP_YES) && has_option(MCP_NO) {
            return Some(Screen::McpServer);
        }
        None
    }

    /// What it is called in the context of a request (`trust`, `mcp-server`).
    pub fn name(self) -> &'static str {
        match self {
            Screen::Trust => "trust",
            Screen::McpServer => "mcp-server",
        }
    }

    /// The question put to the person, with what the screen says.
    pub fn question(self, session: &str, workspace: &std::path::Path, screen: &str) -> String {
        match self {
            Screen::Trust => format!(
                "Task session {session}: Claude Code asks whether to trust {}. Trusted, it \
                 reads, edits and runs files there, and loads its .mcp.json servers. Refused, \
                 the session ends.",
                workspace.display()
            ),
            Screen::McpServer => {
                let found = screen
                    .lines()
                    .find_map(|l| {
                        l.trim()
                            .strip_prefix("New MCP server found in this project:")
                    })
                    .or_else(|| {
                        screen.lines().find_map(|l| {
                            l.trim()
                                .strip_prefix("New MCP servers found in this project:")
                        })
                    })
                    .map(str::trim)
                    .unwrap_or("?");
                format!(
                    "Task session {session}: Claude Code found a new MCP server in {}'s .mcp.json: \
                     {found}. Use it? (It may run code; its tool calls still ask.) Refused, the \
                     session goes on without it.",
                    workspace.display()
                )
            }
        }
    }

    /// The option that says `yes` (or no).
    fn option(self, screen: &str, yes: bool) -> &'static str {
        match (self, yes) {
            (Screen::Trust, true) => TRUST_YES
                .iter()
                .copied()
                .find(|o| menu_lines(screen).iter().any(|(_, t)| t == o))
                .unwrap_or(TRUST_YES[0]),
            (Screen::Trust, false) => TRUST_NO,
            (Screen::McpServer, true) => MCP_YES,
            (Screen::McpServer, false) => MCP_NO,
        }
    }

    /// The keys that move the menu's cursor on `screen` to the option saying `yes`
    /// (or no): empty when it is there. `None` when the screen shows no such menu.
    pub fn moves(self, screen: &str, yes: bool) -> Option<Vec<&'static str>> {
        let target = self.option(screen, yes);
        let lines = menu_lines(screen);
        let at = lines.iter().position(|(cursor, _)| *cursor)?;
        let to = lines.iter().position(|(_, text)| text == target)?;
        let key = if to > at { "Down" } else { "Up" };
        Some(vec![key; at.abs_diff(to)])
    }
}

/// The lines of `screen` that are options of a first-run menu, in order: whether
/// the cursor is on it, and its text.
fn menu_lines(screen: &str) -> Vec<(bool, String)> {
    let known =
        |t: &str| TRUST_YES.contains(&t) || [TRUST_NO, MCP_YES, MCP_NO, MCP_ALL].contains(&t);
    screen
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let (cursor, text) = match line.strip_prefix('❯') {
                Some(rest) => (true, rest.trim()),
                None => (false, line),
            };
            // "1. Yes, proceed" in some versions.
            let text = text
                .split_once(". ")
                .filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
                .map_or(text, |(_, t)| t);
            known(text).then(|| (cursor, text.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claude Code 2.1.332's trust screen, as tmux captures it.
    const TRUST: &str = " Accessing workspace:\n /tmp/ws\n Quick safety check: Is this a project \
        you created or one you trust?\n Security guide\n ❯ No, exit\n   Yes, I trust this folder\n \
        Enter to confirm · Esc to cancel\n";

    const MCP: &str = "  New MCP server found in this project: hitl\n  MCP servers may execute \
        code.\n    Use this MCP server\n    Use this and all future MCP servers in this project\n  \
        ❯ Continue without using this MCP server\n  Enter to confirm · Esc to reject\n";

    #[test]
    fn the_trust_screen_is_told_from_the_prompt() {
        assert_eq!(Screen::recognise(TRUST), Some(Screen::Trust));
        assert_eq!(Screen::Trust.moves(TRUST, true), Some(vec!["Down"]));
        assert_eq!(Screen::Trust.moves(TRUST, false), Some(vec![]));
        let prompt = "──────\n❯ \n──────\n  ⏵⏵ auto mode on\n";
        assert_eq!(Screen::recognise(prompt), None);
        // A prompt whose typed text names an option is still the prompt.
        assert_eq!(Screen::recognise("❯ No, exit\n"), None);
    }

    #[test]
    fn the_mcp_screen_moves_up_to_this_server_only() {
        assert_eq!(Screen::recognise(MCP), Some(Screen::McpServer));
        assert_eq!(Screen::McpServer.moves(MCP, true), Some(vec!["Up", "Up"]));
        assert_eq!(Screen::McpServer.moves(MCP, false), Some(vec![]));
        let q = Screen::McpServer.question("s", std::path::Path::new("/w"), MCP);
        assert!(q.contains(": hitl."), "{q}");
    }

    #[test]
    fn numbered_options_of_older_versions_are_read_too() {
        let old = " Do you trust the files in this folder?\n ❯ 1. Yes, proceed\n   2. No, exit\n";
        assert_eq!(Screen::recognise(old), Some(Screen::Trust));
        assert_eq!(Screen::Trust.moves(old, true), Some(vec![]));
        assert_eq!(Screen::Trust.moves(old, false), Some(vec!["Down"]));
    }
}
