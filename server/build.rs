//! Makes sure the browser bundle folder exists so the daemon always compiles,
//! and rebuilds the daemon whenever scripts/build refreshes the bundle.

use std::path::Path;

fn main() {
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/site");
    println!("cargo:rerun-if-changed={}", site.display());
    if let Err(error) = std::fs::create_dir_all(site.join("pkg")) {
        println!("cargo:warning=cannot create {}: {error}", site.display());
    }
    // The bundle's main module and its lazy chunks, whatever their names.
    let has_wasm = std::fs::read_dir(site.join("pkg")).is_ok_and(|entries| {
        entries.flatten().any(|entry| entry.path().extension().is_some_and(|ext| ext == "wasm"))
    });
    if !has_wasm {
        println!(
            "cargo:warning=no browser bundle in target/site: the page will have no client; \
             build with scripts/build"
        );
    }
}
