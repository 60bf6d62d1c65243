//! The pieces every writer of the typed layer uses: identifiers, literals, doc comments, and the file printed
//! by `prettyplease`.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};

/// The first lines of a generated file (a line comment, which no token tree holds; rustfmt leaves a file
/// starting with `@generated` alone).
fn header(family: &str) -> String {
    format!(
        "// @generated from spec/{family}/ by mooncake-wire (src/generate/typed_rs/). Do not edit: change spec/ and\n\
         // regenerate with `BLESS=1 cargo test --test generated`.\n"
    )
}

/// The generated file: the header, then `items` as `prettyplease` prints them.
pub(super) fn file(family: &str, items: TokenStream) -> String {
    let parsed: syn::File = match syn::parse2(items) {
        Ok(f) => f,
        // The writers put tokens together from names the spec checked; tokens that do not parse are theirs.
        Err(e) => panic!("the typed-layer generator wrote tokens that are not a Rust file: {e}"),
    };
    header(family) + &prettyplease::unparse(&parsed)
}

/// An identifier for a name of the spec (a Rust keyword is written raw).
pub(super) fn ident(name: &str) -> Ident {
    if syn::parse_str::<Ident>(name).is_ok() {
        Ident::new(name, Span::call_site())
    } else {
        Ident::new_raw(name, Span::call_site())
    }
}

/// `name` + `suffix` as an identifier (`MooncakeXferMetadataOf`, `MOONCAKE_XFER_METADATA_VIA_NEWEST`).
pub(super) fn ident_with(name: &str, suffix: &str) -> Ident {
    format_ident!("{name}{suffix}")
}

pub(super) fn lit_str(s: &str) -> Literal {
    Literal::string(s)
}

pub(super) fn lit_usize(n: usize) -> Literal {
    Literal::usize_unsuffixed(n)
}

/// A Rust byte-string literal.
pub(super) fn lit_bytes(b: &[u8]) -> Literal {
    Literal::byte_string(b)
}

/// An unsuffixed integer literal written as `text` (`0b101`, `-3`).
pub(super) fn lit_int(text: &str) -> TokenStream {
    match text.parse() {
        Ok(t) => t,
        Err(e) => panic!("{text} is not an integer literal: {e}"),
    }
}

/// `name` in UPPER_SNAKE case (`MooncakeXferMetadata` → `MOONCAKE_XFER_METADATA`).
pub(super) fn upper_snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_uppercase());
    }
    s
}

/// The constant holding the members of enum `name` a revision defines.
pub(super) fn enum_members_const(name: &str) -> Ident {
    format_ident!("{}_MEMBERS", upper_snake(name))
}

/// Python's `repr()` of bytes, for docs.
pub(super) fn py_bytes(b: &[u8]) -> String {
    crate::codec::py_bytes_repr(b)
}

/// `text` as outer doc comments, wrapped to lines of at most `width` characters.
pub(super) fn doc(width: usize, text: &str) -> TokenStream {
    let lines = wrap(text, width).into_iter().map(|l| format!(" {l}"));
    quote!(#(#[doc = #lines])*)
}

/// `text` as inner doc comments (a file's `//!`).
pub(super) fn inner_doc(width: usize, text: &str) -> TokenStream {
    let lines = wrap(text, width).into_iter().map(|l| format!(" {l}"));
    quote!(#(#![doc = #lines])*)
}

/// The usual width of a doc comment of an item nested `depth` modules and impls deep.
pub(super) fn width(depth: usize) -> usize {
    110 - 4 * depth
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![];
    let mut cur = String::new();
    for w in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + w.len() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    // Square brackets would read as intra-doc links.
    lines.into_iter().map(|l| l.replace('[', "\\[").replace(']', "\\]")).collect()
}

/// A Rust tuple (type or expression) of `parts`; a one-element tuple keeps its comma.
pub(super) fn tuple(parts: impl IntoIterator<Item = TokenStream>) -> TokenStream {
    let parts = parts.into_iter();
    quote!((#(#parts,)*))
}
