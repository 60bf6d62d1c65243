//! The control tuples: the family's tags (element 0 of a tuple message) as an open newtype, and each revision's
//! control tuples as one enum matched by element 0, as the receiver matches them.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::emit::{doc, ident, lit_bytes, lit_str, lit_usize, py_bytes, upper_snake, width};
use super::model::Message;
use super::structs::{constructor_name, of_s};

fn tag_const(message: &str) -> Ident {
    format_ident!("{}", upper_snake(message))
}

/// `ControlTag` with a constant for every tag of the family (nothing when it has none).
pub(super) fn control_tag(tags: &[(String, Vec<u8>)]) -> TokenStream {
    if tags.is_empty() {
        return quote!();
    }
    let docs = doc(
        width(0),
        "The tag in element 0 of a control tuple: a MessagePack bin the receiver compares (a str with the same \
         letters does not match). An open newtype: a constant for every tag any revision defines, named after its \
         message, and any other bytes representable, so a report can show what a peer sent.",
    );
    let consts = tags.iter().map(|(m, t)| {
        let d = format!(" Element 0 of `{m}`: `{}`.", py_bytes(t));
        let (c, b) = (tag_const(m), lit_bytes(t));
        quote!(#[doc = #d] pub const #c: ControlTag = ControlTag(Cow::Borrowed(#b));)
    });
    let len = lit_usize(tags.len());
    let all = tags.iter().map(|(m, _)| {
        let (c, s) = (tag_const(m), lit_str(m));
        quote!((ControlTag::#c, #s))
    });
    quote! {
        #docs
        #[derive(Clone, PartialEq, Eq, Hash)]
        pub struct ControlTag(pub Cow<'static, [u8]>);

        impl ControlTag {
            #(#consts)*

            /// Every tag any revision defines, with the message it starts.
            pub const ALL: [(ControlTag, &'static str); #len] = [#(#all),*];

            /// The tag's bytes.
            pub fn as_bytes(&self) -> &[u8] {
                &self.0
            }

            /// The message this tag starts, if some revision defines it.
            pub fn message(&self) -> Option<&'static str> {
                Self::ALL.iter().find(|(t, _)| t == self).map(|(_, m)| *m)
            }

            /// Element 0 of a payload, when the payload starts with an array whose first element is a bin.
            pub fn first_of(bytes: &[u8]) -> Option<ControlTag> {
                first_bin_in_array(bytes).map(|b| ControlTag(Cow::Owned(b.to_vec())))
            }
        }

        impl fmt::Debug for ControlTag {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&py_bytes_repr(&self.0))
            }
        }

        impl fmt::Display for ControlTag {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    }
}

/// A revision's control tuples (`tagged`, in module order) as one enum (nothing when it has none).
pub(super) fn control_msg(tagged: &[&Message]) -> TokenStream {
    let Some(first) = tagged.first() else { return quote!() };
    let generic = tagged.iter().any(|m| m.generic());
    let eq = if tagged.iter().all(|m| m.is_eq()) { quote!(, Eq) } else { quote!() };
    let head = if generic { quote!(ControlMsgOf<S>) } else { quote!(ControlMsg) };
    let docs = doc(
        width(1),
        &format!(
            "A control tuple of this revision, matched to its message by element 0 (its [`ControlTag`]) as the \
             receiver matches it. A payload whose element 0 is no tag of this revision decodes as `{}`, whose \
             error then says what is wrong.",
            first.name
        ),
    );
    let variants = tagged.iter().map(|m| {
        let d = format!(" Element 0 is `{}`.", py_bytes(m.tag().unwrap_or_default()));
        let (v, ty) = (ident(&m.name), of_s(m));
        quote!(#[doc = #d] #v(#ty),)
    });
    let impls = control_msg_impls(tagged, first, generic);
    quote! {
        #docs
        #[derive(Clone, Debug, PartialEq #eq)]
        pub enum #head {
            #(#variants)*
        }

        #impls
    }
}

/// The aliases, `decode` (by element 0, else as the first message) and `encode`.
fn control_msg_impls(tagged: &[&Message], first: &Message, generic: bool) -> TokenStream {
    let (aliases, decode_head, encode_head, lt) = if generic {
        (
            quote! {
                /// A control tuple with owned strings.
                pub type ControlMsg = ControlMsgOf<String>;
                /// A control tuple borrowing its strings.
                pub type ControlMsgRef<'a> = ControlMsgOf<&'a str>;
            },
            quote!(impl<'a, S: WireStr<'a> + Default> ControlMsgOf<S>),
            quote!(impl<S: AsRef<str>> ControlMsgOf<S>),
            quote!('a),
        )
    } else {
        (
            quote! {
                /// The same type (no strings).
                pub type ControlMsgRef<'a> = ControlMsg;
            },
            quote!(impl ControlMsg),
            quote!(impl ControlMsg),
            quote!(),
        )
    };
    let arms = tagged[1..].iter().map(|m| {
        let (c, ty, v) = (tag_const(&m.name), constructor_name(m), ident(&m.name));
        quote!(Some(t) if t == ControlTag::#c => #ty::decode(bytes).map(Self::#v),)
    });
    let (first_ty, first_v) = (constructor_name(first), ident(&first.name));
    let encodes = tagged.iter().map(|m| {
        let v = ident(&m.name);
        quote!(Self::#v(m) => m.encode(),)
    });
    quote! {
        #aliases

        #decode_head {
            /// Decodes as the message element 0 names.
            pub fn decode(bytes: &#lt [u8]) -> Result<Self, DecodeError> {
                match ControlTag::first_of(bytes) {
                    #(#arms)*
                    _ => #first_ty::decode(bytes).map(Self::#first_v),
                }
            }
        }

        #encode_head {
            /// Encodes the message.
            pub fn encode(&self) -> Vec<u8> {
                match self {
                    #(#encodes)*
                }
            }
        }
    }
}
