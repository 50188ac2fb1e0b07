//! Unit tests of the engine: the event loop against closed forms and brute force, and the
//! makespan bound against full simulations.

mod bound;
mod engine;
