//! CSV import (in progress).
use std::path::Path;

use crate::error::{Error, Result};
use crate::graph::Graph;

pub fn import_csv(path: &Path) -> Result<Graph> {
    Err(Error::Other(format!(
        "{}: CSV import is not built yet",
        path.display()
    )))
}
