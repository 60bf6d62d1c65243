//! A message's struct and everything generated for it, in a revision's module: the struct (generic over how it
//! holds strings when it holds any) with its `…Ref` alias, the field list and required mask, `Default`, a
//! constructor from the required fields, the decoder, the owned copy of a borrowed message, and the encoder.

use std::collections::BTreeMap;

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::emit::{doc, ident, ident_with, lit_bytes, lit_int, lit_str, lit_usize, py_bytes, upper_snake, width};
use super::model::{Kind, Message};
use super::ty::Val;
use super::GenerateError;
use crate::spec::EnumDef;

/// Everything generated for `m`, first defined in `revision`.
pub(super) fn message(
    m: &Message,
    revision: &str,
    enums: &BTreeMap<String, EnumDef>,
) -> Result<TokenStream, GenerateError> {
    let def = definition(m, revision);
    let consts = constants(m);
    let default = default_impl(m, revision, enums)?;
    let new = constructor(m);
    let decode = decoder(m, revision);
    let owned = owned_impl(m);
    let encode = encoder(m, revision)?;
    Ok(quote!(#def #consts #default #new #decode #owned #encode))
}

/// The type with strings held as `S`: `…Of<S>`, or the plain name when it holds none.
pub(super) fn of_s(m: &Message) -> TokenStream {
    let c = constructor_name(m);
    if m.generic() {
        quote!(#c<S>)
    } else {
        quote!(#c)
    }
}

/// The struct's own name: `…Of` when generic.
pub(super) fn constructor_name(m: &Message) -> Ident {
    if m.generic() {
        ident_with(&m.name, "Of")
    } else {
        ident(&m.name)
    }
}

/// An impl's generic parameters: `<S{bound}>` when generic.
fn params(m: &Message, bound: TokenStream) -> TokenStream {
    if m.generic() {
        quote!(<S #bound>)
    } else {
        quote!()
    }
}

/// The struct, its docs, and the owned and borrowed aliases.
fn definition(m: &Message, revision: &str) -> TokenStream {
    let n = &m.name;
    let strings =
        if m.generic() { format!(" Strings held as `S`: see [`{n}`] and [`{n}Ref`].") } else { String::new() };
    let mut docs = doc(
        width(1),
        &format!("{} (`{revision}` `[structs.{n}]`, {}).{strings}", m.doc.trim_end_matches('.'), m.source),
    );
    if m.kind == Kind::Tuple {
        let consts: Vec<String> = (m.fields.iter().enumerate())
            .filter_map(|(i, f)| f.constant.as_ref().map(|c| format!("element {i} is always `{}`", py_bytes(c))))
            .collect();
        let tail =
            if consts.is_empty() { String::new() } else { format!("; {} (checked, not stored)", consts.join(", ")) };
        docs.extend(doc(width(1), &format!("On the wire: an array of exactly {} elements{tail}.", m.fields.len())));
    }
    let eq = if m.is_eq() { quote!(, Eq) } else { quote!() };
    let fields = m.stored().map(|f| {
        let req = match &f.default {
            None => "Required.".to_string(),
            Some(_) => format!("Default `{}`.", f.default_display),
        };
        let (d, name, ty) = (doc(width(2), &format!("{} {req}", f.doc)), ident(&f.name), f.ty.rust());
        quote!(#d pub #name: #ty)
    });
    let of_s = of_s(m);
    let aliases = aliases(m);
    quote! {
        #docs
        #[derive(Clone, Debug, PartialEq #eq)]
        pub struct #of_s { #(#fields,)* }
        #aliases
    }
}

fn aliases(m: &Message) -> TokenStream {
    let n = &m.name;
    let (name, of, r) = (ident(n), ident_with(n, "Of"), ident_with(n, "Ref"));
    if m.generic() {
        let owned = doc(width(1), &format!("{n} with owned strings."));
        let borrowed =
            doc(width(1), &format!("{n} with strings borrowed from the decoded bytes (no allocation per string)."));
        quote!(#owned pub type #name = #of<String>; #borrowed pub type #r<'a> = #of<&'a str>;)
    } else {
        let same = doc(width(1), &format!("{n} (it holds no strings: the same type as [`{n}`])."));
        quote!(#same pub type #r<'a> = #name;)
    }
}

/// `FIELDS`, `REQUIRED` and a tuple's `TAG`.
fn constants(m: &Message) -> TokenStream {
    let (p, of_s) = (params(m, quote!()), of_s(m));
    let elements = if m.kind == Kind::Tuple { " (a tuple's elements)" } else { "" };
    let fields_doc = format!(" Wire names in declaration order{elements}.");
    let (len, names) = (lit_usize(m.fields.len()), m.fields.iter().map(|f| lit_str(&f.name)));
    let mask = lit_int(&format!("{:#b}", m.required_mask()));
    let tag = m.tag().map(|t| {
        let d = format!(" The tag in element 0 (`{}`).", py_bytes(t));
        let c = format_ident!("{}", upper_snake(&m.name));
        quote!(#[doc = #d] pub const TAG: ControlTag = ControlTag::#c;)
    });
    quote! {
        impl #p #of_s {
            #[doc = #fields_doc]
            pub const FIELDS: [&'static str; #len] = [#(#names),*];
            /// Bit `i` set: field `i` has no default and must be on the wire.
            pub const REQUIRED: u64 = #mask;
            #tag
        }
    }
}

fn default_impl(m: &Message, revision: &str, enums: &BTreeMap<String, EnumDef>) -> Result<TokenStream, GenerateError> {
    let (p, of_s, c) = (params(m, quote!(: Default)), of_s(m), constructor_name(m));
    let names = m.stored().map(|f| ident(&f.name));
    let values: Vec<TokenStream> = (m.stored())
        .map(|f| f.ty.default_value(f.fallback.as_ref(), enums).map_err(|e| e.in_field(revision, &m.name, &f.name)))
        .collect::<Result<_, _>>()?;
    Ok(quote! {
        impl #p Default for #of_s {
            /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
            fn default() -> Self {
                #c { #(#names: #values,)* }
            }
        }
    })
}

/// `new` from the required fields.
fn constructor(m: &Message) -> TokenStream {
    let (p, of_s, c) = (params(m, quote!(: Default)), of_s(m), constructor_name(m));
    let required: Vec<_> = m.stored().filter(|f| f.required).collect();
    let names: Vec<Ident> = required.iter().map(|f| ident(&f.name)).collect();
    let types = required.iter().map(|f| f.ty.rust());
    quote! {
        impl #p #of_s {
            /// The message with these required fields and every other at its default.
            pub fn new(#(#names: #types),*) -> Self {
                #c { #(#names,)* ..Self::default() }
            }
        }
    }
}

/// `decode`, `decode_with` and `decode_in`.
fn decoder(m: &Message, revision: &str) -> TokenStream {
    let of_s = of_s(m);
    let (head, lt, de_lt) = if m.generic() {
        (quote!(impl<'a, S: WireStr<'a> + Default> #of_s), quote!('a), quote!('a))
    } else {
        (quote!(impl #of_s), quote!(), quote!('_))
    };
    let body = match m.kind {
        Kind::Map => map_decoder(m),
        Kind::Tuple => tuple_decoder(m),
    };
    let what = format!(" Decodes as msgspec does with {revision}'s class.");
    quote! {
        #head {
            #[doc = #what]
            pub fn decode(bytes: &#lt [u8]) -> Result<Self, DecodeError> {
                Self::decode_with(bytes, Strictness::Msgspec)
            }

            /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
            pub fn decode_with(bytes: &#lt [u8], strictness: Strictness) -> Result<Self, DecodeError> {
                let mut d = De::new(bytes)?;
                let v = Self::decode_in(&mut d, strictness)?;
                d.finish()?;
                Ok(v)
            }

            /// Decodes one value at the reader's position (inside a frame).
            pub(crate) fn decode_in(d: &mut De<#de_lt>, strictness: Strictness) -> Result<Self, DecodeError> {
                #body
            }
        }
    }
}

/// A map's fields in any order, each at most once (the last arm takes the last field).
fn map_decoder(m: &Message) -> TokenStream {
    let last = m.fields.len().saturating_sub(1);
    let arms = m.fields.iter().enumerate().map(|(i, f)| {
        let pat = if i == last { quote!(_) } else { lit_int(&i.to_string()) };
        let (name, value) = (ident(&f.name), f.ty.decode());
        quote!(#pat => v.#name = #value,)
    });
    let none = if m.fields.is_empty() { quote!(_ => {}) } else { quote!() };
    quote! {
        let mut v = Self::default();
        let mut seen = 0u64;
        d.struct_map(&Self::FIELDS, |d, i| {
            seen |= 1 << i;
            match i {
                #(#arms)*
                #none
            }
            Ok(())
        })?;
        let missing = Self::REQUIRED & !seen;
        if missing != 0 {
            return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
        }
        Ok(v)
    }
}

/// A tuple's elements in order (its constants checked, not stored).
fn tuple_decoder(m: &Message) -> TokenStream {
    let items = m.fields.iter().enumerate().map(|(i, f)| {
        let i = lit_usize(i);
        match &f.constant {
            Some(c) => {
                let c = lit_bytes(c);
                quote!(d.item(#i, |d| d.const_bytes(#c))?;)
            }
            None => {
                let (name, value) = (ident(&f.name), f.ty.decode());
                quote!(let #name = d.item(#i, |d| Ok(#value))?;)
            }
        }
    });
    let (c, names) = (constructor_name(m), m.stored().map(|f| ident(&f.name)));
    quote! {
        d.tuple_struct(Self::FIELDS.len())?;
        #(#items)*
        d.leave();
        Ok(#c { #(#names),* })
    }
}

/// `to_owned_message` of a generic struct's borrowed form.
fn owned_impl(m: &Message) -> TokenStream {
    if !m.generic() {
        return quote!();
    }
    let (name, r, c) = (ident(&m.name), ident_with(&m.name, "Ref"), constructor_name(m));
    let names = m.stored().map(|f| ident(&f.name));
    let values = m.stored().map(|f| f.ty.owned(&Val::field("self", &f.name), 0));
    quote! {
        impl #r<'_> {
            /// The same message with owned strings.
            pub fn to_owned_message(&self) -> #name {
                #c { #(#names: #values,)* }
            }
        }
    }
}

/// `encode`, `encoded_len_hint` and `encode_into`.
fn encoder(m: &Message, revision: &str) -> Result<TokenStream, GenerateError> {
    let (p, of_s) = (params(m, quote!(: AsRef<str>)), of_s(m));
    let what = match (m.kind, m.omit_defaults) {
        (Kind::Tuple, _) => "an array of every element",
        (Kind::Map, true) => "declaration order, defaults omitted",
        (Kind::Map, false) => "declaration order",
    };
    let what = format!(" Encodes as msgspec does ({what}).");
    let hints = m.fields.iter().map(|f| {
        let v = Val::field("self", &f.name);
        match &f.constant {
            Some(c) => lit_int(&(c.len() + 5).to_string()),
            None if m.kind == Kind::Tuple => f.ty.len_hint(&v, 0),
            None => {
                let (key, hint) = (lit_int(&(f.name.len() + 1).to_string()), f.ty.len_hint(&v, 0));
                quote!(#key + #hint)
            }
        }
    });
    let body = match m.kind {
        Kind::Tuple => encode_tuple(m),
        Kind::Map => encode_map(m, revision)?,
    };
    Ok(quote! {
        impl #p #of_s {
            #[doc = #what]
            pub fn encode(&self) -> Vec<u8> {
                let mut w = Writer::with_capacity(self.encoded_len_hint());
                self.encode_into(&mut w);
                w.into_bytes()
            }

            pub(crate) fn encoded_len_hint(&self) -> usize {
                5 #(+ #hints)*
            }

            /// Appends the encoding to `w`.
            pub fn encode_into(&self, w: &mut Writer) {
                #body
            }
        }
    })
}

fn encode_tuple(m: &Message) -> TokenStream {
    let items = m.fields.iter().map(|f| match &f.constant {
        Some(c) => {
            let c = lit_bytes(c);
            quote!(w.bin(#c);)
        }
        None => f.ty.encode(&Val::field("self", &f.name), 0),
    });
    quote!(w.array_len(Self::FIELDS.len()); #(#items)*)
}

/// A map's fields in declaration order; under `omit_defaults` a field at its default is left out.
fn encode_map(m: &Message, revision: &str) -> Result<TokenStream, GenerateError> {
    let mut items = vec![];
    for f in &m.fields {
        let v = Val::field("self", &f.name);
        let (key, value) = (lit_str(&f.name), f.ty.encode(&v, 0));
        let write = quote!(w.str(#key); #value n += 1;);
        items.push(match &f.default {
            Some(lit) if m.omit_defaults => {
                let at_default = f.ty.is_default(&v, lit).map_err(|e| e.in_field(revision, &m.name, &f.name))?;
                quote!(if !(#at_default) { #write })
            }
            _ => write,
        });
    }
    Ok(quote! {
        let h = w.begin_struct_map(Self::FIELDS.len());
        let mut n = 0;
        #(#items)*
        w.finish_struct_map(h, n);
    })
}
