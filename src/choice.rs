//! Enums a user picks by name (`--precision`, `--framework`, `--optimizer`, `--memory-format`):
//! parsing that lists every name when it fails, and printing by name.
//!
//! A type takes part by having `ALL` (every value, in the order the names are listed), `name`
//! (the name on the command line) and `parse` (a name, with any aliases, to a value); the
//! [`by_name`] macro then gives it `FromStr` and `Display`.

/// `FromStr` (the error lists `$t::ALL`'s names) and `Display` (the name) for a choice `$t`.
macro_rules! by_name {
    ($t:ty) => {
        impl std::str::FromStr for $t {
            type Err = String;

            /// A value by name, as `parse` reads it; the error lists the names.
            fn from_str(name: &str) -> Result<$t, String> {
                <$t>::parse(name).ok_or_else(|| {
                    let names: Vec<&str> = <$t>::ALL.iter().map(|v| v.name()).collect();
                    format!("expected one of {}", names.join(", "))
                })
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

pub(crate) use by_name;
