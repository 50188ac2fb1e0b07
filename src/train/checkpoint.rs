//! Durable training runs. A checkpoint is a directory `<run>/checkpoints/step-<n>/` holding every
//! file the run needs to go on (policy weights, optimiser state, replay buffer, `state.json`);
//! `<run>/checkpoints/latest` names the newest complete one. The directory is written first,
//! under a temporary name, then renamed into place, and only then is `latest` replaced (itself
//! written to a temporary file and renamed). A run killed at any moment therefore leaves
//! `latest` naming a complete checkpoint, and loses at most the steps since it.
//!
//! Every checkpoint carries a `MANIFEST` of its files' SHA-256 sums (written last, before the
//! rename) and a copy of the run's recipe; resuming checks both, so a corrupt file or an edited
//! recipe is an error naming it rather than a silently different run.
//!
//! Randomness needs no saved state: each step's generator is seeded from the run's seed and the
//! step number ([`step_seed`]), so a resumed run draws exactly what an uninterrupted one does.

use std::path::{Path, PathBuf};

use super::recipe::{Recipe, differing_keys};
use crate::checksum::{manifest, parse_manifest, sha256_hex};
use crate::error::{Error, Result, TrainError};
use crate::io::{read_file, write_atomic};

const LATEST: &str = "latest";
/// The checksums of a checkpoint's files.
pub(crate) const MANIFEST: &str = "MANIFEST";
/// The copy of the run's recipe in each checkpoint, checked on `--resume`.
pub(crate) const RECIPE_COPY: &str = "recipe.toml";
/// Complete checkpoints kept besides the newest (older ones are deleted).
const KEEP_OLDER: usize = 1;

/// The seed of step `step` of a run seeded with `seed`, worker `worker` (SplitMix64 finaliser of
/// the three mixed together: nearby inputs give unrelated seeds).
pub fn step_seed(seed: u64, step: u64, worker: u64) -> u64 {
    let mut z = seed
        .wrapping_add(step.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(worker.wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The lock file of a run directory, held for as long as a run writes there.
const LOCK: &str = ".lock";

/// An exclusive hold on a run directory: a second `train` on the same `--out` fails at once
/// instead of interleaving its checkpoints with the first's. The operating system drops the lock
/// when the process ends, however it ends, so a killed run leaves nothing to clean up.
#[derive(Debug)]
pub struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    /// Take the lock of `run_dir`, creating the directory if needed.
    pub fn acquire(run_dir: &Path) -> Result<RunLock> {
        crate::io::create_dir(run_dir)?;
        let path = run_dir.join(LOCK);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(RunLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(TrainError::Locked {
                path: path.display().to_string(),
            }
            .into()),
            Err(std::fs::TryLockError::Error(e)) => Err(io(&path, e)),
        }
    }
}

/// The checkpoints of one run.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    dir: PathBuf,
}

impl Checkpoints {
    /// Checkpoints under `<run_dir>/checkpoints`.
    pub fn new(run_dir: &Path) -> Checkpoints {
        Checkpoints {
            dir: run_dir.join("checkpoints"),
        }
    }

    /// The newest complete checkpoint: its step and directory. `None` when there is none.
    pub fn latest(&self) -> Result<Option<(u64, PathBuf)>> {
        let pointer = self.dir.join(LATEST);
        let text = match std::fs::read_to_string(&pointer) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(pointer.display().to_string(), e)),
        };
        let name = text.trim();
        let step = parse_step(name).ok_or_else(|| TrainError::Corrupt {
            path: pointer.display().to_string(),
            message: format!("names \"{name}\", not a checkpoint (step-<n>)"),
        })?;
        let path = self.dir.join(name);
        if !path.is_dir() {
            return Err(TrainError::Corrupt {
                path: pointer.display().to_string(),
                message: format!("names {}, which does not exist", path.display()),
            }
            .into());
        }
        Ok(Some((step, path)))
    }

    /// Write checkpoint `step`: `fill` writes the files into the directory it is given; the
    /// checkpoint becomes the latest only once all of them are written.
    pub fn save(&self, step: u64, fill: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        let name = format!("step-{step}");
        let tmp = self.dir.join(format!(".{name}.tmp{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| io(&tmp, e))?;
        if let Err(e) = fill(&tmp).and_then(|()| write_manifest(&tmp)) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        let path = self.dir.join(&name);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| io(&path, e))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        write_atomic(&self.dir.join(LATEST), format!("{name}\n").as_bytes())?;
        self.prune(step)?;
        Ok(path)
    }

    /// Delete all but the newest checkpoints and any temporary directory a killed run left.
    fn prune(&self, newest: u64) -> Result<()> {
        let mut older = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(|e| io(&self.dir, e))? {
            let entry = entry.map_err(|e| io(&self.dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(".step-") && entry.path().is_dir() {
                let _ = std::fs::remove_dir_all(entry.path());
            } else if let Some(step) = parse_step(&name).filter(|&s| s < newest) {
                older.push((step, entry.path()));
            }
        }
        older.sort_unstable_by_key(|o| std::cmp::Reverse(o.0));
        for (_, path) in older.into_iter().skip(KEEP_OLDER) {
            std::fs::remove_dir_all(&path).map_err(|e| io(&path, e))?;
        }
        Ok(())
    }
}

/// Write `MANIFEST` with the sums of every other file in `dir`.
fn write_manifest(dir: &Path) -> Result<()> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let path = entry.map_err(|e| io(dir, e))?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name != MANIFEST && path.is_file() {
            files.push((name, std::fs::read(&path).map_err(|e| io(&path, e))?));
        }
    }
    write_atomic(&dir.join(MANIFEST), manifest(&files).as_bytes())
}

/// Check a checkpoint against its `MANIFEST`: every listed file present with its sum.
pub(crate) fn verify(dir: &Path) -> Result<()> {
    let path = dir.join(MANIFEST);
    let corrupt = |path: &Path, message: String| TrainError::Corrupt {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
    let entries = parse_manifest(&text)
        .ok_or_else(|| corrupt(&path, "not `<sha256>  <file>` lines".into()))?;
    for (name, hex) in entries {
        let file = dir.join(&name);
        let bytes = std::fs::read(&file).map_err(|e| io(&file, e))?;
        if sha256_hex(&bytes) != hex {
            return Err(corrupt(
                &file,
                "checksum mismatch: the file is corrupt or was edited".into(),
            )
            .into());
        }
    }
    Ok(())
}

/// Write the run's recipe into checkpoint directory `dir`.
pub(crate) fn write_recipe(dir: &Path, recipe: &Recipe) -> Result<()> {
    let text = toml::to_string(recipe).map_err(|e| Error::serialise("the recipe", e))?;
    write_atomic(&dir.join(RECIPE_COPY), text.as_bytes())
}

/// Refuse to resume with a recipe that differs from the checkpoint's in anything but `steps`.
pub(crate) fn check_recipe(dir: &Path, recipe: &Recipe) -> Result<()> {
    let path = dir.join(RECIPE_COPY);
    let shown = path.display().to_string();
    let text = String::from_utf8(read_file(&path)?).map_err(|e| TrainError::Corrupt {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let keys = differing_keys(&Recipe::parse(&text, &shown)?, recipe);
    if keys.is_empty() {
        return Ok(());
    }
    Err(TrainError::RecipeChanged {
        path: shown,
        keys: keys.join(", "),
    }
    .into())
}

fn parse_step(name: &str) -> Option<u64> {
    name.strip_prefix("step-")?.parse().ok()
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::io(path.display().to_string(), e)
}
