//! Build steps cargo cannot infer.
//!
//! * Rebuilds when a migration is added: `sqlx::migrate!` embeds the folders' files
//!   at compile time, and cargo does not otherwise notice a new one.
//! * Links `hitl` at a fixed address (see below; `HITL_PIE=1` opts out).
//! * Strips the release binary's symbols (`HITL_KEEP_SYMBOLS=1` keeps them).
//! * Links the functions every short-lived `hitl` process runs (start-up, `ask`,
//!   `hook`), then those of the server's request path, next to each other, in the
//!   order `tools/hot-symbols.txt` lists them (made by `tools/hot-symbols`). Spread over the 13 MB of code they cost a page
//!   fault each, tens of microseconds per start; together, a handful. A name no
//!   longer in the binary is skipped, so a stale list costs only that speed. Only
//!   where the linker is rust's lld (the default on x86_64 Linux), which reads the list.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=tools/hot-symbols.txt");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let order = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/hot-symbols.txt");
    let default_lld = std::env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    let own_linker = std::env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|f| f.contains("link"));
    // Linked at a fixed address: a position-independent hitl had 460 KB of pointers
    // (vtables, tables of names) relocated by the loader at every start, a page
    // fault for each of their 120 pages, a third of a hook's whole cost. The price is
    // that the binary's own code sits at a known address (libraries, heap and stack
    // are still placed at random); `HITL_PIE=1 cargo build` keeps it
    // position-independent.
    println!("cargo:rerun-if-env-changed=HITL_PIE");
    if std::env::var_os("HITL_PIE").is_none_or(|v| v.is_empty() || v == "0") {
        println!("cargo:rustc-link-arg-bin=hitl=-no-pie");
    }
    // The release binary's symbols, stripped here (see Cargo.toml's release
    // profile): a build with debug info (dev, `profiling`) keeps them, as does one
    // made with `HITL_KEEP_SYMBOLS=1` for tools/hot-symbols to trace.
    println!("cargo:rerun-if-env-changed=HITL_KEEP_SYMBOLS");
    let with_debug_info = std::env::var("DEBUG").is_ok_and(|d| d == "true");
    let keep_symbols =
        std::env::var_os("HITL_KEEP_SYMBOLS").is_some_and(|v| !v.is_empty() && v != "0");
    if !with_debug_info && !keep_symbols {
        println!("cargo:rustc-link-arg-bin=hitl=-Wl,--strip-all");
    }
    // Linked from a copy in OUT_DIR, not from the checkout: two checkouts sharing a
    // target folder (CI's fresh clones) share this script's output, and a path into
    // one that is gone would fail every link of the other.
    let copied = std::env::var_os("OUT_DIR")
        .map(|out| std::path::Path::new(&out).join("hot-symbols.txt"))
        .filter(|copy| std::fs::copy(&order, copy).is_ok());
    if default_lld
        && !own_linker
        && let Some(copy) = copied
    {
        println!(
            "cargo:rustc-link-arg-bin=hitl=-Wl,--symbol-ordering-file={}",
            copy.display()
        );
        println!("cargo:rustc-link-arg-bin=hitl=-Wl,--no-warn-symbol-ordering");
    }
}
