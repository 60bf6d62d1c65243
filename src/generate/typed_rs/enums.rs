//! The family's int enums as open newtypes: a named constant for every member any revision defines (with the
//! spec's terminal flags), and any other value representable, so a report can show what a peer sent.

use proc_macro2::TokenStream;
use quote::quote;

use super::emit::{doc, enum_members_const, ident, lit_int, lit_str, lit_usize, width};
use crate::spec::EnumDef;

/// The newtype of enum `name` and its impls.
pub(super) fn int_enum(name: &str, e: &EnumDef) -> TokenStream {
    let n = ident(name);
    let docs = doc(
        width(0),
        &format!(
            "{} An open newtype: named constants for every member any revision defines (the terminal flags are the \
             spec's), and any other value representable, so a report can show what a peer sent. Each revision's \
             members: `{}` in its module.",
            e.doc,
            enum_members_const(name)
        ),
    );
    let members = members(name, e);
    let unknown = lit_str(&format!("{name}({{}})"));
    quote! {
        #docs
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct #n(pub i64);

        impl #n {
            #members
        }

        impl fmt::Debug for #n {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, #unknown, self.0),
                }
            }
        }

        impl fmt::Display for #n {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }

        impl EnumMember for #n {
            fn from_wire(v: i64) -> Self {
                #n(v)
            }
        }
    }
}

/// The member constants, `ALL`, and the lookups over them.
fn members(name: &str, e: &EnumDef) -> TokenStream {
    let n = ident(name);
    let consts = e.members.iter().map(|m| {
        let terminal = if m.terminal == Some(true) { "terminal" } else { "not terminal" };
        let d = doc(width(1), &format!("{} (since {}; {terminal}).", m.doc.trim_end_matches('.'), m.since));
        let (c, v) = (ident(&m.name), lit_int(&m.value.to_string()));
        quote!(#d pub const #c: #n = #n(#v);)
    });
    let len = lit_usize(e.members.len());
    let all = e.members.iter().map(|m| {
        let (c, s) = (ident(&m.name), lit_str(&m.name));
        quote!((#n::#c, #s))
    });
    let non_terminal: Vec<TokenStream> = (e.members.iter().filter(|m| m.terminal == Some(false)))
        .map(|m| {
            let c = ident(&m.name);
            quote!(#n::#c)
        })
        .collect();
    let terminal = if non_terminal.is_empty() { quote!(true) } else { quote!(!matches!(self, #(#non_terminal)|*)) };
    quote! {
        #(#consts)*

        /// Every member any revision defines, with its name, in value order of declaration.
        pub const ALL: [(#n, &'static str); #len] = [#(#all),*];

        /// The member's name, if some revision defines this value.
        pub fn name(self) -> Option<&'static str> {
            Self::ALL.iter().find(|(s, _)| *s == self).map(|(_, n)| *n)
        }

        /// Whether some revision defines this value.
        pub fn is_known(self) -> bool {
            self.name().is_some()
        }

        /// Whether this value ends a reply stream (every value the spec does not mark non-terminal does).
        pub fn is_terminal(self) -> bool {
            #terminal
        }
    }
}
