//! Prints what a structured target reads from an input file (its `arbitrary` operation sequence), then runs
//! the target's body on it: `cargo run --profile test -p mooncake-fuzz-harness --example show -- decoder FILE`.

use arbitrary::{Arbitrary, Unstructured};
use mooncake_fuzz_harness::targets::{cross, decoder, prefiller};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(target), Some(file)) = (args.next(), args.next()) else {
        eprintln!("usage: show prefiller|decoder|cross FILE");
        std::process::exit(2);
    };
    let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let u = Unstructured::new(&data);
    match target.as_str() {
        "prefiller" => {
            let i = prefiller::Input::arbitrary_take_rest(u).expect("an input");
            println!("{i:#?}");
            prefiller::execute(&i);
        }
        "decoder" => {
            let i = decoder::Input::arbitrary_take_rest(u).expect("an input");
            println!("{i:#?}");
            decoder::execute(&i);
        }
        "cross" => {
            let i = cross::Input::arbitrary_take_rest(u).expect("an input");
            println!("{i:#?}");
            cross::execute(&i);
        }
        other => {
            eprintln!("{other}: not a structured target");
            std::process::exit(2);
        }
    }
    println!("every invariant held");
}
