//! The `hitl` the benchmarks run: the one a user installs.

use std::process::{Command, Stdio};

/// The `hitl` under test: the binary a user installs (`BENCH_HITL` names another, a
/// build of an older commit, to compare two in one sitting).
///
/// Not `CARGO_BIN_EXE_hitl`: `cargo bench` builds the dependencies with the
/// features the dev-dependencies add, which changes the hash in every symbol name,
/// so that binary's functions are not the ones the linker's order names
/// (tools/hot-symbols.txt, see build.rs) and its starts fault on code all over the
/// binary. `cargo install` and `cargo build --release` leave the dev-dependencies
/// out; the benchmarks build that binary here (at once when it is built already),
/// and run a copy of it, which later builds do not replace.
///
/// That build runs without the variables cargo set for this benchmark
/// (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`, …): build scripts watch some of them
/// (ring's watches both), so with hitl's values in the environment cargo would
/// rebuild those crates and everything above them, six minutes on two cores, and
/// the next `cargo bench` would rebuild them back.
pub fn hitl() -> &'static str {
    static HITL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HITL.get_or_init(|| {
        if let Ok(other) = std::env::var("BENCH_HITL") {
            return other;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        for (name, _) in std::env::vars_os() {
            if set_by_cargo_for_this_run(&name.to_string_lossy()) {
                build.env_remove(&name);
            }
        }
        let out = build
            .args(["build", "--release", "--locked", "--bin", "hitl"])
            .args(["--message-format", "json-render-diagnostics"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stderr(Stdio::inherit())
            .output()
            .expect("cargo builds the installed binary");
        assert!(out.status.success(), "cargo build --release failed");
        let built = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["target"]["name"] == "hitl")
            .find_map(|m| m["executable"].as_str().map(str::to_string))
            .expect("cargo names the hitl it built");
        let copy = format!("{built}-as-installed");
        std::fs::copy(&built, &copy).expect("a copy of the installed binary");
        copy
    })
}

/// Whether cargo set this variable for the benchmark it runs, as opposed to the
/// user's own settings (`CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_PROFILE_…`), which
/// the build must keep.
fn set_by_cargo_for_this_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_MANIFEST_")
        || matches!(
            name,
            "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "OUT_DIR"
        )
}
