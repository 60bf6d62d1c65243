//! The typed layer of the push family, generated from `spec/` (issue 16): for every revision, one Rust struct
//! per MessagePack side-channel message with its field list, required mask, defaults, decoder and encoder; the
//! status enum as an open newtype with the terminal flags of the spec; the raw reply constants; and a table of
//! every revision for dispatch. The output is `src/typed/generated/push.rs`, committed and kept fresh by
//! `tests/generated.rs` like `schema/` (`BLESS=1 cargo test --test generated` rewrites it).
//!
//! The generated decoders are straight-line code over the toolkit of `src/typed/de.rs` (the same error stack
//! as the spec-driven codec); they hold no rule of their own, so a revision added to `spec/` needs no hand
//! edit here. The type vocabulary is the push family's: `str` (and aliases of it), `int`, `list[int]`,
//! `list[str]`, `list[list[int]]`, `optional[str]`, `optional[list[str]]`, an int enum, and
//! `dict[str, tuple[str, list[int] | list[list[int]]]]` (`req_blocks`); anything else is an error naming the
//! field, so a revision using a new type fails to generate instead of generating something wrong.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::spec::{EnumDef, Family, FieldDef, Literal, Revision, Spec, StructDef, StructKind, TypeExpr};

/// Where the generated push layer is written, relative to the repository root.
pub const PUSH_PATH: &str = "src/typed/generated/push.rs";
/// Where the conversions between each push revision and the newest are written (`from_newest`, `to_newest`,
/// the `…_VIA_NEWEST` codecs the sans-IO cores use): apart from `push.rs`, so a change to the newest revision
/// shows in the older revisions' conversions only.
pub const VIA_NEWEST_PATH: &str = "src/typed/generated/via_newest.rs";

/// Every generated typed source, as (path relative to the repository root, contents).
pub fn sources(spec: &Spec) -> Result<BTreeMap<String, String>, String> {
    let push = spec.family("push").ok_or("the spec has no push family")?;
    let (types, via) = push_family(push)?;
    Ok(BTreeMap::from([(PUSH_PATH.to_string(), types), (VIA_NEWEST_PATH.to_string(), via)]))
}

/// The Rust shape of one field's spec type.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    Str,
    Int,
    ListInt,
    ListStr,
    ListListInt,
    OptStr,
    OptListStr,
    /// An int enum of the revision, by its spec name.
    Enum(String),
    /// `dict[str, tuple[str, list[list[int]]]]`.
    ReqBlocks,
    /// `dict[str, tuple[str, list[int]]]` (flat block lists, before 0.20.0).
    FlatReqBlocks,
}

fn resolve<'a>(rev: &'a Revision, t: &'a TypeExpr) -> &'a TypeExpr {
    let mut t = t;
    while let TypeExpr::Named(n) = t {
        match rev.aliases.get(n) {
            Some(a) => t = &a.ty,
            None => break,
        }
    }
    t
}

fn shape(rev: &Revision, t: &TypeExpr) -> Result<Shape, String> {
    use TypeExpr as T;
    let r = |t| resolve(rev, t);
    Ok(match r(t) {
        T::Str => Shape::Str,
        T::Int => Shape::Int,
        T::Named(n) if rev.enums.get(n).is_some_and(|e| e.kind == "IntEnum") => Shape::Enum(n.clone()),
        T::List(e) => match r(e) {
            T::Int => Shape::ListInt,
            T::Str => Shape::ListStr,
            T::List(e2) if *r(e2) == T::Int => Shape::ListListInt,
            _ => return Err(format!("unsupported type {t}")),
        },
        T::Optional(e) => match r(e) {
            T::Str => Shape::OptStr,
            T::List(e2) if *r(e2) == T::Str => Shape::OptListStr,
            _ => return Err(format!("unsupported type {t}")),
        },
        T::Dict(k, v) if *r(k) == T::Str => match r(v) {
            T::Tuple(items) if items.len() == 2 && *r(&items[0]) == T::Str => match r(&items[1]) {
                T::List(e) if *r(e) == T::Int => Shape::FlatReqBlocks,
                T::List(e) if matches!(r(e), T::List(e2) if *r(e2) == T::Int) => Shape::ReqBlocks,
                _ => return Err(format!("unsupported type {t}")),
            },
            _ => return Err(format!("unsupported type {t}")),
        },
        _ => return Err(format!("unsupported type {t}")),
    })
}

impl Shape {
    fn rust(&self) -> String {
        match self {
            Shape::Str => "S".into(),
            Shape::Int => "WireInt".into(),
            Shape::ListInt => "Vec<WireInt>".into(),
            Shape::ListStr => "Vec<S>".into(),
            Shape::ListListInt => "Vec<Vec<WireInt>>".into(),
            Shape::OptStr => "Option<S>".into(),
            Shape::OptListStr => "Option<StrList>".into(),
            Shape::Enum(n) => n.clone(),
            Shape::ReqBlocks => "Vec<(S, ReqBlocksOf<S>)>".into(),
            Shape::FlatReqBlocks => "Vec<(S, FlatReqBlocksOf<S>)>".into(),
        }
    }
    fn decode(&self) -> String {
        match self {
            Shape::Str => "d.str()?".into(),
            Shape::Int => "d.int()?".into(),
            Shape::ListInt => "d.list_int()?".into(),
            Shape::ListStr => "d.list_str()?".into(),
            Shape::ListListInt => "d.list_list_int()?".into(),
            Shape::OptStr => "d.opt_str()?".into(),
            Shape::OptListStr => "d.opt_str_list()?".into(),
            Shape::Enum(_) => unreachable!("enums are decoded with their members"),
            Shape::ReqBlocks => "d.str_dict(De::req_blocks)?".into(),
            Shape::FlatReqBlocks => "d.str_dict(De::flat_req_blocks)?".into(),
        }
    }
    /// Statements writing `v` (an expression of this shape, by reference) to `w`.
    fn encode(&self, v: &str) -> String {
        match self {
            Shape::Str => format!("w.str({v}.as_ref());"),
            Shape::Int => format!("w.int({v});"),
            Shape::ListInt => format!("w.int_list(&{v});"),
            Shape::ListStr => format!("str_list(w, &{v});"),
            Shape::ListListInt => format!("int_lists(w, &{v});"),
            Shape::OptStr => format!("if let Some(s) = &{v} {{ w.str(s.as_ref()) }} else {{ w.nil() }}"),
            Shape::OptListStr => format!("if let Some(l) = &{v} {{ write_str_list(w, l) }} else {{ w.nil() }}"),
            Shape::Enum(_) => format!("w.sint({v}.0);"),
            Shape::ReqBlocks | Shape::FlatReqBlocks => format!("encode_req_blocks(w, &{v});"),
        }
    }
    /// An upper bound of the encoded size of `v` (for the writer's first allocation).
    fn len_hint(&self, v: &str) -> String {
        match self {
            Shape::Str => format!("{v}.as_ref().len() + 5"),
            Shape::Int | Shape::Enum(_) => "9".into(),
            Shape::ListInt => format!("5 + 9 * {v}.len()"),
            Shape::ListStr => format!("str_list_len(&{v})"),
            Shape::ListListInt => format!("5 + {v}.iter().map(|g| 5 + 9 * g.len()).sum::<usize>()"),
            Shape::OptStr => format!("{v}.as_ref().map_or(1, |s| s.as_ref().len() + 5)"),
            Shape::OptListStr => format!("{v}.as_ref().map_or(1, str_list_buf_len)"),
            Shape::ReqBlocks | Shape::FlatReqBlocks => format!("req_blocks_len(&{v})"),
        }
    }
    /// The field of a borrowed message as an owned one.
    fn to_owned(&self, v: &str) -> String {
        match self {
            Shape::Str => format!("{v}.to_string()"),
            Shape::Int | Shape::Enum(_) => v.to_string(),
            Shape::ListInt | Shape::ListListInt => format!("{v}.clone()"),
            Shape::ListStr => format!("{v}.iter().map(|s| s.to_string()).collect()"),
            Shape::OptStr => format!("{v}.map(str::to_string)"),
            Shape::OptListStr => format!("{v}.clone()"),
            Shape::ReqBlocks | Shape::FlatReqBlocks => {
                format!("{v}.iter().map(|(k, b)| (k.to_string(), b.to_owned_blocks())).collect()")
            }
        }
    }
    /// The value a field holds when absent: its spec default, or for a required field the neutral value a
    /// constructor starts from (an empty string or list, 0; 1 for a `…_size`).
    fn default_value(
        &self,
        name: &str,
        default: Option<&Literal>,
        enums: &BTreeMap<String, EnumDef>,
    ) -> Result<String, String> {
        Ok(match (self, default) {
            (Shape::Str, None) => "S::default()".into(),
            (Shape::Int, None) if name.ends_with("_size") => "WireInt::from_u64(1)".into(),
            (Shape::Int, None) => "WireInt::ZERO".into(),
            (Shape::Int, Some(Literal::Int(n))) => int_expr(*n)?,
            (
                Shape::ListInt | Shape::ListStr | Shape::ListListInt | Shape::ReqBlocks | Shape::FlatReqBlocks,
                None | Some(Literal::EmptyList),
            ) => "Vec::new()".into(),
            (Shape::OptStr | Shape::OptListStr, Some(Literal::None)) => "None".into(),
            (Shape::Enum(n), None) => {
                let first = enums.get(n).and_then(|e| e.members.first()).ok_or(format!("enum {n} has no members"))?;
                format!("{n}::{}", first.name)
            }
            (s, d) => return Err(format!("unsupported default {d:?} for a field of shape {s:?}")),
        })
    }
    /// Whether `v` equals the default (`omit_defaults` leaves such a field out).
    fn is_default(&self, v: &str, default: &Literal) -> Result<String, String> {
        Ok(match (self, default) {
            (Shape::Int, Literal::Int(n)) => format!("{v} == {}", int_expr(*n)?),
            (
                Shape::ListInt | Shape::ListStr | Shape::ListListInt | Shape::ReqBlocks | Shape::FlatReqBlocks,
                Literal::EmptyList,
            ) => format!("{v}.is_empty()"),
            (Shape::OptStr | Shape::OptListStr, Literal::None) => format!("{v}.is_none()"),
            (s, d) => return Err(format!("unsupported default {d:?} for a field of shape {s:?}")),
        })
    }
    /// Whether `v` holds the neutral value of a required field (`default_value` without a default).
    fn neutral_check(&self, v: &str, name: &str, enums: &BTreeMap<String, EnumDef>) -> Result<String, String> {
        Ok(match self {
            Shape::Int | Shape::Enum(_) => format!("{v} == {}", self.default_value(name, None, enums)?),
            Shape::OptStr | Shape::OptListStr => format!("{v}.is_none()"),
            _ => format!("{v}.is_empty()"),
        })
    }
    fn has_strings(&self) -> bool {
        !matches!(self, Shape::Int | Shape::ListInt | Shape::ListListInt | Shape::Enum(_))
    }
}

fn int_expr(n: i128) -> Result<String, String> {
    if n >= 0 && n <= u64::MAX as i128 {
        Ok(format!("WireInt::from_u64({n})"))
    } else if n >= i64::MIN as i128 {
        Ok(format!("WireInt::from_i64({n})"))
    } else {
        Err(format!("default {n} is out of the wire's range"))
    }
}

/// A Rust module name for a revision: `vllm-0.16.0..0.18.1` → `vllm_0_16_0_to_0_18_1`.
pub fn module_name(revision: &str) -> String {
    revision
        .replace("..", "_to_")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}

fn doc(out: &mut String, indent: &str, text: &str) {
    for line in wrap(text, 110 - indent.len()) {
        let _ = writeln!(out, "{indent}/// {line}");
    }
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

fn rust_str(s: &str) -> String {
    format!("{s:?}")
}

/// One message struct of one revision, as the parts the generator writes.
struct Message<'a> {
    name: &'a str,
    def: &'a StructDef,
    fields: Vec<(&'a FieldDef, Shape, Option<Literal>)>,
}

impl<'a> Message<'a> {
    fn new(rev: &'a Revision, name: &'a str) -> Result<Self, String> {
        let def = rev.structs.get(name).ok_or(format!("{}: no struct {name}", rev.revision))?;
        if def.kind != StructKind::MsgspecStruct || def.options.array_like || def.options.tag.is_some() {
            return Err(format!("{}: {name} is not a map-encoded msgspec.Struct", rev.revision));
        }
        if def.fields.len() > 64 {
            return Err(format!("{}: {name} has more than 64 fields", rev.revision));
        }
        let mut fields = vec![];
        for f in &def.fields {
            let s = shape(rev, &f.ty).map_err(|e| format!("{}: {name}.{}: {e}", rev.revision, f.name))?;
            let d = f.default_literal().map_err(|e| format!("{}: {name}.{}: {e}", rev.revision, f.name))?;
            fields.push((f, s, d));
        }
        Ok(Message { name, def, fields })
    }

    /// What makes two revisions' structs the same Rust code: names, shapes, defaults, options and the members
    /// of the enums they hold.
    fn key(&self, rev: &Revision) -> String {
        let mut k = format!("{}|{:?}|", self.name, self.def.options);
        for (f, s, d) in &self.fields {
            let _ = write!(k, "{}:{s:?}:{d:?};", f.name);
            if let Shape::Enum(e) = s {
                let m: Vec<(i64, &str)> = rev.enums[e].members.iter().map(|m| (m.value, m.name.as_str())).collect();
                let _ = write!(k, "{m:?};");
            }
        }
        k
    }

    fn required_mask(&self) -> u64 {
        self.fields.iter().enumerate().filter(|(_, (f, _, _))| f.required()).fold(0, |m, (i, _)| m | 1 << i)
    }

    fn write(&self, out: &mut String, rev: &Revision, enums: &BTreeMap<String, EnumDef>) -> Result<(), String> {
        let n = self.name;
        let strings = self.fields.iter().any(|(_, s, _)| s.has_strings());
        if !strings {
            return Err(format!("{}: {n} holds no strings (the generator always makes …Of<S>)", rev.revision));
        }
        let enum_field =
            self.fields.iter().find_map(|(_, s, _)| if let Shape::Enum(e) = s { Some(e.clone()) } else { None });
        // The struct.
        doc(
            out,
            "    ",
            &format!(
                "{} (`{}` `[structs.{n}]`, {}). Strings held as `S`: see [`{n}`] and [`{n}Ref`].",
                self.def.doc.trim_end_matches('.'),
                rev.revision,
                self.def.source
            ),
        );
        let _ = writeln!(out, "    #[derive(Clone, Debug, PartialEq, Eq)]\n    pub struct {n}Of<S> {{");
        for (f, s, d) in &self.fields {
            let req = match d {
                None => "Required.".to_string(),
                Some(_) => format!("Default `{}`.", f.default_display()),
            };
            doc(out, "        ", &format!("{} {req}", f.doc));
            let _ = writeln!(out, "        pub {}: {},", f.name, s.rust());
        }
        let _ = writeln!(out, "    }}\n");
        doc(out, "    ", &format!("{} with owned strings.", n));
        let _ = writeln!(out, "    pub type {n} = {n}Of<String>;");
        doc(out, "    ", &format!("{} with strings borrowed from the decoded bytes (no allocation per string).", n));
        let _ = writeln!(out, "    pub type {n}Ref<'a> = {n}Of<&'a str>;\n");

        // Field list and mask.
        let _ = writeln!(out, "    impl<S> {n}Of<S> {{");
        let _ = writeln!(out, "        /// Wire names in declaration order.");
        let names: Vec<String> = self.fields.iter().map(|(f, _, _)| rust_str(&f.name)).collect();
        let _ = writeln!(out, "        pub const FIELDS: [&'static str; {}] = [{}];", names.len(), names.join(", "));
        let _ = writeln!(out, "        /// Bit `i` set: field `i` has no default and must be on the wire.");
        let _ = writeln!(out, "        pub const REQUIRED: u64 = {:#b};", self.required_mask());
        let _ = writeln!(out, "    }}\n");

        // Default.
        let _ = writeln!(out, "    impl<S: Default> Default for {n}Of<S> {{");
        let _ =
            writeln!(out, "        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.");
        let _ = writeln!(out, "        fn default() -> Self {{\n            {n}Of {{");
        for (f, s, d) in &self.fields {
            let _ = writeln!(out, "                {}: {},", f.name, s.default_value(&f.name, d.as_ref(), enums)?);
        }
        let _ = writeln!(out, "            }}\n        }}\n    }}\n");

        // Constructor from the required fields.
        let req: Vec<_> = self.fields.iter().filter(|(f, _, _)| f.required()).collect();
        let _ = writeln!(out, "    impl<S: Default> {n}Of<S> {{");
        let _ = writeln!(out, "        /// The message with these required fields and every other at its default.");
        let args: Vec<String> = req.iter().map(|(f, s, _)| format!("{}: {}", f.name, s.rust())).collect();
        let names: Vec<String> = req.iter().map(|(f, _, _)| f.name.clone()).collect();
        let _ = writeln!(out, "        pub fn new({}) -> Self {{", args.join(", "));
        let _ = writeln!(out, "            {n}Of {{ {}, ..Self::default() }}\n        }}\n    }}\n", names.join(", "));

        // Decode.
        let _ = writeln!(out, "    impl<'a, S: WireStr<'a> + Default> {n}Of<S> {{");
        let _ = writeln!(out, "        /// Decodes as msgspec does with {}'s class.", rev.revision);
        let _ = writeln!(out, "        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {{");
        let _ = writeln!(out, "            Self::decode_with(bytes, Strictness::Msgspec)\n        }}\n");
        let _ = writeln!(out, "        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.");
        let _ = writeln!(
            out,
            "        pub fn decode_with(bytes: &'a [u8], strictness: Strictness) -> Result<Self, DecodeError> {{"
        );
        let _ = writeln!(out, "            let mut d = De::new(bytes)?;");
        let _ = writeln!(out, "            let mut v = Self::default();");
        let _ = writeln!(out, "            let mut seen = 0u64;");
        let _ = writeln!(out, "            d.struct_map(&Self::FIELDS, |d, i| {{");
        let _ = writeln!(out, "                seen |= 1 << i;");
        let _ = writeln!(out, "                match i {{");
        let last = self.fields.len() - 1;
        for (i, (f, s, _)) in self.fields.iter().enumerate() {
            let arm = if i == last { "_".to_string() } else { i.to_string() };
            let expr = match s {
                Shape::Enum(e) => format!("d.enum_member(&{}, strictness)?", enum_members_const(e)),
                s => s.decode(),
            };
            let _ = writeln!(out, "                    {arm} => v.{} = {expr},", f.name);
        }
        let _ = writeln!(out, "                }}\n                Ok(())\n            }})?;");
        let _ = writeln!(out, "            let missing = Self::REQUIRED & !seen;");
        let _ = writeln!(out, "            if missing != 0 {{\n                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));\n            }}");
        let _ = writeln!(out, "            d.finish()?;\n            Ok(v)\n        }}\n    }}\n");
        if enum_field.is_none() {
            // `strictness` is unused without an enum field; the signature stays the same for every message.
        }

        // to_owned_message.
        let _ = writeln!(out, "    impl {n}Ref<'_> {{\n        /// The same message with owned strings.");
        let _ = writeln!(out, "        pub fn to_owned_message(&self) -> {n} {{\n            {n}Of {{");
        for (f, s, _) in &self.fields {
            let _ = writeln!(out, "                {}: {},", f.name, s.to_owned(&format!("self.{}", f.name)));
        }
        let _ = writeln!(out, "            }}\n        }}\n    }}\n");

        // Encode.
        let _ = writeln!(out, "    impl<S: AsRef<str>> {n}Of<S> {{");
        let _ = writeln!(
            out,
            "        /// Encodes as msgspec does (declaration order{}).",
            if self.def.options.omit_defaults { ", defaults omitted" } else { "" }
        );
        let _ = writeln!(out, "        pub fn encode(&self) -> Vec<u8> {{");
        let _ = writeln!(out, "            let mut w = Writer::with_capacity(self.encoded_len_hint());");
        let _ = writeln!(out, "            self.encode_into(&mut w);\n            w.into_bytes()\n        }}\n");
        let hints: Vec<String> = self
            .fields
            .iter()
            .map(|(f, s, _)| format!("{} + {}", f.name.len() + 1, s.len_hint(&format!("self.{}", f.name))))
            .collect();
        let _ = writeln!(
            out,
            "        fn encoded_len_hint(&self) -> usize {{\n            5 + {}\n        }}\n",
            hints.join("\n                + ")
        );
        let _ = writeln!(out, "        /// Appends the encoding to `w`.");
        let _ = writeln!(out, "        pub fn encode_into(&self, w: &mut Writer) {{");
        let _ = writeln!(out, "            let h = w.begin_struct_map(Self::FIELDS.len());");
        let _ = writeln!(out, "            let mut n = 0;");
        for (f, s, d) in &self.fields {
            let v = format!("self.{}", f.name);
            let body = format!("w.str({});\n{}\nn += 1;", rust_str(&f.name), s.encode(&v));
            match d {
                Some(lit) if self.def.options.omit_defaults => {
                    let _ = writeln!(out, "            if !({}) {{", s.is_default(&v, lit)?);
                    for l in body.lines() {
                        let _ = writeln!(out, "                {l}");
                    }
                    let _ = writeln!(out, "            }}");
                }
                _ => {
                    for l in body.lines() {
                        let _ = writeln!(out, "            {l}");
                    }
                }
            }
        }
        let _ = writeln!(out, "            w.finish_struct_map(h, n);\n        }}\n    }}\n");
        Ok(())
    }
}

impl Message<'_> {
    /// `from_newest` and `to_newest`: this revision's struct from and to the newest revision's, field by field
    /// by name. A field only the newest has must hold its default (or, required there, its neutral value) to
    /// be said here; an enum value must be one this revision defines; grouped block lists become flat ones
    /// when this revision's are flat. A pair of shapes with no rule is an error naming the field.
    fn write_via_newest(
        &self,
        out: &mut String,
        newest: &Message,
        rev: &Revision,
        enums: &BTreeMap<String, EnumDef>,
    ) -> Result<(), String> {
        let n = self.name;
        let ctx = |f: &str| format!("{}: {n}.{f}", rev.revision);
        let _ = writeln!(out, "    impl {n} {{");
        doc(out, "        ", &format!("This revision's `{n}` holding what the newest revision's `n` holds. `Err` names what cannot be said here: a field this revision lacks that is off its default, an enum value it does not define, more than one block group where block lists are flat."));
        let _ = writeln!(out, "        pub fn from_newest(n: &newest::{n}) -> Result<Self, String> {{");
        for (f, s, d) in &newest.fields {
            if self.fields.iter().any(|(g, _, _)| g.name == f.name) {
                continue;
            }
            let v = format!("n.{}", f.name);
            let check = match d {
                Some(lit) => s.is_default(&v, lit),
                None => s.neutral_check(&v, &f.name, enums),
            }
            .map_err(|e| format!("{}: {e}", ctx(&f.name)))?;
            let _ = writeln!(out, "            if !({check}) {{");
            let _ = writeln!(
                out,
                "                return Err(format!(\"no field `{}`, so {{:?}} cannot be sent\", {v}));",
                f.name
            );
            let _ = writeln!(out, "            }}");
        }
        for (f, s, _) in &self.fields {
            if let Shape::Enum(e) = s {
                if newest.fields.iter().any(|(g, _, _)| g.name == f.name) {
                    let _ = writeln!(out, "            if !{}.contains(&n.{}) {{", enum_members_const(e), f.name);
                    let _ = writeln!(out, "                return Err(format!(\"no {e} member {{}}\", n.{}));", f.name);
                    let _ = writeln!(out, "            }}");
                }
            }
        }
        let _ = writeln!(out, "            Ok({n}Of {{");
        for (f, s, d) in &self.fields {
            let expr = match newest.fields.iter().find(|(g, _, _)| g.name == f.name) {
                None => s.default_value(&f.name, d.as_ref(), enums)?,
                Some((_, w, _)) => {
                    convert(w, s, &format!("n.{}", f.name), true).map_err(|e| format!("{}: {e}", ctx(&f.name)))?
                }
            };
            let _ = writeln!(out, "                {}: {expr},", f.name);
        }
        let _ = writeln!(out, "            }})\n        }}\n");
        doc(out, "        ", &format!("The newest revision's `{n}` holding this message's values; the fields this revision lacks at their defaults."));
        let _ = writeln!(out, "        pub fn to_newest(&self) -> newest::{n} {{");
        let _ = writeln!(out, "            let mut m = newest::{n}::default();");
        for (f, s, _) in &self.fields {
            if let Some((_, w, _)) = newest.fields.iter().find(|(g, _, _)| g.name == f.name) {
                let expr =
                    convert(s, w, &format!("self.{}", f.name), false).map_err(|e| format!("{}: {e}", ctx(&f.name)))?;
                let _ = writeln!(out, "            m.{} = {expr};", f.name);
            }
        }
        let _ = writeln!(out, "            m\n        }}\n    }}\n");
        Ok(())
    }
}

/// The expression turning `v` (owned strings, shape `from`) into shape `to`; `fallible` adds `?` where the
/// conversion can fail.
fn convert(from: &Shape, to: &Shape, v: &str, fallible: bool) -> Result<String, String> {
    Ok(match (from, to) {
        (Shape::Enum(a), Shape::Enum(b)) if a == b => v.to_string(),
        (a, b) if a == b => format!("{v}.clone()"),
        (Shape::ReqBlocks, Shape::FlatReqBlocks) if fallible => format!("flatten_req_blocks(&{v})?"),
        (Shape::FlatReqBlocks, Shape::ReqBlocks) => format!("group_req_blocks(&{v})"),
        (a, b) => return Err(format!("no conversion from {a:?} to {b:?}")),
    })
}

fn upper_snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_uppercase());
    }
    s
}

fn enum_members_const(e: &str) -> String {
    upper_snake(e) + "_MEMBERS"
}

/// Every enum of the family, merged over its revisions (newest doc wins; a value keeps one name).
fn family_enums(fam: &Family) -> Result<BTreeMap<String, EnumDef>, String> {
    let mut out: BTreeMap<String, EnumDef> = BTreeMap::new();
    for rev in &fam.revisions {
        for (name, e) in &rev.enums {
            if e.kind != "IntEnum" {
                return Err(format!("{}: enum {name} is a {}, not an IntEnum", rev.revision, e.kind));
            }
            let merged = out.entry(name.clone()).or_insert_with(|| EnumDef { members: vec![], ..e.clone() });
            merged.doc = e.doc.clone();
            for m in &e.members {
                match merged.members.iter_mut().find(|x| x.value == m.value) {
                    Some(x) if x.name != m.name => {
                        return Err(format!(
                            "{}: {name} value {} is {} here and {} before",
                            rev.revision, m.value, m.name, x.name
                        ))
                    }
                    Some(x) => *x = m.clone(),
                    None => merged.members.push(m.clone()),
                }
            }
        }
    }
    Ok(out)
}

fn write_enum(out: &mut String, name: &str, e: &EnumDef) {
    doc(out, "", &format!("{} An open newtype: named constants for every member any revision defines (the terminal flags are the spec's), and any other value representable, so a report can show what a peer sent. Each revision's members: `{}` in its module.", e.doc, enum_members_const(name)));
    let _ =
        writeln!(out, "#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub struct {name}(pub i64);\n");
    let _ = writeln!(out, "impl {name} {{");
    for m in &e.members {
        doc(
            out,
            "    ",
            &format!(
                "{} (since {}; {}).",
                m.doc.trim_end_matches('.'),
                m.since,
                if m.terminal == Some(true) { "terminal" } else { "not terminal" }
            ),
        );
        let _ = writeln!(out, "    pub const {}: {name} = {name}({});", m.name, m.value);
    }
    let _ = writeln!(out, "\n    /// Every member any revision defines, with its name, in value order of declaration.");
    let items: Vec<String> = e.members.iter().map(|m| format!("({name}::{}, {})", m.name, rust_str(&m.name))).collect();
    let _ = writeln!(out, "    pub const ALL: [({name}, &'static str); {}] = [{}];\n", items.len(), items.join(", "));
    let _ = writeln!(out, "    /// The member's name, if some revision defines this value.");
    let _ = writeln!(out, "    pub fn name(self) -> Option<&'static str> {{\n        Self::ALL.iter().find(|(s, _)| *s == self).map(|(_, n)| *n)\n    }}\n");
    let _ = writeln!(out, "    /// Whether some revision defines this value.");
    let _ = writeln!(out, "    pub fn is_known(self) -> bool {{\n        self.name().is_some()\n    }}\n");
    let non_terminal: Vec<String> =
        e.members.iter().filter(|m| m.terminal == Some(false)).map(|m| format!("{name}::{}", m.name)).collect();
    let _ = writeln!(
        out,
        "    /// Whether this value ends a reply stream (every value the spec does not mark non-terminal does)."
    );
    if non_terminal.is_empty() {
        let _ = writeln!(out, "    pub fn is_terminal(self) -> bool {{\n        true\n    }}");
    } else {
        let _ = writeln!(
            out,
            "    pub fn is_terminal(self) -> bool {{\n        !matches!(self, {})\n    }}",
            non_terminal.join(" | ")
        );
    }
    let _ = writeln!(out, "}}\n");
    let _ = writeln!(out, "impl fmt::Debug for {name} {{\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {{\n        match self.name() {{\n            Some(n) => f.write_str(n),\n            None => write!(f, \"{name}({{}})\", self.0),\n        }}\n    }}\n}}\n");
    let _ = writeln!(out, "impl fmt::Display for {name} {{\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {{\n        fmt::Debug::fmt(self, f)\n    }}\n}}\n");
    let _ = writeln!(
        out,
        "impl EnumMember for {name} {{\n    fn from_wire(v: i64) -> Self {{\n        {name}(v)\n    }}\n}}\n"
    );
}

fn push_family(fam: &Family) -> Result<(String, String), String> {
    let enums = family_enums(fam)?;
    let mut out = String::new();
    let mut via_out = String::new();
    let _ = writeln!(
        via_out,
        "// @generated from spec/push/ by mooncake-wire (src/generate/typed_rs.rs). Do not edit: change spec/ and\n// regenerate with `BLESS=1 cargo test --test generated`.\n"
    );
    let _ = writeln!(via_out, "//! Every push revision's messages to and from the newest revision's (generated from `spec/push/`): the\n//! conversions, and per revision the codecs the sans-IO cores speak it with.\n");
    let _ = writeln!(via_out, "#![allow(clippy::all, missing_docs)]\n");
    let _ = writeln!(via_out, "use super::push::*;\nuse crate::typed::blocks::{{flatten_req_blocks, group_req_blocks}};\nuse crate::typed::ViaNewest;\nuse crate::msgpack::WireInt;\n");
    let _ = writeln!(
        out,
        "// @generated from spec/push/ by mooncake-wire (src/generate/typed_rs.rs). Do not edit: change spec/ and\n// regenerate with `BLESS=1 cargo test --test generated`.\n"
    );
    let _ =
        writeln!(out, "//! The push family's typed messages, one module per revision (generated from `spec/push/`).\n");
    let _ = writeln!(out, "#![allow(clippy::all, missing_docs, unused_variables, unused_mut)]\n");
    let _ = writeln!(out, "use std::fmt;\n");
    let _ = writeln!(
        out,
        "use crate::typed::blocks::{{encode_req_blocks, req_blocks_len}};
use crate::typed::de::{{int_lists, str_list, str_list_buf_len, str_list_len, write_str_list, De, EnumMember, WireStr}};"
    );
    let _ = writeln!(out, "use crate::typed::{{FlatReqBlocksOf, ReqBlocksOf, StrList, Strictness}};");
    let _ = writeln!(out, "use crate::codec::DecodeError;\nuse crate::msgpack::{{WireInt, Writer}};\n");
    for (name, e) in &enums {
        write_enum(&mut out, name, e);
    }
    // Revisions: each struct written once, where its shape first appears; later revisions re-export it.
    let mut first_seen: BTreeMap<String, String> = BTreeMap::new();
    let mut table = vec![];
    let newest_rev = fam.revisions.last().ok_or("the push family has no revision")?;
    let newest_msgs: Vec<Message> = newest_rev
        .transport
        .messages
        .iter()
        .filter(|t| t.encoding == "msgpack")
        .map(|t| Message::new(newest_rev, &t.name))
        .collect::<Result<_, _>>()?;
    let newest_of = |name: &str| newest_msgs.iter().find(|m| m.name == name);
    // (message, revision, module) for every message the newest revision also has.
    let mut via = vec![];
    let mut via_body = String::new();
    for rev in &fam.revisions {
        let m = module_name(&rev.revision);
        let msgs: Vec<&str> =
            rev.transport.messages.iter().filter(|t| t.encoding == "msgpack").map(|t| t.name.as_str()).collect();
        let raw: Vec<(String, String)> = rev
            .transport
            .messages
            .iter()
            .filter(|t| t.encoding == "raw")
            .flat_map(|t| t.constants.iter().map(|c| (c.name.clone(), c.bytes.clone())))
            .collect();
        doc(&mut out, "", &format!("`{}` (vLLM {}): {}", rev.revision, rev.releases.join(", "), rev.summary));
        let _ = writeln!(out, "pub mod {m} {{\n    use super::*;\n");
        let _ = writeln!(
            out,
            "    /// The spec revision of this module.\n    pub const REVISION: &str = {};",
            rust_str(&rev.revision)
        );
        let anchor = if rev.generation == 1 { "gen1" } else { "gen2" };
        let _ = writeln!(
            out,
            "    /// Generation (`spec/PROTOCOL.md#{anchor}`).\n    pub const GENERATION: u32 = {};\n",
            rev.generation
        );
        for (name, e) in &rev.enums {
            let _ = writeln!(
                out,
                "    /// The members of `{name}` this revision defines (a decoder rejects any other value)."
            );
            let items: Vec<String> = e.members.iter().map(|m| format!("{name}::{}", m.name)).collect();
            let _ = writeln!(
                out,
                "    pub const {}: [{name}; {}] = [{}];\n",
                enum_members_const(name),
                items.len(),
                items.join(", ")
            );
        }
        for (name, bytes) in &raw {
            let _ = writeln!(
                out,
                "    /// Raw reply `{name}` (not MessagePack).\n    pub const {}: &[u8] = b{};\n",
                name.to_ascii_uppercase(),
                rust_str(bytes)
            );
        }
        let mut structs = vec![];
        for name in &msgs {
            let msg = Message::new(rev, name)?;
            let key = msg.key(rev);
            match first_seen.get(&key) {
                Some(earlier) => {
                    let _ = writeln!(out, "    /// Unchanged since `{earlier}`.\n    pub use super::{}::{{{name}, {name}Of, {name}Ref}};\n", module_name(earlier));
                }
                None => {
                    msg.write(&mut out, rev, &enums)?;
                    if let Some(newest) = newest_of(name) {
                        msg.write_via_newest(&mut via_body, newest, rev, &enums)?;
                    }
                    first_seen.insert(key, rev.revision.clone());
                }
            }
            structs.push(name.to_string());
        }
        let with_newest: Vec<&&str> = msgs.iter().filter(|n| newest_of(n).is_some()).collect();
        if !with_newest.is_empty() {
            doc(&mut via_out, "", &format!("`{}` through the newest revision's structs.", rev.revision));
            let _ = writeln!(via_out, "pub mod {m} {{\n    use super::*;\n    use super::super::push::{m}::*;\n");
            via_out.push_str(&via_body);
        }
        via_body.clear();
        for name in with_newest {
            doc(&mut via_out, "    ", &format!("`{name}` of this revision through the newest revision's struct (what the sans-IO cores hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`."));
            let _ = writeln!(
                via_out,
                "    pub const {}_VIA_NEWEST: ViaNewest<newest::{name}> = ViaNewest {{",
                upper_snake(name)
            );
            let _ = writeln!(via_out, "        revision: REVISION,");
            let _ = writeln!(via_out, "        decode: |b| {name}::decode(b).map(|m| m.to_newest()),");
            let _ = writeln!(via_out, "        encode: |n| {name}::from_newest(n).map(|m| m.encode()).map_err(|e| format!(\"{{REVISION}}: {{e}}\")),");
            let _ = writeln!(via_out, "    }};\n");
            via.push((name.to_string(), rev.revision.clone(), m.clone()));
        }
        if via.iter().any(|(_, r, _)| *r == rev.revision) {
            let _ = writeln!(via_out, "}}\n");
        }
        // Decode then encode, by message name, for checks that run over every revision.
        let _ = writeln!(
            out,
            "    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here)."
        );
        let _ = writeln!(out, "    pub fn round_trip(message: &str, bytes: &[u8], strictness: Strictness) -> Option<Result<Vec<u8>, DecodeError>> {{");
        let _ = writeln!(out, "        Some(match message {{");
        for s in &structs {
            let _ = writeln!(
                out,
                "            {} => {s}Ref::decode_with(bytes, strictness).map(|v| v.encode()),",
                rust_str(s)
            );
        }
        let _ = writeln!(out, "            _ => return None,\n        }})\n    }}\n");
        let _ = writeln!(
            out,
            "    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks."
        );
        let _ = writeln!(out, "    pub fn decode_and_drop(message: &str, bytes: &[u8], borrowed: bool) -> Option<Result<(), DecodeError>> {{");
        let _ = writeln!(out, "        Some(match (message, borrowed) {{");
        for s in &structs {
            let _ = writeln!(out, "            ({}, false) => {s}::decode(bytes).map(drop),", rust_str(s));
            let _ = writeln!(out, "            ({}, true) => {s}Ref::decode(bytes).map(drop),", rust_str(s));
        }
        let _ = writeln!(out, "            _ => return None,\n        }})\n    }}\n");
        let _ = writeln!(out, "    /// The field list of `message`, in declaration order.");
        let _ = writeln!(
            out,
            "    pub fn fields(message: &str) -> Option<&'static [&'static str]> {{\n        Some(match message {{"
        );
        for s in &structs {
            let _ = writeln!(out, "            {} => &{s}::FIELDS,", rust_str(s));
        }
        let _ = writeln!(out, "            _ => return None,\n        }})\n    }}\n}}\n");
        table.push((rev.revision.clone(), m, structs));
    }
    let newest = &table.last().ok_or("the push family has no revision")?.1;
    let _ = writeln!(out, "/// The newest revision (what `crate::typed` re-exports).\npub use {newest} as newest;\n");
    let _ = writeln!(out, "/// One generated revision: its name, messages and entry points.");
    let _ = writeln!(out, "pub struct GeneratedRevision {{\n    pub revision: &'static str,\n    pub messages: &'static [&'static str],\n    pub round_trip: fn(&str, &[u8], Strictness) -> Option<Result<Vec<u8>, DecodeError>>,\n    pub decode_and_drop: fn(&str, &[u8], bool) -> Option<Result<(), DecodeError>>,\n    pub fields: fn(&str) -> Option<&'static [&'static str]>,\n}}\n");
    let _ = writeln!(out, "/// Every revision of the push family, oldest first.");
    let _ = writeln!(out, "pub const REVISIONS: [GeneratedRevision; {}] = [", table.len());
    for (rev, m, structs) in &table {
        let s: Vec<String> = structs.iter().map(|s| rust_str(s)).collect();
        let _ = writeln!(out, "    GeneratedRevision {{ revision: {}, messages: &[{}], round_trip: {m}::round_trip, decode_and_drop: {m}::decode_and_drop, fields: {m}::fields }},", rust_str(rev), s.join(", "));
    }
    let _ = writeln!(out, "];");
    let out_via = &mut via_out;
    for msg in &newest_msgs {
        let n = msg.name;
        let _ = writeln!(out_via, "/// `{n}` of `revision` through the newest revision's struct (`None`: no generated revision of that name has it).");
        let _ = writeln!(
            out_via,
            "pub fn {}_via_newest(revision: &str) -> Option<ViaNewest<newest::{n}>> {{",
            upper_snake(n).to_ascii_lowercase()
        );
        let _ = writeln!(out_via, "    Some(match revision {{");
        for (_, rev, m) in via.iter().filter(|(x, _, _)| x == n) {
            let _ = writeln!(out_via, "        {} => {m}::{}_VIA_NEWEST,", rust_str(rev), upper_snake(n));
        }
        let _ = writeln!(out_via, "        _ => return None,\n    }})\n}}\n");
    }
    Ok((out, via_out))
}
