//! The same boundary as a macOS `sandbox-exec` profile (SBPL), for `hitl run
//! --macos-profile`: written from the plan, never run here (this is Linux; the
//! profile is untested). In SBPL the last matching rule wins, so the order is the
//! plan's: everything read-only, the writable binds, the read-only binds inside them,
//! the secrets unreadable.

use std::fmt::Write;

use super::plan::Plan;

/// The profile for `plan`.
pub fn profile(plan: &Plan) -> String {
    let quote = |p: &std::path::Path| format!("{:?}", p.display().to_string());
    let mut out = String::from(
        ";; hitl run's boundary for sandbox-exec (untested: written on Linux)\n\
         (version 1)\n(allow default)\n(deny file-write* (subpath \"/\"))\n\
         (allow file-write* (subpath \"/dev\") (subpath \"/private/tmp\") (subpath \"/private/var/folders\"))\n",
    );
    for b in &plan.binds {
        let verb = if b.writable { "allow" } else { "deny" };
        let _ = writeln!(out, "({verb} file-write* (subpath {}))", quote(&b.path));
    }
    for m in &plan.masks {
        let _ = writeln!(
            out,
            "(deny file-read* file-write* (subpath {}))",
            quote(&m.dir)
        );
        for k in &m.keep {
            let _ = writeln!(
                out,
                "(allow file-read* (literal {}))",
                quote(&m.dir.join(k))
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::plan::{Bind, Mask};

    #[test]
    fn the_last_rule_for_a_path_is_the_plans() {
        let plan = Plan {
            private: vec![],
            carried: vec![],
            binds: vec![
                Bind {
                    path: "/p".into(),
                    writable: true,
                },
                Bind {
                    path: "/p/.helpers".into(),
                    writable: false,
                },
            ],
            masks: vec![Mask {
                dir: "/h/.config/hitl".into(),
                keep: vec!["config.toml".into()],
            }],
            created: vec![],
        };
        let p = profile(&plan);
        let allow = p.find("(allow file-write* (subpath \"/p\"))").unwrap();
        let deny = p
            .find("(deny file-write* (subpath \"/p/.helpers\"))")
            .unwrap();
        assert!(allow < deny, "{p}");
        assert!(p.contains("(deny file-read* file-write* (subpath \"/h/.config/hitl\"))"));
        assert!(p.contains("(allow file-read* (literal \"/h/.config/hitl/config.toml\"))"));
    }
}
