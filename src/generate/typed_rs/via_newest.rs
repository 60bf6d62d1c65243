//! The push family's conversions between each revision's messages and the newest revision's (`via_newest.rs`):
//! `from_newest` and `to_newest` where a message's code is first written, and per revision the codecs the
//! sans-IO cores speak it with (`…_VIA_NEWEST`), with a lookup by revision name for each message.

use std::collections::BTreeMap;

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::emit::{doc, enum_members_const, file, ident, inner_doc, lit_str, upper_snake, width};
use super::model::{FamilyModel, Message, RevisionModel, Ty};
use super::structs::constructor_name;
use super::ty::Val;
use super::GenerateError;
use crate::spec::EnumDef;

/// The file of `fam` (the push family).
pub(super) fn file_of(fam: &FamilyModel) -> Result<String, GenerateError> {
    let newest = fam.newest().messages();
    let mut modules = vec![];
    // (message, revision, module) for every message the newest revision also has.
    let mut via: Vec<(&str, &str, &str)> = vec![];
    for rev in &fam.revisions {
        let shared: Vec<&Message> = (rev.messages().iter().map(|e| &e.message))
            .filter(|m| newest.iter().any(|n| n.message.name == m.name))
            .collect();
        if shared.is_empty() {
            continue;
        }
        modules.push(module(fam, rev, &shared)?);
        via.extend(shared.iter().map(|m| (m.name.as_str(), rev.revision.as_str(), rev.module.as_str())));
    }
    let lookups = newest.iter().map(|e| lookup(&e.message.name, &via));
    let about = inner_doc(
        width(0),
        "Every push revision's messages to and from the newest revision's (generated from `spec/push/`): the \
         conversions, and per revision the codecs the sans-IO cores speak it with.",
    );
    Ok(file(
        &fam.name,
        quote! {
            #about
            #![allow(clippy::all, missing_docs)]

            use super::push::*;
            use crate::codec::convert::ConvertError;
            use crate::msgpack::WireInt;
            use crate::typed::blocks::{flatten_req_blocks, group_req_blocks};
            use crate::typed::ViaNewest;

            #(#modules)*
            #(#lookups)*
        },
    ))
}

/// One revision's module: the conversions of the messages it writes first, the codecs of all it shares with
/// the newest revision.
fn module(fam: &FamilyModel, rev: &RevisionModel, shared: &[&Message]) -> Result<TokenStream, GenerateError> {
    let newest = fam.newest();
    let mut conversions = vec![];
    for e in rev.messages().iter().filter(|e| e.since.is_none()) {
        if let Some(n) = newest.messages().iter().find(|n| n.message.name == e.message.name) {
            conversions.push(convert_impl(&e.message, &n.message, &rev.revision, &fam.enums)?);
        }
    }
    let codecs = shared.iter().map(|m| codec(&m.name));
    let docs = doc(width(0), &format!("`{}` through the newest revision's structs.", rev.revision));
    let m = ident(&rev.module);
    Ok(quote! {
        #docs
        pub mod #m {
            use super::*;
            use super::super::push::#m::*;

            #(#conversions)*
            #(#codecs)*
        }
    })
}

fn codec_const(message: &str) -> Ident {
    format_ident!("{}_VIA_NEWEST", upper_snake(message))
}

/// `…_VIA_NEWEST`: the message of this revision through the newest revision's struct.
fn codec(message: &str) -> TokenStream {
    let (c, n) = (codec_const(message), ident(message));
    let docs = doc(
        width(1),
        &format!(
            "`{message}` of this revision through the newest revision's struct (what the sans-IO cores hold): the \
             generated decoder and encoder of this revision, with `to_newest` / `from_newest`."
        ),
    );
    quote! {
        #docs
        pub const #c: ViaNewest<newest::#n> = ViaNewest {
            revision: REVISION,
            decode: |b| #n::decode(b).map(|m| m.to_newest()),
            encode: |n| #n::from_newest(n).map(|m| m.encode()).map_err(|e| e.in_revision(REVISION)),
        };
    }
}

/// `…_via_newest(revision)`: the codec of `message` in the revision of that name.
fn lookup(message: &str, via: &[(&str, &str, &str)]) -> TokenStream {
    let f = format_ident!("{}_via_newest", upper_snake(message).to_ascii_lowercase());
    let (c, n) = (codec_const(message), ident(message));
    let d = format!(
        " `{message}` of `revision` through the newest revision's struct (`None`: no generated revision of that \
         name has it)."
    );
    let arms = via.iter().filter(|(m, _, _)| *m == message).map(|(_, rev, module)| {
        let (rev, module) = (lit_str(rev), ident(module));
        quote!(#rev => #module::#c,)
    });
    quote! {
        #[doc = #d]
        pub fn #f(revision: &str) -> Option<ViaNewest<newest::#n>> {
            Some(match revision {
                #(#arms)*
                _ => return None,
            })
        }
    }
}

/// `from_newest` and `to_newest`: this revision's struct from and to the newest revision's, field by field by
/// name. A field only the newest has must hold its default (or, required there, its neutral value) to be said
/// here; an enum value must be one this revision defines; grouped block lists become flat ones when this
/// revision's are flat. A pair of types with no rule is an error naming the field.
fn convert_impl(
    m: &Message,
    newest: &Message,
    revision: &str,
    enums: &BTreeMap<String, EnumDef>,
) -> Result<TokenStream, GenerateError> {
    let from = from_newest(m, newest, revision, enums)?;
    let to = to_newest(m, newest, revision)?;
    let n = ident(&m.name);
    Ok(quote!(impl #n { #from #to }))
}

fn from_newest(
    m: &Message,
    newest: &Message,
    revision: &str,
    enums: &BTreeMap<String, EnumDef>,
) -> Result<TokenStream, GenerateError> {
    let checks = from_newest_checks(m, newest, revision)?;
    let mut fields = vec![];
    for f in &m.fields {
        let name = ident(&f.name);
        let value = match newest.field(&f.name) {
            None => {
                f.ty.default_value(f.fallback.as_ref(), enums).map_err(|e| e.in_field(revision, &m.name, &f.name))?
            }
            Some(w) => (w.ty.convert(&f.ty, &Val::field("n", &f.name), true))
                .map_err(|e| e.in_field(revision, &m.name, &f.name))?,
        };
        fields.push(quote!(#name: #value,));
    }
    let (n, c) = (ident(&m.name), constructor_name(m));
    let docs = doc(
        width(2),
        &format!(
            "This revision's `{n}` holding what the newest revision's `n` holds. `Err` names what cannot be said \
             here: a field this revision lacks that is off its default, an enum value it does not define, more \
             than one block group where block lists are flat."
        ),
    );
    Ok(quote! {
        #docs
        pub fn from_newest(n: &newest::#n) -> Result<Self, ConvertError> {
            #checks
            Ok(#c { #(#fields)* })
        }
    })
}

/// What `from_newest` refuses: a field this revision lacks off its default, an enum value it does not define.
fn from_newest_checks(m: &Message, newest: &Message, revision: &str) -> Result<TokenStream, GenerateError> {
    let mut checks = vec![];
    for f in newest.fields.iter().filter(|f| m.field(&f.name).is_none()) {
        let v = Val::field("n", &f.name);
        let at_default = match &f.fallback {
            Some(lit) => f.ty.is_default(&v, lit),
            None => Err(GenerateError::NoFallback),
        }
        .map_err(|e| e.in_field(revision, &m.name, &f.name))?;
        let (name, field) = (lit_str(&f.name), ident(&f.name));
        checks.push(quote! {
            if !(#at_default) {
                return Err(ConvertError::Lacking { field: #name.into(), value: format!("{:?}", n.#field) });
            }
        });
    }
    for f in m.fields.iter().filter(|f| newest.field(&f.name).is_some()) {
        if let Ty::Enum(e) = &f.ty {
            let (members, name, field) = (enum_members_const(e), lit_str(e), ident(&f.name));
            checks.push(quote! {
                if !#members.contains(&n.#field) {
                    return Err(ConvertError::NotAMember { enum_name: #name.into(), value: n.#field.to_string() });
                }
            });
        }
    }
    Ok(quote!(#(#checks)*))
}

fn to_newest(m: &Message, newest: &Message, revision: &str) -> Result<TokenStream, GenerateError> {
    let n = ident(&m.name);
    let mut sets = vec![];
    for f in &m.fields {
        if let Some(w) = newest.field(&f.name) {
            let value = (f.ty.convert(&w.ty, &Val::field("self", &f.name), false))
                .map_err(|e| e.in_field(revision, &m.name, &f.name))?;
            let name = ident(&f.name);
            sets.push(quote!(m.#name = #value;));
        }
    }
    let docs = doc(
        width(2),
        &format!(
            "The newest revision's `{n}` holding this message's values; the fields this revision lacks at their \
             defaults."
        ),
    );
    Ok(quote! {
        #docs
        pub fn to_newest(&self) -> newest::#n {
            let mut m = newest::#n::default();
            #(#sets)*
            m
        }
    })
}
