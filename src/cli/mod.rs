//! The `topoplace` command line: one file per subcommand, each with its arguments and its `run`.
//! Every command parses, calls the library, prints; errors are one line on stderr and a non-zero
//! exit.

#[macro_use]
pub mod out;
pub mod allocator;
pub mod bench;
pub mod cluster;
pub mod common;
pub mod compare;
pub mod experiment;
pub mod fidelity;
pub mod group;
pub mod hybrid_place;
pub mod hybrid_plan;
pub mod import;
pub mod info;
pub mod place;
pub mod policy;
pub mod selfplay;
pub mod sfb;
pub mod simulate;
pub mod solve;
pub mod topology;
pub mod train;
pub mod zoo;
