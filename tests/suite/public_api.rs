//! The wire crate's public API, listed in `schema/public-api/mooncake-wire.txt`: every public item of every public
//! module with its signature, read from the source with `syn` (the same on every toolchain, unlike rustdoc's
//! JSON). A pull request that changes what a Rust implementer depends on changes that file, so the change shows in
//! review (issue 30); `BLESS=1 cargo test -p mooncake-wire --test suite public_api::` rewrites it.
//!
//! What it sees: `pub` functions, structs (with their `pub` fields), enums (with their variants), traits (with
//! their items), constants, statics, type aliases, `pub use` re-exports, the `pub` functions and constants of
//! inherent impls and the trait impls of the types listed, and item-level macro calls (their tables generate items:
//! `closed_enum!`, `testing_pub!`), doc comments and the trailing commas of lists broken over lines left out.
//! Private modules are not entered: what they export is the `pub use` lines. `#[cfg(test)]` items are left out;
//! other `cfg`s are written after the item.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::{Attribute, Fields, ImplItem, Item, TraitItem, Visibility};

const LISTING: &str = "schema/public-api/mooncake-wire.txt";

/// Tokens as one line, without the spaces `TokenStream`'s display puts around punctuation.
fn text(t: &impl ToTokens) -> String {
    let mut s = without_trailing_commas(without_docs(t.to_token_stream()), None).to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        ("& ", "&"),
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        ("( ", "("),
        (" )", ")"),
        (" :", ":"),
        ("[ ", "["),
        (" ]", "]"),
        (" ;", ";"),
        ("# ", "#"),
        ("! ", "!"),
        (" !", "!"),
    ] {
        s = s.replace(from, to);
    }
    // `f (x)` → `f(x)`: a call or signature's parenthesis follows its name.
    let mut out = String::with_capacity(s.len());
    let mut prev = ' ';
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' && chars.peek() == Some(&'(') && (prev.is_alphanumeric() || prev == '_' || prev == '>') {
            continue;
        }
        out.push(c);
        prev = c;
    }
    out
}

/// `tokens` without `#[doc = …]` attributes, at any depth (a macro call's table holds doc comments).
fn without_docs(tokens: TokenStream) -> TokenStream {
    let mut out = vec![];
    let mut it = tokens.into_iter().peekable();
    while let Some(t) = it.next() {
        if let TokenTree::Punct(p) = &t {
            if p.as_char() == '#' {
                if let Some(TokenTree::Group(g)) = it.peek() {
                    if g.stream().into_iter().next().is_some_and(|f| f.to_string() == "doc") {
                        it.next();
                        continue;
                    }
                }
            }
        }
        out.push(match t {
            TokenTree::Group(g) => {
                let mut n = proc_macro2::Group::new(g.delimiter(), without_docs(g.stream()));
                n.set_span(g.span());
                TokenTree::Group(n)
            }
            other => other,
        });
    }
    out.into_iter().collect()
}

fn is_punct(t: &TokenTree, c: char) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == c)
}

/// `tokens` (the stream of a group delimited by `delimiter`, or the top level) without the trailing commas a
/// formatter adds where it breaks a list over lines (`f(a: A, b: B,)`, `{A, B,}`, `X<&'a str,>`), at any depth:
/// they are layout, not signature. A one-element tuple's comma (`(T,)`) stays.
fn without_trailing_commas(tokens: TokenStream, delimiter: Option<proc_macro2::Delimiter>) -> TokenStream {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    // Commas outside angle brackets, and whether a lone `:` names a parameter or field (`a: A`, not `a::b`).
    let (mut depth, mut commas, mut named) = (0usize, 0, false);
    for (i, t) in tokens.iter().enumerate() {
        let joint_before = i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.spacing() == Spacing::Joint);
        match t {
            TokenTree::Punct(p) if p.as_char() == '<' => depth += 1,
            TokenTree::Punct(p) if p.as_char() == '>' && !joint_before => depth = depth.saturating_sub(1),
            TokenTree::Punct(p) if p.as_char() == ',' && depth == 0 => commas += 1,
            TokenTree::Punct(p) if p.as_char() == ':' && p.spacing() == Spacing::Alone && !joint_before => named = true,
            _ => {}
        }
    }
    let one_tuple = delimiter == Some(proc_macro2::Delimiter::Parenthesis) && commas == 1 && !named;
    let mut out = vec![];
    for (i, t) in tokens.iter().enumerate() {
        let trailing = is_punct(t, ',')
            && match tokens.get(i + 1) {
                None => delimiter.is_some() && !one_tuple,
                Some(next) => is_punct(next, '>'),
            };
        if trailing {
            continue;
        }
        out.push(match t {
            TokenTree::Group(g) => {
                let mut n =
                    proc_macro2::Group::new(g.delimiter(), without_trailing_commas(g.stream(), Some(g.delimiter())));
                n.set_span(g.span());
                TokenTree::Group(n)
            }
            other => other.clone(),
        });
    }
    out.into_iter().collect()
}

/// `None` for a `#[cfg(test)]` item; else the item's other `cfg` attributes, as a suffix.
fn cfgs(attrs: &[Attribute]) -> Option<String> {
    let mut s = String::new();
    for a in attrs.iter().filter(|a| a.path().is_ident("cfg")) {
        let t = text(&a.meta);
        if t == "cfg(test)" {
            return None;
        }
        s.push_str(&format!(" #[{t}]"));
    }
    Some(s)
}

fn is_pub(v: &Visibility) -> bool {
    matches!(v, Visibility::Public(_))
}

/// The file of module `name` declared in `file`.
fn module_file(file: &Path, name: &str) -> PathBuf {
    let stem = file.file_stem().unwrap().to_str().unwrap();
    let dir =
        if stem == "lib" || stem == "mod" { file.parent().unwrap().to_path_buf() } else { file.with_extension("") };
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        dir.join(name).join("mod.rs")
    }
}

struct Lister {
    lines: Vec<String>,
}

impl Lister {
    fn push(&mut self, path: &str, what: String, cfg: &str) {
        self.lines.push(format!("{path} {what}{cfg}"));
    }

    fn file(&mut self, path: &str, file: &Path) {
        let src = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ast = syn::parse_file(&src).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        self.items(path, file, &ast.items);
    }

    fn items(&mut self, path: &str, file: &Path, items: &[Item]) {
        // The public types of this module: their impls are listed.
        let types: BTreeSet<String> = items
            .iter()
            .filter_map(|i| match i {
                Item::Struct(s) if is_pub(&s.vis) => Some(s.ident.to_string()),
                Item::Enum(e) if is_pub(&e.vis) => Some(e.ident.to_string()),
                _ => None,
            })
            .collect();
        for item in items {
            self.item(path, file, item, &types);
        }
    }

    fn item(&mut self, path: &str, file: &Path, item: &Item, types: &BTreeSet<String>) {
        match item {
            Item::Mod(m) if is_pub(&m.vis) => {
                let Some(cfg) = cfgs(&m.attrs) else { return };
                let inner = format!("{path}::{}", m.ident);
                self.push(path, format!("mod {}", m.ident), &cfg);
                match &m.content {
                    Some((_, items)) => self.items(&inner, file, items),
                    None => self.file(&inner, &module_file(file, &m.ident.to_string())),
                }
            }
            Item::Fn(f) if is_pub(&f.vis) => self.with_cfg(path, &f.attrs, text(&f.sig)),
            Item::Const(c) if is_pub(&c.vis) => {
                self.with_cfg(path, &c.attrs, format!("const {}: {}", c.ident, text(&c.ty)))
            }
            Item::Static(s) if is_pub(&s.vis) => {
                self.with_cfg(path, &s.attrs, format!("static {}: {}", s.ident, text(&s.ty)))
            }
            Item::Type(t) if is_pub(&t.vis) => {
                self.with_cfg(path, &t.attrs, format!("type {}{} = {}", t.ident, text(&t.generics), text(&t.ty)))
            }
            Item::Use(u) if is_pub(&u.vis) => self.with_cfg(path, &u.attrs, format!("use {}", text(&u.tree))),
            Item::Struct(s) if is_pub(&s.vis) => {
                let Some(cfg) = cfgs(&s.attrs) else { return };
                self.push(path, format!("struct {}{}", s.ident, text(&s.generics)), &cfg);
                self.fields(&format!("{path}::{}", s.ident), &s.fields, true);
            }
            Item::Enum(e) if is_pub(&e.vis) => {
                let Some(cfg) = cfgs(&e.attrs) else { return };
                self.push(path, format!("enum {}{}", e.ident, text(&e.generics)), &cfg);
                for v in &e.variants {
                    let inner = format!("{path}::{}::{}", e.ident, v.ident);
                    self.push(&inner, "variant".into(), "");
                    self.fields(&inner, &v.fields, false);
                }
            }
            Item::Trait(t) if is_pub(&t.vis) => self.trait_(path, t),
            Item::Impl(i) => self.impl_(path, i, types),
            Item::Macro(m) if m.ident.is_none() && !m.mac.path.is_ident("thread_local") => {
                self.with_cfg(path, &m.attrs, text(&m.mac))
            }
            Item::Macro(m) if m.attrs.iter().any(|a| a.path().is_ident("macro_export")) => {
                self.push("mooncake_wire", format!("macro {}", m.ident.as_ref().unwrap()), "")
            }
            _ => {}
        }
    }

    fn with_cfg(&mut self, path: &str, attrs: &[Attribute], what: String) {
        if let Some(cfg) = cfgs(attrs) {
            self.push(path, what, &cfg);
        }
    }

    /// A struct's public fields (all of a variant's).
    fn fields(&mut self, path: &str, fields: &Fields, only_pub: bool) {
        for (n, f) in fields.iter().enumerate() {
            if only_pub && !is_pub(&f.vis) {
                continue;
            }
            let name = f.ident.as_ref().map_or(n.to_string(), |i| i.to_string());
            self.with_cfg(path, &f.attrs, format!("field {name}: {}", text(&f.ty)));
        }
    }

    fn trait_(&mut self, path: &str, t: &syn::ItemTrait) {
        let Some(cfg) = cfgs(&t.attrs) else { return };
        let bounds = if t.supertraits.is_empty() { String::new() } else { format!(": {}", text(&t.supertraits)) };
        self.push(path, format!("trait {}{}{bounds}", t.ident, text(&t.generics)), &cfg);
        let inner = format!("{path}::{}", t.ident);
        for i in &t.items {
            match i {
                TraitItem::Fn(f) => self.with_cfg(&inner, &f.attrs, text(&f.sig)),
                TraitItem::Type(ty) => self.with_cfg(&inner, &ty.attrs, format!("type {}", ty.ident)),
                TraitItem::Const(c) => self.with_cfg(&inner, &c.attrs, format!("const {}: {}", c.ident, text(&c.ty))),
                _ => {}
            }
        }
    }

    /// The impls of this module's public types: a trait impl as one line, an inherent impl's public items.
    fn impl_(&mut self, path: &str, i: &syn::ItemImpl, types: &BTreeSet<String>) {
        let syn::Type::Path(tp) = &*i.self_ty else { return };
        let Some(last) = tp.path.segments.last() else { return };
        if !types.contains(&last.ident.to_string()) {
            return;
        }
        let Some(cfg) = cfgs(&i.attrs) else { return };
        let ty = text(&i.self_ty);
        if let Some((neg, tr, _)) = &i.trait_ {
            let not = if neg.is_some() { "!" } else { "" };
            self.push(path, format!("impl{} {not}{} for {ty}", text(&i.generics), text(tr)), &cfg);
            return;
        }
        let inner = format!("{path}::{ty}");
        for item in &i.items {
            match item {
                ImplItem::Fn(f) if is_pub(&f.vis) => self.with_cfg(&inner, &f.attrs, text(&f.sig)),
                ImplItem::Const(c) if is_pub(&c.vis) => {
                    self.with_cfg(&inner, &c.attrs, format!("const {}: {}", c.ident, text(&c.ty)))
                }
                _ => {}
            }
        }
    }
}

fn listing() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut l = Lister { lines: vec![] };
    l.file("mooncake_wire", &root.join("src/lib.rs"));
    let mut out = String::from(
        "# The public API of the mooncake-wire crate, one item per line (tests/suite/public_api.rs; BLESS=1 rewrites it).\n",
    );
    for line in &l.lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[test]
fn the_public_api_listing_is_current() {
    let want = listing();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(LISTING);
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have == want {
        return;
    }
    if std::env::var_os("BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let (h, w): (BTreeSet<&str>, BTreeSet<&str>) = (have.lines().collect(), want.lines().collect());
    let gone: Vec<_> = h.difference(&w).take(20).map(|l| format!("- {l}")).collect();
    let new: Vec<_> = w.difference(&h).take(20).map(|l| format!("+ {l}")).collect();
    panic!(
        "the wire crate's public API changed: {LISTING} is stale (BLESS=1 cargo test -p mooncake-wire --test suite \
         public_api:: rewrites it; commit it so that the change shows in review)\n{}\n{}",
        gone.join("\n"),
        new.join("\n")
    );
}

#[test]
fn the_lister_sees_what_it_should() {
    let src: syn::File = syn::parse_quote! {
        /// Doc.
        pub fn f(x: &[u8]) -> Result<u8, E> { todo!() }
        fn private() {}
        pub struct S<T> { pub a: Vec<T>, b: u8 }
        impl<T> S<T> { pub fn new() -> Self { todo!() } fn hidden(&self) {} }
        impl<T> Clone for S<T> { fn clone(&self) -> Self { todo!() } }
        struct Private;
        impl Private { pub fn no(&self) {} }
        #[cfg(feature = "testing")]
        pub use inner::Thing;
        #[cfg(test)]
        pub fn only_in_tests() {}
        pub enum E { A, B(u8), C { x: u16 } }
        closed_enum!(
            /// Doc of the enum.
            K { V = "v" }
        );
        // Broken over lines by a formatter: the trailing commas are layout; a one-element tuple keeps its own.
        pub fn g(a: u8, b: (u8,), c: m::N,) -> X<&'a str,> { todo!() }
        pub use a::{B, C,};
        pub type T1 = (u8,);
    };
    let mut l = Lister { lines: vec![] };
    l.items("m", Path::new("lib.rs"), &src.items);
    assert_eq!(
        l.lines,
        [
            "m fn f(x: &[u8]) -> Result<u8, E>",
            "m struct S<T>",
            "m::S field a: Vec<T>",
            "m::S<T> fn new() -> Self",
            "m impl<T> Clone for S<T>",
            "m use inner::Thing #[cfg(feature = \"testing\")]",
            "m enum E",
            "m::E::A variant",
            "m::E::B variant",
            "m::E::B field 0: u8",
            "m::E::C variant",
            "m::E::C field x: u16",
            "m closed_enum!(K { V = \"v\" })",
            "m fn g(a: u8, b: (u8,), c: m::N) -> X<&'a str>",
            "m use a::{ B, C }",
            "m type T1 = (u8,)",
        ]
    );
}
