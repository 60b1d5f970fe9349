//! Lays out the machine code of the controller binaries so the functions a
//! controller runs sit together (docs/performance.md, "3l. Code layout").
//!
//! A process's resident memory counts every page of its code that the
//! kernel has mapped, and the kernel maps code in blocks (64 KiB) around
//! each page executed. A controller executes about a third of its machine
//! code, spread by the linker's default order over nearly all of it, so
//! nearly all of it becomes resident: a fixed cost of every process, which
//! decides how small a shard member can be next to one replica.
//! `link/<binary>.symbols` lists the functions that recorded runs executed
//! (`link/record-symbols`); given to the linker as a symbol ordering file,
//! they are placed first, together.
//!
//! Symbol names carry hashes of the compiler version, the dependency
//! versions and the build settings, so a list fits the toolchain it was
//! recorded with (its first line names that rustc's commit). It is used for
//! optimised builds (`release`, `dist`) for x86_64 Linux with exactly that
//! rustc and its default linker (LLD, which takes the option; a build that
//! chooses its own linker or linker flavour goes without). Names the build
//! does not have are skipped: a stale list costs memory, never correctness.
//! `CTRLKIT_SYMBOL_ORDERING=0` turns it off.

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// The binaries with a recorded list.
const BINARIES: &[&str] = &["replicaset-controller"];

fn main() {
    println!("cargo:rerun-if-env-changed=CTRLKIT_SYMBOL_ORDERING");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    for bin in BINARIES {
        println!("cargo:rerun-if-changed=link/{bin}.symbols");
    }
    let off = env::var("CTRLKIT_SYMBOL_ORDERING").is_ok_and(|v| v == "0");
    let optimised = env::var("PROFILE").is_ok_and(|p| p == "release");
    let target = env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    if off || !optimised || !target || own_linker() {
        return;
    }
    let Some(commit) = rustc_commit() else {
        return;
    };
    let (Some(manifest), Some(out)) = (
        env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
        env::var_os("OUT_DIR").map(PathBuf::from),
    ) else {
        return;
    };
    let header = format!("# rustc {commit}");
    for bin in BINARIES {
        let Ok(list) = fs::read_to_string(manifest.join("link").join(format!("{bin}.symbols")))
        else {
            continue;
        };
        let mut lines = list.lines();
        if lines.next() != Some(header.as_str()) {
            continue;
        }
        // The linker reads one symbol per line and has no comment syntax.
        let path = out.join(format!("{bin}.symbols"));
        let symbols: String = lines.flat_map(|l| [l, "\n"]).collect();
        if fs::write(&path, symbols).is_err() {
            continue;
        }
        println!(
            "cargo:rustc-link-arg-bin={bin}=-Wl,--symbol-ordering-file={}",
            path.display()
        );
        println!("cargo:rustc-link-arg-bin={bin}=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether the build chose a linker (or a linker flavour) of its own:
/// `target.<triple>.linker` in cargo's configuration, or a `-C linker…`,
/// `-C link-self-contained` or `-fuse-ld` flag.
fn own_linker() -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    env::var_os("RUSTC_LINKER").is_some()
        || flags.split('\x1f').any(|f| {
            f.contains("linker") || f.contains("link-self-contained") || f.contains("fuse-ld")
        })
}

/// The commit hash `rustc -vV` reports for the compiler cargo runs.
fn rustc_commit() -> Option<String> {
    let output = Command::new(env::var_os("RUSTC")?)
        .arg("-vV")
        .output()
        .ok()?;
    String::from_utf8(output.stdout)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("commit-hash: ").map(str::to_owned))
}
