//! A family's generated file (`push.rs`, `pull.rs`): its enums and control tags, one module per revision (the
//! revision's constants, its structs — written where their code first appears, re-exported after — its control
//! tuples, and dispatch by message name), the `newest…` aliases, and the table of every revision.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::emit::{doc, enum_members_const, file, ident, inner_doc, lit_bytes, lit_str, lit_usize, width};
use super::enums::int_enum;
use super::model::{FamilyModel, RevisionModel};
use super::structs::message;
use super::tags::{control_msg, control_tag};
use super::GenerateError;

/// The family's file.
pub(super) fn family_file(fam: &FamilyModel) -> Result<String, GenerateError> {
    let f = &fam.name;
    let about = inner_doc(
        width(0),
        &format!("The {f} family's typed messages, one module per revision (generated from `spec/{f}/`)."),
    );
    let enums = fam.enums.iter().map(|(name, e)| int_enum(name, e));
    let tags = control_tag(&fam.tags);
    let modules: Vec<TokenStream> = fam.revisions.iter().map(|r| module(fam, r)).collect::<Result<_, _>>()?;
    let table = table(fam);
    Ok(file(
        f,
        quote! {
            #about
            #![allow(clippy::all, missing_docs, unused_variables, unused_mut, unused_imports, unused_parens)]

            use std::borrow::Cow;
            use std::fmt;

            use crate::codec::{py_bytes_repr, DecodeError};
            use crate::msgpack::{WireInt, Writer};
            use crate::typed::blocks::{encode_req_blocks, req_blocks_len};
            use crate::typed::de::{
                first_bin_in_array, int_lists, str_list, str_list_buf_len, str_list_len, write_str_list, De,
                EnumMember, WireStr,
            };
            use crate::typed::{FlatReqBlocksOf, GeneratedRevision, ReqBlocksOf, StrList, Strictness, Untyped};

            #(#enums)*
            #tags
            #(#modules)*
            #table
        },
    ))
}

/// One revision's module.
fn module(fam: &FamilyModel, rev: &RevisionModel) -> Result<TokenStream, GenerateError> {
    let releases = if rev.releases.is_empty() { "unreleased".to_string() } else { rev.releases.join(", ") };
    let docs = doc(width(0), &format!("`{}` ({releases}): {}", rev.revision, rev.summary));
    let m = ident(&rev.module);
    let consts = constants(fam, rev);
    let mut structs = vec![];
    for e in &rev.structs {
        structs.push(match &e.since {
            Some(earlier) => {
                let d = format!(" Unchanged since `{earlier}`.");
                let (from, names) = (ident(&super::module_name(earlier)), reexported(&e.message));
                quote!(#[doc = #d] pub use super::#from::{#(#names),*};)
            }
            None => message(&e.message, &rev.revision, &fam.enums)?,
        });
    }
    let tagged: Vec<_> = rev.structs.iter().map(|e| &e.message).filter(|m| m.tag().is_some()).collect();
    let control = control_msg(&tagged);
    let dispatch = dispatch(rev);
    Ok(quote! {
        #docs
        pub mod #m {
            use super::*;

            #consts
            #(#structs)*
            #control
            #dispatch
        }
    })
}

/// The names a later revision re-exports.
fn reexported(m: &super::model::Message) -> Vec<proc_macro2::Ident> {
    let n = &m.name;
    let mut names = vec![ident(n)];
    if m.generic() {
        names.push(format_ident!("{n}Of"));
    }
    names.push(format_ident!("{n}Ref"));
    names
}

/// `REVISION`, `GENERATION`, the members of each enum, the raw replies.
fn constants(fam: &FamilyModel, rev: &RevisionModel) -> TokenStream {
    let revision = lit_str(&rev.revision);
    let cite = match (fam.name.as_str(), rev.generation) {
        ("push", 1) => "`spec/PROTOCOL.md#gen1`".to_string(),
        ("push", _) => "`spec/PROTOCOL.md#gen2`".to_string(),
        (f, _) => format!("within the {f} family, `spec/README.md`"),
    };
    let generation_doc = format!(" Generation ({cite}).");
    let generation = lit_usize(rev.generation as usize);
    let enums = rev.enums.iter().map(|(name, members)| {
        let (c, n, len) = (enum_members_const(name), ident(name), lit_usize(members.len()));
        let members = members.iter().map(|m| ident(m));
        let d = format!(" The members of `{name}` this revision defines (a decoder rejects any other value).");
        quote! {
            #[doc = #d]
            pub const #c: [#n; #len] = [#(#n::#members),*];
        }
    });
    let raw = rev.raw.iter().map(|(name, bytes)| {
        let d = format!(" Raw reply `{name}` (not MessagePack).");
        let (c, b) = (format_ident!("{}", name.to_ascii_uppercase()), lit_bytes(bytes.as_bytes()));
        quote!(#[doc = #d] pub const #c: &[u8] = #b;)
    });
    quote! {
        /// The spec revision of this module.
        pub const REVISION: &str = #revision;
        #[doc = #generation_doc]
        pub const GENERATION: u32 = #generation;
        #(#enums)*
        #(#raw)*
    }
}

/// `round_trip`, `decode_and_drop`, `fields` and `required` by message name, for checks over every revision.
fn dispatch(rev: &RevisionModel) -> TokenStream {
    let names: Vec<_> = rev.structs.iter().map(|e| lit_str(&e.message.name)).collect();
    let owned: Vec<_> = rev.structs.iter().map(|e| ident(&e.message.name)).collect();
    let borrowed: Vec<_> = rev.structs.iter().map(|e| format_ident!("{}Ref", e.message.name)).collect();
    quote! {
        /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
        pub fn round_trip(message: &str, bytes: &[u8], strictness: Strictness) -> Option<Result<Vec<u8>, DecodeError>> {
            Some(match message {
                #(#names => #borrowed::decode_with(bytes, strictness).map(|v| v.encode()),)*
                _ => return None,
            })
        }

        /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
        pub fn decode_and_drop(message: &str, bytes: &[u8], borrowed: bool) -> Option<Result<(), DecodeError>> {
            Some(match (message, borrowed) {
                #(
                    (#names, false) => #owned::decode(bytes).map(drop),
                    (#names, true) => #borrowed::decode(bytes).map(drop),
                )*
                _ => return None,
            })
        }

        /// The field list of `message`, in declaration order.
        pub fn fields(message: &str) -> Option<&'static [&'static str]> {
            Some(match message {
                #(#names => &#owned::FIELDS,)*
                _ => return None,
            })
        }

        /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
        pub fn required(message: &str) -> Option<u64> {
            Some(match message {
                #(#names => #owned::REQUIRED,)*
                _ => return None,
            })
        }
    }
}

/// The `newest…` aliases and `REVISIONS`.
fn table(fam: &FamilyModel) -> TokenStream {
    let newest = ident(&fam.newest().module);
    let generations = fam.newest_of_generations().into_iter().map(|(g, m)| {
        let (d, alias, m) =
            (format!(" The newest revision of generation {g}."), format_ident!("newest_gen{g}"), ident(m));
        quote!(#[doc = #d] pub use #m as #alias;)
    });
    let released = ident(&fam.released);
    let table_doc = format!(" Every revision of the {} family, oldest first.", fam.name);
    let len = lit_usize(fam.revisions.len());
    let rows = fam.revisions.iter().map(|r| {
        let (rev, m) = (lit_str(&r.revision), ident(&r.module));
        let messages = r.structs.iter().map(|e| lit_str(&e.message.name));
        quote! {
            GeneratedRevision {
                revision: #rev,
                messages: &[#(#messages),*],
                round_trip: #m::round_trip,
                decode_and_drop: #m::decode_and_drop,
                fields: #m::fields,
                required: #m::required,
            }
        }
    });
    quote! {
        /// The newest revision.
        pub use #newest as newest;
        #(#generations)*
        /// The newest revision with a release (what a user of released software speaks).
        pub use #released as newest_released;
        #[doc = #table_doc]
        pub const REVISIONS: [GeneratedRevision; #len] = [#(#rows),*];
    }
}
