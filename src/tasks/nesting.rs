//! The environment variables that tell a program it runs inside Claude Code. An
//! agent started by the listener must not inherit them (the listener may itself have
//! been started from a Claude Code session): Claude Code would take itself for a
//! nested session, and its hooks would name the wrong project. Everything else of
//! the user's environment (`CLAUDE_CONFIG_DIR`, `CLAUDE_CODE_USE_BEDROCK`, …) is
//! the agent's own configuration and passes.

/// Whether `name` marks a process as running inside a Claude Code session.
pub fn is_nesting_variable(name: &str) -> bool {
    const EXACT: [&str; 5] = [
        "CLAUDECODE",
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_CODE_SSE_PORT",
        "CLAUDE_PROJECT_DIR",
        "CLAUDE_ENV_FILE",
    ];
    const PREFIXES: [&str; 2] = ["CLAUDE_CODE_SESSION_", "CLAUDE_AGENT_SDK"];
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The nesting variables of this process's environment.
pub fn inherited() -> impl Iterator<Item = String> {
    std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .filter(|name| is_nesting_variable(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_markers_of_a_claude_code_session_are_taken_out() {
        for name in [
            "CLAUDECODE",
            "CLAUDE_CODE_ENTRYPOINT",
            "CLAUDE_CODE_SESSION_ID",
            "CLAUDE_PROJECT_DIR",
        ] {
            assert!(is_nesting_variable(name), "{name}");
        }
        for name in [
            "CLAUDE_CONFIG_DIR",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            "PATH",
        ] {
            assert!(!is_nesting_variable(name), "{name}");
        }
    }
}
