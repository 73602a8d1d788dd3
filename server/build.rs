//! Makes sure the browser bundle folder exists so the daemon always compiles,
//! and rebuilds the daemon whenever scripts/build refreshes the bundle.

use std::path::Path;

fn main() {
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/site");
    println!("cargo:rerun-if-changed={}", site.display());
    if let Err(error) = std::fs::create_dir_all(site.join("pkg")) {
        println!("cargo:warning=cannot create {}: {error}", site.display());
    }
    if !site.join("pkg/shard_bg.wasm").exists() {
        println!(
            "cargo:warning=no browser bundle in target/site: the page will have no client; \
             build with scripts/build"
        );
    }
}
