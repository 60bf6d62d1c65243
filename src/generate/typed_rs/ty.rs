//! The code for one value of a [`Ty`], wherever it sits (a field, a list's element, a tuple's item): its
//! Rust type, decoder, encoder, size hint, owned copy, default, the check that it is at a default, and the
//! conversion between two revisions' types. The push family's hot shapes (`list[int]`, `list[str]`,
//! `list[list[int]]`, the request blocks) use the hand-tuned loops of `src/typed/de.rs` at any position.

use std::collections::BTreeMap;

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, ToTokens};

use super::emit::{enum_members_const, ident, ident_with, lit_int, lit_usize, tuple};
use super::model::Ty;
use super::GenerateError;
use crate::spec::{EnumDef, Literal};

/// A value the generated code reads: a place (`self.x`, `n.x`, `x0.1`) or a reference (`x0`, a loop's
/// variable).
#[derive(Clone)]
pub(super) struct Val {
    expr: TokenStream,
    is_ref: bool,
}

impl Val {
    pub(super) fn place(expr: TokenStream) -> Self {
        Val { expr, is_ref: false }
    }

    /// Field `name` of `owner` (`self`, `n`).
    pub(super) fn field(owner: &str, name: &str) -> Self {
        let (o, n) = (format_ident!("{owner}"), ident(name));
        Val::place(quote!(#o.#n))
    }

    fn reference(name: &Ident) -> Self {
        Val { expr: quote!(#name), is_ref: true }
    }

    /// `&T`.
    fn by_ref(&self) -> TokenStream {
        let e = &self.expr;
        if self.is_ref {
            quote!(#e)
        } else {
            quote!(&#e)
        }
    }

    /// `T` (a `Copy` type).
    fn copied(&self) -> TokenStream {
        let e = &self.expr;
        if self.is_ref {
            quote!(*#e)
        } else {
            quote!(#e)
        }
    }

    /// The value as a method call's receiver.
    fn recv(&self) -> &TokenStream {
        &self.expr
    }

    /// Item `i` of a tuple.
    fn item(&self, i: usize) -> Val {
        let (e, i) = (&self.expr, syn::Index::from(i));
        Val::place(quote!(#e.#i))
    }
}

/// A loop's variable at nesting `depth` (`x0`, `k1`).
fn var(prefix: &str, depth: usize) -> Ident {
    format_ident!("{prefix}{depth}")
}

impl Ty {
    /// The Rust type (strings held as `S`).
    pub(super) fn rust(&self) -> TokenStream {
        match self {
            Ty::Int => quote!(WireInt),
            Ty::Str => quote!(S),
            Ty::Bool => quote!(bool),
            Ty::Bytes => quote!(Vec<u8>),
            Ty::Any => quote!(Untyped),
            Ty::OptStr => quote!(Option<S>),
            Ty::OptStrList => quote!(Option<StrList>),
            Ty::Enum(n) | Ty::Struct { name: n, generic: false, .. } => ident(n).into_token_stream(),
            Ty::ReqBlocks { grouped: true } => quote!(Vec<(S, ReqBlocksOf<S>)>),
            Ty::ReqBlocks { grouped: false } => quote!(Vec<(S, FlatReqBlocksOf<S>)>),
            Ty::List(e) => {
                let e = e.rust();
                quote!(Vec<#e>)
            }
            Ty::Tuple(items) => tuple(items.iter().map(Ty::rust)),
            Ty::Dict(k, v) => {
                let (k, v) = (k.rust(), v.rust());
                quote!(Vec<(#k, #v)>)
            }
            Ty::Struct { name, .. } => {
                let n = ident_with(name, "Of");
                quote!(#n<S>)
            }
        }
    }

    /// An expression decoding one value with `d` (a `&mut De`; `strictness` in scope).
    pub(super) fn decode(&self) -> TokenStream {
        match self {
            Ty::Int => quote!(d.int()?),
            Ty::Str => quote!(d.str()?),
            Ty::Bool => quote!(d.bool()?),
            Ty::Bytes => quote!(d.bytes()?),
            Ty::Any => quote!(d.any()?),
            Ty::OptStr => quote!(d.opt_str()?),
            Ty::OptStrList => quote!(d.opt_str_list()?),
            Ty::Enum(e) => {
                let members = enum_members_const(e);
                quote!(d.enum_member(&#members, strictness)?)
            }
            Ty::ReqBlocks { grouped: true } => quote!(d.str_dict(De::blocks_value)?),
            Ty::ReqBlocks { grouped: false } => quote!(d.str_dict(De::flat_blocks_value)?),
            Ty::List(e) => e.decode_list(),
            Ty::Tuple(items) => {
                let n = lit_usize(items.len());
                let parts = items.iter().enumerate().map(|(i, e)| {
                    let (i, x) = (lit_usize(i), e.decode());
                    quote!(d.item(#i, |d| Ok(#x))?)
                });
                let t = tuple(parts);
                quote!(d.tuple(#n, |d| Ok(#t))?)
            }
            Ty::Dict(k, v) => {
                let v = v.decode();
                match **k {
                    Ty::Str => quote!(d.str_dict(|d| Ok(#v))?),
                    _ => quote!(d.int_dict(|d| Ok(#v))?),
                }
            }
            Ty::Struct { name, generic, .. } => {
                let n = if *generic { ident_with(name, "Of") } else { ident(name) };
                quote!(#n::decode_in(d, strictness)?)
            }
        }
    }

    /// A list of this type.
    fn decode_list(&self) -> TokenStream {
        match self {
            Ty::Int => quote!(d.list_int()?),
            Ty::Str => quote!(d.list_str()?),
            Ty::List(e) if **e == Ty::Int => quote!(d.list_list_int()?),
            e => {
                let x = e.decode();
                quote!(d.list_of(|d| Ok(#x))?)
            }
        }
    }

    /// Statements writing `v` to `w`; `depth` names the loops' variables.
    pub(super) fn encode(&self, v: &Val, depth: usize) -> TokenStream {
        let (r, by_ref, copied) = (v.recv(), v.by_ref(), v.copied());
        match self {
            Ty::Int => quote!(w.int(#copied);),
            Ty::Str => quote!(w.str(#r.as_ref());),
            Ty::Bool => quote!(w.bool(#copied);),
            Ty::Bytes => quote!(w.bin(#by_ref);),
            Ty::Any | Ty::Struct { .. } => quote!(#r.encode_into(w);),
            Ty::OptStr => quote!(if let Some(s) = #by_ref { w.str(s.as_ref()) } else { w.nil() }),
            Ty::OptStrList => quote!(if let Some(l) = #by_ref { write_str_list(w, l) } else { w.nil() }),
            Ty::Enum(_) => quote!(w.sint(#r.0);),
            Ty::ReqBlocks { .. } => quote!(encode_req_blocks(w, #by_ref);),
            Ty::List(e) => e.encode_list(v, depth),
            Ty::Tuple(items) => {
                let n = lit_usize(items.len());
                let parts = items.iter().enumerate().map(|(i, e)| e.encode(&v.item(i), depth));
                quote!(w.array_len(#n); #(#parts)*)
            }
            Ty::Dict(k, x) => {
                let (ki, xi) = (var("k", depth), var("x", depth));
                let kb = k.encode(&Val::reference(&ki), depth + 1);
                let xb = x.encode(&Val::reference(&xi), depth + 1);
                quote!(w.map_len(#r.len()); for (#ki, #xi) in #r.iter() { #kb #xb })
            }
        }
    }

    /// Statements writing `v`, a list of this type.
    fn encode_list(&self, v: &Val, depth: usize) -> TokenStream {
        let by_ref = v.by_ref();
        match self {
            Ty::Int => quote!(w.int_list(#by_ref);),
            Ty::Str => quote!(str_list(w, #by_ref);),
            Ty::List(e) if **e == Ty::Int => quote!(int_lists(w, #by_ref);),
            e => {
                let (r, xi) = (v.recv(), var("x", depth));
                let body = e.encode(&Val::reference(&xi), depth + 1);
                quote!(w.array_len(#r.len()); for #xi in #r.iter() { #body })
            }
        }
    }

    /// An upper bound of the encoded size of `v`, for the writer's first allocation (`any`: a guess).
    pub(super) fn len_hint(&self, v: &Val, depth: usize) -> TokenStream {
        let (r, by_ref) = (v.recv(), v.by_ref());
        match self {
            Ty::Int | Ty::Enum(_) => quote!(9),
            Ty::Bool => quote!(1),
            Ty::Any => quote!(16),
            Ty::Str => quote!((#r.as_ref().len() + 5)),
            Ty::Bytes => quote!((#r.len() + 5)),
            Ty::Struct { .. } => quote!(#r.encoded_len_hint()),
            Ty::OptStr => quote!(#r.as_ref().map_or(1, |s| s.as_ref().len() + 5)),
            Ty::OptStrList => quote!(#r.as_ref().map_or(1, str_list_buf_len)),
            Ty::ReqBlocks { .. } => quote!(req_blocks_len(#by_ref)),
            Ty::List(e) => match &**e {
                Ty::Int => quote!((5 + 9 * #r.len())),
                Ty::Str => quote!(str_list_len(#by_ref)),
                e => {
                    let xi = var("x", depth);
                    let h = e.len_hint(&Val::reference(&xi), depth + 1);
                    quote!((5 + #r.iter().map(|#xi| #h).sum::<usize>()))
                }
            },
            Ty::Tuple(items) => {
                let parts = items.iter().enumerate().map(|(i, e)| e.len_hint(&v.item(i), depth));
                quote!((1 #(+ #parts)*))
            }
            Ty::Dict(k, x) => {
                let (ki, xi) = (var("k", depth), var("x", depth));
                let kh = k.len_hint(&Val::reference(&ki), depth + 1);
                let xh = x.len_hint(&Val::reference(&xi), depth + 1);
                quote!((5 + #r.iter().map(|(#ki, #xi)| #kh + #xh).sum::<usize>()))
            }
        }
    }

    /// `v` (borrowed strings) with owned strings.
    pub(super) fn owned(&self, v: &Val, depth: usize) -> TokenStream {
        let r = v.recv();
        match self {
            Ty::Int | Ty::Bool | Ty::Enum(_) => v.copied(),
            t if !t.has_strings() => quote!(#r.clone()),
            Ty::Str => quote!(#r.to_string()),
            Ty::OptStr => quote!(#r.map(str::to_string)),
            Ty::ReqBlocks { .. } => quote!(#r.iter().map(|(k, b)| (k.to_string(), b.to_owned_blocks())).collect()),
            Ty::List(e) => {
                let xi = var("x", depth);
                let o = e.owned(&Val::reference(&xi), depth + 1);
                quote!(#r.iter().map(|#xi| #o).collect())
            }
            Ty::Tuple(items) => tuple(items.iter().enumerate().map(|(i, e)| e.owned(&v.item(i), depth))),
            Ty::Dict(k, x) => {
                let (ki, xi) = (var("k", depth), var("x", depth));
                let ko = k.owned(&Val::reference(&ki), depth + 1);
                let xo = x.owned(&Val::reference(&xi), depth + 1);
                quote!(#r.iter().map(|(#ki, #xi)| (#ko, #xo)).collect())
            }
            Ty::Struct { .. } => quote!(#r.to_owned_message()),
            // Holds strings, but owned ones.
            Ty::OptStrList | Ty::Bytes | Ty::Any => quote!(#r.clone()),
        }
    }

    /// The value a field holds when absent: the literal of `Revision::fallback_value` (its spec default, or for
    /// a required field the neutral value of its type), or for a type without one (a struct, a tuple) its
    /// neutral value.
    pub(super) fn default_value(
        &self,
        fallback: Option<&Literal>,
        enums: &BTreeMap<String, EnumDef>,
    ) -> Result<TokenStream, GenerateError> {
        Ok(match (self, fallback) {
            (Ty::Str, Some(Literal::Str(s))) if s.is_empty() => quote!(S::default()),
            (Ty::Int, Some(Literal::Int(n))) => int_expr(*n)?,
            (Ty::List(_), Some(Literal::EmptyList))
            | (Ty::ReqBlocks { .. } | Ty::Dict(..), Some(Literal::EmptyDict)) => {
                quote!(Vec::new())
            }
            (Ty::OptStr | Ty::OptStrList, Some(Literal::None)) => quote!(None),
            (Ty::Enum(n), Some(Literal::Int(v))) => {
                let (name, value) = (ident(n), lit_int(&v.to_string()));
                match enums.get(n).and_then(|e| e.members.iter().find(|m| i128::from(m.value) == *v)) {
                    Some(m) => {
                        let m = ident(&m.name);
                        quote!(#name::#m)
                    }
                    None => quote!(#name(#value)),
                }
            }
            (Ty::Bool, Some(Literal::Bool(b))) => quote!(#b),
            (t, None) => t.neutral().ok_or_else(|| unsupported_default(t, None))?,
            (t, d) => return Err(unsupported_default(t, d)),
        })
    }

    /// The value of a type that has no literal for it (`None`: an enum has none).
    fn neutral(&self) -> Option<TokenStream> {
        Some(match self {
            Ty::Int => quote!(WireInt::ZERO),
            Ty::Str => quote!(S::default()),
            Ty::Bool => quote!(false),
            Ty::Any => quote!(Untyped::Nil),
            Ty::OptStr | Ty::OptStrList => quote!(None),
            Ty::Bytes | Ty::List(_) | Ty::Dict(..) | Ty::ReqBlocks { .. } => quote!(Vec::new()),
            Ty::Tuple(items) => tuple(items.iter().map(Ty::neutral).collect::<Option<Vec<_>>>()?),
            Ty::Struct { .. } => quote!(Default::default()),
            Ty::Enum(_) => return None,
        })
    }

    /// Whether `v` equals `default` (`omit_defaults` leaves such a field out; a conversion can drop it).
    pub(super) fn is_default(&self, v: &Val, default: &Literal) -> Result<TokenStream, GenerateError> {
        let r = v.recv();
        Ok(match (self, default) {
            (Ty::Str, Literal::Str(s)) if s.is_empty() => quote!(#r.as_ref().is_empty()),
            (Ty::Int, Literal::Int(n)) => {
                let n = int_expr(*n)?;
                quote!(#r == #n)
            }
            (Ty::Enum(_), Literal::Int(n)) => {
                let n = lit_int(&n.to_string());
                quote!(#r.0 == #n)
            }
            (Ty::List(_), Literal::EmptyList) | (Ty::ReqBlocks { .. } | Ty::Dict(..), Literal::EmptyDict) => {
                quote!(#r.is_empty())
            }
            (Ty::OptStr | Ty::OptStrList, Literal::None) => quote!(#r.is_none()),
            (Ty::Bool, Literal::Bool(b)) => quote!(#r == #b),
            (t, d) => return Err(unsupported_default(t, Some(d))),
        })
    }

    /// The expression turning `v` (owned strings, of this type) into type `to`; `fallible` adds `?` where the
    /// conversion can fail.
    pub(super) fn convert(&self, to: &Ty, v: &Val, fallible: bool) -> Result<TokenStream, GenerateError> {
        let r = v.recv();
        Ok(match (self, to) {
            (Ty::Enum(a), Ty::Enum(b)) if a == b => quote!(#r),
            (a, b) if a == b => quote!(#r.clone()),
            (Ty::ReqBlocks { grouped: true }, Ty::ReqBlocks { grouped: false }) if fallible => {
                quote!(flatten_req_blocks(&#r)?)
            }
            (Ty::ReqBlocks { grouped: false }, Ty::ReqBlocks { grouped: true }) => quote!(group_req_blocks(&#r)),
            (a, b) => return Err(GenerateError::NoConversion { from: format!("{a:?}"), to: format!("{b:?}") }),
        })
    }
}

fn unsupported_default(t: &Ty, d: Option<&Literal>) -> GenerateError {
    GenerateError::UnsupportedDefault { default: format!("{d:?}"), shape: format!("{t:?}") }
}

/// A `WireInt` of `n`.
fn int_expr(n: i128) -> Result<TokenStream, GenerateError> {
    if n >= 0 && n <= u64::MAX as i128 {
        let n = lit_int(&n.to_string());
        Ok(quote!(WireInt::from_u64(#n)))
    } else if n >= i64::MIN as i128 {
        let n = lit_int(&n.to_string());
        Ok(quote!(WireInt::from_i64(#n)))
    } else {
        Err(GenerateError::DefaultOutOfRange(n))
    }
}
