//! Writes the seed corpora and the MessagePack dictionary for cargo-fuzz.
//!
//! `fuzz-seeds OUT_DIR` writes every seed of every target to `OUT_DIR/<target>/<hash>` (a working corpus,
//! not committed: `fuzz/corpus`). `fuzz-seeds --small N OUT_DIR` writes at most N per target (the committed
//! set in `fuzz/seeds`). `--dict DIR` also writes the dictionaries (`msgpack.dict`, `json.dict`, `keys.dict`).
//! Used by `scripts/fuzz-seeds.sh`.

use std::path::PathBuf;

use mooncake_fuzz_harness::seeds;
use mooncake_fuzz_harness::targets::ALL;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut small: Option<usize> = None;
    let mut dict: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--small" => small = Some(args.next().and_then(|n| n.parse().ok()).expect("--small N")),
            "--dict" => dict = Some(args.next().expect("--dict DIR").into()),
            _ => out = Some(a.into()),
        }
    }
    if let Some(dir) = dict {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for (file, tokens, title) in seeds::dicts() {
            let path = dir.join(file);
            std::fs::write(&path, seeds::dict_file(&tokens, title))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            println!("wrote {} ({} tokens)", path.display(), tokens.len());
        }
    }
    let Some(out) = out else { return };
    for t in ALL {
        let all = seeds::seeds(t.name);
        let chosen = match small {
            Some(n) => seeds::sample(&all, n),
            None => all,
        };
        let dir = out.join(t.name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for s in &chosen {
            std::fs::write(dir.join(seeds::name_of(s)), s).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        println!("{}: {} seeds in {}", t.name, chosen.len(), dir.display());
    }
}
