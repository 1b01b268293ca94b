//! Rebuilds when a migration is added: `sqlx::migrate!` embeds the folders' files at
//! compile time, and cargo does not otherwise notice a new one.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
